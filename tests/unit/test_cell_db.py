"""The read-only cell database source: rows in, host data out, never a write.

SQLite stands in for a cell database here (the real MariaDB and PostgreSQL are
in tests/functional/test_cell_db.py); the table has Nova's compute_nodes
columns this source reads, plus one it must not.
"""
from __future__ import annotations

import json
import logging
import sqlite3
import sys
from decimal import Decimal

import pytest

from scheduler.catalog import HostCatalog
from scheduler.catalog.cell_db import (
    CellDatabaseError,
    CellDatabaseReader,
    CellDatabaseSync,
    cell_db_sync_from_conf,
    cell_readers_from_conf,
    parse_rows,
    row_digest,
    split_connection,
)
from scheduler.catalog.readonly_db import mask_url
from scheduler.conf import cell_database as cell_database_conf
from scheduler.exceptions import ConfigurationError
from scheduler.host_state import HostState
from tests.builders import CELL_UUID, make_conf, uuid_for
from tests.fixtures.nova_host_data import numa_cell, numa_topology_json, pci_pool, pci_stats_json

LOGGER = 'scheduler.catalog.cell_db'
ONE_CELL = numa_topology_json(numa_cell(0, cpuset=[0, 1], pcpuset=[2, 3]))
POOLS = pci_stats_json(pci_pool('8086', '154d', 4, dev_type='type-VF'))


def row(name, *, numa=ONE_CELL, pci=POOLS, cpu_ratio=4.0, ram_ratio=1.0, host=None,
        supported='[["x86_64", "kvm", "hvm"]]'):
    return (uuid_for(name), name, host or name, numa, pci, cpu_ratio, ram_ratio, supported)


def test_rows_become_nodes_with_the_ratios_on_their_topology():
    [node], problems = parse_rows([row('cn1', host='compute-1')])

    assert problems == []
    assert (node.provider_uuid, node.nodename, node.service_host) == (uuid_for('cn1'), 'cn1',
                                                                      'compute-1')
    assert node.numa_topology.cells[0].pcpuset == {2, 3}
    assert (node.numa_topology.cpu_allocation_ratio,
            node.numa_topology.ram_allocation_ratio) == (4.0, 1.0)
    assert node.pci_stats.free_devices == 4


def test_a_field_that_cannot_be_parsed_is_dropped_and_named_the_rest_of_the_row_kept():
    nodes, problems = parse_rows([row('cn1', numa='{"cells": [{"id": 0}]}'),
                                  row('cn2', numa=None, pci=None, cpu_ratio=0.0),
                                  (None, 'cn3', 'cn3', None, None, None, None, None)])

    assert [(n.nodename, n.numa_topology, n.pci_stats is not None) for n in nodes] == [
        ('cn1', None, True), ('cn2', None, False)]
    assert problems == ['cn1 numa_topology.cells[0].memory: is required',
                        'a row of cn3 has no uuid']


def test_passwords_are_masked_in_urls():
    assert mask_url('mysql+pymysql://nova:s3cr%40t@db1:3306/nova_cell1?charset=utf8') == \
        'mysql+pymysql://nova:***@db1:3306/nova_cell1?charset=utf8'
    assert mask_url('postgresql://db1/nova') == 'postgresql://db1/nova'


# A SQLite cell database ---------------------------------------------------------------------

SCHEMA = """CREATE TABLE compute_nodes (
    id INTEGER PRIMARY KEY, uuid VARCHAR(36), host VARCHAR(255),
    hypervisor_hostname VARCHAR(255), numa_topology TEXT, pci_stats TEXT,
    cpu_allocation_ratio FLOAT, ram_allocation_ratio FLOAT, supported_instances TEXT,
    host_ip VARCHAR(39), hypervisor_type TEXT, hypervisor_version INTEGER, cpu_info TEXT,
    stats TEXT, metrics TEXT, deleted INTEGER DEFAULT 0, vcpus INTEGER)"""


def sqlite_cell(path, rows, *, deleted=()):
    """A cell database of :func:`row` rows, or of :func:`with_stats` rows (and their
    metrics)."""
    with sqlite3.connect(path) as db:
        db.execute(SCHEMA)
        for i, r in enumerate(list(rows) + list(deleted), start=1):
            node_uuid, nodename, host, numa, pci, cpu_ratio, ram_ratio, supported = r[:8]
            db.execute('INSERT INTO compute_nodes (id, uuid, hypervisor_hostname, host, '
                       'numa_topology, pci_stats, cpu_allocation_ratio, ram_allocation_ratio, '
                       'supported_instances, stats, metrics, deleted, vcpus) '
                       'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 16)',
                       (i, node_uuid, nodename, host, numa, pci, cpu_ratio, ram_ratio,
                        supported, *(*r[12:14], None, None)[:2], i if r in deleted else 0))
    return f'sqlite:///{path}'


def test_a_cell_database_is_read_without_its_deleted_rows(tmp_path):
    url = sqlite_cell(tmp_path / 'cell1.db', [row('cn1'), row('cn2')],
                        deleted=[row('cn-old')])

    nodes, problems = CellDatabaseReader(url).read()

    assert sorted(n.nodename for n in nodes) == ['cn1', 'cn2']
    assert problems == []


