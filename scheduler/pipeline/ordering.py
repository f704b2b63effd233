"""Ordering and alternates: the pure parts of choosing hosts.

Filters and weighers live in their own packages; this module turns weighed
hosts into the order the claim loop walks, and picks alternates.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np

from scheduler.host_state import HostState
from scheduler.host_table import HostView, OrderedView, WeighedHost, as_view, as_weighed_view
from scheduler.objects.spec import RequestSpec
from scheduler.pipeline import spread


def order_hosts(weighed: Sequence[WeighedHost], *, host_subset_size: int,
                shuffle_best_same_weighed_hosts: bool, rng: random.Random,
                near_best_tolerance: float = 0.0,
                precedence: Callable[[Sequence[str], np.ndarray | None], np.ndarray] | None = None
                ) -> HostView:
    """Nova's ordering (``SchedulerManager._get_sorted_hosts``): ``weighed`` is
    sorted, best first (a :class:`~scheduler.host_table.WeighedView`; a list
    becomes one).

    Optionally shuffle the hosts tied at the top weight (with
    ``near_best_tolerance``, every host within that fraction of the best weight;
    with ``precedence`` of the hosts' uuids and room too, as :func:`.spread.arrange`
    says, reaching as far as :func:`.spread.reach` says),
    then move one host picked at random from the first ``host_subset_size`` to the
    front; the rest keep their order. Only that head is
    worked out here: the rest of the order is read from the weighed view as far as
    the claim loop walks.
    """
    weighed = as_weighed_view(weighed)
    if not len(weighed):
        return HostView(weighed.table, np.zeros(0, dtype=np.intp))
    head: list[int] = []
    if precedence is not None and near_best_tolerance > 0:
        def groups(positions: list[int]) -> np.ndarray:
            return precedence(weighed.uuids_at(positions),
                              weighed.table.room(weighed.rows_at(positions)))
        near = weighed.order(weighed.count_best(near_best_tolerance)).tolist()
        near_groups = groups(near)
        factor = spread.reach(near_groups, concurrent=weighed.table.concurrent)
        beyond = (weighed.order(weighed.count_best(near_best_tolerance * factor))[len(near):]
                  .tolist() if factor else [])
        head = spread.arrange(near, near_groups, beyond, groups(beyond), rng)
    elif shuffle_best_same_weighed_hosts or near_best_tolerance > 0:
        head = weighed.order(weighed.count_best(near_best_tolerance)).tolist()
        rng.shuffle(head)
    subset = min(max(host_subset_size, 1), len(weighed))
    if subset > 1:
        if len(head) < subset:
            head += weighed.order(subset)[len(head):].tolist()
        chosen = rng.randrange(subset)
        head.insert(0, head.pop(chosen))
    return OrderedView(weighed, head)


def prefilter_hosts(hosts: Sequence[HostState],
                    spec: RequestSpec) -> tuple[HostView, dict[str, int]]:
    """Nova's pre-filter host restrictions (``HostManager.get_filtered_hosts``),
    with counts of removals.

    A requested destination keeps only that host (and node), and only hosts in
    its cell unless it allows a cross-cell move (Nova's HostManager reads only
    that cell's compute nodes); ``ignore_hosts`` removes hosts by name
    (case-insensitive); ``force_hosts``/``force_nodes`` keep only the named ones.
    """
    kept = as_view(hosts)
    removed: dict[str, int] = {}

    def narrow(to: HostView, why: str) -> None:
        nonlocal kept
        if len(to) != len(kept):
            removed[why] = removed.get(why, 0) + len(kept) - len(to)
        kept = to

    def keep(predicate: Callable[[str, str], bool], why: str) -> None:
        narrow(kept.keep_names(predicate), why)

    dest = spec.requested_destination
    if dest is not None and dest.cell is not None and not dest.allow_cross_cell_move:
        narrow(kept.keep_cell(dest.cell.uuid), 'not in the requested cell')
    if dest is not None and dest.host:
        keep(lambda host, node: host == dest.host and (not dest.node or node == dest.node),
             'not the requested destination')
    if spec.ignore_hosts:
        ignored = {h.lower() for h in spec.ignore_hosts}
        keep(lambda host, node: host.lower() not in ignored, 'in ignore_hosts')
    if spec.force_hosts:
        forced = {h.lower() for h in spec.force_hosts}
        keep(lambda host, node: host.lower() in forced, 'not in force_hosts')
    if spec.force_nodes:
        nodes = set(spec.force_nodes)
        keep(lambda host, node: node in nodes, 'not in force_nodes')
    return kept, removed


def pick_alternates(ordered: Sequence[HostState], *, chosen: HostState,
                    selected: set[str], num_alternates: int) -> list[HostState]:
    """Hosts in ``chosen``'s cell, not chosen for any instance of this request,
    that still have candidates; at most ``num_alternates``, in order."""
    alternates: list[HostState] = []
    if num_alternates <= 0:
        return alternates
    for host in ordered:
        if len(alternates) >= num_alternates:
            break
        if (host.uuid in selected or host.cell_uuid != chosen.cell_uuid
                or first_fitting(host) is None):
            continue
        alternates.append(host)
    return alternates


def first_fitting(host: HostState):
    """The first of the host's allocation requests that still fits it, or None."""
    return next((a for a in host.allocation_candidates if host.fits(a)), None)
