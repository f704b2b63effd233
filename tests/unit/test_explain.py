"""explain: the one-line NoValidHost reason and the log detail, from a RequestTrace."""
from __future__ import annotations

from collections import Counter

import pytest

from scheduler.explain import (
    MAX_REASON_LENGTH,
    InstanceAttempt,
    RequestTrace,
    failure_reason,
    log_lines,
    no_candidates_reason,
    nova_failure_reason,
)


def trace_with(*attempts: InstanceAttempt, num_instances: int | None = None,
               **fields) -> RequestTrace:
    trace = RequestTrace(num_instances=num_instances or len(attempts), query='resources=VCPU:1',
                         candidates=5, hosts=5, **fields)
    trace.attempts.extend(attempts)
    return trace


def placed(index: int, hosts_in: int = 5) -> InstanceAttempt:
    return InstanceAttempt(index=index, hosts_in=hosts_in, hosts_after_filters=hosts_in,
                           claimed_host=f'cn{index}')


def test_a_placement_error_is_the_reason_whatever_else_the_trace_holds():
    trace = trace_with(InstanceAttempt(index=0), placement_error='Placement unreachable after '
                                                                 '3 attempts (timeout)')
    trace.candidates = 0

    assert failure_reason(trace) == 'Placement unreachable after 3 attempts (timeout)'


def test_no_candidates_names_the_query_and_shortens_a_long_one():
    trace = RequestTrace(num_instances=1, query='required=' + 'CUSTOM_T,' * 100, candidates=0)

    reason = failure_reason(trace)

    assert reason == no_candidates_reason(trace)
    assert reason.startswith('Placement returned no allocation candidates for required=CUSTOM_T')
    assert reason.endswith('...')
    assert len(reason) < len('Placement returned no allocation candidates for ') + 201


def test_a_filter_that_emptied_the_list_of_a_single_instance_request_is_named():
    attempt = InstanceAttempt(index=0, hosts_in=3, filter_steps=[
        ('ComputeFilter', 3, {}),
        ('AvailabilityZoneFilter', 3, {'not in availability zone az1': 3})])

    assert failure_reason(trace_with(attempt)) == (
        '0/3 hosts available: AvailabilityZoneFilter removed 3 (not in availability zone az1)')


def test_several_reasons_of_one_filter_are_listed_most_frequent_first():
    attempt = InstanceAttempt(index=0, hosts_in=5, filter_steps=[
        ('ComputeFilter', 5, {'compute service is disabled': 1, 'compute service is down': 4})])

    assert failure_reason(trace_with(attempt)) == (
        '0/5 hosts available: ComputeFilter removed 5 (4 × compute service is down; '
        '1 × compute service is disabled)')


def test_a_later_instance_counts_the_hosts_excluded_for_earlier_ones_and_the_prefilter():
    failed = InstanceAttempt(index=2, hosts_in=2, filter_steps=[
        ('ServerGroupAntiAffinityFilter', 2, {'anti-affinity': 2})])
    trace = trace_with(placed(0, 4), placed(1, 3), failed,
                       prefilter_removed={'in ignore_hosts': 1})

    assert failure_reason(trace) == (
        '0/4 hosts available for instance 3 of 3: in ignore_hosts: 1; 2 excluded for earlier '
        'instances of this request; ServerGroupAntiAffinityFilter removed 2 (anti-affinity)')


def test_no_hosts_at_all_after_the_prefilter_says_so():
    trace = trace_with(InstanceAttempt(index=0, hosts_in=0),
                       prefilter_removed={'not in force_hosts': 4})

    assert failure_reason(trace) == '0/0 hosts available: not in force_hosts: 4; no hosts left'


