"""The compute services' state read from REAL cell databases (MariaDB and PostgreSQL),
as an operator's read-only user reads it: what ``GET /os-services`` would answer
for the same rows (proved against Nova's code in tests/nova_differential/services.py).
"""
from __future__ import annotations

import datetime
import random

import pytest

from scheduler.catalog import cell_services
from scheduler.catalog.cell_db import CellDatabaseReader
from scheduler.catalog.cell_services import CellServicesReader, utcnow
from scheduler.catalog.nova_api import NovaApiError
from tests.fixtures.cell_databases import READER_PASSWORD


def ago(seconds: float) -> datetime.datetime:
    return utcnow() - datetime.timedelta(seconds=seconds)


def read(cell_db):
    reader = CellServicesReader([CellDatabaseReader(cell_db.reader_url)], down_time=60)
    services, unknown = reader.read_services()
    assert unknown == []
    return services


def test_a_read_only_user_reads_each_compute_services_state_as_the_api_shows_it(cell_db):
    cell_db.insert_service('cn-up', last_seen_up=ago(5), created_at=ago(3600))
    cell_db.insert_service('cn-silent', last_seen_up=ago(300), created_at=ago(3600))
    cell_db.insert_service('cn-new', last_seen_up=None, created_at=ago(5))
    cell_db.insert_service('cn-forced', last_seen_up=ago(5), created_at=ago(3600),
                           forced_down=True)
    cell_db.insert_service('cn-off', last_seen_up=ago(5), created_at=ago(3600),
                           disabled=True, disabled_reason='maintenance')
    cell_db.insert_service('cn-gone', last_seen_up=ago(5), created_at=ago(3600), deleted=True)
    cell_db.insert_service('cn-up', binary='nova-conductor', last_seen_up=ago(900),
                           created_at=ago(3600))

    services = read(cell_db)

    assert {h: (s.up, s.disabled, s.disabled_reason, s.forced_down)
            for h, s in services.items()} == {
        'cn-up': (True, False, None, False),
        'cn-silent': (False, False, None, False),
        'cn-new': (True, False, None, False),
        'cn-forced': (False, False, None, True),
        'cn-off': (True, True, 'maintenance', False)}
    # ComputeFilter sees the silent one's last update, long past service_down_time.
    assert services['cn-silent'].last_seen_up is not None
    assert services['cn-silent'].last_seen_up < datetime.datetime.now(
        datetime.timezone.utc) - datetime.timedelta(seconds=250)


def test_a_user_who_may_not_read_services_fails_the_read_without_its_password(cell_db):
    cell_db.insert_service('cn1', last_seen_up=ago(5), created_at=ago(3600))
    cell_db.revoke_reader('services')

    with pytest.raises(NovaApiError) as failed:
        read(cell_db)

    assert 'services' in str(failed.value)
    assert READER_PASSWORD not in str(failed.value)


def test_a_second_read_finds_what_changed_since_the_first(cell_db):
    for host in ('cn1', 'cn2', 'cn3'):
        cell_db.insert_service(host, last_seen_up=ago(5), created_at=ago(3600))
    reader = CellServicesReader([CellDatabaseReader(cell_db.reader_url)], down_time=60)
    first, _ = reader.read_services()
    cell_db.query_commit("UPDATE services SET disabled = true, disabled_reason = 'rack' "
                         "WHERE host = 'cn1'")
    cell_db.query_commit("UPDATE services SET forced_down = true WHERE host = 'cn2'")

    second, _ = reader.read_services()
    cell_db.query_commit("UPDATE services SET deleted = id WHERE host = 'cn3'")
    third, _ = reader.read_services()

    assert all(s.up and not s.disabled for s in first.values())
    assert (second['cn1'].disabled, second['cn1'].disabled_reason) == (True, 'rack')
    assert (second['cn2'].up, second['cn2'].forced_down) == (False, True)
    assert second['cn3'].up
    assert set(third) == {'cn1', 'cn2'}


def random_state(rng: random.Random) -> dict:
    # Heartbeats at whole seconds and between them (PostgreSQL's JSON drops a
    # microsecond's trailing zeros, which the read must not).
    return {'last_seen_up': rng.choice([ago(5), ago(300), None, ago(-300),
                                        ago(400).replace(microsecond=500000)]),
            'created_at': rng.choice([ago(3600), ago(5)]),
            'disabled': rng.random() < 0.2, 'forced_down': rng.random() < 0.1,
            'disabled_reason': rng.choice([None, None, 'rack'])}


