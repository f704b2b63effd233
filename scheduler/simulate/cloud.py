"""A synthetic cloud for ``scheduler-manage simulate``: compute hosts and aggregates.

The definition is pure and deterministic: the same ``CloudSpec`` always gives
the same hosts, uuids, sizes, traits and aggregates, so two runs with the same
seed are comparable. :func:`seed_cloud` is the only I/O: it writes the cloud
into Placement through the seeding helpers.

Shape:

* hosts ``cn-00001``...; uuid5 of the name in a fixed namespace;
* three host sizes with their own allocation ratios (CPU 16.0/4.0, RAM 1.5/1.0);
* ``HW_CPU_X86_AVX2`` on every 2nd host, ``CUSTOM_SSD`` on every 3rd,
  ``COMPUTE_STATUS_DISABLED`` on about 2 % (at least one host in clouds of 10+);
* availability zones ``az1``, ``az2``, ... as contiguous blocks of hosts (racks),
  so that every zone holds every kind of host, plus two aggregates without a zone.
"""
from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.objects.spec import Aggregate

if TYPE_CHECKING:
    from placement_client.client import PlacementClient

#: Namespace of every uuid the simulator derives from a name.
SIMULATION_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, 'https://placement-scheduler/simulate')

HOST_NAME_FORMAT = 'cn-{:05d}'

TRAIT_AVX2 = 'HW_CPU_X86_AVX2'
TRAIT_SSD = 'CUSTOM_SSD'
TRAIT_DISABLED = 'COMPUTE_STATUS_DISABLED'

AZ_METADATA_KEY = 'availability_zone'

# About this share of hosts is disabled; Placement still offers them unless the
# scheduler forbids the trait (Nova's compute_status_filter, our request filter too).
DISABLED_SHARE = 0.02
_MIN_HOSTS_FOR_DISABLED = 10


def simulation_uuid(name: str) -> str:
    return str(uuid.uuid5(SIMULATION_NAMESPACE, name))


@dataclass(frozen=True)
class Inventory:
    total: int
    allocation_ratio: float = 1.0
    reserved: int = 0
    min_unit: int = 1
    max_unit: int | None = None   # None: the total
    step_size: int = 1

    @property
    def capacity(self) -> int:
        """What Placement lets consumers allocate."""
        return int((self.total - self.reserved) * self.allocation_ratio)

    def to_placement(self) -> dict[str, Any]:
        """The body of one resource class in ``PUT /resource_providers/{uuid}/inventories``."""
        return {'total': self.total, 'reserved': self.reserved, 'min_unit': self.min_unit,
                'max_unit': self.max_unit if self.max_unit is not None else self.total,
                'step_size': self.step_size, 'allocation_ratio': self.allocation_ratio}


@dataclass(frozen=True)
class HostSize:
    name: str
    inventories: Mapping[str, Inventory]
    weight: int   # relative frequency in the cloud


# Sized so that the default workload (200 requests, ~320 instances, on 100 hosts) uses
# about two thirds of the memory: enough for full hosts and for requests with tight
# constraints (traits, zone, anti-affinity) to meet NoValidHost near the end.
HOST_SIZES: tuple[HostSize, ...] = (
    HostSize('small', {
        'VCPU': Inventory(8, allocation_ratio=16.0),
        'MEMORY_MB': Inventory(16384, allocation_ratio=1.0, reserved=512),
        'DISK_GB': Inventory(200),
    }, weight=5),
    HostSize('medium', {
        'VCPU': Inventory(16, allocation_ratio=4.0),
        'MEMORY_MB': Inventory(32768, allocation_ratio=1.5, reserved=1024),
        'DISK_GB': Inventory(400),
    }, weight=3),
    HostSize('large', {
        'VCPU': Inventory(32, allocation_ratio=4.0),
        'MEMORY_MB': Inventory(65536, allocation_ratio=1.0, reserved=2048),
        'DISK_GB': Inventory(800),
    }, weight=2),
)


@dataclass(frozen=True)
class CloudSpec:
    hosts: int
    seed: int

    def __post_init__(self) -> None:
        if self.hosts < 1:
            raise ValueError(f'a cloud needs at least one host, not {self.hosts}')


@dataclass(frozen=True)
class HostDef:
    """One compute host: a root resource provider without children."""

    index: int
    name: str
    uuid: str
    size: str
    inventories: Mapping[str, Inventory]
    traits: tuple[str, ...]
    aggregates: tuple[str, ...]          # aggregate uuids
    availability_zone: str | None

    @property
    def disabled(self) -> bool:
        return TRAIT_DISABLED in self.traits

    def capacity(self, resource_class: str) -> int:
        inventory = self.inventories.get(resource_class)
        return inventory.capacity if inventory is not None else 0

    def placement_inventories(self) -> dict[str, dict[str, Any]]:
        return {rc: inv.to_placement() for rc, inv in self.inventories.items()}


