"""The host-data benchmark runs, and its ``[nova]`` phase really reads the services per request.

bench/host_data.py runs the provider view with the hosts file only, then with
``[nova]`` (against a stand-in compute API holding the cloud's computes) and
``[cell_database]`` (a PostgreSQL cell database) at their defaults, then with the
services read by the periodic sync only, and with both but the services' state read
from the compute API. At 30 hosts and a few seconds a phase, each phase must answer
requests; ``[nova]`` alone, and with the cell database but ``service_states =
false``, must send one ``GET /os-services`` per request or more; with both at
their defaults (the services' state read from the cell database's ``services``
table, read whole every 10 s or before each request) and with
``service_state_max_age = -1``, none.

One client asks, so no request arrives while another's read is in flight: with
several, requests that arrive while a read is being asked for share the next one,
and how many do depends on the machine's timing, not on the code.
"""
from __future__ import annotations

import json
import re

from bench import deploy, host_data
from tests.fixtures.postgres_placement import require_or_skip

ARGS = ['--providers', '30', '--seconds', '2', '--warmup', '1', '--clients', '1']


def test_the_host_data_benchmark_reads_the_services_before_every_request(tmp_path, capsys):
    out = tmp_path / 'host-data.json'
    try:
        status = host_data.main([*ARGS, '--json', str(out)])
    except deploy.ServiceMissing as e:
        require_or_skip(str(e))
    printed = capsys.readouterr().out
    assert status == 0, printed

    rows = {row['name']: row for row in json.loads(out.read_text())}
    for phase in ('baseline', 'nova', 'nova+cell', 'nova, max_age -1',  # the default ones
                  'nova+cell, api services', 'nova+cell, scan per request'):
        assert rows[f'host data: {phase}, throughput']['ours_ms'] > 0, printed
        assert 'other errors 0' in rows[f'host data: {phase}, throughput']['note'], printed
        peak = rows[f'host data: {phase}, peak memory per worker (VmHWM)']
        assert peak['ours_ms'] > 30, peak
        assert len(peak['note'].split(', ')) == host_data.DEFAULT_WORKERS, peak
        idle = rows[f'host data: {phase}, memory per worker after the window (VmRSS)']
        assert 30 < idle['ours_ms'] <= peak['ours_ms'], (idle, peak)
    assert rows['host data: stand-in GET /os-services alone (client side)']['ours_ms'] > 0
    assert rows['host data: cell database services, first read alone']['ours_ms'] > 0
    assert rows['host data: cell database services, next read alone']['ours_ms'] > 0
    held = rows['host data: cell database services, held-unusual rows by id alone']
    assert re.match(r'the rows of the \d+ hosts held as', held['note']), held
    chosen = rows['host data: cell database services, chosen hosts by host alone']
    assert chosen['ours_ms'] > 0, chosen
    assert chosen['note'].startswith('the rows of 9 up and enabled'), chosen

    for phase in ('nova', 'nova+cell, api services'):
        row = rows[f'host data: {phase}, GET /os-services per request']
        gets, calls = map(int, re.match(r'(\d+) GETs for (\d+) requests', row['note']).groups())
        # Each request arrived after the last read began, so none could take it; the
        # phase's periodic sync may add a read of its own.
        assert calls > 0 and gets >= calls, row
        assert rows[f'host data: {phase}, compute API time per GET /os-services']['ours_ms'] > 0
    for phase in ('nova, max_age -1', 'nova+cell', 'nova+cell, scan per request'):
        row = rows[f'host data: {phase}, GET /os-services per request']
        assert row['ours_ms'] == 0, row
    assert 'host data: baseline, GET /os-services per request' not in rows


def test_the_nested_workload_runs_with_the_host_data_sources_and_counts_what_placement_answered(
        tmp_path, capsys):
    out = tmp_path / 'host-data-nested.json'
    try:
        # A longer window: 30% of the requests are of a nested kind, and a 2 s window of
        # one client on a loaded 2-core machine once saw none of them.
        status = host_data.main([*ARGS, '--seconds', '5', '--nested', '--skip', 'bdgh',
                                 '--json', str(out)])
    except deploy.ServiceMissing as e:
        require_or_skip(str(e))
    printed = capsys.readouterr().out
    assert status == 0, printed

    rows = {row['name']: row for row in json.loads(out.read_text())}
    for phase in ('baseline', 'nova+cell'):
        assert 'other errors 0' in rows[f'host data: {phase}, throughput']['note'], printed
        placed = rows[f'host data: {phase}, nested kinds placed']
        per_kind = re.findall(r'(\S+) (\d+)/(\d+)/(\d+)', placed['note'])
        assert [name for name, *_ in per_kind] == [
            'g1.a10-8q', 'g1.2xa10-4q', 'c1.numa-pinned', 'p1.pci-10de-2236'], placed
        assert sum(int(p) for _, p, _, _ in per_kind) == placed['ours_ms'], placed
        # A request of a nested kind is answered (placed or refused) without an error.
        assert sum(int(p) + int(r) for _, p, r, _ in per_kind) > 0, placed
        assert all(e == '0' for *_, e in per_kind), placed
        gets = rows[f'host data: {phase}, GET /allocation_candidates per request']
        sent, answered = map(int, re.match(r'(\d+) GETs for (\d+) requests', gets['note']).groups())
        # The row's value is written to three decimals (bench.report), and at 30 hosts a
        # request the view finds no host for goes to Placement: the ratio need not be 0.
        assert answered > 0 and gets['ours_ms'] == round(sent / answered, 3), gets
