"""The PCI fit step for step as Nova 34's ``nova.pci.stats.PciDeviceStats``: which pools
pass a request, in which order, and which devices each instance takes.

Each test names the Nova function whose behaviour it pins. Pools are given as
nova-compute writes ``compute_nodes.pci_stats`` (vendor_id, product_id,
numa_node, count, tags) and read by ``parse_pci_pools``; requests as
``InstancePCIRequest`` primitives read by ``requested_pci``, or as
:class:`PciRequest` where the primitive adds nothing.
"""
from __future__ import annotations

import pytest

from scheduler.filters.pci_fit import NumaCells, fit_requests
from scheduler.objects.pci import HostPciStats, parse_pci_pools
from scheduler.objects.spec import Flavor
from scheduler.request.pci import PciRequest, requested_pci
from tests.builders import make_spec

REQUEST_ID = '3f0b5b7e-3d0e-4c55-9d5c-6a1f8c2e0b11'
RP1, RP2, RP3 = (f'00000000-0000-4000-8000-00000000000{i}' for i in (1, 2, 3))
VF = {'vendor_id': '8086', 'product_id': '1521', 'dev_type': 'type-VF'}
PCI = {'vendor_id': '8086', 'product_id': '154d', 'dev_type': 'type-PCI'}


def pools(*entries: dict) -> HostPciStats:
    """Pools as the compute writes them: ``dev_type`` and the rest are tags."""
    return parse_pci_pools([
        {'vendor_id': '8086', 'product_id': e.get('product_id', '1521'),
         'numa_node': e.get('numa_node'), 'count': e['count'],
         'tags': {'dev_type': 'type-VF', **e.get('tags', {})}} for e in entries],
        where='test', strict=True)


def request(count: int = 1, *specs: dict, policy: str | None = None, alias: str | None = 'a',
            request_id: str | None = REQUEST_ID) -> PciRequest:
    return PciRequest(count, tuple(specs or (VF,)), alias_name=alias, request_id=request_id,
                      numa_policy=policy)


def left(stats: HostPciStats, fit) -> list[tuple[int | None, str | None, int]]:
    """(numa_node, physical_network, count) of each pool after the fit, in the pools' order."""
    return [(p.numa_node, p.tags.get('physical_network'), p.count)
            for p in stats.minus(fit.taken).pools]


def spec_with(*primitives: dict):
    return make_spec(flavor=Flavor(vcpus=1, memory_mb=512, extra_specs={}),
                     pci_requests={'nova_object.name': 'InstancePCIRequests',
                                   'nova_object.namespace': 'nova', 'nova_object.version': '1.1',
                                   'nova_object.data': {'requests': list(primitives)}})


def primitive(count: int, spec: dict, *, alias: str | None = None) -> dict:
    return {'nova_object.name': 'InstancePCIRequest', 'nova_object.namespace': 'nova',
            'nova_object.version': '1.4',
            'nova_object.data': {'count': count, 'spec': [spec], 'alias_name': alias,
                                 'request_id': REQUEST_ID, 'numa_policy': None,
                                 'is_new': False, 'requester_id': None}}


# PciDeviceStats.__init__ ---------------------------------------------------------------------

def test_pools_are_taken_in_the_order_PciDeviceStats_init_sorts_them():
    """``PciDeviceStats.__init__`` sorts the pools by their number of keys: the VF pool
    with a physical_network tag comes after the one without, whatever the compute wrote
    first (the differential test's case: Nova takes the VF from NUMA node 0)."""
    stats = pools({'numa_node': 1, 'count': 4, 'tags': {'physical_network': 'physnet1'}},
                  {'numa_node': 0, 'count': 4},
                  {'product_id': '154d', 'count': 1, 'tags': {'dev_type': 'type-PCI'}})

    fit = fit_requests(stats, [request(1, VF), request(1, PCI)])

    assert fit.passed
    assert left(stats, fit) == [(1, 'physnet1', 4), (0, None, 3)]


# _filter_pools and its steps -----------------------------------------------------------------

def test_filter_pools_for_numa_cells_counts_pfs_the_spec_matched_before_they_are_dropped():
    """``_filter_pools`` runs ``_filter_pools_for_numa_cells`` before
    ``_filter_pools_for_unrequested_pfs``: a PF on the instance's cell is enough for the
    legacy policy's first step, then dropped, and the request fails although a VF without
    NUMA information would have served it."""
    stats = pools({'numa_node': 0, 'count': 1, 'tags': {'dev_type': 'type-PF'}},
                  {'numa_node': None, 'count': 1})
    any_type = {'vendor_id': '8086', 'product_id': '1521'}

    assert not fit_requests(stats, [request(1, any_type)], numa=NumaCells(frozenset({0}))).passed
    assert fit_requests(stats, [request(1, any_type)]).passed


