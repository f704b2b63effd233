"""Nova functional tests that cannot pass with any scheduler but nova-scheduler's own code.

Two kinds, both rare and each listed by test (or by class, where a setUp does it):

most reach into nova-scheduler's modules (mock or inspect
``nova.scheduler.manager``, ``host_manager``, ``filters``, ``weights``,
``utils`` or the report client the scheduler queries Placement with), which
do not run when this service is the scheduler; one pins a nova-scheduler bug
that this service does not have. Each is listed
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
    _F + 'libvirt.test_vgpu.VGPUTests.test_multiple_instance_create_filling_up_capacity':
        KnownDifference(
            where='libvirt/test_vgpu.py:288',
            summary='reaches into nothing, but pins nova-scheduler bug 1874664 (a multi-create '
                    'cannot fill a second nested provider of one host): this service places '
                    'both instances, and the test expects the failure',
            proven_by='tests/functional/test_select_destinations.py::test_a_multi_create_fills'
                      '_a_host_s_second_nested_provider_after_the_first'),
    **{f'{_F}test_servers.ConsumerGenerationConflictTest.{name}': KnownDifference(
        where=where,
        summary='mocks keystoneauth1.adapter.Adapter.put, the call nova-scheduler\'s report '
                'client claims with, to fake a consumer generation conflict on the claim '
                '(this service\'s client sends through Adapter.request)',
        proven_by='tests/unit/test_claims.py::test_a_consumer_generation_conflict_that_'
                  'persists_is_bounded')
       for name, where in (
           ('test_create_server_fails_as_placement_reports_consumer_conflict',
            'test_servers.py:5192'),
           ('test_evacuate_fails_allocating_on_dest_host', 'test_servers.py:5611'),
           ('test_migrate_claim_on_dest_fails', 'test_servers.py:5225'))},
    _F + 'test_servers.ServerDeleteBuildTests.test_delete_stuck_build_instance_after_claim':
        KnownDifference(
            where='test_servers.py:4224',
            summary='mocks nova.scheduler.manager.SchedulerManager._ensure_sufficient_hosts '
                    'to fail the request after the claim',
            proven_by='tests/unit/test_manager.py::test_an_unexpected_error_after_a_claim_'
                      'rolls_the_claim_back'),
    **{f'{_F}test_servers.{cls}.test_allocation_fails_during_reschedule': KnownDifference(
        where='test_servers.py:4114',
        summary='mocks nova.scheduler.utils.claim_resources with [pass, fail], counting '
                'nova-scheduler\'s own claim as the first call; with this service the '
                'first call is the conductor\'s reschedule claim, which then passes',
        proven_by='tests/functional/test_select_destinations.py::test_one_instance_is_'
                  'claimed_in_placement_and_alternates_come_from_its_cell')
       for cls in ('ServerRescheduleTests', 'ServerRescheduleTestsWithNestedResourcesRequest')},
    _F + 'regressions.test_bug_2125935.TestImagePropsWeigher.test_boot': KnownDifference(
        where='regressions/test_bug_2125935.py:53',
        summary='mocks nova.weights.LOG.debug, the log of raw weights of nova-scheduler\'s '
                'weight handler, and asserts on it; the placements it asserts hold with this '
                'service (measured with those log assertions skipped). gap: this service\'s '
                'ImagePropertiesWeigher weighs every host 0, as its host catalog keeps no '
                'image properties of the instances on a host (scheduler/weights/image_props.py); '
                'the test\'s own HostNameWeigher decides the same hosts either way',
        proven_by='tests/unit/test_weighers_image_props.py::test_a_positive_multiplier_packs_'
                  'alike_images_when_instances_carry_their_properties'),
    _F + 'test_aggregates.TestAggregateMultiTenancyIsolationFilter'
         '.test_aggregate_multitenancy_isolation_filter': KnownDifference(
        where='test_aggregates.py:972',
        summary='wraps nova.scheduler.host_manager.HostManager.get_filtered_hosts to '
                'count filtered hosts',
        proven_by='tests/unit/test_filters_aggregate_isolation.py::test_aggregate_multi_'
                  'tenancy_isolation'),
}

#: Whole test classes whose setUp reaches into nova-scheduler: every test of the class (and
#: of its subclasses, listed) is a documented difference. Keyed by ``module.Class``.
_NUMA_SETUP = KnownDifference(
    where='libvirt/test_numa_servers.py:46',
    summary='setUp reads self.scheduler.manager.host_manager.filter_cls_map and wraps '
            'nova.scheduler.filters.numa_topology_filter.NUMATopologyFilter.host_passes '
            'in a mock the tests count calls of',
    proven_by='tests/functional/test_numa_pci_filters.py::test_a_two_node_guest_lands_only_'
              'on_the_host_whose_topology_fits; tests/unit/test_filters_numa_topology.py')
_PCI_SETUP = KnownDifference(
    where='libvirt/test_pci_sriov_servers.py:113',
    summary='setUp (_PCIServersTestBase) reads self.scheduler.manager.host_manager'
            '.filter_cls_map and wraps nova.scheduler.filters.pci_passthrough_filter'
            '.PciPassthroughFilter.host_passes in a mock the tests count calls of',
    proven_by='tests/functional/test_numa_pci_filters.py::test_pci_devices_from_the_hosts_'
              'file_pools_go_to_the_host_that_has_them; '
              'tests/unit/test_filters_pci_passthrough.py')

_PCI_NUMA_SOCKET_SETUP = KnownDifference(
    where='regressions/test_bug_1995153.py:62',
    summary='setUp reads self.scheduler.manager.host_manager.filter_cls_map and wraps '
            'nova.scheduler.filters.pci_passthrough_filter.PciPassthroughFilter.host_passes '
            'in a mock the test asserts was called',
    proven_by='tests/functional/test_numa_pci_filters.py::test_pci_devices_from_the_hosts_'
              'file_pools_go_to_the_host_that_has_them; '
              'tests/unit/test_filters_pci_passthrough.py')

KNOWN_CLASSES: dict[str, KnownDifference] = {
    **{f'{_F}libvirt.test_numa_servers.{cls}': _NUMA_SETUP for cls in (
        'NUMAServersTest', 'NUMAServerTestWithCountingQuotaFromPlacement',
        'NUMAServersRebuildTests', 'NUMAServersWithNetworksTest', 'ReshapeForPCPUsTest')},
    **{f'{_F}libvirt.test_pci_sriov_servers.{cls}': _PCI_SETUP for cls in (
        'PCIResourceRequestReschedulingTest', 'PCIServersTest',
        'PCIServersWithPortNUMAPoliciesTest', 'PCIServersWithPreferredNUMATest',
        'PCIServersWithRequiredNUMATest', 'PCIServersWithSRIOVAffinityPoliciesTest',
        'RemoteManagedServersTest', 'SRIOVAttachDetachTest', 'SRIOVServersTest',
        'TestPackNUMACellsWithPCIDevices', 'VDPAServersTest')},
    **{f'{_F}libvirt.test_pci_in_placement.{cls}': _PCI_SETUP for cls in (
        'PlacementPCIReportingTests', 'PlacementPCIInventoryReportingTests',
        'PlacementPCIAllocationHealingTests', 'SimpleRCAndTraitBasedPCIAliasTests',
        'RCAndTraitBasedPCIAliasTests')},
    # The regressions classes built on _PCIServersTestBase (test_pci_sriov_servers or
    # test_pci_in_placement's PlacementPCIReportingTests).
    **{f'{_F}regressions.{cls}': _PCI_SETUP for cls in (
        'test_bug_1983753.TestPciResize',
        'test_bug_2098496.PCIInPlacementCreateAfterDeleteTestCase',
        'test_bug_2140631.TestBug2140631PCI')},
    _F + 'regressions.test_bug_1995153.Bug1995153RegressionTest': _PCI_NUMA_SOCKET_SETUP,
}


def documented(test_id: str) -> KnownDifference | None:
    """The documented reason ``test_id`` cannot pass with this service, if any."""
    return KNOWN_DIFFERENCES.get(test_id) or KNOWN_CLASSES.get(test_id.rsplit('.', 1)[0])
