"""Memory: peak RSS of one service worker with 50,000 hosts in its caches.

The worker is a real ``scheduler-service`` process (``workers = 1``, so the
process is the worker) on RabbitMQ, with the shipped defaults, whose hosts
file describes ``make_cloud(hosts)`` (written as JSON) and whose Placement is
:class:`bench.stub_placement.StubPlacement` serving
``make_cloud(hosts).placement_json()`` (one candidate per host that fits the
request; like Placement it honours ``limit``) and accepting the claims.

Two runs. The target row keeps the shipped ``[scheduler]
max_placement_results`` (1,000, Nova's default): Placement answers at most
that many candidates however large the cloud, while the worker's caches hold
all 50,000 hosts. The information row raises it to ``hosts``, so that each
request decodes and tables an answer of 50,000 candidates. After the worker
has answered ``requests`` select_destinations calls, its ``VmHWM`` (peak
resident set) is read from ``/proc/<pid>/status``; ``VmHWM`` after start-up
and ``VmRSS`` at both points say how much of the peak is loading the hosts
file and how much is a request.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
import uuid as uuidlib

from bench import deploy
from bench.report import Row, render, write_json

DEFAULT_HOSTS = 50_000
DEFAULT_REQUESTS = 3
#: ``[scheduler] max_placement_results``' default (Nova's too).
DEFAULT_LIMIT = 1000
TARGET_MB = 150.0


def read_memory(pid: int) -> dict[str, float]:
    """VmHWM and VmRSS of ``pid`` in MB (1 MB = 2**20 bytes)."""
    values = {}
    with open(f'/proc/{pid}/status', encoding='ascii') as f:
        for line in f:
            key, _, rest = line.partition(':')
            if key in ('VmHWM', 'VmRSS'):
                values[key] = int(rest.split()[0]) / 1024   # kB -> MB
    return values


def run_memory(hosts: int = DEFAULT_HOSTS, *, requests: int = DEFAULT_REQUESTS,
               start_timeout: float = 900.0, limit: int | None = DEFAULT_LIMIT) -> list[Row]:
    """Peak RSS of a worker holding ``hosts`` hosts and answering ``requests`` calls
    whose Placement answers hold at most ``limit`` candidates (None: every host)."""
    from bench.stub_placement import StubPlacement
    from bench.synthetic import make_cloud
    from scheduler.rpc.client import SchedulerClient

    deploy.require_rabbit()
    workdir = pathlib.Path(tempfile.mkdtemp(prefix='bench-memory-'))
    stub = None
    try:
        cloud = make_cloud(hosts)
        body = cloud.placement_json()
        candidates = len(json.loads(body)['allocation_requests'])
        hosts_file = workdir / 'hosts.json'
        hosts_file.write_text(json.dumps(cloud.hosts_document()))
        file_mb = hosts_file.stat().st_size / 2**20
        del cloud
        stub = StubPlacement(body).start()
        started = time.monotonic()
        with deploy.scheduler_service(
                workdir, placement_url=stub.url, workers=1, hosts_file=hosts_file,
                extra_config=(f'[scheduler]\nmax_placement_results = {max(hosts, 1000)}\n'
                              if limit is None else ''),
                start_timeout=start_timeout) as (svc, transport):
            start_seconds = time.monotonic() - started
            after_start = read_memory(svc.pid)
            client = SchedulerClient(transport, topic=svc.topic, timeout=600)
            walls, rss_after_each = [], []
            for _ in range(requests):
                rid, consumer = deploy.new_request_id(), str(uuidlib.uuid4())
                context, spec, uuids = deploy.boot_call(rid, consumer)
                began = time.perf_counter()
                result = client.select_destinations(context, spec, uuids)
                walls.append(time.perf_counter() - began)
                if len(result) != 1 or not result[0]:
                    raise RuntimeError(f'malformed answer: {result!r}')
                rss_after_each.append(read_memory(svc.pid)['VmRSS'])
            after_requests = read_memory(svc.pid)
        claims = stub.claims
    finally:
        if stub is not None:
            stub.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    peak = after_requests['VmHWM']
    answered = candidates if limit is None else min(limit, candidates)
    source = (f'real scheduler-service worker (workers=1) on RabbitMQ; hosts file of '
              f'{hosts:,} hosts ({file_mb:.0f} MB JSON); Placement is a STUB (this row '
              f'only) answering {answered:,} candidates per request (limit '
              f'{"none" if limit is None else limit}); {requests} select_destinations, '
              f'{claims} claims accepted by the stub')
    if limit is None:
        return [
            Row(f'memory: peak RSS per worker, answers of all {hosts:,} hosts', hosts, peak,
                unit='MB', note=source + '; RSS after each request: '
                + ', '.join(f'{v:.0f}' for v in rss_after_each) + ' MB'),
            Row(f'memory: select_destinations wall, {answered:,} candidates', hosts,
                statistics.median(walls) * 1000, note=f'median of {requests}'),
        ]
    return [
        Row('memory: peak RSS per worker (VmHWM)', hosts, peak, target=f'<= {TARGET_MB:g} MB',
            passed=peak <= TARGET_MB, unit='MB', note=source),
        Row('memory: peak RSS after start-up (hosts file loaded)', hosts,
            after_start['VmHWM'], unit='MB',
            note=f'RSS then {after_start["VmRSS"]:.0f} MB; start-up took '
                 f'{start_seconds:.0f}s'),
        Row('memory: RSS after the requests', hosts, after_requests['VmRSS'], unit='MB',
            note='after each request: ' + ', '.join(f'{v:.0f}' for v in rss_after_each)
                 + ' MB'),
        Row('memory: worker start-up (hosts file load)', hosts, start_seconds, unit='s'),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m bench.memory',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--hosts', type=int, default=DEFAULT_HOSTS)
    parser.add_argument('--requests', type=int, default=DEFAULT_REQUESTS)
    parser.add_argument('--start-timeout', type=float, default=900.0,
                        help='seconds to wait for the worker to load the hosts file')
    parser.add_argument('--json', metavar='PATH', help='also write the rows as JSON')
    args = parser.parse_args(argv)
    try:
        rows = (run_memory(args.hosts, requests=args.requests, start_timeout=args.start_timeout)
                + run_memory(args.hosts, requests=args.requests,
                             start_timeout=args.start_timeout, limit=None))
    except deploy.ServiceMissing as e:
        print(f'cannot run: {e}', file=sys.stderr)
        return 2
    print(render(rows))
    if args.json:
        write_json(rows, args.json)
    return 0


if __name__ == '__main__':
    sys.exit(main())
