"""The compute services' state read for all the workers of a service, in a process
of its own (:meth:`scheduler.catalog.shared_services.SharedReads.serve`).

The supervisor starts it beside its workers when ``[nova]`` has requests read the
services' state; it reads from where the workers would (the compute API, or the
cell databases' services tables) whenever a worker asks, and publishes each read
as a worker's turn does: the header, and the keys when some service's state
changed. It holds no catalog: a worker takes the published read into its own.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable

from oslo_config import cfg

from scheduler.catalog import nova_api
from scheduler.catalog.nova_api import NovaApiError
from scheduler.catalog.nova_sync import (
    ServicesSource,
    Throttle,
    note_services_read,
    reads_from_api,
    services_source_from_conf,
)
from scheduler.catalog.shared_services import SharedReads

LOG = logging.getLogger(__name__)


class Publisher:
    """One read of ``source``, published to ``shared`` unless a newer one was."""

    def __init__(self, source: ServicesSource, shared: SharedReads,
                 clock: Callable[[], float] = time.monotonic):
        self._source = source
        self._shared = shared
        self._clock = clock
        self._change: int | None = None
        self._keys: list[nova_api.ServiceKey] | None = None
        self._slow_reads = Throttle(clock=clock)

    def read(self) -> float | None:
        """When the published read began (this one, or a newer one a worker
        published meanwhile); None when the read failed (logged)."""
        started = self._clock()
        try:
            _, _, keys = self._source.read_service_keys()
        except NovaApiError as e:
            LOG.warning('compute services read failed (%s); the workers read in their turn', e)
            return None
        note_services_read(self._clock() - started, self._slow_reads,
                           from_api=reads_from_api(self._source))
        with self._shared.turn():
            published = self._shared.published()
            if published.read_at is not None and published.read_at >= started:
                return published.read_at   # a worker's read, begun after this one
            try:
                published = self._shared.publish_read(started, keys, self._change,
                                                      keys == self._keys)
            except OSError as e:
                LOG.warning('the compute services read could not be published (%s)', e)
                self._change = self._keys = None
                return None
            self._change, self._keys = published.change, keys
        return started


def run(conf: cfg.ConfigOpts, shared: SharedReads) -> int:
    """Serve the workers' questions until SIGTERM/SIGINT; the exit code.
    ConfigurationError when the options cannot work (the workers refuse them too)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    source = services_source_from_conf(conf)
    LOG.info('compute services reader %d serving the workers', os.getpid())
    shared.serve(Publisher(source, shared).read, stop)
    return 0
