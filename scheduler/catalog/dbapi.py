"""A read-only database connection straight through its DB-API driver, without
SQLAlchemy: for the provider view's reader and the cell databases' readers.

Importing SQLAlchemy's core costs a process about 25 MB resident, measured in
the benchmark's environment (17 MB more than this module and psycopg2 with a
connection open, in a worker that has the rest of the service imported), and a
worker of the provider view at 50,000 providers has 200 MB in all
(doc/performance.md). The readers send a handful of fixed SELECTs through the
driver's own cursors anyway; what SQLAlchemy gave them (parsing the URL,
connecting, a kept connection checked before use, streaming a large result,
errors) is here.

The same URLs (``postgresql[+psycopg2]://``, ``mysql[+pymysql|+mysqldb]://``,
``sqlite:///path``; query arguments are passed to the driver), the same
read-only sessions and timeouts (:mod:`scheduler.catalog.readonly_db`).
Each :meth:`DirectDatabase.connect` is one repeatable-read transaction, rolled
back when done; :meth:`DirectDatabase.each_on_its_own` sends statements that need no
common snapshot, on PostgreSQL and MySQL/MariaDB one round trip each.
"""
from __future__ import annotations

import datetime
import importlib
import itertools
import re
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from scheduler.catalog.readonly_db import SESSION_SETUP, connect_args, error_line
from scheduler.exceptions import ConfigurationError, SchedulerError

#: Per backend, its default driver and the drivers this module connects with.
_DRIVERS = {'postgresql': ('psycopg2', {'psycopg2': 'psycopg2'}),
            'mysql': ('mysqldb', {'mysqldb': 'MySQLdb', 'pymysql': 'pymysql'}),
            'sqlite': ('pysqlite', {'pysqlite': 'sqlite3'})}
#: How a read's transaction begins on PostgreSQL, whose connections are in autocommit
#: (the statement psycopg2 sends for a read-only, repeatable-read session).
POSTGRESQL_BEGIN = 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY'
#: The same on MySQL/MariaDB, whose connections are in autocommit too (the session's
#: isolation level is set to repeatable read when it is opened).
MYSQL_BEGIN = 'START TRANSACTION READ ONLY'
#: The backends whose connections stay in autocommit, a read's transaction begun by hand.
_AUTOCOMMIT = ('postgresql', 'mysql')
#: The MySQL client's errors for a connection that is gone (CR_SERVER_GONE_ERROR,
#: CR_SERVER_LOST), for a driver that does not mark the connection closed.
_MYSQL_LOST = (2006, 2013)
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
    #: Whether the URL named its driver (``backend+driver://``).
    driver_named: bool = True

    @property
    def label(self) -> str:
        """The URL as given, with its password masked (for logs and errors)."""
        user = self.username or ''
        if self.password is not None:
            user += ':***'
        at = f'{user}@' if user else ''
        port = f':{self.port}' if self.port is not None else ''
        query = f'?{urllib.parse.urlencode(self.query)}' if self.query else ''
        scheme = f'{self.backend}+{self.driver}' if self.driver_named else self.backend
        return (f'{scheme}://{at}{self.host or ""}{port}/'
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
    driver_named = bool(driver)
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
        dict(urllib.parse.parse_qsl(parts.query)), driver_named)


@dataclass(frozen=True)
class Array:
    """A parameter value bound as one array (PostgreSQL's ``= ANY(:name)``), where a
    list or tuple stands for a parenthesised list of parameters."""

    values: Sequence[Any]


