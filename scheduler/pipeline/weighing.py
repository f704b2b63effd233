"""Stage ``weighing``: the hosts that passed, weighed best first.

The weighers are plugins (:mod:`scheduler.weights`); a host a weigher cannot
weigh is left out and reported in the trace the way a filtered host is.
"""
from __future__ import annotations

from collections.abc import Sequence

from scheduler import metrics
from scheduler.explain import InstanceAttempt
from scheduler.host_table import HostView, WeighedView
from scheduler.objects.spec import RequestSpec
from scheduler.weights.base import BaseHostWeigher, Exclusion, weigh_hosts


def weigh(weighers: Sequence[BaseHostWeigher], spec: RequestSpec, passed: HostView,
          attempt: InstanceAttempt, *, vectorised: bool = True) -> WeighedView:
    excluded: list[Exclusion] = []
    with metrics.stage('weighing'):
        weighed = weigh_hosts(weighers, passed, spec, excluded=excluded, vectorised=vectorised,
                              shares=attempt.weigher_shares)
    attempt.weighed, attempt.exclusions = weighed, excluded
    if excluded:
        attempt.filter_steps.extend(exclusion_steps(excluded, len(passed)))
        attempt.hosts_after_filters = len(weighed)
    return weighed


def exclusion_steps(excluded: list[Exclusion],
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
