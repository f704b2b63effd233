"""Encode a :class:`RequestSpec` as the RequestSpec 1.15 primitive nova-conductor sends.

This is the client side of the wire: our own RPC client, the simulator and the
tests send what this module builds, so it must look like Nova's own
``obj_to_primitive`` output (``tests/fixtures/wire/select_destinations_call.json``).

Nova's rule for ``nova_object.data`` is "only fields that are set": a field
set to ``None`` is present as ``null``, an unset field is absent. The
dataclasses cannot tell "unset" from "None", so each object follows what Nova's
own code paths set:

* a nullable field that is ``None`` is sent as ``null`` (Nova's
  ``RequestSpec.from_components`` sets them all);
* a non-nullable field that is ``None`` is left out (unset), never sent as
  ``null``, which Nova's deserializer would reject;
* Destination and RequestLevelParams carry only what was given (Nova builds
  them from keyword arguments; the sample's RequestLevelParams data is ``{}``);
* RequestGroup carries every field (its constructor sets all defaults).

What our dataclasses do not hold is sent as Nova's lazy default or left out:
``RequestSpec.id`` (unset, as before the API persists the spec), ``retry``
(``null``), ``limits`` (all-null SchedulerLimits, as ``from_components``),
``security_groups`` (empty list), the image's ``checksum``/``protected``/
``tags``/``direct_url`` (unset), and every timestamp (``null``).
``nova_object.changes`` is never sent: it is optional and consumers ignore it.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.objects.codec.bounded import NAMESPACE
from scheduler.objects.codec.request_spec import TRAIT_PROPERTY_PREFIX
from scheduler.objects.spec import (
    CellMapping,
    Destination,
    Flavor,
    ImageMeta,
    InstanceGroup,
    RequestGroup,
    RequestLevelParams,
    RequestSpec,
)

# Versions Nova 34 sends (tests/fixtures/wire/object_schemas.json).
VERSIONS: dict[str, str] = {
    'RequestSpec': '1.15',
    'Flavor': '1.2',
    'ImageMeta': '1.8',
    'ImageMetaProps': '1.44',
    'InstanceGroup': '1.11',
    'Destination': '1.4',
    'CellMapping': '1.1',
    'RequestGroup': '1.3',
    'RequestLevelParams': '1.1',
    'SchedulerLimits': '1.0',
    'NetworkMetadata': '1.0',
    'SecurityGroupList': '1.1',
    'SecurityGroup': '1.2',
    'NetworkRequestList': '1.1',
    'NetworkRequest': '1.3',
    'InstanceNUMATopology': '1.3',
    'InstancePCIRequests': '1.1',
}

# ImageMetaProps 1.44 fields: Nova drops every other image property.
IMAGE_META_PROPS_FIELDS: frozenset[str] = frozenset({
    'hw_architecture', 'hw_auto_disk_config', 'hw_boot_menu', 'hw_cdrom_bus', 'hw_cpu_cores',
    'hw_cpu_max_cores', 'hw_cpu_max_sockets', 'hw_cpu_max_threads', 'hw_cpu_policy',
    'hw_cpu_realtime_mask', 'hw_cpu_sockets', 'hw_cpu_thread_policy', 'hw_cpu_threads',
    'hw_device_id', 'hw_disk_bus', 'hw_disk_type', 'hw_emulation_architecture',
    'hw_ephemeral_encryption', 'hw_ephemeral_encryption_format',
    'hw_ephemeral_encryption_secret_uuid', 'hw_firmware_stateless', 'hw_firmware_type',
    'hw_floppy_bus', 'hw_input_bus', 'hw_ipxe_boot', 'hw_locked_memory', 'hw_machine_type',
    'hw_maxphysaddr_bits', 'hw_maxphysaddr_mode', 'hw_mem_encryption',
    'hw_mem_encryption_model', 'hw_mem_page_size', 'hw_numa_cpus', 'hw_numa_mem',
    'hw_numa_nodes', 'hw_pci_numa_affinity_policy', 'hw_pmu', 'hw_pointer_model',
    'hw_qemu_guest_agent', 'hw_redirected_usb_ports', 'hw_rescue_bus', 'hw_rescue_device',
    'hw_rng_model', 'hw_scsi_model', 'hw_serial_port_count', 'hw_sound_model', 'hw_time_hpet',
    'hw_tpm_model', 'hw_tpm_version', 'hw_usb_model', 'hw_video_model', 'hw_video_ram',
    'hw_vif_model', 'hw_vif_multiqueue_enabled', 'hw_viommu_model', 'hw_virtio_packed_ring',
    'hw_vm_mode', 'hw_watchdog_action', 'img_bdm_v2', 'img_bittorrent',
    'img_block_device_mapping', 'img_cache_in_nova', 'img_compression_level',
    'img_config_drive', 'img_hide_hypervisor_id', 'img_hv_requested_version', 'img_hv_type',
    'img_linked_clone', 'img_mappings', 'img_owner_id', 'img_root_device_name',
    'img_signature', 'img_signature_certificate_uuid', 'img_signature_hash_method',
    'img_signature_key_type', 'img_use_agent', 'img_version', 'os_admin_user',
    'os_command_line', 'os_distro', 'os_require_quiesce', 'os_secure_boot',
    'os_skip_agent_inject_files_at_boot', 'os_skip_agent_inject_ssh', 'os_type',
    'traits_required',
})


def primitive(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """Wrap ``data`` as the nova-object primitive of ``name`` at the version Nova sends."""
    return {
        'nova_object.name': name,
        'nova_object.namespace': NAMESPACE,
        'nova_object.version': VERSIONS[name],
        'nova_object.data': data,
    }


def _is_primitive(value: Any, name: str) -> bool:
    return isinstance(value, Mapping) and value.get('nova_object.name') == name


def _sorted_set(values: Iterable[str]) -> list[str]:
    # Set fields travel as JSON lists; sorting keeps the encoding deterministic.
    return sorted(set(values))


def _put_required(data: dict[str, Any], key: str, value: Any) -> None:
    """A non-nullable field: absent (unset) when unknown, never ``null``."""
    if value is not None:
        data[key] = value


def _timestamps(data: dict[str, Any], *, persistent: bool) -> None:
    data['created_at'] = None
    data['updated_at'] = None
    if persistent:
        data['deleted_at'] = None
        data['deleted'] = False


# Nested objects ---------------------------------------------------------------------


def encode_flavor(flavor: Flavor) -> dict[str, Any]:
    data: dict[str, Any] = {}
    _put_required(data, 'id', flavor.id)
    data['name'] = flavor.name
    data['memory_mb'] = int(flavor.memory_mb)
    data['vcpus'] = int(flavor.vcpus)
    data['root_gb'] = int(flavor.root_gb)
    data['ephemeral_gb'] = int(flavor.ephemeral_gb)
    _put_required(data, 'flavorid', flavor.flavorid)
    data['swap'] = int(flavor.swap)
    data['rxtx_factor'] = flavor.rxtx_factor
    data['vcpu_weight'] = flavor.vcpu_weight
    data['disabled'] = bool(flavor.disabled)
    data['is_public'] = bool(flavor.is_public)
    # DictOfStringsField: Nova coerces every value to a string.
    data['extra_specs'] = {str(k): str(v) for k, v in flavor.extra_specs.items()}
    data['description'] = flavor.description
    _timestamps(data, persistent=True)
    return primitive('Flavor', data)


def encode_image_meta_props(properties: Mapping[str, Any]) -> dict[str, Any]:
    """Nova's ``ImageMetaProps.from_dict``: Glance's ``trait:<NAME>=required`` properties
    fold into ``traits_required``; properties Nova does not know are dropped."""
    data: dict[str, Any] = {}
    traits = list(properties.get('traits_required') or [])
    for key, value in properties.items():
        if key.startswith(TRAIT_PROPERTY_PREFIX):
            if str(value).lower() == 'required':
                traits.append(key[len(TRAIT_PROPERTY_PREFIX):])
        elif key in IMAGE_META_PROPS_FIELDS and key != 'traits_required':
            data[key] = value
    if traits or 'traits_required' in properties:
        data['traits_required'] = list(dict.fromkeys(traits))
    return primitive('ImageMetaProps', data)


def encode_image_meta(image: ImageMeta) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key in ('id', 'name', 'status', 'visibility', 'owner', 'size', 'virtual_size',
                'container_format', 'disk_format'):
        _put_required(data, key, getattr(image, key))
    data['created_at'] = None
    data['updated_at'] = None
    data['min_ram'] = int(image.min_ram)
    data['min_disk'] = int(image.min_disk)
    data['properties'] = encode_image_meta_props(image.properties)
    return primitive('ImageMeta', data)


def encode_instance_group(group: InstanceGroup) -> dict[str, Any]:
    data: dict[str, Any] = {}
    _put_required(data, 'id', group.id)
    data['user_id'] = group.user_id
    data['project_id'] = group.project_id
    _put_required(data, 'uuid', group.uuid)
    data['name'] = group.name
    # The deprecated list is still read by ServerGroupAffinityFilter, which fails on a
    # group without it (nova/scheduler/filters/affinity_filter.py): derive it from the
    # policy when not given.
    policies = list(group.policies) or ([group.policy] if group.policy else [])
    data['policies'] = policies
    data['members'] = list(group.members)
    data['hosts'] = list(group.hosts)
    data['policy'] = group.policy
    data['_rules'] = {str(k): str(v) for k, v in group.rules.items()}
    _timestamps(data, persistent=True)
    return primitive('InstanceGroup', data)


def encode_cell_mapping(cell: CellMapping) -> dict[str, Any]:
    data: dict[str, Any] = {}
    _put_required(data, 'uuid', cell.uuid)
    data['name'] = cell.name
    _put_required(data, 'transport_url', cell.transport_url)
    _put_required(data, 'database_connection', cell.database_connection)
    data['disabled'] = bool(cell.disabled)
    return primitive('CellMapping', data)


def encode_destination(dest: Destination) -> dict[str, Any]:
    data: dict[str, Any] = {}
    _put_required(data, 'host', dest.host)
    if dest.node is not None:
        data['node'] = dest.node
    if dest.cell is not None:
        data['cell'] = encode_cell_mapping(dest.cell)
    if dest.aggregates is not None:
        data['aggregates'] = list(dest.aggregates)
    if dest.forbidden_aggregates:
        data['forbidden_aggregates'] = _sorted_set(dest.forbidden_aggregates)
    if dest.allow_cross_cell_move:
        data['allow_cross_cell_move'] = True
    return primitive('Destination', data)


def encode_request_group(group: RequestGroup) -> dict[str, Any]:
    return primitive('RequestGroup', {
        'use_same_provider': bool(group.use_same_provider),
        'resources': {str(rc): int(n) for rc, n in group.resources.items()},
        'required_traits': _sorted_set(group.required_traits),
        'forbidden_traits': _sorted_set(group.forbidden_traits),
        'aggregates': [list(a) for a in group.aggregates],
        'forbidden_aggregates': _sorted_set(group.forbidden_aggregates),
        'requester_id': group.requester_id,
        'provider_uuids': list(group.provider_uuids),
        'in_tree': group.in_tree,
    })


def encode_request_level_params(params: RequestLevelParams) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if params.root_required:
        data['root_required'] = _sorted_set(params.root_required)
    if params.root_forbidden:
        data['root_forbidden'] = _sorted_set(params.root_forbidden)
    if params.same_subtree:
        data['same_subtree'] = [list(s) for s in params.same_subtree]
    return primitive('RequestLevelParams', data)


def encode_scheduler_limits() -> dict[str, Any]:
    """What ``RequestSpec.from_components`` sends: every limit ``null``."""
    return primitive('SchedulerLimits', {
        'numa_topology': None, 'vcpu': None, 'disk_gb': None, 'memory_mb': None})


def encode_network_metadata(value: Mapping[str, Any] | None) -> dict[str, Any]:
    if _is_primitive(value, 'NetworkMetadata'):
        return dict(value)  # type: ignore[arg-type]
    value = value or {}
    return primitive('NetworkMetadata', {
        'physnets': _sorted_set(value.get('physnets') or ()),
        'tunneled': bool(value.get('tunneled', False)),
    })


def encode_requested_networks(networks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    objects = [dict(n) if _is_primitive(n, 'NetworkRequest') else primitive('NetworkRequest',
                                                                            dict(n))
               for n in networks]
    return primitive('NetworkRequestList', {'objects': objects})


def encode_security_groups() -> dict[str, Any]:
    return primitive('SecurityGroupList', {'objects': []})


def _passthrough(value: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    """Objects the scheduler keeps as primitives: sent back as given, or wrapped when
    only their data was kept."""
    if value is None:
        return None
    if _is_primitive(value, name):
        return dict(value)
    return primitive(name, dict(value))


def _hints(hints: Mapping[str, Any]) -> dict[str, list[str]]:
    """DictOfListOfStringsField: every value a list of strings."""
    out: dict[str, list[str]] = {}
    for key, value in hints.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        out[str(key)] = [str(v) for v in values]
    return out


# The RequestSpec ---------------------------------------------------------------------


def encode_request_spec(spec: RequestSpec) -> dict[str, Any]:
    """The RequestSpec 1.15 primitive for ``spec``, as nova-conductor sends it."""
    data: dict[str, Any] = {
        'image': encode_image_meta(spec.image) if spec.image is not None else None,
        'numa_topology': _passthrough(spec.numa_topology, 'InstanceNUMATopology'),
        'pci_requests': _passthrough(spec.pci_requests, 'InstancePCIRequests'),
        'project_id': spec.project_id,
        'user_id': spec.user_id,
        'availability_zone': spec.availability_zone,
        'flavor': encode_flavor(spec.flavor),
        'num_instances': int(spec.num_instances),
        'ignore_hosts': list(spec.ignore_hosts) if spec.ignore_hosts is not None else None,
        'force_hosts': list(spec.force_hosts) if spec.force_hosts is not None else None,
        'force_nodes': list(spec.force_nodes) if spec.force_nodes is not None else None,
        'requested_destination': (encode_destination(spec.requested_destination)
                                  if spec.requested_destination is not None else None),
        'retry': None,
        'limits': encode_scheduler_limits(),
        'instance_group': (encode_instance_group(spec.instance_group)
                           if spec.instance_group is not None else None),
        'scheduler_hints': _hints(spec.scheduler_hints),
    }
    _put_required(data, 'instance_uuid', spec.instance_uuid)
    data['security_groups'] = encode_security_groups()
    data['network_metadata'] = encode_network_metadata(spec.network_metadata)
    data['is_bfv'] = bool(spec.is_bfv)
    data['requested_resources'] = [encode_request_group(g) for g in spec.requested_resources]
    data['request_level_params'] = encode_request_level_params(spec.request_level_params)
    data['requested_networks'] = encode_requested_networks(spec.requested_networks)
    return primitive('RequestSpec', data)
