"""Placement's answers, parsed once into immutable values."""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ResourceUsage:
    capacity: int   # (total - reserved) * allocation_ratio, as Placement reports it
    used: int

    @property
    def free(self) -> int:
        return self.capacity - self.used


@dataclass(frozen=True)
class ProviderSummary:
    uuid: str
    root_provider_uuid: str
    parent_provider_uuid: str | None
    resources: Mapping[str, ResourceUsage]
    traits: frozenset[str]


@dataclass(frozen=True)
class AllocationRequest:
    """One entry of ``allocation_requests``: what a claim would PUT.

    ``allocations`` maps provider uuid -> resource class -> amount;
    ``mappings`` maps request-group suffix ("" for unsuffixed) -> provider uuids.
    """

    allocations: Mapping[str, Mapping[str, int]]
    mappings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> AllocationRequest:
        allocations = {rp: dict(entry['resources']) for rp, entry in body['allocations'].items()}
        mappings = {k: tuple(v) for k, v in body.get('mappings', {}).items()}
        return cls(allocations=allocations, mappings=mappings)

    def to_json(self) -> dict[str, Any]:
        """Placement's own shape, as sent in a claim and in Selection.allocation_request."""
        body: dict[str, Any] = {
            'allocations': {rp: {'resources': dict(res)} for rp, res in self.allocations.items()}}
        if self.mappings:
            body['mappings'] = {k: list(v) for k, v in self.mappings.items()}
        return body

    def dumps(self) -> str:
        return json.dumps(self.to_json())

    @property
    def provider_uuids(self) -> tuple[str, ...]:
        return tuple(self.allocations)


@dataclass(frozen=True)
class Candidates:
    """The answer of ``GET /allocation_candidates``."""

    allocation_requests: tuple[AllocationRequest, ...]
    provider_summaries: Mapping[str, ProviderSummary]
    microversion: str

    @classmethod
    def from_json(cls, body: Mapping[str, Any], microversion: str) -> Candidates:
        summaries: dict[str, ProviderSummary] = {}
        for rp_uuid, s in body.get('provider_summaries', {}).items():
            summaries[rp_uuid] = ProviderSummary(
                uuid=rp_uuid,
                root_provider_uuid=s.get('root_provider_uuid') or rp_uuid,
                parent_provider_uuid=s.get('parent_provider_uuid'),
                resources={rc: ResourceUsage(int(v['capacity']), int(v['used']))
                           for rc, v in s.get('resources', {}).items()},
                traits=frozenset(s.get('traits', ())),
            )
        reqs = tuple(AllocationRequest.from_json(a) for a in body.get('allocation_requests', ()))
        return cls(allocation_requests=reqs, provider_summaries=summaries,
                   microversion=microversion)


@dataclass(frozen=True)
class ConsumerAllocations:
    """``GET /allocations/{consumer}``: what a consumer holds now."""

    consumer_uuid: str
    allocations: Mapping[str, Mapping[str, int]]
    consumer_generation: int | None
    project_id: str | None = None
    user_id: str | None = None
    consumer_type: str | None = None

    @classmethod
    def from_json(cls, consumer_uuid: str, body: Mapping[str, Any]) -> ConsumerAllocations:
        return cls(
            consumer_uuid=consumer_uuid,
            allocations={rp: dict(e.get('resources', {}))
                         for rp, e in body.get('allocations', {}).items()},
            consumer_generation=body.get('consumer_generation'),
            project_id=body.get('project_id'),
            user_id=body.get('user_id'),
            consumer_type=body.get('consumer_type'),
        )


@dataclass(frozen=True)
class ResourceProvider:
    uuid: str
    name: str
    generation: int
    root_provider_uuid: str
    parent_provider_uuid: str | None
