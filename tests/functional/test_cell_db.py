"""The cell database source against the REAL MariaDB and PostgreSQL of this machine.

Each test gets a throwaway Nova cell database (Nova's compute_nodes table, rows
holding the primitives nova-compute writes) and reads it as the scheduler
does, through a user that may only SELECT, into the host catalog; the
HostStates then carry the NUMA topology and PCI pools the filters judge.
"""
from __future__ import annotations

import logging
import uuid

import pytest

from scheduler.catalog import HostCatalog
from scheduler.catalog.cell_db import CellDatabaseError, CellDatabaseReader, CellDatabaseSync
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
ROWS = [
    ComputeNodeRow(uuid=BIG, nodename='big.example.org', host='big', cpu_allocation_ratio=2.0,
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
            connection.exec_driver_sql("UPDATE compute_nodes SET host = 'hijacked'")

    assert cell_db.query('SELECT host FROM compute_nodes') == [('big',)]
    # The same session reads: only writes are refused.
    nodes, problems = reader.read()
    assert [n.service_host for n in nodes] == ['big'] and problems == []


def test_the_reader_user_may_only_select(cell_db: CellDatabase):
    reader = CellDatabaseReader(cell_db.reader_url)
    with pytest.raises(CellDatabaseError):
        with reader.connect() as connection:
            connection.exec_driver_sql('CREATE TABLE stolen (id INTEGER)')


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
