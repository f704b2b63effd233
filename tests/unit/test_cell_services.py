"""The compute services' state from the cell databases' ``services`` table.

Equal to what ``GET /os-services`` answers for the same rows is proved against
Nova's own code in ``tests/nova_differential/services.py``; here, the rules as
a specification, the reads (SQLite stands in for a cell database; MariaDB and
PostgreSQL in tests/functional/test_cell_services.py) and the wiring.
"""
from __future__ import annotations

import datetime
import sqlite3

import pytest

from scheduler import conf as scheduler_conf
from scheduler.catalog import HostCatalog
from scheduler.catalog.cell_db import CellDatabaseReader
from scheduler.catalog.cell_services import CellServicesReader, service_keys
from scheduler.catalog.nova_api import NovaApiError, ServicesParser
from scheduler.catalog.nova_sync import (
    CheckedCellServices,
    NovaComputeReader,
    NovaSync,
    nova_sync_from_conf,
)

NOW = datetime.datetime(2026, 11, 27, 12, 0, 0)
CELL = '00000000-0000-0000-0000-000000000001'


def ago(seconds: float) -> datetime.datetime:
    return NOW - datetime.timedelta(seconds=seconds)


def states(*rows):
    services, _ = ServicesParser().parse_keys(service_keys(rows, now=NOW, down_time=60))
    return services


def test_a_service_is_up_while_its_last_heartbeat_is_within_service_down_time():
    got = states(('fresh', False, None, False, ago(60), ago(3600), ago(60)),
                 ('stale', False, None, False, ago(61), ago(3600), ago(61)),
                 ('fast-clock', False, None, False, ago(-59), ago(3600), ago(-59)))
    assert (got['fresh'].up, got['stale'].up, got['fast-clock'].up) == (True, False, True)
    # Down, it shows its last update (what ComputeFilter finds too old); up, none.
    assert got['stale'].last_seen_up == ago(61).replace(tzinfo=datetime.timezone.utc)
    assert got['fresh'].last_seen_up is None


def test_without_a_heartbeat_the_services_creation_counts_as_one():
    got = states(('new', False, None, False, None, ago(10), ago(10)),
                 ('old', False, None, False, None, ago(600), ago(5)))
    assert (got['new'].up, got['old'].up) == (True, False)


def test_forced_down_is_down_whatever_its_heartbeat_and_disabled_keeps_its_reason():
    got = states(('forced', False, None, True, ago(1), ago(3600), ago(1)),
                 ('off', True, 'maintenance', False, ago(1), ago(3600), ago(1)))
    assert (got['forced'].up, got['forced'].forced_down) == (False, True)
    assert (got['off'].up, got['off'].disabled, got['off'].disabled_reason) == \
        (True, True, 'maintenance')


def sqlite_cell(path, rows) -> str:
    with sqlite3.connect(path) as db:
        db.execute('CREATE TABLE services (id INTEGER PRIMARY KEY, host TEXT, "binary" TEXT, '
                   'disabled BOOLEAN, disabled_reason TEXT, forced_down BOOLEAN, '
                   'last_seen_up DATETIME, created_at DATETIME, updated_at DATETIME, '
                   'deleted INTEGER)')
        db.executemany('INSERT INTO services (id, host, "binary", disabled, disabled_reason, '
                       'forced_down, last_seen_up, created_at, updated_at, deleted) '
                       'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', rows)
    return f'sqlite:///{path}'


def row(id: int, host: str, *, binary='nova-compute', heartbeat: float = 5, deleted=0,
        disabled=False):
    return (id, host, binary, disabled, None, False, ago(heartbeat).isoformat(' '),
            ago(3600).isoformat(' '), ago(heartbeat).isoformat(' '), deleted)


def reader_of(*urls) -> CellServicesReader:
    return CellServicesReader([CellDatabaseReader(url) for url in urls], down_time=60,
                              clock=lambda: NOW)


