"""PciPassthroughFilter: the request's PCI devices must be free on the host; and the
PCI fit it shares with NUMATopologyFilter (matching, NUMA affinity, PCI in Placement)."""
from __future__ import annotations

import json
import logging

import pytest

from placement_client.models import AllocationRequest
from scheduler.exceptions import ConfigurationError
from scheduler.filters.pci_fit import NO_POOLS, NumaCells, fit_requests
from scheduler.filters.pci_passthrough import PciPassthroughFilter
from scheduler.objects.pci import parse_pci_pools
from scheduler.objects.spec import Flavor
from scheduler.request.pci import PciRequest, parse_aliases
from tests.builders import make_conf, make_host, make_spec, uuid_for

LOGGER = 'scheduler.filters.pci_passthrough'
REQUEST_ID = '3f0b5b7e-3d0e-4c55-9d5c-6a1f8c2e0b11'


def pools(*entries):
    return parse_pci_pools([{'vendor_id': '8086', 'product_id': '154d', 'numa_node': 0,
                             **e} for e in entries], where='test', strict=True)


def pci_request(count=1, *, alias='nic', request_id=None, policy=None, **spec):
    wanted = {'vendor_id': '8086', 'product_id': '154d', **spec}
    return {'nova_object.name': 'InstancePCIRequest', 'nova_object.namespace': 'nova',
            'nova_object.version': '1.4',
            'nova_object.data': {'count': count, 'spec': [wanted], 'alias_name': alias,
                                 'request_id': request_id, 'numa_policy': policy,
                                 'is_new': False, 'requester_id': None}}


def spec_with(*requests, extra_specs=None):
    return make_spec(flavor=Flavor(vcpus=1, memory_mb=512, extra_specs=extra_specs or {}),
                     pci_requests={'nova_object.name': 'InstancePCIRequests',
                                   'nova_object.namespace': 'nova', 'nova_object.version': '1.1',
                                   'nova_object.data': {'requests': list(requests)}})


def pci_filter(aliases=()):
    f = PciPassthroughFilter()
    f.conf = make_conf(pci={'alias': [json.dumps(a) for a in aliases]})
    return f


OK = (True, None)

# (host pools, requests) -> (passed, reason)
CASES = [
    pytest.param(None, [], OK, id='no PCI request: any host passes'),
    pytest.param(pools({'count': 2}), [pci_request(2)], OK, id='two devices from a pool of two'),
    pytest.param(pools({'count': 2}), [pci_request(3)],
                 (False, "not enough free PCI devices: 3 devices for alias 'nic'"),
                 id='three devices from a pool of two'),
    pytest.param(pools({'count': 1, 'product_id': '154D'}), [pci_request(1)], OK,
                 id='ids match whatever their case'),
    pytest.param(pools({'count': 4, 'product_id': '10ed'}), [pci_request(1)],
                 (False, "not enough free PCI devices: 1 device for alias 'nic'"),
                 id='another product does not serve'),
    pytest.param(pools({'count': 1}, {'count': 1, 'numa_node': 1}), [pci_request(2)], OK,
                 id='devices come from several pools'),
    pytest.param(pools({'count': 2}), [pci_request(1), pci_request(2, alias='nic2')],
                 (False, "not enough free PCI devices: 2 devices for alias 'nic2'"),
                 id='requests share the pools: the second finds one device left'),
    pytest.param(pools({'count': 2, 'tags': {'dev_type': 'type-PF'}}), [pci_request(1)],
                 (False, "not enough free PCI devices: 1 device for alias 'nic'"),
                 id='a physical function only for requests that ask for one'),
    pytest.param(pools({'count': 2, 'tags': {'dev_type': 'type-PF'}}),
                 [pci_request(1, dev_type='type-PF')], OK, id='a request for a PF gets it'),
    pytest.param(pools({'count': 2, 'tags': {'dev_type': 'type-VF', 'remote_managed': 'true'}}),
                 [pci_request(1)],
                 (False, "not enough free PCI devices: 1 device for alias 'nic'"),
                 id='remote-managed devices only for remote-managed ports'),
    pytest.param(pools({'count': 2, 'tags': {'physical_network': 'physnet1'}}),
                 [pci_request(1, alias=None, physical_network='physnet1')], OK,
                 id='a port request matches the pool tags'),
    pytest.param(pools({'count': 2, 'tags': {'physical_network': 'physnet1'}}),
                 [pci_request(1, alias=None, physical_network='physnet2')],
                 (False, 'not enough free PCI devices: 1 device for a port'),
                 id='a port on another physical network'),
    pytest.param(pools({'count': 2}), [pci_request(1, resource_class='CUSTOM_NIC')], OK,
                 id="Placement's keys (resource_class, traits) are not matched against pools"),
    pytest.param(None, [pci_request(1)], (False, NO_POOLS),
                 id='no pools known: the host fails'),
]


