"""Nova functional tests that cannot pass with any scheduler but nova-scheduler's own code.

Each reaches into nova-scheduler's modules (mocks or inspects
``nova.scheduler.manager``, ``host_manager``, ``filters``, ``weights``,
``utils`` or the report client the scheduler queries Placement with), which
do not run when this service is the scheduler. Each is listed
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
_SERVER_GROUP_CLASSES = ('ServerGroupTestV21', 'ServerGroupTestV215', 'ServerGroupTestV264',
                         'ServerGroupTestV295')

_LATE_AFFINITY = {
    'affinity': KnownDifference(
        where='test_server_group.py:506',
        summary='mocks nova.scheduler.filters.affinity_filter.ServerGroupAffinityFilter'
                '.host_passes to let an affinity violation through to the compute',
        proven_by='tests/unit/test_filters.py::test_affinity_keeps_only_the_hosts_of_the_'
                  'group_and_does_not_say_which_they_are'),
    'anti_affinity': KnownDifference(
        where='test_server_group.py:550',
        summary='mocks nova.scheduler.filters.affinity_filter.ServerGroupAntiAffinityFilter'
                '.host_passes to let an anti-affinity violation through to the compute',
        proven_by='tests/unit/test_filters.py::test_anti_affinity_fails_a_host_running_a_'
                  'member_of_the_group; tests/functional/test_group_claims.py'),
}

KNOWN_DIFFERENCES: dict[str, KnownDifference] = {
    **{f'{_F}test_server_group.{cls}.test_failed_count_with_{policy}_violation': difference
       for cls in _SERVER_GROUP_CLASSES for policy, difference in _LATE_AFFINITY.items()},
    _F + 'test_routed_networks.RoutedNetworkTests'
         '.test_boot_with_immediate_port_fails_due_to_config': KnownDifference(
        where='test_routed_networks.py:509',
        summary='mocks nova.scheduler.client.report.SchedulerReportClient'
                '._get_provider_aggregates to hide the segment\'s aggregate',
        proven_by='tests/unit/test_request_filters_aggregates.py::test_a_port_on_a_subnet_'
                  'whose_segment_has_no_aggregate_says_which_subnet'),
    _F + 'test_aggregates.TestAggregateMultiTenancyIsolationFilter'
         '.test_aggregate_multitenancy_isolation_filter': KnownDifference(
        where='test_aggregates.py:972',
        summary='wraps nova.scheduler.host_manager.HostManager.get_filtered_hosts to '
                'count filtered hosts',
        proven_by='tests/unit/test_filters_aggregate_isolation.py::test_aggregate_multi_'
                  'tenancy_isolation'),
}
