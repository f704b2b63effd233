"""The static hosts file: YAML in, validated plain data out.

The format is documented in ``etc/scheduler/hosts.yaml.sample``. Parsing is
strict (unknown keys, wrong types and duplicates are errors) because a typo in
this file silently changes where instances land; every error names the file
and the entry.
"""
from __future__ import annotations

import datetime
import ipaddress
import json
import math
import sys
import uuid as uuidlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import yaml

from scheduler.exceptions import CatalogError, HostDataError
from scheduler.host_state import HostRecord
from scheduler.objects.numa import HostNUMATopology, parse_host_numa_topology
from scheduler.objects.pci import HostPciStats, parse_pci_pools
from scheduler.objects.spec import Aggregate

# libyaml's loader when PyYAML has it: the same safe subset, and a file of
# 50,000 hosts loads in seconds instead of minutes.
_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)

_TOP_KEYS = frozenset({'cells', 'aggregates', 'hosts'})
_CELL_KEYS = frozenset({'uuid', 'name'})
_AGGREGATE_KEYS = frozenset({'id', 'uuid', 'name', 'hosts', 'metadata'})
_HOST_KEYS = frozenset({
    'nodename', 'service_host', 'provider_uuid', 'cell', 'disabled', 'disabled_reason',
    'forced_down', 'last_seen_up', 'host_ip', 'hypervisor_type', 'hypervisor_version',
    'cpu_info', 'supported_instances', 'stats', 'metrics', 'numa_topology', 'pci_pools',
})


@dataclass(frozen=True)
class HostsFileContent:
    """What one hosts file says. Records and aggregates are not shared with callers."""

    cells: Mapping[str, str | None] = field(default_factory=dict)  # uuid -> name
    aggregates: tuple[Aggregate, ...] = ()
    hosts: tuple[HostRecord, ...] = ()


def normalize_uuid(value: str) -> str:
    """The canonical (lower-case, hyphenated) form Placement uses; ValueError if not a UUID."""
    return str(uuidlib.UUID(value))


@overload
def interned(value: str) -> str: ...


@overload
def interned(value: str | None) -> str | None: ...


def interned(value: str | None) -> str | None:
    """One string object for a name or a uuid, whichever source read it: the hosts file,
    the cell databases' nodes and their services all name the same 50,000 hosts, and
    each source's copies of those names were a tenth of what it added to a worker."""
    return sys.intern(value) if value is not None else None


def _load(text: str) -> Any:
    # YAML is a superset of JSON; a generated file of tens of thousands of hosts
    # is usually JSON, and the JSON parser reads it in a fraction of the time and
    # memory libyaml's node graph takes (seconds and ~0.3 GB instead of minutes
    # and over a GB at 50,000 hosts). Anything else, or JSON it rejects, is YAML.
    if text.lstrip().startswith('{'):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return yaml.load(text, Loader=_LOADER)


def read_hosts_in_process(path: str, *, default_cell_uuid: str) -> HostsFileContent:
    """Read and validate ``path`` in this process, whatever its size; :class:`CatalogError`
    naming the file on any problem. :func:`scheduler.catalog.hosts_child.read_hosts_file`
    chooses between this and a child process."""
    try:
        with open(path, encoding='utf-8') as f:
            text = f.read()
        data = _load(text)
    except OSError as e:
        raise CatalogError(f'{path}: cannot read the hosts file: {e.strerror or e}') from e
    except yaml.YAMLError as e:
        mark = getattr(e, 'problem_mark', None)
        where = f' at line {mark.line + 1}, column {mark.column + 1}' if mark else ''
        problem = getattr(e, 'problem', None) or str(e)
        raise CatalogError(f'{path}: not valid YAML{where}: {problem}') from e
    except UnicodeDecodeError as e:
        raise CatalogError(f'{path}: not UTF-8 text: {e}') from e
    return parse_hosts(data, source=path, default_cell_uuid=default_cell_uuid)


