"""Plain data the scheduler decides on, decoded from Nova's RequestSpec primitives.

These are not Nova objects: they hold what the scheduler reads, with Nova's
attribute names so that filters written against Nova's objects keep working.
Decoding (and validation) lives in :mod:`scheduler.objects.codec`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Flavor:
    id: int | None = None
    flavorid: str | None = None
    name: str | None = None
    memory_mb: int = 0
    vcpus: int = 0
    root_gb: int = 0
    ephemeral_gb: int = 0
    swap: int = 0  # MB, as in Nova
    rxtx_factor: float | None = None
    vcpu_weight: int | None = None
    disabled: bool = False
    is_public: bool = True
    description: str | None = None
    extra_specs: dict[str, str] = field(default_factory=dict)


class ImageMetaProps(dict):
    """Image properties (``hw_*``, ``img_*``, ``os_*``, ``traits_required``).

    A dict with attribute access, because Nova's filters read them as
    attributes (``image.properties.hw_architecture``) and use ``get``.
    An unset property reads as ``None`` instead of raising.
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith('__'):
            raise AttributeError(name)
        return self.get(name)

    def obj_attr_is_set(self, name: str) -> bool:
        return name in self


@dataclass
class ImageMeta:
    id: str | None = None
    name: str | None = None
    status: str | None = None
    visibility: str | None = None
    disk_format: str | None = None
    container_format: str | None = None
    min_ram: int = 0
    min_disk: int = 0
    size: int | None = None
    virtual_size: int | None = None
    owner: str | None = None
    properties: ImageMetaProps = field(default_factory=ImageMetaProps)


@dataclass
class InstanceGroup:
    uuid: str | None = None
    id: int | None = None
    name: str | None = None
    user_id: str | None = None
    project_id: str | None = None
    policy: str | None = None
    # Deprecated in Nova but still read by ServerGroupAffinityFilter there;
    # kept so that out-of-tree filters reading it keep working.
    policies: list[str] = field(default_factory=list)
    rules: dict[str, str] = field(default_factory=dict)
    members: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)


@dataclass
class CellMapping:
    uuid: str | None = None
    name: str | None = None
    disabled: bool = False
    # Both carry credentials: never logged, never in a repr.
    transport_url: str | None = field(default=None, repr=False)
    database_connection: str | None = field(default=None, repr=False)


@dataclass
class Destination:
    host: str | None = None
    node: str | None = None
    cell: CellMapping | None = None
    # Each entry is a comma-joined OR-set of aggregate uuids; entries are ANDed.
    aggregates: list[str] | None = None
    forbidden_aggregates: set[str] = field(default_factory=set)
    allow_cross_cell_move: bool = False


@dataclass
class RequestGroup:
    requester_id: str | None = None
    use_same_provider: bool = True
    resources: dict[str, int] = field(default_factory=dict)
    required_traits: set[str] = field(default_factory=set)
    forbidden_traits: set[str] = field(default_factory=set)
    aggregates: list[list[str]] = field(default_factory=list)
    forbidden_aggregates: set[str] = field(default_factory=set)
    in_tree: str | None = None
    provider_uuids: list[str] = field(default_factory=list)


@dataclass
class RequestLevelParams:
    root_required: set[str] = field(default_factory=set)
    root_forbidden: set[str] = field(default_factory=set)
    same_subtree: list[list[str]] = field(default_factory=list)


@dataclass
class RequestSpec:
    flavor: Flavor = field(default_factory=Flavor)
    image: ImageMeta | None = None
    instance_uuid: str | None = None
    num_instances: int = 1
    project_id: str | None = None
    user_id: str | None = None
    availability_zone: str | None = None
    ignore_hosts: list[str] | None = None
    force_hosts: list[str] | None = None
    force_nodes: list[str] | None = None
    requested_destination: Destination | None = None
    instance_group: InstanceGroup | None = None
    scheduler_hints: dict[str, list[Any]] = field(default_factory=dict)
    is_bfv: bool = False
    requested_resources: list[RequestGroup] = field(default_factory=list)
    request_level_params: RequestLevelParams = field(default_factory=RequestLevelParams)
    # Kept as decoded primitives (plain dicts): the core set does not
    # interpret them, the NUMA/PCI filters will.
    numa_topology: dict[str, Any] | None = None
    pci_requests: dict[str, Any] | None = None
    network_metadata: dict[str, Any] | None = None
    requested_networks: list[dict[str, Any]] = field(default_factory=list)

    # Nova-compatible conveniences -------------------------------------------------
    @property
    def vcpus(self) -> int:
        return self.flavor.vcpus

    @property
    def memory_mb(self) -> int:
        return self.flavor.memory_mb

    @property
    def root_gb(self) -> int:
        return self.flavor.root_gb

    @property
    def ephemeral_gb(self) -> int:
        return self.flavor.ephemeral_gb

    @property
    def swap(self) -> int:
        return self.flavor.swap

    @property
    def root_required(self) -> set[str]:
        return self.request_level_params.root_required

    @property
    def root_forbidden(self) -> set[str]:
        return self.request_level_params.root_forbidden

    def get_scheduler_hint(self, name: str, default: Any = None) -> Any:
        """Nova's semantics: a one-element list reads as its element."""
        value = self.scheduler_hints.get(name)
        if value is None:
            return default
        if isinstance(value, list) and len(value) == 1:
            return value[0]
        return value

    @property
    def is_rebuild_check(self) -> bool:
        return self.scheduler_hints.get('_nova_check_type') == ['rebuild']

    def copy(self) -> RequestSpec:
        return dataclasses.replace(self)


@dataclass
class Aggregate:
    id: int
    uuid: str
    name: str
    hosts: list[str] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def availability_zone(self) -> str | None:
        return self.metadata.get('availability_zone')
