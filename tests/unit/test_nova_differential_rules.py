"""The differential test's documented-difference rules recognise exactly their case.

``tox -e nova-differential`` fails on any difference from Nova's code that no
rule in ``tests/nova_differential/known.py`` recognises; a rule that matched
more than its documented case would hide real differences. These need no Nova.
"""
from __future__ import annotations

import random

from tests.nova_differential import cloud, known
from tests.nova_differential.compute import WrittenCloud, WrittenHost


def _host(name: str = 'host01', host_ip: str = '192.0.2.11', **inventory) -> WrittenHost:
    host = cloud.draw_host(random.Random(1), 1, 1)
    host.name = name
    row = {'host_ip': host_ip, 'free_ram_mb': 1000, 'vcpus': 8, 'cpu_allocation_ratio': 1.0,
           'vcpus_used': 2, 'free_disk_gb': 50, 'disk_available_least': 50}
    return WrittenHost(host=host, compute_row=row, service_row={},
                       inventory=inventory or {'MEMORY_MB': (1000, 0, 1.0, 0),
                                               'VCPU': (8, 0, 1.0, 2),
                                               'DISK_GB': (50, 0, 1.0, 0)},
                       guests=[])


def _diff(filter_name: str, *, nova_passed: bool, ours_passed: bool, query: str | None = None,
          raised: str | None = None, aggregates: tuple = (), host: WrittenHost | None = None
          ) -> known.FilterDiff:
    return known.FilterDiff(filter_name, host or _host(), nova_passed, raised, ours_passed,
                            None, aggregates, {'query': query} if query else {})


def test_json_not_is_recognised_only_where_nova_passes_what_the_not_excludes():
    query = '["and", [">=", "$num_io_ops", 2], ["not", ["=", "$hypervisor_type", "Xen"]]]'
    assert known.filter_rule(_diff('JsonFilter', nova_passed=True, ours_passed=False,
                                   query=query))
    assert known.filter_rule(_diff('JsonFilter', nova_passed=False, ours_passed=True,
                                   query=query)) is None
    assert known.filter_rule(_diff('JsonFilter', nova_passed=True, ours_passed=False,
                                   query='["<", "$num_instances", 5]')) is None


def test_host_ip_is_recognised_only_when_the_query_names_the_hosts_own_address():
    named = '["or", ["=", "$host_ip", "192.0.2.11"], [">", "$hypervisor_version", 9]]'
    other = '["or", ["=", "$host_ip", "192.0.2.99"], [">", "$hypervisor_version", 9]]'
    assert known.filter_rule(_diff('JsonFilter', nova_passed=False, ours_passed=True,
                                   query=named))
    assert known.filter_rule(_diff('JsonFilter', nova_passed=False, ours_passed=True,
                                   query=other)) is None
    assert known.filter_rule(_diff('JsonFilter', nova_passed=True, ours_passed=False,
                                   query=named)) is None


def test_an_unparsable_aggregate_value_is_recognised_only_beside_a_valid_one():
    bad = cloud.Aggregate(1, 'u1', 'a1', ['host01'], {'max_io_ops_per_host': 'x'})
    good = cloud.Aggregate(2, 'u2', 'a2', ['host01'], {'max_io_ops_per_host': '3'})
    assert known.filter_rule(_diff('AggregateIoOpsFilter', nova_passed=True,
                                   ours_passed=False, aggregates=(bad, good)))
    assert known.filter_rule(_diff('AggregateIoOpsFilter', nova_passed=True,
                                   ours_passed=False, aggregates=(bad,))) is None
    assert known.filter_rule(_diff('AggregateIoOpsFilter', nova_passed=True,
                                   ours_passed=False, aggregates=(good,))) is None
    assert known.filter_rule(_diff('IoOpsFilter', nova_passed=True, ours_passed=False,
                                   aggregates=(bad, good))) is None


def test_a_numeric_operator_on_a_non_number_is_recognised_only_where_nova_raised():
    raised = "ValueError: could not convert string to float: 'many'"
    assert known.filter_rule(_diff('AggregateInstanceExtraSpecsFilter', nova_passed=False,
                                   ours_passed=False, raised=raised))
    assert known.filter_rule(_diff('AggregateInstanceExtraSpecsFilter', nova_passed=False,
                                   ours_passed=True, raised=raised)) is None
    # ... unless another of the host's aggregates has a value that meets the spec.
    two = (cloud.Aggregate(1, 'u1', 'a1', ['host01'], {'cpu_count': 'many'}),
           cloud.Aggregate(2, 'u2', 'a2', ['host01'], {'cpu_count': '16'}))
    assert known.filter_rule(_diff('AggregateInstanceExtraSpecsFilter', nova_passed=False,
                                   ours_passed=True, raised=raised, aggregates=two))
    assert known.filter_rule(_diff('AggregateInstanceExtraSpecsFilter', nova_passed=False,
                                   ours_passed=True)) is None
    assert known.filter_rule(_diff('JsonFilter', nova_passed=False, ours_passed=False,
                                   raised=raised)) is None


def test_free_amounts_from_placement_are_recognised_only_where_they_differ_from_the_row():
    equal = _host()   # Placement: 1000 MB free, the row: 1000 MB free
    overcommitted = _host('host02', **{'MEMORY_MB': (1000, 0, 1.5, 0)})
    same = WrittenCloud(case=None, hosts=[equal], aggregates=[])  # type: ignore[arg-type]
    differ = WrittenCloud(case=None, hosts=[equal, overcommitted],  # type: ignore[arg-type]
                          aggregates=[])
    names = frozenset({'host01', 'host02'})
    assert known.weight_rule(known.WeightDiff('RAMWeigher', same, {}, {}, names)) is None
    assert known.weight_rule(known.WeightDiff('RAMWeigher', differ, {}, {}, names))
    assert known.weight_rule(known.WeightDiff('IoOpsWeigher', differ, {}, {}, names)) is None


def test_a_missing_metric_is_recognised_only_when_exactly_the_hosts_without_it_are_left_out():
    with_metrics, without = _host('host01'), _host('host02')
    without.host.metrics = {}
    with_metrics.host.metrics = cloud._metrics(random.Random(2))
    written = WrittenCloud(case=None, hosts=[with_metrics, without],  # type: ignore[arg-type]
                           aggregates=[])
    offered = frozenset({'host01', 'host02'})
    error = 'ComputeHostMetricNotFound: Metric cpu.percent could not be found'

    def rule(ours: dict[str, float]) -> str | None:
        return known.weigher_raised_rule(
            known.WeightDiff('MetricsWeigher', written, {}, ours, offered), error)

    assert rule({'host01': 0.0})
    assert rule({'host01': 0.0, 'host02': 0.0}) is None
    assert known.weigher_raised_rule(
        known.WeightDiff('MetricsWeigher', written, {}, {'host01': 0.0}, offered),
        'KeyError: boom') is None


def test_a_case_is_drawn_again_the_same_from_its_seed_and_index():
    assert repr(cloud.draw_case(3, 7)) == repr(cloud.draw_case(3, 7))
    assert repr(cloud.draw_case(3, 7)) != repr(cloud.draw_case(3, 8))
