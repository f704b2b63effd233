"""The optional, read-only host data source in Nova's cell databases (``[cell_database]``).

What no Nova API exposes — each compute node's NUMA topology and free PCI
device pools — nova-compute writes into the ``compute_nodes`` table of its cell
database. This module reads exactly these columns of the rows not deleted:
``uuid`` (the root provider uuid), ``hypervisor_hostname``, ``host``,
``numa_topology``, ``pci_stats``, ``cpu_allocation_ratio`` and
``ram_allocation_ratio`` (the NUMA fit's per-node overcommit limits) and
``supported_instances`` (ImagePropertiesFilter), what the compute API's
hypervisor list shows of the same row (``host_ip``, ``hypervisor_type``,
``hypervisor_version``, ``cpu_info``), ``stats`` (the instance, I/O and
failed-build counts that Nova's ``HostState`` takes from it; see
:func:`kept_stats`) and, when ``[metrics] weight_setting`` names some, ``metrics``
(the named ones only), and nothing else, from each
configured cell, every ``sync_interval`` seconds, on its own thread
(:class:`CellDatabaseSync`, shaped like the compute API sync; on PostgreSQL, after the
first, only the rows written since the last read, found by their versions), and, for a request
that asks for NUMA or PCI, its candidates' rows just before it is decided
(``max_age``), as nova-scheduler reads its candidates' compute nodes per request;
the rows of a compute node no read has seen yet, by uuid (a provider in
Placement's answer) or by service host and node name (a requested destination),
before a request would go without it.

Never a write: every connection is made read-only before it is used
(``SET SESSION TRANSACTION READ ONLY`` on MySQL/MariaDB,
``default_transaction_read_only`` on PostgreSQL, ``PRAGMA query_only`` on SQLite),
so even credentials that could write cannot; a user with SELECT on
``compute_nodes`` is all it needs. Each worker keeps one connection per cell
while requests may read their candidates' rows (``max_age`` 0 or more), and
opens one per read otherwise.

A cell that cannot be read keeps its last good data (WARNING with its age);
a row whose topology or pools cannot be parsed loses only that field (WARNING
naming the node). URLs are logged with the password masked, and error texts
are scrubbed of it. The reads go through the database's DB-API driver
(:mod:`scheduler.catalog.dbapi`), not SQLAlchemy, which would add 17 MB to each
worker; the drivers are the ``celldb`` extra, imported only when a connection is
configured.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

from scheduler.catalog.dbapi import Array, DirectConnection, DirectDatabase
from scheduler.catalog.hosts_file import (
    interned,
    normalize_uuid,
    parse_metrics,
    parse_supported_instances,
)
from scheduler.catalog.periodic import PeriodicSync
from scheduler.conf.cell_database import GROUP
from scheduler.conf.weight_setting import split_weight_setting
from scheduler.exceptions import HostDataError, SchedulerError
from scheduler.objects.numa import HostNUMATopology, parse_host_numa_topology
from scheduler.objects.pci import HostPciStats, parse_pci_pools

if TYPE_CHECKING:
    from scheduler.catalog.catalog import HostCatalog

LOG = logging.getLogger(__name__)

_COLUMNS = ('uuid, hypervisor_hostname, host, numa_topology, pci_stats, '
            'cpu_allocation_ratio, ram_allocation_ratio, supported_instances, '
            'host_ip, hypervisor_type, hypervisor_version, cpu_info, stats')
#: The column read after those when metrics are asked for (:class:`CellDatabaseReader`).
_METRICS_COLUMN = 'metrics'
#: The rows read (besides the read-only session setup, the only statement sent to
#: MySQL/MariaDB and SQLite) by a reader asked for no metrics; one asked for some reads
#: :data:`_METRICS_COLUMN` too, here and in :data:`VERSIONED_QUERY`.
QUERY = f'SELECT {_COLUMNS} FROM compute_nodes WHERE deleted = 0'
#: PostgreSQL's version of a row: the transaction that wrote it (``xmin``), which any
#: write of the row replaces, the same values written again included (kept when VACUUM
#: freezes the row; the same number again only after 2**32 transactions).
_VERSION = 'CAST(CAST(xmin AS text) AS bigint)'
#: On PostgreSQL: the rows read with their versions, and the versions alone.
VERSIONED_QUERY = f'SELECT {_COLUMNS}, {_VERSION} FROM compute_nodes WHERE deleted = 0'
VERSIONS_QUERY = f'SELECT uuid, {_VERSION} FROM compute_nodes WHERE deleted = 0'
#: On PostgreSQL, some rows by their uuids, given as one array (a list of a thousand
#: parameters is a thousand marks to quote and the server to parse): the condition a
#: reader adds to its versioned query.
_BY_UUIDS = ' AND uuid = ANY(:uuids)'
#: A periodic read on PostgreSQL reads again only the rows whose version moved, when they
#: are at most this share of the rows (else it reads every row).
CHANGED_SHARE = 0.5
#: Rows named per statement when those are read.
CHANGED_BATCH = 1000
_CELL_PREFIX_RE = re.compile(r'^([0-9A-Fa-f]{8}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{4}-?'
                             r'[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{12})=(.+)$')
#: Problems named per round, per cell, before "and N more".
_MAX_ROW_WARNINGS = 10
#: Rows fetched at a time by a whole read: the rows are never all in memory at once.
READ_BATCH = 1000


class CellDatabaseError(SchedulerError):
    """A cell database could not be read; the message never carries a password."""


@dataclass(frozen=True, slots=True)
class NodeDescription:
    """What a ``compute_nodes`` row says of its node that many nodes say alike: a region's
    computes come in a handful of models, so a cell's rows hold a few thousand of these
    at most, each shared by every node that has it (read-only, as every field)."""

    numa_topology: HostNUMATopology | None = None
    pci_stats: HostPciStats | None = None
    #: The cell whose database holds the row, when the configuration names it.
    cell_uuid: str | None = None
    #: (architecture, hypervisor type, VM mode) triples the node runs; None: not reported.
    supported_instances: tuple[tuple[str, str, str], ...] | None = None
    hypervisor_type: str | None = None
    cpu_info: dict[str, Any] = field(default_factory=dict, hash=False)


_UNDESCRIBED = NodeDescription()


class ComputeNodeData:
    """One ``compute_nodes`` row, as the host catalog uses it (read-only).

    Its own fields are those that set it apart from the other nodes of its model (names,
    address, hypervisor version, stats, metrics, row version); the rest is a
    :class:`NodeDescription` shared with the nodes whose rows say the same
    (:func:`parse_rows`), read through properties of the same names. One object of
    fifteen fields a node was 6.9 MB of a worker at 50,000 nodes, held beside the
    records the catalog resolves from them; this one is 5.0 MB (doc/performance.md).
    """

    __slots__ = ('provider_uuid', 'nodename', 'service_host', 'host_ip',
                 'hypervisor_version', 'stats', 'metrics', 'row_version', 'described')

    provider_uuid: str
    nodename: str | None
    service_host: str | None
    #: As ``GET /os-hypervisors/detail`` shows them (it reads the same row); None or
    #: empty: not reported.
    host_ip: str | None
    hypervisor_version: int | None
    #: The column's keys that :func:`kept_stats` keeps, shared by the nodes with the same
    #: ones (read-only); None: the column is empty.
    stats: dict[str, str] | None
    #: The metrics asked for, as Nova's scheduler reads them (:func:`parse_metrics`);
    #: None: not read, or the column is empty. Each node's own: the values move every
    #: minute.
    metrics: dict[str, float] | None
    #: The row's version (PostgreSQL's ``xmin``; elsewhere a digest of the row,
    #: :func:`row_digest`): how a read knows the row was not written since. Not part of
    #: what the node is: a row written again with the same values is the same node.
    row_version: int | None
    described: NodeDescription

    def __init__(self, provider_uuid: str, nodename: str | None, service_host: str | None,
                 numa_topology: HostNUMATopology | None = None,
                 pci_stats: HostPciStats | None = None, cell_uuid: str | None = None,
                 supported_instances: tuple[tuple[str, str, str], ...] | None = None,
                 host_ip: str | None = None, hypervisor_type: str | None = None,
                 hypervisor_version: int | None = None,
                 cpu_info: dict[str, Any] | None = None, stats: dict[str, str] | None = None,
                 metrics: dict[str, float] | None = None, row_version: int | None = None, *,
                 described: NodeDescription | None = None):
        """The fields :class:`NodeDescription` holds are taken from ``described`` when it is
        given (the others of them must then be left out), else from the arguments."""
        shared = (numa_topology, pci_stats, cell_uuid, supported_instances, hypervisor_type,
                  cpu_info)
        if described is None:
            described = _UNDESCRIBED if shared == (None,) * 6 else NodeDescription(
                numa_topology, pci_stats, cell_uuid, supported_instances, hypervisor_type,
                cpu_info if cpu_info is not None else {})
        elif shared != (None,) * 6:
            raise TypeError('a node takes its described fields from described alone')
        setter = object.__setattr__
        setter(self, 'provider_uuid', provider_uuid)
        setter(self, 'nodename', nodename)
        setter(self, 'service_host', service_host)
        setter(self, 'host_ip', host_ip)
        setter(self, 'hypervisor_version', hypervisor_version)
        setter(self, 'stats', stats)
        setter(self, 'metrics', metrics)
        setter(self, 'row_version', row_version)
        setter(self, 'described', described)

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f'cannot assign to field {name!r}')

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f'cannot delete field {name!r}')

    def with_version(self, row_version: int | None) -> ComputeNodeData:
        """This node, read from a row of version ``row_version``."""
        return ComputeNodeData(self.provider_uuid, self.nodename, self.service_host,
                               host_ip=self.host_ip,
                               hypervisor_version=self.hypervisor_version, stats=self.stats,
                               metrics=self.metrics, row_version=row_version,
                               described=self.described)

    def _own(self) -> tuple[Any, ...]:
        return (self.provider_uuid, self.nodename, self.service_host, self.host_ip,
                self.hypervisor_version, self.stats, self.metrics)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ComputeNodeData):
            return NotImplemented
        return self is other or (self._own() == other._own()
                                 and (self.described is other.described
                                      or self.described == other.described))

    def __hash__(self) -> int:
        # Its names alone: equal nodes have equal names, and what describes a node may
        # hold dicts.
        return hash((self.provider_uuid, self.nodename, self.service_host))

    def __repr__(self) -> str:
        return (f'ComputeNodeData(provider_uuid={self.provider_uuid!r}, '
                f'nodename={self.nodename!r}, service_host={self.service_host!r}, '
                f'host_ip={self.host_ip!r}, hypervisor_version={self.hypervisor_version!r}, '
                f'stats={self.stats!r}, metrics={self.metrics!r}, '
                f'row_version={self.row_version!r}, described={self.described!r})')

    # The shared fields, by their names.
    @property
    def numa_topology(self) -> HostNUMATopology | None:
        return self.described.numa_topology

    @property
    def pci_stats(self) -> HostPciStats | None:
        return self.described.pci_stats

    @property
    def cell_uuid(self) -> str | None:
        return self.described.cell_uuid

    @property
    def supported_instances(self) -> tuple[tuple[str, str, str], ...] | None:
        return self.described.supported_instances

    @property
    def hypervisor_type(self) -> str | None:
        return self.described.hypervisor_type

    @property
    def cpu_info(self) -> dict[str, Any]:
        """Shared by the nodes whose rows have the same text."""
        return self.described.cpu_info


def parse_rows(rows: Iterable[Sequence[Any]], cell_uuid: str | None = None, *,
               shared: dict[tuple[Any, ...], Any] | None = None,
               metric_names: frozenset[str] = frozenset()
               ) -> tuple[list[ComputeNodeData], list[str]]:
    """Rows of :data:`QUERY` -> nodes (in ``cell_uuid``), and the problems found
    (pure, no I/O).

    A field that cannot be parsed is left out (None) and named in the problems;
    a row without a uuid is skipped. Rows without the last five columns (host_ip,
    hypervisor type and version, cpu_info, stats) leave those unreported. A row's
    fourteenth column, ``metrics``, gives the metrics ``metric_names`` names. ``shared``: what
    was already parsed, by field and text (every value is read-only), so that equal
    texts give one object: a region's computes come in a handful of models, so their
    ``cpu_info`` and ``supported_instances`` texts are few, and so are the NUMA
    topologies and PCI pools of the computes that no instance with a NUMA topology or
    a PCI device uses (a parsed two-node topology is about 6 KB).
    """
    nodes: list[ComputeNodeData] = []
    problems: list[str] = []
    known: dict[tuple[Any, ...], Any] = shared if shared is not None else {}

    def parsed(key: tuple[Any, ...], parse: Callable[..., Any], *args: Any) -> Any:
        # Only texts (a driver may give a JSON column as a dict or list) are shared.
        if not isinstance(key[1], str):
            return parse(key[1], *args)
        value = known.get(key)
        if value is None:
            value = parse(key[1], *args)
            if value is not None:
                known[key] = value
        return value

    for row in rows:
        node_uuid, nodename, host, numa, pci, cpu_ratio, ram_ratio, supported = row[:8]
        host_ip, hv_type, hv_version, cpu_text, stats_text, metrics_text = (
            *row[8:14], *(None,) * 6)[:6]
        if not node_uuid:
            problems.append(f'a row of {nodename or host or "an unnamed node"} has no uuid')
            continue
        label = f'{nodename or node_uuid}'
        topology = None
        if numa:
            try:
                ratios = _ratio(cpu_ratio), _ratio(ram_ratio)
                topology = parsed(('numa', numa, *ratios), _topology, label, *ratios)
            except HostDataError as e:
                problems.append(str(e))
        pools = None
        if pci:
            try:
                pools = parsed(('pci', pci), _pools, label)
            except HostDataError as e:
                problems.append(str(e))
        instances = None
        if supported:
            try:
                instances = parsed(('supported', supported), _instances)
            except json.JSONDecodeError as e:
                problems.append(f'{label} supported_instances: not JSON ({e.msg})')
            except ValueError as e:
                problems.append(f'{label} {e}')
        cpu_info: Any = _UNDESCRIBED.cpu_info
        if cpu_text:
            try:
                cpu_info = parsed(('cpu_info', cpu_text), _cpu_info)
            except json.JSONDecodeError as e:
                problems.append(f'{label} cpu_info: not JSON ({e.msg})')
        try:
            version = int(hv_version) if hv_version is not None else None
        except (TypeError, ValueError):
            problems.append(f'{label} hypervisor_version: not a number')
            version = None
        stats = None
        if stats_text:
            try:
                value = json.loads(stats_text) if isinstance(stats_text, str) else stats_text
                # An empty object is an empty column: a hosts file's stats stay.
                kept = kept_stats(value) if value != {} else None
                # Keyed by what is kept, not by the text: the counters left out differ
                # from node to node where the counts kept are few.
                if kept is not None:
                    stats = known.setdefault(('stats', tuple(sorted(kept.items()))), kept)
            except json.JSONDecodeError as e:
                problems.append(f'{label} stats: not JSON ({e.msg})')
            except ValueError as e:
                problems.append(f'{label} stats: {e}')
        metrics = None
        if metric_names and metrics_text:
            try:
                metrics = _named_metrics(metrics_text, metric_names)
            except json.JSONDecodeError as e:
                problems.append(f'{label} metrics: not JSON ({e.msg})')
            except ValueError as e:
                problems.append(f'{label} {e}')
            if metrics == {}:
                metrics = known.setdefault(('metrics', ()), metrics)
        hv_type = interned(hv_type or None)
        # The parts are shared already where their texts are equal: the description of
        # the same parts is too. Keyed by the parts' identities, which stay theirs while
        # the description in ``known`` holds them.
        described_key = ('described', id(topology), id(pools), cell_uuid, id(instances),
                         hv_type, id(cpu_info))
        described = known.get(described_key)
        if described is None:
            described = known[described_key] = NodeDescription(
                topology, pools, cell_uuid, instances, hv_type, cpu_info)
        nodes.append(ComputeNodeData(provider_uuid=interned(str(node_uuid).lower()),
                                     nodename=interned(nodename or None),
                                     service_host=interned(host or None),
                                     host_ip=str(host_ip) if host_ip else None,
                                     hypervisor_version=known.setdefault(
                                         ('version', version), version),
                                     stats=stats, metrics=metrics, described=described))
    return nodes, problems


def _named_metrics(value: Any, names: frozenset[str]) -> dict[str, float] | None:
    """A ``compute_nodes.metrics`` value -> the metrics of ``names`` it holds, as Nova's
    scheduler reads them; None for an empty list (no monitor reports: a hosts file's
    metrics stay). Each node's are its own: the values move every minute."""
    metrics = json.loads(value) if isinstance(value, str) else value
    if not metrics:
        return None
    return {name: number for name, number in parse_metrics(metrics).items()
            if name in names}


