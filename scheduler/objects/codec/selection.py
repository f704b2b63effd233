"""Selection 1.0-1.1 (with its SchedulerLimits 1.0): encoded exactly as nova-conductor
deserializes it, ``nova_object.changes`` listing every field as Nova's own
``obj_to_primitive`` does for objects built by their constructor; decoded for
our own RPC client.

A reply is written at the version its caller reads (scheduler/objects/nova_releases.py
chooses it): fields newer than that version are left out, as Nova's own
``obj_make_compatible`` leaves them out of a backported primitive."""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from scheduler.objects.codec.bounded import (
    DATA_KEY,
    NAME_KEY,
    NAMESPACE,
    NAMESPACE_KEY,
    VERSION_KEY,
    BoundedReader,
    DecodeLimits,
    EncodeError,
    check_depth,
    encode_str,
    envelope,
)
from scheduler.objects.nova_releases import Version, format_version, parse_version
from scheduler.objects.selection import SchedulerLimits, Selection

SELECTION_VERSION = '1.1'
SCHEDULER_LIMITS_VERSION = '1.0'
#: The Selection fields that came after 1.0, with the version that added them.
SELECTION_FIELDS_SINCE: dict[str, Version] = {'availability_zone': (1, 1)}
#: The newest version of each reply object this codec can write.
NEWEST: dict[str, Version] = {'Selection': parse_version(SELECTION_VERSION),
                              'SchedulerLimits': parse_version(SCHEDULER_LIMITS_VERSION)}


def decode_selection(primitive: Any, *, limits: DecodeLimits = DecodeLimits(),
                     path: str = 'selection') -> Selection:
    """A Selection 1.x primitive (the client side of a 4.5 reply; 1.0 lacks the AZ)."""
    check_depth(primitive, path, limits.max_depth)
    return SelectionReader(limits).selection(primitive, path)


def _target(name: str, versions: Mapping[str, Version] | None) -> Version:
    newest = NEWEST[name]
    target = newest if versions is None else versions.get(name, newest)
    if target[0] != newest[0] or target > newest:
        # A caller that reads only something newer than we can write is not one
        # we know; an answer at a version we cannot write would be a lie.
        raise EncodeError(f'{name} {format_version(target)} cannot be written '
                          f'(newest known: {format_version(newest)})')
    return target


def encode_selection(sel: Selection,
                     versions: Mapping[str, Version] | None = None) -> dict[str, Any]:
    """The Selection primitive nova-conductor deserializes, at ``versions['Selection']``
    (its SchedulerLimits at ``versions['SchedulerLimits']``); the newest without."""
    target = _target('Selection', versions)
    data = {
        'compute_node_uuid': encode_str(sel.compute_node_uuid, 'compute_node_uuid', uuid=True),
        'service_host': encode_str(sel.service_host, 'service_host'),
        'nodename': encode_str(sel.nodename, 'nodename'),
        'cell_uuid': encode_str(sel.cell_uuid, 'cell_uuid', uuid=True),
        'limits': (None if sel.limits is None
                   else encode_scheduler_limits(sel.limits, versions)),
        'allocation_request': encode_str(sel.allocation_request, 'allocation_request',
                                       nullable=True),
        'allocation_request_version': encode_str(sel.allocation_request_version,
                                               'allocation_request_version', nullable=True),
        'availability_zone': encode_str(sel.availability_zone, 'availability_zone',
                                      nullable=True),
    }
    for field, since in SELECTION_FIELDS_SINCE.items():
        if target < since:
            del data[field]
    return envelope('Selection', format_version(target), data)



class SelectionReader(BoundedReader):
    """The readers of a Selection and its limits."""

    def selection(self, value: Any, path: str) -> Selection:
        data = self.obj(value, path, 'Selection')

        def opt(key: str) -> Any:
            return self.take(data, key, path, self.string, default=None, nullable=True)

        return Selection(
            compute_node_uuid=self.take(data, 'compute_node_uuid', path, self.uuid),
            service_host=self.take(data, 'service_host', path, self.string),
            nodename=self.take(data, 'nodename', path, self.string),
            cell_uuid=self.take(data, 'cell_uuid', path, self.uuid),
            allocation_request=self.take(data, 'allocation_request', path, self.string,
                                         default='null', nullable=True, null='null'),
            allocation_request_version=opt('allocation_request_version'),
            availability_zone=opt('availability_zone'),
            limits=self.take(data, 'limits', path, self.scheduler_limits,
                             default=SchedulerLimits, nullable=True, null=SchedulerLimits),
        )

    def scheduler_limits(self, value: Any, path: str) -> SchedulerLimits:
        data = self.obj(value, path, 'SchedulerLimits')

        def amount(key: str) -> int | None:
            return self.take(data, key, path, self.integer, default=None, nullable=True)

        return SchedulerLimits(
            numa_topology=self.take(
                data, 'numa_topology', path,
                lambda v, p: self.kept_object(v, p, 'NUMATopologyLimits', lambda d, q: None),
                default=None, nullable=True),
            vcpu=amount('vcpu'), disk_gb=amount('disk_gb'), memory_mb=amount('memory_mb'))



def _enc_limit(value: Any, field: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise EncodeError(f'SchedulerLimits.{field} must be an integer or None')
    return value


def _enc_numa_limits(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if (not isinstance(value, dict) or value.get(NAME_KEY) != 'NUMATopologyLimits'
            or value.get(NAMESPACE_KEY) != NAMESPACE or not isinstance(value.get(DATA_KEY), dict)
            or not isinstance(value.get(VERSION_KEY), str)):
        raise EncodeError('SchedulerLimits.numa_topology must be a NUMATopologyLimits primitive')
    return copy.deepcopy(value)


def encode_scheduler_limits(limits: SchedulerLimits,
                            versions: Mapping[str, Version] | None = None) -> dict[str, Any]:
    target = _target('SchedulerLimits', versions)
    # Nova's SchedulerLimits.from_dict sets all four fields, null or not.
    return envelope('SchedulerLimits', format_version(target), {
        'numa_topology': _enc_numa_limits(limits.numa_topology),
        'vcpu': _enc_limit(limits.vcpu, 'vcpu'),
        'disk_gb': _enc_limit(limits.disk_gb, 'disk_gb'),
        'memory_mb': _enc_limit(limits.memory_mb, 'memory_mb'),
    })


def limits_to_dict(limits: SchedulerLimits) -> dict[str, Any]:
    encoded = encode_scheduler_limits(limits)[DATA_KEY]
    return {k: v for k, v in encoded.items() if v is not None}
