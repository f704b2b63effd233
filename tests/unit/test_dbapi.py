"""The provider view's read-only connection through the driver alone (scheduler/catalog/dbapi.py).

The reads themselves run against real PostgreSQL, MariaDB and SQLite in the
functional tests (test_provider_view.py, test_placement_db_chunks.py); here, what
an operator's URL becomes, what a query's parameters become, and that a password
never shows.
"""
from __future__ import annotations

import importlib
import sqlite3

import pytest

from scheduler.catalog import dbapi
from scheduler.catalog.dbapi import (
    MYSQL_BEGIN,
    POSTGRESQL_BEGIN,
    Array,
    DirectConnection,
    DirectDatabase,
    parse_url,
)
from scheduler.exceptions import ConfigurationError
from scheduler.provider_view.view import ProviderViewError

OPTION = '[placement_database] connection'


@pytest.mark.parametrize('url, backend, driver, host, port, database, query', [
    ('postgresql://placement:pw@db1:5433/placement', 'postgresql', 'psycopg2', 'db1', 5433,
     'placement', {}),
    ('postgresql+psycopg2://placement:pw@db1/placement?sslmode=require', 'postgresql',
     'psycopg2', 'db1', None, 'placement', {'sslmode': 'require'}),
    ('mysql+pymysql://placement:pw@10.0.0.5/placement?charset=utf8', 'mysql', 'pymysql',
     '10.0.0.5', None, 'placement', {'charset': 'utf8'}),
    ('mysql://placement:pw@db1/placement', 'mysql', 'mysqldb', 'db1', None, 'placement', {}),
    ('sqlite:////var/lib/placement/placement.db', 'sqlite', 'pysqlite', None, None,
     '/var/lib/placement/placement.db', {}),
    ('sqlite:///placement.db', 'sqlite', 'pysqlite', None, None, 'placement.db', {}),
], ids=['postgresql', 'psycopg2 with arguments', 'pymysql', 'mysql: mysqldb', 'sqlite absolute',
        'sqlite relative'])
def test_an_operator_s_url_names_the_driver_and_what_it_connects_to(url, backend, driver, host,
                                                                   port, database, query):
    parsed = parse_url(url, OPTION)

    assert (parsed.backend, parsed.driver, parsed.host, parsed.port, parsed.database,
            parsed.query) == (backend, driver, host, port, database, query)


@pytest.mark.parametrize('url, missing, advice', [
    ('mysql://placement:pw@db1/placement', 'MySQLdb', 'mysql+pymysql://'),
    ('mysql+pymysql://placement:pw@db1/placement', 'pymysql', 'placement-scheduler[celldb]'),
    ('postgresql://placement:pw@db1/placement', 'psycopg2', 'placement-scheduler[celldb]'),
], ids=['mysql: mysqlclient', 'pymysql', 'postgresql'])
def test_a_driver_not_installed_is_named_with_what_would_provide_it(monkeypatch, url, missing,
                                                                    advice):
    real_import = importlib.import_module

    def without_driver(name, *args):
        if name == missing:
            raise ImportError(name)
        return real_import(name, *args)
    monkeypatch.setattr(importlib, 'import_module', without_driver)

    with pytest.raises(ConfigurationError) as error:
        DirectDatabase(url, option=OPTION, error=ProviderViewError)

    assert advice in str(error.value)
    assert 'pw' not in str(error.value)


def test_a_password_is_decoded_for_the_driver_and_masked_in_the_label_as_given():
    parsed = parse_url('postgresql://placement:p%40ss%2Fw0rd@db1/placement', OPTION)

    assert parsed.password == 'p@ss/w0rd'
    assert parsed.label == 'postgresql://placement:***@db1/placement'
    assert 'w0rd' not in repr(parsed)
    assert parse_url('mysql+pymysql://u:pw@db1/nova', OPTION).label == 'mysql+pymysql://u:***@db1/nova'