def test_the_connection_is_read_only(tmp_path):
    reader = CellDatabaseReader(sqlite_cell(tmp_path / 'cell1.db', [row('cn1')]))

    with pytest.raises(CellDatabaseError, match='readonly|read-only|query_only'):
        with reader.connect() as connection:
            connection.rows("UPDATE compute_nodes SET host = 'elsewhere'")

    with sqlite3.connect(tmp_path / 'cell1.db') as db:
        assert db.execute('SELECT host FROM compute_nodes').fetchall() == [('cn1',)]


def sync_of(catalog, *urls):
    return CellDatabaseSync(catalog, [CellDatabaseReader(u) for u in urls], interval=60)


def test_a_cell_that_cannot_be_read_keeps_its_last_good_data_and_others_go_on(tmp_path, caplog):
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    cell1 = tmp_path / 'cell1.db'
    sync = sync_of(catalog, sqlite_cell(cell1, [row('cn1')]),
                   sqlite_cell(tmp_path / 'cell2.db', [row('cn2')]))
    assert sync.sync_once()

    with sqlite3.connect(cell1) as db:
        db.execute('DROP TABLE compute_nodes')
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert not sync.sync_once()

    for name in ('cn1', 'cn2'):
        assert catalog.record_for_provider(uuid_for(name), None).numa_topology is not None
    [warning] = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert warning.startswith(f'cell database sqlite:///{cell1} could not be read (1 in a row; '
                              f'data is ')
    assert 'keeping its last good data' in warning and 'no such table' in warning


HOSTS_FILE = """
hosts:
  - nodename: cn1
    numa_topology: {cells: [{id: 0, cpuset: [7], memory: 1024}]}
    pci_pools: [{vendor_id: "10de", product_id: "1eb8", count: 1}]
  - nodename: cn3
    numa_topology: {cells: [{id: 0, cpuset: [7], memory: 1024}]}
"""


def test_the_catalog_prefers_the_cell_databases_numa_and_pci_data_to_the_files(tmp_path):
    hosts_file = tmp_path / 'hosts.yaml'
    hosts_file.write_text(HOSTS_FILE)
    catalog = HostCatalog.from_file(str(hosts_file), default_cell_uuid=CELL_UUID)
    catalog.apply_cell_db_nodes(parse_rows([row('cn1', pci=None),
                                            row('cn2', host='compute-2')])[0])

    cn1 = catalog.record_for_provider(uuid_for('cn1'), 'cn1')
    cn2 = catalog.record_for_provider(uuid_for('cn2'), None)
    cn3 = catalog.record_for_provider(uuid_for('cn3'), 'cn3')

    assert cn1.numa_topology.cells[0].cpuset == {0, 1}      # the database's topology
    assert cn1.pci_pools.pools[0].vendor_id == '10de'       # the file's pools: none in the row
    assert (cn2.nodename, cn2.service_host) == ('cn2', 'compute-2')  # known from the database
    assert cn3.numa_topology.cells[0].cpuset == {7}         # not in the database: the file's
    assert catalog.provider_name(uuid_for('cn2')) == 'cn2'
    assert [r.nodename for r in catalog.find_nodes('compute-2', None)] == ['cn2']
    assert catalog.snapshot_stats()['cell_db_nodes'] == 2


def test_a_file_record_without_a_uuid_finds_its_node_by_name_as_a_request_read_it(tmp_path):
    """By name, whether a request's read replaced the node before or after a lookup by
    name was first made of the cell databases' nodes."""
    hosts_file = tmp_path / 'hosts.yaml'
    hosts_file.write_text(HOSTS_FILE)
    catalog = HostCatalog.from_file(str(hosts_file), default_cell_uuid=CELL_UUID)

    def cn1_cpus():
        [cn1] = catalog.find_nodes(None, 'cn1')
        return cn1.numa_topology.cells[0].cpuset

    catalog.apply_cell_db_nodes(parse_rows([row('cn1'), row('cn2')])[0])
    assert cn1_cpus() == {0, 1}
    catalog.add_cell_db_nodes(parse_rows([row('cn1', numa=OTHER_CELL)])[0])
    assert cn1_cpus() == {5, 6}

    catalog.apply_cell_db_nodes(parse_rows([row('cn1'), row('cn2')])[0])
    catalog.add_cell_db_nodes(parse_rows([row('cn1', numa=OTHER_CELL)])[0])
    assert cn1_cpus() == {5, 6}


# Configuration -------------------------------------------------------------------------------

def conf_with(**options):
    conf = make_conf()
    cell_database_conf.register_opts(conf)
    for name, value in options.items():
        conf.set_override(name, value, group='cell_database')
    return conf


def test_no_connections_no_sync():
    assert cell_db_sync_from_conf(conf_with(), HostCatalog(default_cell_uuid=CELL_UUID)) is None


@pytest.mark.parametrize('url,message', [
    ('nova:hunter2@db1/nova_cell1', 'an entry is not a SQLAlchemy URL'),
    ('oracle://nova:hunter2@db/nova', "only MySQL/MariaDB, PostgreSQL and SQLite can be opened "
                                      "read-only here, not 'oracle'"),
])
def test_a_connection_that_cannot_work_stops_start_up_without_showing_its_password(url, message):
    with pytest.raises(ConfigurationError) as failure:
        cell_db_sync_from_conf(conf_with(connections=[url]),
                               HostCatalog(default_cell_uuid=CELL_UUID))

    assert message in str(failure.value)
    assert 'hunter2' not in str(failure.value)


