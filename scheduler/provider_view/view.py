"""The worker's provider view: one snapshot shared by its requests, kept recent.

A snapshot older than ``max_age`` seconds, or one a refused claim showed stale
(another scheduler got there first; until then the refused claim counts as used),
is read again: what changed since (the reader knows how, and reads every provider
again from time to time). A busy
worker reads on a thread while its requests go on with the snapshot they have,
and for at most a quarter of its time (:meth:`ProviderView.fresh_for`: at 50,000
providers a read takes longer than a ``max_age`` of a fraction of a second). A
worker that sat idle, no other request in it and none come or gone for ``max_age`` nor
for as long as its last read of changes took, reads before the request decides:
nothing queues behind that read.
Between reads, the claims this worker made are added to it as Placement accepts
them (the overlay), so its own requests do not pile onto a host it just filled; other
schedulers' claims are seen at the next read, and until then Placement refuses
what no longer fits: a stale view costs a retry, never an overcommit. A claim
made while a read is under way may be counted twice until the next read (the
host looks fuller than it is), never missed: each claim is kept with when it was
made, and a snapshot takes those made since its read began. With several workers,
that read may be one the service's reader began before the worker asked for it
(scheduler/catalog/shared_provider_reads.py).
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from placement_client.query import AllocationCandidatesQuery
from scheduler.exceptions import SchedulerError
from scheduler.host_state import HostData
from scheduler.host_table import HostView
from scheduler.provider_view import trees
from scheduler.provider_view.answer import Overlay, is_flat, matching, why_not_exact
from scheduler.provider_view.hosts import Requests, SnapshotHosts, ViewTables
from scheduler.provider_view.reach import HeldRows, OutOfReach
from scheduler.provider_view.search import Unsettled
from scheduler.provider_view.siblings import WorkerBoard
from scheduler.provider_view.snapshot import ProviderSnapshot

LOG = logging.getLogger(__name__)

#: Why a query went to Placement when the view could not be read (a metric label).
UNREADABLE = 'view unreadable'
#: Why a query the view answers exactly went to Placement all the same: no provider
#: of the view fits. The view may be behind (capacity freed since is not in it), and
#: a NoValidHost is only ever Placement's word.
NONE_FIT = 'no provider fits in the view'
#: Why a query of several groups went to Placement: the search could not tell within
#: its steps whether a tree holds it (:data:`scheduler.provider_view.search.BUDGET`).
UNSETTLED = 'a tree the search could not settle'

#: At most this share of a worker's time goes to reading its view (:meth:`ProviderView.fresh_for`).
READ_SHARE = 0.25

#: Reads a snapshot: the whole of it (None), or what changed since the one given
#: (which it may read whole, and then shares that one's providers if they are the
#: same: :meth:`ProviderSnapshot.sharing_providers_of`).
Reader = Callable[[ProviderSnapshot | None], ProviderSnapshot]


@dataclass(frozen=True)
class Match:
    """The providers of one snapshot that hold a whole query (roots, in row order),
    this worker's claims since the snapshot was read, and whether the worker was
    busy (another request was in it, or its last request came or left within
    ``max_age``, or within its last read)."""

    snapshot: ProviderSnapshot
    rows: np.ndarray
    resources: dict[str, int]
    overlay: Overlay
    tables: ViewTables
    #: the query matched (to match it again: :meth:`ProviderView.match`)
    query: AllocationCandidatesQuery
    busy: bool = False
    #: a root's allocation requests, when they are not all of ``resources`` from
    #: the root (a query answered tree by tree: :mod:`.trees`)
    requests: Requests | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def hosts(self, catalog: HostData, *, default_availability_zone: str = 'nova') -> HostView:
        """These providers' hosts, as rows of the table the view keeps over the
        snapshot, read from ``catalog`` as it is now."""
        return self.hosts_of_table(catalog, default_availability_zone)[0]

    def hosts_of_table(self, catalog: HostData, default_availability_zone: str = 'nova'
                       ) -> tuple[HostView, SnapshotHosts]:
        """:meth:`hosts`, and the table they are rows of."""
        tables = self.tables.hosts(self.snapshot, catalog,
                                   default_availability_zone=default_availability_zone)
        return tables.view(self.rows, self.resources, self.overlay, busy=self.busy,
                           requests=self.requests), tables


class ProviderViewError(SchedulerError):
    """The providers could not be read; the message never carries a password."""


class ProviderView:
    def __init__(self, read: Reader, *, max_age: float,
                 clock: Callable[[], float] = time.monotonic,
                 read_behind: bool = True, siblings: WorkerBoard | None = None,
                 began: Callable[[], float | None] | None = None):
        self.max_age = max_age
        self._read_changes = read
        # When the read of the snapshot ``read`` returned began, when that is not when
        # it was called (one the service's reader had made: shared_provider_reads).
        self._began = began
        self._clock = clock
        # A snapshot older than max_age is read again on a thread of its own while
        # requests go on with the one they have (reading 10,000 providers takes
        # about half a second); with read_behind off, the request reads it.
        self._read_behind = read_behind
        self._lock = threading.Lock()
        # One read at a time, so that a read of changes starts from the newest snapshot.
        self._read_lock = threading.Lock()
        self._snapshot: ProviderSnapshot | None = None
        self._read_at = float('-inf')
        # When the last request matched or left, and how long the last read took
        # (whether the worker is busy).
        self._asked_at = float('-inf')
        # Requests in the worker now, from their arrival to their answer (serving()).
        self._serving = 0
        self._read_took = 0.0
        self._stale = False
        self._reading = False
        self._overlay: dict[str, dict[str, int]] = {}
        # The claims in the overlay, each with when it was made and its number
        # (claims kept so far): the next snapshot's overlay is those made since its
        # read began.
        self._claims: list[tuple[float, int, Mapping[str, Mapping[str, int]]]] = []
        self._kept = 0
        #: Snapshots read so far (for the status and the tests).
        self.reads = 0
        # Every host of the latest snapshot as a table, for requests to fork.
        self._tables = ViewTables()
        # The service's other workers' claims (siblings.py): None, one worker.
        self._siblings = siblings
        # The last answer of out_of_reach, and what it was asked of; the held hosts'
        # rows it was worked out from, kept while the table's build and the held set
        # are (a new table each read: searching its host names took about 5 ms at
        # 50,000 hosts, bench.match, for four requests in ten under load).
        self._reach: tuple[SnapshotHosts, Collection[str], frozenset[str],
                           OutOfReach | None] | None = None
        self._held_rows: HeldRows | None = None

    def warm(self, catalog: HostData, default_availability_zone: str = 'nova') -> None:
        """The first, whole read and the table of its hosts, before the worker takes
        calls: read on the first request instead, it kept the worker's first callers
        waiting for it (seconds at 50,000 providers with the service's workers all
        starting at once). ProviderViewError when the read fails: the first request
        then reads again."""
        snapshot, began, counted = self._read()
        with self._lock:
            if self._snapshot is not None:
                return      # a request read meanwhile
            self._install(snapshot, began, counted)
        self._tables.hosts(snapshot, catalog,
                           default_availability_zone=default_availability_zone)

    def match(self, query: AllocationCandidatesQuery) -> tuple[Match | None, str | None]:
        """(The providers that hold the whole of ``query``, None) when the view answers
        it exactly; (None, why) when Placement must.

        Every matching provider, not ``query.limit`` of them: the limit bounds
        Placement's work, and weighing a sample costs decision quality
        (:mod:`.hosts`).
        """
        try:
            snapshot, overlay, busy = self._current()
        except ProviderViewError as e:
            LOG.warning('provider view: %s; asking Placement', e)
            return None, UNREADABLE
        why = why_not_exact(query, snapshot)
        if why is not None:
            return None, why
        requests: Requests | None = None
        if is_flat(query, snapshot):
            rows = matching(snapshot, query, overlay)
        else:
            try:
                found = trees.answer(snapshot, query, overlay)
            except Unsettled:
                return None, UNSETTLED
            rows, requests = found.roots, found.requests
        if not len(rows):
            return None, NONE_FIT
        resources: dict[str, int] = {}
        for group in query.groups:
            for rc, amount in group.resources.items():
                # A class a sharing provider may give is not measured against the
                # host's tree (its room there says nothing of the shared pool).
                if rc not in snapshot.shared_classes:
                    resources[rc] = resources.get(rc, 0) + amount
        return (Match(snapshot, rows, resources, overlay, self._tables, query, busy, requests),
                None)

    def out_of_reach(self, held: Collection[str], forbidden: Collection[str]
                     ) -> OutOfReach | None:
        """Of ``held`` (service hosts held as disabled or down), those no answer of a
        request forbidding ``forbidden`` on roots can be on, in the table of the latest
        snapshot a request took (:mod:`.reach`); None: none, or no table yet. The same
        ``held`` object and table give the same answer without working it out again
        (the catalog's held hosts change rarely, the table each read)."""
        hosts = self._tables.latest()
        if hosts is None:
            return None
        wanted = frozenset(forbidden)
        last = self._reach
        if last is not None and last[0] is hosts and last[1] is held and last[2] == wanted:
            return last[3]
        rows = self._held_rows
        if rows is None or not rows.fits(hosts, held):
            rows = self._held_rows = HeldRows.of(hosts, held)
        found = rows.out_of_reach(hosts, wanted)
        self._reach = hosts, held, wanted, found
        return found

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """A request in the worker, from its arrival to its answer. While another is
        too (waiting for its turn to decide, say), the worker is busy, and it stays
        busy for ``max_age`` after a request left, whenever the last one matched:
        at 50,000 providers a request's turn can outlast ``max_age``, and a worker
        that took the gap between two matches for an idle spell read the view
        before each request, holding the turn of every request queued behind it."""
        with self._lock:
            self._serving += 1
        try:
            yield
        finally:
            with self._lock:
                self._serving -= 1
                self._asked_at = self._clock()

    def claimed(self, allocations: Mapping[str, Mapping[str, int]]) -> None:
        """A claim this worker made, from the moment Placement accepted it: the view
        shows it until its next read. One undone afterwards (its request failed
        later) still shows until then: the host looks fuller than it is, never
        emptier."""
        with self._lock:
            self._keep(self._clock(), allocations)
        if self._siblings is not None:
            self._siblings.publish(allocations)

    def refused(self, allocations: Mapping[str, Mapping[str, int]]) -> None:
        """A claim of ``allocations`` based on the view was refused for capacity: the
        view is behind on those providers (another scheduler claimed them since).
        They count as holding that much more until the next read, which starts now
        (behind the requests): the worker's other requests, and the next retry,
        look elsewhere instead of meeting the same refusal. Measured at 1,000
        providers while the cloud filled: a quarter of the refusals were the
        same worker refused again on the same host, half of those within 0.13 s."""
        with self._lock:
            # A read under way may have begun before the other scheduler's claim:
            # its snapshot keeps the refusal too. One begun from here on sees it.
            self._keep(self._clock(), allocations)
            if self._snapshot is not None and self._read_behind:
                self._start_read_behind()
            else:
                self._read_at = float('-inf')

    def still_fits(self, allocations: Mapping[str, Mapping[str, int]]) -> bool:
        """Whether ``allocations`` still fit the view as it is now, the claims the
        service's other workers made since it was read included.

        A worker chooses a host, then waits for a sibling's claim in flight on it to
        land, then claims: by then the sibling may have taken the room the choice
        was made on, and Placement would refuse the claim for capacity. A provider
        or class the view does not hold counts as fitting: Placement decides."""
        with self._lock:
            snapshot = self._snapshot
            if snapshot is None:
                return True
            if self._siblings is not None:
                self._take_siblings_claims()
            for rp, resources in allocations.items():
                row = snapshot.index.get(rp)
                if row is None:
                    continue
                added = self._overlay.get(rp, {})
                for rc, amount in resources.items():
                    inventory = snapshot.inventories.get(rc)
                    if inventory is None:
                        continue
                    at = inventory.position(row)
                    if at is None:
                        continue
                    # Placement's own check: used + amount <= (total - reserved) * ratio.
                    used = int(inventory.used[at]) + added.get(rc, 0)
                    if used + int(amount) > inventory.limit[at]:
                        return False
        return True

    def _keep(self, at: float, allocations: Mapping[str, Mapping[str, int]], *,
              own: bool = True) -> None:
        # Under the lock. A sibling's claim is taken in at a match, maybe long after
        # it was made: only its time says whether a read has it.
        self._claims.append((at, self._kept if own else -1,
                             {rp: dict(used) for rp, used in allocations.items()}))
        self._kept += own
        _add(self._overlay, allocations)

    def _current(self) -> tuple[ProviderSnapshot, dict[str, dict[str, int]], bool]:
        with self._lock:
            snapshot = self._snapshot
            now = self._clock()
            busy = (self._serving > 1
                    or now - self._asked_at <= max(self.max_age, self._read_took))
            self._asked_at = now
            if snapshot is not None and not self._stale:
                age = now - self._read_at
                # A busy worker's reads are spaced by what they take; an idle
                # worker has the time.
                if self._reading or age <= self.max_age or (busy and age <= self.fresh_for()):
                    return snapshot, self._overlay_copy(), busy
                if self._read_behind and busy:
                    self._start_read_behind()
                    return snapshot, self._overlay_copy(), busy
            # The first read, one after a failed read behind, one for a worker that sat
            # idle (no request queues behind the read, and deciding from the old view
            # would weigh other schedulers' latest hosts as if they were empty), or
            # any read without read_behind: the request waits for it.
            self._install(*self._read())
            # The requests that queued behind this read find the worker busy: a read
            # longer than max_age (50,000 providers under load) must not make each of
            # them read again in turn.
            self._asked_at = self._clock()
            return self._snapshot, self._overlay_copy(), busy  # type: ignore[return-value]

    def fresh_for(self) -> float:
        """How long a snapshot serves a busy worker before the next read: ``max_age``,
        or four times as long as the last read of changes took if that is longer (a
        worker reads for at most :data:`READ_SHARE` of its time). A read's thread holds the
        interpreter from the worker's requests for much of what it takes, and the
        database serves it: back to back, as they were at 50,000 providers under a
        ``max_age`` of a quarter of a second, reads halved the throughput, and at
        half of the time they still cost a third of it."""
        return max(self.max_age, self._read_took / READ_SHARE)

    def _read(self) -> tuple[ProviderSnapshot, float, int]:
        """The next snapshot (what changed since the last one; all of it the first
        time), when its read began, and how many claims had been kept when this
        worker began it (those kept since are not in it, whatever their time)."""
        with self._read_lock:
            previous, counted, started = self._snapshot, self._kept, self._clock()
            snapshot = self._read_changes(previous)
            if previous is not None:
                # Only reads of changes: those are what a busy worker repeats. Four
                # times the first, whole read of 50,000 providers kept every worker
                # on its first snapshot for several seconds under load, deciding on
                # hosts the others had been claiming since.
                self._read_took = self._clock() - started
            began = self._began() if self._began is not None else None
            return snapshot, started if began is None else began, counted

    def _start_read_behind(self) -> None:
        # Under the lock; one read at a time.
        if not self._reading:
            self._reading = True
            threading.Thread(target=self._read_behind_requests,
                             name='provider-view-read', daemon=True).start()

    def _read_behind_requests(self) -> None:
        try:
            snapshot, began, counted = self._read()
        except Exception as e:  # noqa: BLE001 - a thread that died would never read again
            LOG.warning('provider view: %s; the next request reads it again',
                        e if isinstance(e, ProviderViewError) else type(e).__name__)
            with self._lock:
                self._reading, self._stale = False, True
            return
        with self._lock:
            self._reading = False
            if began >= self._read_at:   # never replace a newer read
                self._install(snapshot, began, counted)

    def _install(self, snapshot: ProviderSnapshot, began: float, counted: int) -> None:
        """Under the lock: ``snapshot``, whose read began at ``began``, with the claims
        made since then and those kept after this worker began it (a claim made
        while the read was under way may be in it too: counted twice until the next
        read, the host looks fuller, never emptier)."""
        self._snapshot, self._read_at = snapshot, began
        self._claims = [kept for kept in self._claims if kept[0] > began or kept[1] >= counted]
        self._overlay = {}
        for _, _, claim in self._claims:
            _add(self._overlay, claim)
        self._stale = False
        self.reads += 1

    def _overlay_copy(self) -> dict[str, dict[str, int]]:
        # Under the lock.
        if self._siblings is not None:
            self._take_siblings_claims()
        return {rp: dict(used) for rp, used in self._overlay.items()}

    def _take_siblings_claims(self) -> None:
        # Under the lock. A claim made before a read began is in what it read.
        for at, rp, rc, amount in self._siblings.new():  # type: ignore[union-attr]
            if at >= self._read_at:
                self._keep(at, {rp: {rc: amount}}, own=False)


def _add(overlay: dict[str, dict[str, int]], allocations: Mapping[str, Mapping[str, int]]
         ) -> None:
    for rp, resources in allocations.items():
        used = overlay.setdefault(rp, {})
        for rc, amount in resources.items():
            used[rc] = used.get(rc, 0) + int(amount)
