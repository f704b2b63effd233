"""One read of Placement's providers, as columns (pure: built from rows, no I/O).

A snapshot is built whole from Placement's rows (:meth:`ProviderSnapshot.from_rows`)
or from the previous one and the rows of the providers that changed since
(:meth:`ProviderSnapshot.with_changes`): a worker reads the whole cloud once,
then only what moved. Few Python objects per provider: a uuid, a row in each
column, and an index into the distinct trait sets and aggregate sets (a cloud
has few distinct ones). A resource class is kept only for the providers that
have an inventory of it (most classes besides VCPU, MEMORY_MB and DISK_GB are
held by a few children), in Placement's own 32-bit integers: 50,000 providers
take about 15 MB, and a new snapshot gives the garbage collector little to walk.
"""
from __future__ import annotations

import bisect
import functools
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from scheduler.host_state import SHARING_TRAIT

#: Placement's rows, keyed by its internal provider id (see from_rows).
ProviderRow = tuple[int, str, int, 'int | None']
InventoryRow = tuple[int, str, int, int, int, int, int, float]
UsageRow = tuple[int, str, int]
NameRow = tuple[int, str]

#: Placement's inventory columns are 32-bit integers (``sa.Integer``) on every backend.
_INT = np.int32


@dataclass(frozen=True)
class Inventory:
    """One resource class: the providers (snapshot rows, ascending) that have an
    inventory of it and, aligned with them, the inventory as Placement stores it
    and the sum of the allocations against it."""

    rows: np.ndarray
    total: np.ndarray
    reserved: np.ndarray
    min_unit: np.ndarray
    max_unit: np.ndarray
    step_size: np.ndarray
    allocation_ratio: np.ndarray   # float64
    used: np.ndarray               # int64: a sum of allocations

    @classmethod
    def of_rows(cls, rows: np.ndarray, values: np.ndarray) -> Inventory:
        """From provider rows and their (total, reserved, min_unit, max_unit,
        step_size, allocation_ratio), in any order; nothing used yet."""
        order = np.argsort(rows, kind='stable')
        values = values[order]
        ints = values[:, :5].astype(_INT)
        # Rows fit in 32 bits as Placement's provider ids do: 4 bytes an inventory
        # less than an index (0.8 MB at 50,000 hosts with nested trees).
        return cls(rows[order].astype(np.int32), ints[:, 0].copy(), ints[:, 1].copy(),
                   ints[:, 2].copy(), ints[:, 3].copy(), ints[:, 4].copy(),
                   values[:, 5].astype(np.float64), np.zeros(len(rows), dtype=np.int64))

    def __len__(self) -> int:
        return len(self.rows)

    def capacity(self, positions: Any = slice(None)) -> np.ndarray:
        """What Placement's provider summary says at ``positions`` (all by default):
        ``int((total - reserved) * ratio)``. Made when asked, not kept beside
        :attr:`limit`: the host table sums it per tree once per inventory change, and
        a summary reads a few positions (kept, it was 1.7 MB of every worker at
        50,000 nested hosts)."""
        return self.limit[positions].astype(np.int64)

    @functools.cached_property
    def limit(self) -> np.ndarray:
        """What a claim may fill up to, unrounded (Placement's capacity check)."""
        return (self.total.astype(np.int64) - self.reserved) * self.allocation_ratio

    @functools.cached_property
    def unit_bounds(self) -> tuple[int, int, bool]:
        """The lowest max_unit, the highest min_unit, and whether a step size
        above 1 is set: an amount within both bounds on no step passes every
        provider's unit checks."""
        if not len(self.rows):
            return 0, 0, False
        return (int(self.max_unit.min()), int(self.min_unit.max()),
                bool((self.step_size > 1).any()))

    def locate(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each of ``rows``: its position here, and whether it has an inventory of
        this class (the position means nothing where it has not)."""
        at = np.searchsorted(self.rows, rows)
        at = np.minimum(at, max(len(self.rows) - 1, 0))
        present = (self.rows[at] == rows) if len(self.rows) else np.zeros(len(rows), bool)
        return at, present

    def position(self, row: int) -> int | None:
        """Where provider ``row`` is here; None when it has no inventory of this class."""
        # A binary search over the rows' own buffer: numpy's searchsorted for one
        # row took 5 µs, most of a provider summary.
        rows = self._rows_view
        at = bisect.bisect_left(rows, row)
        return at if at < len(rows) and rows[at] == row else None

    @functools.cached_property
    def _rows_view(self) -> memoryview:
        return np.ascontiguousarray(self.rows).data

    def with_used(self, used: np.ndarray) -> Inventory:
        """This inventory with other usage; what derives from the inventory alone
        (limit, unit bounds) is shared, not computed again."""
        inventory = replace(self, used=used)
        for derived in ('limit', 'unit_bounds'):
            if derived in self.__dict__:
                inventory.__dict__[derived] = self.__dict__[derived]
        return inventory

    def static_values(self) -> tuple[np.ndarray, ...]:
        """Everything but ``used``: what an inventory write changes."""
        return (self.rows, self.total, self.reserved, self.min_unit, self.max_unit,
                self.step_size, self.allocation_ratio)


@dataclass(frozen=True)
class Keyed:
    """Rows of one of Placement's tables as columns: each row's provider (Placement's
    internal id), a code naming its class, trait or aggregate (``names[code]``),
    and its other values (one row of ``values`` each)."""

    providers: np.ndarray
    codes: np.ndarray
    names: Mapping[int, str]
    values: np.ndarray

    @classmethod
    def from_tuples(cls, rows: Iterable[tuple], width: int = 0,
                    dtype: Any = np.int64) -> Keyed:
        """From ``(provider id, name, *values)`` tuples (names given as text)."""
        rows = list(rows)
        code_of: dict[str, int] = {}
        for row in rows:
            code_of.setdefault(row[1], len(code_of))
        return cls(np.array([r[0] for r in rows], dtype=np.int64),
                   np.array([code_of[r[1]] for r in rows], dtype=np.int64),
                   {code: name for name, code in code_of.items()},
                   np.array([r[2:] for r in rows], dtype=dtype).reshape(len(rows), width))

    def __len__(self) -> int:
        return len(self.providers)


class _Index(Mapping[str, int]):
    """Provider uuid -> row, found by the uuids' hashes (sorted, with their rows)
    rather than held in a dict: at 50,000 hosts with nested trees (103,000
    providers) the dict and its rows as Python ints took 6.5 MB of every
    worker, these two columns 1.2 MB. A lookup is a binary search, and the
    view looks up a few providers a request (its claims, the summaries of the
    hosts it weighs)."""

    def __init__(self, uuids: Sequence[str]):
        self._uuids = uuids
        hashes = np.fromiter(map(hash, uuids), dtype=np.int64, count=len(uuids))
        order = np.argsort(hashes, kind='stable')
        self._hashes = hashes[order]
        # Rows fit in 32 bits: Placement's provider ids do.
        self._rows = order.astype(np.int32)

    def __getitem__(self, rp: str) -> int:
        if not isinstance(rp, str):
            raise KeyError(rp)
        key = hash(rp)
        at = int(np.searchsorted(self._hashes, key))
        # Two uuids of one hash (rare) lie side by side: each is compared.
        while at < len(self._hashes) and self._hashes[at] == key:
            row = int(self._rows[at])
            if self._uuids[row] == rp:
                return row
            at += 1
        raise KeyError(rp)

    def __iter__(self) -> Iterator[str]:
        return iter(self._uuids)

    def __len__(self) -> int:
        return len(self._uuids)


class _Trees(Mapping[int, list[int]]):
    """Each tree of more than its root: root row -> the rows of the tree, in row
    order, as a list made when asked. Held as columns (the rows below a root,
    grouped by root), not a list of Python ints per tree: at 50,000 hosts with
    nested trees, 17,000 trees of 53,000 children took 4.5 MB as lists, 0.7 MB
    this way."""

    def __init__(self, roots: np.ndarray, below_root: np.ndarray):
        below = np.flatnonzero(below_root)
        # A stable sort keeps each tree's rows in row order.
        order = np.argsort(roots[below], kind='stable')
        # Rows fit in 32 bits: Placement's provider ids do.
        self._members = below[order].astype(np.int32)
        self._roots, starts = np.unique(roots[below][order], return_index=True)
        self._starts = starts.astype(np.int32)
        self._ends = np.append(starts[1:], len(below)).astype(np.int32)

    def __getitem__(self, root: int) -> list[int]:
        at = int(np.searchsorted(self._roots, root))
        if at >= len(self._roots) or self._roots[at] != root:
            raise KeyError(root)
        members = self._members[self._starts[at]:self._ends[at]]
        # The root's row among them: a root is not always its tree's lowest id.
        before = int(np.searchsorted(members, root))
        return [*members[:before].tolist(), int(root), *members[before:].tolist()]

    def __iter__(self) -> Iterator[int]:
        return iter(self._roots.tolist())

    def __len__(self) -> int:
        return len(self._roots)


class _Sets:
    """Per row, one of a few distinct sets of names (traits, or aggregates)."""

    def __init__(self, values: list[tuple[str, ...]], codes: np.ndarray):
        self.values = values          # distinct sorted tuples; values[0] == ()
        self.codes = codes            # per row, an index into values
        self._code_of = {v: i for i, v in enumerate(values)}
        self._columns: dict[str, np.ndarray] = {}

    @classmethod
    def from_pieces(cls, ids: np.ndarray, pieces: Iterable[Keyed]) -> _Sets:
        """The sets of the providers ``ids`` (ascending), from rows of (provider id,
        name) given a piece at a time."""
        sets = cls([()], np.zeros(len(ids), dtype=np.int32))
        sets._assign(np.arange(len(ids)), (_known(ids, keyed) for keyed in pieces))
        return sets

    def changed(self, rows: Sequence[int], keyed_rows: np.ndarray, keyed: Keyed) -> _Sets:
        """These sets with ``rows`` holding exactly the names ``keyed`` gives them:
        themselves when that is what they hold. Every read of changes reads some
        providers again (claims, the refresh slice) whose traits and aggregates
        seldom move; the next snapshot then shares these sets and the columns
        already asked of them, and nothing is copied to find that out: copying the
        sets (1,434 distinct ones over 103,177 providers at 50,000 nested hosts)
        and walking each distinct set's bits with numpy were most of what a
        worker's reads held the interpreter for under load (doc/performance.md)."""
        targets = np.unique(np.asarray(rows, dtype=np.intp))
        codes, added = self._codes_for(targets, [(keyed_rows, keyed)])
        if np.array_equal(codes, self.codes[targets]):
            return self
        sets = _Sets(self.values + added, self.codes.copy())
        sets.codes[targets] = codes
        return sets

    def _assign(self, targets: np.ndarray, pieces: Iterable[tuple[np.ndarray, Keyed]]
                ) -> None:
        """The rows ``targets`` (ascending) hold exactly the names the pieces give
        them: each piece, rows aligned with its rows of names."""
        codes, added = self._codes_for(targets, pieces)
        for value in added:
            self._code_of[value] = len(self.values)
            self.values.append(value)
        self.codes[targets] = codes

    def _codes_for(self, targets: np.ndarray, pieces: Iterable[tuple[np.ndarray, Keyed]]
                   ) -> tuple[np.ndarray, list[tuple[str, ...]]]:
        """The code of each of the rows ``targets`` (ascending) when they hold exactly
        the names the pieces give them, and the sets these sets do not hold yet
        (coded from ``len(values)`` on, in that order).

        Each row's set is found as a row of bits (one bit per name), and the
        distinct rows of bits become tuples of names: no Python object per
        provider or per name of a provider (300,000 trait rows at 50,000 providers,
        whose Python copies fragmented a worker's heap at every whole read)."""
        found = np.zeros(len(targets), dtype=self.codes.dtype)
        added: list[tuple[str, ...]] = []
        if not len(targets):
            return found, added
        bit_of: dict[str, int] = {}
        bits = np.zeros((len(targets), 1), dtype=np.uint64)
        for rows, keyed in pieces:
            if not len(rows):
                continue
            codes, code_at = np.unique(keyed.codes, return_inverse=True)
            for code in codes.tolist():
                bit_of.setdefault(keyed.names[code], len(bit_of))
            if len(bit_of) > 64 * bits.shape[1]:
                bits = np.concatenate([bits, np.zeros(
                    (len(targets), (len(bit_of) + 63) // 64 - bits.shape[1]), dtype=np.uint64)],
                    axis=1)
            bit = np.array([bit_of[keyed.names[code]] for code in codes.tolist()],
                           dtype=np.uint64)[code_at.ravel()]
            np.bitwise_or.at(bits, (np.searchsorted(targets, rows), (bit // 64).astype(np.intp)),
                             np.left_shift(np.uint64(1), bit % 64))
        names = list(bit_of)
        distinct, which = np.unique(bits, axis=0, return_inverse=True)
        code_of_distinct = np.empty(len(distinct), dtype=self.codes.dtype)
        for i, words in enumerate(distinct.tolist()):
            # A Python int per word, its set bits walked: a few names a set, where
            # numpy's calls per distinct set cost more than the set.
            members = []
            for w, word in enumerate(words):
                while word:
                    low = word & -word
                    members.append(names[64 * w + low.bit_length() - 1])
                    word ^= low
            value = tuple(sorted(members))
            code = self._code_of.get(value)
            if code is None:    # (distinct rows of bits are distinct sets)
                code = len(self.values) + len(added)
                added.append(value)
            code_of_distinct[i] = code
        found[:] = code_of_distinct[which.ravel()]
        return found, added

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

    nested_classes: set[str]
    shared_classes: set[str]
    #: Whether any provider shares its inventories (MISC_SHARES_VIA_AGGREGATE).
    sharing: bool
    #: The sharing providers (rows, ascending).
    sharing_rows: np.ndarray
    #: Whether a sharing provider has a parent: its tree would then be both an
    #: anchor and a sharer's, which the view does not answer.
    sharing_below_root: bool
    # Made once per snapshot on first use (shared with the next snapshot where what
    # they derive from is: _classes).
    _trait_flags: dict[str, array[int]]
    _classes_held: tuple[list[str], np.ndarray] | None
    _anchors: dict[int, np.ndarray]

    def __init__(self, ids: np.ndarray, uuids: list[str], *, parent_rows: np.ndarray,
                 generations: np.ndarray, traits: _Sets, aggregates: _Sets,
                 inventories: dict[str, Inventory], marks: object = None,
                 providers_of: ProviderSnapshot | None = None):
        """``providers_of``: a snapshot of exactly these providers (ids, uuids,
        parents), whose provider list, index and trees this one shares."""
        self.ids = ids
        self.generations = generations
        self.traits = traits
        self.aggregates = aggregates
        self.inventories = inventories
        #: What the reader noted of Placement's tables at this read, to tell at the
        #: next one what changed since (see scheduler.catalog.placement_db).
        self.marks = marks
        if providers_of is not None:
            self._share_providers(providers_of)
        else:
            self.uuids = uuids
            self.index = _Index(uuids)
            self.parent_rows = parent_rows
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
        self.below_root = roots != np.arange(n)
        self._trees = _Trees(roots, self.below_root)
        # The parents as the search reads them, made on first use and shared by the
        # snapshots of these providers (_share_providers).
        self._parents_held: list[array[int]] = []
        #: Whether any provider has a parent (most clouds' computes are single providers).
        self.nested = bool(self._trees)

    def _classes(self, previous: ProviderSnapshot | None = None) -> None:
        """What derives from the classes' rows, the traits and the aggregates; taken
        from ``previous`` (a snapshot of the same providers) where what it derives
        from is the same objects. A read of changes after claims moves only usage;
        working these out again, and the columns the next request asks of them,
        cost a worker a millisecond or two a read at 50,000 providers with nested
        trees (doc/performance.md)."""
        same_rows = (previous is not None
                     and list(previous.inventories) == list(self.inventories)
                     and all(inv.rows is previous.inventories[rc].rows
                             for rc, inv in self.inventories.items()))
        same_traits = previous is not None and previous.traits is self.traits
        if previous is not None and same_traits:
            self.sharing, self.sharing_rows = previous.sharing, previous.sharing_rows
            self.sharing_below_root = previous.sharing_below_root
            self._trait_flags = previous._trait_flags
        else:
            sharing = self.traits.column(SHARING_TRAIT)
            self.sharing = bool(sharing.any())
            self.sharing_rows = np.flatnonzero(sharing)
            self.sharing_below_root = bool(self.below_root[self.sharing_rows].any())
            self._trait_flags = {}
        if previous is not None and same_rows:
            self.nested_classes = previous.nested_classes
            self._classes_held = previous._classes_held
        else:
            self.nested_classes = {rc for rc, inv in self.inventories.items()
                                   if self.below_root[inv.rows].any()}
            self._classes_held = None
        if previous is not None and same_rows and same_traits:
            self.shared_classes = previous.shared_classes
        else:
            sharing = self.traits.column(SHARING_TRAIT)     # kept by the traits
            self.shared_classes = {rc for rc, inv in self.inventories.items()
                                   if sharing[inv.rows].any()}
        self._anchors = (
            previous._anchors if previous is not None
            and previous.aggregates is self.aggregates else {})

    def classes_of(self, row: int) -> list[str]:
        """The classes provider ``row`` has an inventory of, in the order of
        :attr:`inventories`. A provider has a few of a cloud's classes: looking each
        up in every class's rows was most of a provider summary (39 µs each at
        50,000 hosts with nested trees, hundreds of them a request)."""
        if self._classes_held is None:
            names = list(self.inventories)
            if len(names) > 64:
                return names
            held = np.zeros(len(self), dtype=np.uint64)
            for bit, rc in enumerate(names):
                held[self.inventories[rc].rows] |= np.uint64(1 << bit)
            self._classes_held = (names, held)
        names, held = self._classes_held
        bits = int(held[row])
        return [rc for bit, rc in enumerate(names) if bits >> bit & 1]

    def inventory_of(self, row: int) -> dict[str, tuple[int, int, int, int, int, float, int]]:
        """Provider ``row``'s inventories: per class (total, reserved, min_unit,
        max_unit, step_size, allocation_ratio, used)."""
        found = {}
        for rc in self.classes_of(row):
            inv = self.inventories[rc]
            at = inv.position(row)
            if at is not None:
                found[rc] = (int(inv.total[at]), int(inv.reserved[at]), int(inv.min_unit[at]),
                             int(inv.max_unit[at]), int(inv.step_size[at]),
                             float(inv.allocation_ratio[at]), int(inv.used[at]))
        return found

    def anchors(self, row: int) -> np.ndarray:
        """The roots (ascending) sharing provider ``row`` serves: of every provider in
        one of its aggregates, its own root among them, as
        ``research_context.anchors_for_sharing_providers`` finds them."""
        found = self._anchors.get(row)
        if found is None:
            aggregates = self.aggregates.of(row)
            members = np.zeros(len(self), dtype=bool)
            for aggregate in aggregates:
                members |= self.in_aggregate(aggregate)
            found = self._anchors[row] = np.unique(self.roots[members])
        return found

    def tree(self, root: int) -> list[int]:
        """The rows of ``root``'s tree, in row order."""
        return self._trees.get(root) or [root]

    @property
    def trees(self) -> Mapping[int, list[int]]:
        """Each tree of more than its root: root row -> the rows of the tree."""
        return self._trees

    def parent_uuid(self, row: int) -> str | None:
        parent = int(self.parent_rows[row])
        return self.uuids[parent] if parent >= 0 else None

    def parents_for_search(self) -> array[int]:
        """Per row, its parent's row (-1 for a root), as :mod:`.search` reads it: made
        once for these providers, not by every request (0.4 MB each at 50,000 hosts
        with nested trees)."""
        if not self._parents_held:
            self._parents_held.append(int_array(self.parent_rows, 'i'))
        return self._parents_held[0]

    def trait_flags(self, trait: str) -> array[int]:
        """Per row, whether it has ``trait`` (0 or 1), as :mod:`.search` reads it; made
        once per snapshot and trait."""
        flags = self._trait_flags.get(trait)
        if flags is None:
            flags = self._trait_flags[trait] = int_array(self.with_trait(trait), 'b')
        return flags

    def with_trait(self, trait: str) -> np.ndarray:
        """Per provider, whether it has ``trait``."""
        return self.traits.column(trait)

    def in_aggregate(self, aggregate: str) -> np.ndarray:
        """Per provider, whether it is in ``aggregate``."""
        return self.aggregates.column(aggregate)

    def __len__(self) -> int:
        return len(self.uuids)

    def rows_of(self, ids: np.ndarray) -> np.ndarray | None:
        """The rows of the providers ``ids`` (Placement's ids); None when one is not
        among these providers."""
        at, found = _rows_of(self.ids, ids)
        return at if found.all() else None

    def sharing_providers_of(self, previous: ProviderSnapshot) -> ProviderSnapshot:
        """This snapshot, holding ``previous``'s provider list, index and trees when it
        has the same providers (a whole read of a cloud whose providers did not
        change): what is kept per snapshot and per provider (the view's host table
        above all) is then updated, not built again. Itself otherwise."""
        if _same_providers(self.ids, self.uuids, self.parent_rows, previous):
            self._share_providers(previous)
        return self

    def _share_providers(self, other: ProviderSnapshot) -> None:
        self.uuids, self.index = other.uuids, other.index
        self.parent_rows, self.roots = other.parent_rows, other.roots
        self._trees, self.below_root = other._trees, other.below_root
        self._parents_held = other._parents_held
        self.nested = other.nested

    # ---------------------------------------------------------------- building
    @classmethod
    def from_rows(cls, providers: Iterable[ProviderRow], inventories: Iterable[InventoryRow],
                  usages: Iterable[UsageRow], traits: Iterable[NameRow],
                  aggregates: Iterable[NameRow], *, marks: object = None) -> ProviderSnapshot:
        """From Placement's rows as tuples, keyed by its internal provider id:
        providers (id, uuid, generation, parent id), inventories (provider id, class,
        total, reserved, min_unit, max_unit, step_size, allocation_ratio), usages
        (provider id, class, sum of used), traits (provider id, name) and aggregates
        (provider id, aggregate uuid)."""
        rows = list(providers)
        return cls.from_columns(
            np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows],
            np.array([r[2] for r in rows], dtype=np.int64),
            np.array([-1 if r[3] is None else r[3] for r in rows], dtype=np.int64),
            inventories=Keyed.from_tuples(inventories, 6, np.float64),
            usages=Keyed.from_tuples(usages, 1), traits=Keyed.from_tuples(traits),
            aggregates=Keyed.from_tuples(aggregates), marks=marks)

    @classmethod
    def from_columns(cls, ids: np.ndarray, uuids: list[str], generations: np.ndarray,
                     parent_ids: np.ndarray, *, inventories: Keyed | Iterable[Keyed],
                     usages: Keyed | Iterable[Keyed], traits: Keyed | Iterable[Keyed],
                     aggregates: Keyed | Iterable[Keyed], marks: object = None,
                     previous: ProviderSnapshot | None = None) -> ProviderSnapshot:
        """From Placement's rows as columns: per provider its id, uuid, generation and
        parent's id (-1 for none); inventories' values (total, reserved, min_unit,
        max_unit, step_size, allocation_ratio), usages' (sum of used), traits and
        aggregates (names only), each whole or a piece at a time (in that order:
        a reader's pieces may come straight from its cursor, never all at once).
        With ``previous`` of the same providers, the new snapshot shares its
        provider list, index and trees."""
        if len(ids) > 1 and bool((ids[1:] < ids[:-1]).any()):
            # The reader sorts them already: the copies (and a Python int per provider
            # for the uuids' order) would only add to a whole read's peak.
            order = np.argsort(ids, kind='stable')
            ids, generations, parent_ids = ids[order], generations[order], parent_ids[order]
            uuids = [uuids[i] for i in order.tolist()]
        parent_rows, has_parent = _rows_of(ids, parent_ids)
        parent_rows[~has_parent] = -1
        parent_rows = parent_rows.astype(np.intp)
        columns = _with_usages(_inventories_of_pieces(ids, _pieces(inventories)), ids,
                               _pieces(usages))
        return cls(ids, uuids, parent_rows=parent_rows,
                   generations=generations,
                   traits=_Sets.from_pieces(ids, _pieces(traits)),
                   aggregates=_Sets.from_pieces(ids, _pieces(aggregates)),
                   inventories=columns, marks=marks,
                   providers_of=(previous if previous is not None and _same_providers(
                       ids, uuids, parent_rows, previous) else None))

    def with_changes(self, generations: np.ndarray, changed_ids: Sequence[int], *,
                     inventories: Keyed | Iterable[InventoryRow],
                     usages: Keyed | Iterable[UsageRow],
                     traits: Keyed | Iterable[NameRow], aggregates: Keyed | Iterable[NameRow],
                     marks: object) -> ProviderSnapshot:
        """This snapshot with the providers ``changed_ids`` read again: their
        inventories, traits and aggregates are exactly the rows given, and so are
        their usages. ``generations``: every provider's, in row order. The
        providers themselves (ids, uuids, parents) must be the same; the reader
        reads all again otherwise."""
        inventories = _as_keyed(inventories, 6, np.float64)
        usages = _as_keyed(usages, 1)
        traits, aggregates = _as_keyed(traits), _as_keyed(aggregates)
        changed = np.unique(np.asarray(changed_ids, dtype=np.int64))
        rows = np.searchsorted(self.ids, changed)
        # A class is shared with this snapshot (its arrays never modified) unless a
        # value in it moved: a claim moves a few providers' usage of three classes,
        # and copying every class of 50,000 providers each second would cost more.
        columns = dict(self.inventories)
        if len(rows):
            patch = _inventories(changed, inventories, rows_of=rows)
            for rc in set(columns) | set(patch):
                columns[rc] = _patched(columns.get(rc), patch.get(rc), rows)
        if len(rows):
            columns = _with_usages(columns, changed, usages, rows_of=rows)
        columns = {rc: inv for rc, inv in columns.items() if len(inv)}
        snapshot = ProviderSnapshot.__new__(ProviderSnapshot)
        snapshot.ids = self.ids
        snapshot._share_providers(self)
        snapshot.generations = generations
        snapshot.traits = (self.traits.changed(rows.tolist(), *_known(self.ids, traits))
                           if len(rows) else self.traits)
        snapshot.aggregates = (self.aggregates.changed(rows.tolist(),
                                                       *_known(self.ids, aggregates))
                               if len(rows) else self.aggregates)
        snapshot.inventories = columns
        snapshot.marks = marks
        snapshot._classes(previous=self)
        return snapshot


def _same_providers(ids: np.ndarray, uuids: list[str], parent_rows: np.ndarray,
                    snapshot: ProviderSnapshot) -> bool:
    return (len(ids) == len(snapshot) and np.array_equal(ids, snapshot.ids)
            and np.array_equal(parent_rows, snapshot.parent_rows)
            and (uuids is snapshot.uuids or uuids == snapshot.uuids))


def _as_keyed(rows: Keyed | Iterable[tuple], width: int = 0, dtype: Any = np.int64) -> Keyed:
    return rows if isinstance(rows, Keyed) else Keyed.from_tuples(rows, width, dtype)


def _rows_of(ids: np.ndarray, providers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The row of each provider id in ``ids`` (sorted), and whether it is there."""
    at = np.searchsorted(ids, providers)
    at = np.minimum(at, max(len(ids) - 1, 0))
    found = (ids[at] == providers) if len(ids) else np.zeros(len(providers), dtype=bool)
    return at, found


def _known(ids: np.ndarray, keyed: Keyed) -> tuple[np.ndarray, Keyed]:
    """``keyed``'s rows of the providers in ``ids`` (others dropped), and their rows."""
    at, found = _rows_of(ids, keyed.providers)
    if found.all():
        return at, keyed
    return at[found], Keyed(keyed.providers[found], keyed.codes[found], keyed.names,
                            keyed.values[found])


def _by_class(keyed: Keyed, rows: np.ndarray) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Per resource class: the rows (``rows``, aligned with ``keyed``) and values of
    ``keyed``'s rows of it."""
    for code in np.unique(keyed.codes).tolist():
        of_class = keyed.codes == code
        yield keyed.names[code], rows[of_class], keyed.values[of_class]


def _inventories(ids: np.ndarray, inventories: Keyed, *,
                 rows_of: np.ndarray | None = None) -> dict[str, Inventory]:
    """Per class, the inventories of the providers ``ids`` (ascending), at their rows
    (``rows_of``, aligned with ``ids``; positions in ``ids`` when None)."""
    at, keyed = _known(ids, inventories)
    rows = at if rows_of is None else rows_of[at]
    return {rc: Inventory.of_rows(of_class, values)
            for rc, of_class, values in _by_class(keyed, rows)}


def _with_usages(columns: Mapping[str, Inventory], ids: np.ndarray,
                 usages: Keyed | Iterable[Keyed], *,
                 rows_of: np.ndarray | None = None) -> dict[str, Inventory]:
    """``columns`` where the usage of the providers ``ids`` (ascending; at rows
    ``rows_of``, or at their positions in ``ids`` when None, which must then be every
    provider) is exactly ``usages`` (whole, or a piece at a time). A class whose
    usage did not move keeps its arrays. Allocations against a class a provider
    has no inventory of (removed under them) count nowhere: Placement counts no
    capacity there either."""
    used: dict[str, np.ndarray] = {}
    for rc, inv in columns.items():
        if rows_of is None:
            used[rc] = np.zeros(len(inv), dtype=np.int64)
        else:
            # Only the providers read: the others keep their usage.
            used[rc] = inv.used.copy()
            positions, present = inv.locate(rows_of)
            used[rc][positions[present]] = 0
    for keyed in _pieces(usages):
        at, keyed = _known(ids, keyed)
        rows = at if rows_of is None else rows_of[at]
        for rc, of_class, values in _by_class(keyed, rows):
            held = columns.get(rc)
            if held is not None:
                positions, present = held.locate(of_class)
                used[rc][positions[present]] = values[present, 0]
    return {rc: inv if np.array_equal(used[rc], inv.used) else inv.with_used(used[rc])
            for rc, inv in columns.items()}


def _inventories_of_pieces(ids: np.ndarray, pieces: Iterable[Keyed]) -> dict[str, Inventory]:
    """:func:`_inventories` of rows given a piece at a time (each piece's kept only as
    compact as its class's arrays)."""
    parts: dict[str, list[Inventory]] = {}
    for keyed in pieces:
        for rc, inv in _inventories(ids, keyed).items():
            parts.setdefault(rc, []).append(inv)
    joined = {}
    for rc, found in parts.items():
        if len(found) == 1:
            joined[rc] = found[0]
            continue
        fields = [np.concatenate(arrays) for arrays in zip(
            *((*inv.static_values(), inv.used) for inv in found), strict=True)]
        order = np.argsort(fields[0], kind='stable')
        joined[rc] = Inventory(*(f[order] for f in fields))
    return joined


def _pieces(rows: Keyed | Iterable[Keyed]) -> Iterable[Keyed]:
    return [rows] if isinstance(rows, Keyed) else rows


def _patched(inv: Inventory | None, patch: Inventory | None, rows: np.ndarray) -> Inventory:
    """``inv`` where the providers at ``rows`` hold exactly ``patch``'s inventories of
    the class; their usage is 0 until it is read with them (with_changes does)."""
    empty = Inventory.of_rows(np.zeros(0, dtype=np.intp), np.zeros((0, 6)))
    inv = inv if inv is not None else empty
    patch = patch if patch is not None else empty
    # The positions of the rows read, by binary search: testing every row of the
    # class (np.isin) cost about 0.2 ms a class at 50,000 providers, each read.
    at, present = inv.locate(rows)
    written = at[present]
    if all(np.array_equal(a[written], b)
           for a, b in zip(inv.static_values(), patch.static_values(), strict=True)):
        return inv      # those providers' inventories of the class did not change
    kept = np.ones(len(inv), dtype=bool)
    kept[written] = False
    merged = [np.concatenate([a[kept], b]) for a, b in zip(
        (*inv.static_values(), inv.used), (*patch.static_values(), patch.used), strict=True)]
    order = np.argsort(merged[0], kind='stable')
    return Inventory(*(a[order] for a in merged))


def int_array(column: np.ndarray, code: str = 'q') -> array[int]:
    """A column as the search reads it, a Python int per index, kept as an array of
    ``code`` (8 bytes a provider for 'q', 4 for 'i', 1 for 'b') rather than a list's
    object each: every request over a nested cloud reads a few, which at 50,000
    hosts took 13 MB a request as lists."""
    ints = array(code)
    # From the column's own buffer: tobytes() would hold a third copy for a moment.
    ints.frombytes(np.ascontiguousarray(column, dtype=f'i{ints.itemsize}').view(np.uint8).data)
    return ints
