"""Which of the compute services held as disabled or down no candidate of a request can
be on: the hosts whose every root carries a trait the request forbids on roots.

Nova reads its services table after Placement has answered, and only its candidates'
rows matter to the decision: a host no candidate is on cannot pass a filter, nor move
another host's weight. Before every request the service reads again the rows of the
services it holds as disabled, forced down or silent (scheduler/catalog/nova_sync.py),
898 of 50,000 in bench.view's cloud, on the database Placement's claims wait for.
Most of them (535) are disabled, and Nova puts ``COMPUTE_STATUS_DISABLED`` on a disabled
compute's root providers, which every request forbids on roots (Nova's
``compute_status_filter``): their rows need no read for it.

The view says which roots carry those traits, in the snapshot it holds when the read
begins; the request is then answered from a later snapshot, or by Placement, so what
its answer holds is checked against the hosts left unread
(:meth:`OutOfReach.reachable_in_rows`, :meth:`OutOfReach.reachable_in_roots`), and
those it can reach are read before its hosts are built.
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from scheduler.provider_view.hosts import SnapshotHosts
from scheduler.provider_view.snapshot import ProviderSnapshot


@dataclass(frozen=True)
class OutOfReach:
    """Hosts whose every root in ``snapshot`` carries a forbidden trait, with those
    roots' snapshot rows (``rows[i]`` is a root of ``owners[i]``)."""

    snapshot: ProviderSnapshot
    hosts: frozenset[str]
    rows: np.ndarray
    owners: tuple[str, ...]

    def only(self, hosts: Collection[str]) -> OutOfReach | None:
        """These hosts of it alone; None when none is."""
        kept = self.hosts.intersection(hosts)
        if not kept:
            return None
        if kept == self.hosts:
            return self
        keep = [i for i, owner in enumerate(self.owners) if owner in kept]
        return OutOfReach(self.snapshot, frozenset(kept), self.rows[keep],
                          tuple(self.owners[i] for i in keep))

    def reachable_in_rows(self, snapshot: ProviderSnapshot, rows: np.ndarray) -> set[str]:
        """Of these hosts, those with a root among ``rows`` (roots of ``snapshot``): all of
        them when ``snapshot`` numbers other providers (one was added or deleted since:
        it may be a new root of one of them)."""
        if snapshot.uuids is not self.snapshot.uuids:
            return set(self.hosts)
        among = np.zeros(len(snapshot), dtype=bool)
        among[rows] = True
        return {self.owners[i] for i in np.flatnonzero(among[self.rows]).tolist()}

    def reachable_in_roots(self, roots: Collection[str]) -> set[str]:
        """Of these hosts, those with a root among ``roots`` (uuids: Placement's answer,
        newer than the snapshot): all of them when a root is one the snapshot does not
        hold (it may be a new root of one of them)."""
        index, uuids = self.snapshot.index, self.snapshot.uuids
        if any(index.get(root) is None for root in roots):
            return set(self.hosts)
        return {owner for row, owner in zip(self.rows.tolist(), self.owners, strict=True)
                if uuids[row] in roots}


def out_of_reach(hosts: SnapshotHosts, held: Collection[str],
                 forbidden: Collection[str]) -> OutOfReach | None:
    """Of ``held`` (service hosts), those with a root in ``hosts``' snapshot and a
    trait of ``forbidden`` on every one of them; None when there is none. A host
    with no root in the snapshot is not among them: Placement may know one."""
    if not held or not forbidden:
        return None
    snapshot = hosts.snapshot
    marked = np.zeros(len(snapshot), dtype=bool)
    for trait in forbidden:
        marked |= snapshot.with_trait(trait)
    if not marked.any():
        return None
    wanted = set(held)
    names = hosts.table.host_names
    roots_of: dict[str, list[int]] = {}
    # A host's table rows, by the hash of its name first (hosts.py keeps no dict of
    # 50,000 names).
    candidates = np.flatnonzero(np.isin(hosts.host_hashes, [hash(h) for h in wanted]))
    for row in candidates.tolist():
        name = names[row]
        if name in wanted:
            roots_of.setdefault(name, []).append(int(hosts.roots[row]))
    owners: list[str] = []
    rows: list[int] = []
    for host, roots in roots_of.items():
        if marked[roots].all():
            owners.extend([host] * len(roots))
            rows.extend(roots)
    if not owners:
        return None
    return OutOfReach(snapshot, frozenset(owners), np.asarray(rows, dtype=np.intp),
                      tuple(owners))
