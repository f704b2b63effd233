"""SchedulerManager: one ``select_destinations`` request, end to end.

request filters -> Placement query -> candidates -> host states -> per
instance: filters, weighers, ordering, claim -> alternates -> Selections.
Pure steps live in their own modules; this one sequences them and owns the
I/O (Placement) and the all-or-nothing rule: if any instance cannot be
placed, every claim this request made is undone before NoValidHost is
raised (a created consumer is deleted, a moved one gets its previous
allocations back).

A rebuild check (``_nova_check_type == ['rebuild']``) asks Placement for no
candidates and claims nothing, as in Nova: the instance keeps the
allocations it holds on its own host, and a host that is full because of
that very instance must still pass. Its host state is read from the forced
host's provider tree (inventories, usages, traits) instead, the way Nova
reads its compute node row.
"""
from __future__ import annotations

import copy
import logging
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar, overload

from oslo_config import cfg

from placement_client import exceptions as pexc
from placement_client.api import PlacementAPI
from placement_client.client import ALLOCATION_CANDIDATES_MICROVERSION
from placement_client.models import AllocationRequest, Candidates, ConsumerAllocations
from placement_client.query import AllocationCandidatesQuery
from scheduler import claims as claims_mod
from scheduler import exceptions as exc
from scheduler import explain, group_claims, metrics
from scheduler.candidate_reuse import CandidateReuse
from scheduler.catalog.resolver import UNRESOLVED_REASON, HostResolver
from scheduler.context import RequestContext
from scheduler.exceptions import FilterError, WeigherError
from scheduler.explain import InstanceAttempt, RequestTrace
from scheduler.filters.base import BaseHostFilter
from scheduler.filters.handler import apply_filters
from scheduler.host_state import HostData, HostState, build_host_states
from scheduler.host_table import HostTable
from scheduler.memory import DeferredRelease, paused_gc
from scheduler.objects.selection import SchedulerLimits, Selection
from scheduler.objects.spec import RequestSpec
from scheduler.request.filters import AggregateSource, RequestFilter, run_request_filters
from scheduler.request.node_details import uses_compute_node_details
from scheduler.request.translate import build_query, fallback_query_needed
from scheduler.selection import first_fitting, order_hosts, pick_alternates, prefilter_hosts
from scheduler.weights.base import BaseHostWeigher, Exclusion, weigh_hosts

LOG = logging.getLogger(__name__)
T = TypeVar('T')

# Above this many unknown providers one full listing is cheaper than lookups.
_MAX_SINGLE_LOOKUPS = 20
# The most forced/requested host and node names a rebuild check may name: each
# costs Placement lookups, and Nova's conductor sends one of each.
_MAX_REBUILD_NAMES = 10

NOVA_CHECK_TYPE = '_nova_check_type'


@dataclass
class _Placed:
    instance_uuid: str | None
    host: HostState
    alloc_req: AllocationRequest | None
    #: the claim made for the instance; None when nothing was claimed
    claim: claims_mod.Claim | None = None


