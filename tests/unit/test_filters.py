"""Host filters and the filter handler: what passes, what is removed and why."""
from __future__ import annotations

import datetime
import logging
from collections import Counter

import pytest

from placement_client.models import AllocationRequest
from scheduler import host_table
from scheduler.exceptions import FilterError, SchedulerError
from scheduler.explain import InstanceAttempt, RequestTrace, log_lines
from scheduler.filters import handler
from scheduler.filters.affinity import (
    DifferentHostFilter,
    SameHostFilter,
    ServerGroupAffinityFilter,
    ServerGroupAntiAffinityFilter,
)
from scheduler.filters.all_hosts import AllHostsFilter
from scheduler.filters.base import BaseHostFilter, FilterResult, host_label
from scheduler.filters.compute import ComputeFilter
from scheduler.filters.handler import (
    SKIPPED_NO_HOSTS,
    SKIPPED_ON_REBUILD,
    SKIPPED_ONCE_PER_REQUEST,
    STOPPED_FILTERING,
    apply_filters,
)
from scheduler.host_table import as_view
from scheduler.objects.spec import InstanceGroup
from scheduler.pipeline.filtering import filter_hosts
from tests.builders import make_conf, make_host, make_spec, uuid_for

NOW = datetime.datetime(2025, 1, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)
VM1, VM2, VM3 = (uuid_for(f'vm{i}') for i in (1, 2, 3))


def names(hosts):
    return [h.host for h in hosts]


def compute_filter(**default):
    f = ComputeFilter()
    f.conf = make_conf(default=default)
    f.clock = lambda: NOW
    return f


# Test doubles written the plain Nova way ------------------------------------------------

class EvenHostsFilter(BaseHostFilter):
    """Passes hosts whose name ends in an even digit (Nova style: host_passes only)."""

    def host_passes(self, host_state, spec_obj):
        return int(host_state.host[-1]) % 2 == 0


class ExplainedEvenHostsFilter(EvenHostsFilter):
    failure_reason = 'host number is odd'


class InheritsExplanation(ExplainedEvenHostsFilter):
    pass


class RejectAllOnce(BaseHostFilter):
    run_filter_once_per_request = True

    def host_passes(self, host_state, spec_obj):
        return False


class RejectAllOnRebuild(BaseHostFilter):
    RUN_ON_REBUILD = True
    failure_reason = 'rebuild check failed'

    def host_passes(self, host_state, spec_obj):
        return False


class CountingFilter(BaseHostFilter):
    def __init__(self):
        self.calls = 0

    def host_passes(self, host_state, spec_obj):
        self.calls += 1
        return True


class ExplodingFilter(BaseHostFilter):
    def host_passes(self, host_state, spec_obj):
        raise KeyError('stats')


class NeitherMethodFilter(BaseHostFilter):
    pass


class LastTwoFilter(BaseHostFilter):
    """Judges hosts together (overrides filter_all) and answers in reverse order."""

    failure_reason = 'not among the last two'

    def filter_all(self, hosts, spec_obj):
        return list(reversed(list(hosts)[-2:]))


class StopFilteringFilter(BaseHostFilter):
    def filter_all(self, hosts, spec_obj):
        return None


# FilterResult and BaseHostFilter ----------------------------------------------------------

def test_filter_result_is_an_immutable_verdict_with_a_reason():
    result = FilterResult.fail('compute service is disabled')
    assert (result.passed, result.reason) == (False, 'compute service is disabled')
    assert FilterResult.ok() == FilterResult(True, None)
    with pytest.raises(AttributeError):
        result.passed = True  # type: ignore[misc]


def test_a_nova_style_filter_fails_hosts_with_a_default_reason_naming_its_class():
    result = EvenHostsFilter().filter_result(make_host('host1'), make_spec())
    assert result == FilterResult(False, 'rejected by EvenHostsFilter')
    assert EvenHostsFilter().filter_result(make_host('host2'), make_spec()).passed


def test_a_declared_failure_reason_is_used_and_inherited():
    assert ExplainedEvenHostsFilter().filter_result(
        make_host('host1'), make_spec()).reason == 'host number is odd'
    assert InheritsExplanation.failure_reason == 'host number is odd'


def test_default_failure_reason_names_the_subclass_not_its_parent():
    class Sub(EvenHostsFilter):
        pass

    assert Sub.failure_reason == 'rejected by Sub'


def test_built_in_filters_answer_host_passes_like_filter_result():
    spec = make_spec()
    f = compute_filter()
    assert f.host_passes(make_host('up'), spec) is True
    assert f.host_passes(make_host('off', disabled=True), spec) is False


