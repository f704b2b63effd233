"""Stage ``filtering``: the hosts one instance of the request may go to.

The filters themselves are plugins (:mod:`scheduler.filters`); this runs them
in order and records, for the trace, how many hosts each removed and why.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence

from scheduler import metrics
from scheduler.explain import InstanceAttempt
from scheduler.filters.base import BaseHostFilter
from scheduler.filters.handler import apply_filters
from scheduler.host_table import HostView
from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

NOVA_CHECK_TYPE = '_nova_check_type'


def forcing_skips_filters(spec: RequestSpec) -> bool:
    """Nova skips the filters for forced hosts/nodes unless a check type is set
    (``HostManager.get_filtered_hosts``): a forced boot bypasses them, a rebuild
    check does not."""
    return bool(spec.force_hosts or spec.force_nodes) and not spec.scheduler_hints.get(
        NOVA_CHECK_TYPE)


def filter_hosts(filters: Sequence[BaseHostFilter], spec: RequestSpec,
                 hosts: HostView, *, index: int, attempt: InstanceAttempt,
                 rebuild: bool = False, vectorised: bool = True) -> HostView:
    """The hosts every filter passes for instance ``index`` (all of them, unfiltered,
    when an operator forced the host)."""
    if hosts and forcing_skips_filters(spec):
        # Nova: an operator who forces a host (az:host[:node]) gets it unfiltered.
        LOG.debug('host forced without %s: filters skipped for %d host(s)',
                  NOVA_CHECK_TYPE, len(hosts))
        attempt.filters_skipped = True
        passed = hosts
    else:
        with metrics.stage('filtering'):
            run = apply_filters(filters, hosts, spec, instance_index=index, rebuild=rebuild,
                                vectorised=vectorised)
        for step in run.steps:
            attempt.filter_steps.append((step.name, step.hosts_in, step.removed_counts()))
        attempt.steps = run.steps
        passed = run.hosts
    attempt.hosts_after_filters = len(passed)
    return passed
