"""The optional, read-only source of the provider view: Placement's own database
(``[placement_database] connection``).

Placement's API has no bulk read of inventories, usages, traits or aggregates
(three or four requests a provider), so the view (:mod:`scheduler.provider_view`)
reads the tables those requests would read, in one read-only transaction: a few
SELECTs, whatever the number of providers, and nothing else. Every connection
is read-only (:mod:`scheduler.catalog.readonly_db`); a database user with SELECT
on these tables is all it needs. Placement's schema is the one of Placement 16
(alembic head ``a082b8bb98d0``); a schema it cannot read fails the read (the
request goes to Placement's API) and is logged, never guessed around.
"""
from __future__ import annotations

import datetime
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from oslo_config import cfg

from scheduler.catalog.dbapi import DirectConnection, DirectDatabase
from scheduler.catalog.provider_changes import Changes
from scheduler.catalog.shared_provider_reads import SharedProviderReads, TakenReads
from scheduler.conf.placement_database import GROUP
from scheduler.conf.scheduler import near_best_tolerance, provider_view_on
from scheduler.exceptions import ConfigurationError
from scheduler.provider_view.siblings import WorkerBoard
from scheduler.provider_view.snapshot import Keyed, ProviderSnapshot
from scheduler.provider_view.view import ProviderView, ProviderViewError

LOG = logging.getLogger(__name__)

OPTION = f'[{GROUP}] connection'

#: The only statements ever sent (besides the read-only session setup). A whole
#: read sends the marks and the whole reads (PROVIDER_UUIDS only when the providers
#: are not those of the last snapshot; a large result counted first); a read of
#: what changed sends the marks, CHANGED_PROVIDERS (on PostgreSQL both in one
#: statement, PROVIDERS_MARK_AND_WRITTEN; or GENERATIONS, when that does
#: not account for every moved generation), then the others restricted to the
#: providers whose generation moved (``... WHERE ... IN (...)``), and, when
#: allocations went, the checksums of usage that find whose (usage_sums).
PROVIDERS_MARK = ('SELECT COUNT(*), COALESCE(MAX(id), 0), COALESCE(SUM(generation), 0), '
                  'MAX(updated_at) FROM resource_providers')
#: On PostgreSQL, a read of changes takes the marks and CHANGED_PROVIDERS' rows in one
#: pass over ``resource_providers`` (it has no index on ``updated_at``): 11.3 against
#: 16.7 ms for the two statements at 103,177 providers on PostgreSQL 15 (doc/performance.md).
PROVIDERS_MARK_AND_WRITTEN = (
    'SELECT COUNT(*), COALESCE(MAX(id), 0), COALESCE(SUM(generation), 0), MAX(updated_at), '
    'ARRAY_AGG(id) FILTER (WHERE updated_at >= :since), '
    'ARRAY_AGG(generation) FILTER (WHERE updated_at >= :since) FROM resource_providers')
#: How a deletion of allocations is noticed without a pass over them (Placement's
#: largest table: 455,000 rows and 37 ms of PostgreSQL at 50,000 nested providers,
#: against 28,000 consumers and 2 ms). Placement removes a consumer's allocation
#: rows in two ways only: replacing them (``PUT``/``POST /allocations``, reshapes),
#: which moves the consumer's generation, or ``DELETE /allocations/{consumer}``,
#: which deletes the consumer once it holds none. A claim first creates its
#: consumer, at generation 0, in a transaction of its own, and moves it to 1 with
#: the allocations: those consumers are pending (PENDING_CONSUMERS) until then. So
#: the settled consumers of the last count (generation 1 or more; ids up to its
#: highest, not pending then) keep their rows and the sum of their generations, and
#: the pending ones are all still there and at most at generation 1, until
#: something is deleted or replaced. ``:pending`` always holds 0 (no consumer's id),
#: so that the list is never empty.
CONSUMERS_MARK = (
    'SELECT COALESCE(MAX(id), 0), COALESCE(SUM(CASE WHEN generation > 0 THEN 1 ELSE 0 END), 0), '
    'COALESCE(SUM(generation), 0), '
    'COALESCE(SUM(CASE WHEN id <= :last AND generation > 0 AND id NOT IN :pending '
    'THEN 1 ELSE 0 END), 0), '
    'COALESCE(SUM(CASE WHEN id <= :last AND id NOT IN :pending THEN generation ELSE 0 END), 0), '
    'COALESCE(SUM(CASE WHEN id IN :pending THEN 1 ELSE 0 END), 0), '
    'COALESCE(SUM(CASE WHEN id IN :pending AND generation > 1 THEN 1 ELSE 0 END), 0) '
    'FROM consumers')