class DirectConnection:
    """One read transaction: its backend's and driver's names, the driver's own
    connection (``raw``, for cursors of its own), and queries with ``:name``
    parameters (a list or tuple value stands for a parenthesised list)."""

    def __init__(self, url: DatabaseURL, raw: Any):
        self.backend, self.driver, self.raw = url.backend, url.driver, raw
        #: Whether the transaction has ended (its server-side cursors with it).
        self.ended = False
        self._mark = '?' if url.backend == 'sqlite' else '%s'
        #: MySQL's server-side cursors whose results have not been read to the end.
        self._unfinished: list[Any] = []

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

    def timestamp(self, value: datetime.datetime) -> Any:
        return bound_timestamp(self.backend, value)

    def chunks(self, query: str, size: int, parameters: dict[str, Any] | None = None
               ) -> Iterator[list[tuple]]:
        """The rows of a large result, ``size`` at a time, through a server-side cursor
        where the driver has one: psycopg2 and PyMySQL otherwise receive the whole
        result when the query is sent, and at 50,000 providers the driver's copy of
        Placement's inventories alone took 50 MB of a worker's peak (the cells'
        compute nodes, their NUMA topologies kilobytes of text each, more)."""
        statement, values = self._positional(query, parameters or {})
        raw, driver = self.raw, self.driver
        if driver == 'psycopg2':
            # The connection is in autocommit, its transaction begun by hand
            # (DirectDatabase._begin): psycopg2 then declares a named cursor only WITH
            # HOLD, which inside that transaction is an ordinary one (closed below).
            cursor = raw.cursor(name=f'scheduler_read_{next(_CURSOR_NUMBERS)}',
                                withhold=True)
            cursor.itersize = size
        elif driver in ('pymysql', 'mysqldb'):
            cursors = importlib.import_module(
                'pymysql.cursors' if driver == 'pymysql' else 'MySQLdb.cursors')
            cursor = raw.cursor(cursors.SSCursor)
            self._unfinished.append(cursor)
        else:
            cursor = raw.cursor()   # SQLite's steps through the result as it is fetched
        try:
            cursor.execute(statement, values) if values else cursor.execute(statement)
            while rows := cursor.fetchmany(size):
                yield rows
        finally:
            # A generator given up and closed only after its transaction ended (kept
            # alive by a traceback, say): PostgreSQL dropped the cursor with the
            # transaction, and closing it now would fail, and abort whatever
            # transaction the connection is in by then. Left to the driver, it is freed.
            if not (self.ended and driver == 'psycopg2'):
                cursor.close()
            if cursor in self._unfinished:
                self._unfinished.remove(cursor)

    def finish_unbuffered(self) -> None:
        """Before the transaction ends: MySQL's server-side cursors still open (a read
        given up halfway, its generator kept alive by a traceback) closed, which reads
        the rest of each result off the connection. MySQL's protocol has no other way
        to end one; left to the ``ROLLBACK``, PyMySQL reads it with a warning and
        mysqlclient's C library refuses the statement (commands out of sync)."""
        while self._unfinished:
            self._unfinished.pop().close()

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
            values.append(list(value.values) if isinstance(value, Array) else value)
            return self._mark
        # With parameters, a format driver reads every % as the start of a mark.
        text = query.replace('%', '%%') if self._mark == '%s' else query
        return _PARAMETER_RE.sub(mark, text), values


def bound_timestamp(backend: str, value: datetime.datetime) -> Any:
    """``value`` (naive UTC) bound as the tables hold it: on SQLite, as the text
    SQLAlchemy writes for Nova and Placement, which sorts as time does."""
    if backend == 'sqlite':
        return value.strftime('%Y-%m-%d %H:%M:%S.%f')
    return value


#: Names of server-side cursors (unique within a connection's transaction).
_CURSOR_NUMBERS = itertools.count()


