"""An operator hears when a host-data read is too slow for the options that use it.

Nova 34's nova-api takes about half a millisecond per compute service to answer
GET /os-services and about 10 ms per node to list hypervisors (doc/performance.md,
"Against Nova's own nova-api"): a read before every request, or a sync longer than its
interval, is a configuration to change, and the log should say which.
"""
from __future__ import annotations

import logging

import pytest

from scheduler.catalog import HostCatalog
from scheduler.catalog.nova_api import NovaSnapshot, ServiceState
from scheduler.catalog.nova_sync import (
    SLOW_LOG_EVERY,
    SLOW_SERVICES_READ,
    NovaComputeReader,
    NovaSync,
)
from scheduler.catalog.services_reader import Publisher
from scheduler.catalog.shared_services import SharedReads

CELL = '8a9b0c1d-2e3f-4a5b-8c6d-7e8f9a0b1c2d'


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowApi:
    """A compute API whose every read takes ``seconds`` on ``clock``."""

    def __init__(self, clock: Clock, seconds: float):
        self.clock, self.seconds = clock, seconds

    def _wait(self) -> None:
        self.clock.now += self.seconds

    def read_services(self):
        self._wait()
        return {'compute-01': ServiceState('compute-01', up=True)}, []

    def read_service_keys(self):
        self._wait()
        return {'compute-01': ServiceState('compute-01', up=True)}, [], []

    def read(self) -> NovaSnapshot:
        self._wait()
        return NovaSnapshot()


class SlowComputeApi(NovaComputeReader):
    """The same, as the compute API's own reader (what the services reader tells apart)."""

    def __init__(self, clock: Clock, seconds: float):  # no adapter: nothing is sent
        self._slow = SlowApi(clock, seconds)

    def read_service_keys(self):
        return self._slow.read_service_keys()


def _warnings(caplog, text: str) -> int:
    return sum(1 for r in caplog.records if r.levelno == logging.WARNING and text in r.message)


def _sync(clock: Clock, seconds: float, interval: float = 60) -> NovaSync:
    return NovaSync(HostCatalog(default_cell_uuid=CELL), SlowApi(clock, seconds),  # type: ignore[arg-type]
                    interval=interval, service_state_max_age=0.0, clock=clock)


def test_a_slow_read_before_requests_names_the_settings_that_avoid_it(caplog):
    clock = Clock()
    sync = _sync(clock, seconds=SLOW_SERVICES_READ + 4)
    with caplog.at_level(logging.WARNING):
        sync.fresh_service_states()
    assert _warnings(caplog, 'service_states = true') == 1
    assert _warnings(caplog, 'service_state_max_age = -1') == 1


def test_the_slow_read_warning_comes_at_most_once_an_hour():
    clock = Clock()
    sync = _sync(clock, seconds=SLOW_SERVICES_READ + 1)
    logged = []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(clock.now)  # type: ignore[method-assign]
    log = logging.getLogger('scheduler.catalog.nova_sync')
    log.addHandler(handler)
    try:
        for _ in range(10):           # ten requests, each waiting for its own read
            sync.fresh_service_states()
        clock.now += SLOW_LOG_EVERY
        sync.fresh_service_states()
    finally:
        log.removeHandler(handler)
    assert len(logged) == 2


@pytest.mark.parametrize('seconds', [0.0, SLOW_SERVICES_READ])
def test_a_read_no_slower_than_the_bound_is_not_logged(caplog, seconds):
    clock = Clock()
    with caplog.at_level(logging.WARNING):
        _sync(clock, seconds=seconds).fresh_service_states()
    assert _warnings(caplog, 'services') == 0


def test_a_slow_read_of_the_cell_databases_does_not_send_the_operator_to_them(caplog):
    clock = Clock()
    sync = NovaSync(HostCatalog(default_cell_uuid=CELL), SlowApi(clock, 0.0),  # type: ignore[arg-type]
                    interval=60, service_state_max_age=0.0, clock=clock,
                    services=SlowApi(clock, SLOW_SERVICES_READ + 3))
    with caplog.at_level(logging.WARNING):
        sync.fresh_service_states()
    assert _warnings(caplog, 'from the cell databases') == 1
    assert _warnings(caplog, 'service_states = true') == 0


@pytest.mark.parametrize('source, advice', [(SlowComputeApi, 'service_states = true'),
                                            (SlowApi, 'from the cell databases')])
def test_the_services_reader_of_several_workers_logs_its_slow_reads_too(caplog, source,
                                                                        advice):
    clock = Clock()
    shared = SharedReads.create()
    try:
        publisher = Publisher(source(clock, SLOW_SERVICES_READ + 2), shared, clock=clock)
        with caplog.at_level(logging.WARNING):
            assert publisher.read() is not None
            assert publisher.read() is not None
    finally:
        shared.remove()
    assert _warnings(caplog, advice) == 1


def test_a_sync_longer_than_its_interval_says_to_lengthen_it(caplog):
    clock = Clock()
    sync = _sync(clock, seconds=84.0, interval=60)
    with caplog.at_level(logging.WARNING):
        assert sync.sync_once()
        assert sync.sync_once()
    assert _warnings(caplog, 'longer than [nova] sync_interval (60s)') == 1


def test_a_sync_within_its_interval_is_not_logged(caplog):
    clock = Clock()
    with caplog.at_level(logging.WARNING):
        assert _sync(clock, seconds=59.0, interval=60).sync_once()
    assert _warnings(caplog, 'sync_interval') == 0
