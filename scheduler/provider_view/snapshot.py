"""One read of Placement's providers, as columns (pure: built from rows, no I/O)."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from scheduler.host_state import SHARING_TRAIT


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


class ProviderSnapshot:
    """Every resource provider of one Placement, at one moment.

    Per resource class it also says where the class is: ``nested_classes`` are
    held by some provider below a root, ``shared_classes`` by some sharing
    provider (MISC_SHARES_VIA_AGGREGATE). A request for neither can only be
    served by one root provider holding all of it; see
    :func:`scheduler.provider_view.answer.why_not_exact`.
    """

    def __init__(self, uuids: list[str], *, parents: list[str | None],
                 generations: list[int], traits: list[frozenset[str]],
                 aggregates: list[frozenset[str]], inventories: dict[str, Inventory]):
        self.uuids = uuids
        self.index = {rp: i for i, rp in enumerate(uuids)}
        self.parents = parents
        self.generations = generations
        self.traits = traits
        self.aggregates = aggregates
        self.inventories = inventories
        n = len(uuids)
        # Each provider's root (row), and each root's tree in row order.
        self.roots = list(range(n))
        for row in range(n):
            root, seen = row, 0
            while parents[root] is not None and seen < n:
                parent = self.index.get(parents[root])  # type: ignore[arg-type]
                if parent is None:
                    break
                root, seen = parent, seen + 1
            self.roots[row] = root
        self.trees: dict[int, list[int]] = {}
        for row, root in enumerate(self.roots):
            self.trees.setdefault(root, []).append(row)
        below_root = np.array([root != row for row, root in enumerate(self.roots)], dtype=bool)
        sharing = np.array([SHARING_TRAIT in t for t in traits], dtype=bool)
        self.nested_classes = {rc for rc, inv in inventories.items()
                               if (inv.present & below_root).any()}
        self.shared_classes = {rc for rc, inv in inventories.items()
                               if (inv.present & sharing).any()}
        # Per trait and per aggregate, which providers have it: built when a query
        # first asks, kept with the snapshot (requests ask for few of them).
        self._with_trait: dict[str, np.ndarray] = {}
        self._in_aggregate: dict[str, np.ndarray] = {}

    def with_trait(self, trait: str) -> np.ndarray:
        """Per provider, whether it has ``trait``."""
        column = self._with_trait.get(trait)
        if column is None:
            column = self._with_trait[trait] = np.fromiter(
                (trait in t for t in self.traits), dtype=bool, count=len(self.traits))
        return column

    def in_aggregate(self, aggregate: str) -> np.ndarray:
        """Per provider, whether it is in ``aggregate``."""
        column = self._in_aggregate.get(aggregate)
        if column is None:
            column = self._in_aggregate[aggregate] = np.fromiter(
                (aggregate in a for a in self.aggregates), dtype=bool,
                count=len(self.aggregates))
        return column

    def __len__(self) -> int:
        return len(self.uuids)

    @classmethod
    def from_rows(cls, providers: Iterable[tuple[int, str, int, int | None]],
                  inventories: Iterable[tuple[int, str, int, int, int, int, int, float]],
                  usages: Iterable[tuple[int, str, int]],
                  traits: Iterable[tuple[int, str]],
                  aggregates: Iterable[tuple[int, str]]) -> ProviderSnapshot:
        """From Placement's rows, keyed by its internal provider id:
        providers (id, uuid, generation, parent id), inventories (provider id, class,
        total, reserved, min_unit, max_unit, step_size, allocation_ratio), usages
        (provider id, class, sum of used), traits (provider id, name) and aggregates
        (provider id, aggregate uuid)."""
        rows = sorted(providers, key=lambda r: r[0])
        row_of = {r[0]: i for i, r in enumerate(rows)}
        uuid_of = {r[0]: r[1] for r in rows}
        n = len(rows)
        by_class: dict[str, list[tuple[int, int, int, int, int, int, float]]] = {}
        for rp_id, rc, *inventory in inventories:
            row = row_of.get(rp_id)
            if row is not None:
                by_class.setdefault(rc, []).append((row, *inventory))  # type: ignore[arg-type]
        used: dict[str, dict[int, int]] = {}
        for rp_id, rc, amount in usages:
            row = row_of.get(rp_id)
            if row is not None:
                used.setdefault(rc, {})[row] = int(amount or 0)
        columns = {}
        for rc, entries in by_class.items():
            present = np.zeros(n, dtype=bool)
            ints = np.zeros((5, n), dtype=np.int64)
            ratio = np.zeros(n, dtype=np.float64)
            for row, total, reserved, min_unit, max_unit, step, allocation_ratio in entries:
                present[row] = True
                ints[:, row] = (total, reserved, min_unit, max_unit, step)
                ratio[row] = allocation_ratio
            column_used = np.zeros(n, dtype=np.int64)
            for row, amount in used.get(rc, {}).items():
                column_used[row] = amount
            columns[rc] = Inventory(present, ints[0], ints[1], ints[2], ints[3], ints[4],
                                    ratio, column_used)
        trait_sets: list[set[str]] = [set() for _ in range(n)]
        for rp_id, name in traits:
            row = row_of.get(rp_id)
            if row is not None:
                trait_sets[row].add(name)
        aggregate_sets: list[set[str]] = [set() for _ in range(n)]
        for rp_id, aggregate in aggregates:
            row = row_of.get(rp_id)
            if row is not None:
                aggregate_sets[row].add(aggregate)
        return cls([r[1] for r in rows],
                   parents=[uuid_of.get(r[3], str(r[3])) if r[3] is not None else None
                            for r in rows],
                   generations=[int(r[2]) for r in rows],
                   traits=[frozenset(t) for t in trait_sets],
                   aggregates=[frozenset(a) for a in aggregate_sets],
                   inventories=columns)