def test_the_connections_option_is_secret():
    [connections] = [o for o in cell_database_conf.cell_database_opts if o.name == 'connections']
    assert connections.secret


CELL2_UUID = '7e2b5a3c-5d0c-4c1e-9b0e-4f4a2c3e9d21'


def test_a_connection_prefixed_with_a_cell_uuid_puts_its_nodes_in_that_cell(tmp_path):
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    cell1 = sqlite_cell(tmp_path / 'cell1.db', [row('cn1', host='compute-1')])
    cell2 = sqlite_cell(tmp_path / 'cell2.db', [row('cn2', host='compute-2')])
    sync = cell_db_sync_from_conf(conf_with(connections=[cell1, f'{CELL2_UUID.upper()}={cell2}']),
                                  catalog)
    assert sync.sync_once()

    first = catalog.record_for_provider(uuid_for('cn1'), None)
    second = catalog.record_for_provider(uuid_for('cn2'), None)
    assert (first.service_host, first.cell_uuid) == ('compute-1', CELL_UUID)
    assert (second.service_host, second.cell_uuid) == ('compute-2', CELL2_UUID)
    assert catalog.cells() == {CELL_UUID, CELL2_UUID}


def test_a_url_alone_is_not_taken_for_a_cell_prefix():
    assert split_connection('mysql+pymysql://u:p@db/nova?a=b') == (
        None, 'mysql+pymysql://u:p@db/nova?a=b')
    assert split_connection(f'{CELL2_UUID}=sqlite:////tmp/c.db') == (CELL2_UUID,
                                                                    'sqlite:////tmp/c.db')


def test_what_a_node_runs_is_read_for_the_image_properties_filter():
    [node, bare], problems = parse_rows([row('cn1'), row('cn2', supported=None)])
    _, problems_bad = parse_rows([row('cn3', supported='[["x86_64", "kvm"]]')])

    assert node.supported_instances == (('x86_64', 'kvm', 'hvm'),)
    assert bare.supported_instances is None  # not reported: the hosts file's value stays
    assert problems == []
    assert problems_bad and 'cn3 supported_instances' in problems_bad[0]


def test_a_catalog_record_takes_the_cell_database_s_supported_instances(tmp_path):
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    sync = cell_db_sync_from_conf(
        conf_with(connections=[sqlite_cell(tmp_path / 'cell1.db', [row('cn1')])]), catalog)
    assert sync.sync_once()

    record = catalog.record_for_provider(uuid_for('cn1'), None)
    assert record.supported_instances == [('x86_64', 'kvm', 'hvm')]


# Stats, as nova-compute's resource tracker writes them ----------------------------------------

NOVA_STATS = ('{"num_instances": "3", "num_vm_active": "3", "num_task_None": "2", '
              '"num_task_spawning": "1", "num_os_type_linux": "3", '
              '"num_proj_5d3a5c1e4b2f4bbd9d1c3f8f1e2a7b6c": "3", "io_workload": "1", '
              '"failed_builds": "2", "cpu_arch": "x86_64", "boot_mode": null}')


def with_stats(r, stats, metrics=None):
    return (*r, None, None, None, None, stats, metrics)


def synced_over_a_hosts_file(tmp_path, hosts, rows, weight_setting=()):
    """A catalog of a hosts file (nodename -> its entry's other fields, YAML) and of a
    cell database of ``rows``, synced once."""
    path = tmp_path / 'hosts.yaml'
    path.write_text('hosts:\n' + ''.join(
        f'- {{nodename: {name}, provider_uuid: {uuid_for(name)}, {fields}}}\n'
        for name, fields in hosts.items()))
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    catalog.load_file(str(path))
    conf = conf_with(connections=[sqlite_cell(tmp_path / 'cell1.db', rows)])
    conf.set_override('weight_setting', list(weight_setting), group='metrics')
    assert cell_db_sync_from_conf(conf, catalog).sync_once()
    return catalog


def test_stats_keep_what_a_filter_or_weigher_reads_and_leave_the_per_state_counters():
    [node], problems = parse_rows([with_stats(row('cn1'), NOVA_STATS)])

    assert problems == []
    # What Nova's HostState reads, and a driver's own keys (``capabilities:`` may name
    # them); not the counters per VM state, task state, OS type and project; a null
    # value finds nothing in Nova either.
    assert node.stats == {'num_instances': '3', 'io_workload': '1', 'failed_builds': '2',
                          'cpu_arch': 'x86_64'}


def test_nodes_whose_kept_stats_are_equal_share_them_whatever_their_counters_say():
    other_project = NOVA_STATS.replace('5d3a5c1e', '0000aaaa')
    a, b, c, d = parse_rows([with_stats(row('cn1'), NOVA_STATS),
                             with_stats(row('cn2'), other_project),
                             with_stats(row('cn3'), NOVA_STATS.replace(
                                 '"failed_builds": "2"', '"failed_builds": "0"')),
                             row('cn4')], shared={})[0]

    assert a.stats is b.stats
    assert c.stats == {**a.stats, 'failed_builds': '0'}
    assert d.stats is None   # no column: a hosts file's stats stay
    assert parse_rows([with_stats(row('cn5'), '{}')])[0][0].stats is None   # nor an empty one


