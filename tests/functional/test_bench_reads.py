"""The reads benchmark runs on a real Placement, and its baseline is what it says.

bench/reads.py times the provider view's reads of changes, worker and database,
after claims and after deletions, beside the same reader looking at everything
(the providers' marks and generations, the consumers' marks) at every read.
At a small size (200 hosts, three reads a row; with
fewer, the writes between two reads change over a quarter of the providers, and
that is a whole read) it must seed Placement on PostgreSQL, write between reads,
and report every row; the baseline compares checksums of usage at each read
that followed a deletion, the reader as shipped at most once every
DELETIONS_EVERY seconds.
"""
from __future__ import annotations

import json
import re

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
    # One look at everything when the row begins (the last was at least as long ago
    # as the writes took), then at most one per DELETIONS_EVERY seconds of its reads,
    # however long the writes between them took.
    checksums = int(re.search(r'usage checksums (\d+)', shipped['note']).group(1))
    span = float(re.search(r'the reads spanning ([\d.]+) s', shipped['note']).group(1))
    assert span >= (READS - 1) * reads._max_age() * 0.9, shipped
    assert 0 <= checksums <= 1 + int(span // placement_db.DELETIONS_EVERY), shipped
