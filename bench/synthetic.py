"""A seeded synthetic cloud, and the same cloud in each side's input shape.

One :class:`SyntheticCloud` feeds both sides of every comparison: Placement's
``GET /allocation_candidates`` answer in microversion 1.39's exact shape (for
this service) and the compute-node rows, service rows and aggregates Nova's
scheduler would read from its databases (for Nova's code). The mix aims at a
real region: several host sizes, usage from empty to nearly full, CPU and
hardware traits, a few hosts with nested providers (NUMA-less SR-IOV PFs with
bandwidth, vGPU), availability-zone and weighting aggregates, a few disabled or
down compute services. ``make_cloud(..., nested=True)`` gives about a quarter
more of the hosts nested trees as Nova would report them (:func:`_nest`): NUMA
nodes holding PCPU and MEMORY_MB, PCI devices tracked in Placement, pGPUs of
several vGPU types.
"""
from __future__ import annotations

import datetime
import json
import random
import uuid as uuidlib
from dataclasses import dataclass, field
from typing import Any

#: What every benchmarked request asks for (m1.medium-like), in Placement's terms.
REQUEST_RESOURCES = {'VCPU': 2, 'MEMORY_MB': 4096, 'DISK_GB': 40}

_SIZES = (  # (weight, vcpus, memory_mb, disk_gb)
    (4, 32, 131072, 960),
    (5, 64, 262144, 1920),
    (3, 96, 393216, 3840),
    (1, 128, 1048576, 7680),
)
_CPU_TRAITS = ('HW_CPU_X86_AVX', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE42', 'HW_CPU_X86_AESNI')
_EXTRA_TRAITS = ('COMPUTE_NET_ATTACH_INTERFACE', 'COMPUTE_VOLUME_MULTI_ATTACH',
                 'COMPUTE_IMAGE_TYPE_QCOW2', 'COMPUTE_IMAGE_TYPE_RAW', 'COMPUTE_TRUSTED_CERTS',
                 'HW_CPU_X86_SVM', 'CUSTOM_GOLD')
#: ``nested=True``: of the hosts without children, the share made NUMA-in-Placement
#: hosts, PCI-in-Placement hosts and vGPU hosts (about 26% of all hosts; with the
#: SR-IOV and single-pGPU hosts every cloud has, about a third have nested trees).
NUMA_SHARE, PCI_SHARE, VGPU_SHARE = 0.10, 0.09, 0.09
NUMA_TRAIT = 'HW_NUMA_ROOT'
#: Nova's PCI-in-Placement classes (CUSTOM_PCI_<vendor>_<product>) and its device trait.
PCI_CLASSES = ('CUSTOM_PCI_10DE_2236', 'CUSTOM_PCI_8086_1572')
PCI_TRAIT = 'COMPUTE_MANAGED_PCI_DEVICE'
#: vGPU types (a pGPU holds VGPUs of one type, a trait on it) and how many one A10 holds.
VGPU_TYPES = (('CUSTOM_NVIDIA_A10_8Q', 3), ('CUSTOM_NVIDIA_A10_4Q', 6),
              ('CUSTOM_NVIDIA_A10_2Q', 12))
CELL_UUID = '9a1e0c1b-0d9c-4f5a-9f5e-2b8f4f1c2a11'


def _uuid(rng: random.Random) -> str:
    return str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


@dataclass
class SyntheticProvider:
    uuid: str
    name: str
    root_uuid: str
    parent_uuid: str | None
    #: resource class -> (total, reserved, allocation_ratio, used)
    inventory: dict[str, tuple[int, int, float, int]]
    traits: list[str]

    def capacity(self, rc: str) -> int:
        total, reserved, ratio, _ = self.inventory[rc]
        return int((total - reserved) * ratio)


@dataclass
class SyntheticHost:
    index: int
    name: str
    root: SyntheticProvider
    children: list[SyntheticProvider]
    disabled: bool
    forced_down: bool
    last_seen_up: datetime.datetime
    host_ip: str
    hypervisor_version: int
    cpu_info: dict[str, Any]
    num_instances: int
    io_workload: int
    failed_builds: int
    instances: list[str] = field(default_factory=list)

    @property
    def providers(self) -> list[SyntheticProvider]:
        return [self.root, *self.children]


@dataclass
class SyntheticCloud:
    seed: int
    hosts: list[SyntheticHost]
    #: (id, uuid, name, hosts, metadata)
    aggregates: list[tuple[int, str, str, list[str], dict[str, str]]]
    #: The moment the heartbeats are relative to: both sides judge service
    #: liveness at this instant (ComputeFilter's clock, oslo.utils' time
    #: override for Nova), so a long run does not watch hosts "go down".
    now: datetime.datetime = field(
        default_factory=lambda: datetime.datetime.now(datetime.timezone.utc))

    # ------------------------------------------------------------- this service
    def placement_body(self, resources: dict[str, int] | None = None) -> dict[str, Any]:
        """``GET /allocation_candidates`` at 1.39: one candidate per host that fits."""
        resources = dict(resources or REQUEST_RESOURCES)
        allocation_requests = []
        summaries: dict[str, Any] = {}
        for host in self.hosts:
            root = host.root
            if any(rc not in root.inventory or
                   root.capacity(rc) - root.inventory[rc][3] < amount
                   for rc, amount in resources.items()):
                continue
            allocation_requests.append({
                'allocations': {root.uuid: {'resources': dict(resources)}},
                'mappings': {'': [root.uuid]},
            })
            for p in host.providers:
                summaries[p.uuid] = {
                    'resources': {rc: {'capacity': p.capacity(rc), 'used': inv[3]}
                                  for rc, inv in p.inventory.items()},
                    'traits': sorted(p.traits),
                    'parent_provider_uuid': p.parent_uuid,
                    'root_provider_uuid': p.root_uuid,
                }
        return {'allocation_requests': allocation_requests, 'provider_summaries': summaries}

    def placement_json(self, resources: dict[str, int] | None = None) -> bytes:
        return json.dumps(self.placement_body(resources)).encode()

    def hosts_document(self) -> dict[str, Any]:
        """The hosts-file document (``etc/scheduler/hosts.yaml.sample``) of this cloud."""
        return {
            'cells': [{'uuid': CELL_UUID, 'name': 'cell1'}],
            'aggregates': [{'id': a[0], 'uuid': a[1], 'name': a[2], 'hosts': list(a[3]),
                            'metadata': dict(a[4])} for a in self.aggregates],
            'hosts': [{
                'nodename': h.name, 'service_host': h.name, 'provider_uuid': h.root.uuid,
                'cell': CELL_UUID, 'disabled': h.disabled, 'forced_down': h.forced_down,
                'last_seen_up': h.last_seen_up.isoformat(), 'host_ip': h.host_ip,
                'hypervisor_type': 'QEMU', 'hypervisor_version': h.hypervisor_version,
                'cpu_info': h.cpu_info,
                'supported_instances': [['x86_64', 'kvm', 'hvm'], ['i686', 'kvm', 'hvm']],
                'stats': {'num_instances': str(h.num_instances),
                          'io_workload': str(h.io_workload),
                          'failed_builds': str(h.failed_builds)},
            } for h in self.hosts],
        }


def _nest(rng: random.Random, root: SyntheticProvider,
          fill: float) -> list[SyntheticProvider]:
    """Maybe a nested tree under ``root`` (its children; ``root``'s inventory changed in
    place), as Nova reports one, filled like the host (``fill``):

    - NUMA in Placement: two NUMA nodes (trait HW_NUMA_ROOT) each holding half the
      host's MEMORY_MB and a quarter of its CPUs as PCPU; the root keeps DISK_GB and
      the other half of the CPUs as VCPU (the shared ones);
    - PCI in Placement: four to eight devices, one each of a CUSTOM_PCI_<vendor>_<product>
      class (inventory 1), trait COMPUTE_MANAGED_PCI_DEVICE;
    - vGPU: two to four pGPUs, each VGPUs of one type (a CUSTOM_NVIDIA_A10_* trait).

    Devices (PCI, vGPU) are filled to half the host's share: few per host, they would
    otherwise run out long before the memory the benchmarks fill towards.
    """
    roll = rng.random()
    name, inv = root.name, root.inventory
    children = []
    if roll < NUMA_SHARE:
        vcpus, _, cpu_ratio, _ = inv['VCPU']
        memory_mb, _, ram_ratio, _ = inv.pop('MEMORY_MB')
        inv.pop('PCPU', None)
        inv['VCPU'] = (vcpus // 2, 0, cpu_ratio, int(vcpus // 2 * cpu_ratio * fill))
        for node in range(2):
            pcpu, mem, reserved = vcpus // 4, memory_mb // 2, 2048
            children.append(SyntheticProvider(
                _uuid(rng), f'{name}_NUMA{node}', root.uuid, root.uuid,
                {'PCPU': (pcpu, 0, 1.0, int(pcpu * fill)),
                 'MEMORY_MB': (mem, reserved, ram_ratio, int((mem - reserved) * ram_ratio * fill))},
                [NUMA_TRAIT]))
    elif roll < NUMA_SHARE + PCI_SHARE:
        rc = rng.choice(PCI_CLASSES)
        for dev in range(rng.randint(4, 8)):
            children.append(SyntheticProvider(
                _uuid(rng), f'{name}_0000:{0x3b + dev:02x}:00.0', root.uuid, root.uuid,
                {rc: (1, 0, 1.0, int(rng.random() < fill / 2))}, [PCI_TRAIT]))
    elif roll < NUMA_SHARE + PCI_SHARE + VGPU_SHARE:
        for gpu in range(rng.randint(2, 4)):
            trait, total = rng.choice(VGPU_TYPES)
            children.append(SyntheticProvider(
                _uuid(rng), f'{name}_pci_0000_{0x3b + gpu:02x}_00_0', root.uuid, root.uuid,
                {'VGPU': (total, 0, 1.0, int(total * fill / 2))}, [trait]))
    return children


def make_cloud(n_hosts: int, *, seed: int = 20261122,
               now: datetime.datetime | None = None,
               fill_mean: float | None = None, nested: bool = False) -> SyntheticCloud:
    """``n_hosts`` compute hosts; same seed and size, same cloud (heartbeats are
    relative to ``now``, by default the wall clock, so that liveness checks see
    the same up and down hosts whenever the benchmark runs).

    Each host is filled to a share of its capacity drawn from a beta distribution:
    by default most hosts half full, some nearly full or empty (mean 0.4); with
    ``fill_mean``, around that mean (beta(10m, 10(1-m)): a spread of about 0.1).

    ``nested``: some of the hosts without children get nested trees (:func:`_nest`);
    the other hosts are drawn as without it, so off is the cloud it always was.
    """
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    rng = random.Random(seed * 1_000_003 + n_hosts)
    weights = [s[0] for s in _SIZES]
    shape = (2.0, 3.0) if fill_mean is None else (10 * fill_mean, 10 * (1 - fill_mean))
    hosts: list[SyntheticHost] = []
    for i in range(n_hosts):
        _, vcpus, memory_mb, disk_gb = rng.choices(_SIZES, weights)[0]
        fill = rng.betavariate(*shape)
        cpu_ratio = rng.choice((4.0, 4.0, 16.0, 1.0))
        ram_ratio = rng.choice((1.0, 1.0, 1.5))
        reserved_mb = 4096
        inventory = {
            'VCPU': (vcpus, 0, cpu_ratio, int(vcpus * cpu_ratio * fill)),
            'MEMORY_MB': (memory_mb, reserved_mb, ram_ratio,
                          int((memory_mb - reserved_mb) * ram_ratio * fill)),
            'DISK_GB': (disk_gb, 0, 1.0, int(disk_gb * fill * rng.uniform(0.5, 1.1))),
        }
        inventory['DISK_GB'] = (*inventory['DISK_GB'][:3],
                                min(inventory['DISK_GB'][3], disk_gb))
        if rng.random() < 0.1:  # dedicated-CPU hosts also report PCPU
            inventory['PCPU'] = (vcpus // 2, 0, 1.0, int(vcpus // 2 * fill))
        traits = rng.sample(_CPU_TRAITS, rng.randint(2, 4)) + rng.sample(
            _EXTRA_TRAITS, rng.randint(1, 4))
        name = f'cn-{i:05d}.region.example.org'
        root_uuid = _uuid(rng)
        root = SyntheticProvider(root_uuid, name, root_uuid, None, inventory, traits)
        children = []
        if rng.random() < 0.05:  # SR-IOV physical functions with bandwidth
            for pf in range(2):
                u = _uuid(rng)
                children.append(SyntheticProvider(
                    u, f'{name}:pf{pf}', root_uuid, root_uuid,
                    {rc: (10_000_000, 0, 1.0, rng.randrange(0, 9_000_000))
                     for rc in ('NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC')},
                    ['CUSTOM_PHYSNET_DATA', 'CUSTOM_VNIC_TYPE_DIRECT']))
        elif rng.random() < 0.03:  # a vGPU host
            u = _uuid(rng)
            children.append(SyntheticProvider(
                u, f'{name}_pci_0000_3b_00_0', root_uuid, root_uuid,
                {'VGPU': (16, 0, 1.0, rng.randrange(17))}, ['CUSTOM_NVIDIA_A10']))
        if nested and not children:
            children = _nest(rng, root, fill)
        down = rng.random() < 0.005
        last_seen = now - datetime.timedelta(seconds=rng.randrange(3600, 7200) if down
                                             else rng.randrange(0, 50))
        n_inst = max(0, int(vcpus * cpu_ratio * fill / 4))
        hosts.append(SyntheticHost(
            index=i, name=name, root=root, children=children,
            disabled=rng.random() < 0.01, forced_down=rng.random() < 0.002,
            last_seen_up=last_seen,
            host_ip=f'10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}',
            hypervisor_version=rng.choice((8002000, 8002002, 9000000)),
            cpu_info={'arch': 'x86_64', 'model': 'Cascadelake-Server', 'vendor': 'Intel',
                      'topology': {'cells': 2, 'sockets': 1, 'cores': vcpus // 4, 'threads': 2},
                      'features': sorted(t.rsplit('_', 1)[-1].lower() for t in traits
                                         if t.startswith('HW_CPU_X86_')),
                      'maxphysaddr': {'mode': 'passthrough', 'bits': 46}},
            num_instances=n_inst, io_workload=rng.randrange(0, 6),
            failed_builds=1 if rng.random() < 0.01 else 0,
            instances=[_uuid(rng) for _ in range(min(n_inst, 8))],
        ))
    # Three availability zones; a quarter of the hosts in a "weighting" aggregate
    # that overrides the RAM multiplier (Nova's per-aggregate override).
    aggregates: list[tuple[int, str, str, list[str], dict[str, str]]] = []
    for z in range(3):
        aggregates.append((z + 1, _uuid(rng), f'az{z + 1}',
                           [h.name for h in hosts if h.index % 3 == z],
                           {'availability_zone': f'az{z + 1}'}))
    aggregates.append((4, _uuid(rng), 'stack-ram', [h.name for h in hosts if h.index % 4 == 0],
                       {'ram_weight_multiplier': '2.0'}))
    return SyntheticCloud(seed=seed, hosts=hosts, aggregates=aggregates, now=now)