#: The keys of nova-compute's per-state counters (``nova.compute.stats.Stats``): one per
#: VM state, task state, OS type and project of the host's instances.
_COUNTER_PREFIXES = ('num_vm_', 'num_task_', 'num_os_type_', 'num_proj_')


def kept_stats(value: Any) -> dict[str, str]:
    """A ``compute_nodes.stats`` value (a JSON object of nullable strings, as Nova's
    ``ComputeNode.stats`` writes it) -> the keys kept, with their values as Nova's field
    coerces them, to strings (pure). A null value is left out: a filter that reads the
    key finds nothing either way (ComputeCapabilitiesFilter fails the host).

    Kept: ``num_instances``, ``io_workload`` and ``failed_builds``, which Nova's
    ``HostState`` reads, and whatever else a driver reports there (Ironic's node
    capabilities, ``cpu_arch``), which ``capabilities:`` extra specs may name. Left out:
    nova-compute's counters per VM state, task state, OS type and project, which no
    filter or weigher reads and which grow with the host's instances (a key per
    project): 50,000 nodes' worth is tens of megabytes in every worker, where the counts
    kept are a few hundred shared dicts. doc/nova-compatibility.md says what a
    ``capabilities:`` spec naming one of them does here.
    """
    if not isinstance(value, dict):
        raise ValueError('not a JSON object')
    return {str(key): str(item) for key, item in value.items()
            if item is not None and not str(key).startswith(_COUNTER_PREFIXES)}


