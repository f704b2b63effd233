"""Seeded random clouds and requests, as plain data (no Nova import).

What is drawn is what real computes and users produce: host CPU layouts as
``[compute] cpu_shared_set`` / ``cpu_dedicated_set`` or the legacy
``vcpu_pin_set`` make them, page pools as the kernel reports them, guests that
already run (their usage is worked out by :mod:`.compute` with Nova's own
arithmetic, never drawn), PCI pools as the PCI tracker groups devices, and
flavors and images with the extra specs and properties Nova accepts. Each case
is drawn from its own ``random.Random((seed, index))`` so that one case can be
drawn again alone (``--case``).
"""
from __future__ import annotations

import random
import uuid as uuidlib
from dataclasses import dataclass, field
from typing import Any

_NS = uuidlib.UUID('3f7a9c1e-2b4d-4e6f-8a0b-1c2d3e4f5a6b')
CELL_UUID = '8e1f6a2c-3b4d-4c5e-9f60-718293a4b5c6'
#: A second cell, for clouds of two cells (a cross-cell move prefers one).
CELL2_UUID = '9f2a7b3d-4c5e-4d6f-8a71-8293a4b5c6d7'
CELLS = {CELL_UUID: 'cell1', CELL2_UUID: 'cell2'}
PROJECTS = ('5b1c2d3e4f5a4b6c8d7e9f0a1b2c3d4e', '6c2d3e4f5a6b4c7d9e8f0a1b2c3d4e5f')
USER_ID = '7d3e4f5a6b7c4d8e0f9a1b2c3d4e5f60'
#: Images the isolated-hosts configuration names (``[filter_scheduler] isolated_images``).
ISOLATED_IMAGE = '0b6d3c2a-1e4f-4a5b-8c9d-0e1f2a3b4c5d'
OTHER_IMAGE = '1c7e4d3b-2f5a-4b6c-9d0e-1f2a3b4c5d6e'
PHYSNETS = ('physnet1', 'physnet2')
VENDOR = '8086'
#: (product id, device type) of the PCI devices hosts may have.
DEVICES = (('1520', 'type-PF'), ('1521', 'type-VF'), ('154d', 'type-PCI'), ('10fb', 'type-VF'))
#: ``[pci] alias`` entries, as an operator writes them (the same on both sides).
ALIASES = (
    {'name': 'a-vf', 'vendor_id': VENDOR, 'product_id': '1521', 'device_type': 'type-VF'},
    {'name': 'a-pf', 'vendor_id': VENDOR, 'product_id': '1520', 'device_type': 'type-PF'},
    {'name': 'a-pci', 'vendor_id': VENDOR, 'product_id': '154d', 'device_type': 'type-PCI'},
    {'name': 'a-pci-legacy', 'vendor_id': VENDOR, 'product_id': '154d',
     'device_type': 'type-PCI', 'numa_policy': 'legacy'},
    {'name': 'a-vf-pref', 'vendor_id': VENDOR, 'product_id': '10fb', 'device_type': 'type-VF',
     'numa_policy': 'preferred'},
    {'name': 'a-vf-req', 'vendor_id': VENDOR, 'product_id': '10fb', 'device_type': 'type-VF',
     'numa_policy': 'required'},
)
ARCHES = ('x86_64', 'aarch64', 'i686')
HV_TYPES = ('qemu', 'kvm', 'xen')
VM_MODES = ('hvm', 'xen', 'exe')
CPU_FEATURES = ('avx2', 'aes', 'sse4.2', 'vmx', 'pdpe1gb')
METRIC_NAMES = ('cpu.percent', 'cpu.user.percent', 'cpu.frequency', 'cpu.user.time')


def uuid_of(*parts: object) -> str:
    return str(uuidlib.uuid5(_NS, '/'.join(str(p) for p in parts)))


@dataclass
class Cell:
    id: int
    cpuset: list[int]            # CPUs for unpinned guests
    pcpuset: list[int]           # CPUs for pinned guests
    siblings: list[list[int]]    # SMT thread sets (of every CPU of the cell)
    memory: int                  # MB
    #: (size_kb, total pages, reserved pages); the smallest size first.
    mempages: list[tuple[int, int, int]]
    socket: int
    physnets: list[str] = field(default_factory=list)
    tunneled: bool = False


