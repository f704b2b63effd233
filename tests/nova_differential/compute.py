"""What nova-compute, nova-api and Placement make of a drawn case, made by Nova's own code.

* :func:`write_cloud`: per host, the ``compute_nodes`` row (its JSON columns
  written by ``NUMATopology._to_json`` and ``ComputeNode``'s own to-DB
  converters), the ``services`` row, the aggregates as Nova's objects, and the
  Placement inventories and usages the compute reports. The NUMA usage of the
  guests already running is the resource tracker's: each guest's
  ``numa_get_constraints`` fitted by ``numa_fit_instance_to_host`` and added by
  ``numa_usage_from_instance_numa``, one after the other; a guest that would not
  have fitted was never scheduled there and is dropped.
* :func:`build_request`: the RequestSpec nova-api builds for a boot
  (``RequestSpec.from_components`` with ``numa_get_constraints``,
  ``get_pci_numa_policy_constraint`` and ``get_pci_requests_from_flavor``),
  as the conductor sends it (``NovaObjectSerializer`` and JSON). A request Nova
  refuses (its extra-spec validators, its constraint checks) raises
  :class:`Refused`.
* :func:`placement_answer`: ``GET /allocation_candidates`` at microversion 1.36
  as Placement answers it for these inventories: one allocation request per
  host, from its root provider, and every provider's summary.
"""
from __future__ import annotations

import datetime
import functools
import importlib
import json
import types
import warnings
from dataclasses import dataclass
from typing import Any

from tests.nova_differential.cloud import (
    ALIASES,
    CELL_UUID,
    CELLS,
    PROJECTS,
    USER_ID,
    Case,
    Host,
    Request,
    uuid_of,
)

#: The scheduler configuration both sides run with (Nova's option names; our
#: side takes the same values under the same names).
FILTER_SCHEDULER = {
    'isolated_hosts': ['host00', 'host01'],
    'isolated_images': ['0b6d3c2a-1e4f-4a5b-8c9d-0e1f2a3b4c5d'],
    'restrict_isolated_hosts_to_isolated_images': True,
    'max_io_ops_per_host': 8,
    'max_instances_per_host': 6,
    'build_failure_weight_multiplier': 1000000.0,
    # Nova's default is 0.0: weighed here so that it is compared.
    'num_instances_weight_multiplier': -1.0,
    # image_props_weight_multiplier stays at Nova's 0.0: Nova's weigher reads the
    # instances' image properties from the cell database (InstanceList.fill_metadata),
    # which neither side has here (doc/nova-compatibility.md, ImagePropertiesWeigher).
}
METRICS = {'weight_setting': ['cpu.percent=-1.0', 'cpu.frequency=0.001']}
SERVICE_DOWN_TIME = 60
MICROVERSION = '1.36'


class Refused(Exception):
    """nova-api would refuse this request (the text is Nova's)."""


_NOVA: types.SimpleNamespace | None = None


def nova() -> types.SimpleNamespace:
    """Nova's modules, its configuration parsed once with this harness's options."""
    global _NOVA
    if _NOVA is not None:
        return _NOVA
    names = {
        'conf': 'nova.conf', 'config': 'nova.config', 'context': 'nova.context',
        'exception': 'nova.exception', 'objects': 'nova.objects',
        'obj_base': 'nova.objects.base', 'hardware': 'nova.virt.hardware',
        'pci_request': 'nova.pci.request',
        'validators': 'nova.api.validation.extra_specs.validators',
        'host_manager': 'nova.scheduler.host_manager', 'filters': 'nova.scheduler.filters',
        'manager': 'nova.scheduler.manager', 'scheduler_utils': 'nova.scheduler.utils',
        'weights': 'nova.scheduler.weights', 'jsonutils': 'oslo_serialization.jsonutils',
    }
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        ns = types.SimpleNamespace(**{k: importlib.import_module(v) for k, v in names.items()})
    ns.objects.register_all()
    ns.config.parse_args(['nova-scheduler'], default_config_files=[], configure_db=False,
                         init_rpc=False)
    set_shared_options(ns.conf.CONF)
    _NOVA = ns
    return ns


