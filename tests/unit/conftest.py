"""Fixtures shared by the manager's unit tests: an in-memory Placement and managers on it."""
from __future__ import annotations

import random

import pytest

from scheduler.catalog import HostCatalog
from scheduler.manager import SchedulerManager
from scheduler.pipeline.claimer import PendingCleanups
from scheduler.weights.ram import RAMWeigher
from tests.builders import CELL, make_conf
from tests.unit.fake_placement import FakePlacement


@pytest.fixture
def fake() -> FakePlacement:
    return FakePlacement()


@pytest.fixture
def make_manager(fake):
    """Builds managers on ``fake``; ``manager.sleeps`` records the claim back-offs."""
    built: list[SchedulerManager] = []

    def build(*, filters=(), scheduler=None, filter_scheduler=None, catalog=None,
              seed=0, placement=None, provider_view=None,
              resolver=None, destinations=None, spread=None) -> SchedulerManager:
        conf = make_conf(scheduler=scheduler, filter_scheduler=filter_scheduler)
        weigher = RAMWeigher()
        weigher.conf = conf
        client = placement or fake
        manager = SchedulerManager(
            conf, placement=client,
            catalog=catalog or HostCatalog(default_cell_uuid=CELL),
            filters=list(filters), weighers=[weigher], request_filters=[],
            cleanups=PendingCleanups(client, interval=3600), rng=random.Random(seed),
            provider_view=provider_view, resolver=resolver, destinations=destinations,
            spread=spread)
        manager.sleeps = []
        manager.claimer.sleep = manager.sleeps.append
        built.append(manager)
        return manager

    yield build
    for manager in built:
        manager.cleanups.stop()
        manager.release.stop()
