"""What makes a connection read-only, and keeps passwords out of what is shown, for
the optional sources that read another service's database: Nova's cell databases
(:mod:`scheduler.catalog.cell_db`) and Placement's
(:mod:`scheduler.catalog.placement_db`), both through
:mod:`scheduler.catalog.dbapi`.

Never a write: every connection is made read-only before it is used
(``SET SESSION TRANSACTION READ ONLY`` on MySQL/MariaDB,
``default_transaction_read_only`` on PostgreSQL, ``PRAGMA query_only`` on SQLite),
so even credentials that could write cannot. URLs are shown with the password
masked, and error texts are scrubbed of it. The drivers are the ``celldb`` extra,
imported only when a connection is configured.
"""
from __future__ import annotations

import re
from typing import Any

SESSION_SETUP = {
    'mysql': ('SET SESSION TRANSACTION READ ONLY',),
    'sqlite': ('PRAGMA query_only = ON',),
    # PostgreSQL gets default_transaction_read_only as a connection option.
    'postgresql': (),
}
_URL_USERINFO_RE = re.compile(r'(//[^/:@\s]*:)[^/@\s]+@')


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for logs and errors)."""
    return _URL_USERINFO_RE.sub(r'\1***@', url)


def error_line(text: str, password: str | None) -> str:
    """The first line of a driver's error ``text`` (at most 300 characters), with any
    URL's password and ``password`` masked."""
    lines = text.strip().splitlines()
    line = mask_url(lines[0][:300]) if lines else ''
    return line.replace(password, '***') if password else line


def connect_args(backend: str, driver: str, connect_timeout: int,
                 query_timeout: int) -> dict[str, Any]:
    if backend == 'postgresql':
        return {'connect_timeout': connect_timeout,
                'options': f'-c default_transaction_read_only=on '
                           f'-c statement_timeout={query_timeout * 1000}'}
    if backend == 'mysql':
        # In autocommit, as PostgreSQL's (scheduler/catalog/dbapi.py): a statement on
        # its own is one round trip, a transaction begun by hand.
        args: dict[str, Any] = {'connect_timeout': connect_timeout, 'autocommit': True}
        if driver in ('pymysql', 'mysqldb'):
            args['read_timeout'] = query_timeout
        return args
    return {'timeout': connect_timeout}