@pytest.mark.parametrize('url, message', [
    ('placement:hunter2@db1/placement', 'an entry is not a SQLAlchemy URL'),
    ('postgresql://placement:hunter2@db1:port/placement', 'an entry is not a SQLAlchemy URL'),
    ('oracle://placement:hunter2@db/placement',
     "only MySQL/MariaDB, PostgreSQL and SQLite can be opened read-only here, not 'oracle'"),
    ('postgresql+pg8000://placement:hunter2@db/placement',
     "postgresql through 'pg8000' is not supported here; use one of psycopg2"),
], ids=['no scheme', 'a port that is no number', 'another database', 'another driver'])
def test_a_url_that_cannot_work_is_refused_without_showing_its_password(url, message):
    with pytest.raises(ConfigurationError) as failure:
        DirectDatabase(url, option=OPTION, error=ProviderViewError)

    assert message in str(failure.value) and OPTION in str(failure.value)
    assert 'hunter2' not in str(failure.value)


@pytest.mark.parametrize('backend, mark', [('postgresql', '%s'), ('sqlite', '?')])
def test_parameters_become_the_driver_s_marks_and_a_list_a_parenthesised_list(backend, mark):
    url = parse_url(f'{backend}://u:p@h/d' if backend != 'sqlite' else 'sqlite:///d', OPTION)
    connection = DirectConnection(url, raw=None)

    statement, values = connection._positional(
        "SELECT a::text FROM t WHERE id IN :ids AND at >= :since AND b = ':not'",
        {'ids': [3, 4, 5], 'since': 'then'})

    assert statement == (f"SELECT a::text FROM t WHERE id IN ({mark}, {mark}, {mark}) "
                         f"AND at >= {mark} AND b = ':not'")
    assert values == [3, 4, 5, 'then']


def test_a_percent_sign_stays_one_for_a_driver_with_format_marks():
    connection = DirectConnection(parse_url('postgresql://u:p@h/d', OPTION), raw=None)

    assert connection._positional("SELECT 1 WHERE a LIKE 'x%' AND b = :b", {'b': 2}) == (
        "SELECT 1 WHERE a LIKE 'x%%' AND b = %s", [2])
    assert connection._positional("SELECT 1 WHERE a LIKE 'x%'", {}) == (
        "SELECT 1 WHERE a LIKE 'x%'", [])


def test_a_read_of_sqlite_is_one_read_only_transaction(tmp_path):
    path = tmp_path / 'placement.db'
    with sqlite3.connect(path) as setup:
        setup.execute('CREATE TABLE t (id INTEGER)')
        setup.executemany('INSERT INTO t VALUES (?)', [(1,), (2,), (3,)])
    database = DirectDatabase(f'sqlite:///{path}', option=OPTION, error=ProviderViewError)

    with database.connect() as connection:
        assert connection.rows('SELECT id FROM t WHERE id IN :ids', {'ids': [1, 3]}) == [
            (1,), (3,)]
        assert connection.raw.in_transaction
        with pytest.raises(sqlite3.OperationalError):       # query_only
            connection.rows('INSERT INTO t VALUES (4)')
    with database.connect() as again:                       # the kept connection, checked
        assert again.raw is connection.raw and again.one('SELECT COUNT(*) FROM t') == (3,)
    database.close()


def sqlite_table(tmp_path, rows=3) -> str:
    path = tmp_path / 'cell.db'
    with sqlite3.connect(path) as setup:
        setup.execute('CREATE TABLE t (id INTEGER)')
        setup.executemany('INSERT INTO t VALUES (?)', [(i,) for i in range(1, rows + 1)])
    return f'sqlite:///{path}'


def test_a_read_while_the_kept_connection_is_busy_has_its_own_and_closes_it(tmp_path):
    database = DirectDatabase(sqlite_table(tmp_path), option=OPTION, error=ProviderViewError)

    with database.connect() as first:
        with database.connect() as second:     # another thread's read, say
            assert second.raw is not first.raw
            assert second.one('SELECT COUNT(*) FROM t') == (3,)
        with pytest.raises(sqlite3.ProgrammingError):         # closed, not kept
            second.raw.execute('SELECT 1')
    with database.connect() as third:
        assert third.raw is first.raw
    database.close()


def test_without_keep_connection_each_read_opens_and_closes_its_own(tmp_path):
    database = DirectDatabase(sqlite_table(tmp_path), option=OPTION, error=ProviderViewError,
                              keep_connection=False)

    with database.connect() as first:
        pass
    with database.connect() as second:
        assert second.raw is not first.raw
    with pytest.raises(sqlite3.ProgrammingError):
        first.raw.execute('SELECT 1')


