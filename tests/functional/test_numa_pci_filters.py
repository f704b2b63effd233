"""NUMATopologyFilter and PciPassthroughFilter in the real service: real Placement,
real RPC, host NUMA topologies and PCI pools from the hosts file.

The cloud: ``one-cell`` is the biggest host (RAMWeigher's favourite) but has a
single NUMA cell; ``two-cells`` has two; ``unknown`` has no topology in the
hosts file at all.
"""
from __future__ import annotations

import pytest
import yaml

from scheduler import exceptions as exc
from scheduler.catalog import HostCatalog
from tests.builders import SERVICE_CELL, boot_spec, new_uuids, select
from tests.functional.cloud import add_host, consumers_with_allocations

FILTERS = ['ComputeFilter', 'NUMATopologyFilter', 'PciPassthroughFilter']
NIC_ALIAS = '{"name": "nic", "vendor_id": "8086", "product_id": "154d", "device_type": "type-VF"}'


def cell(id, cpus, memory=16384):
    return {'id': id, 'cpuset': cpus, 'memory': memory}


@pytest.fixture
def numa_cloud(placement_client, tmp_path):
    hosts = {
        'one-cell': add_host(placement_client, 'one-cell', vcpus=16, ram_mb=65536),
        'two-cells': add_host(placement_client, 'two-cells', vcpus=16, ram_mb=32768),
        'unknown': add_host(placement_client, 'unknown', vcpus=16, ram_mb=49152),
    }
    hosts_file = tmp_path / 'hosts.yaml'
    hosts_file.write_text(yaml.safe_dump({'hosts': [
        {'nodename': 'one-cell', 'provider_uuid': hosts['one-cell'],
         'numa_topology': {'cpu_allocation_ratio': 1.0, 'ram_allocation_ratio': 1.0,
                           'cells': [cell(0, '0-15', 65536)]}},
        {'nodename': 'two-cells', 'provider_uuid': hosts['two-cells'],
         'numa_topology': {'cpu_allocation_ratio': 1.0, 'ram_allocation_ratio': 1.0,
                           'cells': [cell(0, '0-7'), cell(1, '8-15')]},
         'pci_pools': [{'vendor_id': '8086', 'product_id': '154d', 'count': 1, 'numa_node': 1,
                        'tags': {'dev_type': 'type-VF'}}]},
        {'nodename': 'unknown', 'provider_uuid': hosts['unknown']},
    ]}))
    return HostCatalog.from_file(str(hosts_file), default_cell_uuid=SERVICE_CELL), hosts


def test_a_two_node_guest_lands_only_on_the_host_whose_topology_fits(
        start_scheduler, placement_client, numa_cloud):
    catalog, hosts = numa_cloud
    running = start_scheduler(catalog, **{'filter_scheduler.enabled_filters': FILTERS})

    [plain] = select(running, boot_spec(), new_uuids(1))
    assert plain[0].service_host == 'one-cell'  # no topology asked: the weighers decide

    [instance] = new_uuids(1)
    [selections] = select(running, boot_spec(vcpus=4, ram_mb=4096,
                                             extra_specs={'hw:numa_nodes': '2'}), [instance])

    assert [s.service_host for s in selections] == ['two-cells']
    assert set(placement_client.get_allocations(instance).allocations) == {hosts['two-cells']}
    # Nova's limits travel to the compute node for its own claim.
    limits = selections[0].limits.numa_topology
    assert limits['nova_object.name'] == 'NUMATopologyLimits'
    assert limits['nova_object.data']['cpu_allocation_ratio'] == 1.0


def test_no_host_fits_and_the_reason_says_why_per_host(start_scheduler, placement_client,
                                                       numa_cloud):
    catalog, hosts = numa_cloud
    running = start_scheduler(catalog, **{'filter_scheduler.enabled_filters': FILTERS})

    with pytest.raises(exc.NoValidHost) as failure:
        select(running, boot_spec(vcpus=4, ram_mb=4096, extra_specs={'hw:numa_nodes': '3',
                                                                     'hw:numa_cpus.0': '0',
                                                                     'hw:numa_cpus.1': '1',
                                                                     'hw:numa_cpus.2': '2,3',
                                                                     'hw:numa_mem.0': '1024',
                                                                     'hw:numa_mem.1': '1024',
                                                                     'hw:numa_mem.2': '2048'}),
               new_uuids(1))

    assert failure.value.reason == (
        '0/3 hosts available: NUMATopologyFilter removed 3 (2 × the requested NUMA topology '
        '(3 NUMA nodes) does not fit: the host has fewer NUMA nodes than the 3 requested; '
        '1 × no NUMA topology known for the host)')
    assert consumers_with_allocations(placement_client, hosts.values()) == {}


def test_pci_devices_from_the_hosts_file_pools_go_to_the_host_that_has_them(
        start_scheduler, placement_client, numa_cloud):
    catalog, hosts = numa_cloud
    running = start_scheduler(catalog, **{'filter_scheduler.enabled_filters': FILTERS,
                                          'pci.alias': [NIC_ALIAS]})
    nic = {'pci_passthrough:alias': 'nic:1'}

    [selections] = select(running, boot_spec(extra_specs=nic), new_uuids(1))
    assert [s.service_host for s in selections] == ['two-cells']

    # Two instances, one device: the second finds the pool empty, and nothing leaks.
    uuids = new_uuids(2)
    with pytest.raises(exc.NoValidHost) as failure:
        select(running, boot_spec(extra_specs=nic, num_instances=2), uuids)
    assert "not enough free PCI devices: 1 device for alias 'nic'" in failure.value.reason
    assert not set(uuids) & set(consumers_with_allocations(placement_client, hosts.values()))
