"""bench.services_parse: the remembering parser is timed only where it answers as a
fresh parse does, and every quantity has its row."""
from __future__ import annotations

from bench import services_parse


def test_the_benchmark_times_decoding_and_the_three_parses_on_the_same_reads():
    rows = services_parse.run(200, reads=3, heartbeats=0.1)
    assert [r.name for r in rows] == [
        'services read: JSON decoding',
        'services read: fresh parse of every record (baseline)',
        'services read: parse by a ServicesParser',
        'services read: decoding and parse of the changed records only']
    assert all(r.n == 200 and r.ours_ms is not None and r.ours_ms >= 0 for r in rows)
