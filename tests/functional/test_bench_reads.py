"""The reads benchmark runs on a real Placement, and its baseline is what it says.

bench/reads.py times the provider view's reads of changes, worker and database,
after claims and after deletions, beside the same reader looking at everything
(the providers' marks and generations, the allocations' count) at every read.
At a small size (200 hosts, three reads a row; with
fewer, the writes between two reads change over a quarter of the providers, and
that is a whole read) it must seed Placement on PostgreSQL, write between reads,
and report every row; the baseline compares checksums of usage at each read
that followed a deletion, the reader as shipped at most once every
DELETIONS_EVERY seconds.
"""
from __future__ import annotations

import json

from bench import deploy, reads
from scheduler.catalog import placement_db
from tests.fixtures.postgres_placement import require_or_skip

READS = 3


def test_the_reads_benchmark_reads_after_claims_and_deletions_both_ways(tmp_path, capsys):
    out = tmp_path / 'reads.json'
    try:
        assert reads.main(['--providers', '200', '--reads', str(READS),
                           '--json', str(out)]) == 0
    except deploy.ServiceMissing as e:
        require_or_skip(str(e))
    printed = capsys.readouterr().out

    rows = {row['name']: row for row in json.loads(out.read_text())}
    assert set(rows) == {
        'a whole read', 'a read of changes, 12 claims',
        'a read of changes, 12 claims, everything looked at by every read (baseline)',
        'a read of changes, 12 claims + 3 deletions',
        'a read of changes, 12 claims + 3 deletions, everything looked at by every read '
        '(baseline)'}, printed
    assert all(row['ours_ms'] > 0 for row in rows.values()), printed
    for name, row in rows.items():
        assert 'whole reads among them 0' in row['note'] or name == 'a whole read', row
    baseline = rows['a read of changes, 12 claims + 3 deletions, everything looked at by '
                    'every read (baseline)']
    shipped = rows['a read of changes, 12 claims + 3 deletions']
    assert f'usage checksums {READS}' in baseline['note']
    seconds = READS * reads._max_age()
    most = 1 + int(seconds // placement_db.DELETIONS_EVERY)
    assert any(f'usage checksums {n}' in shipped['note'] for n in range(most + 1)), shipped