def test_filter_pools_for_numa_cells_preferred_takes_the_near_pools_first():
    """``_filter_pools_for_numa_cells``, PREFERRED without enough near devices: every
    pool, sorted so that those on the cells or without NUMA information come first."""
    stats = pools({'numa_node': 1, 'count': 2}, {'numa_node': None, 'count': 1})

    fit = fit_requests(stats, [request(2, policy='preferred')], numa=NumaCells(frozenset({0})))

    assert fit.passed
    assert left(stats, fit) == [(1, None, 1)]


def test_filter_pools_for_socket_affinity_needs_every_host_cell_to_know_its_socket():
    """``_filter_pools_for_socket_affinity`` gives no pool when a host cell (any, not only
    the chosen ones) has no socket."""
    stats = pools({'numa_node': 1, 'count': 1})
    wanted = [request(1, policy='socket')]

    assert fit_requests(stats, wanted, numa=NumaCells(frozenset({0}), {0: 0, 1: 0})).passed
    assert not fit_requests(stats, wanted,
                            numa=NumaCells(frozenset({0}), {0: 0, 1: 0, 2: None})).passed


@pytest.mark.parametrize('tag,passes', [('true', False), ('yes', False), ('1', False),
                                        ('false', True), ('no', True)])
def test_filter_pools_for_unrequested_remote_managed_devices_reads_tags_as_oslo_booleans(
        tag, passes):
    """``_filter_pools_for_unrequested_remote_managed_devices`` reads the tag with
    ``strutils.bool_from_string``."""
    stats = pools({'count': 1, 'tags': {'remote_managed': tag}})

    assert fit_requests(stats, [request(1)]).passed is passes


def test_filter_pools_for_unrequested_pfs_compares_the_device_type_exactly():
    """``_filter_pools_for_unrequested_pfs`` compares ``dev_type`` with ``type-PF`` as it
    is: a spec that says ``type-pf`` matches the PF pool (``pci_device_prop_match`` lowers
    both) but does not ask for a PF, so the pool is dropped."""
    stats = pools({'count': 1, 'tags': {'dev_type': 'type-PF'}})

    assert fit_requests(stats, [request(1, {**VF, 'dev_type': 'type-PF'})]).passed
    assert not fit_requests(stats, [request(1, {**VF, 'dev_type': 'type-pf'})]).passed


def test_filter_pools_for_live_migratable_devices():
    """``_filter_pools_for_live_migratable_devices``: when every spec says 'true' (or
    'false'), only pools tagged exactly so; a spec without the key takes any pool."""
    stats = pools({'numa_node': 0, 'count': 1, 'tags': {'live_migratable': 'True'}},
                  {'numa_node': 1, 'count': 1})

    assert not fit_requests(stats, [request(1, {**VF, 'live_migratable': 'true'})]).passed
    assert not fit_requests(stats, [request(1, {**VF, 'live_migratable': 'false'})]).passed
    assert fit_requests(stats, [request(2)]).passed


def test_filter_pools_for_spec_ignores_the_rp_uuid_key_too():
    """``ignored_spec_tags`` and ``ignored_pool_tags`` are one list in Nova, so a spec's
    ``rp_uuid`` is not matched against the pool either."""
    stats = pools({'count': 1})

    assert fit_requests(stats, [request(1, {**VF, 'rp_uuid': RP1, 'traits': 'X'})]).passed


def test_pci_device_prop_match_a_none_value_matches_a_pool_without_the_key():
    """``pci_device_prop_match``: a port on a tunneled network asks for
    ``physical_network: None``, which only pools without a physical network serve."""
    [port] = requested_pci(spec_with(primitive(1, {'physical_network': None,
                                                   'dev_type': 'type-VF'})))
    with_physnet = pools({'count': 1, 'tags': {'physical_network': 'physnet1'}})
    without = pools({'count': 1})

    assert port.specs == ({'physical_network': None, 'dev_type': 'type-VF'},)
    assert not fit_requests(with_physnet, [port]).passed
    assert fit_requests(without, [port]).passed


def test_apply_request_a_request_for_no_device_still_needs_a_pool():
    """``_apply_request`` fails when ``_filter_pools`` leaves no pool, even for a request
    of 0 devices (nova-api accepts ``pci_passthrough:alias`` = ``a:0``); it takes nothing."""
    [nothing] = requested_pci(spec_with(primitive(0, VF, alias='a')))
    stats = pools({'count': 2})

    assert nothing.count == 0
    assert not fit_requests(pools({'count': 2, 'product_id': '10fb'}), [nothing]).passed
    fit = fit_requests(stats, [nothing])
    assert fit.passed
    assert left(stats, fit) == [(None, None, 2)]


# PCI in Placement ----------------------------------------------------------------------------

def placed(*providers: str) -> dict[str, list[str]]:
    return {'': ['root'], **{f'{REQUEST_ID}-{i}': [rp] for i, rp in enumerate(providers)}}


