"""SchedulerManager: one ``select_destinations`` request, end to end.

request filters -> Placement query -> candidates -> host states -> per
instance: filters, weighers, ordering, claim -> alternates -> Selections.
Pure steps live in their own modules; this one sequences them and owns the
I/O (Placement) and the all-or-nothing rule: if any instance cannot be
placed, every allocation this request made is removed before NoValidHost is
raised.
"""
from __future__ import annotations

import copy
import logging
import random
from dataclasses import dataclass

from oslo_config import cfg

from placement_client import exceptions as pexc
from placement_client.client import ALLOCATION_CANDIDATES_MICROVERSION
from placement_client.models import AllocationRequest, Candidates
from scheduler import claims as claims_mod
from scheduler import exceptions as exc
from scheduler import explain
from scheduler.context import RequestContext
from scheduler.filters.handler import apply_filters
from scheduler.host_state import HostState, build_host_states
from scheduler.objects.selection import Selection
from scheduler.objects.spec import RequestSpec
from scheduler.request.filters import run_request_filters
from scheduler.request.translate import build_query
from scheduler.selection import first_fitting, order_hosts, pick_alternates, prefilter_hosts
from scheduler.weights.base import weigh_hosts

LOG = logging.getLogger(__name__)

# Above this many unknown providers one full listing is cheaper than lookups.
_MAX_SINGLE_LOOKUPS = 20


@dataclass
class _Placed:
    instance_uuid: str
    host: HostState
    alloc_req: AllocationRequest | None


