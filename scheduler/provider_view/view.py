"""The worker's provider view: one snapshot shared by its requests, kept recent.

A snapshot is read again when it is older than ``max_age`` seconds, or after a
claim based on it was refused for capacity (another scheduler got there first).
Between reads, the claims this worker made and kept are added to it (the
overlay), so its own requests do not pile onto a host it just filled; other
schedulers' claims are seen at the next read, and until then Placement refuses
what no longer fits: a stale view costs a retry, never an overcommit. A claim
made while a read is under way may be counted twice until the next read (the
host looks fuller than it is), never missed.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from placement_client.models import Candidates
from placement_client.query import AllocationCandidatesQuery
from scheduler.exceptions import SchedulerError
from scheduler.provider_view.answer import candidates, why_not_exact
from scheduler.provider_view.snapshot import ProviderSnapshot

LOG = logging.getLogger(__name__)

#: Why a query went to Placement when the view could not be read (a metric label).
UNREADABLE = 'view unreadable'


class ProviderViewError(SchedulerError):
    """The providers could not be read; the message never carries a password."""


class ProviderView:
    def __init__(self, read: Callable[[], ProviderSnapshot], *, max_age: float,
                 clock: Callable[[], float] = time.monotonic):
        self.max_age = max_age
        self._read = read
        self._clock = clock
        # Held while reading: requests that find the snapshot stale wait for one read.
        self._lock = threading.Lock()
        self._snapshot: ProviderSnapshot | None = None
        self._read_at = float('-inf')
        self._stale = False
        self._overlay: dict[str, dict[str, int]] = {}
        #: Snapshots read so far (for the status and the tests).
        self.reads = 0

    def answer(self, query: AllocationCandidatesQuery, *, microversion: str,
               rng: random.Random | None = None) -> tuple[Candidates | None, str | None]:
        """(Placement's answer to ``query`` from the view, None) when the view answers
        it exactly; (None, why) when Placement must."""
        try:
            snapshot, overlay = self._current()
        except ProviderViewError as e:
            LOG.warning('provider view: %s; asking Placement', e)
            return None, UNREADABLE
        why = why_not_exact(query, snapshot)
        if why is not None:
            return None, why
        return candidates(snapshot, query, overlay=overlay, microversion=microversion,
                          rng=rng), None

    def claimed(self, allocations: Iterable[Mapping[str, Mapping[str, int]]]) -> None:
        """Claims this worker made and kept: the view shows them until its next read."""
        allocations = list(allocations)
        with self._lock:
            for claim in allocations:
                for rp, resources in claim.items():
                    used = self._overlay.setdefault(rp, {})
                    for rc, amount in resources.items():
                        used[rc] = used.get(rc, 0) + int(amount)

    def refused(self) -> None:
        """A claim based on the view was refused for capacity: read it again first."""
        self._stale = True

    def _current(self) -> tuple[ProviderSnapshot, dict[str, dict[str, int]]]:
        with self._lock:
            if (self._snapshot is None or self._stale
                    or self._clock() - self._read_at > self.max_age):
                started = self._clock()
                snapshot = self._read()
                self._snapshot, self._read_at, self._overlay = snapshot, started, {}
                self._stale = False
                self.reads += 1
            overlay = {rp: dict(used) for rp, used in self._overlay.items()}
            return self._snapshot, overlay
