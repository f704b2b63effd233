"""Placement's answer to a query of several request groups, or of classes held
below the roots, tree by tree (pure).

Which hosts Placement answers is decided exactly: a root is answered when its
tree has one combination Placement accepts (:mod:`.groups` finds each slot's
providers, :mod:`.search` a combination that fits together). What it says of a
host is a few of Placement's allocation requests, not all of them: each is one
Placement returns (the same providers and amounts, the same mappings), found
without building the product Placement builds, and only for the hosts a
request looks at (the first decides whether the host is answered, the others
are found when its HostState is built). The provider summaries are Placement's:
every provider of each answered tree (``_build_provider_summaries``).

With sharing providers, Placement answers per *anchor* root: its tree's
providers and the sharing providers that serve it (:mod:`.groups`). A host is a
root, not itself sharing, with an answer that takes something from its own
tree: an answer all from sharing providers names no provider of it (Placement
merges such answers of every anchor into one, and its summaries, which cover
only the trees its answers take from, leave the anchor out). The summaries then
cover the hosts' trees and each sharing provider's tree some answer, of any
anchor, takes from.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from placement_client.models import Candidates
from placement_client.query import AllocationCandidatesQuery
from scheduler.host_state import SHARING_TRAIT
from scheduler.provider_view import groups
from scheduler.provider_view.answer import Claimed, Overlay, summaries
from scheduler.provider_view.search import BUDGET, Rules, assignments
from scheduler.provider_view.snapshot import ProviderSnapshot

#: Allocation requests answered per host: the claim tries up to
#: ``max_claim_candidates_per_host`` (3) of them, and one more is spare.
REQUESTS_PER_ROOT = 4


@dataclass
class TreeAnswer:
    """The roots (snapshot rows, ascending) whose trees hold the query, and their
    allocation requests on demand."""

    snapshot: ProviderSnapshot
    found: groups.Candidates
    roots: np.ndarray
    per_root: int = REQUESTS_PER_ROOT
    _requests: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    def requests(self, root: int) -> list[dict[str, Any]]:
        """Up to :attr:`per_root` of Placement's allocation requests on ``root``'s tree."""
        found = self._requests.get(root)
        if found is None:
            rules = self.found.rules
            found = self._requests[root] = [
                allocation_request(rules, assignment, self.snapshot.uuids)
                for assignment in assignments(rules, self.found.cloud, self.found.by_root[root],
                                              limit=self.per_root,
                                              touch=touch(self.snapshot, self.found, root))]
        return found

    def sharing_used(self) -> list[int]:
        """The sharing providers' roots (ascending) whose trees some answer, of any
        anchor, takes resources from: Placement summarises those trees too."""
        snapshot, found = self.snapshot, self.found
        resourced = [i for i, slot in enumerate(found.rules.slots) if slot.resources]
        used = []
        for sharer in snapshot.sharing_rows.tolist():
            tree = frozenset(snapshot.tree(sharer))
            anchors = [a for a in found.roots.tolist()
                       if any(tree.intersection(found.by_root[a][i]) for i in resourced)]
            # Its own tree first: the anchor that surely has it among its candidates.
            anchors.sort(key=lambda a: a != sharer)
            if any(assignments(found.rules, found.cloud, found.by_root[a], limit=1, touch=tree)
                   for a in anchors):
                used.append(sharer)
        return used


def answer(snapshot: ProviderSnapshot, query: AllocationCandidatesQuery, overlay: Overlay,
           *, per_root: int = REQUESTS_PER_ROOT, budget: int = BUDGET) -> TreeAnswer:
    """The roots that hold ``query`` with this worker's claims since the read
    (``overlay``). Only for a query :func:`.answer.why_not_exact` accepts;
    :class:`.search.Unsettled` when a tree could not be decided within ``budget``."""
    classes = {rc for g in query.groups for rc in g.resources}
    claimed = {rc: Claimed.of(snapshot, rc, snapshot.inventories[rc], overlay)
               for rc in classes if rc in snapshot.inventories}
    found = groups.candidates(snapshot, query, claimed)
    rules, cloud = found.rules, found.cloud
    sharing = snapshot.with_trait(SHARING_TRAIT) if snapshot.sharing else None
    settled, held = _settled_without_search(snapshot, found)
    # As columns, the roots a search settles alone taken one by one: most requests
    # settle every root, and a Python int and bool per root of 50,000 (three lists
    # of them) was most of what a request allocated besides its answer.
    eligible = (np.ones(len(found.roots), dtype=bool) if sharing is None
                else ~sharing[found.roots])
    kept = settled & held & eligible
    for at in np.flatnonzero(~settled & eligible).tolist():
        root = int(found.roots[at])
        kept[at] = bool(assignments(rules, cloud, found.by_root[root], limit=1, budget=budget,
                                    touch=touch(snapshot, found, root)))
    return TreeAnswer(snapshot, found, found.roots[kept].astype(np.intp, copy=False), per_root)


def _settled_without_search(snapshot: ProviderSnapshot, found: groups.Candidates
                            ) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate root, whether its tree is settled without a search, and if so
    whether it holds the query.

    A tree whose unsuffixed group's providers lack, all of them, one of its
    required traits holds no combination with them (the search would try every
    one to find so: a flat flavor asking a CPU trait at 50,000 hosts with NUMA
    nodes took 28 ms a request, 4 ms since: bench.match). The others are settled
    by the query's shape (:func:`_settled_by_shape`)."""
    settled, held = _settled_by_shape(snapshot, found)
    # Held there, a tree has the traits on its root, one of its unsuffixed providers.
    return settled | ~found.traits_within, held


