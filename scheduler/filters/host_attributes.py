"""Looking up a host's attributes by name, as request-supplied expressions do.

ComputeCapabilitiesFilter (``capabilities:cpu_info:arch``) and JsonFilter
(``$stats.gpu``) let a flavor or a hint name what to read on a host. They may
read the attributes Nova's HostState has, and only those: our HostState has
more (``record``, ``capacity``, methods), and a name that meant nothing in Nova
must not start to mean something here.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler.host_state import HostState

#: Nova 34 HostState's data attributes (nova/scheduler/host_manager.py, HostState).
NOVA_HOST_STATE_ATTRIBUTES = frozenset({
    'host', 'nodename', 'uuid', 'cell_uuid', 'total_usable_ram_mb', 'free_ram_mb',
    'total_usable_disk_gb', 'disk_mb_used', 'free_disk_mb', 'vcpus_total', 'vcpus_used',
    'cpu_allocation_ratio', 'ram_allocation_ratio', 'disk_allocation_ratio', 'numa_topology',
    'pci_stats', 'host_ip', 'hypervisor_type', 'hypervisor_version', 'hypervisor_hostname',
    'cpu_info', 'supported_instances', 'stats', 'num_instances', 'num_io_ops',
    'failed_builds', 'metrics', 'service', 'aggregates', 'instances', 'limits',
    'allocation_candidates', 'updated',
})

#: The attributes whose data only the host catalog (hosts file) provides here, while
#: every nova-compute reports them in Nova: when empty, the host was not described.
CATALOG_ATTRIBUTES = frozenset({
    'host_ip', 'hypervisor_type', 'hypervisor_version', 'cpu_info', 'supported_instances',
    'stats', 'metrics',
})

# A JSON string longer than this is not parsed while walking: host data from the
# catalog is small, and parsing is per host and per request.
_MAX_JSON_CHARS = 65536


class _Missing:
    def __repr__(self) -> str:
        return 'MISSING'


#: What a lookup gives when there is nothing at the path (None is a legitimate value).
MISSING: Any = _Missing()


def host_attribute(host_state: HostState, name: str) -> Any:
    """The Nova HostState attribute ``name``, or :data:`MISSING` when Nova's HostState
    has no such attribute (or ours does not carry it)."""
    if name not in NOVA_HOST_STATE_ATTRIBUTES:
        return MISSING
    return getattr(host_state, name, MISSING)


def step_into(value: Any, key: str) -> Any:
    """``value[key]`` for a mapping, or for a string holding a JSON object (Nova keeps
    ``cpu_info`` as one); :data:`MISSING` for anything else or an absent key."""
    if isinstance(value, str):
        value = parse_json_object(value)
    if isinstance(value, dict):
        return value.get(key, MISSING)
    return MISSING


def walk(value: Any, keys: Iterable[str]) -> Any:
    """Step into ``value`` along ``keys``; :data:`MISSING` as soon as a step fails.
    A None met on the way (not at the end) is missing too, as in Nova."""
    for key in keys:
        if value is None:
            return MISSING
        value = step_into(value, key)
        if value is MISSING:
            return MISSING
    return value


def parse_json_object(text: str) -> Any:
    """The dict a JSON string holds, or :data:`MISSING`."""
    if len(text) > _MAX_JSON_CHARS or not text.lstrip().startswith('{'):
        return MISSING
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return MISSING
    return parsed if isinstance(parsed, dict) else MISSING


def is_absent(value: Any) -> bool:
    """Whether a catalog-fed attribute carries no data (None, empty mapping or list):
    the host catalog was not told, which is not the same as the host lacking it."""
    return value is MISSING or value is None or (
        isinstance(value, (dict, list, tuple, str)) and not value)
