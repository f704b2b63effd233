"""The garbage collector pause: nested and concurrent requests, and its one exception."""
from __future__ import annotations

import gc

import pytest

from scheduler.memory import gc_pause, paused_gc
from scheduler.provider_view.view import ProviderView
from tests.builders import new_uuids, select, user_spec
from tests.unit.test_provider_view_reorder import snapshot


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
    names = [f'h{i}' for i in range(20)]
    for name in names:
        fake.add_compute(name, vcpus=64)
    view_snapshot = snapshot(*((name, 0, 0) for name in names))
    manager = make_manager(provider_view=ProviderView(lambda _: view_snapshot, max_age=1e9))
    select(manager, user_spec(vcpus=1), new_uuids(1))     # what the first one sets up
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(20):
            select(manager, user_spec(vcpus=1), new_uuids(1))
        left = gc.collect()
        kinds = sorted({type(o).__name__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()

    assert (left, kinds) == (0, [])
