"""One read of Placement's providers, as columns (pure: built from rows, no I/O).

A snapshot is built whole from Placement's rows (:meth:`ProviderSnapshot.from_rows`)
or from the previous one and the rows of the providers that changed since
(:meth:`ProviderSnapshot.with_changes`): a worker reads the whole cloud once,
then only what moved. Few Python objects per provider: a uuid, a row in each
column, and an index into the distinct trait sets and aggregate sets (a cloud
has few distinct ones), so that 50,000 providers stay a few megabytes and a
new snapshot gives the garbage collector little to walk.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.host_state import SHARING_TRAIT

#: Placement's rows, keyed by its internal provider id (see from_rows).
ProviderRow = tuple[int, str, int, 'int | None']
InventoryRow = tuple[int, str, int, int, int, int, int, float]
UsageRow = tuple[int, str, int]
NameRow = tuple[int, str]


@dataclass(frozen=True)
class Inventory:
    """One resource class over every provider (row = provider), as Placement stores it."""

    present: np.ndarray     # bool: the provider has an inventory of this class
    total: np.ndarray
    reserved: np.ndarray
    min_unit: np.ndarray
    max_unit: np.ndarray
    step_size: np.ndarray
    allocation_ratio: np.ndarray   # float64
    used: np.ndarray        # the sum of the allocations against it

    @classmethod
    def empty(cls, n: int) -> Inventory:
        ints = np.zeros((6, n), dtype=np.int64)
        return cls(np.zeros(n, dtype=bool), ints[0], ints[1], ints[2], ints[3], ints[4],
                   np.zeros(n, dtype=np.float64), ints[5])

    def copy(self) -> Inventory:
        return Inventory(*(getattr(self, f).copy() for f in _INVENTORY_FIELDS))

    @property
    def capacity(self) -> np.ndarray:
        """What Placement's provider summary says: ``int((total - reserved) * ratio)``."""
        return ((self.total - self.reserved) * self.allocation_ratio).astype(np.int64)

    @property
    def limit(self) -> np.ndarray:
        """What a claim may fill up to, unrounded (Placement's capacity check)."""
        return (self.total - self.reserved) * self.allocation_ratio


_INVENTORY_FIELDS = ('present', 'total', 'reserved', 'min_unit', 'max_unit', 'step_size',
                     'allocation_ratio', 'used')


class _Sets:
    """Per row, one of a few distinct sets of names (traits, or aggregates)."""

    def __init__(self, values: list[tuple[str, ...]], codes: np.ndarray):
        self.values = values          # distinct sorted tuples; values[0] == ()
        self.codes = codes            # per row, an index into values
        self._code_of = {v: i for i, v in enumerate(values)}
        self._columns: dict[str, np.ndarray] = {}

    @classmethod
    def from_rows(cls, n: int, rows: Iterable[tuple[int, str]]) -> _Sets:
        per_row: dict[int, list[str]] = {}
        for row, name in rows:
            per_row.setdefault(row, []).append(name)
        sets = cls([()], np.zeros(n, dtype=np.int32))
        sets._assign(per_row)
        return sets

    def _assign(self, per_row: dict[int, list[str]]) -> None:
        for row, names in per_row.items():
            value = tuple(sorted(set(names)))
            code = self._code_of.get(value)
            if code is None:
                code = self._code_of[value] = len(self.values)
                self.values.append(value)
            self.codes[row] = code

    def changed(self, rows: Iterable[int], new: Iterable[tuple[int, str]]) -> _Sets:
        """These sets with ``rows`` holding exactly the names ``new`` gives them."""
        sets = _Sets(list(self.values), self.codes.copy())
        per_row: dict[int, list[str]] = {row: [] for row in rows}
        for row, name in new:
            per_row.setdefault(row, []).append(name)
        sets._assign(per_row)
        return sets

    def of(self, row: int) -> tuple[str, ...]:
        return self.values[self.codes[row]]

    def column(self, name: str) -> np.ndarray:
        """Per row, whether its set holds ``name``: one test per distinct set."""
        column = self._columns.get(name)
        if column is None:
            has = np.fromiter((name in v for v in self.values), dtype=bool,
                              count=len(self.values))
            column = self._columns[name] = has[self.codes]
        return column

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, row: int) -> tuple[str, ...]:
        return self.of(row)


