"""Which queries a snapshot answers exactly as Placement would, and the answer of
the simplest ones (pure).

A query with a single request group, the unsuffixed one, whose every resource
class is held only by root providers that share nothing (no provider below a
root and no sharing provider has an inventory of it) can only be served by one
root provider holding the whole request. Placement 16 reaches the same answer on
either of its paths: provider by provider when the cloud has no nested and no
sharing provider at all (``research_context.get_provider_ids_matching``,
``allocation_candidate._alloc_candidates_single_provider``), tree by tree
otherwise (``get_trees_matching_all``, ``_alloc_candidates_multiple_providers``,
where the providers with the classes are those roots and the traits the
allocation's providers must have "collectively" are that root's). That is what
:func:`candidates` computes, for every provider at once:

* each requested class: an inventory with ``used + amount <= (total - reserved) *
  allocation_ratio``, ``min_unit <= amount <= max_unit`` and ``amount %
  step_size == 0`` (``_capacity_check_clause``);
* required traits all on the root, forbidden traits absent, each ``member_of``
  set met by one of its aggregates, no forbidden aggregate; ``root_required``
  and ``root_forbidden`` on it; ``in_tree`` naming a provider of its tree;
* a summary of every provider of each chosen tree, capacity ``int((total -
  reserved) * allocation_ratio)`` (``_build_provider_summaries``).

Granular groups (numbered or named), ``group_policy``, ``same_subtree``,
resourceless suffixed groups, classes held below a root and classes sharing
providers hold are answered tree by tree (:mod:`.trees`; :func:`is_flat` tells
the two apart). What is left to Placement (:func:`why_not_exact` names the
reason): a sharing provider below a root (where a requested class or a
resourceless group could reach it), an unsuffixed group whose every class a
sharing provider holds, a class in the unsuffixed and a granular group without
``group_policy=none`` (where Placement's own answer depends on the order it
builds it in), an ``in_tree`` the snapshot does not know, and a query Placement
refuses (its error is the answer: at microversion 1.36, among others, an
unsuffixed group without resources). ``tests/functional/test_provider_view.py``,
``test_provider_view_nested.py`` and ``test_provider_view_sharing.py`` hold the
answers to Placement's own on random clouds and queries.
"""
from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from placement_client.models import Candidates
from placement_client.query import AllocationCandidatesQuery, RequestGroupQuery
from scheduler.provider_view.snapshot import Inventory, ProviderSnapshot

#: Reasons a query goes to Placement (metric label values).
INVALID = 'a query Placement refuses'
SHARING = 'a sharing provider below a root'
UNKNOWN_TREE = 'in_tree not in the view'
#: Placement keeps the unsuffixed group's combinations in a set whose equality
#: ignores the anchor (``AllocationRequest.__eq__``): one taken all from sharing
#: providers survives for one of the roots they serve, which one depending on
#: the order of a set of its internal ids. Placement's answer is then its own.
SHARED_ALONE = 'an unsuffixed group sharing providers alone may serve'
#: Unless group_policy is none, Placement adds a class two groups take of one
#: provider into the unsuffixed group's own AllocationRequestResource, shared
#: by every combination it is in (``copy_arr_if_needed`` copies only under
#: none): its amounts, and the capacity check on them, then depend on the order
#: it builds combinations in.
SUMMED_IN_PLACE = 'a class in the unsuffixed and a granular group, group_policy not none'

#: provider uuid -> resource class -> amount claimed since the snapshot was read
Overlay = Mapping[str, Mapping[str, int]]


def why_not_exact(query: AllocationCandidatesQuery, snapshot: ProviderSnapshot) -> str | None:
    """Why ``snapshot`` cannot answer ``query`` exactly as Placement would; None if it
    can (:func:`is_flat` says by which path)."""
    groups = [g for g in query.groups if not g.is_empty()]
    if _refused(query, groups):
        return INVALID
    if query.group_policy != 'none' and _asked_twice(groups):
        return SUMMED_IN_PLACE
    if snapshot.sharing_below_root:
        # A tree that holds a sharing provider would lend it to other anchors: its
        # root could be in an answer that takes nothing from it but that provider.
        classes = {rc for g in groups for rc in g.resources}
        if classes & snapshot.shared_classes or any(not g.resources for g in groups):
            return SHARING
    if snapshot.sharing and any(g.in_tree is None and set(g.resources) <= snapshot.shared_classes
                                for g in groups if not g.suffix):
        return SHARED_ALONE
    if any(g.in_tree is not None and g.in_tree not in snapshot.index for g in groups):
        return UNKNOWN_TREE
    return None