@dataclass
class Pool:
    product_id: str
    dev_type: str
    numa_node: int | None
    count: int
    physical_network: str | None = None
    #: The PF (or the device) whose functions the pool holds: nova-compute splits
    #: pools by it (PciDeviceStats._create_pool_keys_from_dev).
    address: str = '0000:81:00.0'
    #: SmartNIC (DPU) functions: remote_managed 'true' in the device spec.
    remote_managed: bool = False


@dataclass
class Guest:
    """A guest already running on a host: what it was booted with."""

    uuid: str
    vcpus: int
    memory_mb: int
    extra_specs: dict[str, str]


@dataclass
class Host:
    name: str
    uuid: str
    cells: list[Cell]
    cpu_ratio: float
    ram_ratio: float
    disk_ratio: float
    local_gb: int
    disk_used_gb: int
    reserved_host_memory_mb: int
    pools: list[Pool]
    guests: list[Guest]
    disabled: bool
    forced_down: bool
    seen_seconds_ago: int
    failed_builds: int
    io_workload: int
    num_instances: int
    metrics: dict[str, float]
    cpu_info: dict[str, Any]
    hypervisor_type: str
    hypervisor_version: int
    supported_instances: list[list[str]]
    host_ip: str
    #: Instances the compute reports through its casts (uuids of other tenants' guests too).
    instances: list[str]
    cell: str = CELL_UUID


@dataclass
class Aggregate:
    id: int
    uuid: str
    name: str
    hosts: list[str]
    metadata: dict[str, str]


@dataclass
class Request:
    vcpus: int
    memory_mb: int
    root_gb: int
    ephemeral_gb: int
    swap: int
    extra_specs: dict[str, str]
    image_id: str
    image_properties: dict[str, Any]
    num_instances: int
    project_id: str
    hints: dict[str, Any]
    #: (policy, member uuids, hosts of the members, max_server_per_host or None)
    group: tuple[str, list[str], list[str], int | None] | None
    flavor_name: str
    #: Networks the request's ports are on, with NUMA affinity considered.
    physnets: list[str] = field(default_factory=list)
    tunneled: bool = False
    #: SR-IOV ports: (physnet, vnic_type, the port's numa_affinity_policy or None)
    sriov_ports: list[tuple[str, str, str | None]] = field(default_factory=list)
    #: A cross-cell resize's preferred cell (requested_destination, allow_cross_cell_move).
    preferred_cell: str | None = None


@dataclass
class Case:
    seed: int
    index: int
    hosts: list[Host]
    aggregates: list[Aggregate]
    request: Request

    @property
    def label(self) -> str:
        return f'seed {self.seed} case {self.index}'


