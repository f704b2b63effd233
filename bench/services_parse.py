"""The compute services' read before a request, in process: decoding and parsing.

``python -m bench.services_parse [--services N[,N...]] [--reads R] [--heartbeats F]``:
for ``make_cloud(N)``'s compute services as the stand-in compute API answers them
(bench.host_data.nova_documents), ``R`` reads, each after a fraction ``F`` of the
services (live ones: a down service sends none) sent a heartbeat (their
``updated_at`` moved), timed on this process's CPU clock: the JSON decoding, a
fresh parse of every record (``nova_api.parse_services``, the baseline: what every
read cost before ``ServicesParser``), the parse of a ``ServicesParser`` that
remembers the last read, and that parser's read of the answer's bytes
(``parse_raw_with_keys``: decoding only the records that changed, where the others
are decoding plus parse), side by side on the same bodies. The
parses' answers are checked equal. Medians in milliseconds.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from typing import Any

from bench.host_data import nova_documents
from bench.report import Row, render
from bench.synthetic import make_cloud
from scheduler.catalog import nova_api

DEFAULT_SERVICES = (10_000, 50_000)
DEFAULT_READS = 5
DEFAULT_HEARTBEATS = 0.02


def _cpu_ms(work: Any) -> tuple[float, Any]:
    started = time.process_time()
    result = work()
    return 1000 * (time.process_time() - started), result


def run(services: int, reads: int = DEFAULT_READS,
        heartbeats: float = DEFAULT_HEARTBEATS, seed: int = 1) -> list[Row]:
    rng = random.Random(seed)
    records = nova_documents(make_cloud(services))['services']
    # A down service sends no heartbeat (were it to, it would be up).
    live = [record for record in records if record['state'] == 'up']
    remembering = nova_api.ServicesParser()
    remembering.parse({'services': records})   # the read before the first one timed
    from_bytes = nova_api.ServicesParser()
    from_bytes.parse_raw_with_keys(json.dumps({'services': records}).encode())
    timings: dict[str, list[float]] = {'decode': [], 'fresh': [], 'remembered': [],
                                       'bytes': []}
    for read in range(reads):
        for record in rng.sample(live, int(len(records) * heartbeats)):
            record['updated_at'] = f'2026-11-27T12:{read % 60:02d}:{rng.randrange(60):02d}.000000'
        raw = json.dumps({'services': records}).encode()
        decode_ms, body = _cpu_ms(lambda raw=raw: json.loads(raw))
        fresh_ms, fresh = _cpu_ms(lambda body=body: nova_api.parse_services(body))
        remembered_ms, remembered = _cpu_ms(lambda body=body: remembering.parse(body))
        bytes_ms, (*read, _) = _cpu_ms(lambda raw=raw: from_bytes.parse_raw_with_keys(raw))
        if not fresh == remembered == tuple(read):
            raise AssertionError('the remembering parsers answered unlike a fresh parse')
        timings['decode'].append(decode_ms)
        timings['fresh'].append(fresh_ms)
        timings['remembered'].append(remembered_ms)
        timings['bytes'].append(bytes_ms)
    note = (f'{reads} reads, {heartbeats:.0%} of the services with a new heartbeat before '
            f'each; CPU time of this process, median')
    return [Row(f'services read: {label}', services, statistics.median(timings[key]),
                unit='ms', note=note)
            for key, label in (('decode', 'JSON decoding'),
                               ('fresh', 'fresh parse of every record (baseline)'),
                               ('remembered', 'parse by a ServicesParser'),
                               ('bytes', 'decoding and parse of the changed records only'))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser('python -m bench.services_parse', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--services', default=','.join(map(str, DEFAULT_SERVICES)))
    parser.add_argument('--reads', type=int, default=DEFAULT_READS)
    parser.add_argument('--heartbeats', type=float, default=DEFAULT_HEARTBEATS)
    args = parser.parse_args(argv)
    rows = [row for n in args.services.split(',') if n.strip()
            for row in run(int(n), args.reads, args.heartbeats)]
    print(render(rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