PENDING_CONSUMERS = 'SELECT id FROM consumers WHERE generation = 0'
#: Past this many pending consumers (claims that failed where Placement could not
#: delete the consumer it created stay at generation 0), the next count takes
#: anything as a change: a look at the checksums.
PENDING_MAX = 1000
#: The highest allocation row (the primary key's last entry).
HIGHEST_ALLOCATION = 'SELECT COALESCE(MAX(id), 0) FROM allocations'
PROVIDER_UUIDS = 'SELECT id, uuid FROM resource_providers'
PROVIDER_NUMBERS = ('SELECT id, generation, COALESCE(parent_provider_id, -1) '
                    'FROM resource_providers')
# By id, not name: ints cost less to fetch and to keep than names, which come
# from the small tables below once per read.
INVENTORIES = ('SELECT resource_provider_id, resource_class_id, total, reserved, min_unit, '
               'max_unit, step_size, allocation_ratio FROM inventories')
USAGES = 'SELECT resource_provider_id, resource_class_id, SUM(used) FROM allocations'
USAGES_GROUPING = ' GROUP BY resource_provider_id, resource_class_id'
TRAITS = 'SELECT resource_provider_id, trait_id FROM resource_provider_traits'
AGGREGATES = 'SELECT resource_provider_id, aggregate_id FROM resource_provider_aggregates'
CLASS_NAMES = 'SELECT id, name FROM resource_classes'
TRAIT_NAMES = 'SELECT id, name FROM traits'
AGGREGATE_UUIDS = 'SELECT id, uuid FROM placement_aggregates'
CHANGED_PROVIDERS = 'SELECT id, generation FROM resource_providers WHERE updated_at >= :since'
#: The allocation rows written since a read (an index range of the primary key).
NEW_ALLOCATIONS = 'SELECT id, resource_provider_id FROM allocations WHERE id > :after'
#: The generations of some providers (by primary key).
GENERATIONS_OF = 'SELECT id, generation FROM resource_providers WHERE id IN :ids'
GENERATIONS = 'SELECT id, generation FROM resource_providers'
#: Each allocation's amount weighted by its provider and class: a checksum of a
#: provider's usage (:func:`usage_sums` computes the same from a snapshot). Its
#: largest sum, over a bucket of providers, stays far inside 64 bits (Placement's
#: amounts are 32-bit; ratio, weight and classes add about 25 bits).
_WEIGHT_FACTOR, _WEIGHT_MODULUS = 31, 9973
_WEIGHT = (f'((resource_provider_id * {_WEIGHT_FACTOR} + resource_class_id) '
           f'% {_WEIGHT_MODULUS} + 1)')
#: PostgreSQL would multiply two 32-bit integers in 32 bits; MySQL and SQLite use 64.
_WIDE_USED = {'postgresql': 'CAST(used AS BIGINT)'}
#: Providers per bucket of the first comparison of checksums (buckets: ``id % n``).
PROVIDERS_PER_BUCKET = 64
#: Rows fetched from the driver at a time: the rows of one chunk are Python
#: objects only until they are columns.
FETCH_CHUNK = 5000