@dataclass(frozen=True)
class SyntheticCloud:
    spec: CloudSpec
    hosts: tuple[HostDef, ...]
    aggregates: tuple[Aggregate, ...] = field(default=())

    @property
    def availability_zones(self) -> tuple[str, ...]:
        return tuple(a.availability_zone for a in self.aggregates if a.availability_zone)

    @property
    def custom_traits(self) -> tuple[str, ...]:
        """Traits Placement does not know until they are created."""
        return tuple(sorted({t for h in self.hosts for t in h.traits if t.startswith('CUSTOM_')}))

    def host(self, name: str) -> HostDef:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def by_uuid(self) -> dict[str, HostDef]:
        return {h.uuid: h for h in self.hosts}


def _zone_count(hosts: int) -> int:
    # One zone per 10 hosts, between 1 and 3: enough zones to make AZ requests
    # meaningful, few enough that each zone keeps hosts of every kind.
    return max(1, min(3, hosts // 10))


def _zone_of(index: int, hosts: int, zones: int) -> int:
    """0-based zone of the 1-based host ``index``: contiguous blocks of near-equal size."""
    return (index - 1) * zones // hosts


#: Aggregates without a zone: (name, metadata, every n-th host is a member).
EXTRA_AGGREGATES: tuple[tuple[str, Mapping[str, str], int], ...] = (
    ('gold', {'tier': 'gold'}, 10),
    ('batch', {'workload': 'batch'}, 7),
)


def generate_cloud(spec: CloudSpec) -> SyntheticCloud:
    rng = random.Random(spec.seed)
    zones = _zone_count(spec.hosts)
    zone_names = [f'az{n + 1}' for n in range(zones)]
    zone_uuids = [simulation_uuid(f'aggregate-{name}') for name in zone_names]
    extras = EXTRA_AGGREGATES
    extra_uuids = [simulation_uuid(f'aggregate-{name}') for name, _, _ in extras]

    disabled_count = (max(1, round(spec.hosts * DISABLED_SHARE))
                      if spec.hosts >= _MIN_HOSTS_FOR_DISABLED else 0)
    disabled = set(rng.sample(range(1, spec.hosts + 1), disabled_count))
    sizes = rng.choices(HOST_SIZES, weights=[s.weight for s in HOST_SIZES], k=spec.hosts)

    hosts: list[HostDef] = []
    members: dict[str, list[str]] = {u: [] for u in zone_uuids + extra_uuids}
    for index in range(1, spec.hosts + 1):
        name = HOST_NAME_FORMAT.format(index)
        traits = []
        if index % 2 == 0:
            traits.append(TRAIT_AVX2)
        if index % 3 == 0:
            traits.append(TRAIT_SSD)
        if index in disabled:
            traits.append(TRAIT_DISABLED)
        zone = _zone_of(index, spec.hosts, zones)
        host_aggregates = [zone_uuids[zone]]
        host_aggregates += [u for u, (_, _, every) in zip(extra_uuids, extras, strict=True)
                            if index % every == 0]
        for agg in host_aggregates:
            members[agg].append(name)
        size = sizes[index - 1]
        hosts.append(HostDef(index=index, name=name, uuid=simulation_uuid(name), size=size.name,
                             inventories=dict(size.inventories), traits=tuple(traits),
                             aggregates=tuple(host_aggregates),
                             availability_zone=zone_names[zone]))

    aggregates = [Aggregate(id=n + 1, uuid=zone_uuids[n], name=zone_names[n],
                            hosts=members[zone_uuids[n]],
                            metadata={AZ_METADATA_KEY: zone_names[n]})
                  for n in range(zones)]
    aggregates += [Aggregate(id=zones + n + 1, uuid=extra_uuids[n], name=name,
                             hosts=members[extra_uuids[n]], metadata=dict(metadata))
                   for n, (name, metadata, _) in enumerate(extras)]
    return SyntheticCloud(spec=spec, hosts=tuple(hosts), aggregates=tuple(aggregates))


def seed_cloud(client: PlacementClient, cloud: SyntheticCloud) -> None:
    """Create the cloud's traits and providers in Placement (``client``: a PlacementClient)."""
    from scheduler.simulate import seed  # I/O helpers; imported here to keep this module pure

    for trait in cloud.custom_traits:
        seed.ensure_trait(client, trait)
    for host in cloud.hosts:
        seed.create_provider(client, name=host.name, uuid=host.uuid,
                             inventories=host.placement_inventories(),
                             traits=host.traits, aggregates=host.aggregates)
