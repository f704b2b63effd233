"""Nova functional tests that cannot pass with any scheduler but nova-scheduler's own code.

Each reaches into nova-scheduler's modules (mocks or inspects
``nova.scheduler.manager``, ``host_manager``, ``filters``, ``weights`` or
``utils``), which do not run when this service is the scheduler. Each is listed
in doc/nova-compatibility.md with the line that does it, and the behaviour it
checks is proven by a test of ours named here.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownDifference:
    where: str      # file:line in Nova 34's nova/tests/functional
    summary: str    # what the line reaches into
    proven_by: str  # our test of the same behaviour


_F = 'nova.tests.functional.'

KNOWN_DIFFERENCES: dict[str, KnownDifference] = {
    _F + 'test_aggregates.TestAggregateMultiTenancyIsolationFilter'
         '.test_aggregate_multitenancy_isolation_filter': KnownDifference(
        where='test_aggregates.py:972',
        summary='wraps nova.scheduler.host_manager.HostManager.get_filtered_hosts to '
                'count filtered hosts',
        proven_by='tests/unit/test_filters_aggregate_isolation.py'),
}
