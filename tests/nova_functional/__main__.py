"""``tox -e nova-functional``: Nova's own functional tests, with Nova's scheduler and with ours.

    python -m tests.nova_functional [--only MODULE ...] [--check] [--json FILE]

Each module runs twice in the same run, side by side (one process per side,
``run_module``): unchanged (baseline: nova-scheduler) and with this service
swapped in; the regressions modules, a test or two each, run together in one
process per side (``--only regressions`` runs them all). The table says, per
module, how many tests there are, how many pass on each side, and names every
test that passes with Nova but not with us. ``--check`` exits 1 when such a
test is not one of the documented exceptions
(:mod:`tests.nova_functional.known_differences`), so CI fails on a regression.
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

#: Nova's regression tests (``regressions/test_bug_*``) that schedule: those with a test that,
#: with nova-scheduler, calls SchedulerManager.select_destinations at least once (a boot, a
#: move, an unshelve, a rebuild to a new image). The other 19 are API, database, volume,
#: image-cache or compute-side tests that never ask a scheduler anything, or are skipped
#: in Nova 34 (test_bug_1735407: until bug 1763181 is fixed).
REGRESSION_MODULES = tuple(f'regressions.test_bug_{bug}' for bug in (
    '1404867', '1522536', '1548980', '1595962', '1628606', '1669054', '1670627', '1671648',
    '1675570', '1678326', '1679750', '1682693', '1689692', '1702454', '1713783', '1718455',
    '1718512', '1719730', '1732947', '1741125', '1741364', '1746483', '1764556', '1764883',
    '1781286', '1781710', '1784353', '1790204', '1794996', '1797580', '1806064', '1806515',
    '1815153', '1823370', '1825020', '1825034', '1825537', '1830747', '1831771', '1835822',
    '1837955', '1843090', '1843708', '1845291', '1848343', '1849165', '1849409', '1852458',
    '1862633', '1879878', '1886418', '1888395', '1889108', '1890244', '1893284', '1895696',
    '1896463', '1899649', '1899835', '1902925', '1908075', '1909120', '1922053', '1928063',
    '1937084', '1937375', '1938326', '1939545', '1943431', '1944619', '1978983', '1980720',
    '1983753', '1995153', '2007968', '2016173', '2025480', '2040264', '2044235', '2048837',
    '2062127', '2062425', '2074219', '2080531', '2085975', '2088066', '2098496', '2108974',
    '2112187', '2125052', '2125935', '2127196', '2134375', '2139351', '2140537', '2140631',
    '2143972', '2152697', '2153425', '2154495', '2160224',
))

#: The modules the drop-in claim is measured on (short names, under PACKAGE).
DEFAULT_MODULES = (
    'test_server_group', 'test_aggregates', 'test_availability_zones', 'test_scheduler',
    'test_json_filter', 'test_servers', 'test_servers_provider_tree', 'test_cold_migrate',
    'test_routed_networks', 'test_servers_resource_request', 'test_boot_from_volume',
    'libvirt.test_numa_servers', 'libvirt.test_pci_sriov_servers',
    'libvirt.test_pci_in_placement', 'libvirt.test_vgpu',
) + REGRESSION_MODULES

#: Names ``--only`` takes for a group of modules.
GROUPS = {'regressions': REGRESSION_MODULES}

#: Modules under these packages are small (a test or two each): they run together, one
#: process per side for all of them, and are counted per module.
BATCHED = (PACKAGE + 'regressions.',)


def _module_name(short: str) -> str:
    short = short.replace('/', '.').removesuffix('.py')
    return short if short.startswith(PACKAGE) else PACKAGE + short


def _runs(modules: list[str]) -> list[tuple[str, list[str]]]:
    """The modules in the order given, as (name, modules) runs: one module per run, but the
    BATCHED packages' modules together in one run, named after their package."""
    runs: list[tuple[str, list[str]]] = []
    batches: dict[str, list[str]] = {}
    for module in modules:
        package = next((p for p in BATCHED if module.startswith(p)), None)
        if package is None:
            runs.append((module.removeprefix(PACKAGE), [module]))
        elif package not in batches:
            batches[package] = [module]
            runs.append((package.removeprefix(PACKAGE).rstrip('.'), batches[package]))
        else:
            batches[package].append(module)
    return runs


def run_sides(stem: str, modules: list[str], workdir: pathlib.Path, test_filter: str | None,
              filter_map: bool = False) -> dict[str, dict]:
    """Both sides of one run at once; side -> test id -> outcome."""
    procs = {}
    for side in ('nova', 'ours'):
        cmd = [sys.executable, '-m', 'tests.nova_functional.run_module', '--side', side,
               '--json', str(workdir / f'{stem}.{side}.json'),
               '--log', str(workdir / f'{stem}.{side}.log')]
        if test_filter:
            cmd += ['--filter', test_filter]
        if filter_map:
            cmd += ['--filter-map']
        env = {**os.environ, 'PYTHONPATH': os.pathsep.join(
            p for p in (str(REPO), os.environ.get('PYTHONPATH', '')) if p)}
        procs[side] = subprocess.Popen(cmd + modules, cwd=workdir, env=env)
    results = {}
    for side, proc in procs.items():
        code = proc.wait()
        path = workdir / f'{stem}.{side}.json'
        if code != 0 or not path.exists():
            results[side] = {'error': f'runner exited {code}; see {path.with_suffix(".log")}'}
            continue
        results[side] = json.loads(path.read_text())['outcomes']
    return results


def of_module(module: str, results: dict[str, dict]) -> dict[str, dict]:
    """One module's part of a run's results (a runner's failure is every module's)."""
    return {side: outcomes if 'error' in outcomes else
            {t: o for t, o in outcomes.items() if t.startswith(module + '.')}
            for side, outcomes in results.items()}


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
                        help='modules to run (e.g. test_server_group libvirt.test_vgpu '
                             'regressions.test_bug_1718455), or regressions: every one of '
                             'REGRESSION_MODULES')
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

    names = [n for m in (args.only or DEFAULT_MODULES) for n in GROUPS.get(m, (m,))]
    modules = [_module_name(m) for m in dict.fromkeys(names)]
    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix='nova-functional-'))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f'Nova functional tests, both sides; outcomes and logs in {workdir}', flush=True)
    rows = []
    for stem, run in _runs(modules):
        started = time.monotonic()
        results = run_sides(stem, run, workdir, args.filter, args.filter_map)
        for module in run:
            row = summarise(module, of_module(module, results))
            rows.append(row)
            done = ('runner failed' if 'error' in row else
                    f'{row["tests"]} tests, nova {row["passed_nova"]}, ours {row["passed_ours"]}')
            took = '' if len(run) > 1 else f' ({time.monotonic() - started:.0f} s)'
            print(f'{module.removeprefix(PACKAGE)}: {done}{took}', flush=True)
        if len(run) > 1:
            print(f'{stem}: {len(run)} modules ({time.monotonic() - started:.0f} s)', flush=True)
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