def _topology(value: Any, label: str, cpu_ratio: float | None,
              ram_ratio: float | None) -> HostNUMATopology:
    return parse_host_numa_topology(value, where=f'{label} numa_topology',
                                    strict=False).with_ratios(cpu_ratio, ram_ratio)


def _pools(value: Any, label: str) -> HostPciStats:
    return parse_pci_pools(value, where=f'{label} pci_stats', strict=False)


def _instances(value: Any) -> tuple[tuple[str, str, str], ...]:
    return tuple(parse_supported_instances(json.loads(value) if isinstance(value, str)
                                           else value))


def _cpu_info(value: Any) -> dict[str, Any]:
    value = json.loads(value) if isinstance(value, str) else value
    return value if isinstance(value, dict) else {}


#: The kinds of values a row's digest takes: what the drivers give for these columns.
_DIGESTIBLE = frozenset({str, int, float, bool, Decimal, bytes, type(None)})


def row_digest(row: Iterable[Any]) -> int | None:
    """A digest of a row's values and of their kinds (so that ``1``, ``1.0``, ``'1'`` and
    ``b'1'`` differ); None for a row with another kind of value (a driver that gives a
    JSON column as a dict or list), which is then parsed at every read.

    Python's own hash of the values: SipHash-1-3 with this process's random key for
    the texts, 64 bits. A row whose text changed keeps its digest with a chance of
    2**-64: at 50,000 rows all changing every minute, once in 700 million years. A
    128-bit BLAKE2b fed value by value took 415 ms of a worker's CPU a read at 50,000
    rows, this 89 ms (doc/performance.md). Never compared across processes.
    """
    values = tuple(row)
    kinds = tuple(map(type, values))
    if not _DIGESTIBLE.issuperset(kinds):
        return None
    try:
        return hash((values, kinds))
    except TypeError:     # a signalling NaN (Decimal) has no hash
        return None