class DirectDatabase:
    """One database, opened read-only; thread-safe. With ``keep_connection`` (the
    default) one connection is kept and checked before each use, and a read while
    another holds it opens and closes its own rather than wait (as a SQLAlchemy pool
    of one with unbounded overflow); without, each read opens and closes its own.
    Errors while reading are ``error`` (a :class:`SchedulerError`) with the
    password scrubbed."""

    def __init__(self, url: str, *, option: str, error: type[SchedulerError],
                 connect_timeout: int = 5, query_timeout: int = 30,
                 keep_connection: bool = True):
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
        self._query_timeout = query_timeout
        self._keep = keep_connection
        self._kept: Any = None
        self._opened_at = 0.0
        self._kept_lock = threading.Lock()

    @contextmanager
    def connect(self) -> Iterator[DirectConnection]:
        """One read-only, repeatable-read transaction, rolled back when done."""
        kept = self._keep and self._kept_lock.acquire(blocking=False)
        raw = None
        try:
            try:
                raw = self._checked_out() if kept else self._opened()
                connection = DirectConnection(self._url, raw)
                try:
                    yield connection
                finally:
                    connection.ended = True
                    connection.finish_unbuffered()
                    self._end(raw)
            except self._dbapi.Error as e:
                if kept:
                    self._discard()
                raise self._failure(e) from None
        finally:
            if kept:
                self._kept_lock.release()
            elif raw is not None:
                _close(raw)

    @property
    def backend(self) -> str:
        return self._url.backend

    def timestamp(self, value: datetime.datetime) -> Any:
        return bound_timestamp(self._url.backend, value)

    def each_on_its_own(self, query: str, parameter_sets: Iterable[dict[str, Any]]
                        ) -> list[tuple]:
        """The rows of ``query`` for each set of parameters, each statement on its own:
        for reads whose rows need no common snapshot, made before every request.

        On PostgreSQL and MySQL/MariaDB, through the kept connection, a statement is one
        round trip: no transaction is begun and rolled back around it, and the
        connection is not checked first (a read in :meth:`connect` is three: the
        transaction's begin, which is the check, the statement, ``ROLLBACK``; each costs
        the server's CPU, on the database that Placement's claims or Nova's own writes
        wait for). A kept connection that turns out to be gone when used is opened again
        and the statement sent once more, as the check would have done. On SQLite, or
        while the kept connection is busy, the statements share one :meth:`connect`."""
        sets = list(parameter_sets)
        if (self._url.backend not in _AUTOCOMMIT or not self._keep
                or not self._kept_lock.acquire(blocking=False)):
            with self.connect() as connection:
                return [row for parameters in sets for row in connection.rows(query, parameters)]
        try:
            found: list[tuple] = []
            for parameters in sets:
                found.extend(self._autocommitted(query, parameters))
            return found
        finally:
            self._kept_lock.release()

    def _autocommitted(self, query: str, parameters: dict[str, Any]) -> list[tuple]:
        """Under the kept connection's lock: one statement outside a transaction."""
        sent_again = False
        while True:
            self._recycle_old()
            unchecked = self._kept is not None
            sent = time.monotonic()
            try:
                if self._kept is None:
                    self._kept, self._opened_at = self._open(), time.monotonic()
                return DirectConnection(self._url, self._kept).rows(query, parameters)
            except self._dbapi.Error as e:
                # Found gone at once, not after waiting out the query's timeout (which
                # the MySQL drivers report as a lost connection too): sending it again
                # would only wait as long once more.
                gone = (self._kept is not None and self._lost(self._kept, e)
                        and time.monotonic() - sent < self._query_timeout / 2)
                self._discard()
                if unchecked and gone and not sent_again:
                    sent_again = True
                    continue
                raise self._failure(e) from None

    def _lost(self, raw: Any, error: Exception) -> bool:
        """Whether ``error`` left ``raw`` gone (the server ended it) rather than only
        refused the statement."""
        if self._url.backend == 'postgresql':
            return bool(raw.closed)
        code = error.args[0] if error.args else None
        return not getattr(raw, 'open', True) or code in _MYSQL_LOST

    def _failure(self, error: Exception) -> SchedulerError:
        """A driver's ``error`` as this database's error, its password masked."""
        detail = error_line(str(error), self._url.password)
        return self._error(f'{type(error).__name__}: {detail}')

    def close(self) -> None:
        with self._kept_lock:
            self._discard()

    def _opened(self) -> Any:
        """A connection of this read's own, its transaction begun."""
        raw = self._open()
        try:
            self._begin(raw)
        except BaseException:
            _close(raw)
            raise
        return raw

    def _recycle_old(self) -> None:
        if self._kept is not None and time.monotonic() - self._opened_at > RECYCLE_SECONDS:
            self._discard()

    def _checked_out(self) -> Any:
        self._recycle_old()
        if self._kept is not None:
            try:                      # as SQLAlchemy's pool_pre_ping: a dropped one is replaced
                self._begin(self._kept)
                return self._kept
            except self._dbapi.Error:
                self._discard()
        raw = self._open()
        self._begin(raw)
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
                # Outside a transaction unless one is begun by hand (_begin): a
                # statement on its own is then one round trip. psycopg2's own
                # transactions would have it send two SETs at each switch between them.
                raw.autocommit = True
            _execute(raw, SESSION_SETUP[url.backend])
            if url.backend == 'mysql':
                # The isolation of the transactions _begin starts by hand. The session is
                # in autocommit (connect_args), and what SET SESSION gives it (read-only,
                # this) holds for a statement on its own too.
                _execute(raw, ('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ',))
        except BaseException:
            raw.close()
            raise
        return raw

    def _begin(self, raw: Any) -> None:
        """A read's transaction begun, by hand (every connection is in autocommit); on a
        kept connection this is also its check (one that is gone fails here), as
        SQLAlchemy's pool_pre_ping. PostgreSQL's is read-only and repeatable read
        whatever the session's defaults."""
        if self._url.backend == 'postgresql':
            _execute(raw, (POSTGRESQL_BEGIN,))
        elif self._url.backend == 'mysql':
            _execute(raw, (MYSQL_BEGIN,))
        else:
            _execute(raw, ('BEGIN',))

    def _end(self, raw: Any) -> None:
        """A read's transaction rolled back. PostgreSQL's by a statement of its own:
        psycopg2's ``rollback()`` does nothing on a connection in autocommit, where
        PyMySQL's and sqlite3's send ``ROLLBACK`` (sqlite3's only while a transaction is
        open, so an error that already ended it is not hidden by a second one)."""
        if self._url.backend == 'postgresql':
            _execute(raw, ('ROLLBACK',))
        else:
            raw.rollback()

    def _discard(self) -> None:
        kept, self._kept = self._kept, None
        if kept is not None:
            _close(kept)


def _close(raw: Any) -> None:
    try:
        raw.close()
    except Exception:  # noqa: BLE001 - a connection that is gone is closed enough
        pass


def _execute(raw: Any, statements: Sequence[str]) -> None:
    cursor = raw.cursor()
    try:
        for statement in statements:
            cursor.execute(statement)
    finally:
        cursor.close()
