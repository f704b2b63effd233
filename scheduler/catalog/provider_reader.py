"""The provider view's reads for all the workers of a service, in a process of its
own (:mod:`scheduler.catalog.shared_provider_reads`).

The supervisor starts it beside its workers when the provider view is on and
there are several workers. It keeps a snapshot of its own, reads what changed in
Placement's database whenever a worker asks (one read for every question that
came before it began), and publishes what each read took again; the workers take
that into their own snapshots. Its reads are the ones a worker would make
(:class:`~scheduler.catalog.placement_db.PlacementDatabaseReader`, from the same
options), so the database sees one worker's reads instead of every worker's.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable

from oslo_config import cfg

from scheduler.catalog.placement_db import PlacementDatabaseReader, reader_from_conf
from scheduler.catalog.shared_provider_reads import SharedProviderReads
from scheduler.provider_view.snapshot import ProviderSnapshot
from scheduler.provider_view.view import ProviderViewError

LOG = logging.getLogger(__name__)


class Publisher:
    """One read of changes since the last (all of it the first time), published."""

    def __init__(self, reader: PlacementDatabaseReader, shared: SharedProviderReads,
                 clock: Callable[[], float] = time.monotonic):
        self._reader = reader
        self._shared = shared
        self._clock = clock
        self._snapshot: ProviderSnapshot | None = None

    def read(self) -> float | None:
        """When the read published began; None when it failed (logged: the workers
        then read on their own)."""
        started = self._clock()
        previous = self._snapshot
        try:
            self._snapshot = self._reader.read(previous)
        except ProviderViewError as e:
            LOG.warning('provider view: %s; the workers read on their own', e)
            return None
        changes = self._reader.last_changes
        if changes is not None and previous is not None:
            changes = changes.that_moved(previous, self._snapshot)
        try:
            self._shared.publish(started, changes)
        except OSError as e:
            LOG.warning('the provider view\'s read could not be published (%s)', e)
            return None
        return started

    def serve(self, stop: threading.Event) -> None:
        """Read at once, then whenever a worker asks, until ``stop``."""
        # The first read is whole, which a worker's snapshot cannot take in: made
        # while the workers make their own first reads, fewer of them have to read
        # again on their own after it.
        self.read()
        self._shared.reads.serve(self.read, stop)


def run(conf: cfg.ConfigOpts, shared: SharedProviderReads) -> int:
    """Serve the workers' questions until SIGTERM/SIGINT; the exit code."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    reader = reader_from_conf(conf)
    LOG.info('provider view reader %d serving the workers, read-only from %s',
             os.getpid(), reader.label)
    Publisher(reader, shared).serve(stop)
    return 0