def test_a_filter_implementing_neither_method_says_so():
    with pytest.raises(NotImplementedError, match='NeitherMethodFilter'):
        NeitherMethodFilter().filter_result(make_host('host1'), make_spec())


def test_once_per_request_filters_run_only_for_the_first_instance():
    assert RejectAllOnce().run_filter_for_index(0)
    assert not RejectAllOnce().run_filter_for_index(1)
    assert EvenHostsFilter().run_filter_for_index(5)


def test_host_label_adds_the_node_only_when_it_differs_from_the_host():
    assert host_label(make_host('cmp1')) == 'cmp1'
    assert host_label(make_host('ironic', nodename='node-7')) == 'ironic (node-7)'


# apply_filters -------------------------------------------------------------------------

def test_passing_hosts_keep_their_input_order():
    hosts = [make_host(f'host{i}') for i in (4, 1, 2, 3, 0)]
    run = apply_filters([EvenHostsFilter()], hosts, make_spec(), instance_index=0)
    assert names(run.hosts) == ['host4', 'host2', 'host0']


def test_each_filter_sees_what_the_previous_one_left_in_configured_order():
    hosts = [make_host(f'host{i}') for i in range(4)] + [make_host('off6', disabled=True)]
    run = apply_filters([EvenHostsFilter(), compute_filter()], hosts, make_spec(),
                        instance_index=0)
    assert [(s.name, s.hosts_in, s.hosts_out) for s in run.steps] == [
        ('EvenHostsFilter', 5, 3), ('ComputeFilter', 3, 2)]
    assert names(run.hosts) == ['host0', 'host2']


def test_removed_hosts_are_grouped_by_reason():
    hosts = [make_host('a1', disabled=True), make_host('a2', forced_down=True),
             make_host('a3', disabled=True), make_host('a4')]
    run = apply_filters([compute_filter()], hosts, make_spec(), instance_index=0)
    assert run.steps[0].removed == {
        'compute service is disabled': ['a1', 'a3'],
        'compute service is forced down': ['a2'],
    }


def test_removed_hosts_are_named_only_when_read(monkeypatch):
    named = []
    label = host_table.RowLabels._label
    monkeypatch.setattr(host_table.RowLabels, '_label',
                        lambda self, row: named.append(row) or label(self, row))
    hosts = [make_host('a1', disabled=True), make_host('a2'), make_host('a3', disabled=True),
             make_host('n1', nodename='n1-node', forced_down=True)]
    run = apply_filters([compute_filter()], hosts, make_spec(), instance_index=0)
    removed = run.steps[0].removed
    assert [len(names) for names in removed.values()] == [2, 1]
    assert run.steps[0].removed_count == 3
    assert named == []
    assert removed['compute service is disabled'][1] == 'a3'
    assert removed['compute service is disabled'][-2:] == ['a1', 'a3']
    assert list(removed['compute service is forced down']) == ['n1 (n1-node)']
    assert named


def test_what_every_request_records_of_the_removed_hosts_groups_none_of_them(monkeypatch):
    grouped = []
    monkeypatch.setattr(host_table.RowLabels, '__init__',
                        lambda self, *args: grouped.append(args))
    hosts = [make_host('a1', disabled=True), make_host('a2'), make_host('a3', disabled=True),
             make_host('a4', forced_down=True)]
    attempt = InstanceAttempt(index=0)
    filter_hosts([compute_filter()], make_spec(), as_view(hosts), index=0, attempt=attempt)
    assert attempt.filter_steps == [('ComputeFilter', 4, {
        'compute service is disabled': 2, 'compute service is forced down': 1})]
    step = attempt.steps[0]
    assert step.removed_count == 3 and len(step.removed) == 2 and step.removed
    assert grouped == []


def test_what_every_request_logs_of_the_removed_hosts_counts_none_of_their_reasons(
        monkeypatch):
    counted = []
    monkeypatch.setattr(handler, 'Counter', lambda items: counted.append(1) or Counter(items))
    hosts = [make_host('a1', disabled=True), make_host('a2'), make_host('a3', forced_down=True)]
    trace = RequestTrace(num_instances=1)
    attempt = trace.new_attempt(0, len(hosts))
    filter_hosts([compute_filter()], make_spec(), as_view(hosts), index=0, attempt=attempt)

    assert 'filters: ComputeFilter 3->1;' in '\n'.join(log_lines(trace))
    assert counted == []
    assert dict(attempt.filter_steps[0][2]) == {'compute service is disabled': 1,
                                                 'compute service is forced down': 1}
    assert counted == [1]