def sql_value(value) -> str:
    if value is None:
        return 'NULL'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, datetime.datetime):
        return f"'{value:%Y-%m-%d %H:%M:%S.%f}'"
    return f"'{value}'"


@pytest.mark.parametrize('seed', range(4))
def test_a_read_of_the_unusual_rows_agrees_with_a_read_of_every_row(cell_db, seed):
    """After a first read, a read asks only for the members and the rows that are not
    up and enabled with no reason (on PostgreSQL in one pass of arrays, elsewhere a
    join); whatever changed in between, it finds what a new reader's read of every row
    finds."""
    rng = random.Random(seed)
    hosts = [f'cn{i}' for i in range(40)]
    for host in hosts:
        state = random_state(rng)
        cell_db.insert_service(host, last_seen_up=state['last_seen_up'],
                               created_at=state['created_at'], disabled=state['disabled'],
                               disabled_reason=state['disabled_reason'],
                               forced_down=state['forced_down'])
    reader = CellServicesReader([CellDatabaseReader(cell_db.reader_url)], down_time=60)
    reader.read_services()
    for host in rng.sample(hosts, 15):
        state = random_state(rng)
        del state['created_at']
        cell_db.query_commit('UPDATE services SET ' + ', '.join(
            f'{column} = {sql_value(value)}' for column, value in state.items())
            + f" WHERE host = '{host}'")

    again, _ = reader.read_services()

    # Every field, the last heartbeat of a service down included (ComputeFilter's).
    assert dict(again.items()) == dict(read(cell_db).items())


@pytest.mark.parametrize('chunk', [250, 1])
def test_between_scans_the_rows_of_a_few_hosts_are_read_by_host(cell_db, chunk, monkeypatch):
    """What a request reads between two reads of every row: of the services held as
    disabled or down, those up and enabled again (by host, then by the ids found);
    of the hosts about to be answered with, those disabled or down now (in one
    statement, or one host or id a statement)."""
    monkeypatch.setattr(cell_services, 'BY_HOST_CHUNK', chunk)
    monkeypatch.setattr(cell_services, 'BY_ID_CHUNK', chunk)
    cell_db.insert_service('cn-up', last_seen_up=ago(5), created_at=ago(3600))
    cell_db.insert_service('cn-off', last_seen_up=ago(5), created_at=ago(3600),
                           disabled=True, disabled_reason='maintenance')
    cell_db.insert_service('cn-silent', last_seen_up=ago(300), created_at=ago(3600))
    cell_db.insert_service('cn-forced', last_seen_up=ago(5), created_at=ago(3600),
                           forced_down=True)
    reader = CellServicesReader([CellDatabaseReader(cell_db.reader_url)], down_time=60)
    held = ['cn-off', 'cn-silent', 'cn-forced']

    assert reader.usual_again(held) == {}
    assert set(reader.unusual_now(['cn-up', 'cn-off', 'cn-forced', 'cn-unknown'])) == {
        'cn-off', 'cn-forced'}

    cell_db.query_commit("UPDATE services SET disabled = false, disabled_reason = NULL "
                         "WHERE host = 'cn-off'")
    cell_db.query_commit("UPDATE services SET forced_down = true WHERE host = 'cn-up'")
    again = reader.usual_again(held)
    now = reader.unusual_now(['cn-up', 'cn-off'])

    assert {h: (s.up, s.disabled) for h, s in again.items()} == {'cn-off': (True, False)}
    assert {h: (s.up, s.forced_down) for h, s in now.items()} == {'cn-up': (False, True)}


def test_held_hosts_are_read_again_by_the_ids_of_their_rows_until_they_change(cell_db):
    """A service deleted and created again under a held host has a new row, which the
    reads by id do not see; the next read of every row does, and changes the hosts held."""
    cell_db.insert_service('cn-silent', last_seen_up=ago(300), created_at=ago(3600))
    cell_db.insert_service('cn-off', last_seen_up=ago(5), created_at=ago(3600),
                           disabled=True, disabled_reason='maintenance')
    reader = CellServicesReader([CellDatabaseReader(cell_db.reader_url)], down_time=60)
    held = ['cn-silent', 'cn-off']
    assert reader.usual_again(held) == {}

    cell_db.query_commit("UPDATE services SET deleted = id WHERE host = 'cn-silent'")
    cell_db.insert_service('cn-silent', last_seen_up=ago(5), created_at=ago(5))
    assert reader.usual_again(held) == {}

    # The held hosts changed (cn-off, say, found enabled by that read of every row):
    # their rows are found by host again.
    assert {h: s.up for h, s in reader.usual_again(['cn-silent']).items()} == {
        'cn-silent': True}