def test_stats_that_cannot_be_parsed_are_named_and_the_rest_of_the_row_kept():
    nodes, problems = parse_rows([with_stats(row('cn1'), '{nope'),
                                  with_stats(row('cn2'), '["num_instances"]')])

    assert [(n.nodename, n.stats, n.numa_topology is not None) for n in nodes] == [
        ('cn1', None, True), ('cn2', None, True)]
    assert [p.split(':')[0] for p in problems] == ['cn1 stats', 'cn2 stats']


def test_a_host_counts_instances_io_and_failed_builds_from_its_row_over_a_hosts_file(tmp_path):
    catalog = synced_over_a_hosts_file(
        tmp_path, {'cn1': 'stats: {num_instances: "9", io_workload: "9", failed_builds: "0"}',
                   'cn2': 'stats: {io_workload: "7"}'},
        [with_stats(row('cn1'), NOVA_STATS), row('cn2')])

    row_host, file_host = (
        HostState(uuid=uuid_for(name), record=catalog.record_for_provider(uuid_for(name), None),
                  summaries=[], allocation_candidates=[]) for name in ('cn1', 'cn2'))
    assert (row_host.num_instances, row_host.num_io_ops, row_host.failed_builds) == (3, 1, 2)
    assert file_host.num_io_ops == 7   # its row has no stats: the file's


# Metrics, as nova-compute's monitors write them ----------------------------------------------

def monitor_metrics(**values):
    return json.dumps([{'name': name.replace('_', '.'), 'value': value,
                        'timestamp': '2026-12-02T04:00:00.000000',
                        'source': 'nova.compute.monitors.cpu.virt_driver'}
                       for name, value in values.items()])


WEIGHED = frozenset({'cpu.percent', 'cpu.frequency'})


def test_the_metrics_weight_setting_names_are_read_as_nova_s_scheduler_reads_them():
    [node, quiet, unread], problems = parse_rows([
        with_stats(row('cn1'), None, monitor_metrics(cpu_percent=0.29, cpu_frequency=2400,
                                                     cpu_idle_time=123456)),
        with_stats(row('cn2'), None, '[]'),
        with_stats(row('cn3'), None, monitor_metrics(cpu_idle_time=1))], metric_names=WEIGHED)

    assert problems == []
    # Percentages times 100, then integers (MonitorMetricList.from_json); only the named.
    assert node.metrics == {'cpu.percent': 28.0, 'cpu.frequency': 2400.0}
    assert quiet.metrics is None       # no monitor: a hosts file's metrics stay
    assert unread.metrics == {}        # reported, none of the named: the host lacks them
    assert parse_rows([with_stats(row('cn1'), None, monitor_metrics(cpu_percent=0.29))]
                      )[0][0].metrics is None   # none named: not read


def test_metrics_that_cannot_be_parsed_are_named_and_the_rest_of_the_row_kept():
    nodes, problems = parse_rows([with_stats(row('cn1'), None, '{nope'),
                                  with_stats(row('cn2'), None, '[{"value": 1}]')],
                                 metric_names=WEIGHED)

    assert [(n.metrics, n.numa_topology is not None) for n in nodes] == [(None, True),
                                                                        (None, True)]
    assert [p.split(' ')[:2] for p in problems] == [['cn1', 'metrics:'], ['cn2', 'metrics']]


def test_a_reader_reads_metrics_only_when_the_weight_setting_names_some(tmp_path):
    url = sqlite_cell(tmp_path / 'cell1.db', [
        with_stats(row('cn1'), None, monitor_metrics(cpu_percent=0.5, cpu_frequency=2000))])
    conf = conf_with(connections=[url])
    [unnamed] = cell_readers_from_conf(conf)
    conf.set_override('weight_setting', ['cpu.percent=-1.0', 'cpu.frequency', 'cpu.idle.time=x'],
                      group='metrics')
    [named] = cell_readers_from_conf(conf)

    # A malformed entry names nothing, as for the MetricsFilter and MetricsWeigher.
    assert named.metric_names == {'cpu.percent'}
    assert [n.metrics for n in named.read()[0]] == [{'cpu.percent': 50.0}]
    assert [n.metrics for n in unnamed.read()[0]] == [None]
    with sqlite3.connect(tmp_path / 'cell1.db') as db:
        db.execute('ALTER TABLE compute_nodes DROP COLUMN metrics')
    assert [n.nodename for n in unnamed.read()[0]] == ['cn1']   # the column is not asked for


def test_a_host_weighs_its_row_s_metrics_over_a_hosts_file_s(tmp_path):
    catalog = synced_over_a_hosts_file(
        tmp_path, {'cn1': 'metrics: {cpu.percent: 0.9}', 'cn2': 'metrics: {cpu.percent: 0.7}'},
        [with_stats(row('cn1'), None, monitor_metrics(cpu_percent=0.25)),
         with_stats(row('cn2'), None, '[]')], weight_setting=['cpu.percent=-1.0'])

    assert catalog.record_for_provider(uuid_for('cn1'), None).metrics == {'cpu.percent': 25.0}
    assert catalog.record_for_provider(uuid_for('cn2'), None).metrics == {'cpu.percent': 70.0}


# Per-request reads ([cell_database] max_age) --------------------------------------------------

OTHER_CELL = numa_topology_json(numa_cell(0, cpuset=[5, 6], pcpuset=[7]))


