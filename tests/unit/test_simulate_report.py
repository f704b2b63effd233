"""The simulation report: progress output, summary figures, text and JSON forms."""
from __future__ import annotations

import io
import json

from scheduler.simulate.report import (
    Collector,
    Outcome,
    PlacedInstance,
    Progress,
    ProviderUsage,
    Scenario,
    band_of,
    latency_stats,
    percentile,
    reason_group,
    render,
    summarise,
    to_json,
    utilisation,
    write_json,
)

SCENARIO = Scenario(hosts=3, requests=4, seed=1, concurrency=2, availability_zones=1,
                    disabled_hosts=1)


def _placed(*hosts: str) -> tuple[PlacedInstance, ...]:
    return tuple(PlacedInstance(f'i-{h}-{n}', h, f'u-{h}') for n, h in enumerate(hosts))


def _outcomes() -> list[Outcome]:
    return [
        Outcome(0, 'm1.small', 1, 0.100, placed=_placed('cn-1')),
        Outcome(1, 'm1.large', 2, 0.200, placed=_placed('cn-1', 'cn-2')),
        Outcome(2, 'm1.xlarge', 1, 0.300, error='NoValidHost',
                reason='Placement returned no allocation candidates for resources=VCPU:8'),
        Outcome(3, 'm1.xlarge', 3, 0.400, error='NoValidHost',
                reason='Placement returned no allocation candidates for resources=VCPU:16'),
    ]


def _usages() -> list[ProviderUsage]:
    return [
        ProviderUsage('u-cn-1', 'cn-1', capacity={'VCPU': 10, 'MEMORY_MB': 100, 'DISK_GB': 10},
                      used={'VCPU': 9, 'MEMORY_MB': 30, 'DISK_GB': 1},
                      consumers=frozenset({'i-cn-1-0', 'i-cn-1-1'})),
        ProviderUsage('u-cn-2', 'cn-2', capacity={'VCPU': 10, 'MEMORY_MB': 100, 'DISK_GB': 10},
                      used={'VCPU': 1, 'MEMORY_MB': 10, 'DISK_GB': 1},
                      consumers=frozenset({'i-cn-2-1'})),
        ProviderUsage('u-cn-3', 'cn-3', capacity={'VCPU': 10, 'MEMORY_MB': 100, 'DISK_GB': 10},
                      used={}, disabled=True),
    ]


# Figures -------------------------------------------------------------------------------


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 90) == 90
    assert percentile(values, 99) == 99
    assert percentile([7], 99) == 7
    assert percentile([], 50) == 0.0


def test_latency_is_reported_in_milliseconds():
    stats = latency_stats([0.1, 0.2, 0.3, 0.4])
    assert (stats.count, stats.p50, stats.max) == (4, 200.0, 400.0)
    assert round(stats.mean) == 250


def test_reasons_that_differ_only_in_numbers_and_uuids_are_one_group():
    a = reason_group('0/12 hosts available: ServerGroupAntiAffinityFilter removed 12')
    b = reason_group('0/7 hosts available: ServerGroupAntiAffinityFilter removed 7')
    c = reason_group('member_of=in:0b1c7c4e-22f1-5e8b-9d8a-0c2b3e4f5a6b&resources=VCPU:1')
    d = reason_group('member_of=in:1f2e3d4c-5b6a-5978-8a9b-0c1d2e3f4a5b&resources=VCPU:2')
    assert a == b
    assert c == d
    assert reason_group(None) == reason_group('') == '(no reason given)'


def test_bands_are_quarters_with_the_bound_in_the_lower_band():
    assert band_of(0.0) == '0-25%'
    assert band_of(0.25) == '0-25%'
    assert band_of(0.26) == '25-50%'
    assert band_of(1.0) == '75-100%'
    assert band_of(1.01) == '>100%'


def test_utilisation_counts_hosts_per_band_and_ranks_enabled_hosts():
    u = utilisation(_usages())
    assert u.bands['VCPU'] == {'0-25%': 2, '25-50%': 0, '50-75%': 0, '75-100%': 1}
    assert u.bands['MEMORY_MB'] == {'0-25%': 2, '25-50%': 1, '50-75%': 0, '75-100%': 0}
    assert u.totals['VCPU'] == {'used': 10, 'capacity': 30}
    assert [h.name for h in u.most_loaded] == ['cn-1', 'cn-2']
    assert [h.name for h in u.least_loaded] == ['cn-2', 'cn-1']
    assert u.most_loaded[0].usage['VCPU'] == 0.9
    assert u.over_capacity == [] and u.disabled_with_allocations == []


def test_utilisation_names_overfull_and_busy_disabled_hosts():
    usages = [ProviderUsage('a', 'cn-a', capacity={'VCPU': 1}, used={'VCPU': 2}),
              ProviderUsage('b', 'cn-b', capacity={'VCPU': 4}, used={'VCPU': 1},
                            consumers=frozenset({'x'}), disabled=True)]
    u = utilisation(usages)
    assert u.over_capacity == ['cn-a']
    assert u.disabled_with_allocations == ['cn-b']
    assert u.bands['VCPU']['>100%'] == 1


def test_summary_counts_requests_instances_and_reasons():
    summary = summarise(_outcomes(), _usages(), scenario=SCENARIO, wall_time_s=2.0)
    assert (summary.requests, summary.requests_placed, summary.requests_failed) == (4, 2, 2)
    assert (summary.instances_requested, summary.instances_placed) == (7, 3)
    assert summary.consumers_in_placement == 3
    assert list(summary.no_valid_host.values()) == [2]
    assert summary.errors == {}
    assert summary.latency.p50 == 200.0


