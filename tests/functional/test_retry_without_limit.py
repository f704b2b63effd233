"""No false NoValidHost: a request that fits somewhere is placed, whatever the limit.

5,000 hosts in a real Placement, the first 4,750 of them (in the order Placement
lists its candidates) with a disabled compute service. Placement knows nothing of that (no
COMPUTE_STATUS_DISABLED trait here, as when Nova's disabled-computes pre-filter
is off or a compute has not reported yet), so with ``max_placement_results =
1000`` its answer holds only disabled hosts, and ComputeFilter removes them all.
Nova fails the request there (its spec for the disabled-computes pre-filter
describes exactly this); this service asks once more without the limit.
"""
from __future__ import annotations

import pytest

from placement_client.query import AllocationCandidatesQuery, RequestGroupQuery
from scheduler import exceptions as exc
from scheduler.catalog import HostCatalog
from scheduler.catalog.hosts_file import HostsFileContent
from scheduler.host_state import HostRecord
from tests.builders import SERVICE_CELL, boot_spec, new_uuids, select
from tests.functional.cloud import bulk_hosts, consumers_with_allocations

HOSTS = 5000
DISABLED = 4750
LIMIT = 1000


def candidates(client, limit: int | None):
    return client.get_allocation_candidates(AllocationCandidatesQuery(
        groups=[RequestGroupQuery(resources={'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1})],
        limit=limit))


@pytest.fixture
def mostly_disabled_cloud(placement, placement_client):
    """(catalog, providers in Placement's order): the first DISABLED of them disabled."""
    names = {rp: name for name, rp in zip(
        (f'cn-{i:05d}' for i in range(HOSTS)),
        bulk_hosts(placement, [f'cn-{i:05d}' for i in range(HOSTS)]), strict=True)}
    # Placement's own order (not the order of creation), learnt from its whole answer.
    providers = [rp for request in candidates(placement_client, None).allocation_requests
                 for rp in request.allocations]
    assert sorted(providers) == sorted(names)
    catalog = HostCatalog(default_cell_uuid=SERVICE_CELL)
    catalog.load_content(HostsFileContent(hosts=tuple(
        HostRecord(nodename=names[rp], service_host=names[rp], cell_uuid=SERVICE_CELL,
                   provider_uuid=rp, disabled=i < DISABLED)
        for i, rp in enumerate(providers))), 'test')
    # The premise: the first LIMIT candidates Placement gives are all disabled hosts.
    first = candidates(placement_client, LIMIT)
    assert len(first) == LIMIT
    assert first.root_provider_uuids() <= set(providers[:DISABLED])
    return catalog, providers


def test_a_request_that_fits_beyond_the_limit_is_placed_there(
        start_scheduler, mostly_disabled_cloud, placement_client):
    catalog, providers = mostly_disabled_cloud
    running = start_scheduler(catalog, **{
        'filter_scheduler.enabled_filters': ['ComputeFilter'],
        'scheduler.max_placement_results': LIMIT})
    [instance] = new_uuids(1)

    [selections] = select(running, boot_spec(vcpus=1, ram_mb=512, disk_gb=1), [instance])

    enabled = set(providers[DISABLED:])
    assert selections[0].compute_node_uuid in enabled
    assert {s.compute_node_uuid for s in selections} <= enabled     # the alternates too
    held = placement_client.get_allocations(instance)
    assert set(held.allocations) == {selections[0].compute_node_uuid}


def test_with_the_retry_off_the_same_request_fails_as_it_does_in_nova(
        start_scheduler, mostly_disabled_cloud, placement_client):
    catalog, providers = mostly_disabled_cloud
    running = start_scheduler(catalog, **{
        'filter_scheduler.enabled_filters': ['ComputeFilter'],
        'scheduler.max_placement_results': LIMIT,
        'scheduler.retry_without_limit': False})

    with pytest.raises(exc.NoValidHost) as failure:
        select(running, boot_spec(vcpus=1, ram_mb=512, disk_gb=1), new_uuids(1))

    assert failure.value.reason.startswith(f'0/{LIMIT} hosts available: ComputeFilter removed '
                                           f'{LIMIT} (compute service is disabled)')
    assert f'limit {LIMIT}: other hosts were not considered' in failure.value.reason
    assert consumers_with_allocations(placement_client, providers[DISABLED:]) == {}
