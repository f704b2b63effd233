"""``tox -e bench`` (``python -m bench``): the benchmark of doc/performance.md.

1. In-process stages on the same synthetic Placement answer for this service
   and for Nova 34's own code (bench/ours_side.py, bench/nova_side.py), at each
   N: decode + host states, the decision for one instance, ten instances and a
   ten-instance anti-affinity group, and the whole request; medians, ratios,
   and the decisions-per-second floor at N = 5,000. The process is pinned to
   one CPU for these, so "per core" means one core.
2. End to end, 3. throughput, 4. memory (bench/e2e.py, bench/memory.py) on a
   real Placement (PostgreSQL, several workers), RabbitMQ and real service
   processes.
5. The provider view against a query per request at 1,000, 10,000 and 50,000
   providers (bench/view.py), its curve printed and drawn beside the JSON; with
   ``--nested-workload``, on a cloud with nested trees and a workload that mixes
   vGPU, PCI and NUMA flavors in (bench/view.py ``--nested``); with
   ``--view-sources``, every service reading the host-data sources of a Nova cloud
   that size instead of a hosts file (bench/view.py ``--sources``).
6. With ``--nested``: nested queries, the provider view against Placement's own
   GET /allocation_candidates on the same state, candidate-explosion trees
   included (bench/nested.py).
7. With ``--host-data N[,N...]``: what the host-data sources cost the provider view
   (``[nova]`` with its services read per request, ``[cell_database]``), against a
   stand-in compute API and a cell database holding the cloud's computes
   (bench/host_data.py).
8. With ``--reads``: what one worker's reads of its provider view cost, worker
   and database, by the size of the cloud (bench/reads.py).
9. With ``--services-parse N[,N...]``: the compute services' read before a request,
   in process: JSON decoding, a fresh parse and a remembering parse side by side
   (bench/services_parse.py).
10. With ``--rpc-listener``: an RPC server process's CPU per call on oslo.messaging,
    its AMQP listener's first wait after a message as oslo.messaging sets it and as
    the service does (bench/rpc_listener.py).
11. With ``--held-reads N``: the read of the services held as disabled or down before a
    request, every one of them and with the disabled computes left out, side by side on
    a cell database of N computes (bench/held_reads.py).

Prints one table and writes the rows to ``bench-results.json``.
"""
from __future__ import annotations

import argparse
import gc
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.report import Row, ratio_row, render, write_json
from bench.synthetic import make_cloud

DEFAULT_SIZES = (1000, 5000, 10000, 50000)
#: The provider view's sizes (bench/view.py): the issue's curve.
DEFAULT_VIEW_SIZES = '1000,10000,50000'
#: Hosts of the nested queries' cloud (bench/nested.py), with ``--nested``.
NESTED_HOSTS = 1000
KINDS = (('one', 'one instance'), ('ten', 'ten instances'),
         ('group10', 'ten-instance anti-affinity group'))
#: Decision floor at N = 5,000 (the issue; kube-scheduler holds 680 pods/s at 5,000 nodes).
DECISIONS_PER_SECOND = 700
FLOOR_N = 5000


def _reps_for_nova(n: int) -> int:
    # Nova's decision for ten instances takes about half a minute at 10,000
    # hosts and minutes at 50,000; one sample there, more where it is cheap.
    return 5 if n <= 1000 else 3 if n <= 10000 else 1


def timed(fn: Callable[[], Any], *, collect: bool = True) -> float:
    # A full collection costs up to a few hundred ms with both sides' objects
    # alive and lands in whichever run crosses the threshold: run it untimed.
    if collect:
        gc.collect()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def median_ms(fn: Callable[[], Any], *, reps: int, min_total_ms: float = 0.0,
              max_reps: int = 50) -> float:
    """Median of at least ``reps`` runs, more (up to ``max_reps``) until
    ``min_total_ms`` have been spent: fast stages get enough samples."""
    samples: list[float] = []
    while len(samples) < reps or (sum(samples) < min_total_ms and len(samples) < max_reps):
        samples.append(timed(fn))
    return statistics.median(samples)


def median_decision_ms(side: Any, raw: bytes, kind: str, *, reps: int,
                       min_total_ms: float = 0.0, max_reps: int = 50) -> float:
    """The decision alone: host states are built afresh (untimed) for every run,
    because a decision consumes them.

    The untimed collection runs before the build, and the decision right after
    it, as in a request: a collection in between would walk every object of
    both sides and leave the caches colder than any request finds them.
    """
    samples: list[float] = []
    while len(samples) < reps or (sum(samples) < min_total_ms and len(samples) < max_reps):
        gc.collect()
        built = side.build(raw)
        samples.append(timed(lambda built=built: side.decide(built, kind), collect=False))
        del built
    return statistics.median(samples)


