"""Request filters that read aggregate metadata from the HostCatalog: Nova's
require_tenant_aggregate, isolate_aggregates and routed_networks_filter
(nova/scheduler/request_filter.py).

The catalog is the real HostCatalog, fed as Nova feeds it: update_aggregates and
delete_aggregate casts.
"""
from __future__ import annotations

from collections.abc import Sequence

import pytest

from scheduler.catalog.catalog import HostCatalog
from scheduler.catalog.neutron import NeutronError, PortSegments
from scheduler.exceptions import RequestFilterFailed
from scheduler.objects.spec import Destination, RequestSpec
from scheduler.request.aggregate_filters import isolate_aggregates, require_tenant_aggregate
from scheduler.request.routed_networks import RoutedNetworkSources, routed_networks_filter
from scheduler.request.translate import build_query
from tests.builders import CELL_UUID, PROJECT, make_aggregate, make_conf, make_spec

OTHER_PROJECT = 'b5e2d1ef6c7f4b9a8b2c3d4e5f607182'
NETWORK = 'f0e1d2c3-b4a5-4968-8776-a5b4c3d2e1f0'
PORT = '9b2c1d0e-3f4a-4b5c-8d6e-7f8091a2b3c4'
SEGMENT_A = '11111111-2222-4333-8444-555555555555'
SEGMENT_B = '66666666-7777-4888-8999-aaaaaaaaaaaa'

TENANT_1 = make_aggregate('tenant-1', id=1, metadata={'filter_tenant_id': PROJECT})
TENANT_2 = make_aggregate('tenant-2', id=2, metadata={'filter_tenant_id2': PROJECT,
                                                       'filter_tenant_id': OTHER_PROJECT})
TENANT_LIST = make_aggregate('tenant-list', id=3,
                             metadata={'filter_tenant_id': f'{PROJECT},{OTHER_PROJECT}'})
NOT_A_TENANT_KEY = make_aggregate('owner', id=4, metadata={'owner': PROJECT})
GPU_ONLY = make_aggregate('gpu-only', id=5, metadata={'trait:CUSTOM_GPU': 'required'})
SGX_ONLY = make_aggregate('sgx-only', id=6, metadata={'trait:HW_CPU_X86_SGX': 'required',
                                                      'trait:CUSTOM_GPU': 'required'})
PREFERRED = make_aggregate('preferred', id=7, metadata={'trait:CUSTOM_GPU': 'preferred'})
SEGMENT_A_AGG = make_aggregate(f'Neutron segment id {SEGMENT_A}', id=8)
SEGMENT_B_AGG = make_aggregate(f'Neutron segment id {SEGMENT_B}', id=9)


def catalog(*aggregates) -> HostCatalog:
    c = HostCatalog(default_cell_uuid=CELL_UUID)
    c.update_aggregates(list(aggregates))
    return c


def spec(*, extra_specs: dict[str, str] | None = None, traits_required: Sequence[str] = (),
         project_id: str = PROJECT, **fields) -> RequestSpec:
    """A 2 vCPU, 2048 MB, 20 GB flavor of PROJECT, its image requiring ``traits_required``."""
    return make_spec(vcpus=2, memory_mb=2048, root_gb=20, extra_specs=extra_specs,
                     image_props={'traits_required': list(traits_required)},
                     project_id=project_id, **fields)


# -- require_tenant_aggregate ------------------------------------------------------------------
TENANT = make_conf(scheduler={'limit_tenants_to_placement_aggregate': True})
TENANT_REQUIRED = make_conf(scheduler={'limit_tenants_to_placement_aggregate': True,
                                       'placement_aggregate_required_for_tenants': True})


def test_a_tenant_is_kept_to_the_aggregates_whose_filter_tenant_id_keys_name_it() -> None:
    s = spec()

    acted = require_tenant_aggregate(
        s, catalog(TENANT_1, TENANT_2, TENANT_LIST, NOT_A_TENANT_KEY), TENANT)

    assert acted is True
    # One OR-set: any key starting filter_tenant_id whose value is the project id,
    # as Nova's API-DB query; a comma-separated list is not the project id.
    assert s.requested_destination.aggregates == [
        ','.join(sorted([TENANT_1.uuid, TENANT_2.uuid]))]


def test_the_tenant_constraint_is_anded_with_the_az_one() -> None:
    s = spec(requested_destination=Destination(aggregates=[SGX_ONLY.uuid]))

    require_tenant_aggregate(s, catalog(TENANT_1), TENANT)

    assert s.requested_destination.aggregates == [SGX_ONLY.uuid, TENANT_1.uuid]


def test_a_tenant_no_aggregate_names_is_unconstrained_by_default() -> None:
    s = spec(project_id='c0ffee00c0ffee00c0ffee00c0ffee00')

    assert require_tenant_aggregate(s, catalog(TENANT_1), TENANT) is False
    assert s.requested_destination is None


def test_a_tenant_no_aggregate_names_gets_no_host_when_aggregates_are_required() -> None:
    s = spec(project_id='c0ffee00c0ffee00c0ffee00c0ffee00')

    with pytest.raises(RequestFilterFailed, match='^No hosts available for tenant$'):
        require_tenant_aggregate(s, catalog(TENANT_1), TENANT_REQUIRED)


