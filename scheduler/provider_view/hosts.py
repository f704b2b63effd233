"""Every host of a snapshot as one host table, kept from request to request.

Placement's ``limit`` bounds Placement's own work: it computes every candidate,
then answers ``max_placement_results`` of them. A scheduler that decides from a
snapshot pays nothing of that, and weighing a random thousand of ten thousand
hosts costs it decision quality (the best host of the sample is not the best
host; measured in doc/performance.md). So the view decides over every host the
query matches: one :class:`~scheduler.host_table.HostTable` over all root
providers of the snapshot, built once per snapshot and host catalog and shared
by the worker's requests, each of which takes a fork of it (its own usage
columns, this worker's claims since the read added) and a view of the rows
that match its query.

The table's catalog columns (names, service state, counters, aggregates,
instances) are read again only when the catalog changed; a new snapshot of
the same providers only brings new capacity and usage columns.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from scheduler.host_columns import ClassColumn, summed
from scheduler.host_state import HostData
from scheduler.host_table import HostTable, HostView
from scheduler.provider_view.answer import Overlay, provider_summary
from scheduler.provider_view.snapshot import Inventory, ProviderSnapshot

#: A root's allocation requests (by snapshot row), made when its HostState is built.
Requests = Callable[[int], list[dict[str, Any]]]


@dataclass(frozen=True)
class SnapshotHosts:
    """A snapshot's hosts as a table: row ``i`` is the tree of snapshot row ``roots[i]``."""

    snapshot: ProviderSnapshot
    catalog_version: object
    table: HostTable
    #: table row -> snapshot row of its root
    roots: np.ndarray
    #: snapshot row -> table row of its tree (-1: a sharing provider's, in no table row)
    row_of: np.ndarray
    #: the table's roots no host source names, and those whose service host no source
    #: states (asked of the catalog once per table, not per request: at 50,000 hosts
    #: the two questions cost more than the decision)
    unnamed: frozenset[str]
    unresolved: frozenset[str]
    #: per table row, the hash of its service host (to find a host's rows: a dict of
    #: 50,000 names took 7 MB, this 0.4 MB)
    host_hashes: np.ndarray

    def updated(self, snapshot: ProviderSnapshot, catalog: HostData,
                version: object) -> SnapshotHosts | None:
        """These hosts with ``snapshot``'s capacity and usage (the same providers) and
        the rows of the hosts the catalog changed since this table's version read
        again; None when the catalog changed more than named hosts."""
        table, hashes = self.table, self.host_hashes
        if version != self.catalog_version:
            changed = catalog.changed_hosts_since(self.catalog_version)
            if changed is None:
                return None
            names = self.table.host_names
            rows = self.rows_of_hosts(changed)
            if rows:
                table = table.with_rows(rows, catalog)
                # A node moved to another service host is a change of everything to
                # the catalog (a new build); were it ever a named change, the row must
                # still be found by its new name. Otherwise the same array: its identity
                # stands for the build's host names (reach.HeldRows).
                renamed = [row for row in rows if table.host_names[row] != names[row]]
                if renamed:
                    hashes = hashes.copy()
                    hashes[renamed] = [hash(table.host_names[row]) for row in renamed]
        if snapshot is not self.snapshot:
            table = table.with_usage(*_usage_columns(snapshot, self.roots, self.row_of,
                                                     since=(self.snapshot, table)))
        return replace(self, snapshot=snapshot, catalog_version=version, table=table,
                       host_hashes=hashes)

    def rows_of_hosts(self, hosts: Collection[str]) -> list[int]:
        """The table rows (ascending) whose service host is one of ``hosts``: by the
        hash of its name first (no dict of 50,000 names is kept), then the name."""
        wanted = hosts if isinstance(hosts, (set, frozenset)) else set(hosts)
        names = self.table.host_names
        candidates = np.flatnonzero(np.isin(self.host_hashes, [hash(h) for h in wanted]))
        return [row for row in candidates.tolist() if names[row] in wanted]

    def view(self, matching: np.ndarray, resources: Mapping[str, int],
             overlay: Overlay, *, busy: bool = False,
             requests: Requests | None = None) -> HostView:
        """The hosts of the snapshot rows ``matching`` (roots), for one request asking
        ``resources`` (over all its groups), with this worker's claims since the
        read; ``busy``: the worker decides while its requests come back to back
        (and so, under load, do the others'). Each host's allocation request takes
        all of ``resources`` from its root, or ``requests`` gives them."""
        summaries = _Summaries(self.snapshot, overlay)
        per_row: Sequence[list[dict[str, Any]]] = (
            _Requests(self.table.roots, dict(resources)) if requests is None
            else _TreeRequests(self.roots, requests))
        table = self.table.fork(requests=per_row, summaries=summaries)
        table.request_resources = dict(resources)
        table.concurrent = busy
        index = self.snapshot.index
        for rp, amounts in overlay.items():
            at = index.get(rp)
            row = int(self.row_of[at]) if at is not None else -1
            if row < 0:
                continue
            for rc, amount in amounts.items():
                table.add_used(rc, row, amount)
                table.concurrent = True
        rows = self.row_of[matching]
        return HostView(table, rows[rows >= 0])


