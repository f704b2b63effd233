"""Free a request's large objects after its answer has left, not before.

A request holds Placement's decoded answer, the host table built from it and a
trace pointing into both: tens of thousands of objects at 1,000 candidates,
millions at 50,000. Reference counting frees them the moment the manager
returns, and the manager returns *before* oslo.messaging sends the reply, so
the caller used to wait for the deallocation too (measured with py-spy on a
real worker: 15% of a request's own time at 1,000 candidates,
doc/performance.md). Handed to a :class:`DeferredRelease`, the same objects
are dropped by a background thread a moment later, while the reply is on its
way. The work is the same; it just no longer sits between the decision and
the answer.

Served by the RPC server, a request's objects are dropped by the very thread
that sent its reply, right after it (:func:`after_reply`, entered around each
call): no other thread to wake. Waking the background thread for every request
was 7% of a worker's profile samples at 50,000 nested providers, the request's
thread holding the interpreter's lock while the system ran the woken one
(doc/performance.md). The thread remains for what is not served that way
(``explain``, the benchmark's and tests' managers in process).

The objects must be dead to everyone else (the request is over). They stay
alive for about ``delay`` seconds more, so a worker holds at most the answers
of the requests it finished within the last ``delay`` seconds. The garbage
collector stays paused (scheduler/memory/gc_pause.py) until they are freed:
enabled earlier, its next young collection would walk every one of them.

Once they are freed, the C heap's free pages go back to the system
(:func:`scheduler.memory.heap.release_free_memory`), at most every
``trim_interval`` seconds: a trim walks every free chunk of the heap (about 2 ms
of a busy worker's CPU at 50,000 nested providers, after each of its requests),
and the next request faults back in the pages it gave away. Between two trims
the holes one request left are reused by the next ones. A trim skipped for the
interval is made by the background thread when the interval ends, so a worker
whose requests stop gives its last ones' pages back too, not only at its next
request (the thread is woken for it at most once an interval).

The holes are reused only in part (a request's objects rarely fall where the last
one's were), so a busy worker's resident size climbs between two trims, and that
climb is what sets its peak: at 50,000 nested providers, 15-25 MB in a second
(doc/performance.md). A worker that has grown by more than :data:`TRIM_GROWTH`
since its last trim therefore trims after its request whatever the interval (its
size read from the system: about 20 µs a request).
"""
from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from scheduler.memory import gc_pause, heap

#: Seconds between handing objects over and dropping them: long enough for the
#: reply (already encoded) to be published, short enough to hold little memory.
RELEASE_DELAY = 0.02
#: Seconds without hand-overs after which the thread ends.
IDLE_EXIT = 1.0
#: Seconds between two trims of the C heap after objects were dropped. Trimmed after
#: every request, a worker at 50,000 nested providers spent nearly a third of its CPU
#: a request on the trim (about 2 ms) and on faulting the pages back in; trimmed once a
#: second, its peak grew by 3-7 MB (doc/performance.md, *The heap trimmed once a
#: second*). ``[scheduler] heap_trim_interval``'s default.
TRIM_INTERVAL = 1.0
#: The share of its resident size just after its last trim by which a worker may grow
#: before it trims again within the interval.
TRIM_GROWTH = 0.1

#: Per thread, while in :func:`after_reply`: the hand-overs it drops at its end.
_serving = threading.local()


@contextlib.contextmanager
def after_reply() -> Iterator[None]:
    """Objects handed to a :class:`DeferredRelease` in this thread inside the block
    are dropped at its end, by this thread. For a block that ends after the reply
    has gone (the RPC server's call)."""
    held: list[tuple[Callable[[], object], tuple[Any, ...]]] = []
    outer = getattr(_serving, 'held', None)
    _serving.held = held
    try:
        yield
    finally:
        _serving.held = outer
        # Keyed by the callable: a release's bound ``_trim`` is a new object each time.
        trims = dict.fromkeys(trim for trim, _ in held)
        count = len(held)
        held.clear()    # the last references: freed here
        for _ in range(count):
            gc_pause.resume()
        for trim in trims:
            trim()