@pytest.mark.parametrize('host_pools,requests,expected', CASES)
def test_pci_passthrough_filter(host_pools, requests, expected):
    host = make_host('cn1', pci_pools=host_pools)

    result = pci_filter().filter_result(host, spec_with(*requests))

    assert (result.passed, result.reason) == expected


# NUMA affinity (what NUMATopologyFilter asks of the PCI fit) ---------------------------------

CELL0 = NumaCells(frozenset({0}), {0: 0, 1: 0, 2: 1})
AFFINITY = [
    # (policy, pools' numa_node -> count, passes)
    ('required', {0: 1}, True),
    ('required', {1: 1}, False),
    ('required', {None: 1}, False),
    ('legacy', {None: 1}, True),
    ('legacy', {1: 1}, False),
    (None, {None: 1}, True),
    ('preferred', {2: 1}, True),
    ('socket', {1: 1}, True),       # cell 1 shares socket 0 with the chosen cell 0
    ('socket', {2: 1}, False),
]


@pytest.mark.parametrize('policy,by_node,passes', AFFINITY,
                         ids=[f'{p}:{n}' for p, n, _ in AFFINITY])
def test_pci_numa_affinity_policies(policy, by_node, passes):
    host_pools = pools(*({'count': c, 'numa_node': n} for n, c in by_node.items()))
    [request] = [PciRequest(1, ({'vendor_id': '8086', 'product_id': '154d'},),
                            alias_name='nic', numa_policy=policy)]

    assert fit_requests(host_pools, [request], numa=CELL0).passed is passes


# PCI in Placement ---------------------------------------------------------------------------

def placed(count, providers):
    return {f'{REQUEST_ID}-{i}': [providers[i]] for i in range(count)}


def test_a_request_placement_allocates_is_judged_from_the_candidate_without_pools():
    device_rp = uuid_for('cn1:pci:0000:81:00.1')
    with_devices = AllocationRequest(
        allocations={uuid_for('cn1'): {'VCPU': 1}, device_rp: {'CUSTOM_NIC': 2}},
        mappings={'': [uuid_for('cn1')], **placed(2, [device_rp, device_rp])})
    without = AllocationRequest(allocations={uuid_for('cn1'): {'VCPU': 1}},
                                mappings={'': [uuid_for('cn1')]})
    host = make_host('cn1', pci_pools=None, allocation_candidates=[with_devices, without])

    result = pci_filter().filter_result(host, spec_with(pci_request(2, request_id=REQUEST_ID)))

    assert result.passed
    assert host.allocation_candidates == [with_devices]


def test_pools_that_name_their_provider_narrow_a_placed_request_to_those_devices():
    near, far = uuid_for('cn1:pci:near'), uuid_for('cn1:pci:far')
    host_pools = pools({'count': 1, 'numa_node': 0, 'tags': {'rp_uuid': near}},
                       {'count': 1, 'numa_node': 1, 'tags': {'rp_uuid': far}})
    [request] = [PciRequest(1, ({'resource_class': 'CUSTOM_NIC'},), alias_name='nic',
                            request_id=REQUEST_ID, numa_policy='required')]

    on_cell0 = NumaCells(frozenset({0}))
    assert fit_requests(host_pools, [request], mappings=placed(1, [near]), numa=on_cell0).passed
    assert not fit_requests(host_pools, [request], mappings=placed(1, [far]),
                            numa=on_cell0).passed


def test_a_placed_request_still_needs_a_device_its_spec_matches():
    # Placement matched the alias's trait on the PF's provider; the alias's
    # product_id names the other device. nova-compute's claim would fail.
    pf, vf = uuid_for('cn1:pci:pf'), uuid_for('cn1:pci:pci')
    host_pools = pools({'count': 1, 'product_id': '1528',
                        'tags': {'dev_type': 'type-PF', 'rp_uuid': pf}},
                       {'count': 1, 'tags': {'dev_type': 'type-PCI', 'rp_uuid': vf}})
    [request] = [PciRequest(1, ({'resource_class': 'CUSTOM_MY_DEV', 'traits': 'A_PF',
                                 'product_id': '154d', 'rp_uuids': pf},),
                            alias_name='a-pci', request_id=REQUEST_ID)]

    refused = fit_requests(host_pools, [request], mappings=placed(1, [pf]))
    assert not refused.passed
    assert refused.reason.startswith('not enough free PCI devices')
    assert fit_requests(host_pools, [request], mappings=placed(1, [vf])).passed


