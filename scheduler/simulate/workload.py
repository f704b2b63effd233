"""A synthetic stream of boot requests for ``scheduler-manage simulate``.

Pure and deterministic: the same ``WorkloadSpec`` gives the same requests,
instance uuids included. Each request is what nova-conductor sends for a boot
(``schedule_and_build_instances``): one RequestSpec with ``num_instances=N`` and
the N new instance uuids, ``return_objects`` and ``return_alternates`` true.

Mix: flavors small/medium/large/xlarge, some requiring ``HW_CPU_X86_AVX2`` or
``CUSTOM_SSD`` through ``trait:`` extra specs; some multi-instance requests (2-5);
some anti-affinity server groups (a new group per request, ``max_server_per_host``
1, members = the new instances, as conductor fills them); some requests for an
availability zone of the cloud.
"""
from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.objects.codec import encode_request_spec
from scheduler.objects.spec import Flavor, ImageMeta, ImageMetaProps, InstanceGroup, RequestSpec
from scheduler.simulate.cloud import SIMULATION_NAMESPACE, TRAIT_AVX2, TRAIT_SSD

# Shares of the request mix.
MULTI_INSTANCE_SHARE = 0.20
ANTI_AFFINITY_SHARE = 0.10
AZ_SHARE = 0.25
AVX2_SHARE = 0.20
SSD_SHARE = 0.10
MAX_INSTANCES_PER_REQUEST = 5

PROJECTS = ('9d6c6d7f1c8e4f4fa2b1f0e3d2c1b0a9', '3b9f1e0d2c4a4b6e8f0a1b2c3d4e5f60',
            'c0ffee00c0ffee00c0ffee00c0ffee00')
USER_ID = '5e1f2a3b4c5d4e6f8a9b0c1d2e3f4a5b'


@dataclass(frozen=True)
class FlavorDef:
    name: str
    id: int
    vcpus: int
    memory_mb: int
    root_gb: int
    weight: int   # relative frequency in the mix


FLAVORS: tuple[FlavorDef, ...] = (
    FlavorDef('m1.small', 2, vcpus=1, memory_mb=2048, root_gb=20, weight=3),
    FlavorDef('m1.medium', 3, vcpus=2, memory_mb=4096, root_gb=40, weight=3),
    FlavorDef('m1.large', 4, vcpus=4, memory_mb=8192, root_gb=80, weight=2),
    FlavorDef('m1.xlarge', 5, vcpus=8, memory_mb=16384, root_gb=160, weight=2),
)

IMAGE = ImageMeta(
    id=str(uuid.uuid5(SIMULATION_NAMESPACE, 'image-cirros')), name='cirros-0.6.2',
    status='active', visibility='public', disk_format='qcow2', container_format='bare',
    min_ram=0, min_disk=0, size=21430272, virtual_size=117440512,
    owner=PROJECTS[0],
    # No hw_architecture/img_hv_type/hw_vm_mode: ImagePropertiesFilter would then need
    # supported_instances, which a cloud known only from Placement does not advertise.
    properties=ImageMetaProps(os_distro='cirros', hw_disk_bus='virtio'),
)


@dataclass(frozen=True)
class WorkloadSpec:
    requests: int
    seed: int
    availability_zones: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.requests < 0:
            raise ValueError(f'the number of requests cannot be negative: {self.requests}')


