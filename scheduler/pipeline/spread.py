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
which a claim of its own is in flight, or one of its sibling workers' (with the
provider view, they show each other: :mod:`scheduler.provider_view.siblings`);
each group in random order.

When no host of its own lane is near the best and it decides concurrently with
the others (its view shows claims of its own the others' do not yet, or its
requests come back to back: each worker's view is then behind the others'
claims), a worker reaches for one of its lane up to :data:`REACH` times the
tolerance before it takes another worker's: its lane's best hosts look as full as
they are, the others' best hosts as empty as at the last read, although their own
workers have been claiming them since. Measured at 10,000 providers: a quarter to a
third of the decisions had no near-best host in the worker's own lane, and those
claims were refused three times as often as the others.

A host of another lane with room for no more than :data:`NEARLY_FULL_ROOM` more
instances of the request is worse still: its own worker has likely taken that room
since. While the cloud filled up at 1,000 providers, such claims were refused for
capacity far more often than the others (with room for one more: 67%, two: 39%,
three or four: about 20%, more: 3%), two thirds of all the refusals; those with
room for one more come after those with room for two. When every near-best host
is of that kind, a concurrent worker reaches up to :data:`FAR_REACH` times the
tolerance for one of its own lane, or of another lane with room to spare.

When every near-best host has a claim of its own in flight, a worker reaches for
any host within :data:`REACH`, concurrent or not, and a claim on a host it found
nothing past waits for the one in flight to land (:meth:`Spread.claiming`). A
chosen host is so never more than ``FAR_REACH`` times the tolerance worse than the
best in the worker's view, ``REACH`` times unless the near-best hosts are nearly
full, and no more than the tolerance when the worker decides alone with nothing in
flight (an idle worker on a fresh view: each of the benchmark's decision quality
samples).

Workers of other services have lanes of their own numbering: they meet as before.
"""
from __future__ import annotations

import collections
import contextlib
import random
import threading
from collections.abc import Iterator, Sequence
from typing import Protocol

import numpy as np

#: What comes first among the near-best hosts (lower first).
OWN_LANE, OTHER_LANE, NEARLY_FULL, LAST_ROOM, IN_FLIGHT = 0, 1, 2, 3, 4

#: A host of another lane with room for at most this many more instances of the
#: request is :data:`NEARLY_FULL`: its own worker has likely taken that room since
#: this worker's view was read; with room for only one more, it is :data:`LAST_ROOM`,
#: tried after those with room for two (refused 67% of the time, against 39%).
NEARLY_FULL_ROOM = 2

#: How long a claim waits for this worker's claim in flight on the same host (seconds):
#: longer than a claim takes, short enough that a stuck one does not hold the next.
WAIT_LIMIT = 10.0

#: How long a claim waits for a sibling worker's claim in flight on the same host
#: (seconds), and how often it looks whether that one has landed: a claim takes
#: about 50 ms; a sibling that died mid-claim leaves its slot until it is replaced.
SIBLING_WAIT_LIMIT = 1.0
SIBLING_POLL = 0.005

#: How far beyond the tolerance a worker reaches for a host of its own lane, or away
#: from its claims in flight: this many times the tolerance.
REACH = 2.0

#: How far it reaches away from hosts of other lanes that are nearly full: for the
#: decisions that found only those near the best (1,000 providers filling up), the
#: first host of another group came a median 5% behind the best, within 10% for 82%.
FAR_REACH = 10.0


def lane_of(provider_uuid: str, lanes: int) -> int:
    """The lane of a host, the same in every worker (Python's own string hash is
    salted per process)."""
    try:
        return int(provider_uuid[:8], 16) % lanes
    except ValueError:      # not a uuid (a test's name): still one lane, stable
        return sum(provider_uuid.encode()) % lanes


class InFlightBoard(Protocol):
    """Where the service's workers show each other the hosts their claims are in
    flight on (:class:`scheduler.provider_view.siblings.WorkerBoard`)."""

    def take_off(self, provider_uuid: str) -> None: ...

    def take_off_when_clear(self, provider_uuid: str, *, limit: float, poll: float) -> None:
        """:meth:`take_off` once no other worker's claim is in flight on the host
        (at most ``limit`` seconds), the look and the take-off one step."""
        ...

    def land(self, provider_uuid: str) -> None: ...

    def flying(self) -> set[str]:
        """The hosts the other workers' claims are in flight on."""
        ...

    def flying_on(self, provider_uuid: str) -> bool:
        """Whether another worker's claim is in flight on ``provider_uuid``."""
        ...