# ----------------------------------------------------------------------------- hosts
def _cells(rng: random.Random) -> list[Cell]:
    """A host's NUMA cells as one of three CPU configurations makes them."""
    count = rng.choice((1, 1, 2, 2, 2, 4))
    threads = rng.choice((1, 2, 2))
    cores = rng.choice((2, 4, 6, 8))
    mode = rng.choice(('split', 'split', 'legacy', 'shared'))
    sizes = [4] + sorted(rng.sample((2048, 1048576), rng.choice((0, 1, 1, 2))))
    socket_per_cell = rng.random() < 0.7
    cells: list[Cell] = []
    cpu = 0
    for cell_id in range(count):
        cpus = list(range(cpu, cpu + cores * threads))
        cpu += len(cpus)
        # Linux numbers the first thread of every core first, then the second ones.
        sibs = [[cpus[c + t * cores] for t in range(threads)] for c in range(cores)]
        if mode == 'legacy':
            # vcpu_pin_set: every CPU serves pinned and unpinned guests alike.
            cpuset = pcpuset = sorted(cpus)
        elif mode == 'shared':
            cpuset, pcpuset = sorted(cpus), []
        else:
            dedicated = rng.randint(1, cores - 1)
            pcores = sibs[:dedicated]
            # cpu_dedicated_set lists whole cores, or (rarely) single threads of them.
            if threads > 1 and rng.random() < 0.2:
                pcpuset = sorted(c[0] for c in pcores)
                cpuset = sorted(set(cpus) - set(pcpuset))
            else:
                pcpuset = sorted(x for c in pcores for x in c)
                cpuset = sorted(x for c in sibs[dedicated:] for x in c)
        memory = rng.choice((2048, 4096, 8192, 16384))
        pages: list[tuple[int, int, int]] = []
        huge_kb = 0
        for size in sizes[1:]:
            total = rng.randint(0, memory * 1024 // 2 // size)
            if total:
                pages.append((size, total, rng.choice((0, 0, 0, 1)) if total > 1 else 0))
                huge_kb += total * size
        small = (memory * 1024 - huge_kb) // 4
        small_reserved = rng.choice((0, 0, 0, 64 * 256))
        pages.insert(0, (4, small, min(small_reserved, small)))
        physnets = [p for p in PHYSNETS if rng.random() < 0.3]
        cells.append(Cell(id=cell_id, cpuset=cpuset, pcpuset=pcpuset,
                          siblings=sibs if threads > 1 else [[c] for c in cpus],
                          memory=memory, mempages=pages,
                          socket=cell_id if socket_per_cell else cell_id // 2,
                          physnets=physnets, tunneled=rng.random() < 0.2))
    return cells


def _pools(rng: random.Random, cells: list[Cell]) -> list[Pool]:
    pools = []
    for product, dev_type in DEVICES:
        if rng.random() < 0.5:
            continue
        for node in rng.sample([c.id for c in cells] + [None], rng.randint(1, 2)):
            physnet = rng.choice(PHYSNETS) if dev_type == 'type-VF' and rng.random() < 0.5 \
                else None
            pools.append(Pool(product, dev_type, node, rng.randint(0, 4), physnet,
                              address=f'0000:{0x81 + len(pools):02x}:00.0',
                              remote_managed=dev_type == 'type-VF' and rng.random() < 0.1))
    return pools


def _guest_specs(rng: random.Random, cells: list[Cell]) -> dict[str, str]:
    specs: dict[str, str] = {}
    has_pcpus = any(c.pcpuset for c in cells)
    roll = rng.random()
    if has_pcpus and roll < 0.4:
        specs['hw:cpu_policy'] = 'dedicated'
    elif roll < 0.6:
        specs['hw:numa_nodes'] = '1'
    if rng.random() < 0.25 and any(len(c.mempages) > 1 for c in cells):
        specs['hw:mem_page_size'] = rng.choice(('large', '2048', 'any'))
    return specs


def _metrics(rng: random.Random) -> dict[str, float]:
    # As nova-compute's CPU monitor reports them: percentages as whole numbers,
    # written to compute_nodes.metrics divided by 100 (MonitorMetric.to_dict).
    return {m: rng.randint(0, 100) / 100 if m.endswith('percent') else
            float(rng.randint(800, 3600)) for m in METRIC_NAMES}


def draw_host(rng: random.Random, index: int, seed: int) -> Host:
    cells = _cells(rng)
    name = f'host{index:02d}'
    guests = [Guest(uuid=uuid_of(seed, name, 'guest', g), vcpus=rng.choice((1, 2, 4)),
                    memory_mb=rng.choice((512, 1024, 2048)), extra_specs=_guest_specs(rng, cells))
              for g in range(rng.randint(0, 4))]
    arch = rng.choice(ARCHES[:2])
    supported = [[arch, hv, 'hvm'] for hv in rng.sample(('qemu', 'kvm'), rng.randint(1, 2))]
    if rng.random() < 0.15:
        supported.append(['x86_64', 'xen', 'xen'])
    if rng.random() < 0.03:
        # A compute that advertises no instance type (an ironic node without cpu_arch).
        supported = []
    # A compute whose monitor is not configured reports none.
    metrics = _metrics(rng) if rng.random() < 0.95 else {}
    others = [uuid_of(seed, name, 'other', i) for i in range(rng.randint(0, 6))]
    local_gb = rng.choice((100, 400, 1000))
    return Host(
        name=name, uuid=uuid_of(seed, name), cells=cells,
        cpu_ratio=rng.choice((1.0, 4.0, 16.0)), ram_ratio=rng.choice((1.0, 1.0, 1.5)),
        disk_ratio=rng.choice((1.0, 1.0, 2.0)), local_gb=local_gb,
        disk_used_gb=rng.randint(0, local_gb // 2),
        reserved_host_memory_mb=rng.choice((0, 512)), pools=_pools(rng, cells),
        guests=guests, disabled=rng.random() < 0.1, forced_down=rng.random() < 0.05,
        seen_seconds_ago=rng.choice((2, 5, 9, 9, 9, 300)),
        failed_builds=rng.choice((0, 0, 0, 1, 3)), io_workload=rng.randint(0, 10),
        num_instances=len(guests) + len(others), metrics=metrics,
        cpu_info={'arch': arch, 'vendor': rng.choice(('Intel', 'AMD')),
                  'model': rng.choice(('Skylake', 'EPYC')),
                  'topology': {'cells': len(cells), 'sockets': 1, 'cores': 4, 'threads': 2},
                  'features': sorted(rng.sample(CPU_FEATURES, rng.randint(0, 4)))},
        hypervisor_type=rng.choice(('QEMU', 'QEMU', 'Xen')),
        hypervisor_version=rng.choice((6002000, 8002000, 9001000)),
        supported_instances=supported, host_ip=f'192.0.2.{index + 10}',
        instances=[g.uuid for g in guests] + others)


def _aggregates(rng: random.Random, hosts: list[Host], flavor_names: list[str],
                seed: int) -> list[Aggregate]:
    aggregates = []
    for i in range(rng.randint(0, 4)):
        members = [h.name for h in hosts if rng.random() < 0.4]
        metadata: dict[str, str] = {}
        for key, values in (
                ('availability_zone', ('az1', 'az2')),
                ('filter_tenant_id', PROJECTS[:1]),
                ('instance_type', (','.join(flavor_names[:2]), flavor_names[0])),
                ('max_io_ops_per_host', ('3', '8', 'x')),
                ('max_instances_per_host', ('2', '6')),
                ('hw:cpu_policy', ('dedicated',)),
                ('trusted', ('true', 'false')),
                ('cpu_count', ('4', '16', 'many')),
                ('hw_architecture', ARCHES[:2]),
                ('os_distro', ('ubuntu', 'rhel')),
                ('ram_weight_multiplier', ('2.0', '-1.0')),
                ('cpu_weight_multiplier', ('0.5',)),
                ('metrics_weight_multiplier', ('3.0',)),
                ('filter_tenant_id_2', PROJECTS[1:]),
                ('disk_weight_multiplier', ('-1.0',)),
                ('io_ops_weight_multiplier', ('2.0',)),
                ('num_instances_weight_multiplier', ('1.0',)),
                ('hypervisor_version_weight_multiplier', ('-2.0',)),
                ('pci_weight_multiplier', ('4.0',)),
                ('soft_affinity_weight_multiplier', ('2.0',)),
                ('soft_anti_affinity_weight_multiplier', ('0.5',)),
                ('build_failure_weight_multiplier', ('10.0', 'x')),
                ('image_props_weight_multiplier', ('1.0',))):
            if rng.random() < 0.2:
                metadata[key] = rng.choice(values)
        aggregates.append(Aggregate(id=i + 1, uuid=uuid_of(seed, 'agg', i), name=f'agg{i}',
                                    hosts=members, metadata=metadata))
    return aggregates


# -------------------------------------------------------------------------- requests
#: Flavor extra specs worth drawing: (key, values). Values Nova refuses are drawn
#: too; such a flavor is drawn again (:mod:`.compute` asks Nova's validators).
EXTRA_SPECS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ('hw:cpu_policy', ('dedicated', 'dedicated', 'shared', 'mixed')),
    ('hw:cpu_thread_policy', ('prefer', 'isolate', 'require')),
    ('hw:numa_nodes', ('1', '2', '2', '3')),
    ('hw:mem_page_size', ('small', 'large', 'any', '2048', '1GB', '4')),
    ('hw:emulator_threads_policy', ('isolate', 'share')),
    ('hw:cpu_dedicated_mask', ('^0', '1-2', '0')),
    ('hw:pci_numa_affinity_policy', ('required', 'preferred', 'legacy', 'socket')),
    ('pci_passthrough:alias', ('a-vf:1', 'a-pf:1', 'a-pci:2', 'a-pci-legacy:1',
                               'a-vf-pref:1', 'a-vf-req:1', 'a-vf:1,a-pci:1')),
    ('capabilities:cpu_info:arch', ('x86_64', 'aarch64')),
    ('capabilities:hypervisor_type', ('QEMU', 's== Xen')),
    ('capabilities:hypervisor_version', ('>= 8000000', '<= 7000000')),
    ('capabilities:num_instances', ('<= 3', '>= 2')),
    ('capabilities:cpu_info:features', ('<in> avx2', '<all-in> aes avx2')),
    ('capabilities:stats:failed_builds', ('0', '< 1')),
    ('trusted', ('true', '<in> tru')),
    ('aggregate_instance_extra_specs:cpu_count', ('>= 8', '4', '<or> 4 <or> 16')),
    ('aggregate_instance_extra_specs:hw:cpu_policy', ('dedicated',)),
    ('hw:cpu_max_sockets', ('1', '2')),
    ('hw:cpu_realtime', ('yes',)),
    ('hw:cpu_realtime_mask', ('^0', '^0-1')),
    ('hw:cpu_sockets', ('1', '2')),
    ('hw:cpu_threads', ('2',)),
)
IMAGE_PROPERTIES: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ('hw_architecture', ARCHES),
    ('img_hv_type', HV_TYPES + ('qemu',)),
    ('hw_vm_mode', VM_MODES + ('hvm',)),
    ('img_hv_requested_version', ('>= 8000000', '< 7000000', '>= 6000000')),
    ('hw_cpu_policy', ('dedicated', 'shared', 'mixed')),
    ('hw_cpu_thread_policy', ('prefer', 'isolate', 'require')),
    ('hw_numa_nodes', (1, 2)),
    ('hw_mem_page_size', ('small', 'large', 'any', '2048')),
    ('hw_pci_numa_affinity_policy', ('required', 'preferred', 'legacy', 'socket')),
    ('hw_emulator_threads_policy', ('isolate', 'share')),
    ('os_distro', ('ubuntu', 'rhel')),
    ('hw_cpu_realtime_mask', ('^0',)),
    ('hw_cpu_max_sockets', (1, 2)),
    ('hw_cpu_max_threads', (1, 2)),
)


