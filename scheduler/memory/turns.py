"""Turns to decide: how many of a worker's requests compute at once.

A worker serves its calls on a pool of threads, and deciding is Python under the
interpreter's lock: two requests that compute at the same time in one process
take as long as one after the other, but each holds its own columns over every
matching host meanwhile (a request over the provider view at 50,000 hosts
allocates tens of MB that live until it is decided). So a request takes a turn
before it computes, and at most ``at_once`` hold one in a worker; the others
wait for theirs, in order of arrival (:class:`Turns`).

A request gives its turn up while it waits for an answer it cannot decide
without (Placement's candidates, the compute services' state, a cell database:
:func:`waiting`), and takes one again after: those waits still overlap. Its
claims on hosts Placement answered give the turn up too: the request holds one
answer, and a claim waits on a Placement busy with every scheduler's queries
(with those claims holding the turn, 2 and 4 workers made 0.88 and 0.93 of
Placement's ceiling in one run, and 0.91 and 0.98 giving it up). Its claims on
the provider view's hosts (their back-offs and group re-reads included) give
it up only while fewer than ``[scheduler] view_claims_without_turn`` others of
the worker do (:class:`BoundedWaits`): such a request holds columns over every
matching host, and the next one computing meanwhile builds its own beside them.
At 50,000 hosts with nested trees, every such claim giving its turn up made a
third more throughput at 212-217 MB a worker, over the 200 MB bound, against
173-190 MB keeping it; one such claim at a time, on a slower machine, made
13.0-19.0 req/s (mean 14.7, six windows) against 11.4-14.3 (12.5) keeping it,
at 174-186 MB; on a faster machine, two at a time (the default) made 6-10% more
than one, at 178-186 MB against 173-182 MB (doc/performance.md). Such a request
does not take a turn back when its claim lands: what it does after its last
claim (its alternates, its answer) is light, and a turn taken back for it waited
out the next request's whole decision, while the request kept its place off its
turn so that the next one's claim kept its turn too. It takes a turn back, first
in line, only to compute again (another instance's hosts, its hosts ordered again
after a refusal: :func:`resume`), and keeps its place among the bounded waits until then
or until it ends: the requests holding their columns beside the one deciding
are still at most ``view_claims_without_turn``. A claim that gave its turn up
lands before it takes one back: a claim of this worker on the same host waits
for it to land, and may hold its turn while it waits.
The turn is the thread's: a stage that takes one inside its own thread's turn
(the provider view matched again while a request decides) goes on without
waiting. Measured in doc/performance.md (*Turns to decide*).
"""
from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_held = threading.local()


