"""Moves, rebuild checks and forced hosts through SchedulerManager, on the in-memory Placement.

Nova's semantics (claim_resources in nova/scheduler/utils.py,
SchedulerManager._legacy_find_hosts, HostManager.get_filtered_hosts) with this
scheduler's corrections (doc/design.md#claims-all-or-nothing): a consumer that
already holds allocations (evacuate) is claimed alongside them, and a failed
request gives them back instead of deleting them; a rebuild check asks
Placement for no candidates and claims nothing; a forced host skips the filters
unless a check type is set.
"""
from __future__ import annotations

import json

import pytest

from placement_client.models import AllocationRequest
from scheduler import exceptions as exc
from scheduler.context import RequestContext
from scheduler.filters.base import BaseHostFilter, FilterResult
from scheduler.objects.spec import Destination, RequestGroup
from tests.builders import PROJECT, USER, select, user_spec
from tests.unit.fake_placement import unavailable

ADMIN = 'adm1adm1adm1adm1adm1adm1adm1adm1'
CONTEXT = RequestContext(request_id='req-moves', user_id=ADMIN, project_id=ADMIN)
INSTANCE = '6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e0001'
NEW = '6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e0002'
STRANGER = 'f0000000-0000-4000-8000-00000000f001'
ASK = {'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}   # make_spec's flavor


class RejectEverything(BaseHostFilter):
    RUN_ON_REBUILD = False

    def host_passes(self, host_state, spec_obj):
        return False


class NeedsFreeRam(BaseHostFilter):
    """A rebuild-safe filter that reads the host's resources and remembers what it saw."""

    RUN_ON_REBUILD = True

    def __init__(self, minimum_mb: int):
        self.minimum_mb = minimum_mb
        self.seen: list[tuple[str, int, int]] = []

    def filter_result(self, host_state, spec_obj):
        self.seen.append((host_state.host, host_state.total_usable_ram_mb,
                          host_state.free_ram_mb))
        if host_state.free_ram_mb >= self.minimum_mb:
            return FilterResult.ok()
        return FilterResult.fail(f'free RAM below {self.minimum_mb} MB')


def admin_select(manager, request_spec, instance_uuids, **kwargs):
    """select as an admin (moves are admin-only), without alternates unless asked for."""
    kwargs.setdefault('return_alternates', False)
    return select(manager, request_spec, instance_uuids, context=CONTEXT, **kwargs)


def puts(fake) -> list[dict]:
    return [{k: c.kwargs[k] for k in ('consumer_uuid', 'consumer_generation', 'project_id',
                                      'user_id')}
            | {'allocations': {rp: dict(r) for rp, r in
                               c.kwargs['allocation_request'].allocations.items()}}
            for c in fake.calls_to('put_allocations')]


def evacuating(fake, *, source_ram_mb=65536, dest_ram_mb=32768):
    """An instance holding ASK on ``source`` (down, so ignored) and two free destinations."""
    source = fake.add_compute('source', ram_mb=source_ram_mb)
    dest = fake.add_compute('dest', ram_mb=dest_ram_mb)
    other = fake.add_compute('other', ram_mb=16384)
    fake.allocate(INSTANCE, {source: ASK}, project_id=PROJECT, user_id=USER)
    return source, dest, other


# ---------------------------------------------------------------------- moves (evacuate)


def test_an_evacuated_instance_keeps_its_source_allocations_and_gains_the_destinations(
        fake, make_manager):
    source, dest, _ = evacuating(fake)
    manager = make_manager()

    [[chosen]] = admin_select(manager, user_spec(ignore_hosts=['source']), [INSTANCE])

    assert chosen.compute_node_uuid == dest
    assert fake.holdings() == {INSTANCE: {source: ASK, dest: ASK}}
    # First PUT: as for a new consumer; Placement says it is not, GET tells its
    # generation; the move claim is sent at that generation, owner unchanged.
    assert puts(fake) == [
        {'consumer_uuid': INSTANCE, 'consumer_generation': None, 'project_id': PROJECT,
         'user_id': USER, 'allocations': {dest: ASK}},
        {'consumer_uuid': INSTANCE, 'consumer_generation': 1, 'project_id': PROJECT,
         'user_id': USER, 'allocations': {source: ASK, dest: ASK}}]
    assert len(fake.calls_to('get_allocations')) == 1
    assert fake.consumers[INSTANCE].generation == 2
    # The conductor gets the candidate it asked about, not the doubled body.
    assert json.loads(chosen.allocation_request) == {
        'allocations': {dest: {'resources': ASK}}, 'mappings': {'': [dest]}}
    assert chosen.allocation_request_version == '1.36'


def test_a_moved_consumer_keeps_its_owner_whoever_asks(fake, make_manager):
    source, dest, _ = evacuating(fake)
    manager = make_manager()

    admin_select(manager, user_spec(ignore_hosts=['source'], project_id='someone-else'), [INSTANCE])

    assert fake.consumers[INSTANCE].project_id == PROJECT
    assert {p['project_id'] for p in puts(fake)[1:]} == {PROJECT}


def test_the_next_candidate_of_a_move_starts_from_what_the_first_learnt(fake, make_manager):
    source, dest, other = evacuating(fake)
    # Someone fills 'dest' between our candidates and our claim.
    fake.script('put_allocations', lambda call: fake.allocate(STRANGER, {dest: {'VCPU': 16}}),
                when=lambda call: call.kwargs['consumer_generation'] == 1)
    manager = make_manager()

    [[chosen]] = admin_select(manager, user_spec(ignore_hosts=['source']), [INSTANCE])

    assert chosen.compute_node_uuid == other
    assert [p['consumer_generation'] for p in puts(fake)] == [None, 1, 1]
    assert len(fake.calls_to('get_allocations')) == 1
    assert fake.holdings()[INSTANCE] == {source: ASK, other: ASK}


def test_a_shared_provider_of_source_and_destination_is_not_claimed_twice(
        fake, make_manager):
    nfs = fake.add_provider('nfs', {'DISK_GB': 100}, traits=['MISC_SHARES_VIA_AGGREGATE'],
                            aggregates=['agg'])
    source = fake.add_provider('source', {'VCPU': 8, 'MEMORY_MB': 65536},
                               aggregates=['agg'])
    dest = fake.add_provider('dest', {'VCPU': 8, 'MEMORY_MB': 8192}, aggregates=['agg'])
    fake.allocate(INSTANCE, {source: {'VCPU': 1, 'MEMORY_MB': 512}, nfs: {'DISK_GB': 1}},
                  project_id=PROJECT, user_id=USER)
    manager = make_manager()

    admin_select(manager, user_spec(ignore_hosts=['source']), [INSTANCE])

    assert fake.holdings()[INSTANCE] == {source: {'VCPU': 1, 'MEMORY_MB': 512},
                                         nfs: {'DISK_GB': 1},
                                         dest: {'VCPU': 1, 'MEMORY_MB': 512}}


def test_a_consumer_changed_between_the_read_and_the_claim_is_read_again(fake, make_manager):
    source, dest, _ = evacuating(fake)
    # Someone else writes the consumer between our read and our claim.
    fake.script('put_allocations', lambda call: fake.consumers[INSTANCE].__setattr__(
        'generation', 7), when=lambda call: call.kwargs['consumer_generation'] == 1)
    manager = make_manager()

    admin_select(manager, user_spec(ignore_hosts=['source']), [INSTANCE])

    assert [p['consumer_generation'] for p in puts(fake)] == [None, 1, 7]
    assert fake.holdings()[INSTANCE] == {source: ASK, dest: ASK}


def test_a_failed_request_gives_a_moved_instance_its_allocations_back_and_deletes_nothing_else(
        fake, make_manager):
    source = fake.add_compute('source', ram_mb=65536)
    dest = fake.add_compute('dest', vcpus=1)          # room for one instance only
    fake.allocate(INSTANCE, {source: ASK}, project_id=PROJECT, user_id=USER)
    manager = make_manager()

    with pytest.raises(exc.NoValidHost):
        admin_select(manager, user_spec(num_instances=2, ignore_hosts=['source']), [INSTANCE, NEW])

    assert fake.holdings() == {INSTANCE: {source: ASK}}
    assert fake.calls_to('delete_allocations') == []
    assert puts(fake)[1]['allocations'] == {source: ASK, dest: ASK}   # the move claim
    restore = puts(fake)[-1]
    assert restore == {'consumer_uuid': INSTANCE, 'consumer_generation': 2,
                       'project_id': PROJECT, 'user_id': USER, 'allocations': {source: ASK}}
    assert manager.cleanups.pending() == set()


def test_a_failed_request_deletes_the_consumers_it_created_and_restores_the_moved_one(
        fake, make_manager):
    source = fake.add_compute('source', ram_mb=65536)
    dest = fake.add_compute('dest', vcpus=2)
    fake.allocate(INSTANCE, {source: ASK}, project_id=PROJECT, user_id=USER)
    third = '6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e0003'
    manager = make_manager()

    with pytest.raises(exc.NoValidHost):
        admin_select(manager, user_spec(num_instances=3, ignore_hosts=['source']),
                     [NEW, INSTANCE, third])

    assert fake.holdings() == {INSTANCE: {source: ASK}}
    assert [c.kwargs['consumer_uuid'] for c in fake.calls_to('delete_allocations')] == [NEW]
    assert dest not in fake.holdings()[INSTANCE]


def test_a_restore_placement_refuses_now_is_retried_later(fake, make_manager):
    source = fake.add_compute('source', ram_mb=65536)
    fake.add_compute('dest', vcpus=1)
    fake.allocate(INSTANCE, {source: ASK}, project_id=PROJECT, user_id=USER)
    fake.script('put_allocations', unavailable('PUT /allocations'),
                when=lambda call: call.kwargs['allocation_request'].allocations == {source: ASK})
    manager = make_manager()

    with pytest.raises(exc.NoValidHost):
        admin_select(manager, user_spec(num_instances=2, ignore_hosts=['source']), [INSTANCE, NEW])

    assert manager.cleanups.pending() == {INSTANCE}
    assert len(fake.holdings()[INSTANCE]) == 2

    manager.cleanups.retry_once()

    assert fake.holdings() == {INSTANCE: {source: ASK}}
    assert manager.cleanups.pending() == set()


def test_a_restore_does_not_overwrite_a_consumer_someone_changed_since(fake, make_manager):
    source = fake.add_compute('source', ram_mb=65536)
    dest = fake.add_compute('dest', vcpus=1)
    elsewhere = fake.add_compute('elsewhere', vcpus=1, ram_mb=1024)
    fake.allocate(INSTANCE, {source: ASK}, project_id=PROJECT, user_id=USER)
    fake.script('put_allocations', unavailable('PUT /allocations'),
                when=lambda call: call.kwargs['allocation_request'].allocations == {source: ASK})
    manager = make_manager()
    with pytest.raises(exc.NoValidHost):
        admin_select(manager, user_spec(num_instances=2, ignore_hosts=['source', 'elsewhere']),
                     [INSTANCE, NEW])
    # Meanwhile the operator moved the instance elsewhere by hand.
    current = fake.get_allocations(INSTANCE)
    fake.put_allocations(INSTANCE, AllocationRequest({elsewhere: ASK}),
                         project_id=PROJECT, user_id=USER,
                         consumer_generation=current.consumer_generation)

    manager.cleanups.retry_once()

    assert fake.holdings() == {INSTANCE: {elsewhere: ASK}}
    assert manager.cleanups.pending() == set()
    assert dest not in fake.holdings()[INSTANCE]


def test_a_later_retry_deletes_a_created_consumer_only_if_it_holds_what_was_claimed(
        fake, make_manager):
    cn0 = fake.add_compute('cn0', ram_mb=65536)
    fake.script('put_allocations', unavailable('PUT /allocations'),
                when=lambda call: call.kwargs['consumer_uuid'] == NEW)
    fake.script('delete_allocations', unavailable('DELETE /allocations'))
    manager = make_manager()
    with pytest.raises(exc.NoValidHost):
        admin_select(manager, user_spec(num_instances=2), [INSTANCE, NEW])
    # NEW: its PUT may yet land, so it is watched too (test_claims.py)
    assert manager.cleanups.pending() == {INSTANCE, NEW}
    # Before the retry, something else re-claimed that consumer differently.
    fake.consumers.pop(INSTANCE)
    fake.allocate(INSTANCE, {cn0: {'VCPU': 2}})

    manager.cleanups.retry_once()

    assert fake.holdings() == {INSTANCE: {cn0: {'VCPU': 2}}}
    assert manager.cleanups.pending() == {NEW}


def test_the_mappings_of_a_move_claim_are_sent_and_reach_the_spec(fake, make_manager):
    source = fake.add_compute('source', ram_mb=65536)
    dest = fake.add_compute('dest')
    nic = fake.add_provider('dest-nic', {'NET_BW_EGR_KILOBIT_PER_SEC': 10000}, parent=dest)
    fake.allocate(INSTANCE, {source: ASK}, project_id=PROJECT, user_id=USER)
    port = RequestGroup(requester_id='port-1', resources={'NET_BW_EGR_KILOBIT_PER_SEC': 100})
    manager = make_manager()

    admin_select(manager, user_spec(ignore_hosts=['source'], requested_resources=[port]),
                 [INSTANCE])

    move_claim = fake.calls_to('put_allocations')[-1].kwargs['allocation_request']
    assert dict(move_claim.mappings) == {'': (dest,), 'port-1': (nic,)}
    assert set(move_claim.allocations) == {source, dest, nic}


# ---------------------------------------------------------------------- rebuild checks


def rebuild_spec(host='cn0', **fields):
    return user_spec(rebuild=True, force_hosts=[host], force_nodes=[host], **fields)


def test_a_rebuild_check_asks_placement_for_no_candidates_and_claims_nothing(
        fake, make_manager):
    cn0 = fake.add_compute('cn0', ram_mb=1024)
    fake.add_compute('cn1', ram_mb=65536)
    # The instance fills its own host: a candidates query would exclude it.
    fake.allocate(INSTANCE, {cn0: {'VCPU': 16, 'MEMORY_MB': 1024}},
                  project_id=PROJECT, user_id=USER)
    manager = make_manager(filters=[RejectEverything()])

    [[chosen]] = admin_select(manager, rebuild_spec(), [INSTANCE])

    assert chosen.compute_node_uuid == cn0
    assert (chosen.service_host, chosen.nodename) == ('cn0', 'cn0')
    assert chosen.allocation_request == 'null'
    assert chosen.allocation_request_version is None
    assert {c.method for c in fake.calls} == {'get_resource_providers',
                                              'get_provider_summaries'}
    assert fake.holdings() == {INSTANCE: {cn0: {'VCPU': 16, 'MEMORY_MB': 1024}}}


def test_a_rebuild_check_runs_only_rebuild_filters_on_the_hosts_placement_data(
        fake, make_manager):
    cn0 = fake.add_compute('cn0', ram_mb=4096)
    fake.allocate(STRANGER, {cn0: {'MEMORY_MB': 1024}})
    rebuild_safe = NeedsFreeRam(minimum_mb=1)
    manager = make_manager(filters=[RejectEverything(), rebuild_safe])

    admin_select(manager, rebuild_spec(), [INSTANCE])

    assert rebuild_safe.seen == [('cn0', 4096, 3072)]


def test_a_rebuild_filter_that_rejects_the_host_is_named_in_no_valid_host(fake, make_manager):
    fake.add_compute('cn0', ram_mb=4096)
    manager = make_manager(filters=[NeedsFreeRam(minimum_mb=8192)])

    with pytest.raises(exc.NoValidHost) as failure:
        admin_select(manager, rebuild_spec(), [INSTANCE])

    assert failure.value.reason == ('0/1 hosts available: NeedsFreeRam removed 1 '
                                    '(free RAM below 8192 MB)')
    assert fake.calls_to('put_allocations') == []


def test_a_rebuild_check_of_a_host_placement_does_not_know_is_no_such_host(fake, make_manager):
    fake.add_compute('cn0')
    manager = make_manager()

    with pytest.raises(exc.NoValidHost) as failure:
        admin_select(manager, rebuild_spec(host='gone'), [INSTANCE])

    assert failure.value.reason == 'No such host - host: gone node: gone '


def test_a_rebuild_check_without_instance_uuids_answers_the_same(fake, make_manager):
    cn0 = fake.add_compute('cn0')
    manager = make_manager()

    [[chosen]] = admin_select(manager, rebuild_spec(), None)

    assert chosen.compute_node_uuid == cn0
    assert chosen.allocation_request == 'null'


def test_a_rebuild_check_honours_the_requested_destination_and_ignore_hosts(
        fake, make_manager):
    fake.add_compute('cn0')
    manager = make_manager()
    request = user_spec(rebuild=True, requested_destination=Destination(host='cn0'),
                        ignore_hosts=['CN0'])

    with pytest.raises(exc.NoValidHost) as failure:
        admin_select(manager, request, [INSTANCE])

    assert 'in ignore_hosts: 1' in failure.value.reason


def test_a_rebuild_check_reads_placement_or_says_it_could_not(fake, make_manager):
    fake.add_compute('cn0')
    fake.script('get_provider_summaries', unavailable('GET /resource_providers'))
    manager = make_manager()

    with pytest.raises(exc.NoValidHost) as failure:
        admin_select(manager, rebuild_spec(), [INSTANCE])

    assert failure.value.reason.startswith('Placement unreachable while reading the rebuild '
                                           'host')


# ---------------------------------------------------------------------- forced hosts


def test_a_forced_host_skips_the_filters_but_is_still_claimed(fake, make_manager):
    fake.add_compute('cn0', ram_mb=65536)
    cn1 = fake.add_compute('cn1')
    manager = make_manager(filters=[RejectEverything()])

    [[chosen]] = admin_select(manager, user_spec(force_hosts=['cn1']), [INSTANCE])

    assert chosen.compute_node_uuid == cn1
    assert fake.holdings() == {INSTANCE: {cn1: ASK}}


def test_a_forced_node_skips_the_filters_too(fake, make_manager):
    fake.add_compute('cn0', ram_mb=65536)
    cn1 = fake.add_compute('cn1')
    manager = make_manager(filters=[RejectEverything()])

    [[chosen]] = admin_select(manager, user_spec(force_nodes=['cn1']), [INSTANCE])

    assert chosen.compute_node_uuid == cn1


def test_a_forced_host_with_a_check_type_is_filtered(fake, make_manager):
    fake.add_compute('cn1')
    manager = make_manager(filters=[RejectEverything()])

    with pytest.raises(exc.NoValidHost) as failure:
        admin_select(manager, user_spec(force_hosts=['cn1'], hints={'_nova_check_type': 'migrate'}),
                     [INSTANCE])

    assert 'RejectEverything removed 1' in failure.value.reason
    assert fake.holdings() == {}


def test_a_requested_destination_is_filtered_like_any_host(fake, make_manager):
    fake.add_compute('cn1')
    manager = make_manager(filters=[RejectEverything()])

    with pytest.raises(exc.NoValidHost):
        admin_select(manager, user_spec(requested_destination=Destination(host='cn1')), [INSTANCE])


def test_a_forced_host_placement_cannot_fit_is_no_valid_host_without_claims(fake, make_manager):
    fake.add_compute('cn0', ram_mb=65536)
    cn1 = fake.add_compute('cn1', vcpus=1)
    manager = make_manager()

    [[chosen]] = admin_select(manager, user_spec(force_hosts=['cn1']), [INSTANCE])

    assert chosen.service_host == 'cn1'
    with pytest.raises(exc.NoValidHost):
        admin_select(manager, user_spec(force_hosts=['cn1']), [NEW])
    assert fake.holdings() == {INSTANCE: {cn1: ASK}}


def test_ignore_hosts_are_never_claimed_whatever_their_weight(fake, make_manager):
    fake.add_compute('cn0', ram_mb=65536)
    cn1 = fake.add_compute('cn1')
    manager = make_manager()

    [[chosen]] = admin_select(manager, user_spec(ignore_hosts=['Cn0']), [INSTANCE])

    assert chosen.compute_node_uuid == cn1
    assert [c for c, _ in fake.claims()] == [INSTANCE]
    assert all(cn1 in req.allocations for _, req in fake.claims())

