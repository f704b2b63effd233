"""BaseCandidateFilter: a host keeps the allocation candidates that pass, in order."""
from __future__ import annotations

from placement_client.models import AllocationRequest
from scheduler.filters.base import FilterResult
from scheduler.filters.candidate import BaseCandidateFilter, RequestMemo
from scheduler.filters.handler import apply_filters
from tests.builders import make_host, make_spec, uuid_for


def candidate(gpus: int) -> AllocationRequest:
    return AllocationRequest(allocations={uuid_for('cn1'): {'VCPU': 1},
                                          uuid_for(f'gpu{gpus}'): {'VGPU': gpus}})


class EvenGpus(BaseCandidateFilter):
    """Passes the candidates with an even number of VGPUs; records what each takes."""

    def __init__(self, verdict=None):
        self.verdict = verdict
        self.judged = []

    def host_verdict(self, host_state, spec_obj):
        return self.verdict

    def candidate_passes(self, host_state, spec_obj, allocation_request):
        self.judged.append(allocation_request)
        if allocation_request is None:
            return FilterResult.fail('judged as a whole')
        gpus = sum(r.get('VGPU', 0) for r in allocation_request.allocations.values())
        if gpus % 2:
            return FilterResult.fail(f'{gpus} is odd')
        self.record_usage(host_state, allocation_request, 'gpus',
                          lambda h: h.stats.__setitem__('gpus_taken', str(gpus)))
        return FilterResult.ok()


def test_the_passing_candidates_stay_in_their_order():
    candidates = [candidate(2), candidate(1), candidate(4), candidate(3), candidate(6)]
    host = make_host('cn1', allocation_candidates=candidates)

    assert EvenGpus().filter_result(host, make_spec()).passed
    assert host.allocation_candidates == [candidates[0], candidates[2], candidates[4]]


def test_a_host_without_a_passing_candidate_fails_with_the_last_rejected_reason():
    host = make_host('cn1', allocation_candidates=[candidate(1), candidate(3)])

    result = EvenGpus().filter_result(host, make_spec())

    assert (result.passed, result.reason) == (False, '3 is odd')
    assert host.allocation_candidates == []


def test_a_verdict_for_the_whole_host_judges_no_candidate():
    host = make_host('cn1', allocation_candidates=[candidate(1)])
    f = EvenGpus(verdict=FilterResult.ok())

    assert f.filter_result(host, make_spec()).passed
    assert f.judged == [] and len(host.allocation_candidates) == 1


def test_a_host_without_candidates_is_judged_once_as_a_whole():
    f = EvenGpus()

    result = f.filter_result(make_host('cn1', allocation_candidates=[]), make_spec())

    assert (result.passed, result.reason, f.judged) == (False, 'judged as a whole', [None])


def test_what_a_candidate_takes_applies_only_when_that_candidate_is_placed():
    two, four = candidate(2), candidate(4)
    host = make_host('cn1', allocation_candidates=[two, four])
    assert EvenGpus().filter_result(host, make_spec()).passed

    host.consume(four, 'vm-1')

    assert host.stats['gpus_taken'] == '4'
    assert host.candidate_usage == {}  # the others' records are stale now


def test_the_handler_removes_hosts_whose_candidates_all_fail_with_that_reason():
    keep = make_host('cn1', allocation_candidates=[candidate(2)])
    drop = make_host('cn2', allocation_candidates=[candidate(1)])

    run = apply_filters([EvenGpus()], [keep, drop], make_spec(), instance_index=0)

    assert run.hosts == [keep]
    assert run.steps[0].removed == {'1 is odd': ['cn2']}


def test_a_request_memo_computes_once_per_spec_and_key():
    memo, calls = RequestMemo(), []
    spec = make_spec()

    def compute():
        calls.append(1)
        return len(calls)

    assert [memo.get(spec, 'k', compute) for _ in range(3)] == [1, 1, 1]
    assert memo.get(spec, 'changed', compute) == 2
    assert memo.get(make_spec(), 'changed', compute) == 3


class EvenGpusByKey(EvenGpus):
    def candidate_key(self, host_state, spec_obj, allocation_request):
        return sum(r.get('VGPU', 0) for r in allocation_request.allocations.values())


def test_candidates_that_look_alike_to_the_filter_are_judged_once_and_share_its_usage():
    first, odd, alike = candidate(2), candidate(1), AllocationRequest(
        allocations={uuid_for('cn1'): {'VCPU': 1}, uuid_for('gpu-other'): {'VGPU': 2}})
    host = make_host('cn1', allocation_candidates=[first, odd, alike])
    f = EvenGpusByKey()

    assert f.filter_result(host, make_spec()).passed

    assert f.judged == [first, odd]
    assert host.allocation_candidates == [first, alike]
    host.consume(alike, 'vm-1')
    assert host.stats['gpus_taken'] == '2'
