"""A request's Placement answer and host table are freed after its reply, not before.

No timing is asserted: hand-overs are held for an hour here and let go with
``drain()`` or ``stop()``, or held for no time and waited for.
"""
from __future__ import annotations

import gc
import threading
import weakref

import pytest

from scheduler.host_table import HostTable
from scheduler.memory import DeferredRelease, heap
from scheduler.memory.release import after_reply
from tests.builders import REQUEST_CONTEXT, select, user_spec, uuids


class Payload:
    """Something with a weak reference, standing for a request's objects."""


def SAME_SIZE() -> int:
    """A process that never grows: only the trim interval decides."""
    return 100 << 20


@pytest.fixture
def no_collector():
    # Only reference counting may free things in these tests.
    gc.disable()
    yield
    gc.enable()


def test_objects_handed_over_stay_alive_until_released(no_collector):
    release = DeferredRelease(delay=3600)
    payload = Payload()
    ref = weakref.ref(payload)
    release.later(payload, [payload])
    del payload
    assert ref() is not None and release.pending() == 1
    release.drain()
    assert ref() is None and release.pending() == 0
    release.stop()


def hand_over_and_wait(release: DeferredRelease) -> None:
    """Hands one object to ``release``; returns once its thread has freed it."""
    freed = threading.Event()
    payload = Payload()
    weakref.finalize(payload, freed.set)
    release.later(payload)
    del payload
    assert freed.wait(30), 'the release thread never dropped the objects'


def test_the_background_thread_drops_them_after_the_delay(no_collector):
    release = DeferredRelease(delay=0)
    hand_over_and_wait(release)
    assert release.pending() == 0
    release.stop()


def test_stop_frees_what_is_held_and_keeps_nothing_after(no_collector):
    release = DeferredRelease(delay=3600)
    held, late = Payload(), Payload()
    held_ref, late_ref = weakref.ref(held), weakref.ref(late)
    release.later(held)
    del held
    release.stop()
    assert held_ref() is None
    release.later(late)
    del late
    assert late_ref() is None and release.pending() == 0


def test_a_request_s_host_table_is_freed_by_the_release_not_by_the_return(
        fake, make_manager, no_collector):
    fake.add_compute('a')
    fake.add_compute('b')
    manager = make_manager()
    manager.release = DeferredRelease(delay=3600)
    tables: list[weakref.ref] = []
    real_host_states = manager.hosts.build

    def spying(candidates):
        view = real_host_states(candidates)
        assert isinstance(view.table, HostTable)
        tables.append(weakref.ref(view.table))
        return view
    manager.hosts.build = spying

    result = select(manager, user_spec(), uuids(1))

    assert result[0][0].service_host in ('a', 'b')
    # The answer has been built; the table and Placement's answer are still
    # held, so the reply does not wait for them to be freed.
    assert tables[0]() is not None and manager.release.pending() == 1
    manager.release.drain()
    assert tables[0]() is None
    manager.release.stop()


def test_a_failed_request_hands_its_objects_over_too(fake, make_manager, no_collector):
    from scheduler import exceptions as exc
    fake.add_compute('small', vcpus=1)
    manager = make_manager()
    manager.release = DeferredRelease(delay=3600)
    with pytest.raises(exc.NoValidHost):
        manager.select_destinations(REQUEST_CONTEXT, user_spec(num_instances=2), uuids(2))
    assert manager.release.pending() == 1
    manager.release.stop()


def test_the_collector_stays_paused_while_objects_are_held():
    # Enabled any earlier, its next young collection would walk all of them.
    assert gc.isenabled()
    release = DeferredRelease(delay=3600)
    release.later(Payload())
    release.later(Payload())
    assert not gc.isenabled()
    release.drain()
    assert gc.isenabled()
    release.stop()


