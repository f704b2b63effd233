"""NUMATopologyFilter: the requested NUMA topology must fit the host's NUMA cells.

Host topologies are written as the hosts file writes them (Nova's NUMACell
fields, CPU sets as ranges); requests as flavors with Nova's extra specs,
unless a case says the RequestSpec carries Nova's own ``numa_topology``.
"""
from __future__ import annotations

import json
import logging

import pytest

from placement_client.models import AllocationRequest
from scheduler.filters.handler import SKIPPED_ON_REBUILD, apply_filters
from scheduler.filters.numa_topology import NO_TOPOLOGY, NUMATopologyFilter
from scheduler.objects.numa import parse_host_numa_topology
from scheduler.objects.pci import parse_pci_pools
from scheduler.objects.spec import Flavor, ImageMeta, ImageMetaProps
from tests.builders import make_conf, make_host, make_spec, uuid_for

LOGGER = 'scheduler.filters.numa_topology'


def cell(id, *, cpus='', pcpus='', memory=4096, **fields):
    return {'id': id, 'cpuset': cpus, 'pcpuset': pcpus, 'memory': memory, **fields}


def topology(*cells, cpu_ratio=4.0, ram_ratio=1.0):
    data = {'cells': list(cells)}
    if cpu_ratio is not None:
        data['cpu_allocation_ratio'] = cpu_ratio
    if ram_ratio is not None:
        data['ram_allocation_ratio'] = ram_ratio
    return parse_host_numa_topology(data, where='test', strict=True)


TWO_CELLS = topology(cell(0, cpus='0-3', pcpus='4-7', siblings=[[4, 5], [6, 7]]),
                     cell(1, cpus='8-11', pcpus='12-15', siblings=[[12, 13], [14, 15]]))


def numa_filter(aliases=()):
    f = NUMATopologyFilter()
    f.conf = make_conf(pci={'alias': [json.dumps(a) for a in aliases]})
    return f


def spec(vcpus=2, memory_mb=2048, **extra_specs):
    """extra_specs given as a dict keyed like the flavor (``hw:numa_nodes``)."""
    return make_spec(flavor=Flavor(vcpus=vcpus, memory_mb=memory_mb, extra_specs=extra_specs))


def verdict(host_topology, request, **host_fields):
    host = make_host('cn1', numa_topology=host_topology, **host_fields)
    result = numa_filter().filter_result(host, request)
    return result.passed, result.reason


def fails(why, nodes=1, pinned=0):
    asked = f'{nodes} NUMA node{"" if nodes == 1 else "s"}'
    if pinned:
        asked += f', {pinned} pinned vCPU{"" if pinned == 1 else "s"}'
    return False, f'the requested NUMA topology ({asked}) does not fit: {why}'


OK = (True, None)

