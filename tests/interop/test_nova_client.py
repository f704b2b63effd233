"""The conductor's, nova-api's and nova-compute's scheduler calls, made with Nova's own code.

Every request goes through ``nova.scheduler.client.query.SchedulerQueryClient``
(``SchedulerAPI`` underneath) with Nova's objects, ``RequestContext`` and
serializers, so what reaches the service is byte for byte what the env's Nova release sends,
and what comes back is read by Nova's own deserializer and exception rebuilding.
"""
from __future__ import annotations

import json
import uuid

import pytest
from nova import exception as nova_exception
from nova import objects
from nova.scheduler.client import query
from oslo_utils import timeutils

from scheduler.simulate import seed
from tests.fixtures.processes import wait_for
from tests.functional.cloud import add_host, consumers_with_allocations
from tests.interop import nova_builders as build
from tests.interop.nova_builders import (
    PROJECT,
    SERVICE_CELL,
    USER,
    admin_context,
    new_uuids,
    user_context,
)

SMALL = {'VCPU': 1, 'MEMORY_MB': 1024, 'DISK_GB': 10}


def _hosts(placement_client, *names: str) -> dict[str, str]:
    return {name: add_host(placement_client, name) for name in names}


def _allocations(placement_client, hosts: dict[str, str]) -> dict[str, dict]:
    """consumer -> {host name: resources}."""
    names = {rp: name for name, rp in hosts.items()}
    return {consumer: {names[rp]: res for rp, res in by_rp.items()}
            for consumer, by_rp in consumers_with_allocations(placement_client, hosts.values()
                                                              ).items()}


def test_a_multi_instance_boot_gets_claimed_selections_with_alternates_as_nova_objects(
        query_client, placement, placement_client):
    hosts = _hosts(placement_client, 'cn0', 'cn1', 'cn2', 'cn3')
    uuids = new_uuids(2)
    ctxt = user_context()
    group = build.anti_affinity_group(uuids)
    spec = build.boot_request_spec(
        ctxt, instance_uuid=uuids[0], num_instances=2, instance_group=group,
        filter_properties={'scheduler_hints': {'group': group.uuid}})

    host_lists = query_client.select_destinations(ctxt, spec, uuids, return_objects=True,
                                                  return_alternates=True)

    assert len(host_lists) == 2
    chosen = [selections[0] for selections in host_lists]
    assert all(isinstance(s, objects.Selection) for sl in host_lists for s in sl)
    assert len({s.service_host for s in chosen}) == 2
    for selections in host_lists:
        # [scheduler] max_attempts = 3: the chosen host and at most two alternates,
        # none of them a host chosen for another instance of this request.
        assert 1 <= len(selections) <= 3
        assert not {s.service_host for s in selections[1:]} & {s.service_host for s in chosen}
        for s in selections:
            assert s.cell_uuid == SERVICE_CELL
            assert s.nodename == s.service_host
            assert s.compute_node_uuid == hosts[s.service_host]
            assert 'availability_zone' in s
            request = json.loads(s.allocation_request)
            assert request['allocations'][s.compute_node_uuid]['resources'] == SMALL
            assert s.allocation_request_version
    assert sum(len(sl) - 1 for sl in host_lists) >= 1
    # The chosen hosts are claimed for their instances; alternates are not.
    assert _allocations(placement_client, hosts) == {
        u: {sl[0].service_host: SMALL} for u, sl in zip(uuids, host_lists, strict=True)}