def _settled_by_shape(snapshot: ProviderSnapshot, found: groups.Candidates
                      ) -> tuple[np.ndarray, np.ndarray]:
    """A slot's candidates have room for it on their own. When the slots cannot
    take from one provider together (no two ask one class, or only granular groups
    under ``isolate`` do, which never share one), and no other rule binds them
    (``same_subtree``, the unsuffixed group's required traits, a sharing provider
    that could make a combination take nothing of the tree), the tree holds the
    query when its granular groups find distinct providers under ``isolate`` and
    always otherwise. That is settled here when the granular groups under
    ``isolate`` all ask the same (two vGPUs of a type on different pGPUs): a
    tree with as many candidates as groups. Otherwise, for a query of the
    unsuffixed group alone: a tree whose every class only the root may give has
    one combination, which holds the traits if the root does; without sharing
    providers, a root that has the traits and may give one of the classes holds
    it too; the other trees are searched.
    Flavors on a cloud where some hosts report NUMA nodes in Placement (MEMORY_MB
    held below roots), or asking a vGPU or a PCI device in a group of its own,
    are settled here for every host: at 10,000 hosts, a flat flavor took 417 ms
    of searches a request before, 3 ms since."""
    rules = found.rules
    count = len(found.roots)
    granular = [s for s, slot in enumerate(rules.slots) if slot.granular]
    isolated = rules.isolate and len(granular) > 1
    askers: dict[str, list[int]] = {}
    for s, slot in enumerate(rules.slots):
        for rc, _ in slot.resources:
            askers.setdefault(rc, []).append(s)
    apart = all(len(slots) == 1 or (isolated and set(slots) <= set(granular))
                for slots in askers.values())
    if apart and not rules.same_subtree and not rules.traits and not snapshot.sharing:
        everything = np.ones(count, dtype=bool)
        if not isolated:
            return everything, everything
        if all(rules.slots[b].twin == a for a, b in itertools.pairwise(granular)):
            return everything, found.by_root.sizes(granular[0]) >= len(granular)
    if granular:
        return np.zeros(count, dtype=bool), np.zeros(count, dtype=bool)
    root_has = np.ones(count, dtype=bool)
    for trait in rules.traits:
        root_has &= snapshot.with_trait(trait)[found.roots]
    if snapshot.sharing:
        return found.alone, found.alone & root_has
    # A root with the traits that may give one class holds the query: the root for
    # that class, any candidate for the others.
    by_root = root_has & found.root_serves
    return found.alone | by_root, (found.alone & root_has) | by_root


def touch(snapshot: ProviderSnapshot, found: groups.Candidates, root: int) -> frozenset[int] | None:
    """The rows of ``root``'s tree when an answer could take all its resources from
    sharing providers of other trees (the search must then find one that does not);
    None when none could (a slot with resources has only its tree's providers)."""
    if not snapshot.sharing:
        return None
    roots = snapshot.roots
    if all(any(roots[row] != root for row in rows)
           for slot, rows in zip(found.rules.slots, found.by_root[root], strict=True)
           if slot.resources):
        return frozenset(snapshot.tree(root))
    return None


def candidates(snapshot: ProviderSnapshot, query: AllocationCandidatesQuery, *,
               overlay: Overlay, microversion: str,
               per_root: int = REQUESTS_PER_ROOT) -> Candidates:
    """:func:`answer` as Placement's JSON: up to ``per_root`` allocation requests per
    answered root, and the summaries of every provider of those trees."""
    found = answer(snapshot, query, overlay, per_root=per_root)
    roots = found.roots.tolist()
    requests = [request for root in roots for request in found.requests(root)]
    trees = sorted(roots + found.sharing_used()) if snapshot.sharing else roots
    return Candidates.from_json({'allocation_requests': requests,
                                 'provider_summaries': summaries(snapshot, trees, overlay)},
                                microversion)


def allocation_request(rules: Rules, assignment: tuple[int, ...],
                       uuids: list[str]) -> dict[str, Any]:
    """The allocation request of one assignment, as Placement writes it: what each
    provider gives, summed over the groups it serves, and which providers serve
    each group (a resourceless group's provider in its mapping only)."""
    allocations: dict[str, dict[str, int]] = {}
    mappings: dict[str, list[str]] = {}
    for slot, row in zip(rules.slots, assignment, strict=True):
        rp = uuids[row]
        for rc, amount in slot.resources:
            given = allocations.setdefault(rp, {})
            given[rc] = given.get(rc, 0) + amount
        providers = mappings.setdefault(slot.suffix, [])
        if rp not in providers:
            providers.append(rp)
    return {'allocations': {rp: {'resources': given} for rp, given in allocations.items()},
            'mappings': mappings}
