"""``python -m tests.nova_differential [--cases N] [--seed S[,S...]] [--only NAME...] [--check]``

Prints, per filter and weigher (and the consumption between instances): the
cases where it mattered (some host was removed, or the weights were not all
equal, on either side), the cases that differ without a documented reason, the
cases whose difference is documented (:mod:`.known`); then up to three shrunk
reproductions per differing name. ``--check`` exits 1 on any undocumented
difference, and on a name never exercised when ``--require-exercised`` lists it.
"""
from __future__ import annotations

import argparse
import collections
import logging
import multiprocessing
import os
import sys
import time
import warnings
from dataclasses import dataclass, field

from tests.nova_differential import cloud, compare, nova_side, our_side

REPRODUCTIONS = 3


@dataclass
class Tally:
    mattered: collections.Counter[str] = field(default_factory=collections.Counter)
    differing: collections.Counter[str] = field(default_factory=collections.Counter)
    documented: dict[str, collections.Counter[str]] = field(
        default_factory=lambda: collections.defaultdict(collections.Counter))
    #: name -> (case, host, the difference): Nova's log lines are read when printed
    examples: dict[str, list[tuple[cloud.Case, str, tuple[str, str, str]]]] = field(
        default_factory=lambda: collections.defaultdict(list))
    names: set[str] = field(default_factory=set)
    ran: int = 0
    skipped: int = 0
    refused: int = 0

    def add(self, result: compare.CaseResult) -> None:
        self.ran += 1
        self.refused += result.refused
        for o in result.outcomes:
            self.names.add(o.name)
            self.mattered[o.name] += o.mattered
            self.differing[o.name] += bool(o.differences)
            for rule in o.documented:
                self.documented[o.name][rule] += 1
            if o.differences and len(self.examples[o.name]) < REPRODUCTIONS:
                host = o.differences[0][0]
                self.examples[o.name].append((result.case, host, o.differences[0]))

    def merge(self, other: Tally) -> None:
        self.mattered.update(other.mattered)
        self.differing.update(other.differing)
        for name, rules in other.documented.items():
            self.documented[name].update(rules)
        for name, found in other.examples.items():
            self.examples[name].extend(found[:REPRODUCTIONS - len(self.examples[name])])
        self.names |= other.names
        self.ran += other.ran
        self.skipped += other.skipped
        self.refused += other.refused


def _nova_log(case: cloud.Case, name: str, host: str) -> list[str]:
    """Nova's log lines for ``host`` when ``case`` runs ``name`` again, at DEBUG."""
    nova_side.capture_logs(debug=True)
    try:
        result = compare.run_fixed(case, name)
    finally:
        nova_side.capture_logs(debug=False)
    if result is None:
        return []
    return next((o.nova_log.get(host, []) for o in result.outcomes if o.name == name), [])


def _run_slice(job: tuple[list[tuple[int, int]], list[str] | None]) -> Tally:
    work, only = job
    tally = Tally()
    for seed, index in work:
        result = compare.run_case(cloud.draw_case(seed, index), only)
        if result is None:
            tally.skipped += 1
        else:
            tally.add(result)
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m tests.nova_differential')
    parser.add_argument('--cases', type=int, default=200, help='cases per seed')
    parser.add_argument('--seed', default='1', help='a seed, or several separated by commas')
    parser.add_argument('--only', nargs='+', metavar='NAME',
                        help="filters/weighers to compare ('consume' for the consumption)")
    parser.add_argument('--case', type=int, help='run only this case index (with one seed)')
    parser.add_argument('--check', action='store_true',
                        help='exit 1 on any undocumented difference')
    parser.add_argument('--no-shrink', action='store_true')
    parser.add_argument('--jobs', type=int, default=1, help='processes (cases split among them)')
    args = parser.parse_args(argv)

    warnings.simplefilter('ignore')
    logging.basicConfig(level=logging.ERROR)
    our_side.quiet()
    nova_side.capture_logs(debug=False)
    seeds = [int(s) for s in args.seed.split(',')]
    indexes = [args.case] if args.case is not None else range(args.cases)

    started = time.monotonic()
    work = [(seed, index) for seed in seeds for index in indexes]
    if args.jobs > 1:
        with multiprocessing.get_context('fork').Pool(args.jobs) as pool:
            parts = pool.map(_run_slice, [(work[i::args.jobs], args.only)
                                          for i in range(args.jobs)])
        tally = Tally()
        for part in parts:
            tally.merge(part)
    else:
        tally = _run_slice((work, args.only))
    elapsed = time.monotonic() - started
    mattered, differing, documented = tally.mattered, tally.differing, tally.documented
    examples, names = tally.examples, tally.names
    ran, skipped, refused = tally.ran, tally.skipped, tally.refused

    print(f'\n{ran} cases (seeds {args.seed}; {skipped} skipped: no request Nova accepts '
          f'in 40 draws; {refused} requests refused by Nova and drawn again) in {elapsed:.0f} s\n')
    width = max((len(n) for n in names), default=10)
    print(f'| {"filter / weigher".ljust(width)} | mattered | differ | documented (rule: cases) '
          f'| also enforced by |')
    print(f'|{"-" * (width + 2)}|---------:|-------:|---|---|')
    for name in sorted(names, key=lambda n: (n in (compare.CONSUME, compare.DECISION), n)):
        docs = '; '.join(f'{rule}: {count}' for rule, count in documented[name].items()) or '—'
        print(f'| {name.ljust(width)} | {mattered[name]:8d} | {differing[name]:6d} | {docs} '
              f'| {compare.ENFORCED_ALSO_BY_PLACEMENT.get(name, "—")} |')

    total = sum(differing.values())
    for name, found in sorted(examples.items()):
        print(f'\n## {name}: {differing[name]} case(s) differ')
        for case, host, (_, nova_did, we_did) in found:
            small = case if args.no_shrink else compare.shrink(case, name, host)
            print(f'\n### {case.label}, host {host} (shrunk: {len(small.hosts)} host(s))')
            print(f'Nova: {nova_did}\nours: {we_did}')
            for line in compare.describe(small, host):
                print(f'    {line}')
            for line in _nova_log(small, name, host)[-4:]:
                print(f'    nova log: {line[:400]}')
    print(f'\n{total} undocumented difference(s)' if total else '\nno undocumented difference')
    sys.stdout.flush()
    if args.check and total:
        return 1
    return 0


if __name__ == '__main__':
    # Nova's import of eventlet-era modules must not monkey-patch this process.
    os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', 'True')
    sys.exit(main())
