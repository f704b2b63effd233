"""HostState: one compute host (a root provider tree) as this request sees it.

Resources come from Placement's provider summaries of *this* request
(doc/design.md, D1): capacity and usage per resource class summed over the
host's provider tree. What Placement does not know (service host, cell,
aggregates with metadata, instances, service liveness) comes from the
HostCatalog. Attribute names follow Nova's HostState so that filters and
weighers written for Nova read the same fields.

Note on units: Placement's capacity is ``(total - reserved) * allocation_ratio``,
so ``free_ram_mb`` and friends already include the allocation ratio, and the
``*_allocation_ratio`` attributes are 1.0. Nova's CPUWeigher formula
``vcpus_total * cpu_allocation_ratio - vcpus_used`` therefore gives the same
free-capacity figure Placement enforces.
"""
from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from placement_client.models import AllocationRequest, ProviderSummary
from scheduler.objects.numa import HostNUMATopology
from scheduler.objects.pci import HostPciStats
from scheduler.objects.spec import Aggregate

# Trait that marks a provider tree as a sharing provider, not a compute host.
SHARING_TRAIT = 'MISC_SHARES_VIA_AGGREGATE'


class _WeaklyReferable:
    # Slots leave no room for weak references unless a base class makes it:
    # a host table caches what it derives from a record for as long as the
    # record lives (scheduler.host_table.RecordValues).
    __slots__ = ('__weakref__',)


@dataclass(slots=True)
class HostRecord(_WeaklyReferable):
    """What the HostCatalog knows about one compute node (all optional but names).

    Records are never modified in place (the catalog replaces them), and the
    hosts-file reader shares equal values between records (one ``cpu_info``
    dict for every host of a CPU model): at tens of thousands of hosts that is
    most of a worker's memory. Plugins read them through HostState and must
    not modify them either.
    """

    nodename: str
    service_host: str
    cell_uuid: str
    provider_uuid: str | None = None
    disabled: bool = False
    disabled_reason: str | None = None
    forced_down: bool = False
    last_seen_up: datetime.datetime | None = None
    host_ip: str | None = None
    hypervisor_type: str | None = None
    hypervisor_version: int | None = None
    cpu_info: dict[str, Any] = field(default_factory=dict)
    supported_instances: list[tuple[str, str, str]] = field(default_factory=list)
    #: A source stated the list, even an empty one (a compute that supports no
    #: instance type, e.g. an ironic node without cpu_arch): empty then means
    #: "none", not "not known".
    supported_instances_reported: bool = False
    stats: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    # Cell database or hosts file (doc/host-data.md); None: no source has them.
    numa_topology: HostNUMATopology | None = None
    pci_pools: HostPciStats | None = None


#: The one empty container a :func:`bare_record` holds for everything no source reported
#: (read-only, as every record's values).
_NOTHING: dict[Any, Any] = {}
_NO_INSTANCE_TYPES: list[tuple[str, str, str]] = []


def bare_record(nodename: str, service_host: str, cell_uuid: str,
                provider_uuid: str | None) -> HostRecord:
    """A record that names a node and says nothing else about it, its empty containers
    shared with every other such record. Where the cell databases alone name the
    hosts, every record starts as one: an empty ``stats`` and ``metrics`` dict of each
    record's own (kept where no source filled them: a cell database's row replaces them
    where it has them) were
    6.4 MB of a worker at 50,000 hosts, twice over while a table was built again."""
    return HostRecord(nodename=nodename, service_host=service_host, cell_uuid=cell_uuid,
                      provider_uuid=provider_uuid, cpu_info=_NOTHING,
                      supported_instances=_NO_INSTANCE_TYPES, stats=_NOTHING,
                      metrics=_NOTHING)