def test_after_a_request_the_collector_comes_back_once_its_objects_are_freed(
        fake, make_manager):
    fake.add_compute('a')
    manager = make_manager()
    manager.release = DeferredRelease(delay=3600)
    select(manager, user_spec(), uuids(1))
    assert not gc.isenabled()
    manager.release.stop()
    assert gc.isenabled()


def test_the_thread_ends_when_idle_and_a_new_hand_over_starts_another(no_collector):
    release = DeferredRelease(delay=0)
    hand_over_and_wait(release)
    thread = release._thread
    if thread is not None:
        thread.join(30)
    assert release._thread is None
    hand_over_and_wait(release)
    release.stop()


def test_a_claim_retried_after_a_generation_conflict_leaves_no_cycle_behind(
        fake, make_manager, no_collector):
    # The conflict's exception, kept for the final error, once held its traceback:
    # the claim's frame, and through it every frame of the request and the host
    # table in their locals, a cycle only the (paused) collector could free.
    from tests.unit.fake_placement import provider_conflict
    fake.add_compute('a')
    manager = make_manager()
    manager.release = DeferredRelease(delay=3600)
    fake.script('put_allocations', provider_conflict())
    tables: list[weakref.ref] = []
    real_host_states = manager.hosts.build

    def spying(candidates):
        view = real_host_states(candidates)
        tables.append(weakref.ref(view.table))
        return view
    manager.hosts.build = spying

    result = select(manager, user_spec(), uuids(1))

    assert result[0][0].service_host == 'a' and len(fake.claims()) == 2   # tried twice
    manager.release.drain()
    assert tables[0]() is None
    manager.release.stop()


def test_the_pages_a_request_freed_go_back_once_its_objects_are_dropped(no_collector):
    trimmed = threading.Event()
    alive_when_trimmed: list[bool] = []
    payload = Payload()
    ref = weakref.ref(payload)

    def trim() -> None:
        alive_when_trimmed.append(ref() is not None)
        trimmed.set()

    release = DeferredRelease(delay=0, trim=trim)
    release.later(payload)
    del payload
    assert trimmed.wait(30), 'the heap was not trimmed after the objects were dropped'
    release.stop()
    assert alive_when_trimmed == [False], 'trimmed before the objects were freed'


def test_inside_after_reply_the_objects_go_at_the_block_s_end_in_this_thread(no_collector):
    trims: list[str] = []
    release = DeferredRelease(delay=3600, trim=lambda: trims.append(
        threading.current_thread().name))
    payload = Payload()
    ref = weakref.ref(payload)
    with after_reply():
        release.later(payload)
        del payload
        # Held for the rest of the call (its reply is still to go), not by a thread.
        assert ref() is not None
        assert release.pending() == 0 and release._thread is None
    assert ref() is None
    assert trims == [threading.current_thread().name]
    release.stop()


def test_the_heap_is_trimmed_at_most_once_a_trim_interval_the_objects_every_time(
        no_collector):
    now = [100.0]
    trims: list[float] = []
    release = DeferredRelease(delay=3600, trim=lambda: trims.append(now[0]),
                              trim_interval=1.0, clock=lambda: now[0],
                              resident=SAME_SIZE)
    for at in (100.0, 100.4, 100.99, 101.0, 101.5, 102.2):
        now[0] = at
        payload = Payload()
        ref = weakref.ref(payload)
        with after_reply():
            release.later(payload)
            release.later(Payload())    # two hand-overs of one call: one trim at most
            del payload
        assert ref() is None, 'the objects wait for no trim'
    assert trims == [100.0, 101.0, 102.2]
    release.stop()


