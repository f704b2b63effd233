"""The cell database source against the REAL MariaDB and PostgreSQL of this machine.

Each test gets a throwaway Nova cell database (Nova's compute_nodes table, rows
holding the primitives nova-compute writes) and reads it as the scheduler
does, through a user that may only SELECT, into the host catalog; the
HostStates then carry the NUMA topology and PCI pools the filters judge.
"""
from __future__ import annotations

import contextlib
import json
import logging
import random
import re
import uuid
from collections.abc import Iterator

import pytest

from scheduler.catalog import HostCatalog
from scheduler.catalog.cell_db import CellDatabaseError, CellDatabaseReader, CellDatabaseSync
from scheduler.catalog.dbapi import DirectConnection
from scheduler.exceptions import NoValidHost
from scheduler.filters.numa_topology import NUMATopologyFilter
from scheduler.host_state import HostState
from scheduler.objects.codec import encode_request_spec
from scheduler.objects.spec import Flavor, RequestSpec
from tests.builders import CELL, CONTEXT, boot_spec, new_uuids
from tests.fixtures.cell_databases import READER_PASSWORD, CellDatabase, ComputeNodeRow
from tests.fixtures.nova_host_data import (
    numa_cell,
    numa_topology_json,
    pci_pool,
    pci_stats_json,
    two_cell_host,
)
from tests.functional.cloud import add_host

BIG = str(uuid.uuid5(uuid.NAMESPACE_DNS, 'big.example.org'))
SMALL = str(uuid.uuid5(uuid.NAMESPACE_DNS, 'small.example.org'))
GONE = str(uuid.uuid5(uuid.NAMESPACE_DNS, 'gone.example.org'))
UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')
ROWS = [
    ComputeNodeRow(uuid=BIG, nodename='big.example.org', host='big', cpu_allocation_ratio=2.0,
                   stats=json.dumps({'num_instances': '2', 'num_vm_active': '2',
                                     'num_task_None': '2', 'num_os_type_None': '2',
                                     'num_proj_1f2e3d4c5b6a4798a1b2c3d4e5f60718': '2',
                                     'io_workload': '1', 'failed_builds': '3'}),
                   metrics=json.dumps([{'name': 'cpu.percent', 'value': 0.29,
                                        'timestamp': '2026-12-02T04:00:00.000000',
                                        'source': 'nova.compute.monitors.cpu.virt_driver'}]),
                   numa_topology=two_cell_host(8192),
                   pci_stats=pci_stats_json(pci_pool('8086', '154d', 7, numa_node=1,
                                                     dev_type='type-VF',
                                                     physical_network='physnet1'))),
    ComputeNodeRow(uuid=SMALL, nodename='small.example.org', host='small',
                   numa_topology=numa_topology_json(numa_cell(0, cpuset=[0, 1, 2, 3])),
                   pci_stats=pci_stats_json()),
    ComputeNodeRow(uuid=GONE, nodename='gone.example.org', host='gone', deleted=True,
                   numa_topology=two_cell_host()),
]


def host_state(catalog: HostCatalog, provider_uuid: str) -> HostState:
    return HostState(uuid=provider_uuid, record=catalog.record_for_provider(provider_uuid, None),
                     summaries=[], allocation_candidates=[])


