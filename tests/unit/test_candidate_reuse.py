"""Reusing a Placement answer within a window: what a reused answer shows."""
from __future__ import annotations

from placement_client.models import AllocationRequest, Candidates, ProviderSummary, ResourceUsage
from scheduler.catalog import HostCatalog
from scheduler.host_table import HostTable
from scheduler.pipeline.candidate_reuse import CandidateReuse
from tests.builders import CELL, uuid_for

CN1, CN2 = uuid_for('cn1'), uuid_for('cn2')


def answer() -> Candidates:
    summaries = {rp: ProviderSummary(rp, rp, None, {'VCPU': ResourceUsage(8, 2),
                                                    'MEMORY_MB': ResourceUsage(8192, 0)},
                                     frozenset())
                 for rp in (CN1, CN2)}
    requests = tuple(AllocationRequest({rp: {'VCPU': 2, 'MEMORY_MB': 1024}}) for rp in (CN1, CN2))
    return Candidates(requests, summaries, '1.36')


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_within_the_window_the_same_query_gets_the_same_answer_then_not():
    clock = Clock()
    reuse = CandidateReuse(2.0, clock=clock)
    first = answer()
    reuse.put('resources=VCPU:2', first)

    clock.now += 1.5
    assert reuse.get('resources=VCPU:2') is first
    assert reuse.get('resources=VCPU:4') is None
    clock.now += 1.0
    assert reuse.get('resources=VCPU:2') is None


def test_a_reused_answer_shows_the_claims_this_worker_made_since():
    reuse = CandidateReuse(5.0, clock=Clock())
    reuse.put('q', answer())

    reuse.claimed([{CN1: {'VCPU': 2, 'MEMORY_MB': 1024}}, {CN1: {'VCPU': 2}}])

    reused = reuse.get('q')
    assert reused.provider_summaries[CN1].resources['VCPU'].used == 6
    assert reused.provider_summaries[CN1].resources['MEMORY_MB'].used == 1024
    assert reused.provider_summaries[CN2].resources['VCPU'].used == 2
    table = HostTable(reused, HostCatalog(default_cell_uuid=CELL))
    assert table.free('VCPU').tolist() == [2, 6]
    # A host that the claims filled no longer fits the same request twice.
    host = table.host(0)
    host.consume(host.allocation_candidates[0], 'x')
    assert not host.fits(host.allocation_candidates[0])


def test_an_answer_fetched_later_starts_without_the_earlier_claims():
    clock = Clock()
    reuse = CandidateReuse(5.0, clock=clock)
    reuse.put('q', answer())
    reuse.claimed([{CN1: {'VCPU': 2}}])
    reuse.put('q', answer())  # a fresh answer already includes that claim

    assert reuse.get('q').provider_summaries[CN1].resources['VCPU'].used == 2


def test_off_by_default_and_bounded():
    assert not CandidateReuse(0.0).enabled
    reuse = CandidateReuse(5.0, max_entries=2, clock=Clock())
    for key in ('a', 'b', 'c'):
        reuse.put(key, answer())
    assert reuse.get('a') is None and reuse.get('c') is not None