class CountingReader(CellDatabaseReader):
    """A reader that counts the uuids it was asked for and can act while it reads."""

    def __init__(self, url, during_read=None):
        super().__init__(url)
        self.asked: list[list[str]] = []
        self.during_read = during_read

    def read(self):
        result = super().read()
        if self.during_read is not None:
            self.during_read()
        return result

    def read_nodes(self, provider_uuids):
        self.asked.append(sorted(provider_uuids))
        return super().read_nodes(provider_uuids)


def set_topology(path, name, topology):
    with sqlite3.connect(path) as db:
        db.execute('UPDATE compute_nodes SET numa_topology = ? WHERE hypervisor_hostname = ?',
                   (topology, name))


def cpuset(catalog, name):
    return catalog.record_for_provider(uuid_for(name), None).numa_topology.cells[0].cpuset


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def synced_cell(path, *rows):
    """A catalog, and a sync that has read ``rows`` once and reads a request's
    candidates before every request."""
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    sync = CellDatabaseSync(catalog, [CellDatabaseReader(sqlite_cell(path, list(rows)))],
                            interval=60, max_age=0)
    assert sync.sync_once()
    return catalog, sync


def test_a_request_reads_its_candidates_rows_before_it_is_decided(tmp_path):
    path = tmp_path / 'cell1.db'
    catalog, sync = synced_cell(path, row('cn1'), row('cn2'))
    set_topology(path, 'cn1', OTHER_CELL)
    set_topology(path, 'cn2', OTHER_CELL)

    sync.fresh_nodes([uuid_for('cn1')])

    assert cpuset(catalog, 'cn1') == {5, 6}   # read again: nova-compute's claim is seen
    assert cpuset(catalog, 'cn2') == {0, 1}   # not a candidate: not read


def test_rows_younger_than_max_age_are_not_read_again(tmp_path):
    catalog, clock = HostCatalog(default_cell_uuid=CELL_UUID), Clock()
    path = tmp_path / 'cell1.db'
    reader = CountingReader(sqlite_cell(path, [row('cn1')]))
    sync = CellDatabaseSync(catalog, [reader], interval=60, max_age=5, clock=clock)
    assert sync.sync_once()
    set_topology(path, 'cn1', OTHER_CELL)

    clock.now += 5
    sync.fresh_nodes([uuid_for('cn1')])
    assert (reader.asked, cpuset(catalog, 'cn1')) == ([], {0, 1})

    clock.now += 0.1
    sync.fresh_nodes([uuid_for('cn1')])
    assert (reader.asked, cpuset(catalog, 'cn1')) == ([[uuid_for('cn1')]], {5, 6})


def test_with_max_age_minus_one_only_the_periodic_sync_reads(tmp_path):
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    reader = CountingReader(sqlite_cell(tmp_path / 'cell1.db', [row('cn1')]))
    sync = cell_db_sync_from_conf(conf_with(connections=[reader.label], max_age=-1), catalog)
    sync._readers = [reader]
    assert sync.sync_once()

    sync.fresh_nodes([uuid_for('cn1'), uuid_for('unknown')])

    assert reader.asked == []


def test_a_node_is_read_from_the_cell_that_had_it_and_an_unknown_one_from_every_cell(tmp_path):
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    cell1 = CountingReader(sqlite_cell(tmp_path / 'cell1.db', [row('cn1')]))
    cell2 = CountingReader(sqlite_cell(tmp_path / 'cell2.db', [row('cn2')]))
    sync = CellDatabaseSync(catalog, [cell1, cell2], interval=60, max_age=0)
    assert sync.sync_once()

    sync.fresh_nodes([uuid_for('cn1'), uuid_for('cn2'), uuid_for('new')])

    assert cell1.asked == [sorted([uuid_for('cn1'), uuid_for('new')])]
    assert cell2.asked == [sorted([uuid_for('cn2'), uuid_for('new')])]


def test_a_periodic_read_begun_earlier_never_replaces_a_row_a_request_read_later(tmp_path):
    catalog, clock = HostCatalog(default_cell_uuid=CELL_UUID), Clock()
    path = tmp_path / 'cell1.db'
    url = sqlite_cell(path, [row('cn1'), row('cn2')])

    def a_request_reads_cn1_meanwhile():
        set_topology(path, 'cn1', OTHER_CELL)
        clock.now += 1
        sync.fresh_nodes([uuid_for('cn1')])

    sync = CellDatabaseSync(catalog, [CountingReader(url, a_request_reads_cn1_meanwhile)],
                            interval=60, max_age=0, clock=clock)
    assert sync.sync_once()   # its rows were read before the request's

    assert cpuset(catalog, 'cn1') == {5, 6}
    assert cpuset(catalog, 'cn2') == {0, 1}


def test_a_node_a_request_read_later_stays_though_the_periodic_read_had_none_yet(tmp_path):
    """A compute node added while a periodic read ran, and read for a request: the
    periodic read, begun before, does not take it away again."""
    catalog, clock = HostCatalog(default_cell_uuid=CELL_UUID), Clock()
    path = tmp_path / 'cell1.db'
    url = sqlite_cell(path, [row('cn1')], deleted=[row('cn2')])

    def cn2_is_added_and_a_request_reads_it_meanwhile():
        with sqlite3.connect(path) as db:
            db.execute("UPDATE compute_nodes SET deleted = 0 WHERE hypervisor_hostname = 'cn2'")
        clock.now += 1
        sync.look_up([uuid_for('cn2')])

    sync = CellDatabaseSync(
        catalog, [CountingReader(url, cn2_is_added_and_a_request_reads_it_meanwhile)],
        interval=60, max_age=0, clock=clock)
    assert sync.sync_once()

    assert cpuset(catalog, 'cn1') == cpuset(catalog, 'cn2') == {0, 1}