def test_every_cell_is_read_for_its_live_compute_services_in_the_apis_order(tmp_path):
    reader = reader_of(
        sqlite_cell(tmp_path / 'cell1.db', [row(2, 'cn2', heartbeat=90), row(1, 'cn1'),
                                           row(3, 'cn1', binary='nova-conductor'),
                                           row(4, 'gone', deleted=4)]),
        sqlite_cell(tmp_path / 'cell2.db', [row(1, 'cn3', disabled=True)]))

    services, unknown, keys = reader.read_service_keys()

    assert [k[0] for k in keys] == ['cn1', 'cn2', 'cn3']
    assert {h: (s.up, s.disabled) for h, s in services.items()} == {
        'cn1': (True, False), 'cn2': (False, False), 'cn3': (True, True)}
    assert unknown == []
    assert reader.states_of_keys([list(k) for k in keys])[0] == services


def test_a_cell_whose_services_cannot_be_read_fails_the_whole_read(tmp_path):
    good = sqlite_cell(tmp_path / 'cell1.db', [row(1, 'cn1')])
    with sqlite3.connect(tmp_path / 'cell2.db') as db:
        db.execute('CREATE TABLE compute_nodes (id INTEGER)')   # no services table

    with pytest.raises(NovaApiError, match='cell database sqlite:///.*cell2.db: services'):
        reader_of(good, f'sqlite:///{tmp_path / "cell2.db"}').read_services()


def test_the_read_before_a_request_takes_the_cell_databases_not_the_compute_api(tmp_path):
    catalog = HostCatalog(default_cell_uuid=CELL)

    class NoApi:
        def read_services(self):
            raise AssertionError('the compute API was read')

    sync = NovaSync(catalog, NoApi(), interval=3600, service_state_max_age=0.0,  # type: ignore[arg-type]
                    services=reader_of(sqlite_cell(tmp_path / 'cell1.db', [row(1, 'cn1')])))
    sync.fresh_service_states()

    assert catalog.snapshot_stats()['nova_services'] == 1


def conf_with(tmp_path, service_states: bool):
    config = tmp_path / 'scheduler.conf'
    config.write_text(f"""[nova]
auth_type = password
auth_url = http://keystone.example/v3
username = scheduler
password = secret
[cell_database]
connections = {sqlite_cell(tmp_path / 'cell1.db', [])}
service_states = {service_states}
""")
    return scheduler_conf.parse_args(['--config-file', str(config)], default_config_files=[])


@pytest.mark.parametrize(('service_states', 'source'), [(True, CheckedCellServices),
                                                        (False, NovaComputeReader)])
def test_cell_database_connections_are_where_the_services_are_read_unless_turned_off(
        tmp_path, service_states, source):
    sync = nova_sync_from_conf(conf_with(tmp_path, service_states),
                               HostCatalog(default_cell_uuid=CELL))
    assert sync is not None
    assert isinstance(sync._services, source)


