"""Host states as columns: one row per compute host of one Placement answer.

Nova builds one Python object per host for every request and runs every
filter and weigher host by host; at thousands of hosts that loop *is* the
scheduler's cost. Here the answer is read once into per-column arrays
(capacity and usage per resource class summed over each host's tree, service
state, counters from the host catalog), so that the built-in filters and
weighers judge all hosts with a few array operations
(:meth:`BaseHostFilter.filter_rows`, :meth:`BaseHostWeigher.raw_weights`).
A :class:`~scheduler.host_state.HostState` is built only for a host that
something needs as an object: a plugin written the simple per-host way, the
hosts the claim loop walks, the alternates, an explanation. Decisions are the
same as the per-host path's (``tests/unit/test_host_table.py`` compares them on
random inputs).

A materialised HostState stays the single source of truth for its host: its
:meth:`~scheduler.host_state.HostState.consume` writes the new usage back into
the columns, so later instances of the same request see it either way.
"""
from __future__ import annotations

import collections
import datetime
import functools
import logging
import math
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from placement_client.models import AllocationRequest, Candidates, summary_from_json
from scheduler.filters.base import host_label
from scheduler.host_state import SHARING_TRAIT, HostData, HostRecord, HostState

if TYPE_CHECKING:
    from scheduler.objects.spec import Aggregate

# The multiplier warning keeps the logger it always had, which log configs may name.
_WEIGHTS_LOG = logging.getLogger('scheduler.weights.base')

_EPOCH_NAN = float('nan')


# What weighing hands out (weights/base.py uses them too); here, below the weighers.
@dataclass
class WeighedHost:
    """A host with its total weight and each weigher's share of it."""

    host: HostState
    weight: float = 0.0
    #: weigher class name -> multiplier * normalised value
    contributions: dict[str, float] = field(default_factory=dict)

    @property
    def obj(self) -> HostState:
        """Nova's WeighedObject attribute, for weighers that override weigh_objects."""
        return self.host

    def __repr__(self) -> str:
        return f'WeighedHost({host_label(self.host)!r}, {self.weight:.4f})'


def multiplier_from_values(option_name: str, values: set[str],
                           config_value: float) -> float:
    """:func:`get_weight_multiplier` from the metadata values of one host's aggregates."""
    if not values:
        return float(config_value)
    try:
        parsed = [float(v) for v in values]
        if not all(math.isfinite(v) for v in parsed):
            raise ValueError('not a finite number')
    except (TypeError, ValueError):
        _warn_unparsable(option_name, tuple(sorted(map(str, values))))
        return float(config_value)
    return min(parsed)


@functools.lru_cache(maxsize=256)
def _warn_unparsable(option_name: str, values: tuple[str, ...]) -> None:
    # Cached so that one bad aggregate logs once, not once per host per request.
    _WEIGHTS_LOG.warning('Could not decode aggregate metadata %s=%s as a weight multiplier; '
                         'using the configured value', option_name, list(values))


def _stat(stats: Mapping[str, str], key: str) -> int:
    # As HostState reads them: missing or empty counts as 0.
    return int(stats.get(key, 0) or 0)


def _record_values(r: HostRecord) -> tuple[Any, ...]:
    """What a table reads from one catalog record, derived once per record
    (:attr:`HostRecord.table_values`): host, node, cell, disabled, forced down,
    heartbeat as a timestamp, the three counters parsed from stats, hypervisor
    version, whether PCI pools are known, supported instances."""
    values = r.table_values
    if values is None:
        # Concurrent requests may both derive it; they derive the same values.
        values = r.table_values = (
            r.service_host, r.nodename, r.cell_uuid, r.disabled, r.forced_down,
            _EPOCH_NAN if r.last_seen_up is None else _timestamp(r.last_seen_up),
            _stat(r.stats, 'failed_builds'), _stat(r.stats, 'io_workload'),
            _stat(r.stats, 'num_instances'), r.hypervisor_version or 0,
            bool(getattr(r, 'pci_pools', None)), r.supported_instances)
    return values


