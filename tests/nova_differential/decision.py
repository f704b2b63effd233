"""The whole decision: Nova's ``SchedulerManager._schedule`` against this service's
``select_destinations``, for the same Placement answer and hosts.

Both sides run a cloud's usual filters (:data:`FILTERS`) and every weigher,
``host_subset_size = 1``, no shuffling, ``max_attempts = 3``, and claim every
instance; a claim is accepted while the provider has room, as Placement does
(:class:`Ledger`). Nova's side is its manager and host manager, unmodified, with the
database reads replaced by the case's rows: the cell list, the aggregates and
the instance lists it loads at start-up, and the one per-request read of the
compute nodes and services (``HostManager._get_computes_for_cells``). Nova's
weights are recorded as its ``get_weighed_hosts`` returns them, so that a host
chosen here where Nova chose another of exactly the same weight is told apart
from a real difference: Nova orders equal weights by the iteration order of a
set of host states, this service by Placement's order.
"""
from __future__ import annotations

import collections
import datetime
import json
import json as _json
from dataclasses import dataclass, field
from typing import Any

import requests

from placement_client import exceptions as pexc
from placement_client.models import AllocationRequest, Candidates, ConsumerAllocations
from scheduler import plugins
from scheduler.context import RequestContext
from scheduler.exceptions import NoValidHost
from scheduler.filters.compute import ComputeFilter
from scheduler.manager import SchedulerManager
from tests.nova_differential import compute, nova_side, our_side
from tests.nova_differential.cloud import CELLS, USER_ID

#: A cloud's usual filters: Nova's defaults, the NUMA and PCI filters, and those
#: most often added (every filter is compared alone at the first level; with
#: all of them at once nearly every random request would get NoValidHost).
FILTERS = (
    'ComputeFilter', 'ComputeCapabilitiesFilter', 'ImagePropertiesFilter',
    'ServerGroupAntiAffinityFilter', 'ServerGroupAffinityFilter', 'NUMATopologyFilter',
    'PciPassthroughFilter', 'AggregateMultiTenancyIsolation', 'SameHostFilter',
    'DifferentHostFilter', 'IoOpsFilter', 'NumInstancesFilter')
WEIGHERS = ('nova.scheduler.weights.all_weighers',)
NOVALIDHOST = 'NoValidHost'
METRIC_NOT_FOUND = 'ComputeHostMetricNotFound'


@dataclass
class Decisions:
    #: per instance: [chosen host, alternates...]; or NOVALIDHOST
    hosts: list[list[str]] | str
    #: Nova only: per instance, host -> total weight, as get_weighed_hosts returned it
    weights: list[dict[str, float]] = field(default_factory=list)
    #: Nova only: its WARNING that a consumption raised and was skipped
    consume_failure: str | None = None


class Ledger:
    """What Placement decides of a claim: it fits the provider's capacity (from the
    answer's summaries) after the claims before it, or it is refused (409)."""

    def __init__(self, answer: dict[str, Any]):
        self._free = {rp: {rc: usage['capacity'] - usage['used']
                           for rc, usage in summary['resources'].items()}
                      for rp, summary in answer['provider_summaries'].items()}

    def claim(self, allocations: dict[str, dict[str, int]]) -> bool:
        if any(amount > self._free.get(rp, {}).get(rc, 0)
               for rp, resources in allocations.items() for rc, amount in resources.items()):
            return False
        for rp, resources in allocations.items():
            for rc, amount in resources.items():
                self._free[rp][rc] -= amount
        return True


