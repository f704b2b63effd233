"""The garbage collector pause: nested and concurrent requests, and its one exception."""
from __future__ import annotations

import gc
from collections.abc import Sequence

import pytest

from scheduler.memory import gc_pause, paused_gc
from scheduler.provider_view.view import ProviderView
from tests.builders import REQUEST_CONTEXT, new_uuids, select, user_spec
from tests.unit.test_provider_view_reorder import filled_by_another_scheduler, snapshot


@pytest.fixture(autouse=True)
def collector_enabled():
    gc.enable()
    yield
    gc.enable()


def test_the_collector_runs_again_only_when_the_last_request_ends():
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()


def test_overlapping_requests_still_collect_the_young_generations(monkeypatch):
    collected = []
    monkeypatch.setattr(gc_pause.gc, 'collect', collected.append)
    clock = iter([0.0, 10.0, 10.0]).__next__
    monkeypatch.setattr(gc_pause.time, 'monotonic', clock)

    with paused_gc():            # first request starts at t=0
        with paused_gc():        # a second overlaps
            pass                 # ...and ends at t=10 while the first is still running
        assert collected == [1]
    assert gc.isenabled()


def test_an_exception_still_ends_the_pause():
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError('boom')
    assert gc.isenabled()


def test_requests_answered_from_the_provider_view_leave_nothing_for_the_collector(
        fake, make_manager):
    # While requests overlap the collector is paused, so whatever a request leaves in
    # cycles stays until a hand collection: the request path must leave none (a
    # CDLL made each time the free heap was given back did: a class per release).
    manager = over_a_view_read_once(fake, make_manager, [f'h{i}' for i in range(20)],
                                    vcpus=64)

    assert left_for_the_collector(
        lambda: select(manager, user_spec(vcpus=1), new_uuids(1)), 20) == (0, [])


def test_claims_refused_for_a_view_behind_placement_leave_nothing_for_the_collector(
        fake, make_manager):
    # The refusal is an exception raised through the claim's frames, which hold the
    # request's whole view of the hosts: any cycle through it (an error kept in a
    # local of a frame it passed through) would keep all of that until the next
    # hand collection, request after refused request.
    names = [f'h{i}' for i in range(20)]
    manager = over_a_view_read_once(fake, make_manager, names, vcpus=8,
                                    filled_by_another=names[::2])   # the view does not know

    claims_before = len(fake.claims())

    left = left_for_the_collector(
        lambda: select(manager, user_spec(vcpus=1), new_uuids(1)), 20)

    refused = len(fake.claims()) - claims_before - 20
    assert refused >= 10, refused
    assert left == (0, [])


def test_explaining_a_request_that_fails_leaves_nothing_for_the_collector(fake, make_manager):
    # The report keeps the NoValidHost's reason; the error itself, kept in a local,
    # would hold through its traceback the frames that decided, and their hosts.
    fake.add_compute('h0', vcpus=1)
    manager = make_manager()
    spec = user_spec(vcpus=4)
    assert manager.explain(REQUEST_CONTEXT, spec).error == 'NoValidHost'

    assert left_for_the_collector(lambda: manager.explain(REQUEST_CONTEXT, spec), 3) == (0, [])


def over_a_view_read_once(fake, make_manager, names: list[str], *, vcpus: int,
                          filled_by_another: Sequence[str] = ()):
    """A manager over a view of empty hosts ``names`` that is never read again, after
    a first request (which sets up what every later one shares)."""
    for name in names:
        fake.add_compute(name, vcpus=vcpus)
    filled_by_another_scheduler(fake, *filled_by_another)
    view_snapshot = snapshot(*((name, 0, 0) for name in names))
    manager = make_manager(provider_view=ProviderView(lambda _: view_snapshot, max_age=1e9))
    select(manager, user_spec(vcpus=1), new_uuids(1))
    return manager


def left_for_the_collector(request, times: int) -> tuple[int, list[str]]:
    """What the collector finds after ``times`` requests: objects, and their kinds."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(times):
            request()
        left = gc.collect()
        return left, sorted({type(o).__name__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