def test_the_tenant_filter_is_off_by_default_even_with_required_set() -> None:
    s = spec(project_id='c0ffee00c0ffee00c0ffee00c0ffee00')

    assert require_tenant_aggregate(s, catalog(TENANT_1), make_conf(
        scheduler={'placement_aggregate_required_for_tenants': True})) is False
    assert require_tenant_aggregate(s, catalog(TENANT_1), None) is False


def test_an_aggregate_deleted_by_a_cast_no_longer_admits_the_tenant() -> None:
    c = catalog(TENANT_1, TENANT_2)
    c.delete_aggregate(TENANT_1)
    s = spec()

    require_tenant_aggregate(s, c, TENANT)

    assert s.requested_destination.aggregates == [TENANT_2.uuid]


# -- isolate_aggregates ------------------------------------------------------------------------
ISOLATE = make_conf(scheduler={'enable_isolated_aggregate_filtering': True})

ISOLATION_ROWS = {
    'a request asking no trait is kept out of every trait-reserved aggregate':
        (spec(), {GPU_ONLY.uuid, SGX_ONLY.uuid}),
    'a flavor trait opens the aggregate that requires only it':
        (spec(extra_specs={'trait:CUSTOM_GPU': 'required'}), {SGX_ONLY.uuid}),
    'a trait of a numbered group counts too':
        (spec(extra_specs={'resources1:VGPU': '1', 'trait1:CUSTOM_GPU': 'required'}),
         {SGX_ONLY.uuid}),
    'an image traits_required counts':
        (spec(traits_required=['CUSTOM_GPU']), {SGX_ONLY.uuid}),
    'every reserved trait requested: no aggregate is forbidden':
        (spec(extra_specs={'trait:CUSTOM_GPU': 'required', 'trait:HW_CPU_X86_SGX': 'required'}),
         set()),
    'a forbidden trait does not open an aggregate':
        (spec(extra_specs={'trait:CUSTOM_GPU': 'forbidden'}), {GPU_ONLY.uuid, SGX_ONLY.uuid}),
}


@pytest.mark.parametrize('s, forbidden', ISOLATION_ROWS.values(), ids=ISOLATION_ROWS.keys())
def test_aggregates_reserved_for_traits_the_request_lacks_are_forbidden(
        s: RequestSpec, forbidden: set[str]) -> None:
    acted = isolate_aggregates(s, catalog(GPU_ONLY, SGX_ONLY, PREFERRED, TENANT_1), ISOLATE)

    assert acted is bool(forbidden)
    destination = s.requested_destination
    assert (destination.forbidden_aggregates if destination else set()) == forbidden


def test_root_required_traits_do_not_open_an_aggregate_as_in_nova() -> None:
    s = spec()
    s.request_level_params.root_required.add('CUSTOM_GPU')

    isolate_aggregates(s, catalog(GPU_ONLY), ISOLATE)

    assert s.requested_destination.forbidden_aggregates == {GPU_ONLY.uuid}


def test_isolation_is_off_by_default() -> None:
    s = spec()

    assert isolate_aggregates(s, catalog(GPU_ONLY), make_conf()) is False
    assert s.requested_destination is None


def test_isolated_aggregates_end_up_as_forbidden_member_of_in_the_query() -> None:
    s = spec()
    isolate_aggregates(s, catalog(GPU_ONLY), ISOLATE)

    params = build_query(s, limit=None).query.to_params()

    assert ('member_of', f'!in:{GPU_ONLY.uuid}') in params


# -- routed_networks_filter --------------------------------------------------------------------
ROUTED = make_conf(scheduler={'query_placement_for_routed_network_aggregates': True})


class SegmentAwareCatalog(HostCatalog):
    """A HostCatalog that can also name the segments of networks (a source the
    HostCatalog does not have today; the filter uses it when a catalog offers it)."""

    def __init__(self, segments: dict[str, list[str]]):
        super().__init__(default_cell_uuid=CELL_UUID)
        self.segments = segments

    def network_segments(self, network_id: str) -> list[str]:
        return self.segments.get(network_id, [])

    def port_segments(self, port_id: str) -> PortSegments:
        # A port is named after the network it is on here, with no fixed IP.
        return PortSegments(port_id, None, tuple(self.segments.get(port_id, [])))


def test_routed_networks_are_off_by_default() -> None:
    s = spec(requested_networks=[{'network_id': NETWORK}])

    assert routed_networks_filter(s, catalog(), make_conf()) is False
    assert s.requested_destination is None


def test_with_the_option_on_a_request_without_networks_is_unconstrained() -> None:
    for networks in ([], [{'network_id': 'auto'}], [{'network_id': 'none'}], [{}]):
        s = spec(requested_networks=networks)
        assert routed_networks_filter(s, catalog(), ROUTED) is False, networks
        assert s.requested_destination is None


