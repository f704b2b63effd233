"""Host NUMA topologies and PCI pools: Nova's primitives and the hosts file read alike."""
from __future__ import annotations

import pytest
import yaml

from scheduler.catalog.hosts_file import parse_hosts
from scheduler.exceptions import CatalogError, HostDataError
from scheduler.objects.numa import MemoryPages, parse_host_numa_topology
from scheduler.objects.pci import parse_pci_pools
from tests.builders import CELL_UUID
from tests.fixtures.nova_host_data import (
    numa_cell,
    numa_topology_json,
    pci_pool,
    pci_stats_json,
    two_cell_host,
)


def test_novas_numa_topology_column_reads_into_cells():
    topology = parse_host_numa_topology(two_cell_host(8192), where='row', strict=False)

    first, second = topology.cells
    assert (first.id, first.cpuset, first.pcpuset, first.memory) == (0, {0, 1, 2, 3},
                                                                      {4, 5, 6, 7}, 8192)
    assert first.siblings == ({0, 1}, {2, 3}, {4, 5}, {6, 7})
    assert first.mempages == (MemoryPages(4, 8192 * 256), MemoryPages(2048, 0))
    assert (first.socket, second.socket) == (0, 1)
    assert topology.has_threads
    assert topology.cpu_allocation_ratio is None  # not in the column: another one has it


def test_usage_pinned_cpus_and_network_affinity_are_read():
    text = numa_topology_json(numa_cell(0, cpuset=[0, 1], pcpuset=[2, 3], cpu_usage=3,
                                        memory_usage=2048, pinned_cpus=[2],
                                        pages=((4, 100, 10),), physnets=['physnet1'],
                                        tunneled=True))

    [cell] = parse_host_numa_topology(text, where='row', strict=False).cells

    assert (cell.cpu_usage, cell.memory_usage, cell.pinned_cpus) == (3, 2048, {2})
    assert cell.free_pcpus == {3}
    assert cell.mempages[0].free == 90
    assert (cell.physnets, cell.tunneled) == ({'physnet1'}, True)


def test_novas_pci_stats_column_reads_into_pools_that_look_like_novas_pool_dicts():
    text = pci_stats_json(pci_pool('8086', '154D', 7, numa_node=1, dev_type='type-VF',
                                   physical_network='physnet1'),
                          pci_pool('10de', '1eb8', 1, numa_node=None, dev_type='type-PCI'))

    stats = parse_pci_pools(text, where='row', strict=False)

    vf, gpu = stats.pools
    assert (vf.vendor_id, vf.product_id, vf.count, vf.numa_node) == ('8086', '154d', 7, 1)
    assert vf['physical_network'] == 'physnet1' and vf.get('dev_type') == 'type-VF'
    assert gpu['numa_node'] is None
    assert stats.free_devices == 8


def test_fields_a_newer_nova_adds_are_ignored_in_its_rows_but_not_in_the_hosts_file():
    cell = numa_cell(0, cpuset=[0])
    cell['nova_object.data']['future_field'] = 1
    text = numa_topology_json(cell)

    assert parse_host_numa_topology(text, where='row', strict=False).cells[0].cpuset == {0}
    with pytest.raises(HostDataError, match=r'row.cells\[0\]: unknown key\(s\) future_field'):
        parse_host_numa_topology(text, where='row', strict=True)


BAD = [
    ('not json', '{cells', 'row: not JSON'),
    ('cell without memory', {'cells': [{'id': 0, 'cpuset': [0]}]},
     r'row.cells\[0\].memory: is required'),
    ('boolean memory', {'cells': [{'id': 0, 'memory': True}]},
     r'row.cells\[0\].memory: must be an integer, got a boolean'),
    ('negative cpu', {'cells': [{'id': 0, 'memory': 1, 'cpuset': [-1]}]},
     r'row.cells\[0\].cpuset: CPU ids must be integers >= 0'),
    ('duplicate cell ids', {'cells': [{'id': 0, 'memory': 1}, {'id': 0, 'memory': 1}]},
     'cell ids must be unique'),
    ('another object', {'nova_object.name': 'ComputeNode', 'nova_object.data': {}},
     'expected a NUMATopology object'),
    ('zero ratio', {'cells': [], 'cpu_allocation_ratio': 0},
     'cpu_allocation_ratio: must be a positive number'),
]


