"""bench.view says where a request's time went, from the workers' own metrics."""
from __future__ import annotations

from collections import Counter

from bench.view import time_spent


def test_each_stage_and_the_waits_for_a_turn_are_shared_out_per_request():
    scraped = Counter({
        'scheduler_select_destinations_seconds_sum': 2.0,
        'scheduler_select_destinations_seconds_count': 10,
        'scheduler_stage_seconds_sum{stage="placement_query"}': 0.5,
        'scheduler_stage_seconds_count{stage="placement_query"}': 10,
        'scheduler_stage_seconds_sum{stage="claim"}': 1.2,
        'scheduler_stage_seconds_count{stage="claim"}': 12,
        'scheduler_decision_turn_wait_seconds_sum{when="arrived"}': 0.3,
        'scheduler_decision_turn_wait_seconds_count{when="arrived"}': 4,
    })

    said = time_spent(scraped, [0.25] * 8)

    assert said.startswith('mean call at the client 250 ms, in a worker 200 ms: ')
    assert 'claim 120 ms (1.2x)' in said
    assert 'placement_query 50 ms (1.0x)' in said
    assert 'waiting for a turn (arrived) 30 ms' in said


def test_a_service_without_metrics_says_so():
    assert time_spent(Counter(), [0.1]) == 'no metrics'