class ProviderSnapshot:
    """Every resource provider of one Placement, at one moment (row = provider, in
    the order of Placement's internal ids).

    Per resource class it also says where the class is: ``nested_classes`` are
    held by some provider below a root, ``shared_classes`` by some sharing
    provider (MISC_SHARES_VIA_AGGREGATE). A request for neither can only be
    served by one root provider holding all of it; see
    :func:`scheduler.provider_view.answer.why_not_exact`.
    """

    def __init__(self, ids: np.ndarray, uuids: list[str], *, parent_rows: np.ndarray,
                 generations: np.ndarray, traits: _Sets, aggregates: _Sets,
                 inventories: dict[str, Inventory], marks: object = None):
        self.ids = ids
        self.uuids = uuids
        self.index = {rp: i for i, rp in enumerate(uuids)}
        self.parent_rows = parent_rows
        self.generations = generations
        self.traits = traits
        self.aggregates = aggregates
        self.inventories = inventories
        #: What the reader noted of Placement's tables at this read, to tell at the
        #: next one what changed since (see scheduler.catalog.placement_db).
        self.marks = marks
        self._structure(parent_rows)
        self._classes()

    # ---------------------------------------------------------------- derived
    def _structure(self, parent_rows: np.ndarray) -> None:
        n = len(self.uuids)
        roots = np.arange(n, dtype=np.intp)
        # Each provider's root (row): follow parents, all rows at once, at most
        # as many steps as the deepest tree (a cycle, which Placement forbids,
        # stops after n steps).
        parent = parent_rows.astype(np.intp)
        has_parent = parent >= 0
        steps = 0
        while has_parent.any() and steps < n:
            roots[has_parent] = parent[has_parent]
            up = parent[roots]
            has_parent = up >= 0
            parent = np.where(has_parent, up, parent)
            steps += 1
        self.roots = roots
        # Each tree with more than its root, in row order (most trees are one provider).
        self._trees: dict[int, list[int]] = {}
        for row in np.flatnonzero(roots != np.arange(n)).tolist():
            self._trees.setdefault(int(roots[row]), [int(roots[row])]).append(row)
        for members in self._trees.values():
            members.sort()
        self.below_root = roots != np.arange(n)
        #: Whether any provider has a parent (most clouds' computes are single providers).
        self.nested = bool(self._trees)

    def _classes(self) -> None:
        self._limits: dict[str, np.ndarray] = {}
        self._capacities: dict[str, np.ndarray] = {}
        sharing = self.traits.column(SHARING_TRAIT)
        self.nested_classes = {rc for rc, inv in self.inventories.items()
                               if (inv.present & self.below_root).any()}
        self.shared_classes = {rc for rc, inv in self.inventories.items()
                               if (inv.present & sharing).any()}

    def limit(self, rc: str) -> np.ndarray:
        """:attr:`Inventory.limit` of ``rc``, computed once per snapshot."""
        limit = self._limits.get(rc)
        if limit is None:
            limit = self._limits[rc] = self.inventories[rc].limit
        return limit

    def capacity(self, rc: str) -> np.ndarray:
        """:attr:`Inventory.capacity` of ``rc``, computed once per snapshot."""
        capacity = self._capacities.get(rc)
        if capacity is None:
            capacity = self._capacities[rc] = self.inventories[rc].capacity
        return capacity

    def tree(self, root: int) -> list[int]:
        """The rows of ``root``'s tree, in row order."""
        return self._trees.get(root) or [root]

    def parent_uuid(self, row: int) -> str | None:
        parent = int(self.parent_rows[row])
        return self.uuids[parent] if parent >= 0 else None

    def with_trait(self, trait: str) -> np.ndarray:
        """Per provider, whether it has ``trait``."""
        return self.traits.column(trait)

    def in_aggregate(self, aggregate: str) -> np.ndarray:
        """Per provider, whether it is in ``aggregate``."""
        return self.aggregates.column(aggregate)

    def __len__(self) -> int:
        return len(self.uuids)

    # ---------------------------------------------------------------- building
    @classmethod
    def from_rows(cls, providers: Iterable[ProviderRow], inventories: Iterable[InventoryRow],
                  usages: Iterable[UsageRow], traits: Iterable[NameRow],
                  aggregates: Iterable[NameRow], *, marks: object = None) -> ProviderSnapshot:
        """From Placement's rows, keyed by its internal provider id:
        providers (id, uuid, generation, parent id), inventories (provider id, class,
        total, reserved, min_unit, max_unit, step_size, allocation_ratio), usages
        (provider id, class, sum of used), traits (provider id, name) and aggregates
        (provider id, aggregate uuid)."""
        rows = sorted(providers, key=lambda r: r[0])
        n = len(rows)
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        row_of = {r[0]: i for i, r in enumerate(rows)}
        parent_rows = np.array([row_of.get(r[3], -1) if r[3] is not None else -1
                                for r in rows], dtype=np.intp)
        columns: dict[str, Inventory] = {}
        _set_inventories(columns, n, _keyed(row_of, inventories))
        _set_usages(columns, n, _keyed(row_of, usages), rows_read=None)
        return cls(ids, [r[1] for r in rows], parent_rows=parent_rows,
                   generations=np.array([int(r[2]) for r in rows], dtype=np.int64),
                   traits=_Sets.from_rows(n, _keyed(row_of, traits)),
                   aggregates=_Sets.from_rows(n, _keyed(row_of, aggregates)),
                   inventories={rc: inv for rc, inv in columns.items() if inv.present.any()},
                   marks=marks)

    def with_changes(self, generations: np.ndarray, changed_ids: Sequence[int], *,
                     inventories: Iterable[InventoryRow], usages: Iterable[UsageRow],
                     usages_of_all: bool, traits: Iterable[NameRow],
                     aggregates: Iterable[NameRow], marks: object) -> ProviderSnapshot:
        """This snapshot with the providers ``changed_ids`` read again: their
        inventories, traits and aggregates are exactly the rows given, and so are
        their usages (every provider's, with ``usages_of_all``). ``generations``:
        every provider's, in row order. The providers themselves (ids, uuids,
        parents) must be the same; the reader reads all again otherwise."""
        rows = np.searchsorted(self.ids, np.asarray(changed_ids, dtype=np.int64)).tolist()
        if rows or usages_of_all:
            row_of = dict(zip(self.ids.tolist(), range(len(self)), strict=True))
            n = len(self)
            columns = {rc: inv.copy() for rc, inv in self.inventories.items()}
            for inv in columns.values():
                inv.present[rows] = False
            _set_inventories(columns, n, _keyed(row_of, inventories))
            _set_usages(columns, n, _keyed(row_of, usages),
                        rows_read=None if usages_of_all else rows)
        else:   # nothing moved: the columns are shared, never modified
            row_of, columns = {}, self.inventories
        snapshot = ProviderSnapshot.__new__(ProviderSnapshot)
        snapshot.ids, snapshot.uuids, snapshot.index = self.ids, self.uuids, self.index
        snapshot.parent_rows, snapshot.roots = self.parent_rows, self.roots
        snapshot._trees, snapshot.below_root = self._trees, self.below_root
        snapshot.nested = self.nested
        snapshot.generations = generations
        snapshot.traits = (self.traits.changed(rows, _keyed(row_of, traits)) if rows
                           else self.traits)
        snapshot.aggregates = (self.aggregates.changed(rows, _keyed(row_of, aggregates))
                               if rows else self.aggregates)
        snapshot.inventories = {rc: inv for rc, inv in columns.items() if inv.present.any()}
        snapshot.marks = marks
        snapshot._classes()
        return snapshot


