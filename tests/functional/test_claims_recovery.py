"""Giving back a journaled claim nobody answered for, against a REAL Placement.

A claim is given back only while Placement shows the consumer exactly as the
claim left it (the same allocations at the generation the claim gave it), and
the give-back is itself a write at that generation: whoever wrote the consumer
since (nova-conductor re-claiming it, a move's rollback, the user deleting the
instance) never loses anything to it.
"""
from __future__ import annotations

import time
import uuid

import pytest

from placement_client.client import ALLOCATION_CANDIDATES_MICROVERSION
from placement_client.models import AllocationRequest
from scheduler import metrics
from scheduler.journal.log import JournalFile
from scheduler.journal.requests import RequestJournal
from scheduler.pipeline.claim_state import claim_record
from scheduler.pipeline.claimer import Claimer, PendingCleanups
from scheduler.pipeline.recovery import Outcome, undo_if_unchanged
from tests.builders import PROJECT, USER
from tests.fixtures.processes import wait_for
from tests.functional.cloud import add_host

SMALL = {'VCPU': 1, 'MEMORY_MB': 512}


@pytest.fixture
def hosts(placement_client) -> list[str]:
    return [add_host(placement_client, f'cn{n}') for n in range(2)]


def on(provider: str) -> AllocationRequest:
    return AllocationRequest(allocations={provider: dict(SMALL)})


def claim(placement_client, instance: str, provider: str):
    return Claimer(placement_client, retry_delay=0).claim(
        instance, on(provider), project_id=PROJECT, user_id=USER,
        microversion=ALLOCATION_CANDIDATES_MICROVERSION, request_id='req-recovery')


def write_as_it_is_now(placement_client, instance: str, provider: str) -> None:
    """Another writer puts the consumer on ``provider`` alone, at its generation now."""
    current = placement_client.get_allocations(instance)
    placement_client.put_allocations(instance, on(provider), project_id=PROJECT, user_id=USER,
                                     consumer_generation=current.consumer_generation)


def held(placement_client, instance: str) -> dict:
    return {rp: dict(r) for rp, r in placement_client.get_allocations(instance).allocations.items()}


def test_a_new_consumer_still_as_claimed_is_given_back(placement_client, hosts):
    instance = str(uuid.uuid4())
    made = claim(placement_client, instance, hosts[0])

    assert undo_if_unchanged(placement_client, made, request_id=None) is Outcome.UNDONE
    assert held(placement_client, instance) == {}


def test_a_claim_placement_does_not_show_is_not_settled_by_one_look(placement_client, hosts):
    instance = str(uuid.uuid4())
    landed = claim(placement_client, instance, hosts[0])
    placement_client.delete_allocations(instance)   # as if the PUT had not been made yet

    assert undo_if_unchanged(placement_client, landed, request_id=None) is Outcome.NOT_LANDED


def test_a_recovered_claim_that_lands_after_the_first_look_is_given_back(placement_client,
                                                                          hosts, tmp_path):
    # The killed worker's PUT was still inside Placement when its replacement looked.
    instance = str(uuid.uuid4())
    made = claim(placement_client, instance, hosts[0])
    placement_client.delete_allocations(instance)
    log = JournalFile(tmp_path, 'claims-test-0')
    log.open()
    journal = RequestJournal(log)
    record = claim_record(made, 'req-dead')
    now = [time.time()]
    cleanups = PendingCleanups(placement_client, interval=3600, journal=journal,
                               now=lambda: now[0])
    try:
        cleanups.recover({journal.keep(record): record})
        cleanups.retry_once()
        assert cleanups.pending() == {instance}
        claim(placement_client, instance, hosts[0])    # the PUT lands
        now[0] += 5
        cleanups.retry_once()
    finally:
        cleanups.stop()

    assert held(placement_client, instance) == {}
    assert log.live() == set()
    log.close()