class SchedulerManager:
    def __init__(self, conf: cfg.ConfigOpts, *, placement: PlacementAPI, catalog: HostData,
                 filters: Sequence[BaseHostFilter], weighers: Sequence[BaseHostWeigher],
                 request_filters: Sequence[RequestFilter],
                 cleanups: claims_mod.PendingCleanups | None = None,
                 release: DeferredRelease | None = None,
                 rng: random.Random | None = None,
                 resolver: HostResolver | None = None,
                 request_filter_sources: AggregateSource | None = None,
                 refresh_service_states: Callable[[], None] | None = None,
                 refresh_compute_nodes: Callable[[Iterable[str]], None] | None = None):
        self.conf = conf
        self.placement = placement
        self.catalog = catalog
        self.filters = filters
        self.weighers = weighers
        self.request_filters = request_filters
        # What request filters read: the catalog, or it and Neutron (routed networks).
        self.request_filter_sources = request_filter_sources or catalog
        # Compute services' state as fresh as [nova] service_state_max_age asks, read
        # before hosts are built (Nova reads its services table per request).
        self.refresh_service_states = refresh_service_states or (lambda: None)
        # Candidates' NUMA topologies and PCI pools as fresh as [cell_database] max_age
        # asks, for the requests that use them (Nova reads them per request).
        self.refresh_compute_nodes = refresh_compute_nodes or (lambda uuids: None)
        # Without one (tests, explain): provider names stand in for unknown hosts.
        self.resolver = resolver or HostResolver(catalog.unresolved_providers, (),
                                                 exclude_unresolved=False)
        self.rng = rng or random.Random()
        self.claimer = claims_mod.Claimer(
            placement, max_attempts=conf.scheduler.claim_max_retries,
            retry_delay=conf.scheduler.claim_retry_delay, rng=self.rng)
        self.cleanups = cleanups or claims_mod.PendingCleanups(
            placement, interval=conf.scheduler.cleanup_retry_interval)
        # A request's Placement answer and host table are freed after its reply.
        self.release = release or DeferredRelease()
        self.reuse = CandidateReuse(conf.scheduler.candidates_reuse_window)
        # Placement knows nothing of server groups: concurrent requests of one
        # anti-affinity group are arbitrated after the claim (doc/reliability.md).
        self.group_check = group_claims.GroupClaimCheck(placement, self.cleanups)

    # ------------------------------------------------------------------ request
    @overload
    def select_destinations(self, context: RequestContext, spec: RequestSpec,
                            instance_uuids: list[str] | None, *, return_objects: bool = ...,
                            return_alternates: bool = ...,
                            finish: None = ...) -> list[list[Selection]]: ...

    @overload
    def select_destinations(self, context: RequestContext, spec: RequestSpec,
                            instance_uuids: list[str] | None, *, return_objects: bool = ...,
                            return_alternates: bool = ...,
                            finish: Callable[[list[list[Selection]]], T]) -> T: ...

    def select_destinations(self, context: RequestContext, spec: RequestSpec,
                            instance_uuids: list[str] | None, *, return_objects: bool = True,
                            return_alternates: bool = False,
                            finish: Callable[[list[list[Selection]]], T] | None = None
                            ) -> T | list[list[Selection]]:
        """Choose and claim a host per instance; raise NoValidHost with the reason.

        Without ``instance_uuids`` (RPC 4.0-4.3 callers) and for a rebuild
        check nothing is claimed and every Selection carries ``"null"``.
        ``finish`` turns the Selections into the answer (the RPC endpoint
        encodes them); it runs before the claims are final, so an answer that
        cannot be built undoes them too.
        """
        # No reference cycles are made while a request is served (its objects are
        # freed by reference counting, after the reply: self.release), so the
        # collector is paused for the whole of it: otherwise it walks the decoded
        # Placement answer again and again as it is built (a quarter of a
        # request's own time at 1,000 candidates, measured with py-spy;
        # doc/performance.md).
        with paused_gc():
            return self._select_destinations(context, spec, instance_uuids,
                                             return_objects=return_objects,
                                             return_alternates=return_alternates,
                                             finish=finish)

    def _select_destinations(self, context: RequestContext, spec: RequestSpec,
                             instance_uuids: list[str] | None, *, return_objects: bool,
                             return_alternates: bool,
                             finish: Callable[[list[list[Selection]]], T] | None
                             ) -> T | list[list[Selection]]:
        # Request filters and consumption mutate the spec; the caller's stays intact.
        spec = copy.deepcopy(spec)
        given = instance_uuids is not None
        uuids: list[str | None] = (list(instance_uuids) if instance_uuids is not None
                                   else [None] * max(spec.num_instances, 1))
        trace = RequestTrace(num_instances=len(uuids))
        try:
            return self._decide_and_answer(context, spec, uuids, given, trace,
                                           return_objects=return_objects,
                                           return_alternates=return_alternates, finish=finish)
        finally:
            # The trace holds this request's host table (the weighed hosts) and
            # through it Placement's answer: freed once the reply is on its way
            # (scheduler/memory/release.py).
            self.release.later(trace)

    def _decide_and_answer(self, context: RequestContext, spec: RequestSpec,
                           uuids: list[str | None], given: bool, trace: RequestTrace,
                           *, return_objects: bool, return_alternates: bool,
                           finish: Callable[[list[list[Selection]]], T] | None
                           ) -> T | list[list[Selection]]:
        try:
            if spec.is_rebuild_check:
                placed, remaining = self._rebuild_check(context, spec, uuids, trace=trace)
            else:
                placed, remaining = self._schedule(context, spec, uuids, claim=given,
                                                   trace=trace)
        except exc.NoValidHost as nvh:
            for line in explain.log_lines(trace):
                LOG.info('request %s: %s', context.request_id, line)
            LOG.info('request %s: NoValidHost: %s', context.request_id, nvh.reason)
            raise
        except (FilterError, WeigherError) as e:
            raise _plugin_failure(e) from e
        for line in explain.log_lines(trace):
            LOG.debug('request %s: %s', context.request_id, line)
        num_alts = self.conf.scheduler.max_attempts - 1 if (
            return_alternates and return_objects) else 0
        try:
            selections = self._selections(spec, placed, remaining, num_alts)
            answer = finish(selections) if finish is not None else selections
            self.reuse.claimed(p.claim.allocations for p in placed
                               if p.claim is not None and not p.claim.is_move)
            return answer
        except Exception as e:
            # Choosing alternates runs the filters and weighers once more, and the
            # answer still has to be encoded: if either fails, the claims already
            # made must not leak.
            self._rollback(context, placed)
            if isinstance(e, (FilterError, WeigherError)):
                raise _plugin_failure(e) from e
            raise

    def _schedule(self, context: RequestContext, spec: RequestSpec, uuids: list[str | None],
                  *, claim: bool,
                  trace: RequestTrace) -> tuple[list[_Placed], Sequence[HostState]]:
        """Place every instance or raise; returns the placements and the last
        host order (what alternates are chosen from)."""
        try:
            with metrics.stage('request_filters'):
                trace.request_filters = run_request_filters(self.request_filters, spec,
                                                            self.request_filter_sources,
                                                            self.conf)
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
        trace.query_for_users = translated.query.describe(
            redact=not self.conf.scheduler.explain_host_names)
        trace.limit = translated.query.limit

        with metrics.stage('placement_query'):
            # A move holds allocations the answer does not know about: ask afresh.
            candidates = self._allocation_candidates(
                context, translated.query, trace,
                reuse=claim and spec.requested_destination is None and not spec.ignore_hosts)
            if fallback_query_needed(translated, self.conf):
                candidates = self._with_fallback(context, spec, candidates, limit=limit,
                                                 in_tree=in_tree, trace=trace)
        trace.candidates = len(candidates)
        metrics.CANDIDATES.observe(trace.candidates)
        if not trace.candidates:
            raise exc.NoValidHost(reason=self._failure_reason(trace))
        self.refresh_service_states()
        roots = candidates.root_provider_uuids()
        self._learn_provider_names(context, roots)
        unresolved = self.resolver.resolve(roots)
        if unresolved:
            candidates = candidates.without_trees(unresolved)
            if not len(candidates):
                trace.prefilter_removed = {UNRESOLVED_REASON: len(unresolved)}
                raise exc.NoValidHost(reason=self._failure_reason(trace))
        if uses_compute_node_details(spec):
            self.refresh_compute_nodes(roots - unresolved)
        hosts = self._host_states(candidates)
        trace.hosts = len(hosts)
        hosts, trace.prefilter_removed = prefilter_hosts(hosts, spec)
        if unresolved:
            trace.prefilter_removed = {UNRESOLVED_REASON: len(unresolved),
                                       **trace.prefilter_removed}

        return self._place_each(context, spec, uuids, hosts, trace=trace, claim=claim)

    def _host_states(self, candidates: Candidates) -> Sequence[HostState]:
        az = self.conf.default_availability_zone
        with metrics.stage('host_states'):
            if self.conf.scheduler.columnar_host_states:
                return HostTable(candidates, self.catalog, default_availability_zone=az).view()
            return build_host_states(candidates, self.catalog, default_availability_zone=az)

    def _rebuild_check(self, context: RequestContext, spec: RequestSpec,
                       uuids: list[str | None],
                       *, trace: RequestTrace) -> tuple[list[_Placed], Sequence[HostState]]:
        """Nova's rebuild check: may the instance stay on its (forced) host?

        No request filters, no candidates, no claim; only the filters with
        RUN_ON_REBUILD run (Nova runs them because ``_nova_check_type`` is set,
        although the host is forced).
        """
        trace.query = 'none: a rebuild check asks Placement for no candidates'
        self.refresh_service_states()
        hosts = self._rebuild_host_states(context, spec)
        trace.hosts = len(hosts)
        hosts, trace.prefilter_removed = prefilter_hosts(hosts, spec)
        return self._place_each(context, spec, uuids, hosts, trace=trace, claim=False,
                                rebuild=True)

    def _place_each(self, context: RequestContext, spec: RequestSpec, uuids: list[str | None],
                    hosts: Sequence[HostState], *, trace: RequestTrace, claim: bool,
                    rebuild: bool = False) -> tuple[list[_Placed], Sequence[HostState]]:
        placed: list[_Placed] = []
        try:
            for index, instance_uuid in enumerate(uuids):
                spec.instance_uuid = instance_uuid
                attempt = trace.new_attempt(index, len(hosts))
                ordered = self._sorted_hosts(spec, hosts, index, attempt, rebuild=rebuild)
                # Nova: hosts filtered out for one instance are not reconsidered for the next.
                hosts = ordered
                if rebuild:
                    # Nothing to claim or fit: the instance already holds its resources.
                    chosen = _Placed(instance_uuid, ordered[0], None) if ordered else None
                    attempt.claimed_host = chosen.host.host if chosen else None
                else:
                    chosen = self._claim_first(context, spec, ordered, instance_uuid, attempt,
                                               claim=claim)
                if chosen is None:
                    raise exc.NoValidHost(reason=self._failure_reason(trace))
                placed.append(chosen)
                self._consume(spec, chosen)
        except Exception:
            # NoValidHost or anything unexpected after a claim: no claim may leak.
            self._rollback(context, placed)
            raise
        return placed, hosts

    def explain(self, context: RequestContext, spec: RequestSpec, *,
                top: int = explain.DEFAULT_TOP) -> explain.ExplainReport:
        """The whole decision for ``spec`` as a dry run: nothing is claimed or written.

        The same stages as :meth:`select_destinations` without instance uuids
        (which claims nothing either), recorded in full: hosts per reason, the
        weighed top ``top`` hosts with each weigher's share, the chosen host and
        its alternates. A request that would fail gives a report with the
        reason instead of raising; InvalidInput (a request that cannot be
        translated) is raised as for a real call.
        """
        spec = copy.deepcopy(spec)
        uuids: list[str | None] = [None] * max(spec.num_instances, 1)
        trace = RequestTrace(num_instances=len(uuids))
        selections: list[list[Selection]] = []
        error: Exception | None = None
        try:
            if spec.is_rebuild_check:
                placed, remaining = self._rebuild_check(context, spec, uuids, trace=trace)
            else:
                placed, remaining = self._schedule(context, spec, uuids, claim=False,
                                                   trace=trace)
            selections = self._selections(spec, placed, remaining,
                                          self.conf.scheduler.max_attempts - 1)
        except exc.NoValidHost as nvh:
            error = nvh
        except (FilterError, WeigherError) as e:
            error = _plugin_failure(e)
        return explain.build_report(trace, selections=selections, error=error, top=top)

    def _failure_reason(self, trace: RequestTrace) -> str:
        if self.conf.scheduler.no_valid_host_reason == 'nova':
            return explain.nova_failure_reason(trace)
        return explain.failure_reason(trace,
                                      host_names=self.conf.scheduler.explain_host_names)

    # ------------------------------------------------------------------ stages
    def _allocation_candidates(self, context: RequestContext, query: AllocationCandidatesQuery,
                               trace: RequestTrace, *, reuse: bool = False) -> Candidates:
        key = query.describe()
        if reuse and self.reuse.enabled:
            cached = self.reuse.get(key)
            if cached is not None:
                trace.query = f'{trace.query} (answer reused)'
                return cached
        try:
            candidates = self.placement.get_allocation_candidates(
                query, request_id=context.global_id)
            if reuse and self.reuse.enabled:
                self.reuse.put(key, candidates)
            return candidates
        except pexc.PlacementError as e:
            _log_placement_failure(context, 'GET /allocation_candidates', e)
            if isinstance(e, pexc.PlacementUnavailable):
                trace.placement_error = (f'Placement unreachable after {e.attempts} attempts '
                                         f'({_placement_failure(e)})')
            elif isinstance(e, pexc.PlacementAuthError):
                trace.placement_error = (f'Placement refused the scheduler\'s credentials '
                                         f'({e.status})')
            else:
                # Placement's words on a rejected query are about what was asked (an
                # unknown trait or resource class); the uuids in them are masked.
                detail = _UUID_RE.sub('<uuid>', _short(e.detail or ''))
                trace.placement_error = (
                    f'Placement rejected the query ({_placement_failure(e)})'
                    + (f': {detail}' if detail else ''))
        raise exc.NoValidHost(reason=self._failure_reason(trace))

    def _resolve_destination(self, context: RequestContext,
                             spec: RequestSpec) -> tuple[str | None, bool]:
        """Requested (or forced) host/node -> ``in_tree`` provider; (in_tree, several nodes)."""
        dest = spec.requested_destination
        host = dest.host if dest and dest.host else (
            spec.force_hosts[0] if spec.force_hosts else None)
        node = dest.node if dest and dest.node else (
            spec.force_nodes[0] if spec.force_nodes else None)
        if not host and not node:
            return None, False
        roots = self._find_roots(context, host, node)
        if not roots:
            if not self.catalog.find_nodes(host, node):
                raise exc.NoValidHost(reason=f'No such host - host: {host} node: {node} ')
            # Known to the catalog under names Placement does not use: let the
            # candidates and the host restrictions decide.
            return None, True
        return (next(iter(roots)), False) if len(roots) == 1 else (None, True)

    def _find_roots(self, context: RequestContext, host: str | None,
                    node: str | None) -> dict[str, str]:
        """Root provider uuid -> name of the compute nodes on ``host`` named ``node``.

        The catalog knows them by uuid; otherwise a bare Placement names compute
        node providers after the node, and by default the host is the node.
        """
        records = self.catalog.find_nodes(host, node)
        found = {r.provider_uuid: r.nodename for r in records if r.provider_uuid}
        names: list[str | None] = [r.nodename for r in records if not r.provider_uuid]
        if not records:
            names = [node or host]
        learnt: dict[str, str] = {}
        for name in names:
            try:
                providers = self.placement.get_resource_providers(
                    name=name, request_id=context.global_id)
            except pexc.PlacementError as e:
                _log_placement_failure(context, 'requested destination look-up', e)
                raise exc.NoValidHost(reason=f'Placement unreachable while looking up the '
                                             f'requested destination '
                                             f'({_placement_failure(e)})') from e
            learnt.update({p.uuid: p.name for p in providers if p.uuid == p.root_provider_uuid})
        if learnt:
            self.catalog.remember_provider_names(learnt)
        return {**found, **learnt}

    def _rebuild_host_states(self, context: RequestContext,
                             spec: RequestSpec) -> Sequence[HostState]:
        """Host states of the hosts a rebuild check names, without candidates."""
        dest = spec.requested_destination
        hosts = list(spec.force_hosts or ()) or ([dest.host] if dest and dest.host else [])
        nodes = list(spec.force_nodes or ()) or ([dest.node] if dest and dest.node else [])
        if not hosts and not nodes:
            # Nova would judge every compute node; its conductor always forces the
            # instance's own host, and no other question has a useful answer.
            raise exc.InvalidInput(reason='a rebuild check must name the instance\'s host '
                                          '(force_hosts/force_nodes or requested_destination)')
        if max(len(hosts), 1) * max(len(nodes), 1) > _MAX_REBUILD_NAMES:
            raise exc.InvalidInput(reason=f'a rebuild check may name at most '
                                          f'{_MAX_REBUILD_NAMES} host/node combinations')
        roots: dict[str, str] = {}
        # None: any host (node), when only nodes (hosts) are named.
        anything: list[str | None] = [None]
        for host in hosts or anything:
            for node in nodes or anything:
                roots.update(self._find_roots(context, host, node))
        if not roots:
            raise exc.NoValidHost(reason=f'No such host - host: {",".join(hosts) or None} '
                                         f'node: {",".join(nodes) or None} ')
        if uses_compute_node_details(spec):
            self.refresh_compute_nodes(roots)
        states = []
        for root, name in sorted(roots.items(), key=lambda kv: kv[1]):
            try:
                summaries = self.placement.get_provider_summaries(root,
                                                                  request_id=context.global_id)
            except pexc.PlacementError as e:
                _log_placement_failure(context, 'rebuild host read', e)
                raise exc.NoValidHost(reason=f'Placement unreachable while reading the rebuild '
                                             f'host ({_placement_failure(e)})') from e
            record = self.catalog.record_for_provider(root, name)
            states.append(HostState(
                uuid=root, record=record, summaries=summaries.values(),
                allocation_candidates=[],
                aggregates=self.catalog.aggregates_for_host(record.service_host),
                instances=self.catalog.instances_on_host(record.service_host),
                default_availability_zone=self.conf.default_availability_zone))
        return states

    def _learn_provider_names(self, context: RequestContext, roots: set[str]) -> None:
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

    def _sorted_hosts(self, spec: RequestSpec, hosts: Sequence[HostState], index: int,
                      attempt: InstanceAttempt, *,
                      rebuild: bool = False) -> Sequence[HostState]:
        if hosts and forcing_skips_filters(spec):
            # Nova: an operator who forces a host (az:host[:node]) gets it unfiltered.
            LOG.debug('host forced without %s: filters skipped for %d host(s)',
                      NOVA_CHECK_TYPE, len(hosts))
            passed: Sequence[HostState] = list(hosts)
            attempt.filters_skipped = True
        else:
            with metrics.stage('filtering'):
                run = apply_filters(self.filters, hosts, spec, instance_index=index,
                                    rebuild=rebuild)
            for step in run.steps:
                removed = {why: len(names) for why, names in step.removed.items()}
                attempt.filter_steps.append((step.name, step.hosts_in, removed))
            attempt.steps = run.steps
            passed = run.hosts
        attempt.hosts_after_filters = len(passed)
        if not passed:
            return []
        excluded: list[Exclusion] = []
        with metrics.stage('weighing'):
            weighed = weigh_hosts(self.weighers, passed, spec, excluded=excluded)
        attempt.weighed, attempt.exclusions = weighed, excluded
        if excluded:
            # A host a weigher cannot weigh is reported like a filtered one.
            attempt.filter_steps.extend(_exclusion_steps(excluded, len(passed)))
            attempt.hosts_after_filters = len(weighed)
        fs = self.conf.filter_scheduler
        return order_hosts(weighed, host_subset_size=fs.host_subset_size,
                           shuffle_best_same_weighed_hosts=fs.shuffle_best_same_weighed_hosts,
                           rng=self.rng)

    def _claim_first(self, context: RequestContext, spec: RequestSpec, ordered: Sequence[HostState],
                     instance_uuid: str | None, attempt: InstanceAttempt,
                     *, claim: bool) -> _Placed | None:
        per_host = self.conf.scheduler.max_claim_candidates_per_host
        project_id = spec.project_id or context.project_id
        user_id = spec.user_id or context.user_id
        # What the claims learnt about the consumer (e.g. that it holds
        # allocations: a move), so that the next candidate starts from it.
        known: ConsumerAllocations | None = None
        for host in ordered:
            fitting = [a for a in host.allocation_candidates if host.fits(a)]
            if not fitting:
                attempt.claim_failures['full after earlier instances of this request'] += 1
                continue
            if not claim:
                attempt.claimed_host = host.host
                return _Placed(instance_uuid, host, fitting[0])
            # Claims are made only for the instance uuids the caller gave.
            assert instance_uuid is not None
            for alloc_req in fitting[:per_host]:
                try:
                    made = self.claimer.claim(instance_uuid, alloc_req, project_id=project_id,
                                              user_id=user_id,
                                              microversion=ALLOCATION_CANDIDATES_MICROVERSION,
                                              request_id=context.global_id, known=known)
                except claims_mod.ClaimFailed as e:
                    known = e.known
                    attempt.claim_failures[e.reason] += 1
                    LOG.debug('claim of %s on %s failed: %s', instance_uuid, host.host, e)
                    continue
                except pexc.PlacementUnavailable as e:
                    self._forget_lost_claim(context, instance_uuid, alloc_req, known,
                                            project_id=project_id, user_id=user_id)
                    _log_placement_failure(context, 'claim', e)
                    raise exc.NoValidHost(reason=f'Placement unreachable after {e.attempts} '
                                                 f'attempts while claiming '
                                                 f'({_placement_failure(e)})') from e
                except pexc.PlacementError as e:
                    attempt.claim_failures[f'Placement error {e.status}'] += 1
                    LOG.warning('claim of %s on %s: %s', instance_uuid, host.host, _short(e))
                    continue
                try:
                    self.group_check.after_claim(spec, made, host=host.host,
                                                 providers=host.tree_providers,
                                                 request_id=context.global_id)
                except group_claims.GroupRaceLost as e:
                    attempt.claim_failures[e.reason] += 1
                    known = None  # the undo changed the consumer; the next claim re-learns it
                    break  # a sibling of the group holds this host: try the next host
                except group_claims.GroupCheckFailed as e:
                    LOG.warning('request %s: %s', context.request_id, e)
                    raise exc.NoValidHost(reason=group_claims.CHECK_FAILED_REASON) from e
                attempt.claimed_host = host.host
                return _Placed(instance_uuid, host, alloc_req, made)
        return None

    def _forget_lost_claim(self, context: RequestContext, instance_uuid: str,
                           alloc_req: AllocationRequest, known: ConsumerAllocations | None, *,
                           project_id: str | None, user_id: str | None) -> None:
        """Placement went away during a claim: the PUT may have landed anyway.

        For a consumer this request would have created, queue a cleanup that
        deletes it only if it holds exactly what we sent (so nothing someone
        else wrote is touched). A move's claim cannot be told from the
        consumer's own allocations this way; it is logged for the operator.
        """
        if known is not None and known.allocations:
            LOG.warning('Placement went away while claiming the move of %s; if that claim '
                        'landed, the instance holds source and destination allocations',
                        instance_uuid)
            return
        maybe = claims_mod.Claim(consumer_uuid=instance_uuid,
                                 allocations={rp: dict(r) for rp, r in
                                              alloc_req.allocations.items()},
                                 generation=0, project_id=project_id, user_id=user_id)
        self.cleanups.undo_now_or_later([maybe], request_id=context.global_id, verify=True)

    def _with_fallback(self, context: RequestContext, spec: RequestSpec, candidates: Candidates,
                       *, limit: int | None, in_tree: str | None,
                       trace: RequestTrace) -> Candidates:
        """Nova's PCPU fallback: also ask with VCPU, for computes that still report
        pinned CPUs as VCPU, and merge the answers (pinned candidates first)."""
        fallback = build_query(spec, limit=limit, in_tree=in_tree, pinning_translate=False)
        trace.query = f'{trace.query} (then {fallback.query.describe()})'
        redact = not self.conf.scheduler.explain_host_names
        trace.query_for_users = (f'{trace.query_for_users} '
                                 f'(then {fallback.query.describe(redact=redact)})')
        try:
            extra = self.placement.get_allocation_candidates(fallback.query,
                                                             request_id=context.global_id)
        except pexc.PlacementError as e:
            # Nova keeps the first answer when the fallback call fails; so do we.
            LOG.warning('request %s: PCPU fallback query failed (%s); using the PCPU '
                        'candidates only', context.request_id, _short(e))
            return candidates
        return candidates.merged_with(extra)

    def _consume(self, spec: RequestSpec, placed: _Placed) -> None:
        if placed.alloc_req is not None:
            placed.host.consume(placed.alloc_req, placed.instance_uuid)
        group = spec.instance_group
        if group is not None and placed.host.host not in group.hosts:
            group.hosts.append(placed.host.host)
        mappings = placed.alloc_req.mappings if placed.alloc_req is not None else {}
        for rg in spec.requested_resources:
            if rg.requester_id is not None and rg.requester_id in mappings:
                rg.provider_uuids = list(mappings[rg.requester_id])

    def _rollback(self, context: RequestContext, placed: list[_Placed]) -> None:
        made = [p.claim for p in placed if p.claim is not None]
        if not made:
            return
        left = self.cleanups.undo_now_or_later(made, request_id=context.global_id)
        moves = sum(1 for c in made if c.is_move)
        LOG.info('request %s: rolled back %d claim(s)%s%s', context.request_id, len(made),
                 f' ({moves} restored to their previous allocations)' if moves else '',
                 f'; {len(left)} left for retry' if left else '')

    # ------------------------------------------------------------------ answer
    def _selections(self, spec: RequestSpec, placed: list[_Placed], ordered: Sequence[HostState],
                    num_alts: int) -> list[list[Selection]]:
        selected = {p.host.uuid for p in placed}
        if num_alts and len(placed) > 1:
            # Nova sorts once more after all consumptions so alternates reflect them.
            attempt = InstanceAttempt(index=len(placed) - 1)
            ordered = self._sorted_hosts(spec, ordered, len(placed) - 1, attempt)
        result = []
        for p in placed:
            # Without a claim (4.3 callers, rebuild checks) Nova sends the literal "null".
            claimed = p.claim is not None
            selections = [self._selection(p.host, p.alloc_req, with_request=claimed)]
            for alt in pick_alternates(ordered, chosen=p.host, selected=selected,
                                       num_alternates=num_alts):
                # Alternates carry an unclaimed request: the conductor claims it
                # itself if the first host fails to build. Without claims Nova
                # sends "null" for them too.
                selections.append(self._selection(alt, first_fitting(alt),
                                                  with_request=claimed))
            result.append(selections)
        return result

    @staticmethod
    def _selection(host: HostState, alloc_req: AllocationRequest | None, *,
                   with_request: bool) -> Selection:
        sent = alloc_req if with_request else None
        return Selection(
            compute_node_uuid=host.uuid, service_host=host.host, nodename=host.nodename,
            cell_uuid=host.cell_uuid,
            allocation_request=sent.dumps() if sent is not None else 'null',
            allocation_request_version=(ALLOCATION_CANDIDATES_MICROVERSION
                                        if sent is not None else None),
            availability_zone=host.availability_zone,
            # Nova's SchedulerLimits.from_dict(host.limits): NUMATopologyFilter's limits
            # for the compute node's own claim.
            limits=SchedulerLimits(numa_topology=host.limits.get('numa_topology')))