def parse_hosts(data: Any, *, source: str, default_cell_uuid: str) -> HostsFileContent:
    """Validate the loaded YAML document ``data`` (None: an empty file)."""
    if data is None:
        return HostsFileContent()
    top = _Entry(source, 'top level')
    top.check_mapping(data, _TOP_KEYS)
    cells = _parse_cells(_list_of(data.get('cells'), source, 'cells'), source)
    shared = _Shared()
    aggregates = _parse_aggregates(_list_of(data.get('aggregates'), source, 'aggregates'),
                                   source, shared)
    hosts = _parse_hosts(_list_of(data.get('hosts'), source, 'hosts'), source, cells,
                         normalize_uuid(default_cell_uuid), shared)
    return HostsFileContent(cells=cells, aggregates=tuple(aggregates), hosts=tuple(hosts))


class _Entry:
    """Where in the file we are, for error messages, and typed field readers."""

    def __init__(self, source: str, where: str):
        self.source = source
        self.where = where

    def error(self, message: str) -> CatalogError:
        return CatalogError(f'{self.source}: {self.where}: {message}')

    def check_mapping(self, value: Any, allowed: frozenset[str]) -> None:
        if not isinstance(value, dict):
            raise self.error(f'must be a mapping, got {_kind(value)}')
        unknown = sorted(str(k) for k in value if k not in allowed)
        if unknown:
            raise self.error(f'unknown key(s) {", ".join(unknown)}; '
                             f'allowed: {", ".join(sorted(allowed))}')

    @overload
    def string(self, data: dict, key: str, *, required: Literal[True]) -> str: ...

    @overload
    def string(self, data: dict, key: str, *, required: bool = False) -> str | None: ...

    def string(self, data: dict, key: str, *, required: bool = False) -> str | None:
        value = data.get(key)
        if value is None:
            if required:
                raise self.error(f'{key} is required')
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.error(f'{key} must be a non-empty string, got {_kind(value)}')
        return value

    @overload
    def uuid(self, data: dict, key: str, *, required: Literal[True]) -> str: ...

    @overload
    def uuid(self, data: dict, key: str, *, required: bool = False) -> str | None: ...

    def uuid(self, data: dict, key: str, *, required: bool = False) -> str | None:
        value = self.string(data, key, required=required)
        if value is None:
            return None
        try:
            return normalize_uuid(value)
        except ValueError:
            raise self.error(f'{key} must be a UUID, got {value!r}') from None

    def boolean(self, data: dict, key: str) -> bool:
        value = data.get(key, False)
        if not isinstance(value, bool):
            raise self.error(f'{key} must be true or false, got {_kind(value)}')
        return value

    def integer(self, data: dict, key: str) -> int | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f'{key} must be an integer, got {_kind(value)}')
        return value

    def mapping(self, data: dict, key: str) -> dict:
        value = data.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(f'{key} must be a mapping, got {_kind(value)}')
        for k in value:
            if not isinstance(k, str) or not k:
                raise self.error(f'{key} keys must be non-empty strings, got {k!r}')
        return value

    def string_map(self, data: dict, key: str) -> dict[str, str]:
        # Nova keeps aggregate metadata and host stats as strings; YAML would
        # turn `2.0` into a float, so scalars are converted back.
        result = {}
        for k, v in self.mapping(data, key).items():
            if isinstance(v, bool):
                result[k] = 'true' if v else 'false'
            elif isinstance(v, (str, int, float)):
                result[k] = str(v)
            else:
                raise self.error(f'{key}.{k} must be a string or number, got {_kind(v)}')
        return result

    def string_list(self, data: dict, key: str) -> list[str]:
        value = data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(f'{key} must be a list, got {_kind(value)}')
        for item in value:
            if not isinstance(item, str) or not item:
                raise self.error(f'{key} items must be non-empty strings, got {item!r}')
        return list(value)


def _kind(value: Any) -> str:
    if value is None:
        return 'nothing'
    if isinstance(value, bool):
        return f'a boolean ({value})'
    if isinstance(value, (int, float, str)):
        return f'{type(value).__name__} {value!r}'
    kinds: dict[type, str] = {dict: 'a mapping', list: 'a list'}
    return kinds.get(type(value), type(value).__name__)


