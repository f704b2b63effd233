"""The host container: the compute hosts of one request as a table, one row per host.

Nova builds one Python object per host for every request and runs every
filter and weigher host by host; at thousands of hosts that loop *is* the
scheduler's cost. Here a Placement answer is read once into per-column arrays
(:data:`COLUMNS`: capacity and usage per resource class summed over each host's
tree, service state, counters from the host catalog). Hosts travel through
filters, weighers and ordering only as rows of a table (:class:`HostView`,
:class:`WeighedView`); the built-in plugins judge all rows with a few array
operations (:meth:`BaseHostFilter.filter_rows`, :meth:`BaseHostWeigher.raw_weights`),
and a plugin written the simple per-host way sees one row as a
:class:`~scheduler.host_state.HostState`, built when first asked for. With
``[scheduler] columnar_host_states = False`` no such hook runs: every plugin
judges host by host, over the same table. Decisions are the same either way
(``tests/unit/test_host_table.py`` compares them on random inputs).

A row's HostState stays the single source of truth for its host: its
:meth:`~scheduler.host_state.HostState.consume` writes the columns marked
``consumed`` back into the table, so later instances of the same request see
the new usage either way.
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
from typing import TYPE_CHECKING, Any, cast, overload

import numpy as np

from placement_client.models import AllocationRequest, Candidates, summary_from_json
from scheduler.filters.base import host_label
from scheduler.host_columns import ClassColumn, SparseColumn, add_at_keys
from scheduler.host_state import SHARING_TRAIT, HostData, HostRecord, HostState
from scheduler.objects.pci import free_devices

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


def _timestamp(moment: datetime.datetime | None) -> float:
    # Naive values are UTC, as ComputeFilter reads them; NaN: never seen.
    if moment is None:
        return _EPOCH_NAN
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


# The column schema ----------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    """One per-host column of a :class:`HostTable`, and where its values come from."""

    name: str
    #: numpy dtype of the column; None: a Python list
    dtype: Any
    #: the value from a catalog record (the hosts of a Placement answer)
    of_record: Callable[[HostRecord], Any]
    #: the value from a HostState (hosts handed over as objects: a rebuild check's, a test's)
    of_host: Callable[[HostState], Any]
    #: HostState.consume() changes it: the table copies ``of_host`` back after each consume
    consumed: bool = False


#: Every per-host column a table has beyond these three groups, which are not
#: read from a record: ``capacity[rc]`` and ``used[rc]`` per resource class,
#: summed over the host's provider tree (``used`` kept current by consume());
#: ``records``, ``aggregates`` and ``instances`` (kept current by consume()),
#: ``instance_info_known``; and ``supported_codes``, derived from
#: ``supported_instances`` (hosts of one kind share an ImagePropertiesFilter verdict).
COLUMNS: tuple[Column, ...] = (
    Column('host_names', None, lambda r: r.service_host, lambda h: h.host),
    Column('nodenames', None, lambda r: r.nodename, lambda h: h.nodename),
    Column('cells', None, lambda r: r.cell_uuid, lambda h: h.cell_uuid),
    Column('disabled', bool, lambda r: r.disabled, lambda h: bool(h.service['disabled'])),
    Column('forced_down', bool, lambda r: r.forced_down,
           lambda h: bool(h.service['forced_down'])),
    # A heartbeat as a timestamp, NaN for none.
    Column('last_seen_up', np.float64, lambda r: _timestamp(r.last_seen_up),
           lambda h: _timestamp(cast('datetime.datetime | None', h.service['last_seen_up']))),
    Column('failed_builds', np.int64, lambda r: _stat(r.stats, 'failed_builds'),
           lambda h: h.failed_builds),
    Column('num_io_ops', np.int64, lambda r: _stat(r.stats, 'io_workload'),
           lambda h: h.num_io_ops, consumed=True),
    # From a record the reported count; the table raises it to the number of
    # instances the catalog lists, as HostState does.
    Column('num_instances', np.int64, lambda r: _stat(r.stats, 'num_instances'),
           lambda h: h.num_instances, consumed=True),
    Column('hypervisor_version', np.float64, lambda r: r.hypervisor_version or 0,
           lambda h: h.hypervisor_version or 0),
    # PCIWeigher's measure, read from the pools without building a HostState (a
    # tenth of the hosts with pools had it build a thousand per request at 10,000).
    Column('pci_free', np.int64, lambda r: free_devices(r.pci_pools),
           lambda h: free_devices(h.pci_stats), consumed=True),
    Column('supported_instances', None, lambda r: r.supported_instances,
           lambda h: h.supported_instances),
)
CONSUMED_COLUMNS = tuple(c for c in COLUMNS if c.consumed)


def record_values(record: HostRecord) -> tuple[Any, ...]:
    """The record's :data:`COLUMNS` values, in order."""
    return tuple(column.of_record(record) for column in COLUMNS)


