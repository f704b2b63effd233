"""Decoding a RequestSpec 1.x primitive and its parts (RPC 4.3-4.5 ``spec_obj``).

Lenient where Nova releases legitimately differ (unknown fields ignored, any
minor version of a known major, ``nova_object.changes`` never read, an absent
field takes Nova's default, an explicit ``null`` reads as ``None`` or an empty
collection); strict about what the scheduler acts on (types, namespace, object
names, major versions, required fields, amounts, and :class:`DecodeLimits`).
Encoding is beside it: :mod:`.request_spec_encoder`.
"""
from __future__ import annotations

import copy
from typing import Any

from scheduler.objects.codec.bounded import (
    NAME_KEY,
    PAGES_ANY,
    BoundedReader,
    Conv,
    DecodeLimits,
    check_depth,
    invalid,
    seg,
)
from scheduler.objects.spec import (
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

NO_NETWORK_METADATA = {'physnets': [], 'tunneled': False}  # Nova's lazy default
_NETWORK_REQUEST_FIELDS = ('network_id', 'address', 'port_id', 'pci_request_id', 'tag',
                           'arq_uuid', 'device_profile')
TRAIT_PROPERTY_PREFIX = 'trait:'

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



def decode_request_spec(primitive: Any, *, limits: DecodeLimits = DecodeLimits(),
                        path: str = 'spec_obj') -> RequestSpec:
    """A RequestSpec 1.x primitive (RPC 4.3-4.5 ``spec_obj``)."""
    check_depth(primitive, path, limits.max_depth)
    return RequestSpecReader(limits).request_spec(primitive, path)



class RequestSpecReader(BoundedReader):
    """The readers of a RequestSpec and of the objects it holds."""

    def request_spec(self, value: Any, path: str) -> RequestSpec:
        data = self.obj(value, path, 'RequestSpec')

        def opt(key: str, conv: Conv) -> Any:
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
                                       default=lambda: copy.deepcopy(NO_NETWORK_METADATA),
                                       nullable=True),
            requested_networks=self.take(data, 'requested_networks', path,
                                         self.requested_networks,
                                         default=list, nullable=True, null=list),
        )

    def num_instances(self, value: Any, path: str) -> int:
        count = self.integer(value, path, 1)
        if count > self.lim.max_instances:
            raise invalid(path, f'more than {self.lim.max_instances} instances')
        return count

    def flavor(self, value: Any, path: str, *, plain_ok: bool = False) -> Flavor:
        if plain_ok and isinstance(value, dict) and NAME_KEY not in value:
            data = self.dict_(value, path)  # a pre-object legacy flavor dict
        else:
            data = self.obj(value, path, 'Flavor')

        def opt(key: str, conv: Conv) -> Any:
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

        def opt(key: str, conv: Conv) -> Any:
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
                props[key] = conv(data[key], path + seg(key))
        if legacy:
            # Nova's ImageMetaProps.from_dict folds Glance's trait:<NAME>=required.
            traits = props.get('traits_required', [])
            for key, v in data.items():
                if (isinstance(key, str) and key.startswith(TRAIT_PROPERTY_PREFIX)
                        and isinstance(v, str) and v.strip().lower() == 'required'):
                    trait = self.string(key[len(TRAIT_PROPERTY_PREFIX):], path + seg(key))
                    if trait and trait not in traits:
                        traits.append(trait)
            if traits:
                props['traits_required'] = traits
        return props

    def _image_prop_readers(self) -> list[tuple[str, Conv]]:
        def int_set_list(v: Any, p: str) -> list[list[int]]:
            return self.list_of(v, p, lambda s, q: self.list_of(s, q, self.int_like))

        def dict_list(v: Any, p: str) -> list[dict[str, str | None]]:
            return self.list_of(v, p, lambda d, q: self.dict_of(d, q, self.nullable_string))

        readers: list[tuple[frozenset[str], Conv]] = [
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

        def opt(key: str, conv: Conv) -> Any:
            return self.take(data, key, path, conv, default=None, nullable=True)

        def strings(key: str) -> list[str]:
            return self.take(data, key, path, self.str_list, default=list, nullable=True,
                             null=list)

        policy, policies = group_policies(opt('policy', self.string),
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

        def opt(key: str, conv: Conv) -> Any:
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
            key_path = path + seg(key)
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
                  lambda v, p: self.integer(v, p, PAGES_ANY, self.lim.max_amount),
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

def group_policies(policy: str | None,
                    policies: list[str] | None) -> tuple[str | None, list[str]]:
    """Each of ``policy`` and the deprecated ``policies`` derived from the other when
    missing: Nova's ServerGroupAffinityFilter still reads ``policies``."""
    policies = list(policies) if policies else ([policy] if policy else [])
    return (policy if policy is not None else (policies[0] if policies else None)), policies
