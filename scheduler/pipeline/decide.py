"""Deciding: per instance of the request, filter, weigh and order the hosts, then
choose one, and let the next instance see what it used.

:func:`decide` is what ``select_destinations``, ``explain`` and the benchmark
call. It reads and writes nothing outside its arguments: Placement is reached
only through ``choose`` (the claim stage, or the first fitting candidate when
nothing is claimed), the provider view only through ``refresh``, and undoing is
the caller's business (the manager's all-or-nothing rule).

Hosts from the provider view are ordered afresh when Placement refuses a claim
on one of them for capacity: the view was behind there, and the rest of the
order came from the same moment. Counted at 1,000 providers while the cloud
filled up, a third of the refusals were claims further down such an order, and a
third of those claims were refused.
"""
from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from oslo_config import cfg

from scheduler import exceptions as exc
from scheduler.conf.scheduler import near_best_tolerance
from scheduler.explain import InstanceAttempt, RequestTrace
from scheduler.filters.base import BaseHostFilter
from scheduler.host_state import HostState
from scheduler.host_table import HostView
from scheduler.memory.turns import resume
from scheduler.objects.spec import RequestSpec
from scheduler.pipeline.claim import OrderStale, Placed, Walk, consume
from scheduler.pipeline.filtering import filter_hosts
from scheduler.pipeline.ordering import order_hosts
from scheduler.pipeline.spread import Spread
from scheduler.pipeline.weighing import weigh
from scheduler.weights.base import BaseHostWeigher

#: (spec, hosts in order, instance uuid, the trace of this instance, its walk) -> the
#: host it gets (Claiming.claim_first)
ChooseHost = Callable[[RequestSpec, Sequence[HostState], str | None, InstanceAttempt, Walk],
                      Placed | None]

#: The hosts given as the provider view shows them now; None when it no longer
#: answers the request (the order in hand is then walked on).
RefreshHosts = Callable[[HostView], HostView | None]

#: How many times one instance's hosts are ordered afresh after refusals: each
#: costs a decision's own work, a few milliseconds at 1,000 providers.
REORDERS = 2


@dataclass
class Ranking:
    """The hosts in the order an instance should try them: filtered, weighed, ordered."""

    conf: cfg.ConfigOpts
    filters: Sequence[BaseHostFilter]
    weighers: Sequence[BaseHostWeigher]
    rng: random.Random
    #: Which near-best hosts this worker tries first (pipeline/spread.py); None: any.
    spread: Spread | None = None

    def sorted_hosts(self, spec: RequestSpec, hosts: HostView, index: int,
                     attempt: InstanceAttempt, *, rebuild: bool = False) -> HostView:
        # After a claim that gave its turn up, computing again needs it back.
        resume()
        # Read per request: an operator's (or a test's) new values apply at once.
        vectorised = self.conf.scheduler.columnar_host_states
        passed = filter_hosts(self.filters, spec, hosts, index=index, attempt=attempt,
                              rebuild=rebuild, vectorised=vectorised)
        if not passed:
            return passed
        weighed = weigh(self.weighers, spec, passed, attempt, vectorised=vectorised)
        fs = self.conf.filter_scheduler
        return order_hosts(weighed, host_subset_size=fs.host_subset_size,
                           shuffle_best_same_weighed_hosts=fs.shuffle_best_same_weighed_hosts,
                           near_best_tolerance=near_best_tolerance(self.conf),
                           rng=self.rng,
                           precedence=self.spread.precedence if self.spread else None)


@dataclass
class Decision:
    #: the last instance's host order: what alternates are chosen from
    ordered: HostView
    #: one per instance decided so far, in order
    placed: list[Placed] = field(default_factory=list)


def decide(spec: RequestSpec, uuids: Sequence[str | None], hosts: HostView, *,
           ranking: Ranking, choose: ChooseHost, reason: Callable[[RequestTrace], str],
           trace: RequestTrace, into: Decision, rebuild: bool = False,
           refresh: RefreshHosts | None = None) -> Decision:
    """Place every instance, in order, into ``into`` (so that a caller who undoes on
    failure sees what was placed before it); NoValidHost with ``reason(trace)`` for
    the first instance no host takes. ``refresh``: the hosts came from the provider
    view, which can show them again."""
    into.ordered = hosts
    for index, instance_uuid in enumerate(uuids):
        spec.instance_uuid = instance_uuid
        attempt = trace.new_attempt(index, len(hosts))
        given = hosts
        ordered = ranking.sorted_hosts(spec, hosts, index, attempt, rebuild=rebuild)
        # Nova: hosts filtered out for one instance are not reconsidered for the next.
        hosts = into.ordered = ordered
        if rebuild:
            # Nothing to claim or fit: the instance already holds its resources.
            chosen = Placed(instance_uuid, ordered[0], None) if ordered else None
            attempt.claimed_host = chosen.host.host if chosen else None
        else:
            reorder = (functools.partial(_reordered, refresh, given, spec, index, ranking)
                       if refresh is not None else None)
            chosen = _walk(spec, ordered, instance_uuid, attempt, choose=choose,
                           reorder=reorder, into=into)
            hosts = into.ordered
        if chosen is None:
            raise exc.NoValidHost(reason=reason(trace))
        into.placed.append(chosen)
        consume(spec, chosen)
    return into


def _walk(spec: RequestSpec, ordered: HostView, instance_uuid: str | None,
          attempt: InstanceAttempt, *, choose: ChooseHost,
          reorder: Callable[[], HostView | None] | None, into: Decision) -> Placed | None:
    """The host one instance gets, walking ``ordered`` and, after a refusal for
    capacity (Placement's, or the view's at the moment of a claim), the hosts
    ordered again (at most :data:`REORDERS` times). An order
    worked out again that yields nothing hands back to the one before it: only
    Placement's refusals, never the view alone, end in NoValidHost."""
    walk = Walk()
    reorders = REORDERS if reorder is not None else 0
    orders = [ordered]
    while True:
        walk.stop_when_refused = reorders > 0
        into.ordered = orders[-1]
        try:
            chosen = choose(spec, orders[-1], instance_uuid, attempt, walk)
        except OrderStale:
            reorders -= 1
            fresh = reorder() if reorder is not None else None
            if fresh:
                orders.append(fresh)
            continue
        if chosen is None and len(orders) > 1:
            orders.pop()        # its hosts tried are skipped (Walk.tried)
            continue
        return chosen


def _reordered(refresh: RefreshHosts, given: HostView, spec: RequestSpec, index: int,
               ranking: Ranking) -> HostView | None:
    fresh = refresh(given)
    if fresh is None:
        return None
    # The instance's trace keeps the first order's filtering and weighing, over the
    # hosts it was given: what a NoValidHost's reason counts.
    return ranking.sorted_hosts(spec, fresh, index, InstanceAttempt(index=index))