def test_once_per_request_filters_are_skipped_after_the_first_instance():
    hosts = [make_host('host1'), make_host('host2')]
    first = apply_filters([RejectAllOnce()], hosts, make_spec(), instance_index=0)
    later = apply_filters([RejectAllOnce()], hosts, make_spec(), instance_index=1)
    assert first.hosts == []
    assert later.hosts == hosts
    assert later.steps[0].skipped == SKIPPED_ONCE_PER_REQUEST
    assert not later.steps[0].ran


def test_on_rebuild_only_run_on_rebuild_filters_run_and_the_others_pass_everything():
    hosts = [make_host('host1'), make_host('host2')]
    run = apply_filters([RejectAllOnce(), EvenHostsFilter()], hosts, make_spec(rebuild=True),
                        instance_index=0, rebuild=True)
    assert run.hosts == hosts
    assert [s.skipped for s in run.steps] == [SKIPPED_ON_REBUILD, SKIPPED_ON_REBUILD]

    run = apply_filters([RejectAllOnRebuild()], hosts, make_spec(rebuild=True),
                        instance_index=0, rebuild=True)
    assert run.hosts == []
    assert run.steps[0].removed == {'rebuild check failed': ['host1', 'host2']}


def test_filtering_stops_when_no_host_is_left_and_later_filters_are_recorded_not_run():
    counting = CountingFilter()
    hosts = [make_host('host1'), make_host('host3')]
    run = apply_filters([EvenHostsFilter(), counting], hosts, make_spec(), instance_index=0)
    assert run.hosts == []
    assert counting.calls == 0
    assert run.steps[1].skipped == SKIPPED_NO_HOSTS
    assert run.emptied_by is not None and run.emptied_by.name == 'EvenHostsFilter'


def test_a_run_with_hosts_left_was_emptied_by_no_filter():
    run = apply_filters([EvenHostsFilter()], [make_host('host2')], make_spec(),
                        instance_index=0)
    assert run.emptied_by is None


def test_no_filters_return_every_host():
    hosts = [make_host('host1')]
    assert apply_filters([], hosts, make_spec(), instance_index=0).hosts == hosts


def test_a_plugin_exception_becomes_a_filter_error_naming_the_filter_and_host():
    with pytest.raises(FilterError) as caught:
        apply_filters([ExplodingFilter()], [make_host('host1')], make_spec(), instance_index=0)
    err = caught.value
    assert isinstance(err, SchedulerError)
    assert (err.filter_name, err.host) == ('ExplodingFilter', 'host1')
    assert 'ExplodingFilter' in str(err) and 'KeyError' in str(err)
    assert isinstance(err.__cause__, KeyError)


def test_a_filter_without_an_implementation_fails_as_a_filter_error():
    with pytest.raises(FilterError, match='NeitherMethodFilter'):
        apply_filters([NeitherMethodFilter()], [make_host('h1')], make_spec(), instance_index=0)


def test_a_filter_all_override_is_honoured_in_input_order_with_its_failure_reason():
    hosts = [make_host(f'host{i}') for i in range(4)]
    run = apply_filters([LastTwoFilter()], hosts, make_spec(), instance_index=0)
    assert names(run.hosts) == ['host2', 'host3']
    assert run.steps[0].removed == {'not among the last two': ['host0', 'host1']}


def test_filter_all_returning_none_removes_every_host():
    hosts = [make_host('host1'), make_host('host2')]
    run = apply_filters([StopFilteringFilter()], hosts, make_spec(), instance_index=0)
    assert run.hosts == []
    assert run.steps[0].removed == {STOPPED_FILTERING: ['host1', 'host2']}


def test_counts_are_logged_at_info_in_one_line_and_removals_by_reason_at_debug(caplog):
    caplog.set_level(logging.DEBUG, logger='scheduler.filters.handler')
    hosts = [make_host(f'host{i}') for i in range(4)]
    apply_filters([EvenHostsFilter(), RejectAllOnce()], hosts, make_spec(), instance_index=1)
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(info) == 1
    assert 'Filter EvenHostsFilter returned 2 of 4 hosts' in info[0]
    assert 'RejectAllOnce not run (runs once per request)' in info[0]
    assert any('rejected by EvenHostsFilter (2): host1, host3' in m for m in debug)


# ComputeFilter --------------------------------------------------------------------------

def test_compute_filter_runs_once_per_request_and_not_on_rebuild():
    assert ComputeFilter.run_filter_once_per_request is True
    assert ComputeFilter.RUN_ON_REBUILD is False


def test_compute_filter_passes_an_enabled_host_without_liveness_data():
    assert compute_filter().filter_result(make_host('h'), make_spec()).passed