class HostTable:
    """The compute hosts of one Placement answer, as columns (row = host)."""

    def __init__(self, candidates: Candidates, catalog: HostData, *,
                 default_availability_zone: str = 'nova'):
        self.default_availability_zone = default_availability_zone
        summaries = candidates.raw_summaries()
        root_of: dict[str, str] = {}
        sharing: set[str] = set()
        for rp, s in summaries.items():
            root = root_of[rp] = s.get('root_provider_uuid') or rp
            if root == rp and SHARING_TRAIT in s.get('traits', ()):
                sharing.add(rp)

        # Allocation requests per host (root provider), in Placement's order; a
        # request touching several trees belongs to each (scheduler.host_state.host_roots).
        by_root: collections.defaultdict[str, list[Mapping[str, Any]]] = (
            collections.defaultdict(list))
        for request in candidates.raw_requests():
            allocations = request['allocations']
            if len(allocations) == 1:
                rp = next(iter(allocations))
                root = root_of.get(rp, rp)
                if root not in sharing:
                    by_root[root].append(request)
                continue
            roots: list[str] = []
            for rp in allocations:
                root = root_of.get(rp, rp)
                if root not in sharing and root not in roots:
                    roots.append(root)
            for root in roots:
                by_root[root].append(request)

        self.roots: list[str] = list(by_root)
        self._requests: list[list[Mapping[str, Any]]] = list(by_root.values())
        n = len(self.roots)
        self.index: dict[str, int] = {root: i for i, root in enumerate(self.roots)}
        self._summaries = summaries
        self._trees: list[list[str]] = [[] for _ in range(n)]
        capacity: dict[str, list[int]] = {}
        used: dict[str, list[int]] = {}
        index = self.index
        trees = self._trees
        for rp, summary in summaries.items():
            row = index.get(root_of[rp])
            if row is None:
                continue
            trees[row].append(rp)
            for rc, usage in summary.get('resources', {}).items():
                column = capacity.get(rc)
                if column is None:
                    column = capacity[rc] = [0] * n
                    used[rc] = [0] * n
                column[row] += int(usage['capacity'])
                used[rc][row] += int(usage['used'])
        self.capacity: dict[str, np.ndarray] = {
            rc: np.array(v, dtype=np.int64) for rc, v in capacity.items()}
        self.used: dict[str, np.ndarray] = {
            rc: np.array(v, dtype=np.int64) for rc, v in used.items()}

        rows = catalog.host_rows(self.roots)
        self.records: list[HostRecord] = [r[0] for r in rows]
        self.aggregates: list[tuple[Aggregate, ...]] = [r[1] for r in rows]
        self.instances: list[tuple[str, ...]] = [r[2] for r in rows]
        self.instance_info_known: list[bool] = [r[3] for r in rows]
        records = self.records
        (host_names, nodenames, cells, disabled, forced_down, last_seen_up, failed_builds,
         io_ops, stat_instances, hypervisor_version, pci_data, supported) = (
            zip(*map(_record_values, records), strict=True) if records else ((),) * 12)
        self.host_names: list[str] = list(host_names)
        self.nodenames: list[str] = list(nodenames)
        self.cells: list[str] = list(cells)
        self.disabled = np.array(disabled, dtype=bool)
        self.forced_down = np.array(forced_down, dtype=bool)
        self.last_seen_up = np.array(last_seen_up, dtype=np.float64)
        self.failed_builds = np.array(failed_builds, dtype=np.int64)
        self.num_io_ops = np.array(io_ops, dtype=np.int64)
        self.num_instances = np.maximum(
            np.array([len(inst) for inst in self.instances], dtype=np.int64),
            np.array(stat_instances, dtype=np.int64))
        self.hypervisor_version = np.array(hypervisor_version, dtype=np.float64)
        # Hosts that may have PCI device pools (PCIWeigher looks only at them).
        self.pci_data = np.array(pci_data, dtype=bool)
        # Distinct supported_instances lists, and each row's: hosts of one kind
        # share a verdict (ImagePropertiesFilter).
        codes: dict[tuple, int] = {}
        by_identity: dict[int, int] = {}  # the catalog shares equal lists between hosts
        self.supported_values: list[Any] = []
        supported_codes = []
        for value in supported:
            code = by_identity.get(id(value))
            if code is None:
                key = tuple(tuple(e) if isinstance(e, (list, tuple)) else e
                            for e in value or ())
                code = codes.get(key)
                if code is None:
                    code = codes[key] = len(self.supported_values)
                    self.supported_values.append(value)
                by_identity[id(value)] = code
            supported_codes.append(code)
        self.supported_codes = np.array(supported_codes, dtype=np.intp)
        # Aggregates -> rows, for per-aggregate weight multipliers.
        aggregate_rows: dict[str, tuple[Aggregate, list[int]]] = {}
        for row, aggregates in enumerate(self.aggregates):
            for aggregate in aggregates:
                entry = aggregate_rows.get(aggregate.uuid)
                if entry is None:
                    aggregate_rows[aggregate.uuid] = (aggregate, [row])
                else:
                    entry[1].append(row)
        self._aggregate_rows: list[tuple[Aggregate, np.ndarray]] = [
            (aggregate, np.array(rows_of, dtype=np.intp))
            for aggregate, rows_of in aggregate_rows.values() if aggregate.metadata]
        self._multipliers: dict[tuple[str, float], np.ndarray | None] = {}
        self._instance_rows: dict[str, list[int]] | None = None
        self._hosts: list[HostState | None] = [None] * n

    def __len__(self) -> int:
        return len(self.roots)

    def view(self) -> HostView:
        """Every host, in Placement's order."""
        return HostView(self, np.arange(len(self.roots), dtype=np.intp))

    # Columns the built-in plugins read ------------------------------------------------
    def column(self, rc: str, kind: str) -> np.ndarray:
        """``capacity`` or ``used`` of ``rc`` per row (zeros where no host has it)."""
        columns = self.capacity if kind == 'capacity' else self.used
        column = columns.get(rc)
        if column is None:
            column = columns[rc] = np.zeros(len(self.roots), dtype=np.int64)
        return column

    def free(self, rc: str) -> np.ndarray:
        return self.column(rc, 'capacity') - self.column(rc, 'used')

    def label(self, row: int) -> str:
        """:func:`scheduler.filters.base.host_label` of the row's host."""
        host, node = self.host_names[row], self.nodenames[row]
        return host if not node or node == host else f'{host} ({node})'

    def multiplier(self, option: str, config_value: float,
                   rows: np.ndarray) -> np.ndarray | float:
        """:func:`~scheduler.weights.base.get_weight_multiplier`'s answer for
        ``rows``: one float when no aggregate of theirs sets ``option``."""
        key = (option, float(config_value))
        if key not in self._multipliers:
            self._multipliers[key] = self._multiplier_column(option, config_value)
        column = self._multipliers[key]
        return float(config_value) if column is None else column[rows]

    def _multiplier_column(self, option: str, config_value: float) -> np.ndarray | None:
        setting = [(aggregate.metadata[option], rows) for aggregate, rows in self._aggregate_rows
                   if option in aggregate.metadata]
        if not setting:
            return None
        result = np.full(len(self.roots), float(config_value), dtype=np.float64)
        if len(setting) == 1:
            # The usual case: one aggregate sets it, its hosts take its value.
            value, rows = setting[0]
            result[rows] = multiplier_from_values(option, {value}, config_value)
        elif setting:
            values: dict[int, set[str]] = {}
            for value, rows in setting:
                for row in rows.tolist():
                    values.setdefault(row, set()).add(value)
            by_set: dict[frozenset[str], float] = {}
            for row, found in values.items():
                frozen = frozenset(found)
                if frozen not in by_set:
                    by_set[frozen] = multiplier_from_values(option, found, config_value)
                result[row] = by_set[frozen]
        return result

    def members_on_rows(self, members: Sequence[str]) -> np.ndarray:
        """Per row, how many of ``members`` (instance uuids) run on the host."""
        if self._instance_rows is None:
            self._instance_rows = {}
            for row, uuids in enumerate(self.instances):
                for instance_uuid in uuids:
                    self._instance_rows.setdefault(instance_uuid, []).append(row)
        counts = np.zeros(len(self.roots), dtype=np.int64)
        for member in set(members):
            for row in self._instance_rows.get(member, ()):
                counts[row] += 1
        return counts

    # Objects, only where needed ------------------------------------------------------
    def host(self, row: int) -> HostState:
        """The row's HostState, built on first use and kept."""
        host = self._hosts[row]
        if host is None:
            host = self._hosts[row] = self._materialise(row)
        return host

    def _materialise(self, row: int) -> HostState:
        root = self.roots[row]
        record = self.records[row]
        host = HostState(
            uuid=root, record=record,
            summaries=[summary_from_json(rp, self._summaries[rp]) for rp in self._trees[row]],
            allocation_candidates=[AllocationRequest.from_json(r) for r in self._requests[row]],
            aggregates=list(self.aggregates[row]),
            instances={u: {'uuid': u} for u in self.instances[row]},
            instance_info_known=self.instance_info_known[row],
            default_availability_zone=self.default_availability_zone)
        # A weak reference: the table holds its hosts, and a cycle back to it would
        # keep a whole Placement answer alive until the collector ran (measured:
        # half of a request's CPU went to collecting them, and a worker answering
        # 50,000-host requests grew by 200 MB per request).
        table = weakref.ref(self)

        def consumed(state: HostState, row: int = row) -> None:
            owner = table()
            if owner is not None:
                owner._consumed(row, state)
        host.on_consume = consumed
        return host

    def _consumed(self, row: int, host: HostState) -> None:
        for rc, amount in host.used.items():
            self.column(rc, 'used')[row] = amount
        self.num_instances[row] = host.num_instances
        self.num_io_ops[row] = host.num_io_ops
        known = set(self.instances[row])
        new = [u for u in host.instances if u not in known]
        self.instances[row] = tuple(host.instances)
        if self._instance_rows is not None:
            for instance_uuid in new:
                self._instance_rows.setdefault(instance_uuid, []).append(row)