def in_process_rows(n: int, *, nova_reps: int | None, with_nova: bool) -> list[Row]:
    cloud = make_cloud(n)
    raw = cloud.placement_json()
    from bench.ours_side import OursSide
    ours = OursSide(cloud)
    nova = None
    if with_nova:
        from bench.nova_side import NovaSide
        nova = NovaSide(cloud)
    # The generator's objects are not part of either side's state: free them so
    # that neither side's garbage collector walks them.
    del cloud
    gc.collect()
    reps = nova_reps or _reps_for_nova(n)
    rows: list[Row] = []
    try:
        # Both sides must agree on what a decision is; compare before timing.
        chosen = {'ours': ours.decide(ours.build(raw), 'one')}
        if nova is not None:
            chosen['nova'] = nova.decide(nova.build(raw), 'one')
        print(f'N={n:,}: first choice {chosen}', file=sys.stderr)

        def add(name: str, ours_ms: float, nova_fn: Callable[[], float] | None) -> None:
            if nova_fn is None:
                rows.append(Row(name, n, ours_ms, note='Nova side not run'))
            else:
                rows.append(ratio_row(name, n, ours_ms, nova_fn()))
            print(render(rows[-1:]).splitlines()[-1], file=sys.stderr)

        add('a. decode + host states', median_ms(lambda: ours.build(raw), reps=5,
                                                 min_total_ms=500),
            nova and (lambda: median_ms(lambda: nova.build(raw), reps=reps)))
        for kind, label in KINDS:
            ours_ms = median_decision_ms(ours, raw, kind, reps=7, min_total_ms=300)
            add(f'b. decision, {label}', ours_ms,
                nova and (lambda kind=kind: median_decision_ms(nova, raw, kind, reps=reps)))
            if kind == 'one' and n == FLOOR_N:
                per_second = 1000.0 / ours_ms
                rows.append(Row('b. decisions per second, one instance, one core', n,
                                per_second, unit='dec/s', target=f'>= {DECISIONS_PER_SECOND}',
                                passed=per_second >= DECISIONS_PER_SECOND))
        add('c. whole request (one instance)', median_ms(lambda: ours.whole(raw), reps=5,
                                                         min_total_ms=500),
            nova and (lambda: median_ms(lambda: nova.whole(raw), reps=reps)))
    finally:
        ours.close()
    return rows