def test_compute_filter_fails_a_disabled_service_without_quoting_the_operator_reason():
    result = compute_filter().filter_result(
        make_host('h', disabled=True, disabled_reason='ticket 42 bob'), make_spec())
    assert result == FilterResult(False, 'compute service is disabled')


def test_compute_filter_fails_a_forced_down_service():
    result = compute_filter().filter_result(make_host('h', forced_down=True), make_spec())
    assert result == FilterResult(False, 'compute service is forced down')


def test_compute_filter_fails_a_service_not_seen_up_within_service_down_time():
    stale = make_host('h', last_seen_up=NOW - datetime.timedelta(seconds=61))
    result = compute_filter().filter_result(stale, make_spec())
    assert result == FilterResult(
        False, 'compute service not seen up for 61s (service_down_time 60s)')


def test_compute_filter_passes_a_service_seen_up_within_service_down_time():
    fresh = make_host('h', last_seen_up=NOW - datetime.timedelta(seconds=60))
    assert compute_filter().filter_result(fresh, make_spec()).passed


def test_compute_filter_reads_service_down_time_from_the_configuration():
    stale = make_host('h', last_seen_up=NOW - datetime.timedelta(seconds=200))
    assert not compute_filter().filter_result(stale, make_spec()).passed
    assert compute_filter(service_down_time=300).filter_result(stale, make_spec()).passed


def test_compute_filter_reads_naive_timestamps_as_utc():
    naive = (NOW - datetime.timedelta(seconds=10)).replace(tzinfo=None)
    assert compute_filter().filter_result(make_host('h', last_seen_up=naive), make_spec()).passed


def test_compute_filter_fails_a_heartbeat_too_far_in_the_future_like_nova():
    future = make_host('h', last_seen_up=NOW + datetime.timedelta(seconds=120))
    result = compute_filter().filter_result(future, make_spec())
    assert not result.passed and 'in the future' in result.reason


# Server groups ------------------------------------------------------------------------

def group(policy, *, members=(), hosts=(), rules=None, legacy_policies=False):
    return InstanceGroup(uuid=uuid_for('group'), policy=None if legacy_policies else policy,
                         policies=[policy] if legacy_policies else [],
                         members=list(members), hosts=list(hosts), rules=dict(rules or {}))


def test_group_filters_pass_every_host_without_a_group():
    host, spec = make_host('h', instances=[VM1]), make_spec()
    assert ServerGroupAffinityFilter().filter_result(host, spec).passed
    assert ServerGroupAntiAffinityFilter().filter_result(host, spec).passed


def test_affinity_passes_every_host_while_the_group_has_no_hosts():
    spec = make_spec(group=group('affinity'))
    assert ServerGroupAffinityFilter().filter_result(make_host('any'), spec).passed


def test_affinity_keeps_only_the_hosts_of_the_group_and_does_not_say_which_they_are():
    spec = make_spec(group=group('affinity', hosts=['cmp1']))
    assert ServerGroupAffinityFilter().filter_result(make_host('cmp1'), spec).passed
    result = ServerGroupAffinityFilter().filter_result(make_host('cmp2'), spec)
    assert result == FilterResult(False, 'affinity: members of group are on other hosts')


def test_affinity_reads_the_deprecated_policies_list_too():
    spec = make_spec(group=group('affinity', hosts=['cmp1'], legacy_policies=True))
    assert not ServerGroupAffinityFilter().filter_result(make_host('cmp2'), spec).passed


def test_affinity_ignores_groups_with_another_policy():
    spec = make_spec(group=group('anti-affinity', hosts=['cmp1']))
    assert ServerGroupAffinityFilter().filter_result(make_host('cmp2'), spec).passed


def test_anti_affinity_fails_a_host_running_a_member_of_the_group():
    spec = make_spec(instance_uuid=VM3, group=group('anti-affinity', members=[VM1, VM3]))
    result = ServerGroupAntiAffinityFilter().filter_result(
        make_host('cmp1', instances=[VM1]), spec)
    assert result == FilterResult(
        False, 'anti-affinity: 1 member of group already on host (max 1)')


def test_anti_affinity_does_not_count_instances_outside_the_group():
    spec = make_spec(instance_uuid=VM3, group=group('anti-affinity', members=[VM1, VM3]))
    assert ServerGroupAntiAffinityFilter().filter_result(
        make_host('cmp1', instances=[VM2]), spec).passed