# (host topology, request) -> (passed, reason)
CASES = [
    # What asks for a topology at all.
    pytest.param(None, spec(), OK, id='a request without a NUMA topology passes any host'),
    pytest.param(TWO_CELLS, spec(**{'hw:numa_nodes': '2'}), OK,
                 id='two nodes on a host with two cells that fit'),
    pytest.param(topology(cell(0, cpus='0-7', memory=8192)), spec(**{'hw:numa_nodes': '2'}),
                 (False, 'the requested NUMA topology (2 NUMA nodes) does not fit: the host has '
                         'fewer NUMA nodes than the 2 requested'),
                 id='two nodes on a one-cell host fail'),
    pytest.param(TWO_CELLS, spec(4, 4096, **{'hw:numa_nodes': '3'}),
                 (False, 'the requested NUMA topology is invalid: 4 vCPUs and 4096 MB cannot be '
                         'split evenly over 3 NUMA nodes; set hw:numa_cpus.N and hw:numa_mem.N'),
                 id='a topology Nova would refuse fails every host, saying why'),
    pytest.param(TWO_CELLS, spec(3, 3072, **{'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0',
                                             'hw:numa_cpus.1': '1,2', 'hw:numa_mem.0': '1024',
                                             'hw:numa_mem.1': '2048'}),
                 OK, id='an asymmetric topology spelt out cell by cell'),
    # Memory.
    pytest.param(topology(cell(0, cpus='0-3', memory=4096), ram_ratio=2.0),
                 spec(2, 6144, **{'hw:numa_nodes': '1'}), fails('not enough memory in a NUMA node'),
                 id='an instance never overcommits a cell on its own, whatever the ratio'),
    pytest.param(topology(cell(0, cpus='0-3', memory=4096, memory_usage=3072)),
                 spec(2, 2048, **{'hw:numa_nodes': '1'}),
                 fails('a NUMA node would exceed its memory overcommit (ram_allocation_ratio)'),
                 id='shared guests: used + requested memory within memory x ram ratio'),
    pytest.param(topology(cell(0, cpus='0-3', memory=4096, memory_usage=3072), ram_ratio=1.5),
                 spec(2, 2048, **{'hw:numa_nodes': '1'}), OK,
                 id='a ram ratio of 1.5 leaves room for it'),
    # Shared CPUs.
    pytest.param(topology(cell(0, cpus='0-1')), spec(4, 2048, **{'hw:numa_nodes': '1'}),
                 fails('not enough shared CPUs in a NUMA node'),
                 id='more vCPUs than the cell has shared CPUs'),
    pytest.param(topology(cell(0, cpus='0-3', cpu_usage=15)),
                 spec(2, 1024, **{'hw:numa_nodes': '1'}),
                 fails('a NUMA node would exceed its CPU overcommit (cpu_allocation_ratio)'),
                 id='cpu usage + vCPUs beyond 4 CPUs x ratio 4.0'),
    pytest.param(topology(cell(0, cpus='0-3', cpu_usage=14)),
                 spec(2, 1024, **{'hw:numa_nodes': '1'}),
                 OK, id='cpu usage + vCPUs exactly at 4 CPUs x ratio 4.0'),
    # Pinned CPUs.
    pytest.param(topology(cell(0, pcpus='4-7', pinned_cpus=[4, 5])),
                 spec(4, 1024, **{'hw:cpu_policy': 'dedicated'}),
                 fails('not enough free dedicated CPUs in a NUMA node', pinned=4),
                 id='dedicated: four vCPUs, two free dedicated CPUs'),
    pytest.param(topology(cell(0, pcpus='4-7', pinned_cpus=[4, 5])),
                 spec(2, 1024, **{'hw:cpu_policy': 'dedicated'}), OK,
                 id='dedicated: two vCPUs on the two free ones'),
    pytest.param(topology(cell(0, pcpus='4-7', memory=4096, memory_usage=3072), ram_ratio=2.0),
                 spec(2, 2048, **{'hw:cpu_policy': 'dedicated'}),
                 fails('not enough memory in a NUMA node', pinned=2),
                 id='pinned guests never overcommit memory'),
    pytest.param(topology(cell(0, pcpus='4-7')),
                 spec(4, 1024, **{'hw:cpu_policy': 'dedicated',
                                  'hw:emulator_threads_policy': 'isolate'}),
                 fails('not enough free dedicated CPUs in a NUMA node', pinned=4),
                 id='isolated emulator threads take one more dedicated CPU'),
    pytest.param(topology(cell(0, cpus='0-3', pcpus='4-5')),
                 spec(4, 1024, **{'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '^0'}),
                 fails('not enough free dedicated CPUs in a NUMA node', pinned=3),
                 id='mixed: the masked vCPUs need dedicated CPUs'),
    pytest.param(topology(cell(0, cpus='0-3', pcpus='4-6')),
                 spec(4, 1024, **{'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '^0'}),
                 OK, id='mixed: three pinned, one shared'),
    # Thread policies.
    pytest.param(topology(cell(0, pcpus='4-7')),
                 spec(2, 1024, **{'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'require'}),
                 (False, "thread policy 'require' needs a host with SMT sibling threads"),
                 id='require on a host without SMT siblings'),
    pytest.param(topology(cell(0, pcpus='4-7', siblings=[[4, 5], [6, 7]])),
                 spec(2, 1024, **{'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'require'}),
                 OK, id='require with a free sibling pair'),
    pytest.param(topology(cell(0, pcpus='4-7', siblings=[[4, 5], [6, 7]], pinned_cpus=[4, 6])),
                 spec(2, 1024, **{'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'require'}),
                 fails("thread policy 'require' needs free SMT sibling threads in a NUMA node",
                       pinned=2), id='require: two free CPUs, but on different cores'),
    pytest.param(topology(cell(0, pcpus='4-7', siblings=[[4, 5], [6, 7]], pinned_cpus=[4, 6])),
                 spec(2, 1024, **{'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'prefer'}),
                 OK, id='prefer settles for CPUs on different cores'),
    pytest.param(topology(cell(0, cpus='4-7', pcpus='4-7', siblings=[[4, 5], [6, 7]])),
                 spec(2, 1024, **{'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}),
                 OK, id='isolate (vcpu_pin_set host): one vCPU per whole free core'),
    pytest.param(topology(cell(0, cpus='4-7', pcpus='4-7', siblings=[[4, 5], [6, 7]],
                               pinned_cpus=[5])),
                 spec(2, 1024, **{'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}),
                 fails("thread policy 'isolate' needs enough free whole cores in a NUMA node",
                       pinned=2), id='isolate (vcpu_pin_set): three free CPUs, one whole core'),
    pytest.param(topology(cell(0, cpus='0-3', pcpus='4-7', siblings=[[4, 5], [6, 7]])),
                 spec(2, 1024, **{'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}),
                 fails("thread policy 'isolate' cannot be met on a NUMA node with SMT siblings "
                       "whose dedicated CPUs come from cpu_dedicated_set (Nova bug 1889633)",
                       pinned=2), id='isolate on SMT with cpu_dedicated_set: Nova refuses it'),
    # Page sizes.
    pytest.param(topology(cell(0, cpus='0-3', mempages=[{'size_kb': 4, 'total': 524288},
                                                         {'size_kb': 2048, 'total': 1024}])),
                 spec(2, 2048, **{'hw:mem_page_size': '2MB'}), OK,
                 id='2 MB pages: 1024 free pages hold 2048 MB'),
    pytest.param(topology(cell(0, cpus='0-3', mempages=[{'size_kb': 4, 'total': 524288},
                                                         {'size_kb': 2048, 'total': 1024,
                                                          'used': 1}])),
                 spec(2, 2048, **{'hw:mem_page_size': 'large'}),
                 fails('no NUMA node has enough free memory pages of the requested size'),
                 id='large pages: one page short'),
    pytest.param(topology(cell(0, cpus='0-3', mempages=[{'size_kb': 4, 'total': 1048576}])),
                 spec(2, 2048, **{'hw:mem_page_size': 'large'}),
                 fails('no NUMA node has enough free memory pages of the requested size'),
                 id='large pages on a host with only small ones'),
    pytest.param(topology(cell(0, cpus='0-3', mempages=[{'size_kb': 4, 'total': 1048576}])),
                 spec(2, 2048, **{'hw:mem_page_size': 'small'}), OK, id='small pages'),
    pytest.param(topology(cell(0, cpus='0-3', mempages=[{'size_kb': 4, 'total': 1048576},
                                                         {'size_kb': 2048, 'total': 2048}])),
                 spec(2, 2048, **{'hw:mem_page_size': '1GB'}),
                 fails('no NUMA node has enough free memory pages of the requested size'),
                 id='a page size the host does not offer'),
    pytest.param(topology(cell(0, cpus='0-3', mempages=[{'size_kb': 4, 'total': 262144,
                                                         'used': 262144}])),
                 spec(2, 1024, **{'hw:numa_nodes': '1'}), OK,
                 id='without a page size, memory counts against all small pages, used or not'),
]


@pytest.mark.parametrize('host_topology,request_spec,expected', CASES)
def test_numa_topology_filter(host_topology, request_spec, expected):
    assert verdict(host_topology, request_spec) == expected


def test_the_topology_nova_sent_in_the_request_spec_is_the_one_judged():
    # A flavor asking for nothing, and Nova's InstanceNUMATopology with two pinned
    # vCPUs on one cell: the filter reads the spec's topology.
    request = spec(2, 1024)
    request.numa_topology = {
        'nova_object.name': 'InstanceNUMATopology', 'nova_object.namespace': 'nova',
        'nova_object.version': '1.3',
        'nova_object.data': {'emulator_threads_policy': None, 'cells': [{
            'nova_object.name': 'InstanceNUMACell', 'nova_object.namespace': 'nova',
            'nova_object.version': '1.6',
            'nova_object.data': {'id': 0, 'cpuset': [], 'pcpuset': [0, 1], 'memory': 1024,
                                 'pagesize': None, 'cpu_policy': 'dedicated',
                                 'cpu_thread_policy': None, 'cpuset_reserved': None,
                                 'cpu_pinning_raw': None}}]}}

    assert verdict(topology(cell(0, pcpus='4-5')), request) == OK
    assert verdict(topology(cell(0, pcpus='4-5', pinned_cpus=[4])), request) == fails(
        'not enough free dedicated CPUs in a NUMA node', pinned=2)


def test_the_networks_numa_affinity_must_be_on_a_chosen_cell():
    host = topology(cell(0, cpus='0-3'),
                    cell(1, cpus='4-5', memory=1024, network_metadata={'physnets': ['physnet1'],
                                                                         'tunneled': False}))
    request = spec(2, 2048, **{'hw:numa_nodes': '1'})
    request.network_metadata = {'physnets': ['physnet1'], 'tunneled': False}

    assert verdict(host, request) == fails(
        'the networks NUMA affinity asks for are not on the chosen NUMA nodes')
    request.network_metadata = {'physnets': ['physnet2'], 'tunneled': False}
    assert verdict(host, request) == OK  # no cell has affinity to physnet2: no constraint


ALIAS = {'name': 'nic', 'vendor_id': '8086', 'product_id': '154d', 'numa_policy': 'required'}


def test_pci_devices_with_required_numa_affinity_pick_the_cell_that_has_them():
    host = make_host('cn1', numa_topology=topology(cell(0, cpus='0-3'), cell(1, cpus='4-7')),
                     pci_pools=parse_pci_pools([{'vendor_id': '8086', 'product_id': '154d',
                                                 'count': 1, 'numa_node': 1}],
                                               where='test', strict=True))
    request = spec(2, 2048, **{'hw:numa_nodes': '1', 'pci_passthrough:alias': 'nic:1'})
    [candidate] = host.allocation_candidates

    assert numa_filter([ALIAS]).filter_result(host, request).passed
    host.consume(candidate, 'vm-1')
    # The instance went to cell 1, with the device: its CPUs and memory are used there.
    assert [c.cpu_usage for c in host.numa_topology.cells] == [0, 2]
    assert host.pci_stats.free_devices == 0


def test_pci_devices_required_on_a_cell_too_small_for_the_instance_fail_the_host():
    host = make_host('cn1', numa_topology=topology(cell(0, cpus='0-3'),
                                                   cell(1, cpus='4-7', memory=1024)),
                     pci_pools=parse_pci_pools([{'vendor_id': '8086', 'product_id': '154d',
                                                 'count': 1, 'numa_node': 1}],
                                               where='test', strict=True))
    request = spec(2, 2048, **{'hw:numa_nodes': '1', 'pci_passthrough:alias': 'nic:1'})

    result = numa_filter([ALIAS]).filter_result(host, request)

    assert (result.passed, result.reason) == fails(
        "not enough free PCI devices with the requested NUMA affinity: 1 device for alias 'nic'")


# Candidates --------------------------------------------------------------------------------

def numa_provider(name):
    return uuid_for(f'numa:{name}')


def test_with_numa_nodes_in_placement_each_candidate_is_judged_on_its_own_cells_in_order():
    host_topology = topology(cell(0, pcpus='0-1', provider_uuid=numa_provider('n0')),
                             cell(1, pcpus='2-5', provider_uuid=numa_provider('n1')))
    on_n1_first = AllocationRequest(allocations={numa_provider('n1'): {'PCPU': 4}})
    on_n0 = AllocationRequest(allocations={numa_provider('n0'): {'PCPU': 4}})
    on_n1_second = AllocationRequest(allocations={numa_provider('n1'): {'PCPU': 4},
                                                  uuid_for('cn1'): {'MEMORY_MB': 1024}})
    host = make_host('cn1', numa_topology=host_topology,
                     allocation_candidates=[on_n1_first, on_n0, on_n1_second])

    result = numa_filter().filter_result(host, spec(4, 1024, **{'hw:cpu_policy': 'dedicated'}))

    assert result.passed
    assert host.allocation_candidates == [on_n1_first, on_n1_second]


def test_a_host_whose_candidates_all_fail_fails_with_the_last_rejected_reason():
    host_topology = topology(cell(0, pcpus='0-1', provider_uuid=numa_provider('n0')),
                             cell(1, pcpus='2-3', provider_uuid=numa_provider('n1')))
    candidates = [AllocationRequest(allocations={numa_provider(n): {'PCPU': 4}})
                  for n in ('n0', 'n1')]
    host = make_host('cn1', numa_topology=host_topology, allocation_candidates=candidates)

    result = numa_filter().filter_result(host, spec(4, 1024, **{'hw:cpu_policy': 'dedicated'}))

    assert (result.passed, result.reason) == fails(
        'not enough free dedicated CPUs in a NUMA node', pinned=4)
    assert host.allocation_candidates == []


def test_without_numa_providers_every_candidate_is_judged_on_the_whole_host():
    candidates = [AllocationRequest(allocations={uuid_for('cn1'): {'VCPU': 2}}),
                  AllocationRequest(allocations={uuid_for('cn1'): {'VCPU': 2},
                                                 uuid_for('shared-disk'): {'DISK_GB': 10}})]
    host = make_host('cn1', numa_topology=TWO_CELLS, allocation_candidates=list(candidates))

    assert numa_filter().filter_result(host, spec(**{'hw:numa_nodes': '2'})).passed
    assert host.allocation_candidates == candidates


def test_a_request_without_a_topology_leaves_the_candidates_alone():
    host = make_host('cn1', numa_topology=None)
    before = list(host.allocation_candidates)

    assert numa_filter().filter_result(host, spec()).passed
    assert host.allocation_candidates == before


def test_a_host_without_candidates_is_judged_as_a_whole():
    host = make_host('cn1', numa_topology=topology(cell(0, pcpus='0-1')),
                     allocation_candidates=[])

    assert numa_filter().filter_result(
        host, spec(2, 1024, **{'hw:cpu_policy': 'dedicated'})).passed
    assert not numa_filter().filter_result(
        host, spec(4, 1024, **{'hw:cpu_policy': 'dedicated'})).passed


def test_rebuild_checks_do_not_run_it_as_in_nova():
    request = make_spec(rebuild=True, flavor=Flavor(vcpus=2, memory_mb=1024,
                                                    extra_specs={'hw:numa_nodes': '2'}))
    host = make_host('cn1', numa_topology=None, allocation_candidates=[])

    run = apply_filters([numa_filter()], [host], request, instance_index=0, rebuild=True)

    assert run.hosts == [host]
    assert run.steps[0].skipped == SKIPPED_ON_REBUILD


# Instances of one request ------------------------------------------------------------------

def test_each_instance_of_a_request_sees_the_cells_the_earlier_ones_took():
    host = make_host('cn1', numa_topology=topology(cell(0, pcpus='0-3', memory=8192)))
    request = spec(2, 1024, **{'hw:cpu_policy': 'dedicated'})
    f = numa_filter()

    for instance in ('vm-1', 'vm-2'):
        assert f.filter_result(host, request).passed
        host.consume(host.allocation_candidates[0], instance)

    assert host.numa_topology.cells[0].pinned_cpus == {0, 1, 2, 3}
    assert host.numa_topology.cells[0].memory_usage == 2048
    assert f.filter_result(host, request).reason == fails(
        'not enough free dedicated CPUs in a NUMA node', pinned=2)[1]


SMT = [[0, 4], [1, 5], [2, 6], [3, 7]]
NO_SMT = [[0], [1], [2], [3], [4], [5], [6], [7]]


@pytest.mark.parametrize(('extra_specs', 'image_props', 'siblings', 'passes'), [
    ({'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'prefer'},
     {'hw_cpu_thread_policy': 'require'}, NO_SMT, False),
    ({'hw:cpu_thread_policy': 'prefer'},
     {'hw_cpu_policy': 'dedicated', 'hw_cpu_thread_policy': 'require'}, NO_SMT, False),
    ({'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'prefer'},
     {'hw_cpu_thread_policy': 'require'}, SMT, True),
    ({'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'prefer'}, {}, NO_SMT, True),
])
def test_require_in_the_flavor_or_the_image_needs_smt_whatever_the_policy_resolves_to(
        extra_specs, image_props, siblings, passes):
    """Follows nova.scheduler.filters.numa_topology_filter.NUMATopologyFilter.
    _satisfies_cpu_policy: 'dedicated' in the flavor or the image and 'require' in the
    flavor or the image fail a host without SMT siblings, even where the two
    resolve to 'prefer' (a flavor's 'prefer' wins over the image's 'require')."""
    host_topology = topology(cell(0, pcpus='0-7', memory=8192, siblings=siblings))
    request = make_spec(flavor=Flavor(vcpus=2, memory_mb=1024, extra_specs=extra_specs),
                        image=ImageMeta(id='img', properties=ImageMetaProps(image_props)))
    result = numa_filter().filter_result(make_host('cn1', numa_topology=host_topology),
                                         request)
    assert result.passed is passes
    if not passes:
        assert result.reason == "thread policy 'require' needs a host with SMT sibling threads"


def test_later_instances_of_a_request_ask_for_the_page_size_the_first_one_got():
    """Follows nova.scheduler.host_manager.HostState.consume_from_request, which
    replaces the request's numa_topology with the one numa_fit_instance_to_host
    fitted: 'any' resolved to 1 GiB pages on the first host asks for 1 GiB pages
    on every host after it."""
    huge = [{'size_kb': 4, 'total': 262144}, {'size_kb': 1048576, 'total': 4}]
    only_2m = [{'size_kb': 4, 'total': 262144}, {'size_kb': 2048, 'total': 2048}]
    first = make_host('cn1', numa_topology=topology(cell(0, cpus='0-3', memory=5120,
                                                         mempages=huge)))
    second = make_host('cn2', numa_topology=topology(cell(0, cpus='0-3', memory=5120,
                                                          mempages=only_2m)))
    request = spec(2, 1024, **{'hw:mem_page_size': 'any'})
    f = numa_filter()
    assert f.filter_result(second, request).passed   # 'any': 2 MiB pages will do

    assert f.filter_result(first, request).passed
    first.consume(first.allocation_candidates[0], 'vm-1')

    assert request.numa_topology['cells'][0]['pagesize'] == 1048576
    assert not f.filter_result(second, request).passed


def test_isolate_takes_whole_cores_and_pages_are_counted():
    # A host pinning with vcpu_pin_set (cpuset == pcpuset): Nova's isolate there pins
    # a core and reserves its siblings.
    host = make_host('cn1', numa_topology=topology(cell(
        0, cpus='0-3', pcpus='0-3', siblings=[[0, 1], [2, 3]],
        mempages=[{'size_kb': 4, 'total': 262144}, {'size_kb': 2048, 'total': 1024}])))
    request = spec(1, 1024, **{'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate',
                               'hw:mem_page_size': 'large'})

    assert numa_filter().filter_result(host, request).passed
    host.consume(host.allocation_candidates[0], 'vm-1')

    [used] = host.numa_topology.cells
    assert used.pinned_cpus == {0, 1}
    assert used.pages(2048).used == 512


# Absent data -------------------------------------------------------------------------------

def test_a_host_without_a_topology_fails_a_request_with_one_and_says_so_once(caplog):
    f = numa_filter()
    host = make_host('cn1', numa_topology=None)
    request = spec(**{'hw:numa_nodes': '1'})

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        results = [f.filter_result(host, request) for _ in range(3)]

    assert {(r.passed, r.reason) for r in results} == {(False, NO_TOPOLOGY)}
    [warning] = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert warning == (
        "NUMATopologyFilter: no NUMA topology known for host cn1; it fails every request "
        "that asks for a NUMA topology until [cell_database] connections (Nova's cell "
        "databases) or numa_topology in the [scheduler] hosts_file gives one")


def test_unknown_allocation_ratios_skip_the_overcommit_limits_with_a_warning_and_no_limits(
        caplog):
    host = make_host('cn1', numa_topology=topology(cell(0, cpus='0-3', cpu_usage=100),
                                                   cpu_ratio=None, ram_ratio=None))

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        result = numa_filter().filter_result(host, spec(**{'hw:numa_nodes': '1'}))

    assert result.passed
    assert 'numa_topology' not in host.limits
    [warning] = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert 'allocation ratios of host cn1 are unknown' in warning


def test_a_passing_host_carries_novas_numa_limits_for_the_compute_claim():
    host = make_host('cn1', numa_topology=TWO_CELLS)
    request = spec(**{'hw:numa_nodes': '2'})
    request.network_metadata = {'physnets': ['physnet1'], 'tunneled': True}

    assert numa_filter().filter_result(host, request).passed

    limits = host.limits['numa_topology']
    assert limits['nova_object.name'] == 'NUMATopologyLimits'
    assert limits['nova_object.data']['cpu_allocation_ratio'] == 4.0
    assert limits['nova_object.data']['ram_allocation_ratio'] == 1.0
    assert limits['nova_object.data']['network_metadata']['nova_object.data'] == {
        'physnets': ['physnet1'], 'tunneled': True}


def test_pci_devices_on_a_host_without_pools_are_not_checked_for_affinity_and_it_is_said(
        caplog):
    host = make_host('cn1', numa_topology=topology(cell(0, cpus='0-3')))
    request = spec(2, 1024, **{'hw:numa_nodes': '1', 'pci_passthrough:alias': 'nic:1'})

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert numa_filter([ALIAS]).filter_result(host, request).passed

    [warning] = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert 'no PCI pools known for host cn1' in warning