@pytest.mark.parametrize('request_, named', [
    ({'network_id': NETWORK}, f'network {NETWORK}'),
    ({'port_id': PORT}, f'port {PORT}'),
    ({'port_id': PORT, 'network_id': NETWORK}, f'port {PORT}'),
])
def test_with_the_option_on_a_network_whose_segments_need_neutron_fails_and_says_so(
        request_: dict, named: str) -> None:
    s = spec(requested_networks=[request_])

    with pytest.raises(RequestFilterFailed) as info:
        routed_networks_filter(s, catalog(SEGMENT_A_AGG), ROUTED)

    message = str(info.value)
    assert named in message
    assert 'known only to Neutron' in message
    assert 'query_placement_for_routed_network_aggregates' in message


def test_segments_a_catalog_can_name_become_their_aggregates_one_or_set_per_network() -> None:
    other_network = 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee'
    c = SegmentAwareCatalog({NETWORK: [SEGMENT_A, SEGMENT_B], other_network: [SEGMENT_B]})
    c.update_aggregates([SEGMENT_A_AGG, SEGMENT_B_AGG, TENANT_1])
    s = spec(requested_networks=[{'network_id': NETWORK}, {'network_id': other_network}])

    assert routed_networks_filter(s, c, ROUTED) is True

    assert s.requested_destination.aggregates == [
        ','.join(sorted([SEGMENT_A_AGG.uuid, SEGMENT_B_AGG.uuid])), SEGMENT_B_AGG.uuid]


def test_a_network_without_segments_is_not_routed_and_adds_nothing() -> None:
    s = spec(requested_networks=[{'network_id': NETWORK}])

    assert routed_networks_filter(s, SegmentAwareCatalog({}), ROUTED) is False
    assert s.requested_destination is None


def test_a_segment_without_its_aggregate_fails_the_request_naming_the_segment() -> None:
    c = SegmentAwareCatalog({NETWORK: [SEGMENT_A, SEGMENT_B]})
    c.update_aggregates([SEGMENT_A_AGG])

    with pytest.raises(RequestFilterFailed, match=f'Aggregates not found for the network '
                                                  f'{NETWORK} .*segment {SEGMENT_B}'):
        routed_networks_filter(spec(requested_networks=[{'network_id': NETWORK}]), c, ROUTED)


SUBNET = 'b1b2b3b4-c5c6-4d7d-8e8e-f9f9f9f9f9f9'


class Neutron:
    """What NeutronNetworks answers: networks' segments, ports' network and segment."""

    def __init__(self, networks: dict[str, list[str]], ports: dict[str, PortSegments],
                 down: bool = False):
        self.networks, self.ports, self.down = networks, ports, down

    def network_segments(self, network_id):
        if self.down:
            raise NeutronError('GET /v2.0/subnets: ConnectFailure')
        return self.networks.get(network_id, [])

    def port_segments(self, port_id):
        return self.ports[port_id]


class Placement:
    def __init__(self, aggregates: dict[str, list[str]]):
        self.aggregates = aggregates

    def get_provider_aggregates(self, provider_uuid):
        return self.aggregates.get(provider_uuid, [])


def test_with_neutron_a_port_s_fixed_ip_segment_gets_the_aggregates_placement_names():
    sources = RoutedNetworkSources(
        catalog(), Neutron({NETWORK: [SEGMENT_A, SEGMENT_B]},
                           {PORT: PortSegments(NETWORK, SUBNET, (SEGMENT_B,))}),
        Placement({SEGMENT_A: ['agg-a'], SEGMENT_B: ['agg-b1', 'agg-b2']}))
    s = spec(requested_networks=[{'port_id': PORT}, {'network_id': NETWORK}])

    assert routed_networks_filter(s, sources, ROUTED) is True

    assert s.requested_destination.aggregates == ['agg-b1,agg-b2', 'agg-a,agg-b1,agg-b2']


def test_a_segment_placement_knows_no_aggregate_of_fails_naming_the_segment():
    sources = RoutedNetworkSources(catalog(), Neutron({NETWORK: [SEGMENT_A]}, {}),
                                   Placement({}))

    with pytest.raises(RequestFilterFailed,
                       match=f'Aggregates not found for the network {NETWORK} .*Failed to find '
                             f'aggregate related to segment {SEGMENT_A}'):
        routed_networks_filter(spec(requested_networks=[{'network_id': NETWORK}]), sources,
                               ROUTED)


def test_neutron_unreachable_fails_the_request_instead_of_passing_every_host():
    sources = RoutedNetworkSources(catalog(), Neutron({}, {}, down=True), Placement({}))

    with pytest.raises(RequestFilterFailed, match=f'segment IDs for network {NETWORK}'):
        routed_networks_filter(spec(requested_networks=[{'network_id': NETWORK}]), sources,
                               ROUTED)


def test_a_port_on_a_subnet_whose_segment_has_no_aggregate_says_which_subnet():
    sources = RoutedNetworkSources(
        catalog(), Neutron({}, {PORT: PortSegments(NETWORK, SUBNET, (SEGMENT_A,))}),
        Placement({}))

    with pytest.raises(RequestFilterFailed, match=f'Aggregates not found for the subnet {SUBNET}'):
        routed_networks_filter(spec(requested_networks=[{'port_id': PORT}]), sources, ROUTED)