def _timestamp(moment: datetime.datetime) -> float:
    # Naive values are UTC, as ComputeFilter reads them.
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


class HostView(Sequence[HostState]):
    """Some rows of a :class:`HostTable`, in order; items are HostStates built on access."""

    __slots__ = ('table', '_rows')

    def __init__(self, table: HostTable, rows: np.ndarray):
        self.table = table
        self._rows = rows

    @property
    def rows(self) -> np.ndarray:
        return self._rows

    def __len__(self) -> int:
        return len(self._rows)

    def _row(self, i: int) -> int:
        return int(self._rows[i])

    @overload
    def __getitem__(self, i: int) -> HostState: ...
    @overload
    def __getitem__(self, i: slice) -> HostView: ...
    def __getitem__(self, i):  # noqa: E301
        if isinstance(i, slice):
            return HostView(self.table, self.rows[i])
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self.table.host(self._row(i))

    def __iter__(self) -> Iterator[HostState]:
        host = self.table.host
        for i in range(len(self)):
            yield host(self._row(i))

    def __bool__(self) -> bool:
        return len(self) > 0

    def where(self, mask: np.ndarray) -> HostView:
        return HostView(self.table, self.rows[mask])

    def keep_names(self, predicate: Callable[[str, str], bool]) -> HostView:
        """The rows whose (service host, nodename) satisfy ``predicate``."""
        names, nodes = self.table.host_names, self.table.nodenames
        kept = [row for row in self.rows.tolist() if predicate(names[row], nodes[row])]
        return HostView(self.table, np.array(kept, dtype=np.intp))

    def keep_cell(self, cell_uuid: str | None) -> HostView:
        """The rows of compute nodes in cell ``cell_uuid`` (none for a cell without uuid)."""
        cells = self.table.cells
        kept = [row for row in self.rows.tolist() if cells[row] == cell_uuid]
        return HostView(self.table, np.array(kept, dtype=np.intp))

    def labels(self) -> list[str]:
        label = self.table.label
        return [label(row) for row in self.rows.tolist()]


