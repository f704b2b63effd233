"""Aggregate tenancy and instance-count filters in the real service: real Placement,
real RPC (RabbitMQ and in-process).

The cloud: ``private`` is reserved for another project by its aggregate,
``full`` already runs the maximum number of instances, ``free`` is the smallest
host. RAMWeigher alone would pick ``private``, then ``full``.
"""
from __future__ import annotations

import pytest

from scheduler import exceptions as exc
from scheduler.catalog import HostCatalog
from scheduler.objects.spec import Aggregate
from tests.builders import SERVICE_CELL, boot_spec, new_uuids, select
from tests.functional.cloud import add_host, consumers_with_allocations

OTHER_PROJECT = '0c7e2f41d9b84a6f9e3d5b1a7c2e4f60'
FILTERS = {
    'filter_scheduler.enabled_filters': ['ComputeFilter', 'AggregateMultiTenancyIsolation',
                                         'NumInstancesFilter'],
    'filter_scheduler.max_instances_per_host': 2,
}


def catalog_with(*, private: bool = True, full: bool = True, free: bool = True) -> HostCatalog:
    """What nova-api's aggregate casts and nova-compute's instance syncs would have said."""
    catalog = HostCatalog(default_cell_uuid=SERVICE_CELL)
    if private:
        catalog.update_aggregates([Aggregate(
            id=1, uuid='7d3c1b2a-0000-4000-8000-0000000a66e1', name='dedicated',
            hosts=['private'], metadata={'filter_tenant_id': OTHER_PROJECT})])
        catalog.sync_instance_info('private', [])
    if full:
        catalog.sync_instance_info('full', new_uuids(2))
    if free:
        catalog.sync_instance_info('free', [])
    return catalog


def build_cloud(placement_client, *, private: bool = True, full: bool = True,
                free: bool = True) -> list[str]:
    hosts = []
    if private:
        hosts.append(add_host(placement_client, 'private', ram_mb=65536))
    if full:
        hosts.append(add_host(placement_client, 'full', ram_mb=32768))
    if free:
        hosts.append(add_host(placement_client, 'free', ram_mb=16384))
    return hosts


def test_reserved_and_full_hosts_are_passed_over_even_as_alternates(
        start_scheduler, placement_client):
    build_cloud(placement_client)
    running = start_scheduler(catalog_with(), **FILTERS)
    [instance] = new_uuids(1)

    [selections] = select(running, boot_spec(), [instance])

    assert [s.service_host for s in selections] == ['free']
    assert set(placement_client.get_allocations(instance).allocations) == {
        selections[0].compute_node_uuid}


def test_the_project_an_aggregate_is_reserved_for_gets_its_hosts(
        start_scheduler, placement_client):
    build_cloud(placement_client)
    running = start_scheduler(catalog_with(), **FILTERS)
    spec = boot_spec()
    spec.project_id = OTHER_PROJECT

    [selections] = select(running, spec, new_uuids(1))

    # Weighed first by RAM among the hosts both filters leave: private, free.
    assert [s.service_host for s in selections] == ['private', 'free']


def test_no_valid_host_names_each_filter_and_why(start_scheduler, placement_client):
    hosts = build_cloud(placement_client, free=False)
    running = start_scheduler(catalog_with(free=False), **FILTERS)

    with pytest.raises(exc.NoValidHost) as failure:
        select(running, boot_spec(), new_uuids(1))

    assert failure.value.reason == (
        '0/2 hosts available: AggregateMultiTenancyIsolation removed 1 (host is reserved for '
        'other projects (aggregate filter_tenant_id)); NumInstancesFilter removed 1 (host has '
        '2 instances (max_instances_per_host 2))')
    assert consumers_with_allocations(placement_client, hosts) == {}


def test_instances_of_one_request_count_against_the_limit_and_a_failure_rolls_back(
        start_scheduler, placement_client):
    hosts = build_cloud(placement_client, private=False, full=False)
    running = start_scheduler(catalog_with(private=False, full=False), **FILTERS)
    uuids = new_uuids(3)

    with pytest.raises(exc.NoValidHost) as failure:
        select(running, boot_spec(num_instances=3), uuids)

    assert failure.value.reason == (
        '0/1 hosts available for instance 3 of 3: NumInstancesFilter removed 1 (host has '
        '2 instances (max_instances_per_host 2))')
    assert consumers_with_allocations(placement_client, hosts) == {}
