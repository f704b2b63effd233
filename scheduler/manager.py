"""SchedulerManager: one ``select_destinations`` request, end to end.

The stages, in order (one module each in :mod:`scheduler.pipeline`):

1. request filters edit the spec;
2. the Placement query: destination, translation, candidates;
3. hosts: fresh host data, the host table, the spec's restrictions;
4. per instance (:func:`~scheduler.pipeline.decide.decide`): filters, weighers,
   ordering, a claim in Placement, consumption;
5. the answer: Selections with alternates.

This module sequences them and owns the all-or-nothing rule: if any instance
cannot be placed, or the answer cannot be built, every claim this request made
is undone before the error is raised (a created consumer is deleted, a moved
one gets its previous allocations back).

A rebuild check (``_nova_check_type == ['rebuild']``) asks Placement for no
candidates and claims nothing, as in Nova: the instance keeps the allocations
it holds on its own host, and a host that is full because of that very
instance must still pass. Its host state is read from the forced host's
provider tree (inventories, usages, traits) instead, the way Nova reads its
compute node row.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import logging
import random
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar, overload

from oslo_config import cfg

from placement_client.api import PlacementAPI
from scheduler import exceptions as exc
from scheduler import explain, metrics
from scheduler.catalog.destinations import DestinationLookup
from scheduler.catalog.resolver import HostResolver
from scheduler.context import RequestContext
from scheduler.exceptions import FilterError, WeigherError
from scheduler.explain import RequestTrace
from scheduler.filters.base import BaseHostFilter
from scheduler.host_state import HostData
from scheduler.host_table import HostView
from scheduler.journal.requests import RequestJournal
from scheduler.memory import DeferredRelease, paused_gc
from scheduler.memory.turns import BoundedWaits, Turns, resume, waiting
from scheduler.objects.selection import Selection
from scheduler.objects.spec import RequestSpec
from scheduler.pipeline import answer
from scheduler.pipeline import claimer as claims_mod
from scheduler.pipeline import request_filters as request_filters_stage
from scheduler.pipeline.candidate_reuse import CandidateReuse
from scheduler.pipeline.claim import Claiming, UnusableHosts, spec_checkpoint
from scheduler.pipeline.decide import Decision, Ranking, RefreshHosts, decide
from scheduler.pipeline.failures import failure_reason, plugin_failure
from scheduler.pipeline.group_check import GroupClaimCheck
from scheduler.pipeline.hosts import HeldServices, HostBuilder
from scheduler.pipeline.placement_query import PlacementQuery
from scheduler.pipeline.recovery import write_ahead
from scheduler.pipeline.spread import Spread
from scheduler.provider_view.reach import OutOfReach
from scheduler.provider_view.view import Match, ProviderView
from scheduler.request.filters import AggregateSource, RequestFilter
from scheduler.weights.base import BaseHostWeigher

LOG = logging.getLogger(__name__)
T = TypeVar('T')


class SchedulerManager:
    def __init__(self, conf: cfg.ConfigOpts, *, placement: PlacementAPI, catalog: HostData,
                 filters: Sequence[BaseHostFilter], weighers: Sequence[BaseHostWeigher],
                 request_filters: Sequence[RequestFilter],
                 cleanups: claims_mod.PendingCleanups | None = None,
                 journal: RequestJournal | None = None,
                 release: DeferredRelease | None = None,
                 rng: random.Random | None = None,
                 resolver: HostResolver | None = None,
                 request_filter_sources: AggregateSource | None = None,
                 refresh_service_states: Callable[[], object] | None = None,
                 unusable_hosts: UnusableHosts | None = None,
                 refresh_compute_nodes: Callable[[Iterable[str]], None] | None = None,
                 provider_view: ProviderView | None = None,
                 spread: Spread | None = None,
                 destinations: DestinationLookup | None = None,
                 held_services: HeldServices | None = None):
        self.conf = conf
        self.placement = placement
        self.catalog = catalog
        self.filters = filters
        self.weighers = weighers
        self.request_filters = request_filters
        # What request filters read: the catalog, or it and Neutron (routed networks).
        self.request_filter_sources = request_filter_sources or catalog
        self.rng = rng or random.Random()
        self.claimer = claims_mod.Claimer(
            placement, max_attempts=conf.scheduler.claim_max_retries,
            retry_delay=conf.scheduler.claim_retry_delay, rng=self.rng,
            # Each claim is journaled before its PUT: undone if its request is never
            # answered (scheduler/pipeline/recovery.py).
            write_ahead=(functools.partial(write_ahead, journal) if journal is not None
                         else None))
        self.cleanups = cleanups or claims_mod.PendingCleanups(
            placement, interval=conf.scheduler.cleanup_retry_interval)
        # A request's Placement answer and host table are freed after its reply.
        self.release = release or DeferredRelease(
            trim_interval=conf.scheduler.heap_trim_interval)
        # One request computes at a time per worker by default: memory, not speed
        # (scheduler/memory/turns.py).
        self.turns = Turns(conf.scheduler.concurrent_decisions or None,
                           waited=self._turn_waited)
        # A claim on the provider view's hosts keeps its request's columns: only so
        # many wait for Placement off their turn while another request decides.
        self.view_claims = BoundedWaits(conf.scheduler.view_claims_without_turn)
        self.reuse = CandidateReuse(conf.scheduler.candidates_reuse_window)
        # Placement knows nothing of server groups: concurrent requests of one
        # anti-affinity group are arbitrated after the claim (doc/reliability.md).
        self.group_check = GroupClaimCheck(placement, self.cleanups)
        # Candidates from a recent view of the providers, where it answers exactly.
        self.provider_view = provider_view

        # The stages.
        # Without destinations (tests, explain): a requested host the catalog does
        # not know is refused, as before the host sources could be asked.
        self.query = PlacementQuery(conf, placement, catalog, self.reuse, provider_view,
                                    destinations)
        self.hosts = HostBuilder(
            conf, placement, catalog,
            # Without one (tests, explain): provider names stand in for unknown hosts.
            resolver=resolver or HostResolver(catalog.unresolved_providers, (),
                                              exclude_unresolved=False),
            find_roots=self.query.find_roots,
            # As fresh as [nova] service_state_max_age and [cell_database] max_age
            # ask: Nova reads its services table and its candidates' compute
            # nodes per request.
            refresh_service_states=refresh_service_states,
            refresh_compute_nodes=refresh_compute_nodes or (lambda uuids: None),
            look_up_destination=self.query.look_up_destination,
            held_services=held_services)
        # Which near-best hosts this worker tries first, and its claims in flight.
        self.ranking = Ranking(conf, filters, weighers, self.rng, spread)
        self.claiming = Claiming(
            conf, self.claimer, self.cleanups, self.group_check,
            on_capacity_refused=provider_view.refused if provider_view is not None else None,
            spread=spread,
            on_claimed=provider_view.claimed if provider_view is not None else None,
            unusable_hosts=unusable_hosts,
            still_fits=provider_view.still_fits if provider_view is not None else None)

    # ------------------------------------------------------------------ request
    @staticmethod
    def _turn_waited(seconds: float, resuming: bool) -> None:
        metrics.TURN_WAIT.observe(seconds, when='resumed' if resuming else 'arrived')

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
            # One turn from the decision to the answer: given up in between, a
            # request would wait behind later ones while holding its hosts.
            with (self.provider_view.serving() if self.provider_view is not None
                  else contextlib.nullcontext()), self.turns.turn():
                return self._decide_and_answer(context, spec, uuids, given, trace,
                                               return_objects=return_objects,
                                               return_alternates=return_alternates,
                                               finish=finish)
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
            decision = self._decide(context, spec, uuids, claim=given, trace=trace)
        except exc.NoValidHost as nvh:
            for line in explain.log_lines(trace):
                LOG.info('request %s: %s', context.request_id, line)
            LOG.info('request %s: NoValidHost: %s', context.request_id, nvh.reason)
            raise
        except (FilterError, WeigherError) as e:
            raise plugin_failure(e) from e
        for line in explain.log_lines(trace):
            LOG.debug('request %s: %s', context.request_id, line)
        num_alts = self.conf.scheduler.max_attempts - 1 if (
            return_alternates and return_objects) else 0
        placed = decision.placed
        try:
            selections = answer.selections(spec, placed, decision.ordered, num_alts,
                                           self.ranking.sorted_hosts,
                                           self.claiming.unusable_hosts)
            result = finish(selections) if finish is not None else selections
            kept = [p.claim.allocations for p in placed
                    if p.claim is not None and not p.claim.is_move]
            self.reuse.claimed(kept)
            return result
        except Exception as e:
            # Choosing alternates runs the filters and weighers once more, and the
            # answer still has to be encoded: if either fails, the claims already
            # made must not leak.
            self.claiming.rollback(context, placed)
            if isinstance(e, (FilterError, WeigherError)):
                raise plugin_failure(e) from e
            raise

    def _decide(self, context: RequestContext, spec: RequestSpec, uuids: list[str | None],
                *, claim: bool, trace: RequestTrace) -> Decision:
        """Every stage up to the answer; every instance placed, or nothing claimed."""
        if spec.is_rebuild_check:
            # Nova's rebuild check: may the instance stay on its (forced) host? No
            # request filters, no candidates, no claim; only the filters with
            # RUN_ON_REBUILD run (Nova runs them because ``_nova_check_type`` is
            # set, although the host is forced).
            trace.query = 'none: a rebuild check asks Placement for no candidates'
            hosts = self.hosts.for_rebuild(context, spec, trace)
            return self._place_each(context, spec, uuids, hosts, trace=trace, claim=False,
                                    rebuild=True)
        request_filters_stage.run(self.request_filters, spec, self.request_filter_sources,
                                  self.conf, trace)
        services = self.hosts.services_ahead(self._out_of_reach(spec))
        candidates = self.query.candidates(context, spec, trace, claim=claim)
        hosts = self.hosts.for_answer(context, spec, candidates, trace, services=services)
        if isinstance(candidates, Match):
            return self._place_each(context, spec, uuids, hosts, trace=trace, claim=claim,
                                    refresh=self._view_again(context, spec, candidates, trace))
        if not (trace.truncated and self.conf.scheduler.retry_without_limit):
            return self._place_each(context, spec, uuids, hosts, trace=trace, claim=claim)
        # Placement stopped at ``limit`` candidates, and what it cannot express (a
        # disabled service, an aggregate's tenancy) may reject every one of them while
        # hosts beyond the limit fit: ask once more without the limit rather than
        # answer NoValidHost (Placement computes every candidate before applying the
        # limit, so the second query costs about what the first did).
        restore = spec_checkpoint(spec)
        try:
            return self._place_each(context, spec, uuids, hosts, trace=trace, claim=claim)
        except exc.NoValidHost:
            if trace.placement_error is not None:
                raise
        restore()
        first = trace.limit
        trace.restart_query()
        candidates = self.query.candidates(context, spec, trace, claim=claim, unlimited=True)
        trace.note_retry_without_limit(first)
        hosts = self.hosts.for_answer(context, spec, candidates, trace)
        try:
            decision = self._place_each(context, spec, uuids, hosts, trace=trace, claim=claim)
        except exc.NoValidHost:
            metrics.RETRIES_WITHOUT_LIMIT.inc(outcome='novalidhost')
            raise
        metrics.RETRIES_WITHOUT_LIMIT.inc(outcome='placed')
        return decision

    def _out_of_reach(self, spec: RequestSpec) -> OutOfReach | None:
        """The held hosts (disabled or down) no answer of ``spec`` can be on, by the
        provider view: their services need no read before it (its request filters
        have run: Nova's forbids COMPUTE_STATUS_DISABLED on every root)."""
        held_services = self.hosts.held_services
        if self.provider_view is None or held_services is None or not spec.root_forbidden:
            return None
        held = held_services.held_hosts()
        return self.provider_view.out_of_reach(held, spec.root_forbidden) if held else None

    def _place_each(self, context: RequestContext, spec: RequestSpec, uuids: list[str | None],
                    hosts: HostView, *, trace: RequestTrace, claim: bool,
                    rebuild: bool = False, refresh: RefreshHosts | None = None) -> Decision:
        decision = Decision(hosts)
        # A claim waits on a Placement busy with queries: holding the turn, a worker's
        # claims would go one at a time. A claim on hosts Placement answered holds
        # one answer meanwhile; one on the provider view's hosts holds columns over
        # every matching host, so only a bounded number give their turn up.
        choose = functools.partial(
            self.claiming.claim_first, context, claim=claim,
            in_flight=waiting if refresh is None else self.view_claims.waiting)
        try:
            return decide(spec, uuids, hosts, ranking=self.ranking, choose=choose,
                          reason=functools.partial(failure_reason, self.conf), trace=trace,
                          into=decision, rebuild=rebuild, refresh=refresh)
        except Exception:
            # NoValidHost or anything unexpected after a claim: no claim may leak.
            self.claiming.rollback(context, decision.placed)
            raise

    def _view_again(self, context: RequestContext, spec: RequestSpec, match: Match,
                    trace: RequestTrace) -> RefreshHosts:
        """The hosts of ``match`` as the provider view shows them now, among the hosts
        given (an instance after the first keeps what the filters left it)."""
        def refresh(given: HostView) -> HostView | None:
            resume()    # matching again is computing: after a claim off its turn, take it back
            again = self.query.view_again(match)
            if again is None:
                return None
            try:
                hosts = self.hosts.for_view(context, spec, again, trace)
            except exc.NoValidHost:
                return None     # the order in hand is walked on
            metrics.PROVIDER_VIEW_REORDERS.inc()
            return hosts.keep_hosts_of(given)
        return refresh

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
        trace = RequestTrace(num_instances=len(uuids), weigher_shares=True)
        selections: list[list[Selection]] = []
        error: Exception | None = None
        with paused_gc():  # a request like any other (select_destinations says why)
            try:
                with self.turns.turn():
                    decision = self._decide(context, spec, uuids, claim=False, trace=trace)
                    selections = answer.selections(spec, decision.placed, decision.ordered,
                                                   self.conf.scheduler.max_attempts - 1,
                                                   self.ranking.sorted_hosts,
                                                   self.claiming.unusable_hosts)
            except exc.NoValidHost as nvh:
                error = nvh
            except (FilterError, WeigherError) as e:
                error = plugin_failure(e)
        try:
            return explain.build_report(trace, selections=selections, error=error, top=top)
        finally:
            # The error's traceback holds this frame: kept in its locals, a cycle
            # that would keep the decision's hosts until the collector runs.
            del error