def test_reading_only_what_changed_gives_what_a_whole_read_gives(tmp_path):
    """Heartbeats, services disabled and enabled, forced down and up, deleted and
    added, and time passing: after each round of changes the reader that asks only
    for the unusual rows answers exactly what a new reader's whole read answers."""
    import random
    rng = random.Random(7)
    path = tmp_path / 'cell1.db'
    url = sqlite_cell(path, [row(i, f'cn{i}', heartbeat=rng.uniform(-50, 50))
                             for i in range(1, 41)])
    now = [NOW]
    reader = CellServicesReader([CellDatabaseReader(url)], down_time=60,
                                clock=lambda: now[0])

    def at(seconds: float) -> str:
        return (now[0] - datetime.timedelta(seconds=seconds)).isoformat(' ')

    changes = [
        lambda db, i: db.execute('UPDATE services SET last_seen_up = ?, updated_at = ? '
                                 'WHERE id = ?', (at(rng.uniform(-70, 90)), at(0), i)),
        lambda db, i: db.execute('UPDATE services SET disabled = ?, disabled_reason = ? '
                                 'WHERE id = ?', (rng.random() < 0.5,
                                                  rng.choice([None, 'maintenance']), i)),
        lambda db, i: db.execute('UPDATE services SET forced_down = ? WHERE id = ?',
                                 (rng.random() < 0.5, i)),
        lambda db, i: db.execute('UPDATE services SET deleted = id WHERE id = ?', (i,)),
        lambda db, i: db.execute(
            'INSERT INTO services (id, host, "binary", disabled, forced_down, last_seen_up, '
            'created_at, updated_at, deleted) SELECT MAX(id) + 1, \'new\' || (MAX(id) + 1), '
            '\'nova-compute\', 0, 0, ?, ?, ?, 0 FROM services', (at(1), at(5), at(1))),
        lambda db, i: None,
    ]
    for _ in range(60):
        with sqlite3.connect(path) as db:
            for _ in range(rng.choice([0, 1, 1, 3])):
                rng.choice(changes)(db, rng.randrange(1, 45))
        now[0] += datetime.timedelta(seconds=rng.choice([0, 1, 20]))
        whole = CellServicesReader([CellDatabaseReader(url)], down_time=60,
                                   clock=lambda: now[0])

        assert reader.read_service_keys() == whole.read_service_keys()


def test_a_read_that_finds_nothing_changed_hands_back_the_last_reads_objects(tmp_path):
    reader = reader_of(sqlite_cell(tmp_path / 'cell1.db', [row(1, 'cn1'), row(2, 'cn2')]))
    first = reader.read_service_keys()
    assert reader.read_service_keys() is first


def test_a_worker_reads_its_cells_without_loading_sqlalchemy(tmp_path):
    # SQLAlchemy's import and engine added 17 MB to each worker (doc/performance.md):
    # every read of the cell source goes through the driver alone.
    import subprocess
    import sys
    import textwrap

    url = sqlite_cell(tmp_path / 'cell1.db', [row(1, 'cn1'), row(2, 'cn2', disabled=True)])
    with sqlite3.connect(tmp_path / 'cell1.db') as db:
        db.execute('CREATE TABLE compute_nodes (uuid TEXT, hypervisor_hostname TEXT, host TEXT, '
                   'numa_topology TEXT, pci_stats TEXT, cpu_allocation_ratio FLOAT, '
                   'ram_allocation_ratio FLOAT, supported_instances TEXT, host_ip TEXT, '
                   'hypervisor_type TEXT, hypervisor_version INTEGER, cpu_info TEXT, '
                   'stats TEXT, deleted INTEGER)')
        db.execute("INSERT INTO compute_nodes VALUES ('5c6b5c59-3b51-4a5f-a3c3-8c5e1b7d9e01', "
                   "'cn1', 'cn1', NULL, NULL, 4.0, 1.0, NULL, NULL, NULL, NULL, NULL, NULL, 0)")
    worker = subprocess.run([sys.executable, '-c', textwrap.dedent(f"""
        import sys
        from scheduler.catalog.cell_db import CellDatabaseReader
        from scheduler.catalog.cell_services import CellServicesReader
        reader = CellDatabaseReader({url!r}, keep_connection=True)
        nodes, _ = reader.read()
        services = CellServicesReader([reader], down_time=10 ** 9)
        states, _ = services.read_services()
        services.read_services()
        services.usual_again(['cn2'])
        again = services.usual_again(['cn2'])    # by the id the first one found
        print(len(nodes), sorted(states), sorted(services.unusual_now(['cn1', 'cn2'])),
              sorted(again), 'sqlalchemy' in sys.modules)
        """)], capture_output=True, text=True, check=True)

    assert worker.stdout.split() == ['1', "['cn1',", "'cn2']", "['cn2']", '[]', 'False']
