"""What the host-data casts carry: aggregates (``update_aggregates``,
``delete_aggregate``) and instance lists (``update_instance_info``,
``sync_instance_info``), bounded by :class:`DecodeLimits`' cast limits."""
from __future__ import annotations

from typing import Any

from scheduler.objects.codec.bounded import (
    NAME_KEY,
    BoundedReader,
    DecodeLimits,
    add_unique,
    check_depth,
    invalid,
    kind_of,
)
from scheduler.objects.spec import Aggregate


def decode_aggregate(primitive: Any, *, limits: DecodeLimits = DecodeLimits(),
                     path: str = 'aggregate') -> Aggregate:
    """One Aggregate 1.x primitive (``delete_aggregate``)."""
    check_depth(primitive, path, limits.max_depth)
    return HostDataReader(limits).aggregate(primitive, path)


def decode_aggregates(value: Any, *, limits: DecodeLimits = DecodeLimits(),
                      path: str = 'aggregates') -> list[Aggregate]:
    """``update_aggregates``: a list of Aggregate primitives (what nova-api sends),
    one Aggregate primitive, or an AggregateList primitive."""
    check_depth(value, path, limits.max_depth)
    d = HostDataReader(limits)
    if isinstance(value, list):
        items = d.list_(value, path)
    elif isinstance(value, dict) and value.get(NAME_KEY) == 'AggregateList':
        data = d.obj(value, path, 'AggregateList')
        items = d.take(data, 'objects', path, d.list_, default=list, nullable=True, null=list)
    else:
        return [d.aggregate(value, path)]
    return [d.aggregate(item, f'{path}[{i}]') for i, item in enumerate(items)]


def decode_instance_uuids_from_instance_list(primitive: Any, *,
                                             limits: DecodeLimits = DecodeLimits(),
                                             path: str = 'instance_info') -> list[str]:
    """The instance UUIDs of an InstanceList 2.x primitive (``update_instance_info``).

    Only each Instance's ``uuid`` is read, so the rest of an Instance (which
    may hold large ``user_data``) is neither bounded nor traversed.
    """
    d = BoundedReader(limits)
    data = d.obj(primitive, path, 'InstanceList')
    objects = d.take(data, 'objects', path,
                     lambda v, p: d.list_(v, p, max_len=limits.max_host_instances),
                     default=list, nullable=True, null=list)
    uuids: list[str] = []
    seen: set[str] = set()
    for i, instance in enumerate(objects):
        item_path = f'{path}[{i}]'
        instance_data = d.obj(instance, item_path, 'Instance')
        uuid = d.take(instance_data, 'uuid', item_path, d.uuid)
        add_unique(uuid, seen, f'{item_path}.uuid')
        uuids.append(uuid)
    return uuids


def validate_instance_uuids(value: Any, *, limits: DecodeLimits = DecodeLimits(),
                            allow_empty: bool = False, path: str = 'instance_uuids',
                            max_count: int | None = None) -> list[str]:
    """A list of distinct instance UUIDs, at most ``max_count`` (default ``max_instances``).

    UUIDs must be in the canonical 8-4-4-4-12 hex form (any case); they are
    returned as given. Duplicates are found case-insensitively.
    """
    limit = limits.max_instances if max_count is None else max_count
    if not isinstance(value, list):
        raise invalid(path, f'expected a list of UUIDs, got {kind_of(value)}')
    if len(value) > limit:
        raise invalid(path, f'more than {limit} instances')
    if not value and not allow_empty:
        raise invalid(path, 'must not be empty')
    d = BoundedReader(limits)
    seen: set[str] = set()
    result = []
    for i, item in enumerate(value):
        uuid = d.uuid(item, f'{path}[{i}]')
        add_unique(uuid, seen, f'{path}[{i}]')
        result.append(uuid)
    return result



class HostDataReader(BoundedReader):
    """The reader of an Aggregate."""

    def aggregate(self, value: Any, path: str) -> Aggregate:
        data = self.obj(value, path, 'Aggregate')
        return Aggregate(
            id=self.take(data, 'id', path, self.integer),
            uuid=self.take(data, 'uuid', path, self.uuid),
            name=self.take(data, 'name', path, self.string),
            hosts=self.take(data, 'hosts', path,
                            lambda v, p: self.str_list(v, p, self.lim.max_aggregate_hosts),
                            default=list, nullable=True, null=list),
            metadata=self.take(data, 'metadata', path, self.str_dict, default=dict,
                               nullable=True, null=dict),
        )
