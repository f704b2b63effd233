"""``tox -e nova-functional``: Nova's own functional tests, with Nova's scheduler and with ours.

    python -m tests.nova_functional [--only MODULE ...] [--check] [--json FILE]

Each module runs twice in the same run, side by side (one process per side,
``run_module``): unchanged (baseline: nova-scheduler) and with this service
swapped in. The table says, per module, how many tests there are, how many
pass on each side, and names every test that passes with Nova but not with
us. ``--check`` exits 1 when such a test is not one of the documented
exceptions (:mod:`tests.nova_functional.known_differences`), so CI fails on
a regression.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from tests.nova_functional.known_differences import documented

REPO = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = 'nova.tests.functional.'

#: The modules the drop-in claim is measured on (short names, under PACKAGE).
DEFAULT_MODULES = (
    'test_server_group', 'test_aggregates', 'test_availability_zones', 'test_scheduler',
    'test_json_filter', 'test_servers', 'test_servers_provider_tree', 'test_cold_migrate',
    'test_routed_networks', 'test_servers_resource_request', 'test_boot_from_volume',
    'libvirt.test_numa_servers', 'libvirt.test_pci_sriov_servers',
    'libvirt.test_pci_in_placement', 'libvirt.test_vgpu',
)


def _module_name(short: str) -> str:
    short = short.replace('/', '.').removesuffix('.py')
    return short if short.startswith(PACKAGE) else PACKAGE + short


def run_sides(module: str, workdir: pathlib.Path, test_filter: str | None,
              filter_map: bool = False) -> dict[str, dict]:
    """Both sides of one module at once; side -> test id -> outcome."""
    procs = {}
    for side in ('nova', 'ours'):
        stem = f'{module.removeprefix(PACKAGE)}.{side}'
        cmd = [sys.executable, '-m', 'tests.nova_functional.run_module', '--side', side,
               '--json', str(workdir / f'{stem}.json'), '--log', str(workdir / f'{stem}.log')]
        if test_filter:
            cmd += ['--filter', test_filter]
        if filter_map:
            cmd += ['--filter-map']
        env = {**os.environ, 'PYTHONPATH': os.pathsep.join(
            p for p in (str(REPO), os.environ.get('PYTHONPATH', '')) if p)}
        procs[side] = subprocess.Popen(cmd + [module], cwd=workdir, env=env)
    results = {}
    for side, proc in procs.items():
        code = proc.wait()
        path = workdir / f'{module.removeprefix(PACKAGE)}.{side}.json'
        if code != 0 or not path.exists():
            results[side] = {'error': f'runner exited {code}; see {path.with_suffix(".log")}'}
            continue
        results[side] = json.loads(path.read_text())['outcomes']
    return results


def summarise(module: str, results: dict[str, dict]) -> dict:
    nova, ours = results['nova'], results['ours']
    if 'error' in nova or 'error' in ours:
        return {'module': module, 'error': nova.get('error') or ours.get('error')}
    ids = sorted(set(nova) | set(ours))
    passed_nova = {t for t in ids if nova.get(t, {}).get('outcome') == 'pass'}
    passed_ours = {t for t in ids if ours.get(t, {}).get('outcome') == 'pass'}
    lost = sorted(passed_nova - passed_ours)
    return {
        'module': module, 'tests': len(ids),
        'passed_nova': len(passed_nova), 'passed_ours': len(passed_ours),
        'only_nova': lost,
        'unexplained': [t for t in lost if documented(t) is None],
        'only_ours': sorted(passed_ours - passed_nova),
        'reasons': {t: ours.get(t, {}).get('detail', '').splitlines()[-1:] for t in lost},
        'seconds': {side: round(sum(o.get('seconds', 0) for o in results[side].values()), 1)
                    for side in ('nova', 'ours')},
    }


def print_table(rows: list[dict]) -> None:
    print()
    print(f'{"module":<42} {"tests":>6} {"nova":>6} {"ours":>6}  pass with Nova, not with us')
    totals = [0, 0, 0]
    for row in rows:
        name = row['module'].removeprefix(PACKAGE)
        if 'error' in row:
            print(f'{name:<42} {"":>6} {"":>6} {"":>6}  RUNNER FAILED: {row["error"]}')
            continue
        totals = [totals[0] + row['tests'], totals[1] + row['passed_nova'],
                  totals[2] + row['passed_ours']]
        lost = len(row['only_nova'])
        known = lost - len(row['unexplained'])
        note = '' if not lost else f'{lost} ({known} documented)'
        print(f'{name:<42} {row["tests"]:>6} {row["passed_nova"]:>6} {row["passed_ours"]:>6}'
              f'  {note}')
    print(f'{"total":<42} {totals[0]:>6} {totals[1]:>6} {totals[2]:>6}')
    for row in rows:
        known: dict[str, int] = {}
        for test in row.get('only_nova', ()):
            short = test.removeprefix(PACKAGE)
            difference = documented(test)
            if difference is not None:
                known[difference.where] = known.get(difference.where, 0) + 1
            else:
                reason = ' '.join(row['reasons'].get(test, [])).strip()[:200]
                print(f'  FAILS       {short}: {reason}')
        for where, count in known.items():
            print(f'  documented  {count} test(s) reaching into nova-scheduler at {where}')
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--only', nargs='+', metavar='MODULE',
                        help='modules to run (e.g. test_server_group libvirt.test_vgpu)')
    parser.add_argument('--filter', help='only test ids containing this text')
    parser.add_argument('--check', action='store_true',
                        help='exit 1 when a test passes with Nova but not with this service '
                             'and is not a documented difference')
    parser.add_argument('--filter-map', action='store_true',
                        help="diagnostic, not a result: the libvirt NUMA/PCI classes' setUp "
                             "finds Nova's filter classes, so their tests run against this "
                             "service (their assertions on the mock of Nova's filter fail)")
    parser.add_argument('--json', help='write the summary rows here')
    parser.add_argument('--workdir', help="keep each side's outcomes and logs here")
    args = parser.parse_args(argv)

    modules = [_module_name(m) for m in (args.only or DEFAULT_MODULES)]
    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix='nova-functional-'))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f'Nova functional tests, both sides; outcomes and logs in {workdir}', flush=True)
    rows = []
    for module in modules:
        started = time.monotonic()
        row = summarise(module, run_sides(module, workdir, args.filter, args.filter_map))
        rows.append(row)
        done = ('runner failed' if 'error' in row else
                f'{row["tests"]} tests, nova {row["passed_nova"]}, ours {row["passed_ours"]}')
        print(f'{module.removeprefix(PACKAGE)}: {done} ({time.monotonic() - started:.0f} s)',
              flush=True)
    print_table(rows)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    failed = [r for r in rows if 'error' in r or r['unexplained']]
    # One closing line a CI reader can count: tests that pass with this service,
    # and tests that pass with Nova only without a documented reason.
    print(f'nova-functional: {sum(r.get("passed_ours", 0) for r in rows)} passed, '
          f'{sum(len(r.get("unexplained", ())) for r in rows)} failed')
    if args.check and failed:
        print('FAILED: tests that pass with nova-scheduler fail with this service '
              '(or a runner failed); see above')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