def test_the_catalog_gets_each_nodes_topology_and_pools_from_a_select_only_user(
        cell_db: CellDatabase):
    cell_db.insert(ROWS)
    catalog = HostCatalog(default_cell_uuid=CELL)

    assert CellDatabaseSync(catalog, [CellDatabaseReader(cell_db.reader_url)],
                            interval=60).sync_once()

    big, small = host_state(catalog, BIG), host_state(catalog, SMALL)
    assert (big.host, big.nodename) == ('big', 'big.example.org')
    assert [c.pcpuset for c in big.numa_topology.cells] == [{4, 5, 6, 7}, {12, 13, 14, 15}]
    assert big.numa_topology.cpu_allocation_ratio == 2.0
    assert [(p.vendor_id, p.count, p.numa_node, p['physical_network'])
            for p in big.pci_stats.pools] == [('8086', 7, 1, 'physnet1')]
    assert len(small.numa_topology.cells) == 1 and small.pci_stats.pools == ()
    # What Nova's HostState takes from the stats column; nova-compute's counters are not kept.
    assert (big.num_instances, big.num_io_ops, big.failed_builds) == (2, 1, 3)
    assert big.stats == {'num_instances': '2', 'io_workload': '1', 'failed_builds': '3'}
    assert (small.num_instances, small.stats) == (0, {})
    assert big.metrics == {}   # [metrics] weight_setting names none: the column is not read

    # With metrics named, the column is read too, as Nova's scheduler reads it.
    reader = CellDatabaseReader(cell_db.reader_url, metric_names=frozenset({'cpu.percent'}))
    assert {n.nodename: n.metrics for n in reader.read()[0]} == {
        'big.example.org': {'cpu.percent': 28.0}, 'small.example.org': None}
    assert catalog.snapshot_stats()['cell_db_nodes'] == 2  # the deleted row is not read
    assert host_state(catalog, GONE).numa_topology is None

    # What the filter then decides with it: two NUMA nodes fit only the big host.
    two_nodes = RequestSpec(flavor=Flavor(vcpus=4, memory_mb=4096,
                                          extra_specs={'hw:numa_nodes': '2'}))
    f = NUMATopologyFilter()
    assert f.filter_result(big, two_nodes).passed
    assert not f.filter_result(small, two_nodes).passed


def test_even_credentials_that_may_write_get_a_read_only_session(cell_db: CellDatabase):
    cell_db.insert(ROWS[:1])
    reader = CellDatabaseReader(cell_db.admin_url)

    with pytest.raises(CellDatabaseError, match='read.only|READ ONLY'):
        with reader.connect() as connection:
            connection.rows("UPDATE compute_nodes SET host = 'hijacked'")
    # A statement on its own (outside any transaction begun by hand) too,
    # through a connection kept as the reads before a request keep theirs.
    kept = CellDatabaseReader(cell_db.admin_url, keep_connection=True)
    kept.each_on_its_own('SELECT host FROM compute_nodes', [{}])
    with pytest.raises(CellDatabaseError, match='read.only|READ ONLY'):
        kept.each_on_its_own("UPDATE compute_nodes SET host = 'hijacked'", [{}])
    kept.close()

    assert cell_db.query('SELECT host FROM compute_nodes') == [('big',)]
    # The same session reads: only writes are refused.
    nodes, problems = reader.read()
    assert [n.service_host for n in nodes] == ['big'] and problems == []


def test_a_read_finds_every_write_since_the_last_and_postgresql_sends_only_the_rows_written(
        cell_db: CellDatabase):
    untouched, gone, new = (str(uuid.uuid5(uuid.NAMESPACE_DNS, f'{name}.example.org'))
                            for name in ('untouched', 'gone-later', 'new'))
    # Enough rows not written that the ones written are fewer than CHANGED_SHARE of them.
    others = [ComputeNodeRow(uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, f'{i}.example.org')),
                             nodename=f'{i}.example.org', host=f'other-{i}') for i in range(4)]
    cell_db.insert([*ROWS[:2],
                    ComputeNodeRow(uuid=untouched, nodename='untouched.example.org',
                                   host='untouched', numa_topology=two_cell_host()),
                    ComputeNodeRow(uuid=gone, nodename='gone-later.example.org',
                                   host='gone-later'), *others])
    reader = CellDatabaseReader(cell_db.reader_url)
    before = {n.provider_uuid: n for n in reader.read()[0]}
    # What nova-compute and nova-manage write between two reads: a claim on BIG's
    # NUMA node, SMALL's row written again with the same values, a node deleted
    # (soft, as Nova does) and one added.
    cell_db.set_numa_topology(BIG, two_cell_host(4096))
    cell_db.query_commit(f"UPDATE compute_nodes SET cpu_allocation_ratio = "
                         f"cpu_allocation_ratio WHERE uuid = '{SMALL}'")
    cell_db.query_commit(f"UPDATE compute_nodes SET deleted = id WHERE uuid = '{gone}'")
    cell_db.insert([ComputeNodeRow(uuid=new, nodename='new.example.org', host='new')])

    with statements_sent() as sent:
        after = {n.provider_uuid: n for n in reader.read()[0]}

    assert set(after) == {BIG, SMALL, untouched, new, *(o.uuid for o in others)}
    assert after[BIG] != before[BIG]
    assert after[BIG].numa_topology == cell_db_node(cell_db, BIG).numa_topology
    assert after[SMALL] == before[SMALL]
    assert after[untouched] is before[untouched]   # not parsed again
    if cell_db.backend == 'postgresql':
        # The versions of all, then the rows' texts again for the rows written only
        # (SMALL's too: written is written).
        [(versions, named), (rows_written, uuids)] = sent
        assert 'numa_topology' not in versions and named == []
        assert 'numa_topology' in rows_written and 'AND uuid = ANY' in rows_written
        assert sorted(uuids) == sorted([BIG, SMALL, new])
    else:
        [(whole, _)] = sent   # every row, as before
        assert whole.startswith('SELECT uuid, hypervisor_hostname')

    # A request's read of its candidates gives the periodic read's node for a row not
    # written since, on every backend.
    assert reader.read_nodes([untouched])[0] == [after[untouched]]
    assert reader.read_nodes([untouched])[0][0] is after[untouched]


