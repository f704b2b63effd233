"""The nested-queries benchmark runs, and its guard holds, on a real Placement.

bench/nested.py times the provider view against Placement's own ``GET
/allocation_candidates`` for nested request shapes on the same state. At a
tiny size (30 hosts, one candidate-explosion host, two runs a shape) it must
seed Placement on PostgreSQL, answer every shape both ways, find the view's
answers to be Placement's, and report a row per shape, the guard and the
candidate-explosion target.
"""
from __future__ import annotations

import json

from bench import deploy, nested
from tests.fixtures.postgres_placement import require_or_skip

ARGS = ['--hosts', '30', '--repeats', '2', '--explosion-hosts', '1',
        '--placement-budget', '0']


def test_the_nested_benchmark_times_both_sides_and_finds_the_view_answers_as_placement(
        tmp_path, capsys):
    out = tmp_path / 'nested.json'
    try:
        status = nested.main([*ARGS, '--json', str(out)])
    except deploy.ServiceMissing as e:
        require_or_skip(str(e))
    printed = capsys.readouterr().out

    rows = {row['name']: row for row in json.loads(out.read_text())}
    guard = rows['nested: the view answers as Placement does']
    assert guard['passed'] and guard['ours_ms'] == 0, printed
    # The target is measured; whether two runs on a shared machine meet it is the
    # benchmark's report, not this test's (the exit status says it).
    target = rows['candidate-explosion: view p99 <= 50 ms']
    assert target['ours_ms'] is not None, printed
    assert status == (0 if target['passed'] else 1), printed
    for shape in nested.shapes():
        # Each shape: Placement timed, and the view timed unless it says why not.
        measured = [row for name, row in rows.items() if name.startswith(f'nested: {shape.name}')]
        assert measured, shape.name
        assert all(row['nova_ms'] is not None for row in measured), measured
        assert shape.name in printed
    left = rows['nested: numa: cells with VCPU unsuffixed too, isolate']
    assert 'left to Placement' in left['note'] and left['ours_ms'] is None
