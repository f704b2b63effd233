"""Reusing one Placement answer for concurrent requests of the same shape.

``GET /allocation_candidates`` is most of a request's wall time (about
330 ms at 1,000 providers against 50 ms for a claim). Requests for the same
flavor, image traits and restrictions ask Placement the same query; within a
short window (``[scheduler] candidates_reuse_window``) a worker answers the
next one from the previous answer instead of asking again.

What keeps that honest:

* the usage this worker's own claims added since the answer was fetched is
  added to the answer's provider summaries before the hosts are built, so
  weighers see the hosts it just filled and the claim loop skips candidates
  that no longer fit;
* other workers' and schedulers' claims are not seen until the window ends;
  Placement still refuses any claim that does not fit (the claim moves on to
  the next candidate or host), so a stale answer costs claim conflicts, never
  an over-committed host;
* moves (claims that replace allocations) and rebuild checks never reuse.

Off by default; doc/performance.md has the measurement that decides it.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from placement_client.models import Candidates

Allocations = Mapping[str, Mapping[str, int]]


class _Entry:
    __slots__ = ('candidates', 'fetched', 'overlay')

    def __init__(self, candidates: Candidates, fetched: float):
        self.candidates = candidates
        self.fetched = fetched
        #: provider -> resource class -> amount this worker claimed since ``fetched``
        self.overlay: dict[str, dict[str, int]] = {}


class CandidateReuse:
    """Recent Placement answers by query, each with this worker's claims since."""

    def __init__(self, window: float, *, max_entries: int = 64,
                 clock: Callable[[], float] = time.monotonic):
        self.window = window
        self.max_entries = max_entries
        self.clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.window > 0

    def get(self, key: str) -> Candidates | None:
        """The answer for ``key`` fetched within the window, with this worker's
        claims since applied; None when there is none."""
        now = self.clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or now - entry.fetched > self.window:
                self._entries.pop(key, None)
                return None
            overlay = {rp: dict(r) for rp, r in entry.overlay.items()}
            candidates = entry.candidates
        return with_usage(candidates, overlay) if overlay else candidates

    def put(self, key: str, candidates: Candidates) -> None:
        with self._lock:
            self._entries[key] = _Entry(candidates, self.clock())
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def claimed(self, allocations: Iterable[Allocations]) -> None:
        """Claims this worker made (and kept): every live answer now shows them."""
        self._add(allocations, 1)

    def _add(self, allocations: Iterable[Allocations], sign: int) -> None:
        allocations = list(allocations)
        with self._lock:
            for entry in self._entries.values():
                for claim in allocations:
                    for rp, resources in claim.items():
                        used = entry.overlay.setdefault(rp, {})
                        for rc, amount in resources.items():
                            used[rc] = used.get(rc, 0) + sign * int(amount)


def with_usage(candidates: Candidates, overlay: Mapping[str, Mapping[str, int]]) -> Candidates:
    """``candidates`` with ``overlay`` added to the providers' ``used``."""
    summaries: dict[str, Any] = dict(candidates.raw_summaries())
    for rp, extra in overlay.items():
        summary = summaries.get(rp)
        if summary is None:
            continue
        resources = {rc: dict(usage) for rc, usage in summary.get('resources', {}).items()}
        for rc, amount in extra.items():
            if rc in resources:
                resources[rc]['used'] = int(resources[rc]['used']) + amount
        summaries[rp] = {**summary, 'resources': resources}
    return Candidates.from_json({'allocation_requests': candidates.raw_requests(),
                                 'provider_summaries': summaries}, candidates.microversion)