def _list_of(value: Any, source: str, key: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise CatalogError(f'{source}: {key}: must be a list, got {_kind(value)}')
    return value


def _parse_cells(items: list, source: str) -> dict[str, str | None]:
    cells: dict[str, str | None] = {}
    names: set[str] = set()
    for i, item in enumerate(items):
        entry = _Entry(source, f'cells[{i}]')
        entry.check_mapping(item, _CELL_KEYS)
        cell_uuid = entry.uuid(item, 'uuid', required=True)
        name = entry.string(item, 'name')
        if cell_uuid in cells:
            raise entry.error(f'duplicate cell uuid {cell_uuid}')
        if name is not None:
            if name in names:
                raise entry.error(f'duplicate cell name {name!r}')
            names.add(name)
        cells[cell_uuid] = name
    return cells


def _parse_aggregates(items: list, source: str,
                      shared: _Shared | None = None) -> list[Aggregate]:
    shared = shared or _Shared()
    aggregates: list[Aggregate] = []
    seen_uuids: set[str] = set()
    seen_names: set[str] = set()
    for i, item in enumerate(items):
        label = item.get('name') if isinstance(item, dict) else None
        entry = _Entry(source, f'aggregates[{i}]' + (f' ({label})' if label else ''))
        entry.check_mapping(item, _AGGREGATE_KEYS)
        name = entry.string(item, 'name', required=True)
        # The uuid is the link to Placement: providers are members of the
        # Placement aggregate with this uuid, which is what member_of asks for.
        agg_uuid = entry.uuid(item, 'uuid', required=True)
        agg_id = entry.integer(item, 'id')
        metadata = entry.string_map(item, 'metadata')
        if 'availability_zone' in metadata and not metadata['availability_zone'].strip():
            raise entry.error('metadata.availability_zone must not be empty')
        if agg_uuid in seen_uuids:
            raise entry.error(f'duplicate aggregate uuid {agg_uuid}')
        if name in seen_names:
            raise entry.error(f'duplicate aggregate name {name!r}')
        seen_uuids.add(agg_uuid)
        seen_names.add(name)
        aggregates.append(Aggregate(
            id=agg_id if agg_id is not None else i + 1, uuid=agg_uuid, name=name,
            hosts=[shared.text(h) for h in entry.string_list(item, 'hosts')],
            metadata=metadata))
    return aggregates


def _parse_hosts(items: list, source: str, cells: Mapping[str, str | None],
                 default_cell_uuid: str, shared: _Shared | None = None) -> list[HostRecord]:
    shared = shared or _Shared()
    cell_by_name = {name: cell_uuid for cell_uuid, name in cells.items() if name}
    records: list[HostRecord] = []
    nodenames: set[str] = set()
    providers: set[str] = set()
    for i, item in enumerate(items):
        label = item.get('nodename') if isinstance(item, dict) else None
        entry = _Entry(source, f'hosts[{i}]' + (f' ({label})' if label else ''))
        entry.check_mapping(item, _HOST_KEYS)
        record = _parse_host(entry, item, cell_by_name, default_cell_uuid, shared)
        if record.nodename in nodenames:
            raise entry.error(f'duplicate nodename {record.nodename!r}')
        if record.provider_uuid is not None:
            if record.provider_uuid in providers:
                raise entry.error(f'duplicate provider_uuid {record.provider_uuid}')
            providers.add(record.provider_uuid)
        nodenames.add(record.nodename)
        records.append(record)
    return records


class _Shared:
    """One object for equal values across the hosts of a file.

    A region's hosts come in a handful of models: the same cpu_info, the same
    supported instances, the same hypervisor type. Keeping one copy of each is
    what lets a worker hold 50,000 hosts in little memory (doc/performance.md).
    """

    def __init__(self) -> None:
        self._values: dict[Any, Any] = {}

    def __call__(self, key: Any, value: Any) -> Any:
        return self._values.setdefault(key, value)

    @overload
    def text(self, value: str) -> str: ...

    @overload
    def text(self, value: str | None) -> str | None: ...

    def text(self, value: str | None) -> str | None:
        return None if value is None else self(('s', value), value)

    def integer(self, value: int | None) -> int | None:
        return None if value is None else self(('i', value), value)

    def timestamp(self, value: datetime.datetime | None) -> datetime.datetime | None:
        # Heartbeats written together are equal. By repr: equal instants in
        # different time zones compare equal but are not the same value.
        return None if value is None else self(('t', repr(value)), value)

    def json_value(self, value: Any) -> Any:
        try:
            key = ('j', json.dumps(value, sort_keys=True))
        except (TypeError, ValueError):
            return value
        return self(key, value)


def _parse_host(entry: _Entry, item: dict, cell_by_name: Mapping[str, str],
                default_cell_uuid: str, shared: _Shared | None = None) -> HostRecord:
    shared = shared or _Shared()
    nodename = interned(shared.text(entry.string(item, 'nodename', required=True)))
    service_host = interned(shared.text(entry.string(item, 'service_host'))) or nodename
    supported = _supported_instances(entry, item)
    stats = entry.string_map(item, 'stats')
    return HostRecord(
        nodename=nodename,
        service_host=nodename if service_host == nodename else service_host,
        cell_uuid=shared.text(_cell(entry, item, cell_by_name, default_cell_uuid)),
        provider_uuid=interned(entry.uuid(item, 'provider_uuid')),
        disabled=entry.boolean(item, 'disabled'),
        disabled_reason=shared.text(entry.string(item, 'disabled_reason')),
        forced_down=entry.boolean(item, 'forced_down'),
        last_seen_up=shared.timestamp(_timestamp(entry, item, 'last_seen_up')),
        host_ip=_ip(entry, item),
        hypervisor_type=shared.text(entry.string(item, 'hypervisor_type')),
        hypervisor_version=shared.integer(entry.integer(item, 'hypervisor_version')),
        cpu_info=shared.json_value(dict(entry.mapping(item, 'cpu_info'))),
        supported_instances=shared(('si', tuple(supported)), supported),
        supported_instances_reported=item.get('supported_instances') is not None,
        stats=shared(('st', tuple(sorted(stats.items()))), stats),
        metrics=shared.json_value(_metrics(entry, item)),
        numa_topology=_numa_topology(entry, item),
        pci_pools=_pci_pools(entry, item),
    )


def _cell(entry: _Entry, item: dict, cell_by_name: Mapping[str, str],
          default_cell_uuid: str) -> str:
    ref = entry.string(item, 'cell')
    if ref is None:
        return default_cell_uuid
    if ref in cell_by_name:
        return cell_by_name[ref]
    try:
        return normalize_uuid(ref)
    except ValueError:
        known = ', '.join(sorted(cell_by_name)) or 'none declared'
        raise entry.error(f'cell {ref!r} is neither a UUID nor the name of a cell in '
                          f'"cells" ({known})') from None


def _timestamp(entry: _Entry, item: dict, key: str) -> datetime.datetime | None:
    value = item.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            # Python 3.10's fromisoformat does not accept a trailing Z.
            value = datetime.datetime.fromisoformat(value.strip().replace('Z', '+00:00'))
        except ValueError:
            raise entry.error(f'{key} must be an ISO 8601 timestamp, got {value!r}') from None
    if not isinstance(value, datetime.datetime):
        raise entry.error(f'{key} must be a timestamp, got {_kind(value)}')
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value


def _ip(entry: _Entry, item: dict) -> str | None:
    value = entry.string(item, 'host_ip')
    if value is None:
        return None
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise entry.error(f'host_ip must be an IP address, got {value!r}') from None


def parse_supported_instances(value: Any) -> list[tuple[str, str, str]]:
    """Nova's ``supported_instances``: a list of [architecture, hypervisor_type,
    vm_mode], each a non-empty string (the hosts file's and the cell databases'
    ``compute_nodes`` column, once its JSON is decoded); ValueError otherwise."""
    if not isinstance(value, list):
        raise ValueError(f'supported_instances must be a list, got {_kind(value)}')
    result = []
    for triple in value:
        if (not isinstance(triple, list) or len(triple) != 3
                or not all(isinstance(x, str) and x for x in triple)):
            raise ValueError('supported_instances items must be [architecture, '
                             f'hypervisor_type, vm_mode], got {triple!r}')
        result.append((triple[0], triple[1], triple[2]))
    return result


def _supported_instances(entry: _Entry, item: dict) -> list[tuple[str, str, str]]:
    value = item.get('supported_instances')
    if value is None:
        return []
    try:
        return parse_supported_instances(value)
    except ValueError as e:
        raise entry.error(str(e)) from None


# Nova's MonitorMetricType names. nova-compute stores the five percentages in
# compute_nodes.metrics divided by 100 (MonitorMetric.to_dict: 0.37 for 37 %)
# and nova-scheduler multiplies them back (MonitorMetricList.from_json), then
# keeps every value as an integer (MonitorMetric.value is an IntegerField).
NOVA_PERCENT_METRICS = frozenset({
    'cpu.user.percent', 'cpu.kernel.percent', 'cpu.idle.percent', 'cpu.iowait.percent',
    'cpu.percent'})
NOVA_METRICS = NOVA_PERCENT_METRICS | {
    'cpu.frequency', 'cpu.user.time', 'cpu.kernel.time', 'cpu.idle.time', 'cpu.iowait.time',
    'numa.membw.max', 'numa.membw.current'}


def metric_as_nova_reads_it(name: str, stored: float) -> float:
    """The value Nova's MetricsWeigher sees for a metric that compute_nodes.metrics
    stores as ``stored``: as nova's ``MonitorMetricList.from_json``, percentages
    times 100, then truncated to an integer (``0.29`` -> 28, as float arithmetic
    gives Nova 28.999...). Names Nova does not know (its scheduler cannot load
    them) are kept as they are."""
    if name not in NOVA_METRICS:
        return float(stored)
    if name in NOVA_PERCENT_METRICS:
        stored = stored * 100
    return float(int(stored))


def parse_metrics(value: Any) -> dict[str, float]:
    """Metrics as compute_nodes.metrics holds them, as Nova's scheduler reads them
    (:func:`metric_as_nova_reads_it`): either that column's list of ``{name,
    value, timestamp, source}`` objects (entries without a value, such as
    ``numa.membw.*``, are left out; a later entry of a name wins, as in Nova's
    weigher) or a mapping ``name -> value``. ValueError if malformed."""
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list):
        pairs = []
        for metric in value:
            if not isinstance(metric, dict) or not isinstance(metric.get('name'), str):
                raise ValueError(f'metrics items must be mappings with a name, got {_kind(metric)}')
            if 'value' in metric:
                pairs.append((metric['name'], metric['value']))
    else:
        raise ValueError(f'metrics must be a mapping or a list, got {_kind(value)}')
    result = {}
    for name, number in pairs:
        if not isinstance(name, str) or not name:
            raise ValueError(f'metrics names must be non-empty strings, got {name!r}')
        if isinstance(number, bool) or not isinstance(number, (int, float)) \
                or not math.isfinite(number):
            raise ValueError(f'metrics.{name} must be a finite number, got {_kind(number)}')
        result[name] = metric_as_nova_reads_it(name, number)
    return result


def _metrics(entry: _Entry, item: dict) -> dict[str, float]:
    value = item.get('metrics')
    if value is None:
        return {}
    try:
        return parse_metrics(value)
    except ValueError as e:
        raise entry.error(str(e)) from None


def _numa_topology(entry: _Entry, item: dict) -> HostNUMATopology | None:
    """Nova's NUMATopology fields (doc/host-data.md), CPU sets also as ``"0-3,8"``."""
    if item.get('numa_topology') is None:
        return None
    try:
        return parse_host_numa_topology(item['numa_topology'], where='numa_topology',
                                        strict=True)
    except HostDataError as e:
        raise entry.error(str(e)) from None


def _pci_pools(entry: _Entry, item: dict) -> HostPciStats | None:
    """Nova's PciDevicePool fields, one mapping per pool of free devices."""
    if item.get('pci_pools') is None:
        return None
    try:
        return parse_pci_pools(item['pci_pools'], where='pci_pools', strict=True)
    except HostDataError as e:
        raise entry.error(str(e)) from None