def set_shared_options(conf: Any) -> None:
    """The options both sides run with, under the names both use (oslo.config)."""
    conf.set_override('alias', [json.dumps(a) for a in ALIASES], group='pci')
    for key, value in FILTER_SCHEDULER.items():
        conf.set_override(key, value, group='filter_scheduler')
    for key, value in METRICS.items():
        conf.set_override(key, value, group='metrics')
    conf.set_override('service_down_time', SERVICE_DOWN_TIME)


def context() -> Any:
    n = nova()
    return n.context.RequestContext(user_id=USER_ID, project_id='admin', is_admin=True)


# ------------------------------------------------------------------------ the cloud
@dataclass
class WrittenHost:
    host: Host
    compute_row: dict[str, Any]
    service_row: dict[str, Any]
    #: resource class -> (total, reserved, allocation ratio, used)
    inventory: dict[str, tuple[int, int, float, int]]
    #: Guests kept (those that fitted when they were scheduled).
    guests: list[str]

    @property
    def instances(self) -> list[str]:
        """The instances the compute reports: a drawn guest that did not fit never ran."""
        dropped = {g.uuid for g in self.host.guests} - set(self.guests)
        return [u for u in self.host.instances if u not in dropped]

    def placement_free(self, rc: str) -> float:
        total, reserved, ratio, used = self.inventory.get(rc, (0, 0, 1.0, 0))
        return int((total - reserved) * ratio) - used


@dataclass
class WrittenCloud:
    case: Case
    hosts: list[WrittenHost]
    aggregates: list[Any]   # nova.objects.Aggregate

    def host(self, name: str) -> WrittenHost:
        return next(h for h in self.hosts if h.host.name == name)


def _host_topology(host: Host) -> Any:
    o = nova().objects
    cells = []
    for c in host.cells:
        cells.append(o.NUMACell(
            id=c.id, cpuset=set(c.cpuset), pcpuset=set(c.pcpuset), memory=c.memory,
            cpu_usage=0, memory_usage=0, pinned_cpus=set(),
            siblings=[set(s) for s in c.siblings],
            mempages=[o.NUMAPagesTopology(size_kb=s, total=t, used=0, reserved=r)
                      for s, t, r in c.mempages],
            socket=c.socket,
            network_metadata=o.NetworkMetadata(physnets=set(c.physnets), tunneled=c.tunneled)))
    return o.NUMATopology(cells=cells)


def _flavor(name: str, vcpus: int, memory_mb: int, root_gb: int, ephemeral_gb: int, swap: int,
            extra_specs: dict[str, str]) -> Any:
    o = nova().objects
    return o.Flavor(id=abs(hash(name)) % 10000, flavorid=name, name=name, vcpus=vcpus,
                    memory_mb=memory_mb, root_gb=root_gb, ephemeral_gb=ephemeral_gb, swap=swap,
                    extra_specs=dict(extra_specs), rxtx_factor=1.0, vcpu_weight=0,
                    disabled=False, is_public=True, description=None)


def _image(image_id: str, properties: dict[str, Any]) -> Any:
    return nova().objects.ImageMeta.from_dict({
        'id': image_id, 'name': 'image', 'status': 'active', 'disk_format': 'qcow2',
        'container_format': 'bare', 'min_ram': 0, 'min_disk': 0, 'size': 1 << 30,
        'properties': dict(properties)})


def _add_guests(host: Host) -> tuple[Any, list[str], dict[str, int]]:
    """The host's topology with its guests' usage, the guests kept, and what they
    allocate in Placement."""
    n = nova()
    topology = _host_topology(host)
    limits = n.objects.NUMATopologyLimits(cpu_allocation_ratio=host.cpu_ratio,
                                          ram_allocation_ratio=host.ram_ratio)
    kept: list[str] = []
    used = {'VCPU': 0, 'PCPU': 0, 'MEMORY_MB': 0}
    for guest in host.guests:
        flavor = _flavor('guest', guest.vcpus, guest.memory_mb, 1, 0, 0, guest.extra_specs)
        try:
            constraints = n.hardware.numa_get_constraints(flavor, _image(guest.uuid, {}))
        except Exception:
            continue
        pinned = guest.extra_specs.get('hw:cpu_policy') == 'dedicated'
        if constraints is not None:
            fitted = n.hardware.numa_fit_instance_to_host(topology, constraints, None,
                                                              limits=limits)
            if fitted is None:
                continue
            topology = n.hardware.numa_usage_from_instance_numa(topology, fitted)
        elif pinned:
            continue
        kept.append(guest.uuid)
        used['PCPU' if pinned else 'VCPU'] += guest.vcpus
        used['MEMORY_MB'] += guest.memory_mb
    return topology, kept, used


