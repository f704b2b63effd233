"""Which providers of a snapshot may serve each request group of a query, for the
whole cloud at once (pure).

Placement 16 finds each group's candidates on its own before it combines them
(``research_context``); so does this, as one column of booleans over every
provider per slot (:mod:`.search`), then splits them by tree:

* a granular group (suffixed, ``use_same_provider``): one provider with
  capacity for each of its amounts (``_capacity_check_clause``), every required
  trait and no forbidden one, in each ``member_of`` set and in no forbidden
  aggregate itself, in the tree of ``in_tree`` (``get_provider_ids_matching``); a
  resourceless group only by its traits and aggregates (Placement reads its
  ``in_tree`` only to refuse an unknown provider);
* the unsuffixed group, one slot per class: a provider with capacity for it,
  without a forbidden trait, which itself *or its root* is in the ``member_of``
  sets, neither it nor its root in a forbidden aggregate
  (``get_trees_matching_all``: an aggregate on the root spans the tree); its
  required traits are the combination's, checked by the search;
* every slot: for a root (the *anchor*) that has the ``root_required`` traits
  and none of ``root_forbidden`` (``_get_roots_with_traits``), and, when the
  unsuffixed group forbids aggregates, is in none of them itself
  (``filter_by_rp_nor_tree`` on the anchor).

A sharing provider (MISC_SHARES_VIA_AGGREGATE, a root: :func:`.answer.
why_not_exact` sends the others to Placement) that may fill a slot may fill it
for every anchor it serves (:meth:`.snapshot.ProviderSnapshot.anchors`), besides
its own tree: a granular group's checks are its own
(``_alloc_candidates_single_provider`` copies its request to each anchor); for
the unsuffixed group, it must be in the ``member_of`` sets itself
(``get_rps_with_shared_capacity``), and none is taken when the group names an
``in_tree``. Each slot's candidates on an anchor are its tree's providers, then
the sharing providers of other trees.

An anchor is a candidate when each slot has a provider for it; whether the
slots fit together is the search's question.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from placement_client.query import AllocationCandidatesQuery, RequestGroupQuery
from scheduler.provider_view.answer import Claimed
from scheduler.provider_view.search import Cloud, Rules, Slot
from scheduler.provider_view.snapshot import Inventory, ProviderSnapshot


@dataclass(frozen=True)
class Candidates:
    """Per candidate root (snapshot rows, ascending): per slot, the rows that may
    fill it (its tree's, ascending, then sharing providers', ascending)."""

    rules: Rules
    cloud: Cloud
    roots: np.ndarray
    by_root: _BySlot
    #: per root of ``roots``, whether the root itself is each slot's only provider
    #: (a host without children that hold what the query asks): its one
    #: combination needs no search when the query has no granular group
    alone: np.ndarray
    #: per root of ``roots``, whether the root itself is among some slot's providers
    root_serves: np.ndarray
    #: per root of ``roots``, whether the unsuffixed group's providers there have,
    #: together, each of its required traits (no combination has them otherwise)
    traits_within: np.ndarray


class _BySlot(Mapping[int, tuple[tuple[int, ...], ...]]):
    """Each candidate root's rows per slot, sliced from the slots' sorted columns
    when asked: a request looks at a few roots of thousands.

    A slot's rows are its roots' runs one after the other, ``offsets`` (one more
    than the roots) where each begins; a slot every root fills alone (a class
    only roots hold) keeps neither. Kept for the request's whole life, its
    claims included: rows and offsets fit in 32 bits, as Placement's ids do."""

    def __init__(self, roots: np.ndarray, slots: list[tuple[np.ndarray, np.ndarray] | None]):
        self._roots, self._slots = roots, slots

    def __getitem__(self, root: int) -> tuple[tuple[int, ...], ...]:
        i = int(np.searchsorted(self._roots, root))
        if i >= len(self._roots) or self._roots[i] != root:
            raise KeyError(root)
        return tuple((root,) if slot is None else tuple(slot[0][slot[1][i]:slot[1][i + 1]].tolist())
                     for slot in self._slots)

    def __iter__(self) -> Iterator[int]:
        return iter(self._roots.tolist())

    def sizes(self, slot: int) -> np.ndarray:
        """Per root, how many providers may fill ``slot``."""
        held = self._slots[slot]
        return np.ones(len(self._roots), dtype=np.int32) if held is None else np.diff(held[1])

    def __len__(self) -> int:
        return len(self._roots)