def test_a_resize_claims_the_new_flavor_for_the_instance_away_from_the_source(
        query_client, placement, placement_client):
    hosts = _hosts(placement_client, 'cn0', 'cn1')
    instance, migration = new_uuids(2)
    # Conductor moved the instance's allocations to the migration record first.
    seed.allocate(placement_client, migration, {hosts['cn0']: SMALL}, PROJECT, USER)
    ctxt = user_context()
    spec = build.boot_request_spec(ctxt, instance_uuid=instance)
    spec.flavor = build.flavor(vcpus=2, ram_mb=2048, disk_gb=20, flavor_id=2)
    spec.ignore_hosts = ['cn0']       # allow_resize_to_same_host = False
    spec.requested_destination = build.same_cell_destination()

    [[selected, *_]] = query_client.select_destinations(
        ctxt, spec, [instance], return_objects=True, return_alternates=True)

    assert selected.service_host == 'cn1'
    new = {'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 20}
    assert _allocations(placement_client, hosts) == {migration: {'cn0': SMALL},
                                                     instance: {'cn1': new}}


def test_a_live_migration_never_lands_on_an_ignored_host(query_client, placement,
                                                         placement_client):
    hosts = _hosts(placement_client, 'cn0', 'cn1', 'cn2')
    instance, migration = new_uuids(2)
    seed.allocate(placement_client, migration, {hosts['cn0']: SMALL}, PROJECT, USER)
    ctxt = user_context()
    spec = build.boot_request_spec(ctxt, instance_uuid=instance)
    spec.reset_forced_destinations()
    spec.requested_destination = build.same_cell_destination()
    # The conductor's retry loop: the source and a host that already failed.
    spec.ignore_hosts = ['cn0', 'cn1']

    host_lists = query_client.select_destinations(ctxt, spec, [instance], return_objects=True,
                                                  return_alternates=False)

    assert [[s.service_host for s in sl] for sl in host_lists] == [['cn2']]
    assert _allocations(placement_client, hosts)[instance] == {'cn2': SMALL}


def test_an_evacuation_claims_the_destination_next_to_the_source_allocation(
        query_client, scheduler_process, placement, placement_client):
    hosts = _hosts(placement_client, 'cn0', 'cn1')
    [instance] = new_uuids(1)
    seed.allocate(placement_client, instance, {hosts['cn0']: SMALL}, PROJECT, USER)
    ctxt = user_context()
    spec = build.boot_request_spec(ctxt, instance_uuid=instance)
    spec.ignore_hosts = ['cn0']
    spec.reset_forced_destinations()
    spec.requested_destination = build.same_cell_destination()

    [[selected]] = query_client.select_destinations(ctxt, spec, [instance], return_objects=True,
                                                    return_alternates=False)

    assert selected.service_host == 'cn1'
    # Nova's move claim: the consumer keeps its source allocation until the
    # evacuation is confirmed, and gains the destination's.
    assert _allocations(placement_client, hosts) == {instance: {'cn0': SMALL, 'cn1': SMALL}}
    # The cell mapping's credentials came along in the RequestSpec; none is logged.
    assert build.CELL_SECRET not in scheduler_process.output()


def test_a_rebuild_check_answers_for_the_forced_host_and_claims_nothing(
        query_client, placement, placement_client):
    hosts = _hosts(placement_client, 'cn0', 'cn1')
    [instance] = new_uuids(1)
    seed.allocate(placement_client, instance, {hosts['cn1']: SMALL}, PROJECT, USER)
    ctxt = user_context()
    spec = build.boot_request_spec(ctxt, instance_uuid=instance)
    # nova-api's rebuild with a new image (compute/api.py).
    spec.scheduler_hints['_nova_check_type'] = ['rebuild']
    spec.force_hosts = ['cn1']
    spec.force_nodes = ['cn1']

    [[selected]] = query_client.select_destinations(ctxt, spec, [instance], return_objects=True,
                                                    return_alternates=False)

    assert (selected.service_host, selected.nodename) == ('cn1', 'cn1')
    assert selected.compute_node_uuid == hosts['cn1']
    assert json.loads(selected.allocation_request) is None     # as Nova: nothing was claimed
    assert _allocations(placement_client, hosts) == {instance: {'cn1': SMALL}}


def test_no_valid_host_arrives_as_novas_own_exception_with_our_reason(
        query_client, placement, placement_client):
    hosts = _hosts(placement_client, 'cn0')
    [instance] = new_uuids(1)
    ctxt = user_context()
    spec = build.boot_request_spec(ctxt, instance_uuid=instance, vcpus=64)

    with pytest.raises(nova_exception.NoValidHost) as raised:
        query_client.select_destinations(ctxt, spec, [instance], return_objects=True,
                                         return_alternates=True)

    error = raised.value
    assert type(error).__name__ == 'NoValidHost_Remote'
    # Our reason (Nova's own would be empty), in Nova's message format.
    assert 'no allocation candidates' in error.kwargs['reason']
    assert 'VCPU:64' in error.kwargs['reason']
    assert str(error).startswith(f"No valid host was found. {error.kwargs['reason']}")
    assert _allocations(placement_client, hosts) == {}


def _place_or_none(query_client, ctxt, **spec_kw) -> str | None:
    """The host one instance lands on, or None on NoValidHost."""
    [instance] = new_uuids(1)
    spec = build.boot_request_spec(ctxt, instance_uuid=instance, **spec_kw)
    try:
        [[selected, *_]] = query_client.select_destinations(
            ctxt, spec, [instance], return_objects=True, return_alternates=True)
    except nova_exception.NoValidHost:
        return None
    return selected.service_host


def _eventually(query_client, ctxt, expected: str | None, what: str, **spec_kw) -> None:
    # A fanout cast and the next call travel on different queues: the cast's
    # effect shows within a bounded wait, not necessarily at the first call.
    wait_for(lambda: _place_or_none(query_client, ctxt, **spec_kw) == expected, what,
             timeout=30)


def test_aggregate_casts_from_nova_api_reach_the_catalog(query_client, placement,
                                                         placement_client):
    _hosts(placement_client, 'cn0', 'cn1', 'cn2')
    admin, ctxt = admin_context(), user_context()
    ssd = {'extra_specs': {'aggregate_instance_extra_specs:ssd': 'true'}}
    aggregate = objects.Aggregate(id=7, uuid=str(uuid.uuid4()), name='ssd', hosts=['cn2'],
                                  metadata={'ssd': 'true'}, created_at=timeutils.utcnow(),
                                  updated_at=None, deleted_at=None, deleted=False)
    assert _place_or_none(query_client, ctxt, **ssd) is None

    # nova-api's AggregateAPI sends a list of one aggregate.
    query_client.update_aggregates(admin, [aggregate])
    _eventually(query_client, ctxt, 'cn2', 'update_aggregates to put cn2 in "ssd"', **ssd)
    assert {_place_or_none(query_client, ctxt, **ssd) for _ in range(3)} == {'cn2'}

    query_client.delete_aggregate(admin, aggregate)
    _eventually(query_client, ctxt, None, 'delete_aggregate to leave no "ssd" host', **ssd)


def test_instance_info_casts_from_nova_compute_reach_the_catalog(query_client, placement,
                                                                 placement_client):
    _hosts(placement_client, 'cn0', 'cn1', 'cn2')
    ctxt = user_context()
    # nova-compute elevates its context before casting.
    compute = ctxt.elevated()
    on_cn1, on_cn0 = new_uuids(2)

    def near(instance_uuid: str) -> dict:
        return {'filter_properties': {'scheduler_hints': {'same_host': [instance_uuid]}}}

    assert _place_or_none(query_client, ctxt, **near(on_cn1)) is None

    query_client.update_instance_info(
        compute, 'cn1', objects.InstanceList(objects=[build.instance(on_cn1, 'cn1')]))
    _eventually(query_client, ctxt, 'cn1', 'update_instance_info to put it on cn1',
                **near(on_cn1))
    away = {'filter_properties': {'scheduler_hints': {'different_host': [on_cn1]}}}
    assert 'cn1' not in {_place_or_none(query_client, ctxt, **away) for _ in range(3)}

    query_client.delete_instance_info(compute, 'cn1', on_cn1)
    _eventually(query_client, ctxt, None, 'delete_instance_info to take it off cn1',
                **near(on_cn1))

    query_client.sync_instance_info(compute, 'cn0', [on_cn0])
    _eventually(query_client, ctxt, 'cn0', 'sync_instance_info to put it on cn0',
                **near(on_cn0))


@pytest.mark.parametrize('cap, version, claims', [
    ('4.4', '4.4', True),       # Pike: instance_uuids, legacy host dicts
    ('ocata', '4.3', False),    # no instance_uuids: nothing claimed
    ('4.0', '4.0', False),      # legacy request_spec/filter_properties dicts
])
def test_novas_client_downgrades_under_an_upgrade_levels_cap_and_still_gets_answers(
        nova_conf, scheduler_process, placement, placement_client, cap, version, claims):
    hosts = _hosts(placement_client, 'cn0', 'cn1')
    nova_conf.set_override('scheduler', cap, group='upgrade_levels')
    try:
        capped = query.SchedulerQueryClient()
        assert capped.scheduler_rpcapi.client.can_send_version(version)
        assert not capped.scheduler_rpcapi.client.can_send_version('4.5')
        ctxt = user_context()
        [instance] = new_uuids(1)
        spec = build.boot_request_spec(ctxt, instance_uuid=instance)

        # Nova refuses locally to ask an old scheduler for Selection objects.
        with pytest.raises(nova_exception.SelectionObjectsWithOldRPCVersionNotSupported):
            capped.select_destinations(ctxt, spec, [instance], return_objects=True)
        [destination] = capped.select_destinations(ctxt, spec, [instance])
    finally:
        nova_conf.clear_override('scheduler', group='upgrade_levels')

    assert set(destination) == {'host', 'nodename', 'limits'}
    assert destination['host'] in hosts and destination['nodename'] == destination['host']
    expected = {instance: {destination['host']: SMALL}} if claims else {}
    assert _allocations(placement_client, hosts) == expected