def split_connection(value: str) -> tuple[str | None, str]:
    """A ``[cell_database] connections`` value -> (cell uuid or None, URL).

    ``CELL_UUID=URL`` names the cell whose database the URL opens (the nodes
    read there are in that cell); a bare URL leaves the cell to the hosts file
    and ``[scheduler] default_cell_uuid``.
    """
    match = _CELL_PREFIX_RE.match(value)
    if match is None:
        return None, value
    return normalize_uuid(match.group(1)), match.group(2)


def _ratio(value: Any) -> float | None:
    # A 0.0 or null ratio in the row means "the compute uses its default", which
    # the row does not say: unknown.
    try:
        ratio = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    return ratio if ratio and ratio > 0 else None


class CellDatabaseReader(DirectDatabase):
    """Reads one cell database; thread-compatible (one read at a time per reader)."""

    def __init__(self, url: str, *, cell_uuid: str | None = None, connect_timeout: int = 5,
                 query_timeout: int = 30, keep_connection: bool = False,
                 metric_names: frozenset[str] = frozenset()):
        # Kept: a read that a request waits for (connecting and setting the session up
        # took 4 of the 24 ms of a services read at 10,000 services, and 6.4 of the 6.9
        # ms of a read of 10 candidates' compute nodes). Else one connection per read.
        super().__init__(url, option=f'[{GROUP}] connections', error=CellDatabaseError,
                         connect_timeout=connect_timeout, query_timeout=query_timeout,
                         keep_connection=keep_connection)
        self.cell_uuid = cell_uuid
        # The metrics column only when some are asked for: with compute monitors on it is
        # kilobytes a row, its timestamps new every minute.
        self.metric_names = metric_names
        columns = f'{_COLUMNS}, {_METRICS_COLUMN}' if metric_names else _COLUMNS
        self._query = f'SELECT {columns} FROM compute_nodes WHERE deleted = 0'
        self._versioned_query = (f'SELECT {columns}, {_VERSION} FROM compute_nodes '
                                 'WHERE deleted = 0')
        self._shared: dict[tuple[Any, ...], Any] = {}
        # The last whole read's nodes by uuid, each with its row's version: nova-compute
        # writes each row every minute, mostly with the same topology and pools, and
        # parsing ten thousand topologies again each time in every worker was most of
        # this source's cost; an unchanged row gives the catalog the same node object.
        # On PostgreSQL a periodic read asks for the versions only (a few bytes a row,
        # where the texts were 40 MB at 50,000 nodes and most of a read's CPU in every
        # worker) and reads again the rows whose version moved; elsewhere every row is
        # read and its digest compared (the rows' texts themselves, a NUMA topology
        # being kilobytes of JSON, held 85 MB of a worker at 50,000 nodes). Also what
        # the sync applies of this cell: one index of the cell's nodes, not one here
        # and another there (1.9 MB each at 50,000).
        self._by_uuid: dict[str, ComputeNodeData] = {}

    def last_read(self) -> dict[str, ComputeNodeData]:
        """The nodes of the last good whole read by uuid (empty before one; replaced,
        never changed, by a read: not to be changed)."""
        return self._by_uuid

    def read(self) -> tuple[list[ComputeNodeData], list[str]]:
        """The compute nodes of this cell and the problems found in their rows."""
        with self.connect() as connection:
            if _versioned(connection):
                nodes, problems, changed = self._read_by_version(connection)
            else:
                nodes, problems = self._read_by_digest(connection)
                changed = True
        if changed:
            # Only the texts some row still has.
            used = {id(value) for node in nodes for value in (
                node.described, node.cpu_info, node.numa_topology, node.pci_stats,
                node.supported_instances, node.stats, node.metrics)}
            self._shared = {key: value for key, value in self._shared.items()
                            if id(value) in used}
        return nodes, problems

    def _read_by_digest(self, connection: DirectConnection
                        ) -> tuple[list[ComputeNodeData], list[str]]:
        """Every row, each parsed unless the last read had its row with its digest."""
        nodes: list[ComputeNodeData] = []
        problems: list[str] = []
        # Fetched a batch at a time (a server-side cursor where the driver has one)
        # and parsed as they come: only the changed rows' texts live beyond their batch.
        for batch in connection.chunks(self._query, READ_BATCH):
            for raw in batch:
                node = self._digested_node(raw, problems)
                if node is not None:
                    nodes.append(node)
        self._by_uuid = _by_uuid(nodes)
        return nodes, problems

    def _digested_node(self, raw: Sequence[Any], problems: list[str]
                       ) -> ComputeNodeData | None:
        """A row of :data:`QUERY`: the last whole read's node when it had the row with
        the same digest, else the row parsed, with its digest unless a field of it could
        not be parsed (then it is parsed, and said, again at the next read)."""
        digest = row_digest(raw)
        if digest is not None:
            node = _unchanged(self._by_uuid, raw[0], digest)
            if node is not None:
                return node
        found, trouble = parse_rows([tuple(raw)], self.cell_uuid, shared=self._shared,
                                    metric_names=self.metric_names)
        problems.extend(trouble)
        if not found:
            return None
        [node] = found
        return node if trouble or digest is None else node.with_version(digest)

    def _read_by_version(self, connection: DirectConnection
                         ) -> tuple[list[ComputeNodeData], list[str], bool]:
        """PostgreSQL: the versions of every row, then the rows whose version moved
        since the last read (every row at the first read, or when most moved); and
        whether any node changed, came or went."""
        last = self._by_uuid
        nodes: list[ComputeNodeData] = []
        problems: list[str] = []
        if last:
            # Each row gives its node when unchanged, else its uuid, read again below.
            order: list[ComputeNodeData | str] = []
            moved: list[str] = []
            for batch in connection.chunks(VERSIONS_QUERY, READ_BATCH):
                for uuid, version in batch:
                    node = _unchanged(last, uuid, version)
                    if node is None:
                        moved.append(uuid)
                    order.append(node or uuid)
            # A row without a uuid is named (by its node) only by a read of every row.
            if len(moved) <= len(order) * CHANGED_SHARE and all(moved):
                fresh: dict[str, ComputeNodeData | None] = {}
                for start in range(0, len(moved), CHANGED_BATCH):
                    for raw in connection.rows(
                            self._versioned_query + _BY_UUIDS,
                            {'uuids': Array(moved[start:start + CHANGED_BATCH])}):
                        fresh[raw[0]] = self._versioned_node(raw, problems)
                # A uuid not read again was deleted since the versions were read.
                nodes = [entry for entry in (
                    fresh.get(e) if isinstance(e, str) else e for e in order) if entry]
                changed = bool(moved) or len(nodes) != len(last)
                if changed:
                    self._by_uuid = _by_uuid(nodes)
                return nodes, problems, changed
        for batch in connection.chunks(self._versioned_query, READ_BATCH):
            for raw in batch:
                node = _unchanged(last, raw[0], raw[-1]) or self._versioned_node(raw, problems)
                if node is not None:
                    nodes.append(node)
        self._by_uuid = _by_uuid(nodes)
        return nodes, problems, True

    def _versioned_node(self, raw: Sequence[Any], problems: list[str]
                        ) -> ComputeNodeData | None:
        """A row of :data:`VERSIONED_QUERY` parsed, with its version unless a field of it
        could not be parsed (then it is read, and said, again at the next read)."""
        found, trouble = parse_rows([tuple(raw[:-1])], self.cell_uuid, shared=self._shared,
                                    metric_names=self.metric_names)
        problems.extend(trouble)
        if not found:
            return None
        [node] = found
        return node if trouble else node.with_version(raw[-1])

    def read_nodes(self, provider_uuids: Sequence[str]) -> tuple[list[ComputeNodeData], list[str]]:
        """:meth:`read`, for these compute nodes only (bound parameters)."""
        if not provider_uuids:
            # ``IN ()`` is a syntax error on MySQL and SQLite; none are asked for.
            return [], []
        with self.connect() as connection:
            versioned = _versioned(connection)
            if versioned:
                rows = connection.rows(self._versioned_query + _BY_UUIDS,
                                       {'uuids': Array(list(provider_uuids))})
            else:
                rows = connection.rows(self._query + ' AND uuid IN :uuids',
                                       {'uuids': list(provider_uuids)})
        return self._nodes_of(rows, versioned)

    def read_named(self, host: str | None, node: str | None
                   ) -> tuple[list[ComputeNodeData], list[str]]:
        """:meth:`read`, for the compute nodes on service ``host`` named ``node`` (None:
        any; at least one of them given), compared as Nova compares them: exactly
        (bound parameters)."""
        if not host and not node:
            raise ValueError('a host or a node name is needed')
        conditions = {'host': host, 'hypervisor_hostname': node}
        named = {column: value for column, value in conditions.items() if value}
        where = ''.join(f' AND {column} = :{column}' for column in named)
        with self.connect() as connection:
            versioned = _versioned(connection)
            rows = connection.rows((self._versioned_query if versioned else self._query) + where,
                                   named)
        return self._nodes_of(rows, versioned)

    def _nodes_of(self, rows: Sequence[Sequence[Any]], versioned: bool = False
                  ) -> tuple[list[ComputeNodeData], list[str]]:
        """:func:`parse_rows` for a read of some nodes: a row as the last whole read
        found it gives that read's node, not one parsed again, so that the catalog
        sees it unchanged (a request that asks for NUMA or PCI reads its candidates'
        rows again, mostly unchanged since the last whole read)."""
        trouble: list[str] = []
        if versioned:
            by_uuid = self._by_uuid   # replaced, never changed, by a periodic read
            return [node for raw in rows
                    if (node := _unchanged(by_uuid, raw[0], raw[-1])
                        or self._versioned_node(raw, trouble)) is not None], trouble
        return [node for raw in rows
                if (node := self._digested_node(raw, trouble)) is not None], trouble