@dataclass(frozen=True)
class BootRequest:
    """One ``select_destinations`` call of the workload."""

    index: int
    flavor: FlavorDef
    required_traits: tuple[str, ...]
    instance_uuids: tuple[str, ...]
    project_id: str
    availability_zone: str | None = None
    group_uuid: str | None = None
    request_id: str = field(default='')
    #: Flavor extra specs beyond the ``trait:`` ones of ``required_traits``.
    extra_specs: Mapping[str, str] = field(default_factory=dict)

    @property
    def num_instances(self) -> int:
        return len(self.instance_uuids)

    @property
    def kind(self) -> str:
        """A short label for reports: flavor + constraints."""
        parts = [self.flavor.name]
        parts += [f'+{t}' for t in self.required_traits]
        if self.availability_zone:
            parts.append(f'@{self.availability_zone}')
        if self.group_uuid:
            parts.append('anti-affinity')
        return ' '.join(parts)

    def request_spec(self) -> RequestSpec:
        extra_specs = dict(self.extra_specs)
        extra_specs.update({f'trait:{t}': 'required' for t in self.required_traits})
        flavor = Flavor(id=self.flavor.id, flavorid=str(self.flavor.id), name=self.flavor.name,
                        memory_mb=self.flavor.memory_mb, vcpus=self.flavor.vcpus,
                        root_gb=self.flavor.root_gb, ephemeral_gb=0, swap=0, rxtx_factor=1.0,
                        vcpu_weight=0, extra_specs=extra_specs)
        group = None
        hints: dict[str, list[Any]] = {}
        if self.group_uuid:
            group = InstanceGroup(uuid=self.group_uuid, id=self.index + 1,
                                  name=f'sim-group-{self.index}', user_id=USER_ID,
                                  project_id=self.project_id, policy='anti-affinity',
                                  policies=['anti-affinity'],
                                  rules={'max_server_per_host': '1'},
                                  members=list(self.instance_uuids), hosts=[])
            hints['group'] = [self.group_uuid]
        return RequestSpec(
            flavor=flavor, image=IMAGE, instance_uuid=self.instance_uuids[0],
            num_instances=self.num_instances, project_id=self.project_id, user_id=USER_ID,
            availability_zone=self.availability_zone, instance_group=group,
            scheduler_hints=hints, pci_requests={'requests': []},
            network_metadata={'physnets': [], 'tunneled': False})

    def to_rpc(self) -> tuple[dict[str, Any], list[str]]:
        """The ``spec_obj`` primitive and ``instance_uuids`` of the call."""
        return encode_request_spec(self.request_spec()), list(self.instance_uuids)

    def context(self) -> dict[str, Any]:
        """The request context dict nova-conductor would send (no token)."""
        return {'request_id': self.request_id, 'global_request_id': None,
                'user_id': USER_ID, 'project_id': self.project_id,
                'user_name': 'simulator', 'project_name': 'simulation',
                'roles': ['member', 'reader'], 'is_admin': False}


def _uuid(seed: int, *parts: object) -> str:
    return str(uuid.uuid5(SIMULATION_NAMESPACE, '/'.join(str(p) for p in (seed, *parts))))


def generate_workload(spec: WorkloadSpec) -> list[BootRequest]:
    rng = random.Random(spec.seed)
    requests: list[BootRequest] = []
    for index in range(spec.requests):
        flavor = rng.choices(FLAVORS, weights=[f.weight for f in FLAVORS])[0]
        traits = []
        if rng.random() < AVX2_SHARE:
            traits.append(TRAIT_AVX2)
        if rng.random() < SSD_SHARE:
            traits.append(TRAIT_SSD)
        anti_affinity = rng.random() < ANTI_AFFINITY_SHARE
        count = 1
        if anti_affinity or rng.random() < MULTI_INSTANCE_SHARE:
            count = rng.randint(2, MAX_INSTANCES_PER_REQUEST)
        zone = None
        if spec.availability_zones and rng.random() < AZ_SHARE:
            zone = rng.choice(spec.availability_zones)
        requests.append(BootRequest(
            index=index, flavor=flavor, required_traits=tuple(traits),
            instance_uuids=tuple(_uuid(spec.seed, 'instance', index, n) for n in range(count)),
            project_id=rng.choice(PROJECTS), availability_zone=zone,
            group_uuid=_uuid(spec.seed, 'group', index) if anti_affinity else None,
            request_id=f'req-{_uuid(spec.seed, "request", index)}'))
    return requests