#: Over this share of the providers changed, one whole read is cheaper than
#: reading each changed provider.
WHOLE_READ_SHARE = 0.25
#: How far before the newest write seen at the last read the next read looks for
#: written providers: a write whose transaction began earlier may commit later.
#: Only a shortcut: the generations' sum says whether anything was missed.
WRITE_OVERLAP = datetime.timedelta(seconds=30)
#: Seconds between two reads of changes that look at everything: the providers'
#: marks and generations (two scans of ``resource_providers``, which has no index
#: on ``updated_at``) and the consumers' (how a deletion is noticed:
#: ``CONSUMERS_MARK``; until 2026-12 a count of the allocations, a scan of
#: Placement's largest table, 35 ms of the database's time at 50,000 providers
#: with 270,000 allocations). The reads in between take only the
#: providers of the allocation rows written since (an index range), which is what
#: a busy region mostly writes: four busy workers each sent both scans a few
#: times a second, a quarter of the CPU of the machine that served the claims
#: (doc/performance.md). A deletion only frees room: seen up to this much later,
#: the view is the fuller for it, never the emptier; a change of inventories,
#: traits or aggregates, or a provider created or deleted, is seen as late.
DELETIONS_EVERY = 2.0


@dataclass(frozen=True)
class ConsumerMarks:
    """What a count of Placement's consumers noted (:data:`CONSUMERS_MARK`)."""

    settled: int            # consumers at generation 1 or more
    generations: int        # the sum of all generations
    highest: int            # the highest id
    #: the ids of the consumers at generation 0 (None: more than PENDING_MAX)
    pending: tuple[int, ...] | None = ()


@dataclass(frozen=True)
class Marks:
    """What a read noted of Placement's tables, to tell at the next one what changed."""

    providers: tuple[int, int, int]     # rows, highest id, sum of the generations
    newest_write: datetime.datetime | None   # the latest ``updated_at`` of a provider
    #: the consumers, as of the last read that counted them (a read of changes counts
    #: them only every ``deletions_every`` seconds)
    consumers: ConsumerMarks
    #: the highest id of an allocation row whose provider the snapshot has read since
    #: it was written (the rows after it: a read of new allocations)
    allocations_read: int = 0