def rules_of(query: AllocationCandidatesQuery) -> Rules:
    """The slots of ``query`` (the unsuffixed group's classes, then each granular
    group in the query's order) and the rules on their combination."""
    slots: list[Slot] = []
    unsuffixed = [g for g in query.groups if not g.suffix and not g.is_empty()]
    for group in unsuffixed:
        slots.extend(Slot('', ((rc, amount),), granular=False)
                     for rc, amount in sorted(group.resources.items()))
    seen: dict[tuple, int] = {}
    for group in _granular(query):
        identity = _identity(group, query)
        twin = seen.get(identity, -1)
        seen[identity] = len(slots)
        slots.append(Slot(group.suffix, tuple(sorted(group.resources.items())),
                          granular=True, twin=twin))
    return Rules(tuple(slots), isolate=query.group_policy == 'isolate',
                 same_subtree=tuple(frozenset(s) for s in query.same_subtree),
                 traits=frozenset(unsuffixed[0].required_traits) if unsuffixed else frozenset())


def candidates(snapshot: ProviderSnapshot, query: AllocationCandidatesQuery,
               claimed: dict[str, Claimed]) -> Candidates:
    """Each slot's providers, by tree; ``claimed``: per class requested that the
    snapshot holds, the claims the answer counts besides the read's usage."""
    rules = rules_of(query)
    pairs = [_anchored(snapshot, mask, shares) for mask, shares in
             zip(_slot_masks(snapshot, query, claimed), _shares(query), strict=True)]
    # Set operations as columns over the providers, not sorts: at 50,000 hosts the
    # sorted intersections took most of a request's 150 ms.
    anchors = _anchor_ok(snapshot, query)
    # An anchor needs a provider for every slot. Flags a byte a provider, one slot
    # at a time: a count per provider per slot, all kept until the runs below, was
    # up to 10 MB of a worker's peak at 50,000 hosts with nested trees.
    for keys, _ in pairs:
        has = np.zeros(len(snapshot), dtype=bool)
        has[keys] = True
        anchors &= has
    common = np.flatnonzero(anchors)
    by_slot: list[tuple[np.ndarray, np.ndarray] | None] = []
    alone = np.ones(len(common), dtype=bool)
    serves = np.zeros(len(snapshot), dtype=bool)
    # The search checks the traits on the unsuffixed slots' providers; with none
    # (a resourceless unsuffixed group) it checks nothing, nor does this.
    with_trait = ({trait: np.zeros(len(snapshot), dtype=bool) for trait in rules.traits}
                  if any(not slot.granular for slot in rules.slots) else {})
    for slot, (keys, rows) in zip(rules.slots, pairs, strict=True):
        kept = anchors[keys]
        keys, rows = keys[kept], rows[kept]
        if len(keys) > 1 and not (keys[1:] >= keys[:-1]).all():
            # A tree's providers in row order, then other trees' sharing providers.
            order = np.argsort(keys, kind='stable')
            keys, rows = keys[order], rows[order]
        # Each root's run of keys from counts, not a binary search per root: at
        # 50,000 hosts with nested trees, two searchsorted a slot were two thirds
        # of a flat flavor's request. Only the candidate roots' keys are left, in
        # their order, so the runs add up over those roots alone.
        held = np.bincount(keys, minlength=len(snapshot))[common]
        end = np.cumsum(held)
        start = end - held
        if len(rows):
            alone &= (end - start == 1) & (rows[np.minimum(start, len(rows) - 1)] == common)
        serves[rows[rows == keys]] = True
        if not slot.granular:
            for trait, found in with_trait.items():
                found[keys[snapshot.with_trait(trait)[rows]]] = True
        if len(rows) == len(common) and bool((rows == common).all()):
            by_slot.append(None)
        else:
            # Only the candidate roots' keys are left: their runs tile the rows.
            by_slot.append((rows.astype(np.int32),
                            np.append(start, len(rows)).astype(np.int32)))
    within = np.ones(len(common), dtype=bool)
    for found in with_trait.values():
        within &= found[common]
    return Candidates(rules, _cloud(snapshot, rules, claimed), common,
                      _BySlot(common, by_slot), alone, serves[common], within)