def top_positions(weights: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` positions of ``np.argsort(-weights, kind='stable')``
    (descending weight, ties in position order) without sorting everything."""
    neg = -weights
    kth = np.partition(neg, k - 1)[k - 1]
    better = np.flatnonzero(neg < kth)
    tied = np.flatnonzero(neg == kth)[:k - len(better)]
    chosen = np.sort(np.concatenate((better, tied)))
    return chosen[np.argsort(neg[chosen], kind='stable')]


class WeighedView(Sequence['WeighedHost']):
    """Weighed rows, best first; items are :class:`WeighedHost` built on access.

    The order is worked out only as far as it is read: a request for one
    instance usually reads the best host and a few alternates, so the best
    few are found in linear time and the rest is sorted only if someone walks
    further (the next instance of the request, a long claim loop). The order
    is always that of a stable sort by descending weight.
    """

    __slots__ = ('table', '_rows_in', '_weights_in', '_contributions', '_order', '_prefix')

    def __init__(self, table: HostTable, rows: np.ndarray, weights: np.ndarray,
                 contributions: Mapping[str, np.ndarray]):
        self.table = table
        # In the input order; ``contributions`` too (weigher -> share per row).
        self._rows_in = rows
        self._weights_in = weights
        self._contributions = contributions
        self._order: np.ndarray | None = None
        self._prefix: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._rows_in)

    def order(self, k: int | None = None) -> np.ndarray:
        """Input positions of the best ``k`` (all when None), best first."""
        n = len(self._rows_in)
        if self._order is None:
            if k is None or k * 8 >= n:
                self._order = np.argsort(-self._weights_in, kind='stable')
            elif self._prefix is None or len(self._prefix) < k:
                # Grow by doubling, so walking on costs O(n log k), not O(n k).
                size = max(k, 16, 2 * len(self._prefix) if self._prefix is not None else 0)
                self._prefix = top_positions(self._weights_in, min(size, n))
                return self._prefix[:k]
            else:
                return self._prefix[:k]
        return self._order if k is None else self._order[:k]

    def position(self, i: int) -> int:
        """Input position of the ``i``-th best."""
        return int(self.order(i + 1)[i])

    @property
    def rows(self) -> np.ndarray:
        return self._rows_in[self.order()]

    @property
    def weights(self) -> np.ndarray:
        return self._weights_in[self.order()]

    def best_weight(self) -> float:
        return float(self._weights_in.max())

    def count_best(self) -> int:
        """How many rows share the best weight."""
        return int(np.count_nonzero(self._weights_in == self._weights_in.max()))

    def _item(self, i: int) -> WeighedHost:
        p = self.position(i)
        return WeighedHost(self.table.host(int(self._rows_in[p])), float(self._weights_in[p]),
                           {name: float(v[p]) for name, v in self._contributions.items()})

    def __getitem__(self, i):
        n = len(self._rows_in)
        if isinstance(i, slice):
            return [self._item(k) for k in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._item(i)

    def __iter__(self) -> Iterator[WeighedHost]:
        for i in range(len(self._rows_in)):
            yield self._item(i)


class OrderedView(HostView):
    """The hosts of a :class:`WeighedView` in its order, after ``head``: the
    first positions as the ordering rules rearranged them (shuffled ties, the
    host picked from the subset). Read lazily like the WeighedView."""

    __slots__ = ('_weighed', '_head')

    def __init__(self, weighed: WeighedView, head: list[int]):
        super().__init__(weighed.table, None)  # type: ignore[arg-type]
        self._weighed = weighed
        self._head = head

    @property
    def rows(self) -> np.ndarray:
        if self._rows is None:
            order = self._weighed.order()
            positions = np.concatenate((np.array(self._head, dtype=np.intp),
                                        order[len(self._head):]))
            self._rows = self._weighed._rows_in[positions]
        return self._rows

    def __len__(self) -> int:
        return len(self._weighed)

    def _row(self, i: int) -> int:
        if self._rows is not None:
            return int(self._rows[i])
        p = self._head[i] if i < len(self._head) else self._weighed.position(i)
        return int(self._weighed._rows_in[p])