class _RecordRef(weakref.ref):
    __slots__ = ('key',)
    key: int


class RecordValues:
    """Each record's :data:`COLUMNS` values, derived the first time the record is
    in an answer and kept for as long as the record lives.

    Records are never modified (the catalog replaces them), so every later
    request that finds the same record reads the same values instead of
    deriving them again (at 50,000 hosts that derivation was most of building
    a table). An entry goes with its record: the cache keeps no host alive that
    the catalog has dropped.
    """

    def __init__(self) -> None:
        self._values: dict[int, tuple[_RecordRef, tuple[Any, ...]]] = {}
        self._forget_ref = self._forget

    def __call__(self, record: HostRecord) -> tuple[Any, ...]:
        entry = self._values.get(id(record))
        if entry is not None:
            return entry[1]
        # Concurrent requests may both derive it; they derive the same values.
        values = record_values(record)
        ref = _RecordRef(record, self._forget_ref)
        ref.key = id(record)
        self._values[ref.key] = (ref, values)
        return values

    def __len__(self) -> int:
        return len(self._values)

    def _forget(self, ref: _RecordRef) -> None:
        entry = self._values.get(ref.key)
        if entry is not None and entry[0] is ref:
            del self._values[ref.key]


class HostTable:
    """The compute hosts of one request, as columns (row = host).

    Built from a Placement answer (the constructor) or from HostStates
    (:meth:`from_hosts`); the columns are :data:`COLUMNS` plus the groups listed
    there, declared below for the plugins that read them.
    """

    host_names: list[str]
    nodenames: list[str]
    cells: list[str]
    disabled: np.ndarray
    forced_down: np.ndarray
    last_seen_up: np.ndarray
    failed_builds: np.ndarray
    num_io_ops: np.ndarray
    num_instances: np.ndarray
    hypervisor_version: np.ndarray
    pci_free: np.ndarray
    supported_instances: list[Any]
    #: capacity per class, dense or sparse (host_columns): read with capacity_at(),
    #: free_at() or column()
    capacity: dict[str, ClassColumn]
    #: usage as stored, maybe shared with the table this one was forked from: what the
    #: table added (add_used()) is read with used_at(), free_at() or column()
    used: dict[str, ClassColumn]
    records: list[HostRecord]
    aggregates: list[tuple[Aggregate, ...]]
    instances: list[tuple[str, ...]]
    instance_info_known: list[bool]
    #: per row, an index into ``supported_values`` (the distinct supported_instances lists)
    supported_codes: np.ndarray
    supported_values: list[Any]

    # Per row, its allocation requests and its tree's providers; per provider uuid,
    # its summary: read only when a row's HostState is built.
    _requests: Sequence[Sequence[Mapping[str, Any]]]
    _trees: Sequence[Sequence[str]]
    _summaries: Mapping[str, Mapping[str, Any]]

    #: What the columns read of each record, shared by every table of the process.
    record_values = RecordValues()

    #: Whether the request is decided while other workers claim too, on usage that
    #: does not show all their claims yet: a provider view's table for a busy
    #: worker, or one holding claims of this worker since its read (which the
    #: others' views do not show yet either). The spread then reaches beyond the
    #: near-best hosts (pipeline/spread.py).
    concurrent: bool = False
    #: What one instance asks of each host's root, when the table is one request's
    #: (a provider view's fork): :meth:`room` then says how many more a host holds.
    request_resources: Mapping[str, int] | None = None

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

        # Allocation requests per host (root provider), in Placement's order
        # (doc/design.md, D2): every request that touches a host's tree belongs to
        # it, including one that allocates only from nested children. Sharing
        # providers are not hosts: a request using shared storage belongs to the
        # compute tree it also touches.
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
        self._requests = list(by_root.values())
        n = len(self.roots)
        index = {root: i for i, root in enumerate(self.roots)}
        self._summaries = summaries
        trees: list[list[str]] = [[] for _ in range(n)]
        self._trees = trees
        capacity: dict[str, list[int]] = {}
        used: dict[str, list[int]] = {}
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

        self._fill_from_catalog(catalog, capacity, used)

    @classmethod
    def from_hosts(cls, hosts: Sequence[HostState]) -> HostTable:
        """A table of HostStates built elsewhere (a rebuild check's hosts, a test's):
        its columns are read from them, and its rows are them."""
        table = cls.__new__(cls)
        hosts = list(hosts)
        table.default_availability_zone = 'nova'
        table.roots = [h.uuid for h in hosts]
        capacity: dict[str, list[int]] = {}
        used: dict[str, list[int]] = {}
        for row, host in enumerate(hosts):
            for kind, amounts in ((capacity, host.capacity), (used, host.used)):
                for rc, amount in amounts.items():
                    kind.setdefault(rc, [0] * len(hosts))[row] = amount
        table._fill(capacity, used, [h.record for h in hosts],
                    [tuple(h.aggregates) for h in hosts], [tuple(h.instances) for h in hosts],
                    [h.instance_info_known for h in hosts],
                    [tuple(column.of_host(h) for column in COLUMNS) for h in hosts])
        table._hosts = dict(enumerate(hosts))
        for row, host in enumerate(hosts):
            table._follow(row, host)
        return table

    @classmethod
    def from_columns(cls, roots: list[str], capacity: Mapping[str, ClassColumn],
                     used: Mapping[str, ClassColumn], catalog: HostData, *,
                     trees: Sequence[Sequence[str]],
                     default_availability_zone: str = 'nova') -> HostTable:
        """A table of the hosts ``roots`` whose capacity and usage are already summed
        per tree (a snapshot of Placement's providers, not one of its answers); int64
        and sparse columns are taken as they are, not copied.

        Its rows have no allocation requests or provider summaries yet: each
        request takes a :meth:`fork` that says where they come from.
        """
        table = cls.__new__(cls)
        table.default_availability_zone = default_availability_zone
        table.roots = roots
        table._trees = trees
        table._requests = []
        table._summaries = {}
        # Kept from request to request by its owner, such a table derives each
        # record's values once anyway: through the shared cache, every host of the
        # cloud would also stay in it (18 MB at 50,000 hosts).
        table._fill_from_catalog(catalog, capacity, used, cached=False)
        return table

    def _fill_from_catalog(self, catalog: HostData,
                           capacity: Mapping[str, Sequence[int] | ClassColumn],
                           used: Mapping[str, Sequence[int] | ClassColumn], *,
                           cached: bool = True) -> None:
        """Every column, the roots' catalog rows read under one lock; each record's
        :data:`COLUMNS` values from the shared cache, or (not ``cached``) derived a
        column at a time, without a tuple per record."""
        rows = catalog.host_rows(self.roots)
        records = [r[0] for r in rows]
        self._fill(capacity, used, records, [r[1] for r in rows], [r[2] for r in rows],
                   [r[3] for r in rows],
                   list(map(self.record_values, records)) if cached else None)
        self.num_instances = np.maximum(
            np.array([len(inst) for inst in self.instances], dtype=np.int64),
            self.num_instances)
        # The rows' HostStates built so far (a request builds a few of thousands).
        self._hosts: dict[int, HostState] = {}

    def with_usage(self, capacity: Mapping[str, ClassColumn],
                   used: Mapping[str, ClassColumn]) -> HostTable:
        """This table with other capacity and usage columns (the same hosts, the same
        catalog), sharing everything else."""
        table = self._copy()
        table.capacity, table.used = dict(capacity), dict(used)
        table._added, table._added_sorted = {}, {}
        table._multipliers = {}
        return table

    def fork(self, *, requests: Sequence[Sequence[Mapping[str, Any]]],
             summaries: Mapping[str, Mapping[str, Any]]) -> HostTable:
        """A table for one request over this one's rows: what the request changes
        (consume()) stays its own, and ``requests`` (per row) and ``summaries`` (per
        provider uuid) give its hosts' allocation requests and provider summaries
        when a HostState is built."""
        table = self._copy()
        table.used = dict(self.used)
        table.capacity = dict(self.capacity)
        # What consume() changes is copied when it first changes it: a request places
        # on a host or two of tens of thousands, and copying every such column for
        # each request was most of what a request allocated.
        table._borrowed = ({('used', rc) for rc in self.used}
                           | {column.name for column in CONSUMED_COLUMNS} | {'instances'})
        table._requests = requests
        table._summaries = summaries
        return table

    def add_used(self, rc: str, row: int, amount: int) -> None:
        """Count ``amount`` more of ``rc`` used at ``row`` in this table alone (a claim
        in flight, what a request consumed). Kept beside the column, which stays
        shared: a request's claims in flight touch a few hosts of tens of
        thousands, and a copy of each claimed class's column per request was a
        good part of a worker's peak at 50,000 hosts (doc/performance.md)."""
        added = self._added.setdefault(rc, {})
        added[row] = added.get(row, 0) + amount
        self._added_sorted.pop(rc, None)

    def used_at(self, rc: str, rows: np.ndarray) -> np.ndarray:
        """``used`` of ``rc`` at ``rows``, what this table added included."""
        rows = np.asarray(rows, dtype=np.intp)
        values = self._take(rc, 'used', rows)
        if self._added.get(rc) and len(rows):
            # As columns: a busy worker's claims since the read (its siblings' too)
            # are hundreds of rows, and the claim order reads thousands of rows at once.
            add_at_keys(values, rows, *self._sorted_additions(rc))
        return values

    def _sorted_additions(self, rc: str) -> tuple[np.ndarray, np.ndarray]:
        """What this table added to ``rc``: the rows ascending, and the amounts."""
        found = self._added_sorted.get(rc)
        if found is None:
            added = self._added[rc]
            claimed = np.fromiter(added, dtype=np.intp, count=len(added))
            amounts = np.fromiter(added.values(), dtype=np.int64, count=len(added))
            order = np.argsort(claimed)
            found = self._added_sorted[rc] = (claimed[order], amounts[order])
        return found

    def free_at(self, rc: str, rows: np.ndarray) -> np.ndarray:
        """``capacity`` less ``used`` of ``rc`` at ``rows`` (:meth:`used_at`)."""
        rows = np.asarray(rows, dtype=np.intp)
        return self._take(rc, 'capacity', rows) - self.used_at(rc, rows)

    def capacity_at(self, rc: str, rows: np.ndarray) -> np.ndarray:
        """``capacity`` of ``rc`` at ``rows``."""
        return self._take(rc, 'capacity', np.asarray(rows, dtype=np.intp))

    def _take(self, rc: str, kind: str, rows: np.ndarray) -> np.ndarray:
        """The stored ``capacity`` or ``used`` of ``rc`` at ``rows``, a new array."""
        column = (self.capacity if kind == 'capacity' else self.used).get(rc)
        if column is None:
            return np.zeros(len(rows), dtype=np.int64)
        if isinstance(column, SparseColumn):
            return column.take(rows)
        return column[rows]

    def _used_of(self, rc: str, row: int) -> int:
        column = self.used.get(rc)
        stored = (0 if column is None else column.at(row) if isinstance(column, SparseColumn)
                  else int(column[row]))
        return stored + self._added.get(rc, {}).get(row, 0)

    def _writable(self, name: str) -> Any:
        """The column ``name`` (a consumed one, or ``instances``), this table's own."""
        values = getattr(self, name)
        if name in self._borrowed:
            values = values.copy()
            setattr(self, name, values)
            self._borrowed.discard(name)
        return values

    def _copy(self) -> HostTable:
        table = HostTable.__new__(HostTable)
        table.__dict__.update(self.__dict__)
        table._hosts = {}
        table._instance_rows = None
        table._borrowed = set()
        table._added = {rc: dict(added) for rc, added in self._added.items()}
        table._added_sorted = {}
        return table

    def _fill(self, capacity: Mapping[str, Sequence[int] | ClassColumn],
              used: Mapping[str, Sequence[int] | ClassColumn],
              records: list[HostRecord], aggregates: list[tuple[Aggregate, ...]],
              instances: list[tuple[str, ...]], instance_info_known: list[bool],
              values: list[tuple[Any, ...]] | None) -> None:
        """The columns; ``values``: each record's :data:`COLUMNS` values (None: derived
        from the records here, a column at a time)."""
        n = len(records)
        zeros = [0] * n
        resource_classes = list(dict.fromkeys([*capacity, *used]))
        # Columns given as arrays are the table's own (from_columns' callers make them
        # for it): copied, they were 10 MB more at the peak of building a table of
        # 50,000 hosts.
        self.capacity = {rc: _as_column(capacity.get(rc, zeros)) for rc in resource_classes}
        self.used = {rc: _as_column(used.get(rc, zeros)) for rc in resource_classes}
        self.records = records
        self.aggregates = aggregates
        self.instances = instances
        # Columns shared with the table this one was forked from (fork()).
        self._borrowed: set[Any] = set()
        # Per class, per row: usage this table counts on top of its column (add_used()),
        # and the same as sorted columns once read (used_at()).
        self._added: dict[str, dict[int, int]] = {}
        self._added_sorted: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.instance_info_known = instance_info_known
        if values is None:
            for column in COLUMNS:
                derived = map(column.of_record, records)
                setattr(self, column.name, list(derived) if column.dtype is None
                        else np.fromiter(derived, dtype=column.dtype, count=n))
        else:
            by_column = zip(*values, strict=True) if values else ((),) * len(COLUMNS)
            for column, column_values in zip(COLUMNS, by_column, strict=True):
                setattr(self, column.name, list(column_values) if column.dtype is None
                        else np.array(column_values, dtype=column.dtype))
        # Distinct supported_instances lists, and each row's.
        self.supported_values = []
        self._supported_codes: dict[tuple, int] = {}
        by_identity: dict[int, int] = {}  # the catalog shares equal lists between hosts
        supported_codes = []
        for value in self.supported_instances:
            code = by_identity.get(id(value))
            if code is None:
                code = by_identity[id(value)] = self._supported_code(value)
            supported_codes.append(code)
        self.supported_codes = np.array(supported_codes, dtype=np.intp)
        self._index_aggregates()
        self._instance_rows: dict[str, list[int]] | None = None

    def _supported_code(self, value: Any) -> int:
        """The code of a supported_instances list (a new one for a new list)."""
        key = tuple(tuple(e) if isinstance(e, (list, tuple)) else e for e in value or ())
        code = self._supported_codes.get(key)
        if code is None:
            code = self._supported_codes[key] = len(self.supported_values)
            self.supported_values.append(value)
        return code

    def _index_aggregates(self) -> None:
        """Aggregates -> rows, for per-aggregate weight multipliers."""
        aggregate_rows: dict[str, tuple[Aggregate, list[int]]] = {}
        for row, host_aggregates in enumerate(self.aggregates):
            for aggregate in host_aggregates:
                entry = aggregate_rows.get(aggregate.uuid)
                if entry is None:
                    aggregate_rows[aggregate.uuid] = (aggregate, [row])
                else:
                    entry[1].append(row)
        self._aggregate_rows: list[tuple[Aggregate, np.ndarray]] = [
            (aggregate, np.array(rows_of, dtype=np.intp))
            for aggregate, rows_of in aggregate_rows.values() if aggregate.metadata]
        self._multipliers: dict[tuple[str, float], np.ndarray | None] = {}

    def with_rows(self, rows: Sequence[int], catalog: HostData) -> HostTable:
        """This table with ``rows`` read again from ``catalog`` (what the catalog says
        of their hosts changed: instances, service state), everything else shared.
        Equal to a table built afresh from the catalog as it is now."""
        table = self._copy()
        found = catalog.host_rows([self.roots[row] for row in rows])
        table.records, table.aggregates = list(self.records), list(self.aggregates)
        table.instances = list(self.instances)
        table.instance_info_known = list(self.instance_info_known)
        for column in COLUMNS:
            values = getattr(self, column.name)
            setattr(table, column.name, list(values) if column.dtype is None else values.copy())
        table.supported_values = list(self.supported_values)
        table._supported_codes = dict(self._supported_codes)
        table.supported_codes = self.supported_codes.copy()
        aggregates_moved = False
        for row, (record, aggregates, instances, known) in zip(rows, found, strict=True):
            table.records[row] = record
            aggregates_moved = aggregates_moved or aggregates != table.aggregates[row]
            table.aggregates[row] = aggregates
            table.instances[row] = instances
            table.instance_info_known[row] = known
            for column, value in zip(COLUMNS, record_values(record), strict=True):
                getattr(table, column.name)[row] = value
            table.num_instances[row] = max(len(instances), int(table.num_instances[row]))
            table.supported_codes[row] = table._supported_code(table.supported_instances[row])
        if aggregates_moved:
            table._index_aggregates()
        return table

    def __len__(self) -> int:
        return len(self.roots)

    def view(self) -> HostView:
        """Every host, in Placement's order."""
        return HostView(self, np.arange(len(self.roots), dtype=np.intp))

    # Columns the built-in plugins read ------------------------------------------------
    def column(self, rc: str, kind: str) -> np.ndarray:
        """``capacity`` or ``used`` of ``rc`` per row (zeros where no host has it), a
        whole column: a plugin that reads some rows reads less with :meth:`used_at`
        and :meth:`free_at` (this table's own copy of a column it added usage to is
        made here, and so is its whole copy of a sparse column)."""
        if kind != 'capacity' and self._added.get(rc):
            claimed, amounts = self._sorted_additions(rc)
            del self._added[rc], self._added_sorted[rc]
            column = self._stored(rc, 'used')
            if ('used', rc) in self._borrowed:
                column = self.used[rc] = column.copy()
                self._borrowed.discard(('used', rc))
            column[claimed] += amounts
        return self._stored(rc, kind)

    def _stored(self, rc: str, kind: str) -> np.ndarray:
        """The whole column, made dense (and so this table's own) where it was not."""
        columns = self.capacity if kind == 'capacity' else self.used
        column = columns.get(rc)
        if column is None:
            column = columns[rc] = np.zeros(len(self.roots), dtype=np.int64)
        elif isinstance(column, SparseColumn):
            column = columns[rc] = column.dense()
            if kind == 'used':
                self._borrowed.discard(('used', rc))
        return column

    def free(self, rc: str) -> np.ndarray:
        return self.column(rc, 'capacity') - self.column(rc, 'used')

    def room(self, rows: np.ndarray) -> np.ndarray | None:
        """Per row, how many more instances of :attr:`request_resources` its root holds
        by the usage columns; None when the table is not one request's."""
        if not self.request_resources:
            return None
        rows = np.asarray(rows, dtype=np.intp)
        return np.min([self.free_at(rc, rows) // amount
                       for rc, amount in self.request_resources.items() if amount > 0]
                      or [np.full(len(rows), np.iinfo(np.int64).max)], axis=0)

    def label(self, row: int) -> str:
        """:func:`scheduler.filters.base.host_label` of the row's host."""
        return _label(self.host_names[row], self.nodenames[row])

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
        host = self._hosts.get(row)
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
        self._follow(row, host)
        return host

    def _follow(self, row: int, host: HostState) -> None:
        """Keep the row's columns in step with what ``host.consume`` changes."""
        # A weak reference: the table holds its hosts, and a cycle back to it would
        # keep a whole Placement answer alive until the collector ran (measured:
        # half of a request's CPU went to collecting them, and a worker answering
        # 50,000-host requests grew by 200 MB per request).
        table = weakref.ref(self)
        # A HostState handed to several tables (a test's, one per call) keeps them all in step.
        previous = host.on_consume

        def consumed(state: HostState) -> None:
            if previous is not None:
                previous(state)
            owner = table()
            if owner is not None:
                owner._consumed(row, state)
        host.on_consume = consumed

    def _consumed(self, row: int, host: HostState) -> None:
        for rc, amount in host.used.items():
            counted = self._used_of(rc, row)
            if counted != amount:
                self.add_used(rc, row, amount - counted)
        for column in CONSUMED_COLUMNS:
            value = column.of_host(host)
            if getattr(self, column.name)[row] != value:
                self._writable(column.name)[row] = value
        known = set(self.instances[row])
        new = [u for u in host.instances if u not in known]
        self._writable('instances')[row] = tuple(host.instances)
        if self._instance_rows is not None:
            for instance_uuid in new:
                self._instance_rows.setdefault(instance_uuid, []).append(row)