def test_candidates_keep_their_order_when_some_are_pruned():
    rp = uuid_for('cn1:pci:0')
    first, second, third = (
        AllocationRequest(allocations={rp: {'CUSTOM_NIC': 1}}, mappings=placed(1, [rp])),
        AllocationRequest(allocations={uuid_for('cn1'): {'VCPU': 1}}),
        AllocationRequest(allocations={rp: {'CUSTOM_NIC': 1}, uuid_for('cn1'): {'VCPU': 1}},
                          mappings=placed(1, [rp])))
    host = make_host('cn1', pci_pools=None, allocation_candidates=[first, second, third])

    assert pci_filter().filter_result(host, spec_with(pci_request(1, request_id=REQUEST_ID)))
    assert host.allocation_candidates == [first, third]


# Aliases -------------------------------------------------------------------------------------

NIC = {'name': 'nic', 'vendor_id': '8086', 'product_id': '154d', 'device_type': 'type-VF'}


def test_a_flavor_alias_without_a_request_in_the_spec_is_read_from_the_pci_alias_option():
    host = make_host('cn1', pci_pools=pools({'count': 1, 'tags': {'dev_type': 'type-VF'}}))
    request = make_spec(flavor=Flavor(vcpus=1, memory_mb=512,
                                      extra_specs={'pci_passthrough:alias': 'nic:2'}))

    result = pci_filter([NIC]).filter_result(host, request)

    assert (result.passed, result.reason) == (
        False, "not enough free PCI devices: 2 devices for alias 'nic'")


def test_an_alias_nobody_defined_fails_every_host_naming_it():
    request = make_spec(flavor=Flavor(vcpus=1, memory_mb=512,
                                      extra_specs={'pci_passthrough:alias': 'gpu:1'}))

    result = pci_filter([NIC]).filter_result(make_host('cn1', pci_pools=pools({'count': 1})),
                                             request)

    assert (result.passed, result.reason) == (
        False, "invalid PCI request: PCI alias 'gpu' of the flavor is not defined in [pci] "
               "alias")


def test_aliases_with_one_name_are_alternatives_and_must_agree_on_type_and_policy():
    aliases = parse_aliases([json.dumps(NIC), json.dumps({**NIC, 'product_id': '10ed'})])
    assert [s['product_id'] for s in aliases['nic'].specs] == ['154d', '10ed']
    assert aliases['nic'].specs[0]['dev_type'] == 'type-VF'

    with pytest.raises(ConfigurationError, match="alias 'nic' is defined more than once"):
        parse_aliases([json.dumps(NIC), json.dumps({**NIC, 'device_type': 'type-PF'})])
    with pytest.raises(ConfigurationError, match='unknown key'):
        parse_aliases([json.dumps({**NIC, 'vendor': 'x'})])


def test_an_invalid_alias_stops_start_up():
    f = pci_filter()
    f.conf.set_override('alias', ['{nope'], group='pci')

    with pytest.raises(ConfigurationError, match='not JSON'):
        f.check_configuration()


# Instances of one request and absent data ----------------------------------------------------

def test_each_instance_of_a_request_takes_its_devices():
    host = make_host('cn1', pci_pools=pools({'count': 3}))
    request = spec_with(pci_request(2))
    f = pci_filter()

    assert f.filter_result(host, request).passed
    host.consume(host.allocation_candidates[0], 'vm-1')

    assert host.pci_stats.free_devices == 1
    assert not f.filter_result(host, request).passed


def test_a_host_without_pools_fails_and_says_so_once(caplog):
    f = pci_filter()
    host = make_host('cn1', pci_pools=None)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):
            assert f.filter_result(host, spec_with(pci_request(1))).reason == NO_POOLS

    [warning] = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert warning == (
        "PciPassthroughFilter: no PCI device pools known for host cn1; it fails every request "
        "for PCI devices that Placement does not allocate until [cell_database] connections "
        "(Nova's cell databases) or pci_pools in the [scheduler] hosts_file gives them")