def _inventory(host: Host, used: dict[str, int]) -> dict[str, tuple[int, int, float, int]]:
    # libvirt reports cpu_shared_set as VCPU and cpu_dedicated_set as PCPU; with
    # the legacy vcpu_pin_set every CPU is VCPU.
    shared = {c for cell in host.cells for c in cell.cpuset}
    dedicated = {c for cell in host.cells for c in cell.pcpuset} - shared
    inventory = {
        'VCPU': (len(shared), 0, host.cpu_ratio, used['VCPU'] + (
            used['PCPU'] if not dedicated else 0)),
        'MEMORY_MB': (sum(c.memory for c in host.cells), host.reserved_host_memory_mb,
                      host.ram_ratio, used['MEMORY_MB']),
        'DISK_GB': (host.local_gb, 0, host.disk_ratio, host.disk_used_gb),
    }
    if dedicated:
        inventory['PCPU'] = (len(dedicated), 0, 1.0, used['PCPU'])
    return {rc: v for rc, v in inventory.items() if v[0] > 0}


def _compute_row(host: Host, row_id: int, topology: Any, kept: list[str],
                 used: dict[str, int], now: datetime.datetime) -> dict[str, Any]:
    o = nova().objects
    vcpus = len({c for cell in host.cells for c in cell.cpuset + cell.pcpuset})
    memory_mb = sum(c.memory for c in host.cells)
    memory_used = used['MEMORY_MB'] + host.reserved_host_memory_mb
    pools = o.PciDevicePoolList(objects=[
        # As PciDeviceStats.to_device_pools_obj writes them: the pool keys and
        # device-spec tags beside the fixed fields, remote_managed on network
        # functions (_ensure_remote_managed_tag).
        o.PciDevicePool(vendor_id='8086', product_id=p.product_id, numa_node=p.numa_node,
                        count=p.count,
                        tags={'dev_type': p.dev_type, 'address': p.address,
                              **({'physical_network': p.physical_network}
                                 if p.physical_network else {}),
                              **({'remote_managed': str(p.remote_managed).lower()}
                                 if p.dev_type in ('type-VF', 'type-PF') else {})})
        for p in host.pools])
    updates: dict[str, Any] = {
        # With nova-compute's counters per VM state, task state, OS type and project,
        # which this service leaves out of what it reads.
        'stats': {'num_instances': str(host.num_instances),
                  'io_workload': str(host.io_workload),
                  'failed_builds': str(host.failed_builds),
                  **({'num_vm_active': str(host.num_instances),
                      'num_task_None': str(host.num_instances),
                      'num_os_type_None': str(host.num_instances),
                      f'num_proj_{PROJECTS[0]}': str(host.num_instances)}
                     if host.num_instances else {})},
        'host_ip': host.host_ip,
        'supported_hv_specs': [o.HVSpec.from_list(list(s)) for s in host.supported_instances],
        'pci_device_pools': pools,
    }
    node = o.ComputeNode
    node._convert_stats_to_db_format(updates)
    node._convert_host_ip_to_db_format(updates)
    node._convert_supported_instances_to_db_format(updates)
    node._convert_pci_stats_to_db_format(updates)
    stamp = now - datetime.timedelta(seconds=host.seen_seconds_ago)
    metrics = [{'name': name, 'value': value, 'source': 'nova.compute.monitors.cpu.virt_driver',
                'timestamp': stamp.strftime('%Y-%m-%dT%H:%M:%S.%f')}
               for name, value in host.metrics.items()]
    updates.update({
        'id': row_id, 'uuid': host.uuid, 'service_id': row_id, 'host': host.name,
        'vcpus': vcpus, 'memory_mb': memory_mb, 'local_gb': host.local_gb,
        'vcpus_used': used['VCPU'] + used['PCPU'], 'memory_mb_used': memory_used,
        'local_gb_used': host.disk_used_gb, 'hypervisor_type': host.hypervisor_type,
        'hypervisor_version': host.hypervisor_version, 'hypervisor_hostname': host.name,
        'free_ram_mb': memory_mb - memory_used, 'free_disk_gb': host.local_gb - host.disk_used_gb,
        'current_workload': host.io_workload, 'running_vms': host.num_instances,
        'cpu_info': json.dumps(host.cpu_info),
        'disk_available_least': host.local_gb - host.disk_used_gb,
        'metrics': json.dumps(metrics),
        'numa_topology': topology._to_json(),
        'cpu_allocation_ratio': host.cpu_ratio, 'ram_allocation_ratio': host.ram_ratio,
        'disk_allocation_ratio': host.disk_ratio, 'mapped': 1,
        'created_at': now - datetime.timedelta(days=30), 'updated_at': stamp,
        'deleted_at': None, 'deleted': 0,
    })
    return updates