def test_the_hosts_alone_read_by_a_reader_that_holds_no_read_are_every_live_compute(cell_db):
    """The hourly check of a worker that takes its reads from the service's reader: the
    hosts, and nothing kept of them."""
    for host in ('cn1', 'cn2', 'cn3'):
        cell_db.insert_service(host, last_seen_up=ago(5), created_at=ago(3600))
    cell_db.insert_service('cn-off', last_seen_up=ago(900), created_at=ago(3600),
                           disabled=True, disabled_reason='maintenance')
    cell_db.insert_service('cn-gone', last_seen_up=ago(5), created_at=ago(3600), deleted=True)
    cell_db.insert_service('cond', binary='nova-conductor', last_seen_up=ago(5),
                           created_at=ago(3600))
    reader = CellServicesReader([CellDatabaseReader(cell_db.reader_url)], down_time=60)

    assert reader.service_hosts() is None
    assert reader.service_hosts(read=True) == {'cn1', 'cn2', 'cn3', 'cn-off'}
    assert reader.service_hosts() is None

    reader.read_services()
    assert reader.service_hosts() == reader.service_hosts(read=True) == set(read(cell_db))


def end_reader_sessions(cell_db) -> int:
    """The server ends the reader's connections (a restart, an idle timeout, a
    database proxy's failover); how many it ended."""
    if cell_db.backend == 'postgresql':
        return len(cell_db.query(
            'SELECT pg_terminate_backend(pid) FROM pg_stat_activity '
            f"WHERE usename = '{cell_db.reader_user}'"))
    ids = [row[0] for row in cell_db.query(
        f"SELECT id FROM information_schema.processlist WHERE user = '{cell_db.reader_user}'")]
    for ident in ids:
        cell_db.query_commit(f'KILL {int(ident)}')
    return len(ids)


def test_a_read_before_a_request_outlives_the_server_ending_the_kept_connection(cell_db):
    """These reads are sent without a check of the kept connection first (one round trip
    each): a connection found gone is opened again and the read sent once more, so the
    request never sees it."""
    cell_db.insert_service('cn-up', last_seen_up=ago(5), created_at=ago(3600))
    cell_db.insert_service('cn-silent', last_seen_up=ago(300), created_at=ago(3600))
    # Its connection kept, as the service keeps the one its reads before a request use.
    reader = CellServicesReader(
        [CellDatabaseReader(cell_db.reader_url, keep_connection=True)], down_time=60)
    assert reader.usual_again(['cn-silent']) == {}          # by host: the ids kept
    assert end_reader_sessions(cell_db) == 1

    cell_db.query_commit(f"UPDATE services SET last_seen_up = '{ago(1):%Y-%m-%d %H:%M:%S}' "
                         "WHERE host = 'cn-silent'")
    assert {h: s.up for h, s in reader.usual_again(['cn-silent']).items()} == {
        'cn-silent': True}                                  # by id, on a new connection
    assert end_reader_sessions(cell_db) == 1
    assert reader.unusual_now(['cn-up', 'cn-silent']) == {}


def test_on_mariadb_a_read_before_a_request_is_one_statement_and_a_read_of_one_moment_three(
        mariadb_cell):
    """As the server counts what the reader's session sent (its ``Questions``): the
    reads before a request are each the statement alone, through a connection kept in
    autocommit; a read that needs one moment begins its transaction by hand, which is
    also the kept connection's check (``START TRANSACTION READ ONLY``, the statement,
    ``ROLLBACK``)."""
    mariadb_cell.insert_service('cn-1', last_seen_up=ago(5), created_at=ago(3600))
    reader = CellDatabaseReader(mariadb_cell.reader_url, keep_connection=True)

    def sent_so_far() -> int:
        [(_, value)] = reader.each_on_its_own("SHOW SESSION STATUS LIKE 'Questions'", [{}])
        return int(value)

    before = sent_so_far()
    rows = reader.each_on_its_own('SELECT host FROM services WHERE host IN :hosts',
                                  [{'hosts': ['cn-1']}, {'hosts': ['cn-2', 'cn-3']}])
    assert rows == [('cn-1',)]
    assert sent_so_far() - before == 2 + 1           # the two, and the count itself

    before = sent_so_far()
    with reader.connect() as connection:
        assert connection.rows('SELECT host FROM services') == [('cn-1',)]
    assert sent_so_far() - before == 3 + 1
    reader.close()