class ViewTables:
    """The latest :class:`SnapshotHosts` of one worker (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: SnapshotHosts | None = None
        #: Tables built from scratch, and tables that took only new usage (for tests).
        self.built = 0
        self.updated = 0

    def latest(self) -> SnapshotHosts | None:
        """The table the last request (or the warm-up) took, without building one."""
        with self._lock:
            return self._latest

    def hosts(self, snapshot: ProviderSnapshot, catalog: HostData, *,
              default_availability_zone: str) -> SnapshotHosts:
        version = catalog.versions()
        with self._lock:
            latest = self._latest
            if latest is not None and latest.snapshot is snapshot \
                    and latest.catalog_version == version:
                return latest
            hosts = None
            # The same providers (a read of what changed keeps its uuid list, and a
            # whole read of the same providers takes the last one's): only capacity
            # and usage moved, and the catalog's rows of a few hosts, if any.
            if latest is not None and latest.snapshot.uuids is snapshot.uuids:
                hosts = latest.updated(snapshot, catalog, version)
            if hosts is None:
                hosts = _build(snapshot, catalog, version, default_availability_zone)
                self.built += 1
            else:
                self.updated += 1
            self._latest = hosts
            return hosts


def _build(snapshot: ProviderSnapshot, catalog: HostData, version: object,
           default_availability_zone: str) -> SnapshotHosts:
    n = len(snapshot)
    is_root = snapshot.roots == np.arange(n)
    roots = np.flatnonzero(is_root & ~snapshot.with_trait(_SHARING)).astype(np.intp)
    row_of = np.full(n, -1, dtype=np.intp)
    row_of[roots] = np.arange(len(roots), dtype=np.intp)
    row_of = row_of[snapshot.roots]        # every provider -> its tree's row
    capacity, used = _usage_columns(snapshot, roots, row_of)
    uuids = snapshot.uuids
    root_uuids = [uuids[r] for r in roots.tolist()]
    table = HostTable.from_columns(
        root_uuids, capacity, used, catalog,
        trees=_Trees(snapshot, roots), default_availability_zone=default_availability_zone)
    return SnapshotHosts(snapshot, version, table, roots, row_of,
                         frozenset(catalog.unknown_provider_uuids(root_uuids)),
                         frozenset(catalog.unresolved_providers(root_uuids)),
                         np.fromiter(map(hash, table.host_names), dtype=np.int64,
                                     count=len(table)))


def _usage_columns(snapshot: ProviderSnapshot, roots: np.ndarray, row_of: np.ndarray, *,
                   since: tuple[ProviderSnapshot, HostTable] | None = None
                   ) -> tuple[dict[str, ClassColumn], dict[str, ClassColumn]]:
    """Capacity and usage per class, summed over each table row's tree (sparse for a
    class few trees hold); ``since``: an earlier snapshot of the same providers and
    its table, whose columns are kept for the classes whose inventories (or usage)
    did not change (a read of what changed moves a few providers' usage of a few
    classes)."""
    capacity: dict[str, ClassColumn] = {}
    used: dict[str, ClassColumn] = {}
    for rc, inv in snapshot.inventories.items():
        before = since[0].inventories.get(rc) if since is not None else None
        if since is not None and before is not None and rc in since[1].capacity and all(
                a is b for a, b in zip(inv.static_values(), before.static_values(),
                                       strict=True)):
            capacity[rc] = since[1].capacity[rc]
            if before.used is inv.used and rc in since[1].used:
                used[rc] = since[1].used[rc]
                continue
        else:
            capacity[rc] = _per_row(snapshot, inv, inv.capacity(), roots, row_of)
        used[rc] = _per_row(snapshot, inv, inv.used, roots, row_of)
    return capacity, used


def _per_row(snapshot: ProviderSnapshot, inv: Inventory, values: np.ndarray,
             roots: np.ndarray, row_of: np.ndarray) -> ClassColumn:
    """``values`` (aligned with ``inv``) summed per table row."""
    rows = row_of[inv.rows]
    counted = rows >= 0         # not a sharing provider's
    return summed(len(roots), rows[counted], values[counted], once=not snapshot.nested)


_SHARING = 'MISC_SHARES_VIA_AGGREGATE'


class _Trees(Sequence[list[str]]):
    """Per table row, the uuids of its tree's providers (read when a HostState is built).

    Holds what every snapshot of the same providers shares, not the snapshot: the
    table outlives it, and would keep its columns alive."""

    def __init__(self, snapshot: ProviderSnapshot, roots: np.ndarray):
        self._uuids, self._trees, self._roots = snapshot.uuids, snapshot.trees, roots

    def __len__(self) -> int:
        return len(self._roots)

    def __getitem__(self, row: Any) -> Any:
        uuids, root = self._uuids, int(self._roots[row])
        return [uuids[m] for m in self._trees.get(root) or [root]]


class _Requests(Sequence[list[dict[str, Any]]]):
    """Per table row, its one allocation request: everything from the root."""

    def __init__(self, roots: list[str], resources: dict[str, int]):
        self._roots, self._resources = roots, resources

    def __len__(self) -> int:
        return len(self._roots)

    def __getitem__(self, row: Any) -> Any:
        root = self._roots[row]
        return [{'allocations': {root: {'resources': dict(self._resources)}},
                 'mappings': {'': [root]}}]


class _TreeRequests(Sequence[list[dict[str, Any]]]):
    """Per table row, the allocation requests the search found on its tree."""

    def __init__(self, roots: np.ndarray, requests: Requests):
        self._roots, self._requests = roots, requests

    def __len__(self) -> int:
        return len(self._roots)

    def __getitem__(self, row: Any) -> Any:
        return self._requests(int(self._roots[row]))


class _Summaries(Mapping[str, dict[str, Any]]):
    """Placement's provider summary of any provider of the snapshot, with the
    worker's claims since the read (read when a HostState is built)."""

    def __init__(self, snapshot: ProviderSnapshot, overlay: Overlay):
        self._snapshot, self._overlay = snapshot, overlay

    def __getitem__(self, rp: str) -> dict[str, Any]:
        return provider_summary(self._snapshot, self._snapshot.index[rp], self._overlay)

    def __iter__(self) -> Iterator[str]:
        return iter(self._snapshot.uuids)

    def __len__(self) -> int:
        return len(self._snapshot.uuids)
