"""The answer: one list of Selections per instance, the chosen host first, then
up to ``max_attempts - 1`` alternates the conductor may retry on."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from placement_client.client import ALLOCATION_CANDIDATES_MICROVERSION
from placement_client.models import AllocationRequest
from scheduler.explain import InstanceAttempt
from scheduler.host_state import HostState
from scheduler.host_table import HostView
from scheduler.objects.selection import SchedulerLimits, Selection
from scheduler.objects.spec import RequestSpec
from scheduler.pipeline.claim import Placed, UnusableHosts
from scheduler.pipeline.ordering import first_fitting, pick_alternates

#: (spec, hosts, instance index, its trace) -> the hosts in order (Ranking.sorted_hosts)
SortHosts = Callable[[RequestSpec, HostView, int, InstanceAttempt], HostView]


def selections(spec: RequestSpec, placed: Sequence[Placed], ordered: HostView,
               num_alts: int, sort_hosts: SortHosts,
               unusable_hosts: UnusableHosts | None = None) -> list[list[Selection]]:
    """``unusable_hosts``: which hosts' compute services are disabled or down now,
    when the hosts were judged on an older state (the alternates offered are
    checked with it, a host of them passed over as the claim's walk passes it;
    those read with the claim, during this request, are not read again)."""
    selected = {p.host.uuid for p in placed}
    if num_alts and len(placed) > 1:
        # Nova sorts once more after all consumptions so alternates reflect them.
        attempt = InstanceAttempt(index=len(placed) - 1)
        ordered = sort_hosts(spec, ordered, len(placed) - 1, attempt)
    result = []
    for p in placed:
        # Without a claim (4.3 callers, rebuild checks) Nova sends the literal "null".
        claimed = p.claim is not None
        answer = [selection(p.host, p.alloc_req, with_request=claimed)]
        for alt in _alternates(ordered, p.host, selected, num_alts, unusable_hosts,
                               p.services):
            # Alternates carry an unclaimed request: the conductor claims it
            # itself if the first host fails to build. Without claims Nova
            # sends "null" for them too.
            answer.append(selection(alt, first_fitting(alt), with_request=claimed))
        result.append(answer)
    return result


def _alternates(ordered: HostView, chosen: HostState, selected: set[str], num_alts: int,
                unusable_hosts: UnusableHosts | None, known: Mapping[str, bool]
                ) -> list[HostState]:
    passed_over: set[str] = set()
    while True:
        alternates = pick_alternates(ordered, chosen=chosen, selected=selected | passed_over,
                                     num_alternates=num_alts)
        if unusable_hosts is None or not alternates:
            return alternates
        unread = [alt.host for alt in alternates if alt.host not in known]
        gone = {alt.host for alt in alternates if known.get(alt.host)}
        if unread:
            gone.update(unusable_hosts(unread))
        if not gone:
            return alternates
        # Each round passes at least one more host over: it ends.
        passed_over.update(alt.uuid for alt in alternates if alt.host in gone)


def selection(host: HostState, alloc_req: AllocationRequest | None, *,
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
