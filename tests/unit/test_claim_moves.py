"""Claims for consumers that already hold allocations, and undoing claims exactly.

Nova's move claim (_move_operation_alloc_request, nova/scheduler/client/report.py)
keeps what the consumer holds and adds the destination; this service also keeps
``mappings``, merges a shared provider per resource class, and undoes a move by
restoring the previous allocations instead of deleting them
(doc/design.md#claims-all-or-nothing).
"""
from __future__ import annotations

import logging
import random

import pytest

from placement_client import exceptions as pexc
from placement_client.models import AllocationRequest, ConsumerAllocations
from scheduler.pipeline.claimer import Claim, Claimer, PendingCleanups, alongside, undo_claim
from tests.builders import PROJECT, USER
from tests.unit.fake_placement import FakePlacement

INSTANCE = '6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e8b01'
SOURCE, DEST, NFS, NIC = (f'00000000-0000-4000-8000-00000000000{i}' for i in range(1, 5))
ASK = {'VCPU': 2, 'MEMORY_MB': 2048}


def held(allocations, generation=3) -> ConsumerAllocations:
    return ConsumerAllocations(INSTANCE, allocations, generation, PROJECT, USER, 'INSTANCE')


# ---------------------------------------------------------------------- alongside()


def test_a_move_claim_is_what_the_consumer_holds_plus_the_new_providers():
    request = AllocationRequest({DEST: ASK, NIC: {'NET_BW_EGR_KILOBIT_PER_SEC': 10}},
                                {'': (DEST,), 'port-1': (NIC,)})

    move = alongside(held({SOURCE: ASK}), request)

    assert move.allocations == {SOURCE: ASK, DEST: ASK, NIC: {'NET_BW_EGR_KILOBIT_PER_SEC': 10}}
    assert move.mappings == request.mappings


def test_a_provider_in_both_gets_the_larger_amount_of_each_class_not_the_sum():
    move = alongside(held({SOURCE: ASK, NFS: {'DISK_GB': 20}}),
                     AllocationRequest({DEST: ASK, NFS: {'DISK_GB': 10, 'IOPS': 5}}))

    assert move.allocations[NFS] == {'DISK_GB': 20, 'IOPS': 5}


# ---------------------------------------------------------------------- Claimer


@pytest.fixture
def fake() -> FakePlacement:
    fake = FakePlacement()
    for name, rp in (('source', SOURCE), ('dest', DEST)):
        fake.add_compute(name, uuid=rp)
    return fake


def claimer(fake) -> Claimer:
    return Claimer(fake, max_attempts=4, retry_delay=0.0, sleep=lambda s: None,
                   rng=random.Random(1))


def test_a_consumer_known_to_hold_allocations_is_claimed_alongside_them_in_one_put(fake):
    fake.allocate(INSTANCE, {SOURCE: ASK}, project_id=PROJECT, user_id=USER)
    known = fake.get_allocations(INSTANCE)
    fake.calls.clear()

    made = claimer(fake).claim(INSTANCE, AllocationRequest({DEST: ASK}), project_id='x',
                               user_id='y', microversion='1.36', request_id=None, known=known)

    assert [c.method for c in fake.calls] == ['put_allocations']
    assert made == Claim(INSTANCE, {SOURCE: ASK, DEST: ASK}, 2, PROJECT, USER, known)
    assert made.is_move


def test_a_new_consumer_claim_records_that_it_created_the_consumer(fake):
    made = claimer(fake).claim(INSTANCE, AllocationRequest({DEST: ASK}), project_id=PROJECT,
                               user_id=USER, microversion='1.36', request_id=None)

    assert made == Claim(INSTANCE, {DEST: ASK}, 1, PROJECT, USER, None)
    assert fake.consumers[INSTANCE].generation == made.generation


# ---------------------------------------------------------------------- undo_claim()


def move_claim(fake) -> Claim:
    fake.allocate(INSTANCE, {SOURCE: ASK}, project_id=PROJECT, user_id=USER)
    return claimer(fake).claim(INSTANCE, AllocationRequest({DEST: ASK}), project_id=PROJECT,
                               user_id=USER, microversion='1.36', request_id=None,
                               known=fake.get_allocations(INSTANCE))


def test_undoing_a_move_restores_the_previous_allocations_at_the_claims_generation(fake):
    made = move_claim(fake)

    undo_claim(fake, made, request_id='req-x', verify=False)

    assert fake.holdings() == {INSTANCE: {SOURCE: ASK}}
    restore = fake.calls_to('put_allocations')[-1].kwargs
    assert (restore['consumer_generation'], restore['request_id']) == (made.generation, 'req-x')


def test_a_restore_whose_answer_was_lost_is_not_sent_again(fake):
    made = move_claim(fake)
    undo_claim(fake, made, request_id=None, verify=False)
    sent = len(fake.calls_to('put_allocations'))

    undo_claim(fake, made, request_id=None, verify=True)   # a retry after a lost answer

    assert len(fake.calls_to('put_allocations')) == sent + 1   # one PUT refused (generation)
    assert fake.holdings() == {INSTANCE: {SOURCE: ASK}}


def test_a_restore_placement_refuses_for_good_is_logged_and_dropped(fake, caplog):
    made = move_claim(fake)
    fake.script('put_allocations', pexc.CapacityExceeded('no room', status=409))

    with caplog.at_level(logging.ERROR, logger='scheduler.pipeline.claimer'):
        undo_claim(fake, made, request_id=None, verify=False)

    assert fake.holdings() == {INSTANCE: {SOURCE: ASK, DEST: ASK}}
    assert 'could not restore the previous allocations of ' + INSTANCE in caplog.text


def test_undoing_a_created_consumer_deletes_it(fake):
    made = claimer(fake).claim(INSTANCE, AllocationRequest({DEST: ASK}), project_id=PROJECT,
                               user_id=USER, microversion='1.36', request_id=None)
    cleanups = PendingCleanups(fake, interval=3600)
    try:
        assert cleanups.undo_now_or_later([made], request_id='req-y') == []
    finally:
        cleanups.stop()

    assert fake.holdings() == {}
    [delete] = fake.calls_to('delete_allocations')
    assert delete.kwargs == {'consumer_uuid': INSTANCE, 'request_id': 'req-y'}