def _anchored(snapshot: ProviderSnapshot, mask: np.ndarray,
              shares: bool) -> tuple[np.ndarray, np.ndarray]:
    """(anchor, row) pairs of one slot: each provider of ``mask`` for its own root,
    then (with ``shares``) each sharing provider of it for the other roots it
    serves."""
    rows = np.flatnonzero(mask)
    keys = snapshot.roots[rows]
    if not (shares and snapshot.sharing):
        return keys, rows
    sharers = snapshot.sharing_rows[mask[snapshot.sharing_rows]].tolist()
    anchors = [snapshot.anchors(row) for row in sharers]
    extra_keys = np.concatenate([keys, *anchors])
    extra_rows = np.concatenate([rows, *(np.full(len(a), row, dtype=np.intp)
                                         for row, a in zip(sharers, anchors, strict=True))])
    # Its own root is already there (its tree's provider).
    own = np.zeros(len(extra_rows), dtype=bool)
    own[:len(rows)] = True
    kept = own | (extra_keys != snapshot.roots[extra_rows])
    return extra_keys[kept], extra_rows[kept]


def _shares(query: AllocationCandidatesQuery) -> list[bool]:
    """Per slot, whether a sharing provider may fill it for other trees: not for the
    unsuffixed group when it names an ``in_tree`` (``get_trees_matching_all``)."""
    shares: list[bool] = []
    for group in (g for g in query.groups if not g.suffix and not g.is_empty()):
        shares.extend([group.in_tree is None] * len(group.resources))
    shares.extend(True for _ in _granular(query))
    return shares


def _anchor_ok(snapshot: ProviderSnapshot, query: AllocationCandidatesQuery) -> np.ndarray:
    """Per provider (meaningful for roots), whether it may anchor an answer."""
    ok = np.ones(len(snapshot), dtype=bool)
    for trait in query.root_required:
        ok &= snapshot.with_trait(trait)
    for trait in query.root_forbidden:
        ok &= ~snapshot.with_trait(trait)
    for group in (g for g in query.groups if not g.suffix and not g.is_empty()):
        if group.forbidden_aggregates:
            ok &= ~_member_of(snapshot, [frozenset(group.forbidden_aggregates)])
    return ok


def _granular(query: AllocationCandidatesQuery) -> list[RequestGroupQuery]:
    return [g for g in query.groups if g.suffix and not g.is_empty()]


def _identity(group: RequestGroupQuery, query: AllocationCandidatesQuery) -> tuple:
    """What makes two granular groups interchangeable: all they ask, and the
    same_subtree sets they are in."""
    return (tuple(sorted(group.resources.items())), frozenset(group.required_traits),
            frozenset(group.forbidden_traits), frozenset(group.member_of),
            frozenset(group.forbidden_aggregates), group.in_tree if group.resources else None,
            tuple(group.suffix in s for s in query.same_subtree))