def _asked_twice(groups: list[RequestGroupQuery]) -> bool:
    """Whether a class of the unsuffixed group is in a granular group too."""
    unsuffixed = {rc for g in groups if not g.suffix for rc in g.resources}
    return any(unsuffixed.intersection(g.resources) for g in groups if g.suffix)


def is_flat(query: AllocationCandidatesQuery, snapshot: ProviderSnapshot) -> bool:
    """Whether a query :func:`why_not_exact` accepts is one root's alone: a single
    group, the unsuffixed one, of classes only roots hold (:func:`matching`);
    otherwise its trees are searched (:mod:`.trees`)."""
    groups = [g for g in query.groups if not g.is_empty()]
    return (len(groups) == 1 and not groups[0].suffix and not query.same_subtree
            and not set(groups[0].resources) & (snapshot.nested_classes
                                                | snapshot.shared_classes))


def _refused(query: AllocationCandidatesQuery, groups: list[RequestGroupQuery]) -> bool:
    """Whether Placement 16 answers ``query`` with HTTP 400 (``lib.RequestGroup.
    dict_from_request``, ``RequestWideParams.from_request``): its words, not ours.
    A resourceless group must be in a ``same_subtree``, which cannot name the
    unsuffixed group: an unsuffixed group without resources is refused."""
    suffixes = {g.suffix for g in groups}
    in_subtrees = {s for subtree in query.same_subtree for s in subtree}
    return (not any(g.resources for g in groups)
            or (query.group_policy is None and sum(bool(g.suffix) for g in groups) > 1)
            or any(not g.resources and g.suffix not in in_subtrees for g in groups)
            or '' in in_subtrees or not in_subtrees <= suffixes
            or any(g.required_traits & g.forbidden_traits for g in groups)
            or bool(query.root_required & query.root_forbidden))


def matching(snapshot: ProviderSnapshot, query: AllocationCandidatesQuery,
             overlay: Overlay) -> np.ndarray:
    """The providers (rows) that hold the whole request, in row order. Only for a
    query :func:`why_not_exact` accepts."""
    [group] = [g for g in query.groups if not g.is_empty()]
    n = len(snapshot)
    mask = np.ones(n, dtype=bool)
    if group.in_tree is not None:
        mask[:] = False
        mask[snapshot.roots[snapshot.index[group.in_tree]]] = True
    for rc, amount in group.resources.items():
        inv = snapshot.inventories.get(rc)
        if inv is None:
            return np.zeros(0, dtype=np.intp)
        step = np.where(inv.step_size > 0, inv.step_size, 1)
        fits = (Claimed.of(snapshot, rc, inv, overlay).room_for(amount)
                & (inv.min_unit <= amount) & (inv.max_unit >= amount)
                & (amount % step == 0))
        holds = np.zeros(n, dtype=bool)
        holds[inv.rows[fits]] = True
        mask &= holds
        if not mask.any():
            return np.zeros(0, dtype=np.intp)
    for trait in group.required_traits | query.root_required:
        mask &= snapshot.with_trait(trait)
    for trait in group.forbidden_traits | query.root_forbidden:
        mask &= ~snapshot.with_trait(trait)
    for any_of in group.member_of:
        mask &= np.logical_or.reduce([snapshot.in_aggregate(a) for a in any_of])
    for aggregate in group.forbidden_aggregates:
        mask &= ~snapshot.in_aggregate(aggregate)
    return np.flatnonzero(mask)


def candidates(snapshot: ProviderSnapshot, query: AllocationCandidatesQuery, *,
               overlay: Overlay, microversion: str,
               rng: random.Random | None = None) -> Candidates:
    """Placement's answer to ``query`` from ``snapshot`` and this worker's claims since.

    Over ``query.limit`` matching providers, a random sample of that many (as
    Placement with ``randomize_allocation_candidates``): the hosts a request weighs
    are spread over the cloud, not the same first few for every request.
    """
    [group] = [g for g in query.groups if not g.is_empty()]
    rows = matching(snapshot, query, overlay).tolist()
    if query.limit is not None and len(rows) > query.limit:
        rows = sorted((rng or random).sample(rows, query.limit))
    uuids = snapshot.uuids
    requests = [{'allocations': {uuids[row]: {'resources': dict(group.resources)}},
                 'mappings': {'': [uuids[row]]}} for row in rows]
    return Candidates.from_json({'allocation_requests': requests,
                                 'provider_summaries': summaries(snapshot, rows, overlay)},
                                microversion)