def test_a_kept_reader_reads_what_a_new_reader_reads_after_random_writes(cell_db: CellDatabase):
    rng = random.Random(20261130)
    topologies = [None, two_cell_host(), two_cell_host(4096),
                  numa_topology_json(numa_cell(0, cpuset=[0, 1, 2, 3]))]
    names = iter(range(10**6))

    def row() -> ComputeNodeRow:
        i = next(names)
        return ComputeNodeRow(uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, f'r{i}.example.org')),
                              nodename=f'r{i}.example.org', host=f'r{i}',
                              numa_topology=rng.choice(topologies))

    live = [row() for _ in range(40)]
    cell_db.insert(live)
    kept = CellDatabaseReader(cell_db.reader_url)
    kept.read()
    for _ in range(6):
        # Each round writes a few rows or most of them: both ways of reading again.
        for r in rng.sample(live, rng.choice((1, 3, 8, 30))):
            what = rng.random()
            if what < 0.5:
                cell_db.set_numa_topology(r.uuid, rng.choice(topologies[1:]))
            elif what < 0.8:
                cell_db.query_commit(f"UPDATE compute_nodes SET cpu_allocation_ratio = "
                                     f"cpu_allocation_ratio WHERE uuid = '{r.uuid}'")
            else:
                cell_db.query_commit(f"UPDATE compute_nodes SET deleted = id "
                                     f"WHERE uuid = '{r.uuid}'")
                live.remove(r)
        added = [row() for _ in range(rng.randint(0, 3))]
        cell_db.insert(added)
        live += added

        nodes, problems = kept.read()
        fresh, _ = CellDatabaseReader(cell_db.reader_url).read()
        assert not problems
        assert sorted(nodes, key=lambda n: n.provider_uuid) == sorted(
            fresh, key=lambda n: n.provider_uuid)
        assert {n.provider_uuid for n in nodes} == {r.uuid for r in live}


@contextlib.contextmanager
def statements_sent() -> Iterator[list[tuple[str, list[str]]]]:
    """The SELECTs any reader sent meanwhile, each with the uuids it names (bound, or
    written into the statement)."""
    sent: list[tuple[str, list[str]]] = []
    rows, chunks = DirectConnection.rows, DirectConnection.chunks

    def record(statement, parameters):
        if statement.lstrip().upper().startswith('SELECT'):
            sent.append((statement, UUID.findall(f'{statement} {parameters!r}')))

    def recorded_rows(self, query, parameters=None):
        record(query, parameters)
        return rows(self, query, parameters)

    def recorded_chunks(self, query, size, parameters=None):
        record(query, parameters)
        return chunks(self, query, size, parameters)

    DirectConnection.rows, DirectConnection.chunks = recorded_rows, recorded_chunks
    try:
        yield sent
    finally:
        DirectConnection.rows, DirectConnection.chunks = rows, chunks