class Spread:
    """One worker's lane, and the hosts its claims are in flight on (thread-safe)."""

    @classmethod
    def of_worker(cls, index: int, workers: int | None, *,
                  board: InFlightBoard | None = None) -> Spread:
        """Worker ``index`` of ``[scheduler] workers``: 0 means one worker (nova.conf's
        meaning), and so does None (Nova's own option, when the service runs on a
        configuration Nova registered, as in Nova's functional tests)."""
        return cls(index, workers or 1, board=board)

    def __init__(self, lane: int, lanes: int, *, wait_limit: float = WAIT_LIMIT,
                 board: InFlightBoard | None = None,
                 sibling_wait_limit: float = SIBLING_WAIT_LIMIT):
        if not 0 <= lane < max(lanes, 1):
            raise ValueError(f'lane {lane} of {lanes}')
        self.lane, self.lanes = lane, max(lanes, 1)
        self.wait_limit = wait_limit
        self.sibling_wait_limit = sibling_wait_limit
        #: The other workers' claims in flight, and where this one's are shown to them.
        self.board = board
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
        forward only when nothing else within the reach is left. So does a sibling
        worker's claim seen in flight on the host (at most
        :data:`SIBLING_WAIT_LIMIT`): the decision that chose the host came before
        the sibling's claim took off. The look and the take-off are one step for
        the service's workers, so two of them do not take off on one host at the
        same moment; the claim then finds the sibling's on the board, and the
        caller asks whether the host still has room (``Claiming.still_fits``).
        """
        with self._landed:
            self._landed.wait_for(lambda: not self._in_flight[provider_uuid],
                                  timeout=self.wait_limit)
            self._in_flight[provider_uuid] += 1
            first = self._in_flight[provider_uuid] == 1
        try:
            if self.board is not None and first:
                self.board.take_off_when_clear(provider_uuid, limit=self.sibling_wait_limit,
                                               poll=SIBLING_POLL)
            yield
        finally:
            with self._landed:
                self._in_flight[provider_uuid] -= 1
                if not self._in_flight[provider_uuid]:
                    del self._in_flight[provider_uuid]
                    if self.board is not None:
                        self.board.land(provider_uuid)
                    self._landed.notify_all()

    def precedence(self, provider_uuids: Sequence[str],
                   room: np.ndarray | None = None) -> np.ndarray:
        """Per host, in which group this worker tries it (:data:`OWN_LANE`, ...);
        ``room``: per host, how many more instances of the request the view shows
        it holding (None: not known, no host is :data:`NEARLY_FULL`)."""
        with self._lock:
            in_flight = set(self._in_flight)
        if self.board is not None:
            in_flight |= self.board.flying()
        # Room not known: every host counts as roomy.
        rooms = (np.full(len(provider_uuids), NEARLY_FULL_ROOM + 1) if room is None
                 else np.asarray(room))
        return np.fromiter(
            (IN_FLIGHT if uuid in in_flight
             else OWN_LANE if lane_of(uuid, self.lanes) == self.lane
             else OTHER_LANE if rooms[i] > NEARLY_FULL_ROOM
             else NEARLY_FULL if rooms[i] > 1 else LAST_ROOM
             for i, uuid in enumerate(provider_uuids)),
            dtype=np.int8, count=len(provider_uuids))


def reach(near_groups: np.ndarray, *, concurrent: bool) -> float:
    """How far beyond the near-best hosts, in times the tolerance, a worker looks for
    hosts of a group before the near-best's first (0: not at all).

    No need when a near-best host is of the worker's own lane. With its own claims
    in flight on every near-best host, :data:`REACH`, whether it decides
    concurrently with others or not. Otherwise only when ``concurrent`` (its view
    is behind the other workers' claims): :data:`REACH` for its own lane, and
    :data:`FAR_REACH` away from hosts of other lanes that are nearly full
    (:data:`NEARLY_FULL`, :data:`LAST_ROOM`).
    """
    first = int(near_groups.min()) if len(near_groups) else IN_FLIGHT
    if first == OWN_LANE or (first != IN_FLIGHT and not concurrent):
        return 0.0
    return FAR_REACH if first in (NEARLY_FULL, LAST_ROOM) else REACH


def arrange(near: Sequence[int], near_groups: np.ndarray, beyond: Sequence[int],
            beyond_groups: np.ndarray, rng: random.Random) -> list[int]:
    """The order a worker tries the hosts within its reach (:func:`reach`).

    ``near``: the hosts within the tolerance, ``beyond``: those within the reach
    but not the tolerance, both best first (any kind of key: positions, names),
    and each one's group (:meth:`Spread.precedence`). The near-best hosts
    shuffled, by group; before them, the hosts of ``beyond`` of a group before
    the near-best hosts' first, shuffled, by group; the rest of ``beyond`` after
    them, in its order.
    """
    ahead = list(zip(near, near_groups.tolist(), strict=True))
    rng.shuffle(ahead)
    ahead.sort(key=lambda host: host[1])        # stable: random within a group
    first = ahead[0][1] if ahead else IN_FLIGHT
    reached = [(host, group) for host, group in zip(beyond, beyond_groups.tolist(), strict=True)
               if group < first]
    rng.shuffle(reached)
    reached.sort(key=lambda host: host[1])
    taken = {host for host, _ in reached}
    return ([host for host, _ in reached] + [host for host, _ in ahead]
            + [host for host in beyond if host not in taken])