def test_anti_affinity_allows_max_server_per_host_members():
    rules = {'max_server_per_host': '2'}
    spec = make_spec(instance_uuid=VM3,
                     group=group('anti-affinity', members=[VM1, VM2, VM3], rules=rules))
    f = ServerGroupAntiAffinityFilter()
    assert f.filter_result(make_host('one', instances=[VM1]), spec).passed
    result = f.filter_result(make_host('two', instances=[VM1, VM2]), spec)
    assert result.reason == 'anti-affinity: 2 members of group already on host (max 2)'


def test_anti_affinity_passes_the_host_the_moving_instance_already_runs_on():
    spec = make_spec(instance_uuid=VM1, group=group('anti-affinity', members=[VM1, VM2]))
    assert ServerGroupAntiAffinityFilter().filter_result(
        make_host('source', instances=[VM1, VM2]), spec).passed


def test_anti_affinity_holds_between_instances_of_one_request_through_consume():
    anti = group('anti-affinity', members=[VM1, VM2])
    hosts = [make_host('cmp1'), make_host('cmp2')]
    first = apply_filters([ServerGroupAntiAffinityFilter()], hosts,
                          make_spec(instance_uuid=VM1, group=anti), instance_index=0)
    chosen = first.hosts[0]
    chosen.consume(chosen.allocation_candidates[0], VM1)
    second = apply_filters([ServerGroupAntiAffinityFilter()], hosts,
                           make_spec(instance_uuid=VM2, group=anti), instance_index=1)
    assert names(second.hosts) == ['cmp2']


def test_anti_affinity_reads_the_deprecated_policies_list_too():
    spec = make_spec(instance_uuid=VM2,
                     group=group('anti-affinity', members=[VM1, VM2], legacy_policies=True))
    assert not ServerGroupAntiAffinityFilter().filter_result(
        make_host('cmp1', instances=[VM1]), spec).passed


def test_group_filters_run_for_every_instance_and_not_on_rebuild():
    for cls in (ServerGroupAffinityFilter, ServerGroupAntiAffinityFilter):
        assert (cls.run_filter_once_per_request, cls.RUN_ON_REBUILD) == (False, False)


# same_host / different_host hints ------------------------------------------------------

def test_same_host_passes_every_host_without_the_hint():
    assert SameHostFilter().filter_result(make_host('h'), make_spec()).passed


def test_same_host_keeps_hosts_running_one_of_the_listed_instances():
    spec = make_spec(hints={'same_host': [VM1, VM2]})
    assert SameHostFilter().filter_result(make_host('a', instances=[VM2]), spec).passed
    result = SameHostFilter().filter_result(make_host('b', instances=[VM3]), spec)
    assert not result.passed
    assert result.reason.startswith('same_host: host runs none of the instances')
    assert VM1 in result.reason


def test_same_host_accepts_a_single_uuid_hint():
    spec = make_spec(hints={'same_host': VM1})
    assert SameHostFilter().filter_result(make_host('a', instances=[VM1]), spec).passed
    assert not SameHostFilter().filter_result(make_host('b'), spec).passed


def test_different_host_removes_hosts_running_a_listed_instance():
    spec = make_spec(hints={'different_host': [VM1, VM2]})
    result = DifferentHostFilter().filter_result(make_host('a', instances=[VM2, VM3]), spec)
    assert result == FilterResult(False, f'different_host: host runs instance {VM2}')
    assert DifferentHostFilter().filter_result(make_host('b', instances=[VM3]), spec).passed


def test_different_host_passes_every_host_without_the_hint():
    assert DifferentHostFilter().filter_result(make_host('a', instances=[VM1]),
                                               make_spec()).passed


def test_hint_filters_and_all_hosts_run_once_per_request():
    for cls in (SameHostFilter, DifferentHostFilter, AllHostsFilter):
        assert cls.run_filter_once_per_request is True
        assert cls.RUN_ON_REBUILD is False


def test_all_hosts_filter_passes_every_host():
    hosts = [make_host('a', disabled=True), make_host('b')]
    assert apply_filters([AllHostsFilter()], hosts, make_spec(), instance_index=0).hosts == hosts


def test_builder_hosts_carry_resources_and_candidates_from_their_summaries():
    host = make_host('h', vcpu=(8, 2), ram=(4096, 1024), disk=(100, 10),
                     resources={'CUSTOM_GPU': (2, 1)}, traits=['HW_CPU_X86_AVX2'])
    assert (host.vcpus_total, host.vcpus_used) == (8, 2)
    assert (host.free_ram_mb, host.free_disk_mb) == (3072, 90 * 1024)
    assert host.free('CUSTOM_GPU') == 1
    assert host.traits == frozenset({'HW_CPU_X86_AVX2'})
    assert host.allocation_candidates == [
        AllocationRequest(allocations={host.uuid: {'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}})]