def summaries(snapshot: ProviderSnapshot, roots: list[int],
              overlay: Overlay) -> dict[str, dict[str, Any]]:
    """Placement's provider summaries of the trees of ``roots``: every provider of
    each, its capacity and usage per class (plus this worker's claims since the
    read), its traits, parent and root."""
    members = [m for root in roots for m in snapshot.tree(root)] if snapshot.nested else roots
    at = np.array(members, dtype=np.intp)
    uuids = snapshot.uuids
    classes = []
    for rc, inv in snapshot.inventories.items():
        positions, present = inv.locate(at)
        if present.any():
            classes.append((rc, present.tolist(), inv.capacity(positions).tolist(),
                            inv.used[positions].tolist()))
    roots_of = snapshot.roots[at].tolist()
    traits = snapshot.traits
    result: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(members):
        rp = uuids[row]
        claimed = overlay.get(rp)
        resources = {rc: {'capacity': capacity[i],
                          'used': used[i] + (claimed.get(rc, 0) if claimed else 0)}
                     for rc, present, capacity, used in classes if present[i]}
        result[rp] = {'resources': resources, 'traits': list(traits.of(row)),
                      'parent_provider_uuid': snapshot.parent_uuid(row),
                      'root_provider_uuid': uuids[roots_of[i]]}
    return result


def provider_summary(snapshot: ProviderSnapshot, row: int, overlay: Overlay) -> dict[str, Any]:
    """One provider's summary, as :func:`summaries` gives it."""
    rp = snapshot.uuids[row]
    claimed = overlay.get(rp) or {}
    resources = {}
    for rc in snapshot.classes_of(row):
        inv = snapshot.inventories[rc]
        at = inv.position(row)
        if at is not None:
            resources[rc] = {'capacity': int(inv.capacity(at)),
                             'used': int(inv.used[at]) + claimed.get(rc, 0)}
    return {'resources': resources,
            'traits': list(snapshot.traits.of(row)),
            'parent_provider_uuid': snapshot.parent_uuid(row),
            'root_provider_uuid': snapshot.uuids[int(snapshot.roots[row])]}


class Claimed:
    """This worker's claims since the read on one class: where they are in its
    inventory, and how much. A sparse correction of the read's usage rather than
    a copy of it: the claims touch a few providers of tens of thousands, and a
    copy of the column per class per request (a whole column at 50,000 hosts with
    nested trees) was among what a worker's peak held (doc/performance.md)."""

    __slots__ = ('inv', 'at', 'amounts', '_by_position')

    def __init__(self, inv: Inventory, at: np.ndarray, amounts: np.ndarray):
        self.inv, self.at, self.amounts = inv, at, amounts
        self._by_position: dict[int, int] | None = None

    @classmethod
    def of(cls, snapshot: ProviderSnapshot, rc: str, inv: Inventory,
           overlay: Overlay) -> Claimed:
        """The claims of ``overlay`` on ``rc`` at providers ``inv`` holds."""
        at, amounts = [], []
        index = snapshot.index
        for rp, claimed in overlay.items():
            amount = claimed.get(rc)
            row = index.get(rp) if amount else None
            position = inv.position(row) if row is not None else None
            if position is not None:
                at.append(position)
                amounts.append(amount)
        return cls(inv, np.array(at, dtype=np.intp), np.array(amounts, dtype=np.int64))

    def room_for(self, amount: int) -> np.ndarray:
        """Per provider of the inventory, whether ``amount`` more fits within its
        capacity with the claims (Placement's check: ``used + amount <= (total -
        reserved) * allocation_ratio``)."""
        inv, at = self.inv, self.at
        fits = inv.used + amount <= inv.limit
        if len(at):
            fits[at] = inv.used[at] + self.amounts + amount <= inv.limit[at]
        return fits

    def used(self, position: int) -> int:
        """The usage at one position of the inventory, the claims included."""
        if self._by_position is None:
            self._by_position = dict(zip(self.at.tolist(), self.amounts.tolist(), strict=True))
        return int(self.inv.used[position]) + self._by_position.get(position, 0)
