"""Claimer and PendingCleanups against the in-memory Placement.

Placement's generations arbitrate races (doc/design.md#claims-all-or-nothing): a provider
generation conflict is worth a few jittered retries of the same claim, a
capacity conflict is not, and an empty consumer left by an earlier failed PUT
is claimed at its generation. Sleeps are injected and recorded, never waited.
"""
from __future__ import annotations

import random
import threading

import pytest

from placement_client import exceptions as pexc
from placement_client.models import AllocationRequest, ConsumerAllocations
from scheduler.pipeline.claim_state import Claim
from scheduler.pipeline.claimer import Claimer, ClaimFailed, PendingCleanups
from scheduler.pipeline.recovery import LANDING_WINDOW
from tests.builders import PROJECT, USER
from tests.unit.fake_placement import FakePlacement, provider_conflict, unavailable

INSTANCE = '6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e8b01'
OTHER = '6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e8b02'
ASK = {'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 20}


class MaxRandom(random.Random):
    """Jitter at its upper bound, so the bound itself is what the test sees."""

    def uniform(self, a: float, b: float) -> float:
        return b


@pytest.fixture
def fake() -> FakePlacement:
    return FakePlacement()


@pytest.fixture
def cn(fake) -> str:
    return fake.add_compute('cn1', vcpus=4, ram_mb=4096, disk_gb=40)


def make_claimer(fake, *, max_attempts=4, retry_delay=0.2, rng=None):
    sleeps: list[float] = []
    claimer = Claimer(fake, max_attempts=max_attempts, retry_delay=retry_delay,
                      sleep=sleeps.append, rng=rng or random.Random(7))
    return claimer, sleeps


def claim(claimer, request, instance=INSTANCE):
    claimer.claim(instance, request, project_id=PROJECT, user_id=USER, microversion='1.36',
                  request_id='req-claims')


def request_on(rp, resources=None) -> AllocationRequest:
    return AllocationRequest(allocations={rp: dict(resources or ASK)})


def generations_sent(fake) -> list:
    return [c.kwargs['consumer_generation'] for c in fake.calls_to('put_allocations')]


# ---------------------------------------------------------------------- Claimer


def test_a_free_candidate_is_claimed_with_one_put_for_a_new_consumer(fake, cn):
    claimer, sleeps = make_claimer(fake)

    claim(claimer, request_on(cn))

    assert fake.holdings() == {INSTANCE: {cn: ASK}}
    assert generations_sent(fake) == [None]
    assert fake.consumers[INSTANCE].project_id == PROJECT
    assert sleeps == []


def test_a_provider_generation_conflict_is_retried_and_a_retry_can_succeed(fake, cn):
    fake.script('put_allocations', provider_conflict(), times=2)
    claimer, sleeps = make_claimer(fake)

    claim(claimer, request_on(cn))

    assert len(fake.calls_to('put_allocations')) == 3
    assert len(sleeps) == 2
    assert fake.holdings() == {INSTANCE: {cn: ASK}}


@pytest.mark.parametrize('max_attempts', [1, 2, 4])
def test_a_provider_generation_storm_gives_up_after_max_attempts_as_concurrent_updates(
        fake, cn, max_attempts):
    fake.script('put_allocations', provider_conflict(), times=None)
    claimer, sleeps = make_claimer(fake, max_attempts=max_attempts)

    with pytest.raises(ClaimFailed) as failure:
        claim(claimer, request_on(cn))

    assert failure.value.reason == 'concurrent updates'
    assert len(fake.calls_to('put_allocations')) == max_attempts
    # No sleep after the last attempt: nothing follows it.
    assert len(sleeps) == max_attempts - 1
    assert fake.holdings() == {}


def test_the_jittered_sleep_before_each_retry_is_bounded_and_grows(fake, cn):
    fake.script('put_allocations', provider_conflict(), times=None)
    at_bound, bounds = make_claimer(fake, retry_delay=0.2, rng=MaxRandom())
    jittered, sleeps = make_claimer(fake, retry_delay=0.2, rng=random.Random(3))

    for claimer in (at_bound, jittered):
        with pytest.raises(ClaimFailed):
            claim(claimer, request_on(cn))

    assert bounds == pytest.approx([0.4, 0.8, 1.6])
    assert len(sleeps) == 3
    assert all(0 <= s <= b for s, b in zip(sleeps, bounds, strict=True))
    assert sleeps != bounds   # drawn from the rng, not the bound itself


def test_capacity_exceeded_fails_the_candidate_at_once_without_a_retry(fake, cn):
    fake.allocate(OTHER, {cn: {'VCPU': 3}})
    claimer, sleeps = make_claimer(fake)

    with pytest.raises(ClaimFailed) as failure:
        claim(claimer, request_on(cn))

    assert failure.value.reason == 'capacity exceeded'
    assert 'VCPU' in failure.value.detail
    assert len(fake.calls_to('put_allocations')) == 1
    assert sleeps == []
    assert fake.holdings() == {OTHER: {cn: {'VCPU': 3}}}


def leave_orphan_consumer(fake, consumer):
    """Placement's trap (_set_allocations_for_consumer, placement/handlers/allocation.py):
    a 400 for an unknown provider leaves an empty consumer at generation 0 behind; GET
    shows no generation."""
    with pytest.raises(pexc.BadRequest):
        fake.put_allocations(consumer, request_on('0a0a0a0a-dead-4bee-8fee-000000000000'),
                             project_id=PROJECT, user_id=USER, consumer_generation=None)
    fake.calls.clear()


def test_an_orphan_consumer_left_by_a_failed_put_is_claimed_at_generation_zero(fake, cn):
    leave_orphan_consumer(fake, INSTANCE)
    claimer, _ = make_claimer(fake)

    claim(claimer, request_on(cn))

    assert generations_sent(fake) == [None, 0]
    assert fake.holdings() == {INSTANCE: {cn: ASK}}


def test_an_orphan_consumer_is_claimed_at_the_generation_get_reports(fake, cn):
    # Without a generation in the 409's text, the one GET reports is used.
    leave_orphan_consumer(fake, INSTANCE)
    fake.script('put_allocations', pexc.ConsumerGenerationConflict(
        'consumer generation conflict', status=409, code='placement.concurrent_update'))
    fake.get_allocations = lambda consumer, request_id=None: ConsumerAllocations(consumer, {}, 0)
    claimer, _ = make_claimer(fake)

    claim(claimer, request_on(cn))

    assert generations_sent(fake) == [None, 0]
    assert fake.holdings() == {INSTANCE: {cn: ASK}}


def test_a_consumer_generation_conflict_that_persists_is_bounded(fake, cn):
    fake.script('put_allocations', pexc.ConsumerGenerationConflict(
        'consumer generation conflict - expected 0 but got None', status=409, expected=0),
        times=None)
    claimer, _ = make_claimer(fake, max_attempts=3)

    with pytest.raises(ClaimFailed) as failure:
        claim(claimer, request_on(cn))

    assert failure.value.reason == 'concurrent updates'
    # The first PUT only finds out that the consumer exists; then max_attempts tries.
    assert len(fake.calls_to('put_allocations')) == 1 + 3


def test_placement_unavailable_while_claiming_propagates_untouched(fake, cn):
    outage = unavailable('PUT /allocations')
    fake.script('put_allocations', outage)
    claimer, sleeps = make_claimer(fake)

    with pytest.raises(pexc.PlacementUnavailable) as failure:
        claim(claimer, request_on(cn))

    assert failure.value is outage
    assert len(fake.calls_to('put_allocations')) == 1
    assert sleeps == []


def test_placement_unavailable_while_reading_a_conflicting_consumer_propagates(fake, cn):
    fake.script('put_allocations', pexc.ConsumerGenerationConflict('conflict', status=409))
    fake.script('get_allocations', unavailable('GET /allocations'))
    claimer, _ = make_claimer(fake)

    with pytest.raises(pexc.PlacementUnavailable):
        claim(claimer, request_on(cn))


# ---------------------------------------------------------------------- PendingCleanups


@pytest.fixture
def cleanups(fake):
    # A long interval: the tests drive retry_once() themselves.
    pending = PendingCleanups(fake, interval=3600)
    yield pending
    pending.stop()


def test_allocations_are_deleted_at_once_when_placement_answers(fake, cn, cleanups):
    fake.allocate(INSTANCE, {cn: {'VCPU': 1}})
    fake.allocate(OTHER, {cn: {'VCPU': 1}})

    left = cleanups.delete_now_or_later([INSTANCE, OTHER], request_id='req-1')

    assert left == []
    assert cleanups.pending() == set()
    assert fake.holdings() == {}


def test_a_consumer_without_allocations_counts_as_deleted(fake, cleanups):
    assert cleanups.delete_now_or_later([INSTANCE], request_id=None) == []
    assert cleanups.pending() == set()


def test_a_failed_delete_is_kept_and_retried_until_placement_agrees(fake, cn, cleanups):
    fake.allocate(INSTANCE, {cn: {'VCPU': 1}})
    fake.allocate(OTHER, {cn: {'VCPU': 1}})
    fake.script('delete_allocations', unavailable('DELETE /allocations'), times=2,
                when=lambda call: call.kwargs['consumer_uuid'] == INSTANCE)

    left = cleanups.delete_now_or_later([INSTANCE, OTHER], request_id='req-1')

    assert left == [INSTANCE]
    assert cleanups.pending() == {INSTANCE}
    assert set(fake.holdings()) == {INSTANCE}

    cleanups.retry_once()   # Placement still failing
    assert cleanups.pending() == {INSTANCE}
    assert set(fake.holdings()) == {INSTANCE}

    cleanups.retry_once()   # back
    assert cleanups.pending() == set()
    assert fake.holdings() == {}


def test_any_placement_error_on_delete_keeps_the_consumer(fake, cn, cleanups):
    fake.allocate(INSTANCE, {cn: {'VCPU': 1}})
    fake.script('delete_allocations', pexc.PlacementError('conflict', status=409))

    assert cleanups.delete_now_or_later([INSTANCE], request_id=None) == [INSTANCE]
    assert cleanups.pending() == {INSTANCE}


def test_the_background_thread_retries_a_failed_delete(fake, cn):
    fake.allocate(INSTANCE, {cn: {'VCPU': 1}})
    fake.script('delete_allocations', unavailable('DELETE /allocations'))
    retried = threading.Event()
    fake.script('delete_allocations', lambda call: retried.set())
    pending = PendingCleanups(fake, interval=0.01)
    try:
        assert pending.delete_now_or_later([INSTANCE], request_id=None) == [INSTANCE]
        # Bounded wait for the thread's retry; not a timing assertion.
        assert retried.wait(timeout=30)
        for _ in range(3000):
            if not pending.pending():
                break
            threading.Event().wait(0.01)
        assert pending.pending() == set()
        assert fake.holdings() == {}
    finally:
        pending.stop()


# ------------------------------------------- a claim whose PUT may still land


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lost(instance: str, cn: str) -> Claim:
    """A claim whose PUT's answer was lost: it may or may not be in Placement."""
    return Claim(instance, {cn: {'VCPU': 1}}, 1, PROJECT, USER)


def test_a_lost_claim_that_lands_after_the_first_look_is_still_given_back(fake, cn):
    clock = Clock()
    cleanups = PendingCleanups(fake, interval=3600, now=clock)

    # Placement has not finished the PUT yet when the request gives up on it.
    assert cleanups.undo_now_or_later([lost(INSTANCE, cn)], request_id=None,
                                      verify=True) == [INSTANCE]
    fake.allocate(INSTANCE, {cn: {'VCPU': 1}})    # ... and now it has
    clock.now += 5
    cleanups.retry_once()

    assert fake.holdings() == {}
    assert cleanups.pending() == set()


def test_a_lost_claim_that_never_lands_is_watched_for_the_landing_window_only(fake, cn):
    clock = Clock()
    cleanups = PendingCleanups(fake, interval=3600, now=clock)
    cleanups.undo_now_or_later([lost(INSTANCE, cn)], request_id=None, verify=True)

    clock.now += LANDING_WINDOW - 1
    cleanups.retry_once()
    assert cleanups.pending() == {INSTANCE}

    clock.now += 1
    cleanups.retry_once()
    assert cleanups.pending() == set()
    assert fake.holdings() == {}