# ------------------------------------------------------------------------------ Nova
def _nova_managers(written: compute.WrittenCloud, answer: dict[str, Any]) -> tuple[Any, Any]:
    n = compute.nova()
    o = n.objects
    ctx = compute.context()
    conf = n.conf.CONF
    conf.set_override('enabled_filters', list(FILTERS), group='filter_scheduler')
    conf.set_override('weight_classes', list(WEIGHERS), group='filter_scheduler')
    recorded: list[dict[str, float]] = []

    class HostManager(n.host_manager.HostManager):  # type: ignore[misc, name-defined]
        """Nova's, reading the case's rows where it would read its databases."""

        def refresh_cells_caches(self) -> None:
            self.cells = {u: o.CellMapping(uuid=u, name=name, transport_url='none:///',
                                           database_connection='sqlite://', disabled=False)
                          for u, name in CELLS.items()}
            self.enabled_cells = list(self.cells.values())
            self.host_to_cell_uuid = {}

        def _init_aggregates(self) -> None:
            for agg in written.aggregates:
                self.aggs_by_id[agg.id] = agg
                for host in agg.hosts:
                    self.host_aggregates_map[host].add(agg.id)

        def _init_instance_info(self, computes_by_cell: Any = None) -> None:
            # As after every compute's sync_instance_info: in memory, trusted.
            self._instance_info = {
                h.host.name: {'instances': {u: o.Instance(uuid=u, host=h.host.name,
                                                          node=h.host.name)
                                            for u in h.instances}, 'updated': True}
                for h in written.hosts}

        def _get_computes_for_cells(self, context: Any, cells: Any,
                                    compute_uuids: Any) -> tuple[Any, Any]:
            wanted = set(compute_uuids) if compute_uuids is not None else None
            asked = {c.uuid for c in cells}
            nodes: dict[str, list[Any]] = collections.defaultdict(list)
            for h in written.hosts:
                if h.host.cell in asked and (wanted is None or h.host.uuid in wanted):
                    nodes[h.host.cell].append(o.ComputeNode._from_db_object(
                        ctx, o.ComputeNode(ctx), dict(h.compute_row)))
            services = {h.host.name: o.Service._from_db_object(ctx, o.Service(ctx),
                                                               dict(h.service_row))
                        for h in written.hosts if h.host.cell in asked}
            return nodes, services

        def get_weighed_hosts(self, hosts: Any, spec_obj: Any) -> Any:
            weighed = super().get_weighed_hosts(hosts, spec_obj)
            recorded.append({w.obj.host: float(w.weight) for w in weighed})
            return weighed

    ledger = Ledger(answer)

    class Claims:
        """The report client's claim: 204 when Placement has room, else 409 (False)."""

        def claim_resources(self, context: Any, consumer_uuid: str,
                            alloc_request: dict[str, Any], *args: Any, **kwargs: Any) -> bool:
            return ledger.claim({rp: a['resources']
                                 for rp, a in alloc_request['allocations'].items()})

        def delete_allocation_for_instance(self, *args: Any, **kwargs: Any) -> bool:
            return True

    claims = Claims()

    class SchedulerManager(n.manager.SchedulerManager):  # type: ignore[misc, name-defined]
        placement_client = property(lambda self: claims)

    manager = object.__new__(SchedulerManager)
    manager.host_manager = HostManager()
    return manager, recorded


def nova_decision(written: compute.WrittenCloud, answer: dict[str, Any],
                  primitive: dict[str, Any]) -> Decisions:
    n = compute.nova()
    manager, recorded = _nova_managers(written, answer)
    spec = compute.nova_request(primitive)
    ctx = n.context.RequestContext(user_id=USER_ID, project_id=written.case.request.project_id)
    by_rp: dict[str, list[Any]] = collections.defaultdict(list)
    for request in answer['allocation_requests']:
        for rp in request['allocations']:
            by_rp[rp].append(request)
    del nova_side.LOG_RECORDS[:]
    try:
        selections = manager._schedule(
            ctx, spec, compute.instance_uuids(written.case), by_rp,
            answer['provider_summaries'], allocation_request_version='1.36',
            return_alternates=True)
        hosts: list[list[str]] | str = [[s.service_host for s in per] for per in selections]
    except n.exception.NoValidHost:
        hosts = NOVALIDHOST
    except n.exception.ComputeHostMetricNotFound as e:
        # MetricsWeigher with [metrics] required: the request fails in Nova.
        hosts = f'{METRIC_NOT_FOUND}: {e}'
    failure = next((line for line in nova_side.LOG_RECORDS
                    if 'failed to consume from instance' in line), None)
    return Decisions(hosts, recorded, failure)


