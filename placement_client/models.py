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


class Candidates:
    """The answer of ``GET /allocation_candidates``.

    Built from Placement's JSON, it keeps the decoded body and makes
    :class:`AllocationRequest` / :class:`ProviderSummary` objects only when
    asked: at tens of thousands of candidates, building every object up front
    costs more than the whole decision, and the scheduler reads the raw body
    into columns instead (:mod:`scheduler.host_table`). Values are never
    modified after construction.
    """

    __slots__ = ('microversion', '_requests', '_summaries', '_raw_requests', '_raw_summaries')

    def __init__(self, allocation_requests: tuple[AllocationRequest, ...] = (),
                 provider_summaries: Mapping[str, ProviderSummary] | None = None,
                 microversion: str = ''):
        self.microversion = microversion
        self._requests: tuple[AllocationRequest, ...] | None = tuple(allocation_requests)
        self._summaries: Mapping[str, ProviderSummary] | None = dict(provider_summaries or {})
        self._raw_requests: list[Mapping[str, Any]] | None = None
        self._raw_summaries: Mapping[str, Mapping[str, Any]] | None = None

    @classmethod
    def from_json(cls, body: Mapping[str, Any], microversion: str) -> Candidates:
        candidates = cls.__new__(cls)
        candidates.microversion = microversion
        candidates._requests = None
        candidates._summaries = None
        candidates._raw_requests = list(body.get('allocation_requests', ()))
        candidates._raw_summaries = dict(body.get('provider_summaries', {}))
        return candidates

    def __len__(self) -> int:
        """The number of allocation requests."""
        if self._raw_requests is not None:
            return len(self._raw_requests)
        return len(self._requests or ())

    def __repr__(self) -> str:
        return (f'Candidates({len(self)} allocation requests, '
                f'{len(self.raw_summaries())} providers, {self.microversion})')

    @property
    def allocation_requests(self) -> tuple[AllocationRequest, ...]:
        if self._requests is None:
            self._requests = tuple(AllocationRequest.from_json(a)
                                   for a in self._raw_requests or ())
        return self._requests

    @property
    def provider_summaries(self) -> Mapping[str, ProviderSummary]:
        if self._summaries is None:
            self._summaries = {rp: summary_from_json(rp, s)
                               for rp, s in (self._raw_summaries or {}).items()}
        return self._summaries

    def raw_requests(self) -> list[Mapping[str, Any]]:
        """The allocation requests in Placement's JSON shape (for columnar readers)."""
        if self._raw_requests is None:
            self._raw_requests = [a.to_json() for a in self._requests or ()]
        return self._raw_requests

    def raw_summaries(self) -> Mapping[str, Mapping[str, Any]]:
        """The provider summaries in Placement's JSON shape (for columnar readers)."""
        if self._raw_summaries is None:
            self._raw_summaries = {rp: summary_to_json(s)
                                   for rp, s in (self._summaries or {}).items()}
        return self._raw_summaries

    def root_provider_uuids(self) -> set[str]:
        """The root of every provider in the answer."""
        return {s.get('root_provider_uuid') or rp for rp, s in self.raw_summaries().items()}

    def without_trees(self, roots: set[str]) -> Candidates:
        """This answer less every allocation request that touches a provider in the
        trees of ``roots``, and less those trees' summaries."""
        summaries = self.raw_summaries()
        dropped = {rp for rp, s in summaries.items()
                   if (s.get('root_provider_uuid') or rp) in roots}
        return Candidates.from_json(
            {'allocation_requests': [r for r in self.raw_requests()
                                     if dropped.isdisjoint(r.get('allocations', ()))],
             'provider_summaries': {rp: s for rp, s in summaries.items()
                                    if rp not in dropped}},
            self.microversion)

    def merged_with(self, other: Candidates) -> Candidates:
        """This answer's requests, then ``other``'s; on a provider in both, this
        answer's summary wins (Nova's PCPU fallback merge)."""
        return Candidates.from_json(
            {'allocation_requests': self.raw_requests() + other.raw_requests(),
             'provider_summaries': {**other.raw_summaries(), **self.raw_summaries()}},
            self.microversion)


def summary_from_json(rp_uuid: str, s: Mapping[str, Any]) -> ProviderSummary:
    return ProviderSummary(
        uuid=rp_uuid,
        root_provider_uuid=s.get('root_provider_uuid') or rp_uuid,
        parent_provider_uuid=s.get('parent_provider_uuid'),
        resources={rc: ResourceUsage(int(v['capacity']), int(v['used']))
                   for rc, v in s.get('resources', {}).items()},
        traits=frozenset(s.get('traits', ())),
    )


def summary_to_json(s: ProviderSummary) -> dict[str, Any]:
    return {'resources': {rc: {'capacity': u.capacity, 'used': u.used}
                          for rc, u in s.resources.items()},
            'traits': sorted(s.traits),
            'parent_provider_uuid': s.parent_provider_uuid,
            'root_provider_uuid': s.root_provider_uuid}


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