def test_a_worker_grown_by_more_than_a_tenth_since_its_last_trim_trims_within_the_interval(
        no_collector):
    # Its size climbs between two trims, and the climb is what sets its peak.
    now = [100.0]
    size = [100 << 20]
    trims: list[float] = []

    left_by_trims = iter((100, 101, 100))

    def trim() -> None:
        trims.append(now[0])
        # What the trim left: the next growth counts from there.
        size[0] = next(left_by_trims) << 20

    release = DeferredRelease(delay=3600, trim=trim, trim_interval=1.0,
                              clock=lambda: now[0], resident=lambda: size[0])
    for at, grown_to in ((100.0, 100), (100.2, 110), (100.4, 111), (100.6, 111), (101.0, 105),
                         (101.4, 103)):
        now[0], size[0] = at, grown_to << 20
        with after_reply():
            release.later(Payload())
    # 110 MB is a tenth over the first trim's 100, not more; 111 is. The second trim left
    # 101 MB, which 111 is not a tenth over; the interval ends a second after it.
    assert trims == [100.0, 100.4, 101.4]
    release.stop()


@pytest.mark.skipif(heap.resident_bytes() is None, reason='the system does not say')
def test_the_resident_size_read_follows_the_pages_the_process_touches():
    before = heap.resident_bytes()
    touched = bytearray(64 << 20)   # zeroed: every page written
    after = heap.resident_bytes()
    assert before is not None and after is not None
    assert after - before >= 48 << 20
    del touched


def test_a_trim_interval_of_zero_trims_once_after_every_call(no_collector):
    trims: list[int] = []
    release = DeferredRelease(delay=3600, trim=lambda: trims.append(1), trim_interval=0)
    for _ in range(3):
        with after_reply():
            release.later(Payload())
            release.later(Payload())
    assert len(trims) == 3
    release.stop()


def test_after_reply_keeps_the_collector_paused_until_its_objects_are_freed():
    assert gc.isenabled()
    release = DeferredRelease(delay=3600)
    with after_reply():
        release.later(Payload())
        assert not gc.isenabled()
    assert gc.isenabled()
    release.stop()


def test_a_stopped_release_keeps_nothing_inside_after_reply_either(no_collector):
    release = DeferredRelease(delay=3600)
    release.stop()
    payload = Payload()
    ref = weakref.ref(payload)
    with after_reply():
        release.later(payload)
        del payload
        assert ref() is None


def test_a_trim_skipped_for_the_interval_is_made_when_it_ends_even_with_no_request_after(
        no_collector):
    # A worker whose requests stop would otherwise keep its last ones' pages until
    # its next request.
    now = [100.0]
    trims: list[tuple[float, str]] = []
    owed_trim_made = threading.Event()

    def trim() -> None:
        trims.append((now[0], threading.current_thread().name))
        if len(trims) == 2:
            owed_trim_made.set()

    release = DeferredRelease(delay=3600, trim=trim, trim_interval=1.0,
                              clock=lambda: now[0],
                              resident=SAME_SIZE)
    with after_reply():
        release.later(Payload())
    now[0] = 100.5
    with after_reply():
        release.later(Payload())      # within the interval: its trim is owed
    assert len(trims) == 1
    now[0] = 101.0
    assert owed_trim_made.wait(30), 'the trim owed at the interval\'s end was never made'
    assert trims == [(100.0, threading.current_thread().name), (101.0, 'deferred-release')]
    release.stop()


def test_a_stopped_release_makes_no_trim_it_owed(no_collector):
    now = [100.0]
    trims: list[float] = []
    release = DeferredRelease(delay=3600, trim=lambda: trims.append(now[0]),
                              trim_interval=1.0, clock=lambda: now[0],
                              resident=SAME_SIZE)
    for at in (100.0, 100.5):
        now[0] = at
        with after_reply():
            release.later(Payload())
    release.stop()
    now[0] = 200.0
    thread = release._thread
    if thread is not None:
        thread.join(30)
    assert trims == [100.0] and release._thread is None


def test_the_manager_trims_at_the_interval_the_operator_set(make_manager):
    assert make_manager().release._trim_interval == 1.0
    assert make_manager(scheduler={'heap_trim_interval': 0.0}).release._trim_interval == 0.0