def _plugin_failure(error: Exception) -> exc.NoValidHost:
    """A filter or weigher that crashes is a bug in that plugin; the caller gets a
    NoValidHost naming it (Nova would send the raw exception), the log the traceback."""
    LOG.error('scheduler plugin failed: %s', error, exc_info=error)
    # The plugin's own text may quote host data: the caller learns which plugin.
    if isinstance(error, FilterError):
        which = f'filter {error.filter_name}'
    elif isinstance(error, WeigherError):
        which = f'weigher {error.weigher_name}'
    else:
        which = type(error).__name__
    return exc.NoValidHost(reason=f'{which} failed (a scheduler plugin failed; the '
                                  f'scheduler log has the details)')


def forcing_skips_filters(spec: RequestSpec) -> bool:
    """Nova skips the filters for forced hosts/nodes unless a check type is set
    (``HostManager.get_filtered_hosts``): a forced boot bypasses them, a rebuild
    check does not."""
    return bool(spec.force_hosts or spec.force_nodes) and not spec.scheduler_hints.get(
        NOVA_CHECK_TYPE)


def _exclusion_steps(excluded: list[Exclusion],
                     hosts_in: int) -> list[tuple[str, int, dict[str, int]]]:
    """Exclusions as trace steps: (weigher, hosts in, {reason: count}), in order."""
    steps: dict[str, dict[str, int]] = {}
    for e in excluded:
        reasons = steps.setdefault(e.weigher, {})
        reasons[e.reason] = reasons.get(e.reason, 0) + 1
    result = []
    for name, reasons in steps.items():
        result.append((name, hosts_in, reasons))
        hosts_in -= sum(reasons.values())
    return result


_UUID_RE = re.compile(r'[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?'
                      r'[0-9a-fA-F]{12}')


def _placement_failure(error: pexc.PlacementError) -> str:
    """What a caller may read of a Placement failure: its status and error code,
    never its text (which can quote URLs, provider or aggregate uuids)."""
    if error.status:
        parts = [f'HTTP {error.status}']
    elif isinstance(error, pexc.PlacementUnavailable):
        parts = [error.last_error or 'no answer']
    else:
        parts = [type(error).__name__]
    if error.code:
        parts.append(error.code)
    return ', '.join(parts)


def _log_placement_failure(context: RequestContext, what: str,
                           error: pexc.PlacementError) -> None:
    LOG.warning('request %s: %s: %s', context.request_id, what, _short(error, 500))


def _short(error: object, limit: int = 200) -> str:
    text = ' '.join(str(error).split())
    return text if len(text) <= limit else text[:limit - 3] + '...'