@pytest.mark.parametrize('value,message', [(v, m) for _, v, m in BAD],
                         ids=[name for name, _, _ in BAD])
def test_a_topology_that_is_not_novas_shape_is_refused_naming_the_field(value, message):
    with pytest.raises(HostDataError, match=message):
        parse_host_numa_topology(value, where='row', strict=True)


# The hosts file -----------------------------------------------------------------------------

HOSTS = """
hosts:
  - nodename: cn1
    numa_topology:
      cpu_allocation_ratio: 4.0
      ram_allocation_ratio: 1.5
      cells:
        - {id: 0, cpuset: 0-3, pcpuset: "4-7,^5", memory: 16384, siblings: [[4, 5], [6, 7]],
           mempages: [{size_kb: 2048, total: 1024, used: 12}], socket: 0,
           network_metadata: {physnets: [physnet1], tunneled: true},
           provider_uuid: 6a6c3c8e-4b43-4d0e-8a7f-3e1c0b6d9a01}
    pci_pools:
      - {vendor_id: "8086", product_id: "154d", count: 2, numa_node: 0,
         tags: {dev_type: type-VF}}
  - nodename: cn2
"""


def hosts(text):
    return parse_hosts(yaml.safe_load(text), source='hosts.yaml', default_cell_uuid=CELL_UUID).hosts


def test_the_hosts_file_gives_a_host_its_numa_topology_and_pci_pools():
    cn1, cn2 = hosts(HOSTS)

    topology = cn1.numa_topology
    assert (topology.cpu_allocation_ratio, topology.ram_allocation_ratio) == (4.0, 1.5)
    [cell] = topology.cells
    assert (cell.cpuset, cell.pcpuset) == ({0, 1, 2, 3}, {4, 6, 7})
    assert cell.pages(2048).free == 1012
    assert cell.provider_uuid == '6a6c3c8e-4b43-4d0e-8a7f-3e1c0b6d9a01'
    assert (cell.physnets, cell.tunneled) == ({'physnet1'}, True)
    assert [(p.vendor_id, p.count, p.dev_type) for p in cn1.pci_pools.pools] == [
        ('8086', 2, 'type-VF')]
    assert (cn2.numa_topology, cn2.pci_pools) == (None, None)


HOSTS_ERRORS = [
    ('numa_topology: {cells: [{id: 0, memory: 1, cpus: [0]}]}',
     r"hosts\[0\] \(cn1\): numa_topology.cells\[0\]: unknown key\(s\) cpus"),
    ('numa_topology: {cells: [{id: 0, memory: 1, pcpuset: [0], pinned_cpus: [1]}]}',
     'pinned_cpus: must be a subset of pcpuset'),
    ('pci_pools: [{vendor_id: 8086, product_id: "154d", count: 1}]',
     r"pci_pools\[0\].vendor_id: must be a string of hex digits; quote it \('8086'\)"),
    ('pci_pools: [{vendor_id: "8086", product_id: "154d"}]',
     r'pci_pools\[0\].count: is required'),
    ('pci_pools: {vendor_id: "8086"}', 'pci_pools: must be a list of pools, got a mapping'),
]


@pytest.mark.parametrize('entry,message', HOSTS_ERRORS)
def test_a_wrong_numa_or_pci_entry_in_the_hosts_file_names_the_host_and_field(entry, message):
    with pytest.raises(CatalogError, match=message):
        hosts(f'hosts:\n  - nodename: cn1\n    {entry}\n')