def _service_row(host: Host, row_id: int, now: datetime.datetime) -> dict[str, Any]:
    stamp = now - datetime.timedelta(seconds=host.seen_seconds_ago)
    return {
        'id': row_id, 'uuid': f'{host.uuid[:-4]}5e5e', 'host': host.name,
        'binary': 'nova-compute', 'topic': 'compute', 'report_count': 1000 + row_id,
        'disabled': host.disabled, 'disabled_reason': 'maintenance' if host.disabled else None,
        'last_seen_up': stamp, 'forced_down': host.forced_down, 'version': 70,
        'created_at': now - datetime.timedelta(days=30), 'updated_at': stamp,
        'deleted_at': None, 'deleted': 0,
    }


def write_cloud(case: Case, now: datetime.datetime) -> WrittenCloud:
    written = []
    for i, host in enumerate(case.hosts):
        topology, kept, used = _add_guests(host)
        written.append(WrittenHost(
            host=host, compute_row=_compute_row(host, i + 1, topology, kept, used, now),
            service_row=_service_row(host, i + 1, now), inventory=_inventory(host, used),
            guests=kept))
    o = nova().objects
    epoch = datetime.datetime(2026, 1, 1)
    aggregates = [o.Aggregate._from_db_object(context(), o.Aggregate(), {
        'id': a.id, 'uuid': a.uuid, 'name': a.name, 'hosts': list(a.hosts),
        'metadetails': dict(a.metadata), 'created_at': epoch, 'updated_at': None,
        'deleted_at': None, 'deleted': False}) for a in case.aggregates]
    return WrittenCloud(case=case, hosts=written, aggregates=aggregates)


# --------------------------------------------------------------------------- requests
def instance_uuids(case: Case) -> list[str]:
    return [uuid_of(case.seed, case.index, 'instance', i)
            for i in range(case.request.num_instances)]


def build_request(case: Case) -> dict[str, Any]:
    """The RequestSpec primitive the conductor sends; raises :class:`Refused`."""
    n = nova()
    r: Request = case.request
    for key, value in r.extra_specs.items():
        refused = _refused_extra_spec(key, value)
        if refused:
            raise Refused(f'extra spec {key}={value}: {refused}')
    flavor = _flavor(r.flavor_name, r.vcpus, r.memory_mb, r.root_gb, r.ephemeral_gb, r.swap,
                     r.extra_specs)
    try:
        image = _image(r.image_id, r.image_properties)
        numa = n.hardware.numa_get_constraints(flavor, image)
        policy = n.hardware.get_pci_numa_policy_constraint(flavor, image)
        pci = n.pci_request.get_pci_requests_from_flavor(flavor, affinity_policy=policy)
    except Exception as e:
        raise Refused(f'{type(e).__name__}: {e}') from None
    for physnet, vnic_type, port_policy in r.sriov_ports:
        pci.requests.append(_port_request(physnet, vnic_type, port_policy or policy))
    group = None
    if r.group is not None:
        policy_name, members, hosts, max_per_host = r.group
        group = n.objects.InstanceGroup(
            uuid='9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d', name='group', policy=policy_name,
            # As the conductor loads it (InstanceGroup._from_db_object sets both).
            policies=[policy_name],
            members=list(members) + instance_uuids(case), hosts=list(hosts),
            rules={'max_server_per_host': str(max_per_host)} if max_per_host else {},
            project_id=r.project_id, user_id=USER_ID)
    ctx = n.context.RequestContext(user_id=USER_ID, project_id=r.project_id)
    spec = n.objects.RequestSpec.from_components(
        ctx, instance_uuids(case)[0], image, flavor, numa, pci,
        # nova-api takes a hint as a string or a list of strings.
        {'scheduler_hints': dict(r.hints)}, group, None,
        project_id=r.project_id, user_id=USER_ID)
    spec.num_instances = r.num_instances
    spec.is_bfv = False
    if r.preferred_cell:
        # The source cell, preferred, as the conductor's cross-cell resize asks
        # (MigrationTask._set_requested_destination_cell).
        spec.requested_destination = n.objects.Destination(
            cell=n.objects.CellMapping(uuid=r.preferred_cell, name=CELLS[r.preferred_cell],
                                       transport_url='none:///',
                                       database_connection='sqlite://', disabled=False),
            allow_cross_cell_move=True)
    physnets = set(r.physnets) | {p for p, _, _ in r.sriov_ports}
    if physnets or r.tunneled:
        spec.network_metadata = n.objects.NetworkMetadata(physnets=physnets,
                                                          tunneled=r.tunneled)
    primitive = n.obj_base.NovaObjectSerializer().serialize_entity(ctx, spec)
    return n.jsonutils.loads(n.jsonutils.dumps(primitive))