def test_the_catalog_holds_the_reader_s_own_nodes_and_the_sync_no_copy_of_them(tmp_path):
    """One index of a cell's nodes in a worker, the reader's: the sync keeps only when
    that read began and the nodes read since (none here)."""
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    reader = CellDatabaseReader(sqlite_cell(tmp_path / 'cell1.db', [row('cn1'), row('cn2')]))
    sync = CellDatabaseSync(catalog, [reader], interval=60, max_age=0)
    assert sync.sync_once()

    for name in ('cn1', 'cn2'):
        node = reader.last_read()[uuid_for(name)]
        assert catalog.record_for_provider(uuid_for(name), None).numa_topology is (
            node.numa_topology)
    assert not [v for v in vars(sync).values()
                if isinstance(v, dict) and uuid_for('cn1') in v]
    # One cell: the catalog's index of its nodes is the reader's.
    assert catalog._cell_db.by_provider is reader.last_read()


def test_a_cell_that_cannot_be_read_for_a_request_leaves_the_last_good_rows(tmp_path, caplog):
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    path = tmp_path / 'cell1.db'
    sync = CellDatabaseSync(catalog, [CellDatabaseReader(sqlite_cell(path, [row('cn1')]))],
                            interval=60, max_age=0)
    assert sync.sync_once()
    with sqlite3.connect(path) as db:
        db.execute('DROP TABLE compute_nodes')

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        sync.fresh_nodes([uuid_for('cn1')])

    assert cpuset(catalog, 'cn1') == {0, 1}
    [warning] = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert 'read of 1 candidate compute nodes failed (deciding with what was last read)' \
        in warning


# Reading again what mostly did not change ----------------------------------------------------

def test_a_row_as_it_was_at_the_last_read_gives_the_same_node_and_a_changed_row_a_new_one(
        tmp_path):
    path = tmp_path / 'cell1.db'
    reader = CellDatabaseReader(sqlite_cell(path, [row('cn1'), row('cn2')]))
    first = {n.nodename: n for n in reader.read()[0]}
    with sqlite3.connect(path) as db:
        db.execute('UPDATE compute_nodes SET numa_topology = ? WHERE hypervisor_hostname = ?',
                   (numa_topology_json(numa_cell(0, cpuset=[0], pcpuset=[1])), 'cn2'))
    second = {n.nodename: n for n in reader.read()[0]}

    assert second['cn1'] is first['cn1']
    assert second['cn2'] is not first['cn2']
    assert second['cn2'].numa_topology.cells[0].cpuset == {0}


def test_rows_are_read_a_batch_at_a_time_and_each_unchanged_one_keeps_its_node(
        tmp_path, monkeypatch):
    from scheduler.catalog import cell_db

    monkeypatch.setattr(cell_db, 'READ_BATCH', 2)
    names = [f'cn{i}' for i in range(5)]
    path = tmp_path / 'cell1.db'
    reader = CellDatabaseReader(sqlite_cell(path, [row(n) for n in names]))
    first = {n.nodename: n for n in reader.read()[0]}
    with sqlite3.connect(path) as db:
        db.execute('UPDATE compute_nodes SET cpu_allocation_ratio = 2.0 '
                   'WHERE hypervisor_hostname = ?', ('cn3',))
    second = {n.nodename: n for n in reader.read()[0]}

    assert sorted(first) == sorted(second) == names
    assert [n for n in names if second[n] is not first[n]] == ['cn3']
    assert second['cn3'].numa_topology.cpu_allocation_ratio == 2.0


@pytest.mark.parametrize('other', [
    ('a', 'b', None), ('a', 'bc', 'd'), ('ab', 'c', 'd'), ('a', 'b', 'e'), ('a', 'b', 1),
    ('a', 'b', 1.0), ('a', 'b', '1'), ('a', 'b', True), ('a', 'b', b'd'), ('a', 'b', 'd', None)])
def test_a_row_s_digest_tells_it_from_a_row_with_any_value_moved_changed_or_retyped(other):
    assert row_digest(('a', 'b', 'd')) == row_digest(('a', 'b', 'd'))
    assert row_digest(other) != row_digest(('a', 'b', 'd'))


def test_a_row_with_a_value_a_digest_cannot_take_has_none_and_is_parsed_at_every_read():
    assert row_digest(('a', {'cells': []})) is None
    assert row_digest(('a', ['x86_64'])) is None
    assert row_digest(('a', Decimal('sNaN'))) is None   # no hash at all


def test_equal_texts_give_one_shared_object_each_and_other_ratios_another_topology():
    shared: dict = {}
    a, b, c = parse_rows([row('cn1'), row('cn2'), row('cn3', cpu_ratio=2.0)],
                         shared=shared)[0]
    assert a.numa_topology is b.numa_topology
    assert a.pci_stats is b.pci_stats is c.pci_stats
    assert a.supported_instances is b.supported_instances
    assert c.numa_topology is not a.numa_topology
    assert (a.numa_topology.cpu_allocation_ratio, c.numa_topology.cpu_allocation_ratio) == (
        4.0, 2.0)
    assert c.numa_topology.cells == a.numa_topology.cells