#: JsonFilter queries on host attributes both sides read from the same data
#: (free amounts differ on purpose: doc/nova-compatibility.md, weighers).
JSON_QUERIES = (
    '["=", "$hypervisor_type", "QEMU"]',
    '["<", "$num_instances", 5]',
    '["in", "$host", "host01", "host03", "host05"]',
    '["and", [">=", "$num_io_ops", 2], ["not", ["=", "$hypervisor_type", "Xen"]]]',
    '["or", ["=", "$host_ip", "192.0.2.12"], [">", "$hypervisor_version", 8000000]]',
)


def draw_request(rng: random.Random, hosts: list[Host], seed: int, index: int) -> Request:
    specs: dict[str, str] = {}
    for key, values in EXTRA_SPECS:
        if rng.random() < 0.18:
            specs[key] = rng.choice(values)
    props: dict[str, Any] = {}
    for key, values in IMAGE_PROPERTIES:
        if rng.random() < 0.15:
            props[key] = rng.choice(values)
    vcpus = rng.choice((1, 2, 2, 4, 6))
    memory = rng.choice((512, 1024, 2048, 4096))
    if 'hw:numa_nodes' in specs and rng.random() < 0.3 and specs['hw:numa_nodes'] == '2':
        # Asymmetric NUMA cells, given in full.
        first = max(1, vcpus // 2)
        specs['hw:numa_cpus.0'] = ','.join(str(c) for c in range(first))
        specs['hw:numa_cpus.1'] = ','.join(str(c) for c in range(first, vcpus)) or '0'
        specs['hw:numa_mem.0'] = str(memory // 4)
        specs['hw:numa_mem.1'] = str(memory - memory // 4)
    count = rng.choice((1, 1, 1, 2, 3))
    members = [h for h in hosts if rng.random() < 0.15]
    hints: dict[str, Any] = {}
    others = [u for h in hosts for u in h.instances]
    if others and rng.random() < 0.15:
        hints['same_host'] = rng.sample(others, min(len(others), rng.randint(1, 2)))
    if others and rng.random() < 0.15:
        hints['different_host'] = rng.sample(others, min(len(others), rng.randint(1, 2)))
    if rng.random() < 0.1:
        hints['query'] = rng.choice(JSON_QUERIES)
    if rng.random() < 0.1:
        hints['build_near_host_ip'] = rng.choice(('192.0.2.12', '198.51.100.7'))
        hints['cidr'] = rng.choice(('/24', '/30', '/32'))
    group = None
    if rng.random() < 0.25:
        policy = rng.choice(('affinity', 'anti-affinity', 'soft-affinity', 'soft-anti-affinity'))
        member_uuids = [h.instances[0] for h in members if h.instances]
        group = (policy, member_uuids, [h.name for h in members if h.instances],
                 rng.choice((None, 2)) if policy == 'anti-affinity' else None)
    return Request(
        vcpus=vcpus, memory_mb=memory, root_gb=rng.choice((1, 10, 20)),
        ephemeral_gb=rng.choice((0, 0, 5)), swap=0, extra_specs=specs,
        image_id=ISOLATED_IMAGE if rng.random() < 0.15 else OTHER_IMAGE,
        image_properties=props, num_instances=count, project_id=rng.choice(PROJECTS),
        hints=hints, group=group, flavor_name=rng.choice(('m1.small', 'm1.large', 'c1.pin')),
        physnets=[p for p in PHYSNETS if rng.random() < 0.15], tunneled=rng.random() < 0.1,
        sriov_ports=[(rng.choice(PHYSNETS), rng.choice(('direct', 'direct', 'direct-physical',
                                                        'remote-managed')),
                      rng.choice((None, None, 'required', 'preferred', 'legacy', 'socket')))
                     for _ in range(rng.choice((0, 0, 0, 0, 1, 2)))])


def draw_case(seed: int, index: int) -> Case:
    rng = random.Random(f'{seed}/{index}')
    hosts = [draw_host(rng, i, seed) for i in range(rng.randint(5, 30))]
    if rng.random() < 0.8:
        # Most computes run a CPU monitor; in the other clouds a few report no metrics.
        for host in hosts:
            host.metrics = host.metrics or _metrics(rng)
    if rng.random() < 0.2:
        for host in hosts:
            host.cell = rng.choice(list(CELLS))
    if rng.random() < 0.5:
        # Allocation ratios of 1: the free amounts Placement and the compute_nodes row
        # give are then equal, and the whole decision can be compared
        # (doc/nova-compatibility.md, RAMWeigher/CPUWeigher/DiskWeigher).
        for host in hosts:
            host.cpu_ratio = host.ram_ratio = host.disk_ratio = 1.0
    aggregates = _aggregates(rng, hosts, ['m1.small', 'm1.large', 'c1.pin'], seed)
    case = Case(seed=seed, index=index, hosts=hosts, aggregates=aggregates,
                request=draw_request(rng, hosts, seed, index))
    if len({h.cell for h in hosts}) > 1 and rng.random() < 0.5:
        case.request.preferred_cell = rng.choice(list(CELLS))
    return case


def redraw_request(case: Case, attempt: int) -> Case:
    """The same cloud with another request (the first was one Nova refuses)."""
    rng = random.Random(f'{case.seed}/{case.index}/request/{attempt}')
    case.request = draw_request(rng, case.hosts, case.seed, case.index)
    return case
