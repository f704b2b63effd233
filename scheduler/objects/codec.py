"""Nova-object primitives <-> the scheduler's dataclasses, validated and bounded.

Decoding is lenient where Nova releases legitimately differ and strict about
what the scheduler acts on:

* lenient: unknown fields are ignored, any minor version of a known major is
  accepted (older ones simply lack fields), ``nova_object.changes`` is never
  read, an absent field takes Nova's default, an explicit ``null`` reads as
  ``None`` (or as an empty collection where the dataclass holds one);
* strict: wrong types, a namespace other than ``nova``, another object where a
  specific one is expected, an unknown major version, missing required fields,
  amounts outside ``[0, max_amount]``, malformed or duplicate instance UUIDs,
  and everything beyond :class:`DecodeLimits`.

Every rejection is :class:`~scheduler.exceptions.InvalidInput` whose reason
starts with the field path (``spec_obj.flavor.extra_specs: more than 256
entries``). Reasons never contain field values (an image property or a cell's
``transport_url`` may carry secrets): only object names, versions, malformed
UUIDs and the keys of free-form dicts (extra specs, hints) are quoted,
truncated, and a reason is at most 300 characters.

Nesting is checked iteratively over the whole input before any recursive
decoding, so a hostile payload cannot exhaust the stack; the decoders then
recurse at most ``max_depth`` levels.

Encoding produces exactly what Nova's conductor deserializes: Selection 1.1
with a nested SchedulerLimits 1.0, including ``nova_object.changes`` listing
every field, as Nova's own ``obj_to_primitive`` does for objects built by
their constructor (oslo.versionedobjects reads ``changes`` with
``primitive.get(..., [])``, so it would also tolerate its absence; sending it
keeps our replies indistinguishable from nova-scheduler's).
"""
from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from scheduler.exceptions import ConfigurationError, InvalidInput, SchedulerError
from scheduler.objects.selection import SchedulerLimits, Selection
from scheduler.objects.spec import (
    Aggregate,
    CellMapping,
    Destination,
    Flavor,
    ImageMeta,
    ImageMetaProps,
    InstanceGroup,
    RequestGroup,
    RequestLevelParams,
    RequestSpec,
)

NAME_KEY = 'nova_object.name'
NAMESPACE_KEY = 'nova_object.namespace'
VERSION_KEY = 'nova_object.version'
DATA_KEY = 'nova_object.data'
CHANGES_KEY = 'nova_object.changes'
NAMESPACE = 'nova'

SELECTION_VERSION = '1.1'
SCHEDULER_LIMITS_VERSION = '1.0'

# Every object we read is at major version 1 except these (object_schemas.json).
_MAJOR_VERSIONS = {'Instance': 2, 'InstanceList': 2}
#: nova.virt.hardware.MEMPAGES_ANY: the smallest of Nova's symbolic page sizes (-1..-3).
_PAGES_ANY = -3
_MAX_DEPTH_CEILING = 256  # keeps the decoders' recursion far below Python's limit
_MAX_INT64 = 2**63 - 1
_MAX_REASON = 300
_PREVIEW = 40

_UUID_RE = re.compile(r'[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\Z')
_VERSION_RE = re.compile(r'([0-9]{1,6})\.([0-9]{1,6})(?:\.[0-9]{1,6})?\Z')
_DECIMAL_RE = re.compile(r'\s*[0-9]{1,18}\s*\Z')
_IDENTIFIER_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_]{0,63}\Z')

# Nova's strutils.bool_from_string vocabulary (FlexibleBooleanField).
_TRUE_STRINGS = frozenset({'1', 't', 'true', 'on', 'y', 'yes'})
_FALSE_STRINGS = frozenset({'0', 'f', 'false', 'off', 'n', 'no'})

_NO_NETWORK_METADATA = {'physnets': [], 'tunneled': False}  # Nova's lazy default
_NETWORK_REQUEST_FIELDS = ('network_id', 'address', 'port_id', 'pci_request_id', 'tag',
                           'arq_uuid', 'device_profile')
_TRAIT_PROPERTY_PREFIX = 'trait:'

# ImageMetaProps 1.44, by field kind (object_schemas.json). Enum fields are strings.
_IMAGE_PROPS_INT = frozenset({
    'hw_cpu_cores', 'hw_cpu_max_cores', 'hw_cpu_max_sockets', 'hw_cpu_max_threads',
    'hw_cpu_sockets', 'hw_cpu_threads', 'hw_device_id', 'hw_maxphysaddr_bits', 'hw_numa_nodes',
    'hw_redirected_usb_ports', 'hw_serial_port_count', 'hw_video_ram', 'img_compression_level',
    'img_version'})
_IMAGE_PROPS_BOOL = frozenset({
    'hw_boot_menu', 'hw_ephemeral_encryption', 'hw_firmware_stateless', 'hw_ipxe_boot',
    'hw_locked_memory', 'hw_mem_encryption', 'hw_pmu', 'hw_qemu_guest_agent', 'hw_time_hpet',
    'hw_vif_multiqueue_enabled', 'hw_virtio_packed_ring', 'img_bdm_v2', 'img_bittorrent',
    'img_cache_in_nova', 'img_hide_hypervisor_id', 'img_linked_clone', 'img_use_agent',
    'os_require_quiesce', 'os_skip_agent_inject_files_at_boot', 'os_skip_agent_inject_ssh'})