def test_a_large_result_comes_in_chunks_with_its_parameters(tmp_path):
    database = DirectDatabase(sqlite_table(tmp_path, rows=7), option=OPTION,
                              error=ProviderViewError)

    with database.connect() as connection:
        chunks = list(connection.chunks('SELECT id FROM t WHERE id > :low ORDER BY id', 3,
                                        {'low': 1}))

    assert chunks == [[(2,), (3,), (4,)], [(5,), (6,), (7,)]]


def test_an_array_is_one_parameter_where_a_list_is_many():
    connection = DirectConnection(parse_url('postgresql://u:p@h/d', OPTION), raw=None)

    assert connection._positional('SELECT 1 WHERE a = ANY(:a) AND b IN :b',
                                  {'a': Array(('x', 'y')), 'b': ['x', 'y']}) == (
        'SELECT 1 WHERE a = ANY(%s) AND b IN (%s, %s)', [['x', 'y'], 'x', 'y'])


def test_a_driver_error_is_the_reader_s_error_without_the_password():
    database = DirectDatabase('postgresql://placement:hunter2@127.0.0.1:1/placement',
                              option=OPTION, error=ProviderViewError, connect_timeout=1)

    with pytest.raises(ProviderViewError) as failure, database.connect():
        pass

    assert 'OperationalError' in str(failure.value)
    assert 'hunter2' not in str(failure.value)


class RecordingDriver:
    """A PostgreSQL or MySQL driver that keeps what each connection was sent, and can
    lose a connection as a server restart does (psycopg2 then marks it closed, PyMySQL
    not open) or time a statement out (PyMySQL's read timeout loses it too)."""

    class Error(Exception):
        pass

    def __init__(self, clock):
        self.clock = clock
        self.connections: list[RecordingDriver.Connection] = []

    def connect(self, **arguments):
        connection = self.Connection(self, arguments.get('autocommit', False))
        self.connections.append(connection)
        return connection

    class Connection:
        def __init__(self, driver, autocommit):
            self.driver, self.autocommit, self.closed = driver, autocommit, 0
            self.sent: list[tuple[str, bool]] = []    # (statement, autocommit when sent)
            self.rollbacks, self.fail_next = 0, ''

        @property
        def open(self):
            return not self.closed

        def cursor(self):
            return RecordingDriver.Cursor(self)

        def rollback(self):
            self.rollbacks += 1
            self.sent.append(('ROLLBACK', self.autocommit))

        def commit(self):
            self.sent.append(('COMMIT', self.autocommit))

        def close(self):
            self.closed = 1

    class Cursor:
        def __init__(self, connection):
            self.connection = connection

        def execute(self, statement, values=None):
            connection = self.connection
            if connection.closed:
                raise RecordingDriver.Error('connection already closed')
            if connection.fail_next == 'lost':
                connection.closed = 2
                raise RecordingDriver.Error('server closed the connection unexpectedly')
            if connection.fail_next == 'timed out':
                connection.fail_next = ''
                connection.driver.clock.now += 30.0
                connection.closed = 2
                raise RecordingDriver.Error(2013, 'Lost connection to server (timed out)')
            if connection.fail_next == 'refused':
                connection.fail_next = ''
                raise RecordingDriver.Error('permission denied for table services')
            connection.sent.append((statement, connection.autocommit))

        def fetchall(self):
            return [(1,)]

        def close(self):
            pass