def cell_db_node(cell_db: CellDatabase, node_uuid: str):
    """The node as a fresh reader finds it."""
    [node] = CellDatabaseReader(cell_db.reader_url).read_nodes([node_uuid])[0]
    return node


def test_the_reader_user_may_only_select(cell_db: CellDatabase):
    reader = CellDatabaseReader(cell_db.reader_url)
    with pytest.raises(CellDatabaseError):
        with reader.connect() as connection:
            connection.rows('CREATE TABLE stolen (id INTEGER)')


def test_a_cell_that_stops_answering_keeps_its_last_good_data_and_no_password_is_logged(
        cell_db: CellDatabase, caplog):
    cell_db.insert(ROWS)
    catalog = HostCatalog(default_cell_uuid=CELL)
    sync = CellDatabaseSync(catalog, [CellDatabaseReader(cell_db.reader_url)], interval=60)
    assert sync.sync_once()
    cell_db.revoke_reader()

    with caplog.at_level(logging.DEBUG):
        assert not sync.sync_once()

    assert host_state(catalog, BIG).numa_topology is not None
    logged = '\n'.join(r.getMessage() for r in caplog.records)
    assert 'could not be read (1 in a row; data is' in logged
    assert f'{cell_db.reader_user}:***@' in logged
    assert READER_PASSWORD not in logged


def test_the_service_reads_the_cell_database_and_places_a_two_node_guest_where_it_fits(
        mariadb_cell: CellDatabase, start_scheduler, placement_client):
    mariadb_cell.insert(ROWS)
    # The small host has more memory: without NUMA data the weighers would pick it.
    # Providers named like the nodes, with the compute node uuids as provider uuids.
    assert add_host(placement_client, 'big.example.org', vcpus=16, ram_mb=16384) == BIG
    assert add_host(placement_client, 'small.example.org', vcpus=16, ram_mb=65536) == SMALL
    running = start_scheduler(**{
        'filter_scheduler.enabled_filters': ['ComputeFilter', 'NUMATopologyFilter'],
        'cell_database.connections': [mariadb_cell.reader_url]})
    [instance] = new_uuids(1)

    [selections] = running.client.select_destinations(
        CONTEXT, encode_request_spec(boot_spec(vcpus=4, ram_mb=4096,
                                               extra_specs={'hw:numa_nodes': '2'})),
        [instance], return_alternates=True)

    assert [(s.service_host, s.nodename) for s in selections] == [('big', 'big.example.org')]
    assert set(placement_client.get_allocations(instance).allocations) == {BIG}


def test_what_nova_compute_claimed_a_moment_ago_is_read_before_the_next_numa_request(
        cell_db: CellDatabase, start_scheduler, placement_client):
    # The periodic read is a minute apart; a NUMA request reads its candidates'
    # rows itself (as nova-scheduler does per request), so a NUMA cell that
    # nova-compute just filled is not offered again.
    cell_db.insert(ROWS[:1])
    assert add_host(placement_client, 'big.example.org', vcpus=16, ram_mb=65536) == BIG
    running = start_scheduler(**{
        'filter_scheduler.enabled_filters': ['ComputeFilter', 'NUMATopologyFilter'],
        'cell_database.connections': [cell_db.reader_url],
        'cell_database.sync_interval': 3600})
    two_nodes = encode_request_spec(boot_spec(vcpus=4, ram_mb=4096,
                                              extra_specs={'hw:numa_nodes': '2'}))
    [first, second] = new_uuids(2)
    [selections] = running.client.select_destinations(CONTEXT, two_nodes, [first],
                                                       return_alternates=False)
    assert selections[0].service_host == 'big'

    cell_db.set_numa_topology(BIG, numa_topology_json(
        *(numa_cell(i, cpuset=cpus, memory=8192, memory_usage=8192,
                    pages=((4, 2097152, 2097152),))
          for i, cpus in ((0, [0, 1, 2, 3]), (1, [8, 9, 10, 11])))))

    with pytest.raises(NoValidHost):
        running.client.select_destinations(CONTEXT, two_nodes, [second],
                                           return_alternates=False)
    assert placement_client.get_allocations(second).allocations == {}
