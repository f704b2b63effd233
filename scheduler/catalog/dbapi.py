"""A read-only database connection straight through its DB-API driver, without
SQLAlchemy: for the provider view's reader, which a busy worker runs every second.

Importing SQLAlchemy's core costs a process about 25 MB resident, measured in
the benchmark's environment, and a worker of the provider view at 50,000
providers has 200 MB in all (doc/performance.md). The reader sends a handful of
fixed SELECTs through the driver's own cursors anyway; what SQLAlchemy gave it
(parsing the URL, connecting, a kept connection checked before use, errors) is
here. The cell-database source, which reads far less often, keeps SQLAlchemy
(:mod:`scheduler.catalog.readonly_db`).

The same URLs (``postgresql[+psycopg2]://``, ``mysql[+pymysql|+mysqldb]://``,
``sqlite:///path``; query arguments are passed to the driver), the same
read-only sessions and timeouts as :class:`~scheduler.catalog.readonly_db.ReadOnlyDatabase`.
Each :meth:`DirectDatabase.connect` is one repeatable-read transaction, rolled
back when done.
"""
from __future__ import annotations

import importlib
import re
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from scheduler.catalog.readonly_db import SESSION_SETUP, connect_args, error_line
from scheduler.exceptions import ConfigurationError, SchedulerError

#: Per backend, its default driver and the drivers this module connects with.
_DRIVERS = {'postgresql': ('psycopg2', {'psycopg2': 'psycopg2'}),
            'mysql': ('mysqldb', {'mysqldb': 'MySQLdb', 'pymysql': 'pymysql'}),
            'sqlite': ('pysqlite', {'pysqlite': 'sqlite3'})}
#: A kept connection older than this is opened again (as SQLAlchemy's pool_recycle).
RECYCLE_SECONDS = 3600.0
_PARAMETER_RE = re.compile(r'(?<![:\w]):(\w+)')


@dataclass(frozen=True)
class DatabaseURL:
    backend: str
    driver: str
    username: str | None
    password: str | None = field(repr=False)
    host: str | None
    port: int | None
    database: str | None
    query: dict[str, str]

    @property
    def label(self) -> str:
        """The URL with its password masked (for logs and errors)."""
        user = self.username or ''
        if self.password is not None:
            user += ':***'
        at = f'{user}@' if user else ''
        port = f':{self.port}' if self.port is not None else ''
        query = f'?{urllib.parse.urlencode(self.query)}' if self.query else ''
        return (f'{self.backend}+{self.driver}://{at}{self.host or ""}{port}/'
                f'{self.database or ""}{query}')