def test_names_and_what_many_nodes_report_alike_are_one_object_each():
    first, second = parse_rows([
        (*row('cn1', host='compute-1'), '192.0.2.1', 'QEMU', 8002000),
        (uuid_for('cn2').upper(), ''.join(['cn', '2']), ''.join(['compute-', '2']),
         *row('cn2')[3:], '192.0.2.2', ''.join(['QE', 'MU']), 8001999 + 1)], shared={})[0]

    # The hosts file and the services read intern the same names (one string per host
    # at 50,000 hosts, whichever sources name it).
    assert first.nodename is sys.intern('cn1') and second.nodename is sys.intern('cn2')
    assert second.service_host is sys.intern('compute-2')
    assert second.provider_uuid is sys.intern(uuid_for('cn2'))
    assert second.hypervisor_type is first.hypervisor_type
    assert second.hypervisor_version is first.hypervisor_version


def test_nodes_of_one_model_share_one_description_and_each_keeps_its_own_fields():
    # One object per node for what many nodes say alike was most of what the cell
    # databases added to a worker at 50,000 nodes.
    shared: dict = {}
    first, second, other = parse_rows([
        (*row('cn1'), '192.0.2.1', 'QEMU', 8002000, '{"model": "a"}', '{"io_workload": "1"}'),
        (*row('cn2'), '192.0.2.2', 'QEMU', 8002001, '{"model": "a"}', '{"io_workload": "2"}'),
        (*row('cn3', pci=None), '192.0.2.3', 'QEMU', 8002000, '{"model": "a"}', None)],
        shared=shared)[0]
    assert first.described is second.described
    assert other.described is not first.described and other.pci_stats is None
    assert (second.host_ip, second.hypervisor_version, second.stats, second.cpu_info) == (
        '192.0.2.2', 8002001, {'io_workload': '2'}, {'model': 'a'})
    # Read again (rows written since), the model's nodes are described as before; a node
    # equals another only with all of its fields equal.
    again = parse_rows([(*row('cn1'), '192.0.2.1', 'QEMU', 8002000, '{"model": "a"}',
                         '{"io_workload": "1"}')], shared=shared)[0][0]
    assert again.described is first.described and again == first
    assert again != second and hash(again) == hash(first)
    assert again.with_version(7) == again and again.with_version(7).row_version == 7
    with pytest.raises(AttributeError):
        again.host_ip = '192.0.2.9'


def test_a_reader_shares_what_it_parsed_with_its_reads_by_uuid(tmp_path):
    reader = CellDatabaseReader(sqlite_cell(tmp_path / 'cell1.db', [row('cn1'), row('cn2')]))
    [first, _], _ = reader.read()
    [again], _ = reader.read_nodes([uuid_for('cn1')])
    assert again.numa_topology is first.numa_topology


def test_a_row_with_a_problem_is_named_at_every_read_not_only_the_first(tmp_path):
    reader = CellDatabaseReader(sqlite_cell(tmp_path / 'cell1.db',
                                            [row('cn1', numa='{not json'), row('cn2')]))
    for _ in range(2):
        nodes, problems = reader.read()
        assert sorted(n.nodename for n in nodes) == ['cn1', 'cn2']
        assert len(problems) == 1 and 'cn1 numa_topology' in problems[0]


def test_the_same_nodes_again_change_nothing_a_new_topology_changes_its_host_only(tmp_path):
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    nodes = parse_rows([row('cn1', host='compute-1'), row('cn2', host='compute-2')])[0]
    catalog.apply_cell_db_nodes(nodes)
    uuids = [uuid_for('cn1'), uuid_for('cn2')]
    before = [record for record, *_ in catalog.host_rows(uuids)]   # as a table reads them
    version = catalog.versions()

    catalog.apply_cell_db_nodes(list(nodes))
    assert catalog.versions() == version

    repinned = parse_rows([row('cn2', host='compute-2', numa=numa_topology_json(
        numa_cell(0, cpuset=[0], pcpuset=[1])))])[0]
    catalog.apply_cell_db_nodes([nodes[0], *repinned])
    assert catalog.changed_hosts_since(version) == {'compute-2'}
    cn1, cn2 = (record for record, *_ in catalog.host_rows(uuids))
    assert cn1 is before[0]
    assert cn2.numa_topology.cells[0].cpuset == {0}


def two_nodes_read():
    """A catalog that took cn1 (on compute-1) and cn2 (on compute-2) from a cell
    database, their rows, and the catalog's version then."""
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    rows = [row('cn1', host='compute-1'), row('cn2', host='compute-2')]
    catalog.apply_cell_db_nodes(parse_rows(rows)[0])
    return catalog, rows, catalog.versions()


def cn2_as(change, rows):
    """cn2's row renamed or moved to another service host, or a new node's row."""
    node_uuid, _, _, *rest = rows[1]
    return {'renamed': (node_uuid, 'cn2-new', 'compute-2', *rest),
            'moved': (node_uuid, 'cn2', 'compute-9', *rest),
            'added': row('cn3')}[change]