class DeferredRelease:
    """A background thread that drops references handed to :meth:`later`."""

    def __init__(self, delay: float = RELEASE_DELAY,
                 trim: Callable[[], object] = heap.release_free_memory, *,
                 trim_interval: float = TRIM_INTERVAL,
                 resident: Callable[[], int | None] = heap.resident_bytes,
                 clock: Callable[[], float] = time.monotonic):
        self._delay = delay
        self._trim_now = trim
        self._trim_interval = trim_interval
        self._clock = clock
        self._trimmed_at: float | None = None
        self._resident = resident
        # The process's resident size just after the last trim; None: not known.
        self._floor: int | None = None
        # When (by ``clock``) the background thread is to make a trim skipped for the
        # interval; None: no trim is owed.
        self._trim_due: float | None = None
        self._due: collections.deque[tuple[float, tuple[Any, ...]]] = collections.deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def later(self, *objects: Any) -> None:
        """Take over references to ``objects`` and drop them after the delay, or at
        the end of the :func:`after_reply` block this thread is in."""
        with self._cond:
            if self._stopped:
                return  # the caller's own references go as usual
            gc_pause.pause()  # resumed once these objects are freed
            held = getattr(_serving, 'held', None)
            if held is not None:
                held.append((self._trim, objects))
                return
            self._due.append((time.monotonic() + self._delay, objects))
            self._wake()

    def _wake(self) -> None:
        """Under the lock: the background thread started, or told of new work."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name='deferred-release',
                                            daemon=True)
            self._thread.start()
        self._cond.notify()

    def pending(self) -> int:
        """How many hand-overs the background thread still holds."""
        with self._cond:
            return len(self._due)

    def drain(self) -> None:
        """Drop everything held now, in the calling thread."""
        with self._cond:
            held = list(self._due)
            self._due.clear()
        count = len(held)
        del held  # freed here, outside the lock
        for _ in range(count):
            gc_pause.resume()

    def stop(self) -> None:
        """Drop everything held and end the thread; later hand-overs are not kept."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self.drain()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    self._trim_due = None
                if not self._due and self._trim_due is None and not self._stopped:
                    self._cond.wait(IDLE_EXIT)
                if not self._due and self._trim_due is None:
                    # Idle (or stopped): the next hand-over starts a new thread.
                    self._thread = None
                    return
                objects_due = bool(self._due) and (
                    self._stopped or self._due[0][0] <= time.monotonic())
                trim_owed = self._trim_due is not None and self._trim_due <= self._clock()
                if not objects_due and not trim_owed:
                    self._cond.wait(min(
                        self._due[0][0] - time.monotonic() if self._due else IDLE_EXIT,
                        self._trim_due - self._clock() if self._trim_due is not None
                        else IDLE_EXIT))
                    continue
                if objects_due:
                    _, objects = self._due.popleft()
                    trim_owed = False
                else:
                    self._trim_due = None
                    self._trimmed_at = self._clock()
            if trim_owed:
                self._trim_and_measure()
                continue
            # The last references: the objects are freed here, outside the lock,
            # while request threads go on.
            del objects
            gc_pause.resume()
            self._trim()

    def _trim(self) -> None:
        """Give the heap's free pages back (heap.py), unless that was done less than
        ``trim_interval`` seconds ago and the process has not grown by more than
        :data:`TRIM_GROWTH` since: then the background thread owes it, at the
        interval's end."""
        now = self._clock()
        with self._cond:
            within = (self._trimmed_at is not None
                      and now - self._trimmed_at < self._trim_interval)
        if within and not self._grown():
            with self._cond:
                if (self._trim_due is None and not self._stopped
                        and self._trimmed_at is not None):
                    self._trim_due = self._trimmed_at + self._trim_interval
                    self._wake()
            return
        with self._cond:
            self._trimmed_at = now
            self._trim_due = None
        self._trim_and_measure()

    def _trim_and_measure(self) -> None:
        self._trim_now()
        if self._trim_interval:     # at 0 every request trims: no growth to watch
            self._floor = self._resident()

    def _grown(self) -> bool:
        """Whether the process has grown by more than :data:`TRIM_GROWTH` since the last
        trim (False when either size is unknown)."""
        floor = self._floor
        if floor is None:
            return False
        size = self._resident()
        return size is not None and size > floor * (1 + TRIM_GROWTH)