def test_apply_request_takes_from_each_pool_what_placement_allocated_from_its_provider():
    """``_apply_request`` with a Placement allocation takes ``Counter(rp_uuids)[rp]`` from
    each pool ``_filter_pools_based_on_placement_allocation`` kept, even when a provider
    has no pool left that can give its share (the pools kept hold enough in total)."""
    stats = pools({'numa_node': 0, 'count': 5, 'tags': {'rp_uuid': RP1}},
                  {'numa_node': 1, 'count': 0, 'tags': {'rp_uuid': RP2}})

    fit = fit_requests(stats, [request(2)], mappings=placed(RP1, RP2))

    assert fit.passed
    assert left(stats, fit) == [(0, None, 4), (1, None, 0)]


def test_assert_one_pool_per_rp_uuid_fails_a_provider_split_across_pools():
    """``_assert_one_pool_per_rp_uuid``: Nova does not follow an allocation when one
    provider's devices sit in two pools."""
    stats = pools({'numa_node': 0, 'count': 2, 'tags': {'rp_uuid': RP1}},
                  {'numa_node': 1, 'count': 2, 'tags': {'rp_uuid': RP1}},
                  {'numa_node': 1, 'count': 2, 'tags': {'rp_uuid': RP3}})

    assert not fit_requests(stats, [request(1)], mappings=placed(RP3)).passed
    assert fit_requests(stats, [request(1)], mappings={'': ['root']}).passed


def test_get_rp_uuids_for_request_a_port_is_never_placed():
    """``_get_rp_uuids_for_request``: a port's request (no alias) is served from the
    pools whatever the mappings hold."""
    stats = pools({'numa_node': 0, 'count': 1, 'tags': {'rp_uuid': RP1}},
                  {'numa_node': 1, 'count': 1, 'tags': {'rp_uuid': RP2}})

    fit = fit_requests(stats, [request(2, alias=None)], mappings=placed(RP2))

    assert fit.passed
    assert left(stats, fit) == []


def test_get_rp_uuids_for_request_without_mappings_reads_the_specs_rp_uuids():
    """``_get_rp_uuids_for_request`` without a provider mapping: the providers the spec's
    ``rp_uuids`` lists (an instance that was already allocated)."""
    stats = pools({'numa_node': 0, 'count': 1, 'tags': {'rp_uuid': RP1}},
                  {'numa_node': 1, 'count': 1, 'tags': {'rp_uuid': RP2}})

    fit = fit_requests(stats, [request(1, {**VF, 'rp_uuids': RP2})])

    assert fit.passed
    assert left(stats, fit) == [(0, None, 1)]


def test_filter_pools_based_on_placement_allocation_a_used_up_pool_serves_no_more():
    """``_filter_pools_based_on_placement_allocation`` after ``_apply_request`` emptied
    the provider's pool (and ``_decrease_pool_count`` removed it): the next instance
    placed there finds no pool and fails, although no pool is left to name a provider."""
    stats = pools({'numa_node': 0, 'count': 1, 'tags': {'rp_uuid': RP1}})

    first = fit_requests(stats, [request(1)], mappings=placed(RP1))
    after = stats.minus(first.taken)

    assert first.passed
    assert after.pools == ()
    assert not fit_requests(after, [request(1)], mappings=placed(RP1)).passed
    # Pools that never named a provider (a hosts file's): Placement's answer stands.
    assert fit_requests(HostPciStats(()), [request(1)], mappings=placed(RP1)).passed


# _decrease_pool_count ------------------------------------------------------------------------

def test_decrease_pool_count_a_pool_taken_to_zero_leaves_the_host():
    """``_decrease_pool_count`` removes a pool it empties; a pool nothing was taken from
    stays, even at 0 (nova-compute writes such pools after its claims)."""
    stats = pools({'numa_node': 0, 'count': 1}, {'numa_node': 1, 'count': 0},
                  {'numa_node': 2, 'count': 3})

    after = stats.minus({0: 1, 2: 1})

    assert [(p.numa_node, p.count) for p in after.pools] == [(1, 0), (2, 2)]


def test_a_pool_emptied_by_one_request_no_longer_splits_a_provider_for_the_next():
    """``_assert_one_pool_per_rp_uuid`` looks at the pools left: once the first request
    has emptied one of two pools of a provider, the second request's allocation is
    followed."""
    stats = pools({'numa_node': 0, 'count': 1, 'product_id': '154d',
                   'tags': {'dev_type': 'type-PCI', 'rp_uuid': RP1}},
                  {'numa_node': 1, 'count': 1, 'tags': {'rp_uuid': RP1}})
    first = PciRequest(1, (PCI,), alias_name='a-pci',
                       request_id='0c6f1f7e-6c1a-4c55-9d5c-6a1f8c2e0b11')  # not in Placement

    assert not fit_requests(stats, [request(1)], mappings=placed(RP1)).passed
    assert fit_requests(stats, [first, request(1)], mappings=placed(RP1)).passed