@pytest.mark.parametrize('change', ['renamed', 'moved', 'gone', 'added'])
def test_a_node_renamed_moved_gone_or_added_is_a_change_of_everything(change):
    catalog, rows, version = two_nodes_read()
    rows = ([rows[0]] if change == 'gone' else
            [*rows, cn2_as(change, rows)] if change == 'added' else
            [rows[0], cn2_as(change, rows)])

    catalog.apply_cell_db_nodes(parse_rows(rows)[0])

    assert catalog.changed_hosts_since(version) is None


# A request's read of its candidates' rows ----------------------------------------------------

def test_a_request_s_read_of_unchanged_rows_gives_the_last_whole_read_s_nodes(tmp_path):
    path = tmp_path / 'cell1.db'
    reader = CellDatabaseReader(sqlite_cell(path, [row('cn1'), row('cn2')]))
    whole = {n.nodename: n for n in reader.read()[0]}
    set_topology(path, 'cn2', OTHER_CELL)

    again = {n.nodename: n for n in reader.read_nodes([uuid_for('cn1'), uuid_for('cn2')])[0]}
    named = reader.read_named(None, 'cn1')[0]

    assert again['cn1'] is whole['cn1'] and named == [whole['cn1']]
    assert again['cn2'] is not whole['cn2']
    assert again['cn2'].numa_topology.cells[0].cpuset == {5, 6}


def test_a_request_s_read_that_finds_its_candidates_unchanged_changes_nothing(tmp_path):
    catalog, sync = synced_cell(tmp_path / 'cell1.db', row('cn1'), row('cn2'))
    uuids = [uuid_for('cn1'), uuid_for('cn2')]
    before = [record for record, *_ in catalog.host_rows(uuids)]
    version = catalog.versions()

    sync.fresh_nodes(uuids)

    assert catalog.versions() == version
    assert [record for record, *_ in catalog.host_rows(uuids)] == before


def test_a_request_s_read_of_a_changed_row_changes_its_host_only(tmp_path):
    path = tmp_path / 'cell1.db'
    catalog, sync = synced_cell(path, row('cn1', host='compute-1'),
                                row('cn2', host='compute-2'))
    uuids = [uuid_for('cn1'), uuid_for('cn2')]
    cn1, _ = (record for record, *_ in catalog.host_rows(uuids))
    version = catalog.versions()
    set_topology(path, 'cn2', OTHER_CELL)

    sync.fresh_nodes(uuids)

    assert catalog.changed_hosts_since(version) == {'compute-2'}
    again, _ = (record for record, *_ in catalog.host_rows(uuids))
    assert again is cn1
    assert cpuset(catalog, 'cn2') == {5, 6}
    # Found by its name as by its uuid: the index by node name holds the new row too.
    assert catalog.find_nodes('compute-2', 'cn2')[0].numa_topology.cells[0].cpuset == {5, 6}


@pytest.mark.parametrize('change', ['renamed', 'moved', 'added'])
def test_a_node_a_request_reads_renamed_moved_or_new_is_a_change_of_everything(change):
    catalog, rows, version = two_nodes_read()
    read = cn2_as(change, rows)

    catalog.add_cell_db_nodes(parse_rows([read])[0])

    assert catalog.changed_hosts_since(version) is None
    assert catalog.record_for_provider(read[0].lower(), None).nodename == read[1]


@pytest.mark.parametrize('max_age, opened', [(0, 1), (5, 1), (-1, 3)])
def test_a_worker_keeps_a_connection_to_a_cell_while_requests_may_wait_for_its_rows(
        tmp_path, max_age, opened, monkeypatch):
    url = sqlite_cell(tmp_path / 'cell1.db', [row('cn1')])
    sync = cell_db_sync_from_conf(conf_with(connections=[url], max_age=max_age),
                                  HostCatalog(default_cell_uuid=CELL_UUID))
    [reader] = sync._readers
    connects = []
    open_connection = reader._open
    monkeypatch.setattr(reader, '_open', lambda: connects.append(1) or open_connection())

    for _ in range(3):
        assert [n.nodename for n in reader.read_nodes([uuid_for('cn1')])[0]] == ['cn1']

    assert len(connects) == opened


def test_reads_of_one_cell_at_the_same_time_do_not_wait_for_the_kept_connection(tmp_path):
    url = sqlite_cell(tmp_path / 'cell1.db', [row('cn1')])
    sync = cell_db_sync_from_conf(conf_with(connections=[url], max_age=0),
                                  HostCatalog(default_cell_uuid=CELL_UUID))
    [reader] = sync._readers

    with reader.connect(), reader.connect():    # a periodic read and another request's
        nodes, _ = reader.read_nodes([uuid_for('cn1')])

    assert [n.nodename for n in nodes] == ['cn1']


def test_reading_no_compute_nodes_by_uuid_asks_the_database_nothing(tmp_path, monkeypatch):
    url = sqlite_cell(tmp_path / 'cell1.db', [row('cn1')])
    sync = cell_db_sync_from_conf(conf_with(connections=[url], max_age=0),
                                  HostCatalog(default_cell_uuid=CELL_UUID))
    [reader] = sync._readers
    connects = []
    open_connection = reader._open
    monkeypatch.setattr(reader, '_open', lambda: connects.append(1) or open_connection())

    assert reader.read_nodes([]) == ([], [])
    assert connects == []
