"""select_destinations end to end: real Placement, real RPC (RabbitMQ and in-process).

Each test reads as a sentence about the service's behaviour; what Placement
holds afterwards is always read back from Placement itself.
"""
from __future__ import annotations

import json
import time

import pytest

from scheduler import exceptions as exc
from scheduler.objects.codec import encode_request_spec
from scheduler.objects.spec import Destination
from scheduler.simulate import seed
from tests.builders import CONTEXT, PROJECT, USER, boot_spec, new_uuids, select
from tests.functional.cloud import add_host, consumers_with_allocations


def wait_until(predicate, timeout: float = 10.0) -> None:
    """Casts are asynchronous: wait (bounded) until their effect is visible."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, 'the cast was not applied'
        time.sleep(0.05)


def test_one_instance_is_claimed_in_placement_and_alternates_come_from_its_cell(
        start_scheduler, placement_client):
    hosts = [add_host(placement_client, f'cn{i}') for i in range(4)]
    running = start_scheduler()
    [instance] = new_uuids(1)

    [selections] = select(running, boot_spec(vcpus=2, ram_mb=2048, disk_gb=20), [instance])

    chosen, *alternates = selections
    held = placement_client.get_allocations(instance)
    assert held.allocations == {chosen.compute_node_uuid: {'VCPU': 2, 'MEMORY_MB': 2048,
                                                           'DISK_GB': 20}}
    assert (held.project_id, held.user_id) == (PROJECT, USER)
    assert json.loads(chosen.allocation_request)['allocations'] == {
        chosen.compute_node_uuid: {'resources': {'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 20}}}
    assert chosen.allocation_request_version == '1.36'
    assert chosen.service_host == chosen.nodename == f'cn{hosts.index(chosen.compute_node_uuid)}'
    # max_attempts 3 -> two alternates, other hosts, same cell, nothing claimed for them
    assert len(alternates) == 2
    assert {a.compute_node_uuid for a in alternates}.isdisjoint({chosen.compute_node_uuid})
    assert {a.cell_uuid for a in selections} == {chosen.cell_uuid}
    assert set(consumers_with_allocations(placement_client, hosts)) == {instance}


def test_anti_affinity_spreads_the_instances_of_one_request(start_scheduler, placement_client):
    for i in range(3):
        add_host(placement_client, f'cn{i}')
    running = start_scheduler()
    uuids = new_uuids(3)

    result = select(running, boot_spec(group_policy='anti-affinity', group_members=uuids,
                                       num_instances=3), uuids)

    assert len({per_instance[0].service_host for per_instance in result}) == 3


def test_a_request_that_cannot_place_every_instance_leaves_no_allocation_behind(
        start_scheduler, placement_client):
    hosts = [add_host(placement_client, f'cn{i}') for i in range(2)]
    running = start_scheduler()
    uuids = new_uuids(3)

    with pytest.raises(exc.NoValidHost) as failure:
        select(running, boot_spec(group_policy='anti-affinity', group_members=uuids,
                                  num_instances=3), uuids)

    assert failure.value.reason == (
        '0/2 hosts available for instance 3 of 3: 1 excluded for earlier instances of this '
        'request; ServerGroupAntiAffinityFilter removed 1 (anti-affinity: 1 member of group '
        'already on host (max 1))')
    assert consumers_with_allocations(placement_client, hosts) == {}


def test_capacity_runs_out_mid_request_and_every_claim_is_rolled_back(
        start_scheduler, placement_client):
    hosts = [add_host(placement_client, f'cn{i}', vcpus=4) for i in range(2)]
    running = start_scheduler()
    uuids = new_uuids(5)   # 4 vCPU each host, 2 vCPU each instance: only 4 fit

    with pytest.raises(exc.NoValidHost) as failure:
        select(running, boot_spec(vcpus=2, num_instances=5), uuids)

    assert 'instance 5 of 5' in failure.value.reason
    assert consumers_with_allocations(placement_client, hosts) == {}


def test_a_claim_lost_to_another_consumer_moves_on_to_the_next_host(
        start_scheduler, placement_client):
    big = add_host(placement_client, 'big', ram_mb=32768)
    small = add_host(placement_client, 'small', ram_mb=16384)
    running = start_scheduler()
    service_client = running.service.placement
    fetch = service_client.get_allocation_candidates

    def fetch_then_lose_the_race(*args, **kwargs):
        candidates = fetch(*args, **kwargs)
        # Between our GET and our PUT another scheduler fills the host that
        # RAMWeigher prefers; Placement itself must refuse our claim.
        seed.allocate(placement_client, 'f0000000-0000-4000-8000-000000000001',
                      {big: {'VCPU': 8, 'MEMORY_MB': 32768, 'DISK_GB': 100}}, PROJECT, USER)
        return candidates

    service_client.get_allocation_candidates = fetch_then_lose_the_race
    [instance] = new_uuids(1)

    [selections] = select(running, boot_spec(), [instance])

    assert selections[0].compute_node_uuid == small
    held = consumers_with_allocations(placement_client, [big, small])
    assert set(held) == {instance, 'f0000000-0000-4000-8000-000000000001'}


def test_placement_outage_is_named_and_the_service_serves_again_when_it_is_back(
        start_scheduler, placement, placement_client):
    add_host(placement_client, 'cn0')
    running = start_scheduler()
    placement.stop()

    with pytest.raises(exc.NoValidHost) as failure:
        select(running, boot_spec(), new_uuids(1))
    assert failure.value.reason.startswith('Placement unreachable after 2 attempts')

    placement.start()
    [instance] = new_uuids(1)
    [selections] = select(running, boot_spec(), [instance])
    assert selections[0].service_host == 'cn0'


def test_a_malformed_request_gets_a_readable_error_and_nothing_is_claimed(
        start_scheduler, placement_client):
    host = add_host(placement_client, 'cn0')
    running = start_scheduler()
    primitive = encode_request_spec(boot_spec())
    primitive['nova_object.data']['flavor']['nova_object.data']['memory_mb'] = -5
    [instance] = new_uuids(1)

    with pytest.raises(exc.InvalidInput) as failure:
        running.client.select_destinations(CONTEXT, primitive, [instance])

    assert 'memory_mb' in failure.value.reason
    assert consumers_with_allocations(placement_client, [host]) == {}
    # ... and the service is still there for the next caller.
    assert select(running, boot_spec(), [instance])[0][0].service_host == 'cn0'


def test_no_candidates_names_the_query(start_scheduler, placement_client):
    add_host(placement_client, 'cn0', vcpus=4)
    running = start_scheduler()

    with pytest.raises(exc.NoValidHost) as failure:
        select(running, boot_spec(vcpus=64), new_uuids(1))

    reason = failure.value.reason
    assert reason.startswith('Placement returned no allocation candidates for ')
    assert 'VCPU:64' in reason


def test_disabled_computes_are_never_chosen(start_scheduler, placement_client):
    seed.ensure_trait(placement_client, 'COMPUTE_STATUS_DISABLED')
    add_host(placement_client, 'disabled', ram_mb=65536, traits=['COMPUTE_STATUS_DISABLED'])
    add_host(placement_client, 'enabled')
    running = start_scheduler()

    result = select(running, boot_spec(), new_uuids(1))

    assert [s.service_host for s in result[0]] == ['enabled']


def test_requested_destination_pins_the_host(start_scheduler, placement_client):
    for i in range(3):
        add_host(placement_client, f'cn{i}')
    running = start_scheduler()

    [selections] = select(running, boot_spec(requested_destination=Destination(host='cn2')),
                          new_uuids(1))

    assert selections[0].service_host == 'cn2'


def test_an_availability_zone_learnt_from_the_aggregate_cast_steers_the_request(
        start_scheduler, placement_client):
    agg_uuid = '6a1b2c3d-0000-4000-8000-00000000a21a'
    add_host(placement_client, 'cn0', ram_mb=65536)
    add_host(placement_client, 'cn1', aggregates=[agg_uuid])
    running = start_scheduler()
    # What nova-api casts when an operator adds cn1 to an AZ aggregate.
    running.client.cast(CONTEXT, 'update_aggregates', version='4.1', aggregates=[{
        'nova_object.name': 'Aggregate', 'nova_object.namespace': 'nova',
        'nova_object.version': '1.3',
        'nova_object.data': {'id': 1, 'uuid': agg_uuid, 'name': 'az1-hosts', 'hosts': ['cn1'],
                             'metadata': {'availability_zone': 'az1'}, 'deleted': False}}])
    wait_until(lambda: running.catalog.aggregates_with_metadata('availability_zone', 'az1'))

    [selections] = select(running, boot_spec(availability_zone='az1'), new_uuids(1))

    assert selections[0].service_host == 'cn1'
    assert selections[0].availability_zone == 'az1'


def test_legacy_callers_get_host_dicts(start_scheduler, placement_client):
    add_host(placement_client, 'cn0')
    running = start_scheduler()

    result = select(running, boot_spec(), new_uuids(1), return_objects=False)

    assert result == [{'host': 'cn0', 'nodename': 'cn0', 'limits': {}}]


def test_ping_answers_in_the_baseapi_namespace(start_scheduler):
    running = start_scheduler()

    answer = running.client.call(CONTEXT, 'ping', version='1.1', namespace='baseapi', arg='hi')

    assert answer == {'service': 'scheduler', 'arg': 'hi'}


def test_a_multi_create_fills_a_host_s_second_nested_provider_after_the_first(
        start_scheduler, placement_client):
    """Two instances asking for 16 VGPU each, one host with two pGPUs of 16: both fit.

    nova-scheduler fails this request (its bug 1874664, which Nova's own
    libvirt/test_vgpu.py pins): for the second instance it claims the candidate
    the first one already used. Here each instance takes the next candidate that
    still fits, so the second lands on the other pGPU.
    """
    host = add_host(placement_client, 'gpu-host')
    gpus = [seed.create_provider(placement_client, name=f'gpu-host_pgpu{i}', parent_uuid=host,
                                 inventories={'VGPU': {'total': 16, 'allocation_ratio': 1.0}})
            for i in range(2)]
    running = start_scheduler()
    uuids = new_uuids(2)

    result = select(running, boot_spec(extra_specs={'resources:VGPU': '16'},
                                       num_instances=2), uuids)

    assert [per_instance[0].service_host for per_instance in result] == ['gpu-host'] * 2
    held = consumers_with_allocations(placement_client, gpus)
    assert sorted(held) == sorted(uuids)
    assert sorted(next(iter(held[u])) for u in uuids) == sorted(gpus)
