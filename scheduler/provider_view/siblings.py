"""The claims of a service's other workers, shown in each worker's provider view.

A worker's view shows its own claims from the moment Placement accepts them;
its sibling workers' claims it sees only at its next read. Between reads the
siblings' best hosts look as empty as when they were read, and a claim on one
is refused for capacity when it no longer fits: measured while a cloud of 1,000
providers filled up, most refusals were of that kind.

So the supervisor maps one small ring of records per worker in memory that its
forked workers share (:class:`ClaimsBoard`): each worker writes the claims
Placement accepted from it (when, provider, class, amount) to its own ring, and
reads its siblings' rings before it serves its view (:meth:`WorkerBoard.new`).
The view adds each claim made since its snapshot was read, as it adds its own;
and the hosts a sibling's claims are in flight on come last in a worker's order,
as its own do, and a claim on such a host waits for the sibling's to land
(:mod:`scheduler.pipeline.spread`): two claims on one provider at once make
Placement refuse one of them. The look at whether a host is clear and the
take-off on it are one worker's at a time (the board's gate), and a claim that
waited finds the sibling's on the board before it is sent.
Nothing here is authoritative: Placement still arbitrates every claim, and a
record the view misses (a ring that wrapped past it) costs no more than a stale
view did. Other services' workers, on other machines, are still seen at the
next read only.

Records are written by one process each (its threads take turns under a lock)
and read by the others without one: a record is written before the ring's count
that covers it, and a reader never reads the oldest :data:`MARGIN` records of a
ring, which a writer might be overwriting.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping

import numpy as np

#: The longest resource class name a record holds, in bytes.
RC_BYTES = 64
#: One record: a claim's amount of one class on one provider.
RECORD = np.dtype([('at', '<f8'), ('provider', 'S36'), ('rc', f'S{RC_BYTES}'),
                   ('amount', '<i8')])
#: Records a ring holds (460 KB): about a minute of one worker's claims at the
#: rates measured (20 a second, three classes each), where it needs those since
#: its last read (a few seconds at 50,000 providers).
RING = 4096
#: The oldest records of a ring a reader leaves alone (a writer may be on them).
MARGIN = 256
#: Hosts a worker can show claims in flight on at once (its RPC threads' claims).
FLYING = 256
#: How long a worker waits for the gate before it takes off without it (seconds): the
#: look it guards takes microseconds, and a worker stopped inside it must not stop the
#: others' claims.
GATE_WAIT = 0.05
#: How often a worker tries the gate again while another holds it (seconds).
GATE_POLL = 0.0002


class ClaimsBoard:
    """Every worker's ring, in memory shared with the processes forked after it:
    made before the workers are forked."""

    def __init__(self, workers: int, *, ring: int = RING):
        if workers < 1 or ring <= MARGIN:
            raise ValueError(f'{workers} workers, rings of {ring}')
        self.workers, self.ring = workers, ring
        counts, records = 8 * workers, RECORD.itemsize * ring * workers
        # Anonymous and shared: a forked child writes the pages its parent mapped.
        self._memory = mmap.mmap(-1, counts + records + 36 * FLYING * workers)
        self.counts = np.ndarray((workers,), dtype='<i8', buffer=self._memory)
        self.records = np.ndarray((workers, ring), dtype=RECORD, buffer=self._memory,
                                  offset=counts)
        #: Per worker, the hosts its claims are in flight on (empty: a free slot).
        self.flying = np.ndarray((workers, FLYING), dtype='S36', buffer=self._memory,
                                 offset=counts + records)
        #: One worker at a time looks whether a host is clear and takes off on it
        #: (:meth:`WorkerBoard.take_off_when_clear`): a record lock on a file no name
        #: leads to, which the forked workers inherit. The kernel gives such a lock
        #: back when the process holding it dies, where a semaphore would stay taken.
        self.gate = tempfile.TemporaryFile()

    def of_worker(self, index: int, clock: Callable[[], float] = time.monotonic
                  ) -> WorkerBoard:
        """Worker ``index``'s side. The clock must be one every process reads alike
        (the monotonic clock is the machine's)."""
        return WorkerBoard(self, index, clock)


class WorkerBoard:
    """One worker's writes to its ring, and its reads of its siblings'."""

    def __init__(self, board: ClaimsBoard, index: int, clock: Callable[[], float]):
        if not 0 <= index < board.workers:
            raise ValueError(f'worker {index} of {board.workers}')
        self.board, self.index, self.clock = board, index, clock
        self._write = threading.Lock()
        board.flying[index] = b''       # a replaced worker's claims are over
        self._read = threading.Lock()
        # A record lock is the process's: its threads take turns at the gate here.
        self._looking = threading.Lock()
        # Where this worker stopped reading each sibling's ring: from now on (a
        # replacement worker does not take in its predecessor's whole history).
        self._seen = board.counts.copy()

    def publish(self, allocations: Mapping[str, Mapping[str, int]]) -> None:
        """A claim Placement accepted from this worker, for its siblings' views."""
        # A class named longer than a record holds (Placement allows 255 characters)
        # is left out: a sibling sees that claim at its next read.
        rows = [(rp, rc, int(amount)) for rp, resources in allocations.items()
                for rc, amount in resources.items() if len(rc.encode()) <= RC_BYTES]
        board, at = self.board, self.clock()
        with self._write:
            count = int(board.counts[self.index])
            ring = board.records[self.index]
            for i, (rp, rc, amount) in enumerate(rows):
                ring[(count + i) % board.ring] = (at, rp.encode(), rc.encode(), amount)
            board.counts[self.index] = count + len(rows)

    def new(self) -> list[tuple[float, str, str, int]]:
        """The siblings' claims written since the last call: (when, provider, class,
        amount)."""
        board = self.board
        with self._read:
            counts = board.counts.copy()
            taken = []
            for sibling in range(board.workers):
                if sibling == self.index:
                    continue
                end = int(counts[sibling])
                start = max(int(self._seen[sibling]), end - board.ring + MARGIN)
                if end > start:
                    at = np.arange(start, end) % board.ring
                    taken.append(board.records[sibling][at].copy())
                self._seen[sibling] = end
        return [(at, rp.decode(), rc.decode(), amount)
                for records in taken for at, rp, rc, amount in records.tolist()]

    def take_off(self, provider_uuid: str) -> None:
        """A claim of this worker on ``provider_uuid`` is in flight (the spread's
        :meth:`~scheduler.pipeline.spread.Spread.claiming` says when), until
        :meth:`land`. With every slot taken, the siblings just do not see it."""
        with self._write:
            mine = self.board.flying[self.index]
            free = np.flatnonzero(mine == b'')
            if len(free):
                mine[free[0]] = provider_uuid.encode()

    def take_off_when_clear(self, provider_uuid: str, *, limit: float, poll: float) -> None:
        """:meth:`take_off` once no sibling's claim is in flight on ``provider_uuid``
        (or after ``limit`` seconds), looking every ``poll`` seconds.

        The look and the take-off are one step for the service's workers (the
        board's gate): two workers that looked at the same moment found the host
        clear, both took off, and their claims met in Placement, which refused one.
        A worker that takes off after a sibling's claim landed finds that claim on
        the board (it is published before it lands)."""
        deadline = time.monotonic() + limit
        while True:
            with self.gated():
                if not self.flying_on(provider_uuid) or time.monotonic() >= deadline:
                    self.take_off(provider_uuid)
                    return
            time.sleep(poll)

    @contextlib.contextmanager
    def gated(self) -> Iterator[bool]:
        """Holding the board's gate, one worker (and one of its threads) at a time;
        without it after :data:`GATE_WAIT` seconds. Yields whether it is held."""
        fd = self.board.gate.fileno()
        with self._looking:
            held, given_up_at = False, time.monotonic() + GATE_WAIT
            while not held:
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held = True
                except OSError as e:
                    if (e.errno not in (errno.EACCES, errno.EAGAIN)
                            or time.monotonic() >= given_up_at):
                        break
                    time.sleep(GATE_POLL)
            try:
                yield held
            finally:
                if held:
                    fcntl.lockf(fd, fcntl.LOCK_UN)

    def land(self, provider_uuid: str) -> None:
        with self._write:
            mine = self.board.flying[self.index]
            at = np.flatnonzero(mine == provider_uuid.encode())
            if len(at):
                mine[at[0]] = b''

    def flying(self) -> set[str]:
        """The hosts the siblings' claims are in flight on."""
        flying = np.delete(self.board.flying, self.index, axis=0).ravel()
        return {uuid.decode() for uuid in flying[flying != b''].tolist()}

    def flying_on(self, provider_uuid: str) -> bool:
        """Whether a sibling's claim is in flight on ``provider_uuid``."""
        slots = self.board.flying == provider_uuid.encode()
        slots[self.index] = False
        return bool(slots.any())