class HostData(Protocol):
    """What a request reads of the host catalog.

    The request path (the manager, the host state builders) takes this; the
    catalog's writers (the hosts file, the syncs, Nova's casts) take
    :class:`~scheduler.catalog.HostCatalog` itself, which implements it. It is
    defined here, beside :class:`HostRecord`, and not in :mod:`scheduler.catalog`
    because the host state builders sit below the catalog (which imports this
    module). The records and aggregates returned are shared: read-only.
    """

    def record_for_provider(self, provider_uuid: str, provider_name: str | None) -> HostRecord:
        """The record of the compute node whose root provider this is (a guess
        named after the provider for one no source knows)."""

    def provider_name(self, provider_uuid: str) -> str | None: ...

    def versions(self) -> object:
        """A value that changes whenever anything :meth:`host_rows` returns may have
        changed."""

    def changed_hosts_since(self, version: object) -> set[str] | None:
        """The service hosts whose :meth:`host_rows` may have changed since
        :meth:`versions` returned ``version``; None when more than named hosts may
        have."""

    def host_rows(self, provider_uuids: Sequence[str]
                  ) -> list[tuple[HostRecord, tuple[Aggregate, ...], tuple[str, ...], bool]]:
        """Per root provider, in order: its record, its aggregates, the uuids of its
        instances and whether instance info was ever reported; one consistent view."""

    def find_nodes(self, host: str | None, node: str | None) -> list[HostRecord]:
        """Compute nodes on service ``host`` named ``node`` (None matches any)."""

    def aggregates_for_host(self, service_host: str) -> list[Aggregate]: ...

    def aggregates_with_metadata(self, key: str,
                                 value: str | None = None) -> list[Aggregate]: ...

    def all_aggregates(self) -> list[Aggregate]: ...

    def instances_on_host(self, service_host: str) -> dict[str, dict]: ...

    def has_instance_info(self, service_host: str) -> bool: ...

    def unknown_provider_uuids(self, uuids: Iterable[str]) -> set[str]:
        """The uuids for which no source has a name."""

    def unresolved_providers(self, uuids: Iterable[str]) -> set[str]:
        """The root providers whose service host no source states."""

    def remember_provider_names(self, names: Mapping[str, str]) -> None:
        """Learn provider uuid -> name pairs from Placement: the one thing a request
        writes (a cache of what Placement said, not host data)."""