_IMAGE_PROPS_STR = frozenset({
    'hw_architecture', 'hw_emulation_architecture', 'hw_auto_disk_config',
    'hw_cpu_realtime_mask', 'hw_disk_type', 'hw_machine_type', 'hw_mem_page_size',
    'img_owner_id', 'img_root_device_name', 'img_signature', 'os_admin_user', 'os_command_line',
    'os_distro', 'hw_cdrom_bus', 'hw_disk_bus', 'hw_floppy_bus', 'hw_rescue_bus', 'hw_cpu_policy',
    'hw_cpu_thread_policy', 'hw_ephemeral_encryption_format',
    'hw_ephemeral_encryption_secret_uuid', 'img_signature_certificate_uuid', 'hw_firmware_type',
    'hw_input_bus', 'hw_maxphysaddr_mode', 'hw_mem_encryption_model',
    'hw_pci_numa_affinity_policy', 'hw_pointer_model', 'hw_rescue_device', 'hw_rng_model',
    'hw_scsi_model', 'hw_sound_model', 'hw_tpm_model', 'hw_tpm_version', 'hw_usb_model',
    'hw_video_model', 'hw_vif_model', 'hw_viommu_model', 'hw_vm_mode', 'hw_watchdog_action',
    'img_config_drive', 'img_hv_requested_version', 'img_hv_type', 'img_signature_hash_method',
    'img_signature_key_type', 'os_secure_boot', 'os_type'})
_IMAGE_PROPS_STR_LIST = frozenset({'traits_required'})
_IMAGE_PROPS_INT_LIST = frozenset({'hw_numa_mem'})
_IMAGE_PROPS_INT_SET_LIST = frozenset({'hw_numa_cpus'})
_IMAGE_PROPS_DICT_LIST = frozenset({'img_block_device_mapping', 'img_mappings'})


@dataclass(frozen=True)
class DecodeLimits:
    """Bounds on what a caller may send; the defaults are safe for any real cloud."""

    max_instances: int = 1000
    max_string_length: int = 4096
    max_extra_specs: int = 256
    max_list_length: int = 1000
    max_depth: int = 32
    max_hints: int = 64
    max_amount: int = 2**31 - 1
    # Casts describe whole hosts and aggregates, which can legitimately be larger.
    max_aggregate_hosts: int = 100_000
    max_host_instances: int = 10_000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            # Zero hints or extra specs is a policy; zero of anything else rejects everything.
            least = 0 if f.name in ('max_hints', 'max_extra_specs') else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigurationError(f'DecodeLimits.{f.name} must be an integer >= {least}')
        if self.max_depth > _MAX_DEPTH_CEILING:
            raise ConfigurationError(
                f'DecodeLimits.max_depth must be at most {_MAX_DEPTH_CEILING}')


class EncodeError(SchedulerError, ValueError):
    """A Selection we built cannot be sent: a bug on our side, never the caller's."""


# Public API ----------------------------------------------------------------------------


def decode_request_spec(primitive: Any, *, limits: DecodeLimits = DecodeLimits(),
                        path: str = 'spec_obj') -> RequestSpec:
    """A RequestSpec 1.x primitive (RPC 4.3-4.5 ``spec_obj``)."""
    _check_depth(primitive, path, limits.max_depth)
    return _Decoder(limits).request_spec(primitive, path)


def decode_legacy_request(request_spec: Any, filter_properties: Any, *,
                          limits: DecodeLimits = DecodeLimits()) -> RequestSpec:
    """The legacy dicts of RPC 4.0-4.2, as Nova's ``RequestSpec.from_primitives`` reads them.

    Unlike Nova, a server group rebuilt from ``group_*`` keys keeps ``policies``
    (Nova's ``RequestSpec._populate_group_info`` drops it, and ServerGroupAffinityFilter,
    which reads ``policies``, then crashes: ``nova/scheduler/filters/affinity_filter.py``).
    """
    _check_depth(request_spec, 'request_spec', limits.max_depth)
    _check_depth(filter_properties, 'filter_properties', limits.max_depth)
    return _Decoder(limits).legacy_request(request_spec, filter_properties)


def decode_aggregate(primitive: Any, *, limits: DecodeLimits = DecodeLimits(),
                     path: str = 'aggregate') -> Aggregate:
    """One Aggregate 1.x primitive (``delete_aggregate``)."""
    _check_depth(primitive, path, limits.max_depth)
    return _Decoder(limits).aggregate(primitive, path)


def decode_aggregates(value: Any, *, limits: DecodeLimits = DecodeLimits(),
                      path: str = 'aggregates') -> list[Aggregate]:
    """``update_aggregates``: a list of Aggregate primitives (what nova-api sends),
    one Aggregate primitive, or an AggregateList primitive."""
    _check_depth(value, path, limits.max_depth)
    d = _Decoder(limits)
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
    d = _Decoder(limits)
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
        _add_unique(uuid, seen, f'{item_path}.uuid')
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
        raise _invalid(path, f'expected a list of UUIDs, got {_kind(value)}')
    if len(value) > limit:
        raise _invalid(path, f'more than {limit} instances')
    if not value and not allow_empty:
        raise _invalid(path, 'must not be empty')
    d = _Decoder(limits)
    seen: set[str] = set()
    result = []
    for i, item in enumerate(value):
        uuid = d.uuid(item, f'{path}[{i}]')
        _add_unique(uuid, seen, f'{path}[{i}]')
        result.append(uuid)
    return result