def test_a_consumer_claimed_again_since_keeps_what_it_holds_now(placement_client, hosts):
    # nova-conductor (or another scheduler) claimed the instance elsewhere since.
    instance = str(uuid.uuid4())
    ours = claim(placement_client, instance, hosts[0])
    placement_client.delete_allocations(instance)
    claim(placement_client, instance, hosts[1])

    assert undo_if_unchanged(placement_client, ours, request_id=None) is Outcome.LEFT
    assert held(placement_client, instance) == {hosts[1]: SMALL}


def test_the_same_allocations_written_again_at_a_new_generation_are_left_alone(
        placement_client, hosts):
    instance = str(uuid.uuid4())
    ours = claim(placement_client, instance, hosts[0])
    # Someone rewrote the consumer with the same body: its generation moved on.
    write_as_it_is_now(placement_client, instance, hosts[0])

    assert undo_if_unchanged(placement_client, ours, request_id=None) is Outcome.LEFT
    assert held(placement_client, instance) == {hosts[0]: SMALL}


def test_a_write_between_the_read_and_the_give_back_wins(placement_client, hosts):
    instance = str(uuid.uuid4())
    ours = claim(placement_client, instance, hosts[0])

    class WritesAfterTheRead:
        """Placement as the give-back sees it, with a writer slipping in after its GET."""

        def get_allocations(self, consumer, **kwargs):
            seen = placement_client.get_allocations(consumer, **kwargs)
            placement_client.put_allocations(
                consumer, on(hosts[1]), project_id=PROJECT, user_id=USER,
                consumer_generation=seen.consumer_generation)
            return seen

        def __getattr__(self, name):
            return getattr(placement_client, name)

    assert undo_if_unchanged(WritesAfterTheRead(), ours, request_id=None) is Outcome.LEFT
    assert held(placement_client, instance) == {hosts[1]: SMALL}


def test_a_move_gets_its_previous_allocations_back(placement_client, hosts):
    instance = str(uuid.uuid4())
    claim(placement_client, instance, hosts[0])             # where it runs
    move = claim(placement_client, instance, hosts[1])      # an evacuation's claim alongside
    assert move.is_move
    assert held(placement_client, instance) == {hosts[0]: SMALL, hosts[1]: SMALL}

    assert undo_if_unchanged(placement_client, move, request_id=None) is Outcome.UNDONE
    assert held(placement_client, instance) == {hosts[0]: SMALL}


def test_a_move_conductor_already_rolled_back_is_left_alone(placement_client, hosts):
    instance = str(uuid.uuid4())
    claim(placement_client, instance, hosts[0])
    move = claim(placement_client, instance, hosts[1])
    # Conductor's own rollback put the source allocations back.
    write_as_it_is_now(placement_client, instance, hosts[0])

    assert undo_if_unchanged(placement_client, move, request_id=None) is Outcome.LEFT
    assert held(placement_client, instance) == {hosts[0]: SMALL}


def test_recovered_records_are_given_back_in_the_background_and_counted(placement_client,
                                                                        hosts, tmp_path):
    given_back = str(uuid.uuid4())
    changed = str(uuid.uuid4())
    log = JournalFile(tmp_path, 'claims-test-0')
    log.open()
    journal = RequestJournal(log)
    records = {}
    for instance in (given_back, changed):
        made = claim(placement_client, instance, hosts[0])
        record = claim_record(made, 'req-dead')
        records[journal.keep(record)] = record
    placement_client.delete_allocations(changed)
    claim(placement_client, changed, hosts[1])
    before = {o: metrics.RECOVERED_CLAIMS.value(outcome=o) for o in ('undone', 'left')}

    cleanups = PendingCleanups(placement_client, interval=60, journal=journal)
    try:
        cleanups.recover(records)
        # Tried at once, not after the 60 s interval.
        wait_for(lambda: not cleanups.pending(), 'the recovered claims to be handled',
                 timeout=10)
    finally:
        cleanups.stop()

    assert held(placement_client, given_back) == {}
    assert held(placement_client, changed) == {hosts[1]: SMALL}
    assert log.live() == set()
    assert metrics.RECOVERED_CLAIMS.value(outcome='undone') == before['undone'] + 1
    assert metrics.RECOVERED_CLAIMS.value(outcome='left') == before['left'] + 1
    log.close()
