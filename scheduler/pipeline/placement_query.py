"""Stage ``placement_query``: from a spec to Placement's allocation candidates.

The requested (or forced) destination becomes ``in_tree`` (a host or node the
catalog does not know is looked up in the host sources before it is refused:
:mod:`scheduler.catalog.destinations`); the spec is translated into
``GET /allocation_candidates`` (:mod:`scheduler.request.translate`); with
``[scheduler] provider_view``, a query the view answers exactly is answered
there, with every provider that holds it (:mod:`scheduler.provider_view`), and
never sent; an answer fetched a moment ago for the same query may be reused
(:mod:`scheduler.pipeline.candidate_reuse`); Nova's PCPU fallback asks once more with
VCPU and merges the answers. An empty answer, or one Placement refused, is a
NoValidHost whose reason says which.
"""
from __future__ import annotations

import logging

from oslo_config import cfg

from placement_client import exceptions as pexc
from placement_client.api import PlacementAPI
from placement_client.models import Candidates
from placement_client.query import AllocationCandidatesQuery
from scheduler import exceptions as exc
from scheduler import metrics
from scheduler.catalog.destinations import DestinationLookup
from scheduler.context import RequestContext
from scheduler.explain import RequestTrace
from scheduler.host_state import HostData
from scheduler.memory.turns import waiting
from scheduler.objects.spec import RequestSpec
from scheduler.pipeline.candidate_reuse import CandidateReuse
from scheduler.pipeline.failures import (
    UUID_RE,
    failure_reason,
    log_placement_failure,
    placement_failure,
    short,
)
from scheduler.provider_view.view import Match, ProviderView
from scheduler.request.node_details import uses_compute_node_details
from scheduler.request.translate import build_query, fallback_query_needed

#: Why a query the provider view might answer went to Placement (metric labels).
NEEDS_FALLBACK = 'PCPU fallback query'
NEEDS_NODE_DETAILS = 'NUMA or PCI request'

LOG = logging.getLogger(__name__)


