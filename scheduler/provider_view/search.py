"""Within one provider tree: which providers serve each request group, found by a
search that prunes (pure, no I/O).

Placement 16 answers a query with several request groups by building, per root,
the product of every group's candidates and keeping the combinations that pass
(``allocation_candidate._merge_candidates``): a host of 8 children asked for 6
groups is 262,144 combinations. A scheduler needs to know whether a host has
one, and a few of them to claim. Here each choice is a *slot*: a provider for a
granular group (one provider serves it all), or for one class of the
unsuffixed group (which may take each class from another provider of the tree).
A depth-first search assigns the slots, most constrained first, and abandons a
partial assignment as soon as it breaks a rule Placement applies to the whole
combination:

* what the slots take of a provider's class, together, fits: ``used + sum <=
  capacity`` and ``sum <= max_unit`` (``RequestWideSearchContext.exceeds_capacity``
  on the consolidated request);
* with ``group_policy=isolate``, the granular groups (resourceless ones too) are
  served by as many providers as there are groups (``_satisfies_group_policy``);
* each ``same_subtree`` set's providers have one among them that is an
  ancestor (or itself) of all the others (``_check_same_subtree``);
* the providers of the unsuffixed group have its required traits together
  (``_check_traits_for_alloc_request``; forbidden traits never reach a slot).

A tree whose providers have less room in all than the slots ask is refused
first (as Placement refuses it). Each remaining slot must still have a provider
that fits (forward checking),
and under ``isolate`` the remaining granular slots must still find distinct
providers (a bipartite matching), so a host that cannot serve the query is
usually refused at its first steps. Granular groups that ask exactly the same
thing are interchangeable: the search gives them providers in order, which
drops mirror images of one answer without losing any host.

With sharing providers, a tree's slots may also take the sharing providers
that serve its root; an answer for a host must then take something of the
host's own tree (``touch``), or it names no provider of it.

Which providers may fill a slot at all (capacity for its own amounts, traits,
aggregates, ``in_tree``, the root's traits) is decided before, for the whole
cloud at once (:mod:`.groups`).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

#: Steps (providers tried) one search may take before it gives up. A host the
#: search cannot settle within them sends the query to Placement.
BUDGET = 20_000


class Unsettled(Exception):
    """The search ran out of steps before it knew whether the tree has an answer."""


@dataclass(frozen=True)
class Slot:
    """One provider to choose: for a granular group (``granular``), it gives all of
    ``resources`` (none for a resourceless group); for the unsuffixed group (suffix
    ""), it gives one of its classes."""

    suffix: str
    resources: tuple[tuple[str, int], ...]
    granular: bool
    #: an earlier slot of a group that asks exactly what this one's does (-1: none)
    twin: int = -1


@dataclass(frozen=True)
class Rules:
    """What a query asks of every tree: its slots and the rules on their
    combination."""

    slots: tuple[Slot, ...]
    isolate: bool = False
    same_subtree: tuple[frozenset[str], ...] = ()
    #: the unsuffixed group's required traits, which its providers hold together
    traits: frozenset[str] = frozenset()


class Column(Protocol):
    """Per row, a value: a list, an array, or one worked out when read."""

    def __getitem__(self, row: int, /) -> int: ...


@dataclass(frozen=True)
class Cloud:
    """What the search reads of the providers, by snapshot row."""

    #: per class, per row: how much all the slots together may take of it
    #: (``min(capacity - used, max_unit)``; -1 where the row has no inventory of it)
    room: Mapping[str, Column]
    #: per row, its parent's row (-1 for a root)
    parent: Sequence[int]
    #: per trait of :attr:`Rules.traits`, per row, whether the row has it (0 or 1)
    has: Mapping[str, Sequence[int]]


def assignments(rules: Rules, cloud: Cloud, candidates: Sequence[Sequence[int]], *,
                limit: int, budget: int = BUDGET,
                touch: frozenset[int] | None = None) -> list[tuple[int, ...]]:
    """Up to ``limit`` distinct assignments (a row per slot, in slot order) that
    Placement would accept for one tree, whose slots may take the rows
    ``candidates`` (per slot); [] when the tree has none. Unsettled when the
    search could not tell within ``budget`` steps. With ``touch``, only those
    where a slot with resources takes one of those rows (a host's answer takes
    something of its own tree: one all from sharing providers is no host's).

    The first search decides; the others begin each slot's candidates at a later
    one, so that the answers spread over the tree's providers (a claim refused on
    one provider has an alternative elsewhere) instead of differing in the last
    slot only."""
    if (any(not c for c in candidates) or not _distinct_enough(rules, candidates)
            or not _room_enough(rules, cloud, candidates)):
        return []
    seen: set[tuple[int, ...]] = set()
    found = _Search(rules, cloud, candidates, 0, budget, touch).first(seen)
    if found is None:
        return []
    answers = [found]
    seen.add(found)
    widest = max(len(c) for c in candidates)
    while len(answers) < limit:
        try:
            found = _Search(rules, cloud, candidates, len(answers) % widest, budget,
                            touch).first(seen)
        except Unsettled:
            break       # the tree is answered; fewer alternatives is all it costs
        if found is None:
            break       # a search that skips only those seen found none: no more exist
        answers.append(found)
        seen.add(found)
    return answers


class _Search:
    def __init__(self, rules: Rules, cloud: Cloud, candidates: Sequence[Sequence[int]],
                 rotation: int, budget: int, touch: frozenset[int] | None = None):
        self.slots = rules.slots
        self.touch = touch
        self.touching = 0       # slots with resources on a row of ``touch``
        self.rules = rules
        self.cloud = cloud
        n = len(self.slots)
        self.candidates = [_rotated(c, rotation) for c in candidates]
        # Twins take providers in the order of their (identical) candidate lists.
        self.rank = [{row: i for i, row in enumerate(c)} if self.slots[s].twin >= 0
                     or any(t.twin == s for t in self.slots) else {}
                     for s, c in enumerate(self.candidates)]
        # Most constrained first; a twin keeps its place after the slot it mirrors
        # (same candidates, higher index).
        self.order = sorted(range(n), key=lambda s: (len(self.candidates[s]), s))
        self.chosen = [-1] * n
        self.taken: dict[tuple[int, str], int] = {}
        self.granular_on: dict[int, int] = {}
        self.left = budget
        position = {slot: depth for depth, slot in enumerate(self.order)}
        # The rules on a set of slots are checked once its last slot is chosen.
        self.subtrees_at: list[list[list[int]]] = [[] for _ in range(n)]
        for suffixes in rules.same_subtree:
            members = [s for s, slot in enumerate(self.slots) if slot.suffix in suffixes]
            if members:
                self.subtrees_at[max(position[s] for s in members)].append(members)
        unsuffixed = [s for s, slot in enumerate(self.slots) if not slot.suffix]
        self.traits_at = (max(position[s] for s in unsuffixed)
                          if rules.traits and unsuffixed else -1)
        self.unsuffixed = unsuffixed

    def first(self, seen: set[tuple[int, ...]]) -> tuple[int, ...] | None:
        """The first complete assignment not in ``seen``; None when there is none."""
        return next(self._walk(0, seen), None)

    def _walk(self, depth: int, seen: set[tuple[int, ...]]) -> Iterator[tuple[int, ...]]:
        if depth == len(self.order):
            found = tuple(self.chosen)
            if found not in seen and (self.touch is None or self.touching):
                yield found
            return
        slot = self.order[depth]
        for row in self.candidates[slot]:
            if not self._fits(slot, row):
                continue
            self.left -= 1
            if self.left < 0:
                raise Unsettled
            self._take(slot, row, +1)
            if self._holds(depth) and self._rest_possible(depth):
                yield from self._walk(depth + 1, seen)
            self._take(slot, row, -1)

    def _fits(self, slot: int, row: int) -> bool:
        spec = self.slots[slot]
        if spec.granular and self.rules.isolate and self.granular_on.get(row):
            return False
        if spec.twin >= 0:
            twin_row = self.chosen[spec.twin]
            if twin_row >= 0 and self.rank[slot][row] < self.rank[spec.twin][twin_row]:
                return False
        room = self.cloud.room
        return all(self.taken.get((row, rc), 0) + amount <= room[rc][row]
                   for rc, amount in spec.resources)

    def _take(self, slot: int, row: int, sign: int) -> None:
        spec = self.slots[slot]
        for rc, amount in spec.resources:
            self.taken[(row, rc)] = self.taken.get((row, rc), 0) + sign * amount
        if spec.granular:
            self.granular_on[row] = self.granular_on.get(row, 0) + sign
        if self.touch is not None and spec.resources and row in self.touch:
            self.touching += sign
        self.chosen[slot] = row if sign > 0 else -1

    def _holds(self, depth: int) -> bool:
        """The rules whose slots are all chosen once ``depth`` is."""
        parent = self.cloud.parent
        for members in self.subtrees_at[depth]:
            if not _one_subtree({self.chosen[s] for s in members}, parent):
                return False
        if depth == self.traits_at:
            rows = {self.chosen[s] for s in self.unsuffixed}
            has = self.cloud.has
            if not all(any(has[trait][row] for row in rows) for trait in self.rules.traits):
                return False
        return True

    def _rest_possible(self, depth: int) -> bool:
        """Whether every slot after ``depth`` still has a provider that fits, and the
        granular ones distinct providers under ``isolate``."""
        rest = self.order[depth + 1:]
        touch = self.touch
        if touch is not None and not self.touching and not any(
                self._fits(s, row) for s in rest if self.slots[s].resources
                for row in self.candidates[s] if row in touch):
            return False
        if not (self.rules.isolate and sum(self.slots[s].granular for s in rest) > 1):
            return all(any(self._fits(s, row) for row in self.candidates[s]) for s in rest)
        options = {s: [row for row in self.candidates[s] if self._fits(s, row)] for s in rest}
        if not all(options.values()):
            return False
        granular = [o for s, o in options.items() if self.slots[s].granular]
        # k slots with k providers each always find distinct ones (Hall's condition).
        return (all(len(o) >= len(granular) for o in granular)
                or _distinct_providers(granular))


def _distinct_enough(rules: Rules, candidates: Sequence[Sequence[int]]) -> bool:
    """Under ``isolate``, whether the granular slots' candidates hold, in all, as many
    providers as there are granular slots (the matching the search keeps finds
    whether they can be told apart). Most trees of a cloud asked for two NUMA
    cells have one provider to offer, the root: refused here, not after a search
    is set up for them (70 µs a tree, 45 ms of a request at 1,000 hosts)."""
    if not rules.isolate:
        return True
    granular = [rows for slot, rows in zip(rules.slots, candidates, strict=True)
                if slot.granular]
    return len(set().union(*granular)) >= len(granular)


def _room_enough(rules: Rules, cloud: Cloud, candidates: Sequence[Sequence[int]]) -> bool:
    """Whether what the slots ask of each class, in all, is no more than the room
    of the providers that may give it (Placement's own first check on a tree,
    ``_pre_check_overall_capacity``): a host far too small is refused before any
    step."""
    asked: dict[str, int] = {}
    givers: dict[str, set[int]] = {}
    for slot, rows in zip(rules.slots, candidates, strict=True):
        for rc, amount in slot.resources:
            asked[rc] = asked.get(rc, 0) + amount
            givers.setdefault(rc, set()).update(rows)
    return all(amount <= sum(cloud.room[rc][row] for row in givers[rc])
               for rc, amount in asked.items())


def _rotated(rows: Sequence[int], by: int) -> list[int]:
    if not rows:
        return []
    by %= len(rows)
    return [*rows[by:], *rows[:by]]


def _one_subtree(rows: set[int], parent: Sequence[int]) -> bool:
    """Whether one of ``rows`` is an ancestor (or itself) of every other."""
    if len(rows) == 1:
        return True
    return any(all(_descends(row, top, parent) for row in rows) for top in rows)


def _descends(row: int, top: int, parent: Sequence[int]) -> bool:
    while row >= 0:
        if row == top:
            return True
        row = parent[row]
    return False


def _distinct_providers(options: list[list[int]]) -> bool:
    """Whether each list can take a row of its own, no row taken twice (a
    bipartite matching that covers every list: Kuhn's augmenting paths)."""
    holder: dict[int, int] = {}

    def place(i: int, visited: set[int]) -> bool:
        for row in options[i]:
            if row in visited:
                continue
            visited.add(row)
            if row not in holder or place(holder[row], visited):
                holder[row] = i
                return True
        return False

    return all(place(i, set()) for i in range(len(options)))