def _slot_masks(snapshot: ProviderSnapshot, query: AllocationCandidatesQuery,
                claimed: dict[str, Claimed]) -> list[np.ndarray]:
    """Per slot, the providers that may fill it, whatever their anchor (the
    anchor's own rules: :func:`_anchor_ok`)."""
    n = len(snapshot)
    roots = snapshot.roots
    masks: list[np.ndarray] = []
    for group in (g for g in query.groups if not g.suffix and not g.is_empty()):
        base = _in_tree(snapshot, group)
        for trait in group.forbidden_traits:
            base &= ~snapshot.with_trait(trait)
        if group.member_of:
            # A sharing provider is a root: itself.
            member = _member_of(snapshot, group.member_of)
            base &= member | member[roots]
        if group.forbidden_aggregates:
            base &= ~_member_of(snapshot, [frozenset(group.forbidden_aggregates)])
        masks.extend(base & _fits(snapshot, rc, amount, claimed)
                     for rc, amount in sorted(group.resources.items()))
    for group in _granular(query):
        mask = np.ones(n, dtype=bool)
        if group.resources:
            mask &= _in_tree(snapshot, group)
        for rc, amount in group.resources.items():
            mask &= _fits(snapshot, rc, amount, claimed)
        for trait in group.required_traits:
            mask &= snapshot.with_trait(trait)
        for trait in group.forbidden_traits:
            mask &= ~snapshot.with_trait(trait)
        if group.member_of:
            mask &= _member_of(snapshot, group.member_of)
        if group.forbidden_aggregates:
            mask &= ~_member_of(snapshot, [frozenset(group.forbidden_aggregates)])
        masks.append(mask)
    return masks


def _in_tree(snapshot: ProviderSnapshot, group: RequestGroupQuery) -> np.ndarray:
    if group.in_tree is None:
        return np.ones(len(snapshot), dtype=bool)
    return snapshot.roots == snapshot.roots[snapshot.index[group.in_tree]]


def _member_of(snapshot: ProviderSnapshot, sets: Sequence[frozenset[str]]) -> np.ndarray:
    """Per provider, whether it is in one aggregate of each set."""
    mask = np.ones(len(snapshot), dtype=bool)
    for any_of in sets:
        mask &= np.logical_or.reduce([snapshot.in_aggregate(a) for a in any_of])
    return mask


def _fits(snapshot: ProviderSnapshot, rc: str, amount: int,
          claimed: dict[str, Claimed]) -> np.ndarray:
    """Per provider, whether it can give ``amount`` of ``rc`` on its own."""
    mask = np.zeros(len(snapshot), dtype=bool)
    inv = snapshot.inventories.get(rc)
    if inv is None:
        return mask
    fits = claimed[rc].room_for(amount)
    # Most clouds' units allow every amount a flavor asks: then only capacity is
    # checked per provider (the unit checks were half of this function's time at
    # 50,000 hosts with nested trees: bench.match's profile).
    lowest_max, highest_min, steps = inv.unit_bounds
    if amount < highest_min:
        fits &= inv.min_unit <= amount
    if amount > lowest_max:
        fits &= inv.max_unit >= amount
    if steps:
        fits &= amount % np.where(inv.step_size > 0, inv.step_size, 1) == 0
    mask[inv.rows[fits]] = True
    return mask


def _cloud(snapshot: ProviderSnapshot, rules: Rules, claimed: dict[str, Claimed]) -> Cloud:
    room = {rc: _Room(snapshot.inventories.get(rc), claimed.get(rc))
            for rc in {rc for slot in rules.slots for rc, _ in slot.resources}}
    has = {trait: snapshot.trait_flags(trait) for trait in rules.traits}
    return Cloud(room, snapshot.parents_for_search(), has)


class _Room:
    """One class's room per row, as :attr:`.search.Cloud.room` holds it, worked out
    for the rows a search reads: the trees of the few hosts a request looks at
    or cannot settle without one. A column over every provider, made for each
    request, was an eighth of the match at 50,000 hosts with nested trees
    (bench.match, the workload's mix), and the search mostly read none of it."""

    def __init__(self, inv: Inventory | None, claimed: Claimed | None):
        self._inv, self._claimed = inv, claimed
        self._known: dict[int, int] = {}

    def __getitem__(self, row: int) -> int:
        known = self._known.get(row)
        if known is None:
            known = self._known[row] = self._work_out(row)
        return known

    def _work_out(self, row: int) -> int:
        inv = self._inv
        at = None if inv is None else inv.position(row)
        if inv is None or at is None or self._claimed is None:
            return -1
        # Placement's last check, on the combination: capacity as its summary
        # rounds it, and max_unit for what several groups take together. Below -1
        # it says no more than -1 does (no room), and a provider without room is
        # no slot's candidate.
        return max(min(int(inv.capacity(at)) - self._claimed.used(at), int(inv.max_unit[at])), -1)