class PlacementDatabaseReader(DirectDatabase):
    """Reads the providers of one Placement database as a snapshot: all of them, or
    only what changed since a previous snapshot.

    What changed is known from Placement's own bookkeeping. Every write to a
    provider's inventories, traits, aggregates (microversion 1.19 and later) or
    allocations moves its generation up (and its ``updated_at``), so the
    providers written since a little before the last read's newest write are
    read again, and the sum of all generations tells whether that was every
    provider whose generation moved (generations only grow); when it was not,
    every generation is compared. Allocations taken away move no generation of
    the providers that held them: ``DELETE /allocations/{consumer}`` (Nova deletes
    instances' allocations that way) moves none, and a consumer's allocations
    replaced (a move) move only the generations of the providers they now name.
    Either way the consumer changes: deleted with its last allocation, or its own
    generation moved. So the consumers' rows and generations are kept with each
    snapshot too (:data:`CONSUMERS_MARK`), counted when it looks at everything:
    when those of the consumers already counted are not what they were, some
    allocations went, and checksums find whose (below). A read looks at
    everything (the providers' marks and generations, the consumers': scans of
    whole tables) once every ``deletions_every`` seconds
    (:data:`DELETIONS_EVERY`); the reads in between take the providers of the
    allocation rows written since the last read, which are what a busy region
    mostly writes, found by the rows' ids. Whatever a read of changes could still
    miss (aggregates written below microversion 1.19, a deletion hidden by a late
    claim's row) is taken in by reading every provider again at least once every
    ``refresh_reads`` reads of changes, a slice of them with each: the cost of a
    whole read spread over many, without its peak of memory (a whole read of
    50,000 providers passes about 50 MB through a worker; a slice of a thousand, a
    few hundred kilobytes). A whole read comes only first, and when providers
    were created or deleted, or a quarter of them changed.

    When rows of allocations went, the providers that lost them are found by
    checksums of usage (:func:`usage_sums`): the database sums each bucket of
    providers' allocations, weighted, and only the buckets whose sum is not the
    snapshot's are summed again per provider. The database still scans its
    allocations then, but a worker receives a few hundred numbers instead of
    every provider's usage: at 50,000 providers a read that followed a deletion
    took 103 ms of a worker's CPU that way, 9 ms this way (doc/performance.md,
    *Reads that do not grow with the cloud*).
    """

    def __init__(self, url: str, *, connect_timeout: int = 5, query_timeout: int = 30,
                 refresh_reads: int = 60, deletions_every: float = DELETIONS_EVERY,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(url, option=OPTION, error=ProviderViewError,
                         connect_timeout=connect_timeout, query_timeout=query_timeout)
        self.refresh_reads = max(1, refresh_reads)
        self.deletions_every = deletions_every
        self._clock = clock
        # When the consumers were last counted.
        self._counted_at = float('-inf')
        # Where the next slice of providers read again begins (a row).
        self._refresh_from = 0
        #: Reads so far, whole and of changes (for the status and the tests).
        self.whole_reads = 0
        self.change_reads = 0
        #: Reads of changes that compared every generation (the shortcut missed one).
        self.generation_scans = 0
        #: Reads of changes that followed a deletion of allocations (checksums compared).
        self.usage_checks = 0
        #: Reads of changes that took only the providers of new allocations.
        self.allocation_reads = 0
        #: What the last read of changes read again, for other snapshots to take in
        #: (None after a whole read: a snapshot of other providers needs one too).
        self.last_changes: Changes | None = None
        # When a read last looked at everything (DELETIONS_EVERY).
        self._checked_at = float('-inf')

    def read(self, previous: ProviderSnapshot | None = None, *,
             whole: bool = False) -> ProviderSnapshot:
        """Every provider; with ``previous``, that snapshot with what changed since, or
        (``whole``) read whole, sharing ``previous``'s providers if they are the same."""
        self.last_changes = None
        with self.connect() as connection:
            # One transaction: the reads see one moment (repeatable read on
            # PostgreSQL and MySQL; SQLite's read transaction).
            # The snapshot a read of changes starts from; None: a whole read.
            since = (previous if previous is not None and not whole
                     and isinstance(previous.marks, Marks) else None)
            if since is not None and self._clock() - self._checked_at < self.deletions_every:
                snapshot = self._read_new_allocations(connection, since)
                if snapshot is not None:
                    self.change_reads += 1
                    self.allocation_reads += 1
                    return snapshot
            self._checked_at = self._clock()
            marks, written = self._marks(
                connection, _written_since(since.marks) if since is not None else None)
            if since is not None:
                snapshot = self._read_changes(connection, since, marks, written)
                if snapshot is not None:
                    self.change_reads += 1
                    return snapshot
            self.whole_reads += 1
            consumers, _ = self._count_consumers(connection, None)
            return self._read_all(connection, replace(
                marks, consumers=consumers,
                allocations_read=int(connection.one(HIGHEST_ALLOCATION)[0])), previous)

    def _read_all(self, connection: DirectConnection, marks: Marks,
                  previous: ProviderSnapshot | None) -> ProviderSnapshot:
        numbers = _fetch_columns(connection, PROVIDER_NUMBERS, 3)
        numbers = numbers[np.argsort(numbers[:, 0], kind='stable')]
        ids = numbers[:, 0].copy()
        if previous is not None and np.array_equal(ids, previous.ids):
            # A provider's uuid never changes: the same ids are the same providers,
            # whose uuids (a string each) need not be fetched again.
            uuids = previous.uuids
        else:
            ids, uuids = _fetch_uuids(connection)
            if not np.array_equal(ids, numbers[:, 0]):
                raise ProviderViewError('the providers changed within one transaction')
        names = _Names(connection)
        # A chunk at a time, straight from each cursor into the snapshot's columns:
        # the rows are never all in the worker at once (170,000 inventories and
        # 300,000 traits at 50,000 providers).
        return ProviderSnapshot.from_columns(
            ids, uuids, numbers[:, 1].copy(), numbers[:, 2].copy(),
            inventories=map(names.classes, _pieces(connection, INVENTORIES, 8, np.float64)),
            usages=map(names.classes, _pieces(connection, USAGES + USAGES_GROUPING, 3)),
            traits=map(names.traits, _pieces(connection, TRAITS, 2, np.int32)),
            aggregates=map(names.aggregates, _pieces(connection, AGGREGATES, 2, np.int32)),
            marks=marks, previous=previous)

    @staticmethod
    def _marks(connection: DirectConnection, written_since: datetime.datetime | None
               ) -> tuple[Marks, list[tuple[Any, ...]] | None]:
        """The providers' marks (the consumers' are the caller's to count); on
        PostgreSQL with ``written_since``, also CHANGED_PROVIDERS' rows from that
        moment on, taken in the same pass (else None)."""
        written = None
        if written_since is not None and connection.backend == 'postgresql':
            count, last, generations, newest, ids, moved = connection.one(
                PROVIDERS_MARK_AND_WRITTEN, {'since': connection.timestamp(written_since)})
            written = list(zip(ids or (), moved or (), strict=True))
        else:
            count, last, generations, newest = connection.one(PROVIDERS_MARK)
        return Marks((int(count), int(last), int(generations)), _timestamp(newest),
                     ConsumerMarks(0, 0, 0)), written

    def _count_consumers(self, connection: DirectConnection, before: ConsumerMarks | None
                         ) -> tuple[ConsumerMarks, bool]:
        """The consumers' marks, and whether the consumers counted ``before`` lost some
        allocations since: one deleted, or its allocations replaced."""
        self._counted_at = self._clock()
        pending = before.pending if before is not None else ()
        highest, settled, generations, old_settled, old_generations, found, replaced = (
            int(value) for value in connection.one(CONSUMERS_MARK, {
                'last': before.highest if before is not None else 0,
                'pending': [0, *(pending or ())]}))
        # A consumer written by a transaction older than the last count but committed
        # after it may have an id below its highest: counted as a change too (a look
        # at the checksums that finds nothing).
        changed = before is not None and (
            pending is None or (old_settled, old_generations) != (before.settled,
                                                                  before.generations)
            or found != len(pending) or replaced > 0)
        now = [int(row[0]) for row in connection.rows(PENDING_CONSUMERS)]
        return ConsumerMarks(settled, generations, highest,
                             tuple(now) if len(now) <= PENDING_MAX else None), changed

    def _read_changes(self, connection: DirectConnection, previous: ProviderSnapshot,
                      marks: Marks, written: list[tuple[Any, ...]] | None
                      ) -> ProviderSnapshot | None:
        """``previous`` with what changed; None when only a whole read will do (the
        providers themselves changed, or too many of them). ``written``: the rows of
        CHANGED_PROVIDERS when the marks' statement took them."""
        before: Marks = previous.marks  # type: ignore[assignment]
        if marks.providers[:2] != before.providers[:2]:
            return None                 # providers were created or deleted
        generations = previous.generations.copy()
        moved = self._moved(connection, previous, before, marks, generations, written)
        if moved is None:
            return None
        if len(moved) > WHOLE_READ_SHARE * len(previous):
            return None
        names = _Names(connection)
        to_read = set(moved).union(self._refresh_slice(previous))
        consumers = before.consumers            # until counted again
        allocations_read = before.allocations_read
        if self._clock() - self._counted_at >= self.deletions_every:
            consumers, went = self._count_consumers(connection, consumers)
            if went:
                # Allocations were deleted or replaced: the providers that lost
                # them moved no generation.
                self.usage_checks += 1
                to_read.update(_usage_moved(connection, previous, names))
            # A new row moved its provider's generation: read above.
            allocations_read = max(allocations_read,
                                   int(connection.one(HIGHEST_ALLOCATION)[0]))
        marks = replace(marks, consumers=consumers, allocations_read=allocations_read)
        return self._with_changed(connection, previous, generations, sorted(to_read), names,
                                  marks)

    def _read_new_allocations(self, connection: DirectConnection, previous: ProviderSnapshot
                              ) -> ProviderSnapshot | None:
        """``previous`` with the providers of the allocation rows written since it read
        theirs, and the next slice, read again; None when only a look at everything
        will do (a provider ``previous`` does not hold, or too many of them).

        A row of a transaction that began before the last read but committed after
        it may have a lower id than that read saw: its provider's generation moved,
        so the next look at everything reads it."""
        before: Marks = previous.marks  # type: ignore[assignment]
        rows = np.array(connection.rows(NEW_ALLOCATIONS, {'after': before.allocations_read}),
                        dtype=np.int64).reshape(-1, 2)
        providers = np.unique(rows[:, 1])
        if (len(providers) > WHOLE_READ_SHARE * len(previous)
                or previous.rows_of(providers) is None):
            return None
        to_read = sorted(set(providers.tolist()).union(self._refresh_slice(previous)))
        generations = previous.generations.copy()
        if to_read:
            found = np.array(connection.rows(GENERATIONS_OF, {'ids': to_read}),
                             dtype=np.int64).reshape(-1, 2)
            where = previous.rows_of(found[:, 0])
            if where is None or len(found) != len(to_read):
                return None             # a provider went: its rows move
            generations[where] = found[:, 1]
        marks = replace(before, allocations_read=(int(rows[:, 0].max()) if len(rows)
                                                  else before.allocations_read))
        return self._with_changed(connection, previous, generations, to_read,
                                  _Names(connection), marks)

    def _with_changed(self, connection: DirectConnection, previous: ProviderSnapshot,
                      generations: np.ndarray, changed: list[int], names: _Names,
                      marks: Marks) -> ProviderSnapshot:
        """``previous`` with the providers ``changed`` (ids, sorted) read again."""
        def of_changed(query: str, width: int, grouping: str = '',
                       dtype: Any = np.int64) -> np.ndarray:
            if not changed:
                return np.zeros((0, width), dtype=dtype)
            rows = connection.rows(f'{query} WHERE resource_provider_id IN :ids{grouping}',
                                   {'ids': changed})
            return np.array(rows, dtype=dtype).reshape(len(rows), width)

        ids = np.array(changed, dtype=np.int64)
        where = previous.rows_of(ids)
        assert where is not None    # the callers read only the providers of previous
        changes = Changes(
            ids, generations[where],
            inventories=names.classes(of_changed(INVENTORIES, 8, dtype=np.float64)),
            usages=names.classes(of_changed(USAGES, 3, USAGES_GROUPING)),
            traits=names.traits(of_changed(TRAITS, 2)),
            aggregates=names.aggregates(of_changed(AGGREGATES, 2)), marks=marks)
        self.last_changes = changes
        return previous.with_changes(
            generations, changed, inventories=changes.inventories, usages=changes.usages,
            traits=changes.traits, aggregates=changes.aggregates, marks=marks)

    def _refresh_slice(self, previous: ProviderSnapshot) -> list[int]:
        """The ids of the next providers to read again whatever their generation says:
        every one within ``refresh_reads`` reads."""
        n = len(previous)
        if not n:
            return []
        size = min(-(-n // self.refresh_reads), n)
        rows = (self._refresh_from + np.arange(size)) % n
        self._refresh_from = int(rows[-1]) + 1
        return previous.ids[rows].tolist()

    def _moved(self, connection: DirectConnection, previous: ProviderSnapshot,
               before: Marks, marks: Marks, generations: Any,
               written: list[tuple[Any, ...]] | None) -> list[int] | None:
        """The ids of the providers whose generation moved since ``previous`` (their
        new generations written into ``generations``); None when the providers
        are not those of ``previous``."""
        rows: list[tuple[Any, ...]] | None = None
        since = _written_since(before)
        if since is not None:
            rows = written if written is not None else connection.rows(
                CHANGED_PROVIDERS, {'since': connection.timestamp(since)})
        elif marks.newest_write is None:
            rows = []                   # no provider was ever written after its creation
        if rows is not None:
            found = np.array(rows, dtype=np.int64).reshape(-1, 2)
            at = previous.rows_of(found[:, 0])
            if at is not None:
                generations[at] = found[:, 1]
                if int(generations.sum()) == marks.providers[2]:
                    return found[:, 0][found[:, 1] != previous.generations[at]].tolist()
        # A write the shortcut did not see: compare every generation.
        self.generation_scans += 1
        every = _fetch_columns(connection, GENERATIONS, 2)
        every = every[np.argsort(every[:, 0], kind='stable')]
        if not np.array_equal(every[:, 0], previous.ids):
            return None
        generations[:] = every[:, 1]
        return previous.ids[generations != previous.generations].tolist()


def _written_since(marks: Any) -> datetime.datetime | None:
    """From when a read of changes since the snapshot of ``marks`` looks for providers
    written (a little before its newest write); None when no provider was written after
    its creation then, or ``marks`` are not a read's of this database."""
    if not isinstance(marks, Marks) or marks.newest_write is None:
        return None
    return marks.newest_write - WRITE_OVERLAP


def usage_sums(snapshot: ProviderSnapshot, class_ids: Mapping[str, int]) -> np.ndarray:
    """Per row of ``snapshot``, the checksum of its usage that Placement's database
    computes from the allocations (``_WEIGHT``); ``class_ids``: Placement's ids of
    the classes."""
    sums = np.zeros(len(snapshot), dtype=np.int64)
    for rc, inventory in snapshot.inventories.items():
        ids = snapshot.ids[inventory.rows]
        weight = (ids * _WEIGHT_FACTOR + class_ids[rc]) % _WEIGHT_MODULUS + 1
        sums[inventory.rows] += inventory.used * weight
    return sums


def _usage_moved(connection: DirectConnection, previous: ProviderSnapshot,
                 names: _Names) -> list[int]:
    """The ids of the providers whose allocations are not what ``previous`` holds:
    per bucket of providers first, then per provider in the buckets that differ."""
    ours = usage_sums(previous, names.class_ids())
    buckets = max(1, len(previous) // PROVIDERS_PER_BUCKET)
    weighted = f'{_WIDE_USED.get(connection.backend, "used")} * {_WEIGHT}'
    theirs = dict(connection.rows(
        f'SELECT resource_provider_id % {buckets}, SUM({weighted}) FROM allocations '
        f'GROUP BY resource_provider_id % {buckets}'))
    bucket_of = previous.ids % buckets
    by_bucket = np.zeros(buckets, dtype=np.int64)
    np.add.at(by_bucket, bucket_of, ours)
    differ = [b for b, total in enumerate(by_bucket.tolist()) if int(theirs.get(b, 0)) != total]
    if not differ:
        return []
    rows = np.flatnonzero(np.isin(bucket_of, differ))
    ids = previous.ids[rows].tolist()
    theirs = dict(connection.rows(
        f'SELECT resource_provider_id, SUM({weighted}) FROM allocations '
        'WHERE resource_provider_id IN :ids GROUP BY resource_provider_id', {'ids': ids}))
    return [i for i, total in zip(ids, ours[rows].tolist(), strict=True)
            if int(theirs.get(i, 0)) != total]


def _timestamp(value: Any) -> datetime.datetime | None:
    """A provider's ``updated_at`` as the driver gives it (SQLite: text)."""
    if value is None or isinstance(value, datetime.datetime):
        return value
    return datetime.datetime.fromisoformat(str(value))


def _fetch_uuids(connection: DirectConnection) -> tuple[np.ndarray, list[str]]:
    """Every provider's id and uuid, in the order of the ids."""
    ids: list[np.ndarray] = []
    uuids: list[str] = []
    for rows in connection.chunks(PROVIDER_UUIDS, FETCH_CHUNK):
        ids.append(np.array([r[0] for r in rows], dtype=np.int64))
        uuids.extend(r[1] for r in rows)
    found = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    order = np.argsort(found, kind='stable')
    return found[order], [uuids[i] for i in order.tolist()]


def _pieces(connection: DirectConnection, query: str, width: int,
            dtype: Any = np.int64) -> Iterator[np.ndarray]:
    """The rows of ``query`` (numbers only), an array of ``FETCH_CHUNK`` at a time."""
    for chunk in connection.chunks(query, FETCH_CHUNK):
        yield np.array(chunk, dtype=dtype).reshape(len(chunk), width)


def _fetch_columns(connection: DirectConnection, query: str, width: int,
                   dtype: Any = np.int64) -> np.ndarray:
    """Every row of ``query`` (numbers only) as one array, filled ``FETCH_CHUNK`` rows
    at a time: counted first, so that the rows (every provider's numbers) are never
    held twice, as chunks and as their concatenation. The transaction is
    repeatable-read, so the count is the number of rows."""
    [(count,)] = connection.rows(f'SELECT COUNT(*) FROM ({query}) counted')
    rows = np.empty((int(count), width), dtype=dtype)
    filled = 0
    for chunk in connection.chunks(query, FETCH_CHUNK):
        values = np.array(chunk, dtype=dtype).reshape(len(chunk), width)
        if filled + len(values) > len(rows):    # only if the count was not the rows'
            rows = np.concatenate([rows[:filled], values])
        else:
            rows[filled:filled + len(values)] = values
        filled += len(values)
    return rows[:filled]


class _Names:
    """Placement's ids of classes, traits and aggregates -> their names, for one read
    (read before any large result, which some drivers must finish before the
    connection takes another query)."""

    def __init__(self, connection: DirectConnection):
        self._classes = dict(connection.rows(CLASS_NAMES))
        self._traits = dict(connection.rows(TRAIT_NAMES))
        self._aggregates = dict(connection.rows(AGGREGATE_UUIDS))

    def classes(self, rows: np.ndarray) -> Keyed:
        return _keyed(rows, self._classes)

    def class_ids(self) -> dict[str, int]:
        return {name: code for code, name in self._classes.items()}

    def traits(self, rows: np.ndarray) -> Keyed:
        return _keyed(rows, self._traits)

    def aggregates(self, rows: np.ndarray) -> Keyed:
        return _keyed(rows, self._aggregates)


def _keyed(rows: np.ndarray, names: dict[int, str]) -> Keyed:
    """(provider id, name id, values...) rows as columns (ids as integers, without a
    copy when they are already)."""
    ids = rows[:, :2] if rows.dtype.kind == 'i' else rows[:, :2].astype(np.int64)
    return Keyed(ids[:, 0], ids[:, 1], names, rows[:, 2:])


def reader_from_conf(conf: cfg.ConfigOpts, **kwargs: Any) -> PlacementDatabaseReader:
    """The reader of ``[placement_database] connection`` as the view uses it
    (``kwargs``: the reader's other settings, for the benchmark's baseline)."""
    opts = conf[GROUP]
    return PlacementDatabaseReader(
        opts.connection, connect_timeout=opts.connect_timeout, query_timeout=opts.query_timeout,
        # Under load the view is read about every max_age seconds.
        refresh_reads=math.ceil(conf.scheduler.provider_view_full_read_interval
                                / max(conf.scheduler.provider_view_max_age, 0.1)), **kwargs)


def provider_view_from_conf(conf: cfg.ConfigOpts, *, siblings: WorkerBoard | None = None,
                            shared: SharedProviderReads | None = None) -> ProviderView | None:
    """The view ``[scheduler] provider_view`` asks for, or None when it is off;
    ``siblings``: the service's other workers' claims, when it has several;
    ``shared``: the reads of the service's reader, when it has one.

    ConfigurationError when it is on without ``[placement_database] connection``, or
    when the database driver is missing or the URL cannot work.
    """
    if not provider_view_on(conf):
        return None
    opts = conf[GROUP]
    if not opts.connection:
        raise ConfigurationError(f'[scheduler] provider_view needs {OPTION}')
    max_age = conf.scheduler.provider_view_max_age
    reader = reader_from_conf(conf)
    LOG.info('provider view on, read-only from %s, at most %ss old', reader.label,
             conf.scheduler.provider_view_max_age)
    if (siblings is not None and siblings.board.workers > 1
            and not near_best_tolerance(conf)):
        # Measured at 1,000 providers with 4 workers: 6% of claims refused in a
        # window and 16% while the cloud filled, against 1% and 4% at a tolerance of
        # 0.01 (doc/performance.md).
        LOG.warning('provider view on with several workers and [scheduler] '
                    'near_best_weight_tolerance = 0: every worker claims the best host of '
                    'the same view, and Placement refuses all but one; 0.01 lets each '
                    'worker take its own share of the hosts within 1%% of the best')
    if shared is None:
        return ProviderView(reader.read, max_age=max_age, siblings=siblings)
    taken = TakenReads(reader.read, shared, newer_than=max_age / 2)
    return ProviderView(taken, max_age=max_age, siblings=siblings, began=lambda: taken.began)