def _pin_to_one_cpu() -> str:
    if not hasattr(os, 'sched_setaffinity'):
        return 'not pinned (no sched_setaffinity)'
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[-1]})
    return f'pinned to CPU {cpus[-1]} of {len(cpus)}'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m bench', description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default=os.environ.get('SCHEDULER_BENCH_SIZES', ''),
                        help='comma-separated N for the in-process stages '
                             f'(default {",".join(map(str, DEFAULT_SIZES))})')
    parser.add_argument('--nova-reps', type=int, default=None,
                        help='runs per Nova stage (default: 5 at N<=1000, 3 up to 10,000, '
                             '1 above)')
    parser.add_argument('--no-nova', action='store_true',
                        help='skip Nova 34 (rows get no ratio; for a machine without nova)')
    parser.add_argument('--no-e2e', action='store_true',
                        help='skip end to end, throughput and memory (needs PostgreSQL and '
                             'RabbitMQ on 127.0.0.1)')
    parser.add_argument('--nested', nargs='?', type=int, const=NESTED_HOSTS, default=None,
                        metavar='HOSTS',
                        help='nested queries, the provider view against Placement\'s own GET '
                             '(bench/nested.py; needs PostgreSQL) on a cloud of this many '
                             f'hosts (default {NESTED_HOSTS})')
    parser.add_argument('--view', default=os.environ.get('SCHEDULER_BENCH_VIEW',
                                                         DEFAULT_VIEW_SIZES),
                        metavar='N[,N...]',
                        help='the provider view against a query per request at these '
                             'numbers of providers (bench/view.py; needs PostgreSQL and '
                             f'RabbitMQ; default {DEFAULT_VIEW_SIZES}; "" for none)')
    parser.add_argument('--nested-workload', action='store_true',
                        help='with --view: a cloud with nested trees and a workload that mixes '
                             'vGPU, PCI-in-Placement and NUMA-in-Placement flavors in '
                             '(bench/view.py --nested)')
    parser.add_argument('--split-cores', action='store_true',
                        help='with --view: Placement and PostgreSQL on one half of the CPUs, '
                             'the service, RabbitMQ and the clients on the other (bench/view.py '
                             '--split-cores; needs root)')
    parser.add_argument('--view-sources', action='store_true',
                        help='with --view: every service with the host-data sources of a Nova '
                             'cloud that size, in place of the hosts file (bench/view.py '
                             '--sources)')
    parser.add_argument('--reads', default='', metavar='N[,N...]',
                        help='what a worker\'s reads of its provider view cost at these '
                             'numbers of providers (bench/reads.py; needs PostgreSQL)')
    parser.add_argument('--services-parse', default='', metavar='N[,N...]',
                        help='the compute services\' read before a request, in process, '
                             'for N services (bench/services_parse.py)')
    parser.add_argument('--rpc-listener', action='store_true',
                        help='an RPC server\'s CPU per call with oslo.messaging\'s first wait '
                             'after a message and with the service\'s (bench/rpc_listener.py; '
                             'needs RabbitMQ)')
    parser.add_argument('--host-data', default=None, metavar='N[,N...]',
                        help='what the [nova] and [cell_database] host-data sources cost the '
                             'provider view at these numbers of providers (bench/host_data.py; '
                             'needs PostgreSQL and RabbitMQ)')
    parser.add_argument('--held-reads', type=int, default=None, metavar='N',
                        help='the read of the held services before a request, every one and '
                             'with the disabled computes left out, on a cell database of N '
                             'computes (bench/held_reads.py; needs PostgreSQL)')
    parser.add_argument('--output', default='bench-results.json')
    args = parser.parse_args(argv)
    sizes = ([int(s) for s in args.sizes.split(',') if s.strip()] if args.sizes
             else list(DEFAULT_SIZES))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # Both sides log per request at INFO (Nova per filter); the benchmark
    # measures the work, not a terminal.
    logging.getLogger().setLevel(logging.WARNING)

    rows: list[Row] = []
    main_affinity = os.sched_getaffinity(0) if hasattr(os, 'sched_getaffinity') else None
    print(f'in-process stages: {_pin_to_one_cpu()}', file=sys.stderr)
    started = time.monotonic()
    for n in sizes:
        rows.extend(in_process_rows(n, nova_reps=args.nova_reps, with_nova=not args.no_nova))
    print(f'in-process stages took {time.monotonic() - started:.0f} s', file=sys.stderr)
    if main_affinity is not None:
        os.sched_setaffinity(0, main_affinity)

    if not args.no_e2e:
        from bench import e2e, memory
        rows.extend(e2e.run_all())
        rows.extend(memory.run_memory())
        rows.extend(memory.run_memory(limit=None))
    nested_results: list[Any] = []
    if args.nested:
        from bench import nested
        nested_results, nested_rows = nested.run(nested.Options(hosts=args.nested))
        rows.extend(nested_rows)
    view_rows: list[Row] = []
    if args.view:
        from bench import view
        view_rows = view.run_all([int(n) for n in args.view.split(',') if n.strip()],
                                 view.Options(nested=args.nested_workload,
                                              split_cores=args.split_cores,
                                              sources=args.view_sources))
        rows.extend(view_rows)
    if args.host_data:
        from bench import host_data
        rows.extend(host_data.run_all([int(n) for n in args.host_data.split(',') if n.strip()]))

    if args.services_parse:
        from bench import services_parse
        rows.extend(row for n in args.services_parse.split(',') if n.strip()
                    for row in services_parse.run(int(n)))

    if args.rpc_listener:
        from bench import rpc_listener
        rows.extend(rpc_listener.run())

    if args.held_reads:
        from bench import held_reads
        rows.extend(held_reads.run(argparse.Namespace(
            providers=args.held_reads, reads=held_reads.DEFAULT_READS,
            rounds=held_reads.DEFAULT_ROUNDS)))

    read_rows: list[Row] = []
    if args.reads:
        from bench import reads
        read_rows = reads.run_all([int(n) for n in args.reads.split(',') if n.strip()])
        rows.extend(read_rows)

    print(render(rows))
    write_json(rows, args.output)
    if read_rows:
        from bench.cli import notes
        print()
        print(notes(read_rows))
    if view_rows:
        from bench import plot, view
        print()
        print(view.curve(view_rows))
        curve_file = os.path.splitext(args.output)[0] + '-view-curve.svg'
        with open(curve_file, 'w') as f:
            f.write(plot.svg(view_rows))
        print(f'the curve drawn in {curve_file}')
    if nested_results:
        from bench import nested
        print()
        print(nested.table(nested_results))
    failed = [r for r in rows if r.passed is False]
    print(f'\n{len(rows)} rows, {sum(r.passed is True for r in rows)} passed, '
          f'{len(failed)} failed; written to {args.output}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