class PlacementQuery:
    def __init__(self, conf: cfg.ConfigOpts, placement: PlacementAPI, catalog: HostData,
                 reuse: CandidateReuse, view: ProviderView | None = None,
                 destinations: DestinationLookup | None = None):
        self.conf = conf
        self.placement = placement
        self.catalog = catalog
        self.reuse = reuse
        self.view = view
        # Requested hosts and nodes the catalog does not know, looked up in the
        # host sources (None: no source configured, they are refused as before).
        self.destinations = destinations

    def candidates(self, context: RequestContext, spec: RequestSpec, trace: RequestTrace, *,
                   claim: bool, unlimited: bool = False) -> Candidates | Match:
        """Placement's answer for ``spec`` (all of it with ``unlimited``), or every
        provider that holds it in the provider view, when the view answers;
        NoValidHost when there is none."""
        in_tree, multi_node = self.resolve_destination(context, spec)
        # With several nodes behind the requested host, the right one might not be
        # among the first N candidates (Nova drops the limit too); the hints that
        # have the same effect are handled by the translation.
        limit = None if multi_node or unlimited else self.conf.scheduler.max_placement_results
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

        # A move holds allocations an earlier answer or the view does not know about.
        reuse = claim and spec.requested_destination is None and not spec.ignore_hosts
        fallback = fallback_query_needed(translated, self.conf)
        with metrics.stage('placement_query'):
            if reuse and self.view is not None:
                match = self._from_view(translated.query, spec, trace, fallback=fallback)
                if match is not None:
                    return match
            candidates = self._ask(context, translated.query, trace, reuse=reuse)
            if fallback:
                candidates = self._with_fallback(context, spec, candidates, limit=limit,
                                                 in_tree=in_tree, trace=trace)
        trace.candidates = len(candidates)
        metrics.CANDIDATES.observe(trace.candidates)
        if not trace.candidates:
            raise exc.NoValidHost(reason=failure_reason(self.conf, trace))
        return candidates

    def view_again(self, match: Match) -> Match | None:
        """``match``'s query matched again in the provider view as it is now (this
        worker's claims and refusals since, its sibling workers' claims); None when
        the view no longer answers it."""
        assert self.view is not None
        again, _ = self.view.match(match.query)
        return again

    def resolve_destination(self, context: RequestContext,
                            spec: RequestSpec) -> tuple[str | None, bool]:
        """Requested (or forced) host/node -> ``in_tree`` provider; (in_tree, several nodes)."""
        dest = spec.requested_destination
        host = dest.host if dest and dest.host else (
            spec.force_hosts[0] if spec.force_hosts else None)
        node = dest.node if dest and dest.node else (
            spec.force_nodes[0] if spec.force_nodes else None)
        if not host and not node:
            return None, False
        roots = self.find_roots(context, host, node)
        if not roots and not self.catalog.find_nodes(host, node):
            # A compute that registered after the last sync: nova-scheduler reads
            # its cell database per request and would place it.
            if not self.look_up_destination(host, node):
                raise exc.NoValidHost(reason=f'No such host - host: {host} node: {node} ')
            roots = self.find_roots(context, host, node)
        if not roots:
            # Known to the catalog under names Placement does not use: let the
            # candidates and the host restrictions decide.
            return None, True
        return (next(iter(roots)), False) if len(roots) == 1 else (None, True)

    def look_up_destination(self, host: str | None, node: str | None) -> bool:
        """Whether the host sources, asked now, made the catalog know a compute node
        on ``host`` named ``node`` (:mod:`scheduler.catalog.destinations`)."""
        return self.destinations is not None and self.destinations.look_up(host, node)

    def find_roots(self, context: RequestContext, host: str | None,
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
                with waiting():
                    providers = self.placement.get_resource_providers(
                        name=name, request_id=context.global_id)
            except pexc.PlacementError as e:
                log_placement_failure(context, 'requested destination look-up', e)
                raise exc.NoValidHost(reason=f'Placement unreachable while looking up the '
                                             f'requested destination '
                                             f'({placement_failure(e)})') from e
            learnt.update({p.uuid: p.name for p in providers if p.uuid == p.root_provider_uuid})
        if learnt:
            self.catalog.remember_provider_names(learnt)
        return {**found, **learnt}

    def _from_view(self, query: AllocationCandidatesQuery, spec: RequestSpec,
                   trace: RequestTrace, *, fallback: bool) -> Match | None:
        """Every provider the provider view says holds ``query``; None when Placement
        must answer (the view says why, counted)."""
        assert self.view is not None
        match: Match | None = None
        if fallback:
            why: str | None = NEEDS_FALLBACK
        elif uses_compute_node_details(spec):
            # Their filters read each candidate's NUMA cells and PCI pools from the
            # cell databases, refreshed per request: for a few candidates, not all.
            why = NEEDS_NODE_DETAILS
        else:
            match, why = self.view.match(query)
        metrics.PROVIDER_VIEW_QUERIES.inc(answer='placement' if match is None else 'view',
                                          why=why or '')
        if match is None:
            return None
        trace.query = f'{trace.query} (answered from the provider view: every matching host)'
        trace.limit = None
        trace.candidates = len(match)
        metrics.CANDIDATES.observe(trace.candidates)
        return match

    def _ask(self, context: RequestContext, query: AllocationCandidatesQuery,
             trace: RequestTrace, *, reuse: bool = False) -> Candidates:
        key = query.describe()
        if reuse and self.reuse.enabled:
            cached = self.reuse.get(key)
            if cached is not None:
                trace.query = f'{trace.query} (answer reused)'
                return cached
        try:
            with waiting():
                candidates = self.placement.get_allocation_candidates(
                    query, request_id=context.global_id)
            if reuse and self.reuse.enabled:
                self.reuse.put(key, candidates)
            return candidates
        except pexc.PlacementError as e:
            log_placement_failure(context, 'GET /allocation_candidates', e)
            if isinstance(e, pexc.PlacementUnavailable):
                trace.placement_error = (f'Placement unreachable after {e.attempts} attempts '
                                         f'({placement_failure(e)})')
            elif isinstance(e, pexc.PlacementAuthError):
                trace.placement_error = (f'Placement refused the scheduler\'s credentials '
                                         f'({e.status})')
            else:
                # Placement's words on a rejected query are about what was asked (an
                # unknown trait or resource class); the uuids in them are masked.
                detail = UUID_RE.sub('<uuid>', short(e.detail or ''))
                trace.placement_error = (
                    f'Placement rejected the query ({placement_failure(e)})'
                    + (f': {detail}' if detail else ''))
        raise exc.NoValidHost(reason=failure_reason(self.conf, trace))

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
            with waiting():
                extra = self.placement.get_allocation_candidates(fallback.query,
                                                                 request_id=context.global_id)
        except pexc.PlacementError as e:
            # Nova keeps the first answer when the fallback call fails; so do we.
            LOG.warning('request %s: PCPU fallback query failed (%s); using the PCPU '
                        'candidates only', context.request_id, short(e))
            return candidates
        return candidates.merged_with(extra)