class Clock:
    """``time`` as dbapi reads it, moved on by a statement that times out."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


#: Per server: its URL, how the driver is imported, how a read's transaction begins
#: on the kept connection, and how it ends.
SERVERS = {
    'postgresql': ('postgresql://reader:{password}@db1/nova', 'psycopg2', POSTGRESQL_BEGIN,
                   ('ROLLBACK', True)),
    'mariadb': ('mysql+pymysql://reader:{password}@db1/nova', 'pymysql', MYSQL_BEGIN,
                ('ROLLBACK', True)),
}


@pytest.fixture(params=sorted(SERVERS))
def server(request, monkeypatch):
    """A database of each server whose connections go to a recording driver."""
    url, module, begin, end = SERVERS[request.param]
    clock = Clock()
    driver = RecordingDriver(clock)
    real_import = importlib.import_module
    monkeypatch.setattr(importlib, 'import_module',
                        lambda name, *args: driver if name == module
                        else real_import(name, *args))
    monkeypatch.setattr(dbapi, 'time', clock)

    def database(password='pw'):
        return DirectDatabase(url.format(password=password), option=OPTION,
                              error=ProviderViewError)
    return database, driver, begin, end


def test_statements_on_their_own_are_one_round_trip_each_through_the_kept_connection(server):
    open_database, driver, begin, end = server
    database = open_database()
    with database.connect() as connection:          # a read in a transaction first
        connection.rows('SELECT 2')
    kept = driver.connections[0]
    # Every statement in autocommit; a transaction is begun and ended by hand, its
    # begin the check of the kept connection (psycopg2's own transactions would have
    # it send two SETs at each switch to and from autocommit).
    opening = len(kept.sent) - 3
    assert kept.sent[opening:] == [(begin, True), ('SELECT 2', True), end]
    assert all(on for _, on in kept.sent)
    kept.sent.clear()

    rows = database.each_on_its_own('SELECT id FROM services WHERE id IN :ids',
                                    [{'ids': [1, 2]}, {'ids': [3]}])

    assert rows == [(1,), (1,)]
    assert len(driver.connections) == 1
    # No transaction begun and rolled back around them, no check first: the two
    # statements and nothing else.
    assert kept.sent == [('SELECT id FROM services WHERE id IN (%s, %s)', True),
                         ('SELECT id FROM services WHERE id IN (%s)', True)]
    with database.connect() as again:               # the next transaction, checked
        assert again.raw is kept
    assert kept.sent[2:] == [(begin, True), end]


def test_a_kept_connection_found_gone_is_opened_again_and_the_statement_sent_once_more(
        server):
    open_database, driver, _, _ = server
    database = open_database()
    database.each_on_its_own('SELECT 1', [{}])
    driver.connections[0].fail_next = 'lost'        # the server restarted since

    assert database.each_on_its_own('SELECT s.host FROM services s', [{}]) == [(1,)]

    first, second = driver.connections
    assert first.closed and second.sent[-1] == ('SELECT s.host FROM services s', True)
    assert [statement for statement, _ in second.sent].count(
        'SELECT s.host FROM services s') == 1


def test_a_statement_that_fails_on_a_live_connection_is_not_sent_again(server):
    open_database, driver, _, _ = server
    database = open_database(password='hunter2')
    database.each_on_its_own('SELECT 1', [{}])
    kept = driver.connections[0]
    kept.fail_next = 'refused'

    with pytest.raises(ProviderViewError) as failure:
        database.each_on_its_own('SELECT s.host FROM services s', [{}])

    assert 'permission denied' in str(failure.value) and 'hunter2' not in str(failure.value)
    assert kept.sent[-1] == ('SELECT 1', True)              # not sent again
    database.each_on_its_own('SELECT 3', [{}])              # the next read opens its own
    assert driver.connections[-1].sent[-1] == ('SELECT 3', True)


def test_a_statement_that_waited_out_its_timeout_is_not_sent_again(server):
    """The MySQL drivers report their read timeout as a lost connection: sending the
    statement again would only wait as long once more."""
    open_database, driver, _, _ = server
    database = open_database()
    database.each_on_its_own('SELECT 1', [{}])
    driver.connections[0].fail_next = 'timed out'

    with pytest.raises(ProviderViewError, match='timed out'):
        database.each_on_its_own('SELECT s.host FROM services s', [{}])
    assert len(driver.connections) == 1                     # no second connection


def test_a_connection_lost_again_at_once_fails_the_read(server):
    open_database, driver, _, _ = server
    database = open_database()
    database.each_on_its_own('SELECT 1', [{}])
    driver.connections[0].fail_next = 'lost'
    opened = driver.connect

    def lost_too(**arguments):
        connection = opened(**arguments)
        connection.fail_next = 'lost'
        return connection
    driver.connect = lost_too

    with pytest.raises(ProviderViewError, match='closed the connection'):
        database.each_on_its_own('SELECT 2', [{}])
    assert len(driver.connections) == 2                     # sent again once, no more


def test_statements_on_their_own_elsewhere_share_one_read_only_transaction(tmp_path):
    database = DirectDatabase(sqlite_table(tmp_path), option=OPTION, error=ProviderViewError)

    assert database.each_on_its_own('SELECT id FROM t WHERE id IN :ids',
                                    [{'ids': [1]}, {'ids': [2, 3]}]) == [(1,), (2,), (3,)]
    with pytest.raises(ProviderViewError):                  # query_only
        database.each_on_its_own('INSERT INTO t VALUES (4)', [{}])
    database.close()