def decode_selection(primitive: Any, *, limits: DecodeLimits = DecodeLimits(),
                     path: str = 'selection') -> Selection:
    """A Selection 1.x primitive (the client side of a 4.5 reply; 1.0 lacks the AZ)."""
    _check_depth(primitive, path, limits.max_depth)
    return _Decoder(limits).selection(primitive, path)


def encode_selection(sel: Selection) -> dict[str, Any]:
    """The Selection 1.1 primitive nova-conductor deserializes."""
    data = {
        'compute_node_uuid': _enc_str(sel.compute_node_uuid, 'compute_node_uuid', uuid=True),
        'service_host': _enc_str(sel.service_host, 'service_host'),
        'nodename': _enc_str(sel.nodename, 'nodename'),
        'cell_uuid': _enc_str(sel.cell_uuid, 'cell_uuid', uuid=True),
        'limits': None if sel.limits is None else _encode_scheduler_limits(sel.limits),
        'allocation_request': _enc_str(sel.allocation_request, 'allocation_request',
                                       nullable=True),
        'allocation_request_version': _enc_str(sel.allocation_request_version,
                                               'allocation_request_version', nullable=True),
        'availability_zone': _enc_str(sel.availability_zone, 'availability_zone',
                                      nullable=True),
    }
    return _envelope('Selection', SELECTION_VERSION, data)


def encode_legacy_destination(sel: Selection) -> dict[str, Any]:
    """Nova's ``Selection.to_dict()``: the reply when ``return_objects`` is False."""
    limits = {} if sel.limits is None else _limits_to_dict(sel.limits)
    return {'host': _enc_str(sel.service_host, 'service_host'),
            'nodename': _enc_str(sel.nodename, 'nodename'),
            'limits': limits}


def unwrap(value: Any) -> Any:
    """A kept primitive (e.g. ``RequestSpec.numa_topology``) with every nova-object
    envelope replaced by its data, for code that reads fields rather than forwards."""
    if isinstance(value, dict):
        if NAME_KEY in value and isinstance(value.get(DATA_KEY), dict):
            value = value[DATA_KEY]
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


# Errors and paths ------------------------------------------------------------------------


def _invalid(path: str, message: str) -> InvalidInput:
    reason = f'{path}: {message}'
    if len(reason) > _MAX_REASON:
        reason = reason[:_MAX_REASON - 3] + '...'
    return InvalidInput(reason=reason)


def _preview(value: Any) -> str:
    """A short quote of a value that is safe to show (names, versions, UUIDs)."""
    if not isinstance(value, str):
        return f'<{_kind(value)}>'
    text = value if len(value) <= _PREVIEW else value[:_PREVIEW] + '...'
    return repr(text)


def _a(name: str) -> str:
    return f'an {name}' if name[:1] in 'AEIOU' else f'a {name}'


def _kind(value: Any) -> str:
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'boolean'
    if isinstance(value, int):
        return 'integer'
    if isinstance(value, float):
        return 'number'
    if isinstance(value, str):
        return 'string'
    if isinstance(value, list):
        return 'list'
    if isinstance(value, dict):
        return 'object'
    return type(value).__name__


def _seg(key: Any) -> str:
    """One path segment; the ``nova_object.data`` level is left out for readability."""
    if key == DATA_KEY:
        return ''
    if isinstance(key, int) and not isinstance(key, bool):
        return f'[{key}]'
    if isinstance(key, str) and _IDENTIFIER_RE.match(key):
        return f'.{key}'
    return f'[{_preview(key)}]'


def _check_depth(value: Any, root: str, max_depth: int) -> None:
    """Reject nesting deeper than ``max_depth`` without recursing.

    Each container is remembered with the deepest level it was reached at, so
    shared sub-structures are walked at most ``max_depth`` times and a cycle
    (impossible in JSON, possible from Python callers) is reported as too deep.
    """
    if not isinstance(value, (dict, list)):
        return
    deepest: dict[int, int] = {}
    # Entries: (container, depth, path node); a path node is (parent node, key).
    stack: list[tuple[Any, int, Any]] = [(value, 1, None)]
    while stack:
        container, depth, node = stack.pop()
        if depth > max_depth:
            raise _invalid(_node_path(root, node), f'nested deeper than {max_depth} levels')
        if deepest.get(id(container), 0) >= depth:
            continue
        deepest[id(container)] = depth
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, child in items:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1, (node, key)))


def _node_path(root: str, node: Any) -> str:
    keys = []
    while node is not None:
        node, key = node
        keys.append(key)
    return root + ''.join(_seg(k) for k in reversed(keys))


def _add_unique(uuid: str, seen: set[str], path: str) -> None:
    folded = uuid.lower()
    if folded in seen:
        raise _invalid(path, f'duplicate instance uuid {_preview(uuid)}')
    seen.add(folded)


_REQUIRED: Any = object()
_ABSENT: Any = object()
_Conv = Callable[[Any, str], Any]


def _make(factory: Any) -> Any:
    # A class or function builds a fresh (mutable) default; anything else is the value.
    return factory() if callable(factory) else factory


# Decoding --------------------------------------------------------------------------------