class SchedulerManager:
    def __init__(self, conf: cfg.ConfigOpts, *, placement, catalog, filters, weighers,
                 request_filters, cleanups: claims_mod.PendingCleanups | None = None,
                 rng: random.Random | None = None):
        self.conf = conf
        self.placement = placement
        self.catalog = catalog
        self.filters = filters
        self.weighers = weighers
        self.request_filters = request_filters
        self.rng = rng or random.Random()
        self.claimer = claims_mod.Claimer(
            placement, max_attempts=conf.scheduler.claim_max_retries,
            retry_delay=conf.scheduler.claim_retry_delay, rng=self.rng)
        self.cleanups = cleanups or claims_mod.PendingCleanups(
            placement, interval=conf.scheduler.cleanup_retry_interval)

    # ------------------------------------------------------------------ request
    def select_destinations(self, context: RequestContext, spec: RequestSpec,
                            instance_uuids: list[str] | None, *, return_objects: bool = True,
                            return_alternates: bool = False) -> list[list[Selection]]:
        """Choose and claim a host per instance; raise NoValidHost with the reason."""
        if spec.is_rebuild_check:
            raise exc.InvalidInput(reason='rebuild checks (_nova_check_type=rebuild) are not '
                                          'supported by this scheduler release')
        # Request filters and consumption mutate the spec; the caller's stays intact.
        spec = copy.deepcopy(spec)
        claim = instance_uuids is not None
        uuids = list(instance_uuids) if claim else [None] * max(spec.num_instances, 1)
        trace = explain.RequestTrace(num_instances=len(uuids))
        try:
            placed, remaining = self._schedule(context, spec, uuids, claim=claim, trace=trace)
        except exc.NoValidHost as nvh:
            for line in explain.log_lines(trace):
                LOG.info('request %s: %s', context.request_id, line)
            LOG.info('request %s: NoValidHost: %s', context.request_id, nvh.reason)
            raise
        for line in explain.log_lines(trace):
            LOG.debug('request %s: %s', context.request_id, line)
        num_alts = self.conf.scheduler.max_attempts - 1 if (
            return_alternates and return_objects) else 0
        return self._selections(spec, placed, remaining, num_alts)

    def _schedule(self, context: RequestContext, spec: RequestSpec, uuids: list[str | None],
                  *, claim: bool,
                  trace: explain.RequestTrace) -> tuple[list[_Placed], list[HostState]]:
        """Place every instance or raise; returns the placements and the last
        host order (what alternates are chosen from)."""
        try:
            trace.request_filters = run_request_filters(self.request_filters, spec,
                                                        self.catalog, self.conf)
        except exc.RequestFilterFailed as e:
            raise exc.NoValidHost(reason=f'Scheduling failed: {e}') from e
        in_tree, multi_node = self._resolve_destination(context, spec)
        # With several nodes behind the requested host, the right one might not be
        # among the first N candidates (Nova drops the limit too); the hints that
        # have the same effect are handled by the translation.
        limit = None if multi_node else self.conf.scheduler.max_placement_results
        try:
            translated = build_query(spec, limit=limit, in_tree=in_tree)
        except exc.RequestTranslationError as e:
            raise exc.InvalidInput(reason=str(e)) from e
        for warning in translated.warnings:
            LOG.warning('request %s: %s', context.request_id, warning)
        trace.query = translated.query.describe()
        trace.limit = translated.query.limit

        candidates = self._allocation_candidates(context, translated.query, trace)
        trace.candidates = len(candidates.allocation_requests)
        if not candidates.allocation_requests:
            raise exc.NoValidHost(reason=explain.no_candidates_reason(trace))
        self._learn_provider_names(context, candidates)
        hosts = build_host_states(candidates, self.catalog,
                                  default_availability_zone=self.conf.default_availability_zone)
        trace.hosts = len(hosts)
        hosts, trace.prefilter_removed = prefilter_hosts(hosts, spec)

        placed: list[_Placed] = []
        try:
            for index, instance_uuid in enumerate(uuids):
                spec.instance_uuid = instance_uuid
                attempt = trace.new_attempt(index, len(hosts))
                ordered = self._sorted_hosts(spec, hosts, index, attempt)
                # Nova: hosts filtered out for one instance are not reconsidered for the next.
                hosts = ordered
                chosen = self._claim_first(context, spec, ordered, instance_uuid, attempt,
                                           claim=claim)
                if chosen is None:
                    raise exc.NoValidHost(reason=explain.failure_reason(trace))
                placed.append(chosen)
                self._consume(spec, chosen)
        except exc.NoValidHost:
            self._rollback(context, placed if claim else [])
            raise
        except Exception:
            # Any unexpected failure after a claim must not leak allocations.
            self._rollback(context, placed if claim else [])
            raise
        return placed, hosts

    # ------------------------------------------------------------------ stages
    def _allocation_candidates(self, context: RequestContext, query,
                               trace: explain.RequestTrace) -> Candidates:
        try:
            return self.placement.get_allocation_candidates(query, request_id=context.global_id)
        except pexc.PlacementUnavailable as e:
            trace.placement_error = (f'Placement unreachable after {e.attempts} attempts '
                                     f'({_short(e)})')
        except pexc.PlacementAuthError as e:
            trace.placement_error = f'Placement refused the scheduler\'s credentials ({e.status})'
        except pexc.PlacementError as e:
            trace.placement_error = (f'Placement rejected the query ({e.status}): '
                                     f'{_short(e.detail or str(e))}')
        raise exc.NoValidHost(reason=explain.failure_reason(trace))

    def _resolve_destination(self, context: RequestContext,
                             spec: RequestSpec) -> tuple[str | None, bool]:
        """Requested (or forced) host/node -> ``in_tree`` provider; (in_tree, several nodes)."""
        dest = spec.requested_destination
        host = dest.host if dest and dest.host else (spec.force_hosts or [None])[0]
        node = dest.node if dest and dest.node else (spec.force_nodes or [None])[0]
        if not host and not node:
            return None, False
        records = self.catalog.find_nodes(host, node)
        uuids = [r.provider_uuid for r in records if r.provider_uuid]
        if records and len(uuids) == len(records):
            return (uuids[0], False) if len(uuids) == 1 else (None, True)
        # Not in the catalog (or without uuids): a bare Placement names compute
        # node providers after the node, and by default the host is the node.
        name = node or host
        try:
            providers = self.placement.get_resource_providers(name=name,
                                                              request_id=context.global_id)
        except pexc.PlacementError as e:
            raise exc.NoValidHost(reason=f'Placement unreachable while looking up the requested '
                                         f'destination ({_short(e)})') from e
        roots = [p for p in providers if p.uuid == p.root_provider_uuid]
        if not roots and not records:
            raise exc.NoValidHost(reason=f'No such host - host: {host} node: {node} ')
        if len(roots) == 1:
            self.catalog.remember_provider_names({roots[0].uuid: roots[0].name})
            return roots[0].uuid, False
        return None, True

    def _learn_provider_names(self, context: RequestContext, candidates: Candidates) -> None:
        roots = {s.root_provider_uuid for s in candidates.provider_summaries.values()}
        unknown = self.catalog.unknown_provider_uuids(roots)
        if not unknown:
            return
        names: dict[str, str] = {}
        try:
            if len(unknown) > _MAX_SINGLE_LOOKUPS:
                providers = self.placement.get_resource_providers(request_id=context.global_id)
            else:
                providers = [p for root in unknown for p in self.placement.get_resource_providers(
                    in_tree=root, request_id=context.global_id)]
        except pexc.PlacementError as e:
            # Names are cosmetic for unknown hosts (they default to the uuid); a
            # lookup failure must not fail the request.
            LOG.warning('could not look up provider names (%s); using uuids', _short(e))
            return
        names = {p.uuid: p.name for p in providers if p.uuid == p.root_provider_uuid}
        self.catalog.remember_provider_names(names)

    def _sorted_hosts(self, spec: RequestSpec, hosts: list[HostState], index: int,
                      attempt: explain.InstanceAttempt) -> list[HostState]:
        run = apply_filters(self.filters, hosts, spec, instance_index=index)
        for step in run.steps:
            removed = {why: len(names) for why, names in step.removed.items()}
            attempt.filter_steps.append((step.name, step.hosts_in, removed))
        attempt.hosts_after_filters = len(run.hosts)
        if not run.hosts:
            return []
        weighed = weigh_hosts(self.weighers, run.hosts, spec)
        fs = self.conf.filter_scheduler
        return order_hosts(weighed, host_subset_size=fs.host_subset_size,
                           shuffle_best_same_weighed_hosts=fs.shuffle_best_same_weighed_hosts,
                           rng=self.rng)

    def _claim_first(self, context: RequestContext, spec: RequestSpec, ordered: list[HostState],
                     instance_uuid: str | None, attempt: explain.InstanceAttempt,
                     *, claim: bool) -> _Placed | None:
        per_host = self.conf.scheduler.max_claim_candidates_per_host
        project_id = spec.project_id or context.project_id
        user_id = spec.user_id or context.user_id
        for host in ordered:
            fitting = [a for a in host.allocation_candidates if host.fits(a)]
            if not fitting:
                attempt.claim_failures['full after earlier instances of this request'] += 1
                continue
            if not claim:
                attempt.claimed_host = host.host
                return _Placed(instance_uuid, host, fitting[0])
            for alloc_req in fitting[:per_host]:
                try:
                    self.claimer.claim(instance_uuid, alloc_req, project_id=project_id,
                                       user_id=user_id,
                                       microversion=ALLOCATION_CANDIDATES_MICROVERSION,
                                       request_id=context.global_id)
                except claims_mod.ClaimFailed as e:
                    attempt.claim_failures[e.reason] += 1
                    LOG.debug('claim of %s on %s failed: %s', instance_uuid, host.host, e)
                    continue
                except claims_mod.ConsumerInUse as e:
                    raise exc.NoValidHost(reason=str(e)) from e
                except pexc.PlacementUnavailable as e:
                    raise exc.NoValidHost(reason=f'Placement unreachable after {e.attempts} '
                                                 f'attempts while claiming ({_short(e)})') from e
                except pexc.PlacementError as e:
                    attempt.claim_failures[f'Placement error {e.status}'] += 1
                    LOG.warning('claim of %s on %s: %s', instance_uuid, host.host, _short(e))
                    continue
                attempt.claimed_host = host.host
                return _Placed(instance_uuid, host, alloc_req)
        return None

    def _consume(self, spec: RequestSpec, placed: _Placed) -> None:
        if placed.alloc_req is not None:
            placed.host.consume(placed.alloc_req, placed.instance_uuid)
        group = spec.instance_group
        if group is not None and placed.host.host not in group.hosts:
            group.hosts.append(placed.host.host)
        for rg in spec.requested_resources:
            if placed.alloc_req is not None and rg.requester_id in placed.alloc_req.mappings:
                rg.provider_uuids = list(placed.alloc_req.mappings[rg.requester_id])

    def _rollback(self, context: RequestContext, placed: list[_Placed]) -> None:
        consumers = [p.instance_uuid for p in placed if p.instance_uuid]
        if not consumers:
            return
        left = self.cleanups.delete_now_or_later(consumers, request_id=context.global_id)
        LOG.info('request %s: rolled back %d claim(s)%s', context.request_id, len(consumers),
                 f'; {len(left)} left for retry' if left else '')

    # ------------------------------------------------------------------ answer
    def _selections(self, spec: RequestSpec, placed: list[_Placed], ordered: list[HostState],
                    num_alts: int) -> list[list[Selection]]:
        selected = {p.host.uuid for p in placed}
        if num_alts and len(placed) > 1:
            # Nova sorts once more after all consumptions so alternates reflect them.
            attempt = explain.InstanceAttempt(index=len(placed) - 1)
            ordered = self._sorted_hosts(spec, ordered, len(placed) - 1, attempt)
        result = []
        for p in placed:
            # Without a claim (4.3 callers) Nova sends the literal "null".
            selections = [self._selection(p.host, p.alloc_req,
                                          with_request=p.instance_uuid is not None)]
            for alt in pick_alternates(ordered, chosen=p.host, selected=selected,
                                       num_alternates=num_alts):
                # Alternates carry an unclaimed request: the conductor claims it
                # itself if the first host fails to build.
                selections.append(self._selection(alt, first_fitting(alt), with_request=True))
            result.append(selections)
        return result

    @staticmethod
    def _selection(host: HostState, alloc_req: AllocationRequest | None, *,
                   with_request: bool) -> Selection:
        with_request = with_request and alloc_req is not None
        return Selection(
            compute_node_uuid=host.uuid, service_host=host.host, nodename=host.nodename,
            cell_uuid=host.cell_uuid,
            allocation_request=alloc_req.dumps() if with_request else 'null',
            allocation_request_version=(ALLOCATION_CANDIDATES_MICROVERSION
                                        if with_request else None),
            availability_zone=host.availability_zone)


def _short(error: object, limit: int = 200) -> str:
    text = ' '.join(str(error).split())
    return text if len(text) <= limit else text[:limit - 3] + '...'
