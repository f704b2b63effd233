"""The garbage collector pause: nested and concurrent requests, and its one exception."""
from __future__ import annotations

import gc

import pytest

from scheduler.memory import gc_pause, paused_gc


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