def _as_column(values: Sequence[int] | ClassColumn) -> ClassColumn:
    return values if isinstance(values, SparseColumn) else np.asarray(values, dtype=np.int64)


class _EqualAsList:
    """Views are equal to any sequence of the same items in the same order (a list,
    another view), as the lists they stand for would be."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return list(self) == list(other)  # type: ignore[call-overload]

    __hash__ = None  # type: ignore[assignment]


class HostView(_EqualAsList, Sequence[HostState]):
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

    def host_names(self, start: int, stop: int) -> list[str]:
        """The service hosts of the items ``start`` to ``stop`` (a slice's bounds),
        without building their HostStates."""
        names, row = self.table.host_names, self._row   # a lazy order's rows, as it reads them
        return [names[row(i)] for i in range(start, min(stop, len(self)))]

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

    def keep_roots(self, predicate: Callable[[str], bool]) -> HostView:
        """The rows whose root provider's uuid satisfies ``predicate``."""
        roots = self.table.roots
        return self.where(np.fromiter((predicate(roots[row]) for row in self.rows.tolist()),
                                      dtype=bool, count=len(self)))

    def keep_hosts_of(self, other: HostView) -> HostView:
        """The rows whose root provider is one of ``other``'s (rows of any table)."""
        return self.keep_roots(set(other.root_uuids()).__contains__)

    def root_uuids(self) -> list[str]:
        roots = self.table.roots
        return [roots[row] for row in self.rows.tolist()]

    def keep_cell(self, cell_uuid: str | None) -> HostView:
        """The rows of compute nodes in cell ``cell_uuid`` (none for a cell without uuid)."""
        cells = self.table.cells
        kept = [row for row in self.rows.tolist() if cells[row] == cell_uuid]
        return HostView(self.table, np.array(kept, dtype=np.intp))


def _label(host: str, node: str) -> str:
    return host if not node or node == host else f'{host} ({node})'


class RowLabels(_EqualAsList, Sequence[str]):
    """The labels (:meth:`HostTable.label`) of some rows, each made when read: the
    hosts a filter removes are counted on every request, and named only in a DEBUG
    line or an explanation (at 50,000 hosts, naming them all was 2% of a worker's
    profile samples). Holds the name columns, not the table."""

    __slots__ = ('_names', '_nodes', '_rows')

    def __init__(self, names: Sequence[str], nodes: Sequence[str], rows: np.ndarray):
        self._names, self._nodes, self._rows = names, nodes, rows

    def _label(self, row: int) -> str:
        return _label(self._names[row], self._nodes[row])

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self._label(row) for row in self._rows[i].tolist()]
        return self._label(int(self._rows[i]))

    def __iter__(self) -> Iterator[str]:
        return map(self._label, self._rows.tolist())

    def __repr__(self) -> str:
        return repr(list(self))