def _versioned(connection: DirectConnection) -> bool:
    """Whether the database gives each row's version (:data:`VERSIONS_QUERY`)."""
    return connection.backend == 'postgresql'


def _by_uuid(nodes: Iterable[ComputeNodeData]) -> dict[str, ComputeNodeData]:
    """Nodes by their uuid, in lower case as Nova writes it (the node's own string)."""
    return {node.provider_uuid: node for node in nodes}


def _unchanged(last: dict[str, ComputeNodeData], uuid: Any, version: Any
               ) -> ComputeNodeData | None:
    """The node a read found for the row ``uuid`` when the row's version is still
    ``version``; else None."""
    node = last.get(uuid)
    if node is None and isinstance(uuid, str) and uuid != uuid.lower():
        node = last.get(uuid.lower())
    return node if node is not None and node.row_version == version else None


class CellDatabaseSync(PeriodicSync):
    """Reads every cell every ``interval`` seconds on a thread and applies the union
    of each cell's last good data to ``catalog`` (calls never wait for it)."""

    thread_name = 'cell-db-sync'
    label = 'cell database sync'

    def __init__(self, catalog: HostCatalog, readers: Sequence[CellDatabaseReader], *,
                 interval: float, max_age: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(interval=interval)
        self._catalog = catalog
        self._readers = list(readers)
        # What each cell said is its reader's last good whole read (last_read()), when
        # that read began (by reader label), and the nodes read by uuid since then:
        # provider uuid -> (when that read began, the reader's label, the node). Not
        # an index of every node of its own (one of the reader's was enough: each was
        # 1.9 MB of a worker at 50,000 nodes).
        self._whole_read_at: dict[str, float] = {}
        self._read_since: dict[str, tuple[float, str, ComputeNodeData]] = {}
        self._last_success: dict[str, float] = {}
        self.failures_in_a_row: dict[str, int] = {}
        self._max_age = max_age
        self._clock = clock
        # Serialises applying reads, so that an older read never replaces a newer one.
        self._apply_lock = threading.Lock()

    def sync_once(self) -> bool:
        """One read of every cell; True when all of them were read."""
        all_read = True
        for reader in self._readers:
            label = reader.label
            started = self._clock()
            try:
                nodes, problems = reader.read()
            except CellDatabaseError as e:
                all_read = False
                failures = self.failures_in_a_row[label] = self.failures_in_a_row.get(label,
                                                                                      0) + 1
                last = self._last_success.get(label)
                since = ('never read' if last is None else
                         f'data is {int(time.monotonic() - last)}s old')
                LOG.warning('cell database %s could not be read (%d in a row; %s; keeping its '
                            'last good data, next try in %ss): %s', label, failures, since,
                            self._interval, e)
                continue
            for problem in problems[:_MAX_ROW_WARNINGS]:
                LOG.warning('cell database %s: %s; that field is ignored', label, problem)
            if len(problems) > _MAX_ROW_WARNINGS:
                LOG.warning('cell database %s: %d more rows with problems', label,
                            len(problems) - _MAX_ROW_WARNINGS)
            first = label not in self._last_success or self.failures_in_a_row.get(label)
            (LOG.info if first else LOG.debug)(
                'cell database %s: %d compute nodes (%d with a NUMA topology, %d with PCI '
                'pools) in %.1fs', label, len(nodes),
                sum(1 for n in nodes if n.numa_topology is not None),
                sum(1 for n in nodes if n.pci_stats is not None), time.monotonic() - started)
            with self._apply_lock:
                # A node read for a request after this read began is newer than it; one
                # read by this reader before is not.
                self._whole_read_at[label] = started
                self._read_since = {uuid: read for uuid, read in self._read_since.items()
                                    if read[0] > started or read[1] != label}
            self._last_success[label] = time.monotonic()
            self.failures_in_a_row[label] = 0
        with self._apply_lock:
            if len(self._readers) == 1 and not self._read_since:
                # One cell, and no node read since: its reader's index, not a copy.
                self._catalog.apply_cell_db_nodes(self._readers[0].last_read())
            else:
                # The later of two nodes of one provider is the one kept.
                self._catalog.apply_cell_db_nodes(itertools.chain(
                    itertools.chain.from_iterable(r.last_read().values()
                                                  for r in self._readers),
                    (node for _, _, node in self._read_since.values())))
        return all_read

    def _read_at(self, provider_uuid: str) -> tuple[float | None, str | None]:
        """When the last read that gave this node began, and the reader's label;
        (None, None) for a node no read gave."""
        since = self._read_since.get(provider_uuid)
        if since is not None:
            return since[0], since[1]
        for reader in self._readers:
            if provider_uuid in reader.last_read():
                return self._whole_read_at.get(reader.label), reader.label
        return None, None

    def fresh_nodes(self, provider_uuids: Iterable[str]) -> None:
        """Make these compute nodes' NUMA topology and PCI pools at most ``max_age``
        seconds old before a request that uses them is decided, as nova-scheduler
        reads its candidates' compute nodes per request.

        One SELECT per cell for just the nodes that are too old, sent to the cell
        that last had them (every cell for a node none had). A cell that cannot be
        read is logged and skipped: the request is decided with its last good data.
        """
        if self._max_age is None:
            return
        wanted_after = self._clock() - self._max_age
        stale: dict[str | None, list[str]] = {}
        for uuid in provider_uuids:
            read_at, label = self._read_at(uuid)
            if read_at is None or read_at < wanted_after or not self._max_age:
                stale.setdefault(label, []).append(uuid)
        if stale:
            self._read_nodes({r.label: stale.get(r.label, []) + stale.get(None, [])
                              for r in self._readers}, 'candidate compute nodes')

    def look_up(self, provider_uuids: Sequence[str]) -> None:
        """Read these nodes from every cell now (HostLookup); a cell that cannot be
        read is logged and skipped, its last good data stays."""
        self._read_nodes({r.label: list(provider_uuids) for r in self._readers},
                         'compute nodes no source knew')

    def look_up_names(self, host: str | None, node: str | None) -> None:
        """Read the compute nodes on service ``host`` named ``node`` (None: any) from
        every cell now (DestinationSource: a requested destination no source knew);
        a cell that cannot be read is logged and skipped, its last good data stays."""
        for reader in self._readers:
            started = self._clock()
            try:
                nodes, problems = reader.read_named(host, node)
            except CellDatabaseError as e:
                LOG.warning('cell database %s: read of the requested host %s node %s failed '
                            '(deciding with what was last read): %s', reader.label, host, node,
                            e)
                continue
            self._add_read(reader, started, nodes, problems)

    def _read_nodes(self, uuids_by_reader: dict[str, list[str]], what: str) -> None:
        for reader in self._readers:
            uuids = uuids_by_reader.get(reader.label)
            if not uuids:
                continue
            started = self._clock()
            try:
                nodes, problems = reader.read_nodes(uuids)
            except CellDatabaseError as e:
                LOG.warning('cell database %s: read of %d %s failed (deciding with what was '
                            'last read): %s', reader.label, len(uuids), what, e)
                continue
            self._add_read(reader, started, nodes, problems)

    def _add_read(self, reader: CellDatabaseReader, started: float,
                  nodes: Sequence[ComputeNodeData], problems: Sequence[str]) -> None:
        """Add the rows of a read of some nodes that began at ``started`` to the
        catalog, except those a read begun later already gave."""
        for problem in problems[:_MAX_ROW_WARNINGS]:
            LOG.warning('cell database %s: %s; that field is ignored', reader.label, problem)
        with self._apply_lock:
            newer = [n for n in nodes
                     if (at := self._read_at(n.provider_uuid)[0]) is None or at <= started]
            for node in newer:
                self._read_since[node.provider_uuid] = (started, reader.label, node)
            self._catalog.add_cell_db_nodes(newer)

    def stop(self, timeout: float | None = None) -> None:
        super().stop(timeout)
        for reader in self._readers:
            reader.close()


def cell_readers_from_conf(conf: cfg.ConfigOpts, *, keep_connection: bool = False
                           ) -> list[CellDatabaseReader]:
    """A reader of each database ``[cell_database] connections`` names (none: empty);
    ``keep_connection``: for reads that requests wait for.

    ConfigurationError when SQLAlchemy is missing or a URL cannot work.
    """
    opts = conf[GROUP]
    names = metric_names(conf)
    readers = []
    for value in (u.strip() for u in opts.connections or ()):
        if value:
            cell_uuid, url = split_connection(value)
            readers.append(CellDatabaseReader(url, cell_uuid=cell_uuid,
                                              connect_timeout=opts.connect_timeout,
                                              query_timeout=opts.query_timeout,
                                              keep_connection=keep_connection,
                                              metric_names=names))
    return readers


def metric_names(conf: cfg.ConfigOpts) -> frozenset[str]:
    """The metrics ``[metrics] weight_setting`` names: what the MetricsFilter and
    MetricsWeigher read, and all the cell databases' reads keep. A malformed entry
    names nothing, as for them; they say what is wrong with it."""
    try:
        entries = conf.metrics.weight_setting or ()
    except cfg.NoSuchOptError:
        return frozenset()
    return frozenset(name for name, _ in split_weight_setting(entries)[0])


def cell_db_sync_from_conf(conf: cfg.ConfigOpts, catalog: HostCatalog
                           ) -> CellDatabaseSync | None:
    """The sync ``[cell_database]`` asks for, or None when ``connections`` is empty.

    ConfigurationError when SQLAlchemy is missing or a URL cannot work.
    """
    opts = conf[GROUP]
    max_age = opts.max_age
    # Requests that ask for NUMA or PCI wait for their candidates' rows (max_age >= 0).
    readers = cell_readers_from_conf(conf, keep_connection=max_age >= 0)
    if not readers:
        LOG.info('[%s] connections is empty: host NUMA topologies and PCI pools come from '
                 'the hosts file only', GROUP)
        return None
    LOG.info('cell database sync every %ss, read-only: %s; candidates\' compute nodes read '
             '%s', opts.sync_interval, ', '.join(r.label for r in readers),
             'before every request that asks for NUMA or PCI' if max_age == 0 else
             f'before a request that asks for NUMA or PCI when older than {max_age}s'
             if max_age > 0 else 'with the sync only')
    return CellDatabaseSync(catalog, readers, interval=opts.sync_interval,
                            max_age=max_age if max_age >= 0 else None)