def test_errors_other_than_no_valid_host_are_counted_apart():
    outcomes = [Outcome(0, 'k', 1, 0.1, error='MessagingTimeout'),
                Outcome(1, 'k', 1, 0.1, error='InvalidInput', reason='bad')]
    summary = summarise(outcomes, [], scenario=SCENARIO, wall_time_s=1.0)
    assert summary.no_valid_host == {}
    assert summary.errors == {'MessagingTimeout': 1, 'InvalidInput': 1}
    assert summary.error_examples == {'MessagingTimeout': '', 'InvalidInput': 'bad'}
    assert '      1  InvalidInput: bad' in render(summary)


# Output --------------------------------------------------------------------------------


def test_text_summary_states_the_figures():
    text = render(summarise(_outcomes(), _usages(), scenario=SCENARIO, wall_time_s=2.0))
    assert 'Requests:  2/4 placed, 2 NoValidHost, 0 other errors' in text
    assert 'Instances: 3/7 placed; 3 consumers hold allocations in Placement' in text
    assert 'p50 200 ms, p90 400 ms, p99 400 ms, max 400 ms' in text
    assert 'NoValidHost by reason:' in text
    assert '      2  Placement returned no allocation candidates for resources=VCPU:8' in text
    assert 'cn-1  VCPU 90% MEMORY_MB 30% DISK_GB 10%' in text
    assert 'over capacity: none; disabled hosts with allocations: none' in text


def test_json_summary_holds_the_same_figures(tmp_path):
    summary = summarise(_outcomes(), _usages(), scenario=SCENARIO, wall_time_s=2.0)
    path = tmp_path / 'summary.json'
    write_json(summary, str(path))
    body = json.loads(path.read_text())
    assert body == json.loads(json.dumps(to_json(summary)))
    assert body['requests'] == 4
    assert body['instances_placed'] == 3
    assert body['consumers_in_placement'] == 3
    assert body['no_valid_host'][0]['count'] == 2
    assert body['no_valid_host'][0]['example'].startswith('Placement returned')
    assert body['latency']['p99'] == 400.0
    assert body['utilisation']['bands']['VCPU']['75-100%'] == 1
    assert body['scenario']['seed'] == 1


# Progress ------------------------------------------------------------------------------


def test_progress_without_a_tty_prints_one_line_per_tenth():
    stream = io.StringIO()
    progress = Progress(total=30, stream=stream, is_tty=False, clock=lambda: 0.0)
    collector = Collector(progress)
    for n in range(30):
        collector.add(Outcome(n, 'k', 1, 0.1))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 10
    assert lines[0].startswith('3/30 requests (10%)')
    assert lines[-1].startswith('30/30 requests (100%), 30 placed, 0 failed')
    assert '\r' not in stream.getvalue()


def test_progress_with_few_requests_still_ends_at_one_hundred_percent():
    stream = io.StringIO()
    collector = Collector(Progress(total=3, stream=stream, is_tty=False, clock=lambda: 0.0))
    for n in range(3):
        collector.add(Outcome(n, 'k', 1, 0.1, error='NoValidHost' if n else None))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[-1].startswith('3/3 requests (100%), 1 placed, 2 failed')


def test_progress_on_a_tty_redraws_one_line():
    stream = io.StringIO()
    collector = Collector(Progress(total=4, stream=stream, is_tty=True, clock=lambda: 0.0))
    for n in range(4):
        collector.add(Outcome(n, 'k', 1, 0.1))
    out = stream.getvalue()
    assert out.count('\r') == 4
    assert out.endswith('\n')
    assert '[' + '#' * Progress.WIDTH + ']' in out


def test_collector_returns_outcomes_in_request_order():
    collector = Collector()
    for n in (2, 0, 1):
        collector.add(Outcome(n, 'k', 1, 0.1))
    assert [o.index for o in collector.outcomes] == [0, 1, 2]


# Consistency ---------------------------------------------------------------------------


def test_a_consistent_run_has_no_problems():
    summary = summarise(_outcomes(), _usages(), scenario=SCENARIO, wall_time_s=2.0)
    assert summary.problems() == []
    assert 'Consistency: ok' in render(summary)


def test_consumers_that_differ_from_placed_instances_are_a_problem():
    usages = _usages()[:1]   # cn-2's consumer is missing from Placement
    summary = summarise(_outcomes(), usages, scenario=SCENARIO, wall_time_s=2.0)
    assert summary.problems() == [
        '2 consumers hold allocations in Placement but 3 instances were placed']


def test_errors_overfull_and_used_disabled_hosts_are_problems():
    usages = [ProviderUsage('a', 'cn-a', capacity={'VCPU': 1}, used={'VCPU': 2},
                            consumers=frozenset({'x'})),
              ProviderUsage('b', 'cn-b', capacity={'VCPU': 4}, used={'VCPU': 1},
                            consumers=frozenset({'y'}), disabled=True)]
    outcomes = [Outcome(0, 'k', 2, 0.1, placed=_placed('cn-a', 'cn-b')),
                Outcome(1, 'k', 1, 0.1, error='MessagingTimeout', reason='timed out')]
    problems = summarise(outcomes, usages, scenario=SCENARIO, wall_time_s=1.0).problems()
    assert problems == ['calls failed with errors other than NoValidHost: 1 MessagingTimeout',
                        'providers over capacity: cn-a',
                        'disabled hosts got instances: cn-b']


def test_phases_are_reported_with_the_request_time():
    summary = summarise(_outcomes(), _usages(), scenario=SCENARIO, wall_time_s=2.0,
                        phases={'placement_start': 1.5, 'seed': 3.25, 'requests': 2.0})
    assert ('Time:      2.0 s for the requests (2.0 requests/s); Placement start 1.5 s, '
            'seeding 3.2 s') in render(summary)
    assert to_json(summary)['phases']['seed'] == 3.25