def _port_request(physnet: str, vnic_type: str, numa_policy: str | None) -> Any:
    """The PCI request nova-api makes for an SR-IOV port
    (``API.create_resource_requests`` in ``nova/network/neutron.py``)."""
    n = nova()
    spec = {'physical_network': physnet,
            'remote_managed': str(vnic_type == 'remote-managed')}
    dev_type = n.pci_request.DEVICE_TYPE_FOR_VNIC_TYPE.get(vnic_type)
    if dev_type:
        spec['dev_type'] = dev_type
    request = n.objects.InstancePCIRequest(
        count=1, spec=[spec], request_id=uuid_of('port-request', physnet, vnic_type),
        requester_id=uuid_of('port', physnet, vnic_type))
    if numa_policy:
        request.numa_policy = numa_policy
    return request


@functools.lru_cache(maxsize=4096)
def _refused_extra_spec(key: str, value: str) -> str | None:
    """Why Nova's extra-spec validators refuse ``key=value``, or None. Remembered:
    the validators compile a regular expression per call, more than ``re`` caches."""
    try:
        nova().validators.validate(key, value)
    except Exception as e:  # noqa: BLE001 - any refusal of Nova's
        return str(e) or type(e).__name__
    return None


def nova_request(primitive: dict[str, Any]) -> Any:
    n = nova()
    return n.obj_base.NovaObjectSerializer().deserialize_entity(context(), primitive)


# -------------------------------------------------------------------------- Placement
def placement_answer(cloud: WrittenCloud, primitive: dict[str, Any]) -> dict[str, Any]:
    """Placement's answer to the query Nova's ``ResourceRequest.from_request_spec``
    makes of the request: one allocation request from each host's root provider that
    has room (a host without PCPU inventory answers the PCPU fallback query, as a
    legacy ``vcpu_pin_set`` compute does), and those hosts' summaries."""
    n = nova()
    spec = nova_request(primitive)
    wanted = dict(n.scheduler_utils.ResourceRequest.from_request_spec(spec)
                  .merged_resources())
    allocation_requests = []
    summaries: dict[str, Any] = {}
    for h in cloud.hosts:
        resources = dict(wanted)
        if 'PCPU' in resources and 'PCPU' not in h.inventory:
            resources['VCPU'] = resources.get('VCPU', 0) + resources.pop('PCPU')
        if any(amount > h.placement_free(rc) for rc, amount in resources.items()):
            continue   # Placement offers only providers with room
        allocation_requests.append({'allocations': {h.host.uuid: {'resources': resources}},
                                    'mappings': {'': [h.host.uuid]}})
        summaries[h.host.uuid] = {
            'resources': {rc: {'capacity': int((total - reserved) * ratio), 'used': used}
                          for rc, (total, reserved, ratio, used) in h.inventory.items()},
            'traits': ['COMPUTE_NODE'], 'parent_provider_uuid': None,
            'root_provider_uuid': h.host.uuid}
    return {'allocation_requests': allocation_requests, 'provider_summaries': summaries}


__all__ = ['CELL_UUID', 'Refused', 'WrittenCloud', 'build_request', 'instance_uuids', 'nova',
           'nova_request', 'placement_answer', 'write_cloud']
