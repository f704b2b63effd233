"""What one read of changes found, as data that any snapshot of the same providers
can take in (pure: arrays in, a snapshot out).

A read of changes reads some providers again, whole: their generations,
inventories, usages, traits and aggregates as Placement's tables hold them at
that read (:meth:`scheduler.catalog.placement_db.PlacementDatabaseReader.read`).
So the service's provider reader can read once for all its workers
(scheduler/catalog/provider_reader.py), and each worker take in the reads it has
not taken yet, merged (:meth:`Changes.then`), into a snapshot of its own
(:meth:`Changes.apply`), whatever read that snapshot came from.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.provider_view.snapshot import Inventory, Keyed, ProviderSnapshot


@dataclass(frozen=True)
class Changes:
    """The providers one read took again (Placement's ids, ascending), their
    generations (aligned), every row of theirs in the four tables, and the reader's
    marks after that read."""

    ids: np.ndarray
    generations: np.ndarray
    inventories: Keyed
    usages: Keyed
    traits: Keyed
    aggregates: Keyed
    marks: object

    def then(self, later: Changes) -> Changes:
        """These changes, then ``later``'s: a provider both read is as ``later`` read it."""
        kept = ~np.isin(self.ids, later.ids)
        ids = np.concatenate([self.ids[kept], later.ids])
        generations = np.concatenate([self.generations[kept], later.generations])
        order = np.argsort(ids, kind='stable')
        return Changes(ids[order], generations[order],
                       inventories=_joined(self.inventories, later.inventories, later.ids),
                       usages=_joined(self.usages, later.usages, later.ids),
                       traits=_joined(self.traits, later.traits, later.ids),
                       aggregates=_joined(self.aggregates, later.aggregates, later.ids),
                       marks=later.marks)

    def that_moved(self, before: ProviderSnapshot, after: ProviderSnapshot) -> Changes:
        """These changes, read from ``before`` into ``after``, with only the providers
        whose generation moved or whose rows are not what ``before`` held.

        A read takes again, besides the providers written since, a slice of all of
        them whatever their generation says (what moves none: a deletion, an
        aggregate set below microversion 1.19). At 50,000 nested hosts that slice
        is hundreds of unchanged providers a read, which every worker taking the
        read would write into its columns again; the reader, which holds both
        snapshots, tells them apart once."""
        rows = after.rows_of(self.ids)
        if rows is None or len(after) != len(before):
            return self
        moved = before.generations[rows] != after.generations[rows]
        for rc in set(before.inventories) | set(after.inventories):
            moved |= _differs(before.inventories.get(rc), after.inventories.get(rc), rows)
        for sets in ('traits', 'aggregates'):
            old, new = getattr(before, sets), getattr(after, sets)
            if old is not new:
                moved |= np.fromiter((old.of(row) != new.of(row) for row in rows.tolist()),
                                     dtype=bool, count=len(rows))
        if moved.all():
            return self
        ids = self.ids[moved]
        return Changes(ids, self.generations[moved], inventories=_of(self.inventories, ids),
                       usages=_of(self.usages, ids), traits=_of(self.traits, ids),
                       aggregates=_of(self.aggregates, ids), marks=self.marks)

    def apply(self, snapshot: ProviderSnapshot) -> ProviderSnapshot | None:
        """``snapshot`` with these providers as this read found them; None when one of
        them is not among its providers (a whole read will do).

        A provider the snapshot holds at a higher generation keeps what it holds:
        the snapshot read it after this read did (a worker's own read, begun while
        the service's reader was reading). At the same generation this read's
        usage is taken, which may be older by allocations deleted since (a deletion
        moves no generation): the host looks fuller until a later read, never
        emptier."""
        rows = snapshot.rows_of(self.ids)
        if rows is None:
            return None
        current = ~(snapshot.generations[rows] > self.generations)
        ids = self.ids[current]
        generations = snapshot.generations.copy()
        generations[rows[current]] = self.generations[current]
        return snapshot.with_changes(
            generations, ids.tolist(),
            inventories=_of(self.inventories, ids), usages=_of(self.usages, ids),
            traits=_of(self.traits, ids), aggregates=_of(self.aggregates, ids),
            marks=self.marks)


def _differs(before: Inventory | None, after: Inventory | None, rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows``, whether its inventory of one class (with its usage) is
    not the same in ``before`` and ``after`` (either None: no provider has one)."""
    if before is None and after is None:
        return np.zeros(len(rows), dtype=bool)
    if before is None or after is None:
        # An inventory is falsy when empty (its length): test for None.
        held = before if before is not None else after
        assert held is not None
        return held.locate(rows)[1]
    at_before, in_before = before.locate(rows)
    at_after, in_after = after.locate(rows)
    differs = in_before != in_after
    both = in_before & in_after
    for old, new in zip((*before.static_values()[1:], before.used),
                        (*after.static_values()[1:], after.used), strict=True):
        differs[both] |= old[at_before[both]] != new[at_after[both]]
    return differs


def _joined(ours: Keyed, theirs: Keyed, replaced: np.ndarray) -> Keyed:
    """``ours``' rows of the providers not in ``replaced``, then all of ``theirs``."""
    kept = ~np.isin(ours.providers, replaced)
    return Keyed(np.concatenate([ours.providers[kept], theirs.providers]),
                 np.concatenate([ours.codes[kept], theirs.codes]),
                 {**ours.names, **theirs.names},
                 np.concatenate([ours.values[kept], theirs.values.astype(ours.values.dtype)]))


def _of(keyed: Keyed, ids: np.ndarray) -> Keyed:
    """``keyed``'s rows of the providers ``ids``."""
    kept = np.isin(keyed.providers, ids)
    if kept.all():
        return keyed
    return Keyed(keyed.providers[kept], keyed.codes[kept], keyed.names, keyed.values[kept])