def parse_url(url: str, option: str) -> DatabaseURL:
    """``dialect[+driver]://user:password@host:port/database?args``; ConfigurationError
    naming ``option`` (never quoting the URL, password included) when it is not
    one this module can open."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        parts = None
    if parts is None or not parts.scheme or '//' not in url:
        raise ConfigurationError(f'{option}: an entry is not a SQLAlchemy URL '
                                 f'(dialect+driver://user:password@host/database)')
    backend, _, driver = parts.scheme.partition('+')
    if backend not in _DRIVERS or backend not in SESSION_SETUP:
        raise ConfigurationError(
            f'{option}: only MySQL/MariaDB, PostgreSQL and SQLite can be opened read-only '
            f'here, not {backend!r}')
    default, known = _DRIVERS[backend]
    driver = driver or default
    if driver not in known:
        raise ConfigurationError(f'{option}: {backend} through {driver!r} is not supported '
                                 f'here; use one of {", ".join(sorted(known))}')
    path = parts.path[1:] if parts.path.startswith('/') else parts.path
    unquote = urllib.parse.unquote
    return DatabaseURL(
        backend, driver,
        unquote(parts.username) if parts.username is not None else None,
        unquote(parts.password) if parts.password is not None else None,
        parts.hostname, port, unquote(path) or None,
        dict(urllib.parse.parse_qsl(parts.query)))


class DirectConnection:
    """One read transaction: its backend's and driver's names, the driver's own
    connection (``raw``, for cursors of its own), and small queries with ``:name``
    parameters (a list or tuple value stands for a parenthesised list)."""

    def __init__(self, url: DatabaseURL, raw: Any):
        self.backend, self.driver, self.raw = url.backend, url.driver, raw
        self._mark = '?' if url.backend == 'sqlite' else '%s'

    def rows(self, query: str, parameters: dict[str, Any] | None = None) -> list[tuple]:
        statement, values = self._positional(query, parameters or {})
        cursor = self.raw.cursor()
        try:
            cursor.execute(statement, values) if values else cursor.execute(statement)
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            cursor.close()

    def one(self, query: str, parameters: dict[str, Any] | None = None) -> tuple:
        [row] = self.rows(query, parameters)
        return row

    def _positional(self, query: str, parameters: dict[str, Any]) -> tuple[str, list[Any]]:
        """``query`` with the driver's positional marks for the ``:names`` of
        ``parameters`` (any other ``:word`` is left as it is), and their values."""
        if not parameters:
            return query, []
        values: list[Any] = []

        def mark(match: re.Match[str]) -> str:
            if match.group(1) not in parameters:
                return match.group(0)
            value = parameters[match.group(1)]
            if isinstance(value, (list, tuple)):
                values.extend(value)
                return '(' + ', '.join([self._mark] * len(value)) + ')'
            values.append(value)
            return self._mark
        # With parameters, a format driver reads every % as the start of a mark.
        text = query.replace('%', '%%') if self._mark == '%s' else query
        return _PARAMETER_RE.sub(mark, text), values


class DirectDatabase:
    """One database, opened read-only, one connection kept and checked before each
    use; thread-compatible (one read at a time). Errors while reading are
    ``error`` (a :class:`SchedulerError`) with the password scrubbed."""

    def __init__(self, url: str, *, option: str, error: type[SchedulerError],
                 connect_timeout: int = 5, query_timeout: int = 30):
        self._option, self._error = option, error
        self._url = parse_url(url, option)
        self.label = self._url.label
        try:
            self._dbapi = importlib.import_module(_DRIVERS[self._url.backend][1][self._url.driver])
        except ImportError:
            # The celldb extra brings PyMySQL, not mysqlclient, which a bare mysql://
            # URL names (as SQLAlchemy reads it).
            hint = ('install mysqlclient, or name PyMySQL in the URL (mysql+pymysql://; '
                    'placement-scheduler[celldb] installs it)' if self._url.driver == 'mysqldb'
                    else 'install placement-scheduler[celldb]')
            raise ConfigurationError(
                f'{option} needs the database driver {self._url.driver}: {hint}') from None
        self._arguments = connect_args(self._url.backend, self._url.driver, connect_timeout,
                                       query_timeout)
        self._kept: Any = None
        self._opened_at = 0.0

    @contextmanager
    def connect(self) -> Iterator[DirectConnection]:
        """One read-only, repeatable-read transaction, rolled back when done."""
        try:
            raw = self._checked_out()
            try:
                yield DirectConnection(self._url, raw)
            finally:
                raw.rollback()
        except self._dbapi.Error as e:
            self._discard()
            detail = error_line(str(e), self._url.password)
            raise self._error(f'{type(e).__name__}: {detail}') from None

    def close(self) -> None:
        self._discard()

    def _checked_out(self) -> Any:
        if self._kept is not None and time.monotonic() - self._opened_at > RECYCLE_SECONDS:
            self._discard()
        if self._kept is not None:
            try:                      # as SQLAlchemy's pool_pre_ping: a dropped one is replaced
                self._begin(self._kept, ping=True)
                return self._kept
            except self._dbapi.Error:
                self._discard()
        raw = self._open()
        self._begin(raw, ping=False)
        self._kept, self._opened_at = raw, time.monotonic()
        return raw

    def _open(self) -> Any:
        url, arguments = self._url, dict(self._arguments)
        if url.backend == 'sqlite':
            raw = self._dbapi.connect(url.database or ':memory:', timeout=arguments['timeout'],
                                      check_same_thread=False, isolation_level=None)
        else:
            names = ({'database': 'dbname'} if url.backend == 'postgresql' else {})
            given = {'host': url.host, 'port': url.port, 'user': url.username,
                     'password': url.password, names.get('database', 'database'): url.database}
            arguments.update({k: v for k, v in given.items() if v is not None})
            arguments.update(url.query)
            raw = self._dbapi.connect(**arguments)
        try:
            if url.backend == 'postgresql':
                raw.set_session(isolation_level='REPEATABLE READ', readonly=True)
            _execute(raw, SESSION_SETUP[url.backend])
            if url.backend == 'mysql':
                _execute(raw, ('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ',))
                raw.commit()
        except BaseException:
            raw.close()
            raise
        return raw

    def _begin(self, raw: Any, *, ping: bool) -> None:
        if self._url.backend == 'sqlite':
            _execute(raw, ('BEGIN',))
        elif ping:
            _execute(raw, ('SELECT 1',))

    def _discard(self) -> None:
        kept, self._kept = self._kept, None
        if kept is not None:
            try:
                kept.close()
            except Exception:  # noqa: BLE001 - a connection that is gone is closed enough
                pass


def _execute(raw: Any, statements: Sequence[str]) -> None:
    cursor = raw.cursor()
    try:
        for statement in statements:
            cursor.execute(statement)
    finally:
        cursor.close()
