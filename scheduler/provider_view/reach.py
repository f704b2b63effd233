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


@dataclass(frozen=True)
class HeldRows:
    """The table rows of the held hosts among a table's hosts, each with its host (an
    index into ``names``): what :func:`out_of_reach` needs of them that a read of new
    usage does not move. Found once per held set and table build (a search of 50,000
    names' hashes), not before each request."""

    #: the :attr:`SnapshotHosts.host_hashes` they were found in (its identity names
    #: the table build, and so these rows' hosts)
    hashes: np.ndarray
    held: Collection[str]
    #: table rows of held hosts, ascending
    rows: np.ndarray
    #: per row, its host's index in ``names``
    codes: np.ndarray
    names: tuple[str, ...]

    @classmethod
    def of(cls, hosts: SnapshotHosts, held: Collection[str]) -> HeldRows:
        names = hosts.table.host_names
        rows = hosts.rows_of_hosts(held)
        code_of: dict[str, int] = {}
        codes = [code_of.setdefault(names[row], len(code_of)) for row in rows]
        return cls(hosts.host_hashes, held, np.asarray(rows, dtype=np.intp),
                   np.asarray(codes, dtype=np.intp), tuple(code_of))

    def fits(self, hosts: SnapshotHosts, held: Collection[str]) -> bool:
        """Whether these are ``held``'s rows in ``hosts`` (a table of the same build)."""
        return self.hashes is hosts.host_hashes and self.held is held

    def out_of_reach(self, hosts: SnapshotHosts, forbidden: Collection[str]
                     ) -> OutOfReach | None:
        """:func:`out_of_reach` of these hosts in ``hosts`` (for which :meth:`fits`)."""
        if not len(self.rows) or not forbidden:
            return None
        snapshot = hosts.snapshot
        roots = hosts.roots[self.rows]
        marked = np.zeros(len(roots), dtype=bool)
        for trait in forbidden:
            marked |= snapshot.with_trait(trait)[roots]
        # A host is out of reach when none of its roots is left unmarked.
        open_roots = np.bincount(self.codes[~marked], minlength=len(self.names))
        out = marked & (open_roots[self.codes] == 0)
        if not out.any():
            return None
        owners = tuple(self.names[code] for code in self.codes[out].tolist())
        return OutOfReach(snapshot, frozenset(owners), roots[out], owners)


def out_of_reach(hosts: SnapshotHosts, held: Collection[str],
                 forbidden: Collection[str]) -> OutOfReach | None:
    """Of ``held`` (service hosts), those with a root in ``hosts``' snapshot and a
    trait of ``forbidden`` on every one of them; None when there is none. A host
    with no root in the snapshot is not among them: Placement may know one."""
    if not held or not forbidden:
        return None
    return HeldRows.of(hosts, held).out_of_reach(hosts, forbidden)