class Turns:
    """At most ``at_once`` threads in :meth:`turn` at a time; None for no limit.

    A freed turn passes straight to the thread that has waited longest, a request
    coming back from a wait first (it is part-way through, holding what it has
    built): no thread overtakes another, so none waits behind a stream of later
    arrivals (a plain semaphore lets a newcomer take a turn a woken waiter was
    about to, and a worker's slowest answers grew by half)."""

    def __init__(self, at_once: int | None, *,
                 waited: Callable[[float, bool], None] | None = None):
        """``waited(seconds, resuming)`` is told of every wait for a turn (one taken
        at once is no wait)."""
        if at_once is not None and at_once < 1:
            raise ValueError(f'at least one turn at once, not {at_once}')
        self.at_once = at_once
        self._waited = waited
        self._lock = threading.Lock()
        self._free = at_once or 0
        # Per waiting thread, a lock it blocks on until a turn is handed to it.
        self._waiting: collections.deque[threading.Lock] = collections.deque()

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """Hold a turn for the block (at once if this thread holds one already; first
        in line if it gave this one up for a bounded wait and has not taken it back)."""
        if self.at_once is None or getattr(_held, 'turns', None) is self:
            yield
            return
        if _owed(self) is not None:
            resume()            # the block that took the turn gives it at its end
            yield
            return
        outer = getattr(_held, 'turns', None)   # another worker's, in tests
        self._take(resuming=False)
        _held.turns = self
        try:
            yield
        finally:
            _held.turns = outer
            owed = _owed(self)
            if owed is not None:
                # Given up for a bounded wait and never needed back: the request is
                # done, and so is its place among the waits off their turn.
                _held.owed = None
                owed.leave()
            else:
                self._give()

    def _take(self, *, resuming: bool) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            handed = threading.Lock()
            handed.acquire()
            if resuming:
                self._waiting.appendleft(handed)
            else:
                self._waiting.append(handed)
        queued = time.monotonic()
        handed.acquire()        # released by _give, which hands this thread the turn
        if self._waited is not None:
            self._waited(time.monotonic() - queued, resuming)

    def _give(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().release()
            else:
                self._free += 1


class BoundedWaits:
    """At most ``at_once`` threads give their turn up through :meth:`waiting` at a
    time (None: no limit); a thread beyond that waits on its peer holding its turn.

    For waits during which a request keeps what it has built (a claim on the
    provider view's hosts holds columns over every matching host): each one off
    its turn lets another request build its own beside them, so how many may is
    a bound on a worker's memory, not only on its concurrency."""

    def __init__(self, at_once: int | None):
        if at_once is not None and at_once < 0:
            raise ValueError(f'no fewer than no waits at once, not {at_once}')
        self.at_once = at_once
        self._lock = threading.Lock()
        self._off_turn = 0

    @contextlib.contextmanager
    def waiting(self) -> Iterator[bool]:
        """Give the turn up for the block if fewer than ``at_once`` threads are off
        theirs, else wait keeping it; yields whether this wait is one of the ``at_once``.

        A turn given up here is not taken back at the end of the block: the request
        goes on off its turn, in its place among the ``at_once``, until it needs one
        to compute (:func:`resume`, or :meth:`Turns.turn`) or ends. What a request
        does after its last claim (its alternates, its answer) is light: taking a
        turn back for it waited for the whole of the next request's decision, and
        kept this place meanwhile, so that the next request's claim kept its turn."""
        if getattr(_held, 'owed', None) is not None:
            yield True          # off its turn already, in its place (a claim after another)
            return
        with self._lock:
            give = self.at_once is None or self._off_turn < self.at_once
            if give:
                self._off_turn += 1
        if not give:
            yield False
            return
        turns = _give_up()
        if turns is None:       # no turn to give up: the place is the block's alone
            try:
                yield True
            finally:
                self._leave()
            return
        _held.owed = _Owed(turns, self._leave)
        yield True

    def _leave(self) -> None:
        with self._lock:
            self._off_turn -= 1


@dataclass(frozen=True)
class _Owed:
    """A turn a thread gave up for a bounded wait and has not taken back, and how it
    leaves its place among the waits off their turn."""

    turns: Turns
    leave: Callable[[], None]


def _owed(turns: Turns) -> _Owed | None:
    owed: _Owed | None = getattr(_held, 'owed', None)
    return owed if owed is not None and owed.turns is turns else None


def resume() -> None:
    """Take back the turn this thread gave up for a bounded wait, if it did: before
    it computes again (another instance's hosts, hosts ordered again). First in line,
    as a request back from a wait; it then leaves its place off its turn."""
    owed: _Owed | None = getattr(_held, 'owed', None)
    if owed is None:
        return
    _held.owed = None
    try:
        _take_back(owed.turns)
    finally:
        owed.leave()


@contextlib.contextmanager
def waiting() -> Iterator[None]:
    """Give this thread's turn up for the block, if it holds one: it waits on a peer."""
    turns = _give_up()
    if turns is None:
        yield
        return
    try:
        yield
    finally:
        _take_back(turns)


def _give_up() -> Turns | None:
    """Give up the turn this thread holds; the Turns it was of, None if it held none."""
    # Only a limited Turns marks the thread that holds one (turn()).
    turns: Turns | None = getattr(_held, 'turns', None)
    if turns is not None:
        _held.turns = None
        turns._give()
    return turns


def _take_back(turns: Turns) -> None:
    """Take a turn of ``turns`` again, first in line: the thread is part-way through."""
    turns._take(resuming=True)
    _held.turns = turns
