"""An in-memory Placement for unit tests of the claim loop.

A small, honest model of what the scheduler relies on (Placement 16's behaviour):

* providers with capacity per resource class, traits and aggregates, in trees
  (``parent``) or shared through an aggregate (``MISC_SHARES_VIA_AGGREGATE``);
* consumers with allocations and a generation; a claim replaces the consumer's
  allocations only if its generation matches and every provider has room
  (otherwise ConsumerGenerationConflict / CapacityExceeded, nothing written);
  a claim naming an unknown provider is a 400 that leaves an empty consumer
  at generation 0 behind, as the real one does (the orphan-consumer trap);
* allocation candidates computed from that state, in provider insertion order.

What a real Placement cannot be made to do on demand (be unreachable during
one particular call, answer a generation conflict storm) is scripted per
method with :meth:`FakePlacement.script`. Every call is recorded in ``calls``.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from placement_client import exceptions as pexc
from placement_client.client import ALLOCATION_CANDIDATES_MICROVERSION
from placement_client.models import (
    AllocationRequest,
    Candidates,
    ConsumerAllocations,
    ProviderSummary,
    ResourceProvider,
    ResourceUsage,
)
from placement_client.query import AllocationCandidatesQuery, RequestGroupQuery
from scheduler.host_state import SHARING_TRAIT
from tests.builders import uuid_for

Allocations = Mapping[str, Mapping[str, int]]


@dataclass
class Provider:
    uuid: str
    name: str
    root: str
    parent: str | None
    capacity: dict[str, int]
    traits: frozenset[str] = frozenset()
    aggregates: frozenset[str] = frozenset()
    generation: int = 0


@dataclass
class Consumer:
    allocations: dict[str, dict[str, int]]
    generation: int
    project_id: str | None = None
    user_id: str | None = None


@dataclass(frozen=True)
class Call:
    method: str
    kwargs: dict[str, Any]


@dataclass
class _Rule:
    outcome: BaseException | Callable[[Call], None]
    when: Callable[[Call], bool] | None
    times: int | None


def unavailable(what: str = 'GET /allocation_candidates', attempts: int = 3
                ) -> pexc.PlacementUnavailable:
    """What the real client raises once its retries are spent."""
    return pexc.PlacementUnavailable(
        f'Placement unavailable: {what} failed after {attempts} attempt(s); last error: '
        'ConnectFailure: Unable to establish connection', attempts=attempts)


def provider_conflict() -> pexc.ProviderGenerationConflict:
    return pexc.ProviderGenerationConflict(
        'resource provider generation conflict', status=409,
        code='placement.concurrent_update')


class FakePlacement:
    """Implements the PlacementClient methods the scheduler calls."""

    def __init__(self) -> None:
        self.providers: dict[str, Provider] = {}
        self.consumers: dict[str, Consumer] = {}
        self.calls: list[Call] = []
        self._rules: dict[str, list[_Rule]] = {}

    # ------------------------------------------------------------------ set-up
    def add_provider(self, name: str, capacity: Mapping[str, int], *, parent: str | None = None,
                     uuid: str | None = None, traits: Iterable[str] = (),
                     aggregates: Iterable[str] = ()) -> str:
        rp = uuid or uuid_for(name)
        root = self.providers[parent].root if parent else rp
        self.providers[rp] = Provider(rp, name, root, parent, dict(capacity),
                                      frozenset(traits), frozenset(aggregates))
        return rp

    def add_compute(self, name: str, *, vcpus: int = 16, ram_mb: int = 32768,
                    disk_gb: int = 1000, **kwargs: Any) -> str:
        """A compute node provider named like its host (no children)."""
        return self.add_provider(name, {'VCPU': vcpus, 'MEMORY_MB': ram_mb, 'DISK_GB': disk_gb},
                                 **kwargs)

    def allocate(self, consumer: str, allocations: Allocations, *, project_id: str = 'other',
                 user_id: str = 'other') -> None:
        """Another client's successful claim (a new consumer), checked like any claim."""
        self._write(consumer, allocations, project_id=project_id, user_id=user_id,
                    consumer_generation=None)

    def script(self, method: str, outcome: BaseException | Callable[[Call], None], *,
               when: Callable[[Call], bool] | None = None, times: int | None = 1) -> None:
        """The next ``times`` calls of ``method`` matching ``when`` (None: every call).

        An exception is raised instead of doing anything; a callable runs first
        and the call then goes on as usual (it may change the state, or raise).
        Rules are consulted in the order they were added.
        """
        self._rules.setdefault(method, []).append(_Rule(outcome, when, times))

    def unscript(self) -> None:
        """Forget every scripted outcome: Placement is back to normal."""
        self._rules.clear()

    # ------------------------------------------------------------------ reading state
    def used(self, rp: str) -> dict[str, int]:
        used: dict[str, int] = {}
        for consumer in self.consumers.values():
            for rc, amount in consumer.allocations.get(rp, {}).items():
                used[rc] = used.get(rc, 0) + amount
        return used

    def holdings(self) -> dict[str, dict[str, dict[str, int]]]:
        """consumer -> allocations, for every consumer that holds any."""
        return {c: dict(v.allocations) for c, v in self.consumers.items() if v.allocations}

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def claims(self) -> list[tuple[str, AllocationRequest]]:
        """(consumer, allocation request) of every PUT, in order, whatever its outcome."""
        return [(c.kwargs['consumer_uuid'], c.kwargs['allocation_request'])
                for c in self.calls_to('put_allocations')]

    # ------------------------------------------------------------------ client API
    def get_allocation_candidates(self, query: AllocationCandidatesQuery, *,
                                  request_id: str | None = None) -> Candidates:
        self._enter('get_allocation_candidates', query=query, request_id=request_id)
        return self._candidates(query)

    def get_allocations(self, consumer_uuid: str, *,
                        request_id: str | None = None) -> ConsumerAllocations:
        self._enter('get_allocations', consumer_uuid=consumer_uuid, request_id=request_id)
        consumer = self.consumers.get(consumer_uuid)
        if consumer is None or not consumer.allocations:
            # Placement shows no generation for a consumer without allocations,
            # even for an orphan record at generation 0 (placement/handlers/allocation.py,
            # _serialize_allocations_for_consumer).
            return ConsumerAllocations(consumer_uuid, {}, None)
        return ConsumerAllocations(
            consumer_uuid, {rp: dict(r) for rp, r in consumer.allocations.items()},
            consumer.generation, consumer.project_id, consumer.user_id, 'INSTANCE')

    def put_allocations(self, consumer_uuid: str, allocation_request: AllocationRequest, *,
                        project_id: str, user_id: str, consumer_generation: int | None,
                        microversion: str = ALLOCATION_CANDIDATES_MICROVERSION,
                        consumer_type: str = 'INSTANCE',
                        request_id: str | None = None) -> None:
        self._enter('put_allocations', consumer_uuid=consumer_uuid,
                    allocation_request=allocation_request, project_id=project_id,
                    user_id=user_id, consumer_generation=consumer_generation,
                    microversion=microversion, request_id=request_id)
        self._write(consumer_uuid, allocation_request.allocations, project_id=project_id,
                    user_id=user_id, consumer_generation=consumer_generation)

    def delete_allocations(self, consumer_uuid: str, *, request_id: str | None = None) -> bool:
        self._enter('delete_allocations', consumer_uuid=consumer_uuid, request_id=request_id)
        consumer = self.consumers.pop(consumer_uuid, None)
        if consumer is None or not consumer.allocations:
            return False  # 404
        for rp in consumer.allocations:
            self.providers[rp].generation += 1
        return True

    def get_resource_providers(self, *, name: str | None = None, in_tree: str | None = None,
                               request_id: str | None = None) -> list[ResourceProvider]:
        self._enter('get_resource_providers', name=name, in_tree=in_tree, request_id=request_id)
        tree_root = self.providers[in_tree].root if in_tree in self.providers else None
        return [ResourceProvider(p.uuid, p.name, p.generation, p.root, p.parent)
                for p in self.providers.values()
                if (name is None or p.name == name)
                and (in_tree is None or p.root == tree_root)]

    def get_provider_summaries(self, root_uuid: str, *,
                               request_id: str | None = None) -> dict[str, ProviderSummary]:
        """The tree's summaries from inventories and usages (no candidates asked)."""
        self._enter('get_provider_summaries', root_uuid=root_uuid, request_id=request_id)
        root = self.providers.get(root_uuid)
        return {} if root is None else {
            p.uuid: self._summary(p.uuid) for p in self.providers.values() if p.root == root.root}

    # ------------------------------------------------------------------ internals
    def _summary(self, rp: str) -> ProviderSummary:
        p, used = self.providers[rp], self.used(rp)
        return ProviderSummary(
            uuid=rp, root_provider_uuid=p.root, parent_provider_uuid=p.parent,
            resources={rc: ResourceUsage(cap, used.get(rc, 0)) for rc, cap in p.capacity.items()},
            traits=p.traits)

    def _enter(self, method: str, **kwargs: Any) -> None:
        call = Call(method, kwargs)
        self.calls.append(call)
        for rule in self._rules.get(method, []):
            if rule.times == 0 or (rule.when is not None and not rule.when(call)):
                continue
            if rule.times is not None:
                rule.times -= 1
            if isinstance(rule.outcome, BaseException):
                raise rule.outcome
            rule.outcome(call)
            return

    def _write(self, consumer_uuid: str, allocations: Allocations, *, project_id: str,
               user_id: str, consumer_generation: int | None) -> None:
        current = self.consumers.get(consumer_uuid)
        expected = current.generation if current is not None else None
        if consumer_generation != expected:
            raise pexc.ConsumerGenerationConflict(
                f'consumer generation conflict - expected {expected} but got '
                f'{consumer_generation}', status=409, code='placement.concurrent_update',
                expected=expected, sent=consumer_generation)
        unknown = sorted(rp for rp in allocations if rp not in self.providers)
        if unknown:
            if current is None:
                self.consumers[consumer_uuid] = Consumer({}, 0, project_id, user_id)
            raise pexc.BadRequest(
                f'Allocation for resource provider {unknown[0]} that does not exist',
                status=400, detail=f'resource provider {unknown[0]} does not exist')
        for rp, resources in allocations.items():
            provider = self.providers[rp]
            used = self._used_by_others(rp, consumer_uuid)
            for rc, amount in resources.items():
                if used.get(rc, 0) + amount > provider.capacity.get(rc, 0):
                    raise pexc.CapacityExceeded(
                        f'Unable to allocate inventory: {rc} on {rp} would violate inventory '
                        'constraints', status=409, code='placement.undefined_code',
                        detail=f'{rc} would violate inventory constraints')
        touched = set(allocations) | set(current.allocations if current else ())
        for rp in touched:
            self.providers[rp].generation += 1
        self.consumers[consumer_uuid] = Consumer(
            {rp: dict(r) for rp, r in allocations.items()},
            (expected or 0) + 1, project_id, user_id)

    def _used_by_others(self, rp: str, consumer_uuid: str) -> dict[str, int]:
        used: dict[str, int] = {}
        for uuid, consumer in self.consumers.items():
            if uuid == consumer_uuid:
                continue
            for rc, amount in consumer.allocations.get(rp, {}).items():
                used[rc] = used.get(rc, 0) + amount
        return used

    def _free(self, rp: str) -> dict[str, int]:
        used = self.used(rp)
        return {rc: cap - used.get(rc, 0) for rc, cap in self.providers[rp].capacity.items()}

    def _candidates(self, query: AllocationCandidatesQuery) -> Candidates:
        """Candidates for ``query``, within the model's limits.

        Each granular group is served by one provider; each resource class of
        the unsuffixed group by any one provider of the tree or a sharing
        provider in one of the root's aggregates. Root traits, ``in_tree``,
        ``member_of`` (on the root's aggregates) and each group's traits (on
        the providers serving it) are honoured; ``group_policy``,
        ``same_subtree`` and resourceless groups are not modelled.
        """
        groups = [g for g in query.groups if g.resources]
        requests: list[AllocationRequest] = []
        for root in self.providers.values():
            if root.parent is not None or SHARING_TRAIT in root.traits:
                continue
            if (query.root_required - root.traits) or (query.root_forbidden & root.traits):
                continue
            requests.extend(self._tree_requests(root, groups))
        if query.limit is not None:
            requests = requests[:query.limit]
        involved: set[str] = set()
        for req in requests:
            for rp in req.allocations:
                root = self.providers[rp].root
                involved.update(p.uuid for p in self.providers.values() if p.root == root)
        summaries = {rp: self._summary(rp) for rp in involved}
        return Candidates(tuple(requests), summaries, ALLOCATION_CANDIDATES_MICROVERSION)

    def _tree_requests(self, root: Provider,
                       groups: list[RequestGroupQuery]) -> list[AllocationRequest]:
        tree = [p for p in self.providers.values() if p.root == root.uuid]
        sharing = [p for p in self.providers.values()
                   if SHARING_TRAIT in self.providers[p.root].traits
                   and p.aggregates & root.aggregates]
        slots: list[tuple[RequestGroupQuery, dict[str, int], list[Provider]]] = []
        for group in groups:
            in_tree = self.providers.get(group.in_tree) if group.in_tree else root
            if in_tree is None or in_tree.root != root.uuid:
                return []
            if any(not (agg_set & root.aggregates) for agg_set in group.member_of):
                return []
            if group.forbidden_aggregates & root.aggregates:
                return []
            pool = tree + sharing
            if group.suffix:
                slots.append((group, dict(group.resources),
                              [p for p in pool if set(group.resources) <= set(p.capacity)]))
            else:
                for rc, amount in sorted(group.resources.items()):
                    slots.append((group, {rc: amount}, [p for p in pool if rc in p.capacity]))
        requests = []
        for choice in itertools.product(*(options for _, _, options in slots)):
            if not any(p.root == root.uuid for p in choice):
                continue
            allocations: dict[str, dict[str, int]] = {}
            mappings: dict[str, list[str]] = {}
            providers_of: dict[str, set[str]] = {}
            for (group, resources, _), provider in zip(slots, choice, strict=True):
                per_rp = allocations.setdefault(provider.uuid, {})
                for rc, amount in resources.items():
                    per_rp[rc] = per_rp.get(rc, 0) + amount
                served = mappings.setdefault(group.suffix, [])
                if provider.uuid not in served:
                    served.append(provider.uuid)
                providers_of.setdefault(group.suffix, set()).update(provider.traits)
            if not all(g.required_traits <= providers_of.get(g.suffix, set())
                       and not (g.forbidden_traits & providers_of.get(g.suffix, set()))
                       for g, _, _ in slots):
                continue
            if not all(self._free(rp).get(rc, 0) >= amount
                       for rp, res in allocations.items() for rc, amount in res.items()):
                continue
            request = AllocationRequest(allocations,
                                        {k: tuple(v) for k, v in mappings.items()})
            if request not in requests:
                requests.append(request)
        return requests
