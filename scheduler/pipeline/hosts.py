"""Stage ``host_states``: from candidates (or the provider view's match, or a
rebuild check's named host) to the hosts the filters judge.

Before the hosts are built, what Nova reads per request is made as fresh as
configured: the compute services' state (``[nova] service_state_max_age``) and,
for a request that uses them, the candidates' NUMA topologies and PCI pools
(``[cell_database] max_age``). Providers no source knows are looked up, and left
out while unresolved (doc/host-data.md). The hosts then travel as rows of one host
table (:mod:`scheduler.host_table`), and the cell and name restrictions of the spec
apply before any filter runs.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from oslo_config import cfg

from placement_client import exceptions as pexc
from placement_client.api import PlacementAPI
from placement_client.models import Candidates
from scheduler import exceptions as exc
from scheduler import metrics
from scheduler.catalog.resolver import UNRESOLVED_REASON, HostResolver
from scheduler.context import RequestContext
from scheduler.explain import RequestTrace
from scheduler.host_state import HostData, HostState
from scheduler.host_table import HostTable, HostView
from scheduler.memory.turns import waiting
from scheduler.objects.spec import RequestSpec
from scheduler.pipeline.failures import (
    failure_reason,
    log_placement_failure,
    placement_failure,
    short,
)
from scheduler.pipeline.ordering import prefilter_hosts
from scheduler.provider_view.reach import OutOfReach
from scheduler.provider_view.view import Match
from scheduler.request.node_details import uses_compute_node_details

LOG = logging.getLogger(__name__)

# Above this many unknown providers one full listing is cheaper than lookups.
_MAX_SINGLE_LOOKUPS = 20
# The most forced/requested host and node names a rebuild check may name: each
# costs Placement lookups, and Nova's conductor sends one of each.
_MAX_REBUILD_NAMES = 10

FindRoots = Callable[[RequestContext, str | None, str | None], dict[str, str]]
LookUpDestination = Callable[[str | None, str | None], bool]
#: Waits for a read of the services' state begun earlier (HostBuilder.services_ahead):
#: the held hosts it left unread, if any.
ServicesRead = Callable[[], OutOfReach | None]


class HeldServices(Protocol):
    """The compute services' state read before a request when only the services held as
    disabled or down are read (scheduler/catalog/nova_sync.py: NovaSync)."""

    def held_hosts(self) -> Sequence[str]: ...

    def fresh_service_states(self, skip: Collection[str] = ()) -> frozenset[str]: ...

    def read_again(self, hosts: Collection[str]) -> None: ...


#: Reads of the services' state running ahead at once, per process.
_READS_AHEAD = 8


class HostBuilder:
    def __init__(self, conf: cfg.ConfigOpts, placement: PlacementAPI, catalog: HostData, *,
                 resolver: HostResolver, find_roots: FindRoots,
                 refresh_service_states: Callable[[], object] | None,
                 refresh_compute_nodes: Callable[[Iterable[str]], None],
                 look_up_destination: LookUpDestination | None = None,
                 held_services: HeldServices | None = None):
        self.conf = conf
        self.placement = placement
        self.catalog = catalog
        self.resolver = resolver
        self.find_roots = find_roots
        # A named host the catalog does not know, asked of the host sources once.
        self.look_up_destination = look_up_destination or (lambda host, node: False)
        self.refresh_service_states = refresh_service_states or (lambda: None)
        self.refresh_compute_nodes = refresh_compute_nodes
        # Where a request's read may leave out the held hosts it cannot be answered
        # with (scheduler/provider_view/reach.py).
        self.held_services = held_services
        # The services' state is read while the candidates are being found (it needs
        # only to begin after the request arrived and end before its hosts are built).
        self._ahead = (ThreadPoolExecutor(_READS_AHEAD, thread_name_prefix='services-read')
                       if refresh_service_states is not None else None)

    def services_ahead(self, out_of_reach: OutOfReach | None = None) -> ServicesRead:
        """Begin the read of the services' state this request needs now, in the
        background, leaving out the held hosts of ``out_of_reach``; the callable
        returned waits for it (and raises what it raised) and says which of those it
        left unread."""
        if self._ahead is None:
            return lambda: None
        held = self.held_services
        if out_of_reach is None or held is None:
            read = self._ahead.submit(self.refresh_service_states)

            def done() -> None:
                read.result()
            return done
        skipping = out_of_reach
        left = self._ahead.submit(held.fresh_service_states, skipping.hosts)
        return lambda: skipping.only(left.result())

    def _wait_for_services(self, services: ServicesRead | None) -> OutOfReach | None:
        """The read of the services' state this request needs, done: the one begun
        ahead, else one made now; the held hosts it left unread. The request's turn
        is given up meanwhile, when there is a read to wait for at all."""
        if self._ahead is None:
            return None
        with waiting():
            if services is None:
                self.refresh_service_states()
                return None
            return services()

    def _read_again(self, hosts: set[str]) -> None:
        """Held hosts left unread before the request, that its answer can be on after
        all (a root of theirs lost its forbidden trait since), read now."""
        if hosts and self.held_services is not None:
            with waiting():
                self.held_services.read_again(hosts)

    def for_answer(self, context: RequestContext, spec: RequestSpec,
                   answer: Candidates | Match, trace: RequestTrace, *,
                   services: ServicesRead | None = None) -> HostView:
        """The hosts of Placement's answer or of the provider view's match;
        ``services``: the read of the services' state begun for this request (else
        one is made now)."""
        if isinstance(answer, Match):
            return self.for_view(context, spec, answer, trace, services=services)
        return self.for_candidates(context, spec, answer, trace, services=services)

    def for_view(self, context: RequestContext, spec: RequestSpec, match: Match,
                 trace: RequestTrace, *, services: ServicesRead | None = None) -> HostView:
        """The hosts of the provider view's match, restricted as the spec asks: rows
        of the table the view keeps over its snapshot, read from the catalog as
        fresh as for Placement's answers."""
        unread = self._wait_for_services(services)
        if unread is not None:
            self._read_again(unread.reachable_in_rows(match.snapshot, match.rows))
        az = self.conf.default_availability_zone
        with metrics.stage('host_states'):
            hosts, table = match.hosts_of_table(self.catalog, az)
        # What the catalog does not know of the view's hosts is worked out once per
        # table (unnamed, unresolved): usually nothing, and then nothing is asked.
        unresolved: set[str] = set()
        if table.unnamed or table.unresolved:
            if table.unnamed:
                self._learn_provider_names(context, set(table.unnamed))
            if table.unresolved:
                unresolved = self.resolver.resolve(table.unresolved)
            # What the look-ups taught the catalog (names, service hosts) is in the
            # table the next call builds.
            with metrics.stage('host_states'):
                hosts, table = match.hosts_of_table(self.catalog, az)
        left_out = 0
        if unresolved:
            kept = hosts.keep_roots(lambda root: root not in unresolved)
            hosts, left_out = kept, len(hosts) - len(kept)
        trace.hosts = len(hosts)
        hosts, trace.prefilter_removed = prefilter_hosts(hosts, spec)
        if left_out:
            trace.prefilter_removed = {UNRESOLVED_REASON: left_out, **trace.prefilter_removed}
        if not hosts and left_out:
            raise exc.NoValidHost(reason=failure_reason(self.conf, trace))
        return hosts

    def for_candidates(self, context: RequestContext, spec: RequestSpec, candidates: Candidates,
                       trace: RequestTrace, *, services: ServicesRead | None = None
                       ) -> HostView:
        """The hosts of Placement's answer, restricted as the spec asks."""
        unread = self._wait_for_services(services)
        roots = candidates.root_provider_uuids()
        if unread is not None:
            self._read_again(unread.reachable_in_roots(roots))
        self._learn_provider_names(context, roots)
        unresolved = self.resolver.resolve(roots)
        if unresolved:
            candidates = candidates.without_trees(unresolved)
            if not len(candidates):
                trace.prefilter_removed = {UNRESOLVED_REASON: len(unresolved)}
                raise exc.NoValidHost(reason=failure_reason(self.conf, trace))
        if uses_compute_node_details(spec):
            with waiting():
                self.refresh_compute_nodes(roots - unresolved)
        hosts = self.build(candidates)
        trace.hosts = len(hosts)
        hosts, trace.prefilter_removed = prefilter_hosts(hosts, spec)
        if unresolved:
            trace.prefilter_removed = {UNRESOLVED_REASON: len(unresolved),
                                       **trace.prefilter_removed}
        return hosts

    def build(self, candidates: Candidates) -> HostView:
        az = self.conf.default_availability_zone
        with metrics.stage('host_states'):
            return HostTable(candidates, self.catalog, default_availability_zone=az).view()

    def for_rebuild(self, context: RequestContext, spec: RequestSpec,
                    trace: RequestTrace) -> HostView:
        """The hosts a rebuild check names, read from their provider trees (no candidates)."""
        self.refresh_service_states()
        hosts = HostTable.from_hosts(self._rebuild_host_states(context, spec)).view()
        trace.hosts = len(hosts)
        hosts, trace.prefilter_removed = prefilter_hosts(hosts, spec)
        return hosts

    def _learn_provider_names(self, context: RequestContext, roots: set[str]) -> None:
        unknown = self.catalog.unknown_provider_uuids(roots)
        if not unknown:
            return
        try:
            with waiting():
                if len(unknown) > _MAX_SINGLE_LOOKUPS:
                    providers = self.placement.get_resource_providers(
                        request_id=context.global_id)
                else:
                    providers = [p for root in unknown
                                 for p in self.placement.get_resource_providers(
                                     in_tree=root, request_id=context.global_id)]
        except pexc.PlacementError as e:
            # Names are cosmetic for unknown hosts (they default to the uuid); a
            # lookup failure must not fail the request.
            LOG.warning('could not look up provider names (%s); using uuids', short(e))
            return
        names = {p.uuid: p.name for p in providers if p.uuid == p.root_provider_uuid}
        self.catalog.remember_provider_names(names)

    def _rebuild_roots(self, context: RequestContext, hosts: Sequence[str | None],
                       nodes: Sequence[str | None]) -> dict[str, str]:
        roots: dict[str, str] = {}
        for host in hosts:
            for node in nodes:
                roots.update(self.find_roots(context, host, node))
        return roots

    def _rebuild_host_states(self, context: RequestContext,
                             spec: RequestSpec) -> list[HostState]:
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
        # None: any host (node), when only nodes (hosts) are named.
        anything: list[str | None] = [None]
        roots = self._rebuild_roots(context, hosts or anything, nodes or anything)
        first = ((hosts or anything)[0], (nodes or anything)[0])
        if (not roots and not self.catalog.find_nodes(*first)
                and self.look_up_destination(*first)):
            # Registered after the last sync; one look-up per request: Nova's
            # conductor names one host and one node.
            roots = self._rebuild_roots(context, hosts or anything, nodes or anything)
        if not roots:
            raise exc.NoValidHost(reason=f'No such host - host: {",".join(hosts) or None} '
                                         f'node: {",".join(nodes) or None} ')
        # Found in Placement by node name but unknown to the catalog: its service host
        # is looked up as for candidates (the force_hosts restriction reads it). One
        # still unknown is judged under its provider name, as before.
        self.resolver.resolve(roots)
        if uses_compute_node_details(spec):
            with waiting():
                self.refresh_compute_nodes(roots)
        states = []
        for root, name in sorted(roots.items(), key=lambda kv: kv[1]):
            try:
                summaries = self.placement.get_provider_summaries(root,
                                                                  request_id=context.global_id)
            except pexc.PlacementError as e:
                log_placement_failure(context, 'rebuild host read', e)
                raise exc.NoValidHost(reason=f'Placement unreachable while reading the rebuild '
                                             f'host ({placement_failure(e)})') from e
            record = self.catalog.record_for_provider(root, name)
            states.append(HostState(
                uuid=root, record=record, summaries=summaries.values(),
                allocation_candidates=[],
                aggregates=self.catalog.aggregates_for_host(record.service_host),
                instances=self.catalog.instances_on_host(record.service_host),
                default_availability_zone=self.conf.default_availability_zone))
        return states
