"""Read-only SQL connections, for the optional sources that read another service's
database: Nova's cell databases (:mod:`scheduler.catalog.cell_db`) and Placement's
(:mod:`scheduler.catalog.placement_db`).

Never a write: every connection is made read-only before it is used
(``SET SESSION TRANSACTION READ ONLY`` on MySQL/MariaDB,
``default_transaction_read_only`` on PostgreSQL, ``PRAGMA query_only`` on SQLite),
so even credentials that could write cannot. Connections are not pooled (one per
read), except for readers that read before requests (``keep_connection``). URLs
are shown with the password masked, and error texts are scrubbed of it. SQLAlchemy
and the drivers are the ``celldb`` extra, imported only when a connection is
configured. The provider view's reader, which reads every second or
so, keeps one connection and talks to the driver alone
(:mod:`scheduler.catalog.dbapi`), with the same sessions and timeouts.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from scheduler.exceptions import ConfigurationError, SchedulerError

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


class ReadOnlyDatabase:
    """One database, opened read-only; thread-compatible (one read at a time).

    ``option`` names the setting the URL came from (``[group] name``), for errors;
    errors while reading are ``error`` (a :class:`SchedulerError`) with the
    password scrubbed.
    """

    def __init__(self, url: str, *, option: str, error: type[SchedulerError],
                 connect_timeout: int = 5, query_timeout: int = 30,
                 keep_connection: bool = False):
        sqlalchemy = sqlalchemy_module(option)
        self._option = option
        self._error = error
        try:
            parsed = sqlalchemy.engine.make_url(url)
        except Exception:  # noqa: BLE001 - its message would quote the URL, password included
            # Not quoted: what cannot be parsed cannot be masked either.
            raise ConfigurationError(
                f'{option}: an entry is not a SQLAlchemy URL '
                f'(dialect+driver://user:password@host/database)') from None
        self.label = parsed.render_as_string(hide_password=True)
        self._password = parsed.password
        backend = parsed.get_backend_name()
        if backend not in SESSION_SETUP:
            raise ConfigurationError(
                f'{option}: {self.label}: only MySQL/MariaDB, PostgreSQL and '
                f'SQLite can be opened read-only here, not {backend!r}')
        self._setup = SESSION_SETUP[backend]
        args = connect_args(backend, parsed.get_driver_name(), connect_timeout, query_timeout)
        if keep_connection:
            # A read that a request waits for: connecting (and setting the session up)
            # took 4 of the 24 ms of a services read at 10,000 services, and 6.4 of the
            # 6.9 ms of a read of 10 candidates' compute nodes. One connection is kept;
            # reads at the same time (requests of one worker) open and close their own
            # rather than wait for it. A connection the server dropped is replaced at
            # the next read (SQLAlchemy invalidates it).
            self._engine = sqlalchemy.create_engine(
                parsed, pool_size=1, max_overflow=-1, pool_recycle=3600, connect_args=args)
        else:
            # Not pooled: one connection per read.
            self._engine = sqlalchemy.create_engine(
                parsed, poolclass=sqlalchemy.pool.NullPool, connect_args=args)
        sqlalchemy.event.listen(self._engine, 'connect', self._read_only_session)
        # Errors of the driver's own cursor (readers that fetch through it for speed).
        dbapi = getattr(self._engine.dialect, 'loaded_dbapi', None) or self._engine.dialect.dbapi
        self._driver_errors: tuple[type[BaseException], ...] = (
            (dbapi.Error,) if dbapi is not None and hasattr(dbapi, 'Error') else ())

    def _read_only_session(self, dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            for statement in self._setup:
                cursor.execute(statement)
        finally:
            cursor.close()

    @contextmanager
    def connect(self) -> Iterator[Any]:
        """A read-only SQLAlchemy connection (rolled back when done)."""
        sqlalchemy = sqlalchemy_module(self._option)
        try:
            with self._engine.connect() as connection:
                try:
                    yield connection
                finally:
                    connection.rollback()
        except (sqlalchemy.exc.SQLAlchemyError, *self._driver_errors) as e:
            detail = error_line(str(getattr(e, 'orig', None) or e), self._password)
            raise self._error(f'{type(e).__name__}: {detail}') from None

    def close(self) -> None:
        self._engine.dispose()


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
        args: dict[str, Any] = {'connect_timeout': connect_timeout}
        if driver in ('pymysql', 'mysqldb'):
            args['read_timeout'] = query_timeout
        return args
    return {'timeout': connect_timeout}


def sqlalchemy_module(option: str) -> Any:
    """SQLAlchemy, or a ConfigurationError naming ``option`` when it is not installed."""
    try:
        import sqlalchemy
        import sqlalchemy.engine
        import sqlalchemy.exc
        import sqlalchemy.pool
    except ImportError:
        raise ConfigurationError(
            f'{option} needs SQLAlchemy and a database driver: install '
            f'placement-scheduler[celldb]') from None
    return sqlalchemy