# ------------------------------------------------------------------------------ ours
class _Placement:
    """Answers the GET with the case's answer and accepts every claim."""

    def __init__(self, answer: dict[str, Any]):
        self._answer = json.loads(json.dumps(answer))
        self._ledger = Ledger(answer)
        #: provider -> consumers claimed on it (what an anti-affinity group check reads)
        self._consumers: dict[str, set[str]] = collections.defaultdict(set)

    def request(self, method: str, url: str, *, microversion: str | None, json: Any = None,
                params: Any = None, request_id: str | None = None) -> requests.Response:
        parts = url.strip('/').split('/')
        if method != 'GET' or len(parts) != 3 or parts[::2] != ['resource_providers',
                                                                 'allocations']:
            raise AssertionError(f'unexpected Placement call {method} {url}')
        response = requests.Response()
        response.status_code = 200
        response._content = _json.dumps({'allocations': {
            c: {'resources': {}} for c in sorted(self._consumers[parts[1]])}}).encode()
        return response

    def get_allocation_candidates(self, query: Any, *, request_id: str | None = None
                                  ) -> Candidates:
        return Candidates.from_json(self._answer, compute.MICROVERSION)

    def get_allocations(self, consumer_uuid: str, *,
                        request_id: str | None = None) -> ConsumerAllocations:
        return ConsumerAllocations(allocations={}, consumer_generation=None)

    def put_allocations(self, consumer_uuid: str, allocation_request: AllocationRequest,
                        **kwargs: Any) -> None:
        if not self._ledger.claim({rp: dict(r) for rp, r in
                                   allocation_request.allocations.items()}):
            raise pexc.CapacityExceeded('would violate inventory constraints', status=409,
                                        code='placement.undefined_code')
        for rp in allocation_request.allocations:
            self._consumers[rp].add(consumer_uuid)

    def delete_allocations(self, consumer_uuid: str, *, request_id: str | None = None) -> bool:
        return True

    def get_resource_providers(self, **kwargs: Any) -> list[Any]:
        return []

    def get_provider_aggregates(self, provider_uuid: str, **kwargs: Any) -> list[str]:
        return []

    def get_provider_summaries(self, root_uuid: str, **kwargs: Any) -> dict[str, Any]:
        return {}


def our_decision(written: compute.WrittenCloud, answer: dict[str, Any],
                 primitive: dict[str, Any], now: datetime.datetime) -> Decisions:
    conf = our_side.make_conf(filters=FILTERS, weighers=('all',))
    conf.set_override('weight_classes', ['nova.scheduler.weights.all_weighers'],
                      group='filter_scheduler')
    filters = plugins.load_filters(conf)
    for f in filters:
        if isinstance(f, ComputeFilter):
            f.clock = lambda: now.replace(tzinfo=datetime.timezone.utc)
    manager = SchedulerManager(conf, placement=_Placement(answer),  # type: ignore[arg-type]
                               catalog=our_side.catalog_for(written), filters=filters,
                               weighers=plugins.load_weighers(conf), request_filters=[])
    spec = our_side.request_spec(primitive)
    context = RequestContext(project_id=written.case.request.project_id, user_id=USER_ID)
    try:
        selections = manager.select_destinations(
            context, spec, compute.instance_uuids(written.case), return_objects=True,
            return_alternates=True)
    except NoValidHost:
        return Decisions(NOVALIDHOST)
    finally:
        manager.cleanups.stop()
    return Decisions([[s.service_host for s in per] for per in selections])


# --------------------------------------------------------------------------- compare
def differences(nova: Decisions, ours: Decisions) -> tuple[list[str], bool]:
    """What differs (empty: the same decision), and whether the first difference is a
    tie: a host of exactly Nova's chosen host's weight (after it, the instances that
    follow see other hosts consumed, so nothing more is compared)."""
    if isinstance(nova.hosts, str) or isinstance(ours.hosts, str):
        if nova.hosts == ours.hosts:
            return [], False
        return [f'Nova: {_show(nova.hosts)}; ours: {_show(ours.hosts)}'], False
    for index, (theirs, mine) in enumerate(zip(nova.hosts, ours.hosts, strict=True)):
        if theirs == mine:
            continue
        weights = nova.weights[index] if index < len(nova.weights) else {}
        tie = _same_weights(theirs, mine, weights)
        return [f'instance {index}: Nova {theirs}, ours {mine}' +
                (' (equal Nova weights)' if tie else
                 f' (Nova weights {[round(weights.get(h, float("nan")), 6) for h in mine]} '
                 f'for ours, {[round(weights.get(h, float("nan")), 6) for h in theirs]} '
                 f'for its own)')], tie
    return [], False


def _same_weights(theirs: list[str], mine: list[str], weights: dict[str, float]) -> bool:
    if len(theirs) != len(mine):
        return False
    return all(h in weights and t in weights and abs(weights[h] - weights[t]) <= 1e-9 *
               max(1.0, abs(weights[t])) for h, t in zip(mine, theirs, strict=True))


def _show(hosts: list[list[str]] | str) -> str:
    return hosts if isinstance(hosts, str) else str(hosts)