class HostState:
    """A compute host for one request. Mutated only by :meth:`consume`."""

    def __init__(self, *, uuid: str, record: HostRecord,
                 summaries: Iterable[ProviderSummary],
                 allocation_candidates: list[AllocationRequest],
                 aggregates: list[Aggregate] | None = None,
                 instances: Mapping[str, Any] | None = None,
                 instance_info_known: bool = True,
                 default_availability_zone: str = 'nova'):
        self.uuid = uuid
        self.host = record.service_host
        self.nodename = record.nodename
        self.hypervisor_hostname = record.nodename
        self.cell_uuid = record.cell_uuid
        self.record = record
        self.aggregates: list[Aggregate] = list(aggregates or [])
        self.instances: dict[str, Any] = dict(instances or {})
        # False when the catalog never heard which instances run here (no
        # instance info cast yet): an empty ``instances`` then means "unknown",
        # not "none", and filters that count instances say so.
        self.instance_info_known = instance_info_known
        self.allocation_candidates = list(allocation_candidates)
        self.limits: dict[str, Any] = {}
        self.failed_builds = int(record.stats.get('failed_builds', 0) or 0)
        self.num_io_ops = int(record.stats.get('io_workload', 0) or 0)
        self.num_instances = max(len(self.instances),
                                 int(record.stats.get('num_instances', 0) or 0))
        self.service = {
            'host': record.service_host,
            'disabled': record.disabled,
            'disabled_reason': record.disabled_reason,
            'forced_down': record.forced_down,
            'last_seen_up': record.last_seen_up,
        }
        self.host_ip = record.host_ip
        self.hypervisor_type = record.hypervisor_type
        self.hypervisor_version = record.hypervisor_version
        # An empty container of a record may be every bare record's (bare_record):
        # the host takes one of its own, for a plugin that writes into it.
        self.cpu_info = record.cpu_info or {}
        self.supported_instances = record.supported_instances or []
        self.stats = record.stats or {}
        self.metrics = record.metrics or {}
        self.cpu_allocation_ratio = 1.0
        self.ram_allocation_ratio = 1.0
        self.disk_allocation_ratio = 1.0
        self.numa_topology = record.numa_topology
        self.pci_stats = record.pci_pools
        #: id(allocation request) -> filter name -> what consume() applies when that
        #: candidate is placed (candidate filters: NUMA cells, PCI devices it takes).
        self.candidate_usage: dict[int, dict[str, Callable[[HostState], None]]] = {}
        #: Called with this HostState after consume(); a HostTable keeps its columns in step.
        self.on_consume: Callable[[HostState], None] | None = None
        # Capacity and usage per resource class over the whole tree, and the
        # tree's providers (for consume()).
        self.tree_providers: set[str] = set()
        self.capacity: dict[str, int] = {}
        self.used: dict[str, int] = {}
        self.traits: frozenset[str] = frozenset()
        # Per provider of the tree, for fits(): capacity and (consumed) usage.
        self._provider_capacity: dict[str, dict[str, int]] = {}
        self._provider_used: dict[str, dict[str, int]] = {}
        root_traits: frozenset[str] = frozenset()
        for s in summaries:
            self.tree_providers.add(s.uuid)
            self._provider_capacity[s.uuid] = {rc: u.capacity for rc, u in s.resources.items()}
            self._provider_used[s.uuid] = {rc: u.used for rc, u in s.resources.items()}
            if s.uuid == uuid:
                root_traits = s.traits
            for rc, usage in s.resources.items():
                self.capacity[rc] = self.capacity.get(rc, 0) + usage.capacity
                self.used[rc] = self.used.get(rc, 0) + usage.used
        self.traits = root_traits
        az = next((a.availability_zone for a in self.aggregates if a.availability_zone), None)
        self.availability_zone = az or default_availability_zone

    # Nova-compatible resource views -------------------------------------------------
    def free(self, rc: str) -> int:
        return self.capacity.get(rc, 0) - self.used.get(rc, 0)

    @property
    def total_usable_ram_mb(self) -> int:
        return self.capacity.get('MEMORY_MB', 0)

    @property
    def free_ram_mb(self) -> int:
        return self.free('MEMORY_MB')

    @property
    def total_usable_disk_gb(self) -> int:
        return self.capacity.get('DISK_GB', 0)

    @property
    def disk_mb_used(self) -> int:
        return self.used.get('DISK_GB', 0) * 1024

    @property
    def free_disk_mb(self) -> int:
        return self.free('DISK_GB') * 1024

    @property
    def vcpus_total(self) -> int:
        return self.capacity.get('VCPU', 0) + self.capacity.get('PCPU', 0)

    @property
    def vcpus_used(self) -> int:
        return self.used.get('VCPU', 0) + self.used.get('PCPU', 0)

    @property
    def aggregate_uuids(self) -> set[str]:
        return {a.uuid for a in self.aggregates}

    def fits(self, allocation_request: AllocationRequest) -> bool:
        """Whether the request still fits this tree after what this request consumed.

        Placement proposed every candidate for one instance; once an earlier
        instance of the same request landed here, some no longer fit, and a
        PUT that Placement would refuse is not worth sending. Providers
        outside the tree (sharing providers) are left to the claim.
        """
        for rp, resources in allocation_request.allocations.items():
            capacity = self._provider_capacity.get(rp)
            if capacity is None:
                continue
            used = self._provider_used[rp]
            for rc, amount in resources.items():
                if used.get(rc, 0) + amount > capacity.get(rc, 0):
                    return False
        return True

    def consume(self, allocation_request: AllocationRequest, instance_uuid: str | None) -> None:
        """Account for a placed instance, so the next instance of the same
        request sees this host's new usage and the new member."""
        for rp, resources in allocation_request.allocations.items():
            if rp in self.tree_providers:
                used = self._provider_used[rp]
                for rc, amount in resources.items():
                    self.used[rc] = self.used.get(rc, 0) + amount
                    used[rc] = used.get(rc, 0) + amount
        self.num_instances += 1
        self.num_io_ops += 1
        if instance_uuid:
            self.instances[instance_uuid] = {'uuid': instance_uuid}
        # Nova's consume_from_request also fits the instance into the host's NUMA
        # cells and PCI pools; the candidate filters said what this candidate takes.
        # Other candidates' entries are stale now: the filters record them again.
        usage = self.candidate_usage.get(id(allocation_request), {})
        self.candidate_usage = {}
        for apply_usage in usage.values():
            apply_usage(self)
        if self.on_consume is not None:
            self.on_consume(self)

    def __repr__(self) -> str:
        return (f'HostState({self.host!r}, {self.nodename!r}, ram={self.free_ram_mb}MB, '
                f'disk={self.free("DISK_GB")}GB, vcpus={self.vcpus_total - self.vcpus_used})')
