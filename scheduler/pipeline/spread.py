"""Concurrent decisions kept apart among the near-best hosts.

With ``[scheduler] near_best_weight_tolerance``, any host whose weight is within
that fraction of the best may be chosen, at random. Workers that decide from the
same recent state (the provider view) still meet: two claims on one provider at
the same moment make Placement refuse one of them (a concurrent update, HTTP 409),
and the refused claim costs Placement a whole transaction and the request a
retry. Measured at 10,000 providers with 4 workers and 8 clients: 17-19% of all
claims, against under 1% refused for capacity.

So among the near-best hosts (the hosts' order beyond them is Nova's), a worker
tries first the hosts of its own lane (each host falls in one of as many lanes as
the service has workers, by its uuid), then the others, and last the hosts on
which a claim of its own is in flight; each group in random order.

When no host of its own lane is near the best and its view shows claims of its
own that the other workers' views do not yet (the provider view between reads), a
worker reaches for one of its lane up to :data:`REACH` times the tolerance before
it takes another worker's: its lane's best hosts look as full as they are, the
others' best hosts as empty as at the last read, although their own workers have
been claiming them since. Measured at 10,000 providers: a quarter to a third of
the decisions had no near-best host in the worker's own lane, and those claims
were refused three times as often as the others. When every near-best host has a
claim of its own in flight, a worker reaches for any host within that reach, and
a claim on a host it found nothing past waits for the one in flight to land
(:meth:`Spread.claiming`). A chosen host is so never more than ``REACH`` times the
tolerance worse than the best in the worker's view, and no more than the tolerance
when the view holds no claim of its own and none is in flight (a fresh view, an
idle worker: each of the benchmark's decision quality samples).

Workers of other services have lanes of their own numbering: they meet as before.
"""
from __future__ import annotations

import collections
import contextlib
import random
import threading
from collections.abc import Iterator, Sequence

import numpy as np

#: What comes first among the near-best hosts (lower first).
OWN_LANE, OTHER_LANE, IN_FLIGHT = 0, 1, 2

#: How long a claim waits for this worker's claim in flight on the same host (seconds):
#: longer than a claim takes, short enough that a stuck one does not hold the next.
WAIT_LIMIT = 10.0

#: How far beyond the tolerance a worker reaches for a host of its own lane, or away
#: from its claims in flight: this many times the tolerance.
REACH = 2.0


def lane_of(provider_uuid: str, lanes: int) -> int:
    """The lane of a host, the same in every worker (Python's own string hash is
    salted per process)."""
    try:
        return int(provider_uuid[:8], 16) % lanes
    except ValueError:      # not a uuid (a test's name): still one lane, stable
        return sum(provider_uuid.encode()) % lanes


class Spread:
    """One worker's lane, and the hosts its claims are in flight on (thread-safe)."""

    @classmethod
    def of_worker(cls, index: int, workers: int | None) -> Spread:
        """Worker ``index`` of ``[scheduler] workers``: 0 means one worker (nova.conf's
        meaning), and so does None (Nova's own option, when the service runs on a
        configuration Nova registered, as in Nova's functional tests)."""
        return cls(index, workers or 1)

    def __init__(self, lane: int, lanes: int, *, wait_limit: float = WAIT_LIMIT):
        if not 0 <= lane < max(lanes, 1):
            raise ValueError(f'lane {lane} of {lanes}')
        self.lane, self.lanes = lane, max(lanes, 1)
        self.wait_limit = wait_limit
        self._lock = threading.Lock()
        self._landed = threading.Condition(self._lock)
        self._in_flight: collections.Counter[str] = collections.Counter()

    @contextlib.contextmanager
    def claiming(self, provider_uuid: str) -> Iterator[None]:
        """While a claim on the host ``provider_uuid`` is in flight.

        A claim of this worker already in flight on the host goes first: this one
        waits for it to land (at most ``wait_limit`` seconds) rather than meet it
        in Placement, where one of the two is refused for a concurrent update
        and retried after a pause of its own. The arrangement brings such a host
        forward only when nothing else within the reach is left.
        """
        with self._landed:
            self._landed.wait_for(lambda: not self._in_flight[provider_uuid],
                                  timeout=self.wait_limit)
            self._in_flight[provider_uuid] += 1
        try:
            yield
        finally:
            with self._landed:
                self._in_flight[provider_uuid] -= 1
                if not self._in_flight[provider_uuid]:
                    del self._in_flight[provider_uuid]
                    self._landed.notify_all()

    def precedence(self, provider_uuids: Sequence[str]) -> np.ndarray:
        """Per host, in which group this worker tries it (:data:`OWN_LANE`, ...)."""
        with self._lock:
            in_flight = set(self._in_flight)
        return np.fromiter(
            (IN_FLIGHT if uuid in in_flight
             else OWN_LANE if lane_of(uuid, self.lanes) == self.lane else OTHER_LANE
             for uuid in provider_uuids), dtype=np.int8, count=len(provider_uuids))


def arrange(near: Sequence[int], beyond: Sequence[int], precedence: np.ndarray,
            rng: random.Random, *, for_own_lane: bool = True) -> list[int]:
    """The order a worker tries the hosts within :data:`REACH` times the tolerance.

    ``near``: the hosts within the tolerance, ``beyond``: those within the reach
    but not the tolerance, both best first (any kind of key: positions, names);
    ``precedence``: each one's group (:meth:`Spread.precedence`), ``near`` then
    ``beyond``. The near-best hosts shuffled, by group; before them, when none of
    them is of the worker's own lane and ``for_own_lane`` (the worker's view shows
    claims of its own the others' do not yet), the hosts of its lane within the
    reach, shuffled; when every one has a claim of the worker's in flight, any
    host within the reach not in flight, its own lane first. The rest of ``beyond``
    keeps its order, after them; when the near-best hosts have one of the
    worker's lane, ``beyond`` is not needed and left out.
    """
    groups = precedence.tolist()
    ahead = list(zip(near, groups[:len(near)], strict=True))
    rng.shuffle(ahead)
    ahead.sort(key=lambda host: host[1])        # stable: random within a group
    first = ahead[0][1] if ahead else IN_FLIGHT
    if first == OWN_LANE or (first == OTHER_LANE and not for_own_lane):
        return [host for host, _ in ahead]
    wanted = {OWN_LANE} if first == OTHER_LANE else {OWN_LANE, OTHER_LANE}
    reached = [(host, group) for host, group in zip(beyond, groups[len(near):], strict=True)
               if group in wanted]
    rng.shuffle(reached)
    reached.sort(key=lambda host: host[1])
    taken = {host for host, _ in reached}
    return ([host for host, _ in reached] + [host for host, _ in ahead]
            + [host for host in beyond if host not in taken])