def top_positions(weights: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` positions of ``np.argsort(-weights, kind='stable')``
    (descending weight, ties in position order) without sorting everything."""
    neg = -weights
    kth = np.partition(neg, k - 1)[k - 1]
    better = np.flatnonzero(neg < kth)
    tied = np.flatnonzero(neg == kth)[:k - len(better)]
    chosen = np.sort(np.concatenate((better, tied)))
    return chosen[np.argsort(neg[chosen], kind='stable')]



def count_near_best(weights: np.ndarray, tolerance: float = 0.0) -> int:
    """How many of ``weights`` equal the best, or come within ``tolerance`` of it (a
    fraction of the best weight's size): the hosts ``near_best_weight_tolerance``
    lets a decision choose among."""
    if not len(weights):
        return 0
    best = weights.max()
    return int(np.count_nonzero(weights >= best - tolerance * abs(best)))

class WeighedView(_EqualAsList, Sequence['WeighedHost']):
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

    def rows_at(self, positions: Sequence[int]) -> np.ndarray:
        """The table's rows of the hosts at these input positions (what :meth:`order`
        returns: positions among the weighed rows, not rows of the table)."""
        return self._rows_in[np.asarray(positions, dtype=np.intp)]

    def uuids_at(self, positions: Sequence[int]) -> list[str]:
        """The uuids of the hosts at these input positions."""
        roots = self.table.roots
        return [roots[int(row)] for row in self.rows_at(positions)]

    @property
    def rows(self) -> np.ndarray:
        return self._rows_in[self.order()]

    @property
    def weights(self) -> np.ndarray:
        return self._weights_in[self.order()]

    def best_weight(self) -> float:
        return float(self._weights_in.max())

    def count_best(self, tolerance: float = 0.0) -> int:
        """How many rows share the best weight, or come within ``tolerance`` of it
        (a fraction of the best weight's size)."""
        return count_near_best(self._weights_in, tolerance)

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


def as_view(hosts: Sequence[HostState]) -> HostView:
    """``hosts`` as rows of a table: the view itself, or a table of those HostStates."""
    if isinstance(hosts, HostView):
        return hosts
    return HostTable.from_hosts(hosts).view()


def as_weighed_view(weighed: Sequence[WeighedHost]) -> WeighedView:
    """``weighed`` (best first) as a WeighedView: itself, or one over a table of its hosts."""
    if isinstance(weighed, WeighedView):
        return weighed
    table = HostTable.from_hosts([w.host for w in weighed])
    names = dict.fromkeys(name for w in weighed for name in w.contributions)
    return WeighedView(
        table, np.arange(len(weighed), dtype=np.intp),
        np.array([w.weight for w in weighed], dtype=np.float64),
        {name: np.array([w.contributions.get(name, 0.0) for w in weighed], dtype=np.float64)
         for name in names})