def test_failed_claims_are_counted_by_reason_most_frequent_first():
    attempt = InstanceAttempt(index=1, hosts_in=3, hosts_after_filters=3,
                              claim_failures=Counter({'concurrent updates': 1,
                                                      'capacity exceeded': 2}))

    assert failure_reason(trace_with(placed(0), attempt)) == (
        'instance 2 of 2: claims failed on all 3 hosts that passed the filters '
        '(capacity exceeded: 2, concurrent updates: 1)')


def test_hosts_without_a_claim_attempt_say_no_candidate_was_left():
    attempt = InstanceAttempt(index=0, hosts_in=1, hosts_after_filters=1)

    assert failure_reason(trace_with(attempt)) == (
        'claims failed on all 1 hosts that passed the filters (no candidate left to claim)')


def test_a_trace_where_every_instance_was_placed_falls_back_to_novas_words():
    assert failure_reason(trace_with(placed(0))) == 'There are not enough hosts available.'


@pytest.mark.parametrize('trace', [
    RequestTrace(placement_error='Placement rejected the query (400): ' + 'x' * 5000),
    RequestTrace(candidates=0, query='resources=VCPU:1&' * 500),
    trace_with(InstanceAttempt(index=0, hosts_in=2, filter_steps=[
        (f'Filter{i}', 2, {'y' * 300: 1}) for i in range(20)])),
    trace_with(InstanceAttempt(index=0, hosts_in=2, hosts_after_filters=2,
                               claim_failures=Counter({f'reason {i} ' * 20: 1
                                                       for i in range(50)}))),
], ids=['placement error', 'query', 'filters', 'claims'])
def test_every_reason_is_bounded(trace):
    reason = failure_reason(trace)

    assert len(reason) <= MAX_REASON_LENGTH
    assert reason.endswith('...')


def test_log_lines_count_every_stage_and_name_the_chosen_host():
    failed = InstanceAttempt(index=1, hosts_in=3, filter_steps=[('ComputeFilter', 3, {'down': 1})],
                             hosts_after_filters=2,
                             claim_failures=Counter({'capacity exceeded': 2}))
    trace = trace_with(placed(0, 3), failed, request_filters=['compute_status_filter'])
    trace.limit = 1000

    lines = log_lines(trace)

    assert lines == [
        'query: resources=VCPU:1 -> 5 candidates on 5 hosts (limit 1000)',
        'request filters applied: compute_status_filter',
        "instance 1: 3 hosts; filters: none; claim failures: none; chosen: cn0",
        "instance 2: 3 hosts; filters: ComputeFilter 3->2; "
        "claim failures: {'capacity exceeded': 2}; chosen: -",
    ]


def test_novas_words_when_asked_for_them_empty_for_no_candidates_the_outage_still_said():
    no_candidates = RequestTrace(num_instances=1, query='resources=VCPU:1', candidates=0)
    filtered = trace_with(InstanceAttempt(index=0, hosts_in=3, hosts_after_filters=0,
                                          filter_steps=[('RamFilter', 3, {'no RAM': 3})]))
    outage = trace_with(InstanceAttempt(index=0), placement_error='Placement unreachable')

    assert nova_failure_reason(no_candidates) == ''
    assert nova_failure_reason(filtered) == 'There are not enough hosts available.'
    assert nova_failure_reason(outage) == 'Placement unreachable'


def test_hosts_set_aside_before_any_instance_was_tried_are_counted_by_why():
    trace = RequestTrace(num_instances=1, query='resources=VCPU:1', candidates=2,
                         prefilter_removed={'compute node not yet known to the scheduler': 2})

    assert failure_reason(trace) == ('0/2 hosts available: compute node not yet known to the '
                                     'scheduler: 2')


def test_no_candidates_quotes_the_query_a_user_may_read_when_there_is_one():
    trace = RequestTrace(num_instances=1, candidates=0,
                         query='member_of=in:7d0c2c2e-0000-4000-8000-000000000001',
                         query_for_users='member_of=in:<an aggregate>')

    assert failure_reason(trace) == ('Placement returned no allocation candidates for '
                                     'member_of=in:<an aggregate>')
