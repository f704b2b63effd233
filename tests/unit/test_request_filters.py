"""Request filters: how they change the RequestSpec before the Placement query is built."""
from __future__ import annotations

import pytest

from scheduler.catalog.catalog import HostCatalog
from scheduler.exceptions import (
    InvalidInput,
    PluginNotFound,
    RequestFilterFailed,
    RequestTranslationError,
)
from scheduler.objects.spec import Aggregate, Destination, RequestSpec
from scheduler.request import filters
from scheduler.request.filters import (
    compute_status_filter,
    load_request_filters,
    map_az_to_placement_aggregate,
    run_request_filters,
)
from scheduler.request.translate import build_query
from tests.builders import CELL_UUID, make_conf, make_spec

# Nova 34's ALL_REQUEST_FILTERS, in its order (nova/scheduler/request_filter.py).
NOVA_REQUEST_FILTERS = [
    'require_tenant_aggregate', 'map_az_to_placement_aggregate', 'require_image_type_support',
    'compute_status_filter', 'isolate_aggregates', 'transform_image_metadata',
    'accelerators_filter', 'packed_virtqueue_filter', 'routed_networks_filter',
    'remote_managed_ports_filter', 'ephemeral_encryption_filter', 'virtio_sound_filter',
    'tpm_secret_security_filter', 'owner_nova_filter']

AZ1_A = '6a9e3c84-1c4f-4f5e-9a43-3f0c4f1d2a01'
AZ1_B = '0b7f3d2e-8c1a-4e5f-9b6a-7c8d9e0f1a22'
AZ2 = 'c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f'
SSD = '2f1e0d9c-8b7a-4695-8473-625140312f0e'


class Catalog:
    """The part of the HostCatalog the request filters use: aggregates by metadata."""

    def __init__(self, *aggregates: Aggregate):
        self.aggregates = list(aggregates)
        self.lookups: list[tuple[str, str | None]] = []

    def aggregates_with_metadata(self, key: str, value: str | None = None) -> list[Aggregate]:
        self.lookups.append((key, value))
        return [a for a in self.aggregates
                if key in a.metadata and (value is None or a.metadata[key] == value)]


CATALOG = Catalog(
    Aggregate(id=1, uuid=AZ1_A, name='az1-rack-a', metadata={'availability_zone': 'az1'}),
    Aggregate(id=2, uuid=AZ1_B, name='az1-rack-b', metadata={'availability_zone': 'az1'}),
    Aggregate(id=3, uuid=AZ2, name='az2', metadata={'availability_zone': 'az2'}),
    Aggregate(id=4, uuid=SSD, name='ssd', metadata={'ssd': 'true'}),
)


def spec(*, extra_specs: dict[str, str] | None = None, **kwargs) -> RequestSpec:
    """A 4 vCPU, 4096 MB, 40 GB flavor, no image."""
    return make_spec(vcpus=4, memory_mb=4096, root_gb=40, extra_specs=extra_specs, **kwargs)


# -- compute_status_filter ---------------------------------------------------------------------
def test_compute_status_filter_always_forbids_disabled_computes_on_the_root() -> None:
    s = spec()

    assert compute_status_filter(s, None, None) is True

    assert s.request_level_params.root_forbidden == {'COMPUTE_STATUS_DISABLED'}
    assert s.request_level_params.root_required == set()


def test_compute_status_filter_keeps_what_other_filters_forbade() -> None:
    s = spec()
    s.request_level_params.root_forbidden.add('CUSTOM_MAINTENANCE')

    compute_status_filter(s, None, None)

    assert s.request_level_params.root_forbidden == {'CUSTOM_MAINTENANCE',
                                                     'COMPUTE_STATUS_DISABLED'}


# -- map_az_to_placement_aggregate -------------------------------------------------------------
def test_az_becomes_one_or_set_of_the_aggregates_of_that_zone() -> None:
    s = spec(availability_zone='az1')

    assert map_az_to_placement_aggregate(s, CATALOG, None) is True

    assert s.requested_destination is not None
    assert s.requested_destination.aggregates == [f'{AZ1_B},{AZ1_A}']


def test_az_constraint_is_anded_with_aggregates_already_requested() -> None:
    s = spec(availability_zone='az2',
             requested_destination=Destination(host='compute-02', aggregates=[SSD]))

    map_az_to_placement_aggregate(s, CATALOG, None)

    assert s.requested_destination.aggregates == [SSD, AZ2]
    assert s.requested_destination.host == 'compute-02'


def test_az_that_no_aggregate_names_adds_no_constraint() -> None:
    # The default zone "nova" has no aggregate: every host is in it.
    s = spec(availability_zone='nova')

    assert map_az_to_placement_aggregate(s, CATALOG, None) is False

    assert s.requested_destination is None
    assert CATALOG.lookups[-1] == ('availability_zone', 'nova')