def _keyed(row_of: dict[int, int], rows: Iterable[tuple]) -> list[tuple]:
    """Rows keyed by provider id, keyed by row instead (unknown providers dropped)."""
    keyed = []
    for rp_id, *rest in rows:
        row = row_of.get(rp_id)
        if row is not None:
            keyed.append((row, *rest))
    return keyed


def _set_inventories(columns: dict[str, Inventory], n: int,
                     rows: list[tuple]) -> None:
    by_class: dict[str, list[tuple]] = {}
    for row, rc, *values in rows:
        by_class.setdefault(rc, []).append((row, *values))
    for rc, entries in by_class.items():
        inv = columns.get(rc)
        if inv is None:
            inv = columns[rc] = Inventory.empty(n)
        at = np.array([e[0] for e in entries], dtype=np.intp)
        ints = np.array([e[1:6] for e in entries], dtype=np.int64).reshape(-1, 5)
        inv.present[at] = True
        inv.total[at], inv.reserved[at], inv.min_unit[at] = ints[:, 0], ints[:, 1], ints[:, 2]
        inv.max_unit[at], inv.step_size[at] = ints[:, 3], ints[:, 4]
        inv.allocation_ratio[at] = np.array([float(e[6]) for e in entries], dtype=np.float64)


def _set_usages(columns: dict[str, Inventory], n: int, rows: list[tuple],
                *, rows_read: list[int] | None) -> None:
    """Usages of ``rows_read`` (all rows when None) are exactly ``rows``."""
    for inv in columns.values():
        if rows_read is None:
            inv.used[:] = 0
        else:
            inv.used[rows_read] = 0
    by_class: dict[str, tuple[list[int], list[int]]] = {}
    for row, rc, amount in rows:
        entry = by_class.get(rc)
        if entry is None:
            entry = by_class[rc] = ([], [])
        entry[0].append(row)
        entry[1].append(int(amount or 0))
    for rc, (at, amounts) in by_class.items():
        column = columns.get(rc)
        if column is None:
            # Allocations against a class the provider has no inventory of (it was
            # removed under them): Placement counts no capacity there either.
            column = columns[rc] = Inventory.empty(n)
        column.used[at] = amounts
