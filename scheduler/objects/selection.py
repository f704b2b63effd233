"""What the scheduler answers: one Selection per chosen or alternate host."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SchedulerLimits:
    numa_topology: dict[str, Any] | None = None  # a NUMATopologyLimits primitive
    vcpu: int | None = None
    disk_gb: int | None = None
    memory_mb: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Nova's ``SchedulerLimits.to_dict``: only the keys that are set."""
        return {k: v for k, v in (('numa_topology', self.numa_topology), ('vcpu', self.vcpu),
                                  ('disk_gb', self.disk_gb), ('memory_mb', self.memory_mb))
                if v is not None}


@dataclass
class Selection:
    compute_node_uuid: str
    service_host: str
    nodename: str
    cell_uuid: str
    # json.dumps() of the allocation request, "null" when nothing was claimed.
    allocation_request: str
    allocation_request_version: str | None
    availability_zone: str | None
    limits: SchedulerLimits = field(default_factory=SchedulerLimits)