class _Decoder:
    """Field readers bound to one set of limits. Every method takes the value and
    its path and returns the decoded value or raises InvalidInput."""

    def __init__(self, limits: DecodeLimits):
        self.lim = limits

    # -- access -----------------------------------------------------------------------
    def take(self, data: dict, key: str, path: str, conv: _Conv, *, default: Any = _REQUIRED,
             nullable: bool = False, null: Any = None) -> Any:
        """``data[key]`` converted; ``default`` when absent, ``null`` when explicitly null."""
        field_path = path + _seg(key)
        if key not in data:
            if default is _REQUIRED:
                raise _invalid(field_path, 'required field is missing')
            return _make(default)
        value = data[key]
        if value is None:
            if not nullable:
                raise _invalid(field_path, 'must not be null')
            return _make(null)
        return conv(value, field_path)

    def obj(self, value: Any, path: str, name: str) -> dict:
        """The data of a nova-object primitive that must be a ``name``."""
        if not isinstance(value, dict) or NAME_KEY not in value:
            raise _invalid(path, f'expected {_a(name)} object, got {_kind(value)}')
        namespace = value.get(NAMESPACE_KEY)
        if namespace != NAMESPACE:
            raise _invalid(path, f'object namespace {_preview(namespace)} is not {NAMESPACE!r}')
        got = value[NAME_KEY]
        if got != name:
            raise _invalid(path, f'expected {_a(name)} object, got {_preview(got)}')
        version = value.get(VERSION_KEY)
        match = _VERSION_RE.match(version) if isinstance(version, str) else None
        if match is None:
            raise _invalid(path, f'malformed {name} version {_preview(version)}')
        major = _MAJOR_VERSIONS.get(name, 1)
        if int(match.group(1)) != major:
            raise _invalid(path, f'unsupported {name} version {version} '
                                 f'(only {major}.x is understood)')
        data = value.get(DATA_KEY)
        if not isinstance(data, dict):
            raise _invalid(path, f'{DATA_KEY} must be an object, got {_kind(data)}')
        return data

    # -- scalars ----------------------------------------------------------------------
    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise _invalid(path, f'expected a string, got {_kind(value)}')
        if len(value) > self.lim.max_string_length:
            raise _invalid(path, f'string longer than {self.lim.max_string_length} characters')
        return value

    def nova_string(self, value: Any, path: str) -> str:
        """Nova's StringField coercion: numbers become strings (legacy Glance values)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        return self.string(value, path)

    def integer(self, value: Any, path: str, low: int = 0, high: int = _MAX_INT64) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _invalid(path, f'expected an integer, got {_kind(value)}')
        if not low <= value <= high:
            raise _invalid(path, f'must be between {low} and {high}')
        return value

    def amount(self, value: Any, path: str) -> int:
        return self.integer(value, path, 0, self.lim.max_amount)

    def int_like(self, value: Any, path: str) -> int:
        """Nova's IntegerField coercion accepts decimal strings (legacy Glance values)."""
        if isinstance(value, str) and _DECIMAL_RE.match(value):
            value = int(value)
        return self.amount(value, path)

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise _invalid(path, f'expected a boolean, got {_kind(value)}')
        return value

    def flexible_bool(self, value: Any, path: str) -> bool:
        if isinstance(value, str):
            folded = value.strip().lower()
            if folded in _TRUE_STRINGS:
                return True
            if folded in _FALSE_STRINGS:
                return False
            raise _invalid(path, 'expected a boolean or a boolean string')
        return self.boolean(value, path)

    def number(self, value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _invalid(path, f'expected a number, got {_kind(value)}')
        try:
            result = float(value)
        except OverflowError:  # an integer beyond any float
            result = math.inf
        if not math.isfinite(result):
            raise _invalid(path, 'expected a finite number')
        return result

    def uuid(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise _invalid(path, f'expected a UUID string, got {_kind(value)}')
        if not _UUID_RE.match(value):
            raise _invalid(path, f'not a UUID: {_preview(value)}')
        return value

    # -- containers -------------------------------------------------------------------
    def list_(self, value: Any, path: str, max_len: int | None = None) -> list:
        limit = self.lim.max_list_length if max_len is None else max_len
        if not isinstance(value, list):
            raise _invalid(path, f'expected a list, got {_kind(value)}')
        if len(value) > limit:
            raise _invalid(path, f'more than {limit} items')
        return value

    def dict_(self, value: Any, path: str, max_len: int | None = None,
              what: str = 'entries') -> dict:
        limit = self.lim.max_list_length if max_len is None else max_len
        if not isinstance(value, dict):
            raise _invalid(path, f'expected an object, got {_kind(value)}')
        if len(value) > limit:
            raise _invalid(path, f'more than {limit} {what}')
        return value

    def list_of(self, value: Any, path: str, item: _Conv, max_len: int | None = None) -> list:
        items = self.list_(value, path, max_len)
        return [item(v, f'{path}[{i}]') for i, v in enumerate(items)]

    def str_list(self, value: Any, path: str, max_len: int | None = None) -> list[str]:
        return self.list_of(value, path, self.string, max_len)

    def str_set(self, value: Any, path: str) -> set[str]:
        return set(self.str_list(value, path))

    def dict_of(self, value: Any, path: str, item: _Conv,
                max_len: int | None = None) -> dict[str, Any]:
        entries = self.dict_(value, path, max_len)
        out = {}
        for key, v in entries.items():
            key_path = path + _seg(key)
            out[self.string(key, key_path)] = item(v, key_path)
        return out

    def str_dict(self, value: Any, path: str, max_len: int | None = None) -> dict[str, str]:
        return self.dict_of(value, path, self.string, max_len)

    def json(self, value: Any, path: str) -> Any:
        """A bounded copy of a JSON value whose inner structure we keep but do not read.
        Recursion is safe: :func:`_check_depth` ran on the whole input first."""
        if value is None or isinstance(value, (bool, int)):
            return value
        if isinstance(value, float):
            return self.number(value, path)
        if isinstance(value, str):
            return self.string(value, path)
        if isinstance(value, list):
            return self.list_of(value, path, self.json)
        if isinstance(value, dict):
            return self.dict_of(value, path, self.json)
        raise _invalid(path, f'unsupported value of type {_kind(value)}')

    def kept_object(self, value: Any, path: str, name: str, check: _Conv) -> dict[str, Any]:
        """An object we keep as its primitive: its envelope and the fields we rely on are
        checked (``check`` gets the data), the rest is copied within bounds."""
        check(self.obj(value, path, name), path)
        return self.json(value, path)

    # -- RequestSpec ------------------------------------------------------------------
    def request_spec(self, value: Any, path: str) -> RequestSpec:
        data = self.obj(value, path, 'RequestSpec')

        def opt(key: str, conv: _Conv) -> Any:
            return self.take(data, key, path, conv, default=None, nullable=True)

        return RequestSpec(
            flavor=self.take(data, 'flavor', path, self.flavor),
            image=opt('image', self.image),
            instance_uuid=opt('instance_uuid', self.uuid),
            num_instances=self.take(data, 'num_instances', path, self.num_instances, default=1),
            project_id=opt('project_id', self.string),
            user_id=opt('user_id', self.string),
            availability_zone=opt('availability_zone', self.string),
            ignore_hosts=opt('ignore_hosts', self.str_list),
            force_hosts=opt('force_hosts', self.str_list),
            force_nodes=opt('force_nodes', self.str_list),
            requested_destination=opt('requested_destination', self.destination),
            instance_group=opt('instance_group', self.instance_group),
            scheduler_hints=self.take(data, 'scheduler_hints', path, self.hints,
                                      default=dict, nullable=True, null=dict),
            is_bfv=self.take(data, 'is_bfv', path, self.boolean, default=False),
            requested_resources=self.take(
                data, 'requested_resources', path,
                lambda v, p: self.list_of(v, p, self.request_group),
                default=list, nullable=True, null=list),
            request_level_params=self.take(data, 'request_level_params', path,
                                           self.request_level_params,
                                           default=RequestLevelParams, nullable=True,
                                           null=RequestLevelParams),
            numa_topology=opt('numa_topology', self.numa_topology),
            pci_requests=opt('pci_requests', self.pci_requests),
            network_metadata=self.take(data, 'network_metadata', path, self.network_metadata,
                                       default=lambda: copy.deepcopy(_NO_NETWORK_METADATA),
                                       nullable=True),
            requested_networks=self.take(data, 'requested_networks', path,
                                         self.requested_networks,
                                         default=list, nullable=True, null=list),
        )

    def num_instances(self, value: Any, path: str) -> int:
        count = self.integer(value, path, 1)
        if count > self.lim.max_instances:
            raise _invalid(path, f'more than {self.lim.max_instances} instances')
        return count

    def flavor(self, value: Any, path: str, *, plain_ok: bool = False) -> Flavor:
        if plain_ok and isinstance(value, dict) and NAME_KEY not in value:
            data = self.dict_(value, path)  # a pre-object legacy flavor dict
        else:
            data = self.obj(value, path, 'Flavor')

        def opt(key: str, conv: _Conv) -> Any:
            return self.take(data, key, path, conv, default=None, nullable=True)

        return Flavor(
            id=opt('id', self.integer),
            flavorid=opt('flavorid', self.string),
            name=opt('name', self.string),
            # Required: the resources Placement is asked for are computed from them.
            memory_mb=self.take(data, 'memory_mb', path, self.amount),
            vcpus=self.take(data, 'vcpus', path, self.amount),
            root_gb=self.take(data, 'root_gb', path, self.amount),
            ephemeral_gb=self.take(data, 'ephemeral_gb', path, self.amount),
            swap=self.take(data, 'swap', path, self.amount),
            rxtx_factor=opt('rxtx_factor', self.number),
            vcpu_weight=opt('vcpu_weight', self.amount),
            disabled=self.take(data, 'disabled', path, self.boolean, default=False),
            is_public=self.take(data, 'is_public', path, self.boolean, default=True),
            description=opt('description', self.string),
            extra_specs=self.take(data, 'extra_specs', path, self.extra_specs,
                                  default=dict, nullable=True, null=dict),
        )

    def extra_specs(self, value: Any, path: str) -> dict[str, str]:
        return self.str_dict(value, path, self.lim.max_extra_specs)

    def image(self, value: Any, path: str, *, legacy: bool = False) -> ImageMeta:
        if legacy and isinstance(value, dict) and NAME_KEY not in value:
            data = self.dict_(value, path)  # legacy: the image as a plain dict
        else:
            data = self.obj(value, path, 'ImageMeta')

        def opt(key: str, conv: _Conv) -> Any:
            return self.take(data, key, path, conv, default=None, nullable=True)

        return ImageMeta(
            id=opt('id', self.string),
            name=opt('name', self.string),
            status=opt('status', self.string),
            visibility=opt('visibility', self.string),
            disk_format=opt('disk_format', self.string),
            container_format=opt('container_format', self.string),
            min_ram=self.take(data, 'min_ram', path, self.amount, default=0),
            min_disk=self.take(data, 'min_disk', path, self.amount, default=0),
            # Bytes, so beyond max_amount: a 2.4 GB image is ordinary.
            size=opt('size', self.integer),
            virtual_size=opt('virtual_size', self.integer),
            owner=opt('owner', self.string),
            properties=self.take(data, 'properties', path,
                                 lambda v, p: self.image_props(v, p, legacy=legacy),
                                 default=ImageMetaProps, nullable=True, null=ImageMetaProps),
        )

    def image_props(self, value: Any, path: str, *, legacy: bool = False) -> ImageMetaProps:
        """The properties that were set, coerced as Nova's field types do; properties
        Nova does not know are dropped, as Nova drops them."""
        if legacy and isinstance(value, dict) and NAME_KEY not in value:
            data = self.dict_(value, path)
        else:
            data = self.obj(value, path, 'ImageMetaProps')
        props = ImageMetaProps()
        for key, conv in self._image_prop_readers():
            if data.get(key) is not None:  # null reads as unset: both read as None
                props[key] = conv(data[key], path + _seg(key))
        if legacy:
            # Nova's ImageMetaProps.from_dict folds Glance's trait:<NAME>=required.
            traits = props.get('traits_required', [])
            for key, v in data.items():
                if (isinstance(key, str) and key.startswith(_TRAIT_PROPERTY_PREFIX)
                        and isinstance(v, str) and v.strip().lower() == 'required'):
                    trait = self.string(key[len(_TRAIT_PROPERTY_PREFIX):], path + _seg(key))
                    if trait and trait not in traits:
                        traits.append(trait)
            if traits:
                props['traits_required'] = traits
        return props

    def _image_prop_readers(self) -> list[tuple[str, _Conv]]:
        def int_set_list(v: Any, p: str) -> list[list[int]]:
            return self.list_of(v, p, lambda s, q: self.list_of(s, q, self.int_like))

        def dict_list(v: Any, p: str) -> list[dict[str, str | None]]:
            return self.list_of(v, p, lambda d, q: self.dict_of(d, q, self.nullable_string))

        readers: list[tuple[frozenset[str], _Conv]] = [
            (_IMAGE_PROPS_STR, self.nova_string),
            (_IMAGE_PROPS_INT, self.int_like),
            (_IMAGE_PROPS_BOOL, self.flexible_bool),
            (_IMAGE_PROPS_STR_LIST, self.str_list),
            (_IMAGE_PROPS_INT_LIST, lambda v, p: self.list_of(v, p, self.int_like)),
            (_IMAGE_PROPS_INT_SET_LIST, int_set_list),
            (_IMAGE_PROPS_DICT_LIST, dict_list),
        ]
        return [(key, conv) for names, conv in readers for key in sorted(names)]

    def nullable_string(self, value: Any, path: str) -> str | None:
        return None if value is None else self.nova_string(value, path)

    def instance_group(self, value: Any, path: str) -> InstanceGroup:
        data = self.obj(value, path, 'InstanceGroup')

        def opt(key: str, conv: _Conv) -> Any:
            return self.take(data, key, path, conv, default=None, nullable=True)

        def strings(key: str) -> list[str]:
            return self.take(data, key, path, self.str_list, default=list, nullable=True,
                             null=list)

        policy, policies = _group_policies(opt('policy', self.string),
                                           opt('policies', self.str_list))
        return InstanceGroup(
            uuid=opt('uuid', self.string),
            id=opt('id', self.integer),
            name=opt('name', self.string),
            user_id=opt('user_id', self.string),
            project_id=opt('project_id', self.string),
            policy=policy,
            policies=policies,
            rules=self.take(data, '_rules', path, self.str_dict, default=dict, nullable=True,
                            null=dict),
            members=strings('members'),
            hosts=strings('hosts'),
        )

    def destination(self, value: Any, path: str) -> Destination:
        data = self.obj(value, path, 'Destination')

        def opt(key: str, conv: _Conv) -> Any:
            return self.take(data, key, path, conv, default=None, nullable=True)

        return Destination(
            host=opt('host', self.string),
            node=opt('node', self.string),
            cell=opt('cell', self.cell_mapping),
            aggregates=opt('aggregates', self.str_list),
            forbidden_aggregates=self.take(data, 'forbidden_aggregates', path, self.str_set,
                                           default=set, nullable=True, null=set),
            allow_cross_cell_move=self.take(data, 'allow_cross_cell_move', path, self.boolean,
                                            default=False),
        )

    def cell_mapping(self, value: Any, path: str) -> CellMapping:
        data = self.obj(value, path, 'CellMapping')

        def opt(key: str) -> Any:
            # Never quoted in a reason: transport_url and database_connection are secrets.
            return self.take(data, key, path, self.string, default=None, nullable=True)

        return CellMapping(
            uuid=opt('uuid'), name=opt('name'),
            disabled=self.take(data, 'disabled', path, self.boolean, default=False),
            transport_url=opt('transport_url'),
            database_connection=opt('database_connection'),
        )

    def hints(self, value: Any, path: str) -> dict[str, list[str]]:
        """Every value becomes a list (legacy callers collapse one-element lists)."""
        entries = self.dict_(value, path, self.lim.max_hints, what='hints')
        out = {}
        for key, v in entries.items():
            key_path = path + _seg(key)
            values = self.list_(v, key_path) if isinstance(v, list) else [v]
            out[self.string(key, key_path)] = [
                self.nova_string(item, f'{key_path}[{i}]') for i, item in enumerate(values)]
        return out

    def request_group(self, value: Any, path: str) -> RequestGroup:
        data = self.obj(value, path, 'RequestGroup')

        def strings(key: str) -> set[str]:
            return self.take(data, key, path, self.str_set, default=set, nullable=True,
                             null=set)

        return RequestGroup(
            requester_id=self.take(data, 'requester_id', path, self.string, default=None,
                                   nullable=True),
            use_same_provider=self.take(data, 'use_same_provider', path, self.boolean,
                                        default=True),
            resources=self.take(data, 'resources', path,
                                lambda v, p: self.dict_of(v, p, self.amount),
                                default=dict, nullable=True, null=dict),
            required_traits=strings('required_traits'),
            forbidden_traits=strings('forbidden_traits'),
            aggregates=self.take(data, 'aggregates', path, self.list_of_str_lists,
                                 default=list, nullable=True, null=list),
            forbidden_aggregates=strings('forbidden_aggregates'),
            in_tree=self.take(data, 'in_tree', path, self.string, default=None, nullable=True),
            provider_uuids=self.take(data, 'provider_uuids', path, self.str_list,
                                     default=list, nullable=True, null=list),
        )

    def list_of_str_lists(self, value: Any, path: str) -> list[list[str]]:
        return self.list_of(value, path, self.str_list)

    def request_level_params(self, value: Any, path: str) -> RequestLevelParams:
        data = self.obj(value, path, 'RequestLevelParams')

        def strings(key: str) -> set[str]:
            return self.take(data, key, path, self.str_set, default=set, nullable=True,
                             null=set)

        return RequestLevelParams(
            root_required=strings('root_required'),
            root_forbidden=strings('root_forbidden'),
            same_subtree=self.take(data, 'same_subtree', path, self.list_of_str_lists,
                                   default=list, nullable=True, null=list),
        )

    def numa_topology(self, value: Any, path: str) -> dict[str, Any]:
        def check(data: dict, p: str) -> None:
            self.take(data, 'cells', p, lambda v, q: self.list_of(v, q, self.numa_cell),
                      default=list)
            self.take(data, 'emulator_threads_policy', p, self.string, default=None,
                      nullable=True)

        return self.kept_object(value, path, 'InstanceNUMATopology', check)

    def numa_cell(self, value: Any, path: str) -> None:
        data = self.obj(value, path, 'InstanceNUMACell')
        cpus = self.cpu_ids
        self.take(data, 'id', path, self.integer, default=None)
        self.take(data, 'cpuset', path, cpus, default=None)
        self.take(data, 'pcpuset', path, cpus, default=None)
        self.take(data, 'cpuset_reserved', path, cpus, default=None, nullable=True)
        self.take(data, 'memory', path, self.amount, default=None)
        # KiB, or Nova's symbolic sizes: -1 small, -2 large, -3 any (hw:mem_page_size).
        self.take(data, 'pagesize', path,
                  lambda v, p: self.integer(v, p, _PAGES_ANY, self.lim.max_amount),
                  default=None, nullable=True)
        for key in ('cpu_policy', 'cpu_thread_policy'):
            self.take(data, key, path, self.string, default=None, nullable=True)
        self.take(data, 'cpu_pinning_raw', path, lambda v, p: self.dict_of(v, p, self.amount),
                  default=None, nullable=True)

    def cpu_ids(self, value: Any, path: str) -> list[int]:
        return self.list_of(value, path, self.amount)

    def pci_requests(self, value: Any, path: str) -> dict[str, Any]:
        def check(data: dict, p: str) -> None:
            self.take(data, 'requests', p, lambda v, q: self.list_of(v, q, self.pci_request),
                      default=list)

        return self.kept_object(value, path, 'InstancePCIRequests', check)

    def pci_request(self, value: Any, path: str) -> None:
        data = self.obj(value, path, 'InstancePCIRequest')
        self.take(data, 'count', path, self.amount, default=None)
        self.take(data, 'spec', path,
                  lambda v, p: self.list_of(
                      v, p, lambda d, q: self.dict_of(d, q, self.nullable_string)),
                  default=None)
        for key in ('alias_name', 'request_id', 'requester_id', 'numa_policy'):
            self.take(data, key, path, self.string, default=None, nullable=True)
        self.take(data, 'is_new', path, self.boolean, default=None)

    def network_metadata(self, value: Any, path: str) -> dict[str, Any]:
        """Its data as a plain dict (a flat object: nothing to keep an envelope for)."""
        data = self.obj(value, path, 'NetworkMetadata')
        physnets = self.take(data, 'physnets', path, self.str_list, default=list,
                             nullable=True, null=list)
        return {'physnets': list(dict.fromkeys(physnets)),  # a set on the wire
                'tunneled': self.take(data, 'tunneled', path, self.boolean, default=False)}

    def requested_networks(self, value: Any, path: str) -> list[dict[str, Any]]:
        data = self.obj(value, path, 'NetworkRequestList')
        objects = self.take(data, 'objects', path, self.list_, default=list, nullable=True,
                            null=list)
        return [self.network_request(v, f'{path}[{i}]') for i, v in enumerate(objects)]

    def network_request(self, value: Any, path: str) -> dict[str, Any]:
        data = self.obj(value, path, 'NetworkRequest')
        return {key: self.take(data, key, path, self.string, nullable=True)
                for key in _NETWORK_REQUEST_FIELDS if key in data}

    # -- legacy 4.0-4.2 ---------------------------------------------------------------
    def legacy_request(self, request_spec: Any, filter_properties: Any) -> RequestSpec:
        rs_path, fp_path = 'request_spec', 'filter_properties'
        rs = self.dict_(request_spec, rs_path)
        fp = {} if filter_properties is None else self.dict_(filter_properties, fp_path)
        image = rs.get('image')
        props = self.take(rs, 'instance_properties', rs_path, self.instance_properties,
                          default=dict, nullable=True, null=dict)
        props_path = f'{rs_path}.instance_properties'

        def prop(key: str, conv: _Conv) -> Any:
            return self.take(props, key, props_path, conv, default=None, nullable=True)

        def filter_prop(key: str, conv: _Conv) -> Any:
            return self.take(fp, key, fp_path, conv, default=None, nullable=True)

        return RequestSpec(
            flavor=self.take(rs, 'instance_type', rs_path,
                             lambda v, p: self.flavor(v, p, plain_ok=True)),
            # Nova builds an empty ImageMeta from a missing image; we say "no image".
            image=(self.image(image, f'{rs_path}.image', legacy=True)
                   if image not in (None, {}) else None),
            instance_uuid=prop('uuid', self.uuid),
            num_instances=self.take(rs, 'num_instances', rs_path, self.num_instances,
                                    default=1),
            project_id=prop('project_id', self.string),
            user_id=prop('user_id', self.string),
            availability_zone=prop('availability_zone', self.string),
            numa_topology=prop('numa_topology', self.numa_topology),
            pci_requests=prop('pci_requests', self.pci_requests),
            ignore_hosts=filter_prop('ignore_hosts', self.str_list),
            force_hosts=filter_prop('force_hosts', self.str_list),
            force_nodes=filter_prop('force_nodes', self.str_list),
            requested_destination=filter_prop('requested_destination', self.destination),
            instance_group=self.legacy_group(fp, fp_path),
            scheduler_hints=self.take(fp, 'scheduler_hints', fp_path, self.hints,
                                      default=dict, nullable=True, null=dict),
            network_metadata=copy.deepcopy(_NO_NETWORK_METADATA),
        )

    def instance_properties(self, value: Any, path: str) -> dict:
        if isinstance(value, dict) and NAME_KEY in value:
            return self.obj(value, path, 'Instance')
        return self.dict_(value, path)

    def legacy_group(self, fp: dict, path: str) -> InstanceGroup | None:
        """Nova's ``RequestSpec._populate_group_info``."""
        if fp.get('instance_group') is not None:
            return self.instance_group(fp['instance_group'], f'{path}.instance_group')
        if fp.get('group_updated') is not True:
            return None

        def strings(key: str) -> list[str]:
            values = self.take(fp, key, path, self.str_list, default=list, nullable=True,
                               null=list)
            return list(dict.fromkeys(values))  # sets on the legacy wire

        policy, policies = _group_policies(None, strings('group_policies'))
        return InstanceGroup(
            uuid=self.take(fp, 'group_uuid', path, self.string, default=None, nullable=True),
            policy=policy, policies=policies,
            hosts=strings('group_hosts'), members=strings('group_members'))

    # -- casts and replies ------------------------------------------------------------
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


def _group_policies(policy: str | None,
                    policies: list[str] | None) -> tuple[str | None, list[str]]:
    """Each of ``policy`` and the deprecated ``policies`` derived from the other when
    missing: Nova's ServerGroupAffinityFilter still reads ``policies``."""
    policies = list(policies) if policies else ([policy] if policy else [])
    return (policy if policy is not None else (policies[0] if policies else None)), policies


# Encoding --------------------------------------------------------------------------------


def _envelope(name: str, version: str, data: dict[str, Any]) -> dict[str, Any]:
    # Objects Nova builds with every field passed to the constructor report all of
    # them as changed; the reply sample shows exactly that.
    return {NAME_KEY: name, NAMESPACE_KEY: NAMESPACE, VERSION_KEY: version, DATA_KEY: data,
            CHANGES_KEY: list(data)}


def _enc_str(value: Any, field: str, *, nullable: bool = False, uuid: bool = False) -> Any:
    if value is None:
        if nullable:
            return None
        raise EncodeError(f'Selection.{field} must not be None')
    if not isinstance(value, str):
        raise EncodeError(f'Selection.{field} must be a string, not {type(value).__name__}')
    if uuid and not _UUID_RE.match(value):
        raise EncodeError(f'Selection.{field} is not a UUID')
    return value


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


def _encode_scheduler_limits(limits: SchedulerLimits) -> dict[str, Any]:
    # Nova's SchedulerLimits.from_dict sets all four fields, null or not.
    return _envelope('SchedulerLimits', SCHEDULER_LIMITS_VERSION, {
        'numa_topology': _enc_numa_limits(limits.numa_topology),
        'vcpu': _enc_limit(limits.vcpu, 'vcpu'),
        'disk_gb': _enc_limit(limits.disk_gb, 'disk_gb'),
        'memory_mb': _enc_limit(limits.memory_mb, 'memory_mb'),
    })


def _limits_to_dict(limits: SchedulerLimits) -> dict[str, Any]:
    encoded = _encode_scheduler_limits(limits)[DATA_KEY]
    return {k: v for k, v in encoded.items() if v is not None}