def test_no_az_requested_means_no_lookup_and_no_constraint() -> None:
    catalog = Catalog(*CATALOG.aggregates)
    s = spec()

    assert map_az_to_placement_aggregate(s, catalog, None) is False

    assert catalog.lookups == []
    assert s.requested_destination is None


# -- running and loading -----------------------------------------------------------------------
def test_run_returns_the_names_of_the_filters_that_acted_in_order() -> None:
    s = spec(availability_zone='nova')

    acted = run_request_filters([map_az_to_placement_aggregate, compute_status_filter],
                                s, CATALOG, None)

    assert acted == ['compute_status_filter']


def test_a_filter_that_fails_the_request_stops_the_run() -> None:
    calls: list[str] = []

    def no_hosts_for_tenant(spec, catalog, conf) -> bool:
        calls.append('tenant')
        raise RequestFilterFailed('No hosts available for tenant')

    def later(spec, catalog, conf) -> bool:
        calls.append('later')
        return True

    with pytest.raises(RequestFilterFailed, match='No hosts available for tenant'):
        run_request_filters([no_hosts_for_tenant, later], spec(), CATALOG, None)
    assert calls == ['tenant']


def test_filters_are_loaded_by_entry_point_name_in_the_order_given() -> None:
    loaded = load_request_filters(['map_az_to_placement_aggregate', 'compute_status_filter'])

    assert loaded == [map_az_to_placement_aggregate, compute_status_filter]


def test_an_unknown_filter_name_names_the_option_and_the_available_filters() -> None:
    with pytest.raises(PluginNotFound) as info:
        load_request_filters(['compute_status_filter', 'require_tenant_aggregates'])

    message = str(info.value)
    assert filters.OPTION in message
    assert "'require_tenant_aggregates'" in message
    assert 'compute_status_filter' in message.split('available:')[1]
    assert 'map_az_to_placement_aggregate' in message.split('available:')[1]


def test_filtered_spec_translates_to_the_az_row_of_nova() -> None:
    s = spec(availability_zone='az2')
    run_request_filters(load_request_filters(['map_az_to_placement_aggregate',
                                              'compute_status_filter']), s, CATALOG, None)

    query = build_query(s, limit=1000).query

    assert query.describe() == (
        f'limit=1000&member_of=in:{AZ2}&resources=DISK_GB:40,MEMORY_MB:4096,VCPU:4'
        f'&root_required=!COMPUTE_STATUS_DISABLED')


def test_every_nova_request_filter_is_a_plugin_of_the_same_name() -> None:
    loaded = load_request_filters(NOVA_REQUEST_FILTERS)

    assert [f.__name__ for f in loaded] == NOVA_REQUEST_FILTERS


def test_the_default_list_is_novas_order_without_owner_nova_filter() -> None:
    assert make_conf().scheduler.request_filters == NOVA_REQUEST_FILTERS[:-1]


def test_a_filter_that_finds_a_contradiction_is_refused_as_invalid_input_naming_it() -> None:
    def contradiction(spec, catalog, conf) -> bool:
        raise RequestTranslationError('the flavor says yes, the image says no')

    with pytest.raises(InvalidInput) as info:
        run_request_filters([contradiction], spec(), CATALOG, None)

    assert info.value.reason == ('request filter contradiction: the flavor says yes, '
                                 'the image says no')


def test_every_default_filter_with_every_option_on_handles_a_spec_without_an_image() -> None:
    # Nova crashes on image=None in several of them (packed_virtqueue_filter and others,
    # nova/scheduler/request_filter.py).
    conf = make_conf(scheduler={
        'limit_tenants_to_placement_aggregate': True,
        'query_placement_for_image_type_support': True,
        'enable_isolated_aggregate_filtering': True, 'image_metadata_prefilter': True,
        'query_placement_for_routed_network_aggregates': True})
    s = spec(extra_specs={'hw:tpm_version': '2.0', 'hw:virtio_packed_ring': 'true',
                          'hw:sound_model': 'virtio'})
    assert s.image is None

    acted = run_request_filters(load_request_filters(conf.scheduler.request_filters), s,
                                HostCatalog(default_cell_uuid=CELL_UUID), conf)

    assert acted == ['compute_status_filter', 'packed_virtqueue_filter', 'virtio_sound_filter',
                     'tpm_secret_security_filter']
    assert s.request_level_params.root_required == {
        'COMPUTE_NET_VIRTIO_PACKED', 'COMPUTE_SOUND_MODEL_VIRTIO',
        'COMPUTE_SECURITY_TPM_SECRET_SECURITY_USER'}
