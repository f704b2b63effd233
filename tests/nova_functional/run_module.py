"""Run Nova functional test modules in this process, on one side, and record outcomes.

    python -m tests.nova_functional.run_module --side ours --json out.json \
        nova.tests.functional.test_server_group ...

``--side nova`` runs the tests unchanged (Nova's scheduler), ``--side ours``
with this service swapped in (:mod:`tests.nova_functional.swap`). Both sides
get the same bus and fixture corrections. Nova's own output goes to
``--log``; the JSON holds each test id with ``pass``, ``fail``, ``error`` or
``skip`` and, for failures, the last lines of the traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import unittest


def _prepare(side: str, filter_map: bool = False) -> None:
    # Nova's threading mode (file-backed cell databases a reader can open) for
    # both sides; must be decided before anything imports nova.
    os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', 'True')
    # Nova decides on eventlet first (and forbids importing it in threading
    # mode); this service never uses it.
    import nova.tests.functional  # noqa: F401

    # NumPy asks os.uname() on import, which Nova's fixtures forbid inside a
    # test: this service is imported before any test starts.
    import scheduler.service  # noqa: F401
    from tests.nova_functional import swap
    swap.install_common()
    if side == 'ours':
        swap.FILTER_MAP = filter_map
        swap.install_swap()


class _Recorder(unittest.TextTestResult):
    def __init__(self, stream: object, descriptions: bool, verbosity: int):
        super().__init__(stream, descriptions, verbosity)  # type: ignore[arg-type]
        self.outcomes: dict[str, dict] = {}
        self._started: dict[str, float] = {}

    def startTest(self, test: unittest.TestCase) -> None:  # noqa: N802
        self._started[test.id()] = time.monotonic()
        super().startTest(test)

    def _record(self, test: unittest.TestCase, outcome: str, detail: str = '') -> None:
        elapsed = time.monotonic() - self._started.get(test.id(), time.monotonic())
        entry = {'outcome': outcome, 'seconds': round(elapsed, 2)}
        if detail:
            entry['detail'] = '\n'.join(detail.strip().splitlines()[-12:])
        self.outcomes[test.id()] = entry

    def addSuccess(self, test: unittest.TestCase) -> None:  # noqa: N802
        super().addSuccess(test)
        self._record(test, 'pass')

    def addFailure(self, test: unittest.TestCase, err: object) -> None:  # noqa: N802
        super().addFailure(test, err)  # type: ignore[arg-type]
        self._record(test, 'fail', self.failures[-1][1])

    def addError(self, test: unittest.TestCase, err: object) -> None:  # noqa: N802
        super().addError(test, err)  # type: ignore[arg-type]
        self._record(test, 'error', self.errors[-1][1])

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:  # noqa: N802
        super().addSkip(test, reason)
        self._record(test, 'skip', reason)

    def addExpectedFailure(self, test: unittest.TestCase, err: object) -> None:  # noqa: N802
        super().addExpectedFailure(test, err)  # type: ignore[arg-type]
        self._record(test, 'pass')

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:  # noqa: N802
        super().addUnexpectedSuccess(test)
        self._record(test, 'fail', 'unexpected success')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--side', choices=('nova', 'ours'), required=True)
    parser.add_argument('--json', required=True, help='where the outcomes go')
    parser.add_argument('--log', default=os.devnull, help="where Nova's output goes")
    parser.add_argument('--filter', default=None,
                        help='only test ids containing this text')
    parser.add_argument('--filter-map', action='store_true',
                        help="diagnostic: let setUp find Nova's NUMA/PCI filter classes")
    parser.add_argument('modules', nargs='+')
    args = parser.parse_args(argv)

    with open(args.log, 'w') as log:
        # Nova's fixtures capture logging per test; what escapes (imports, service
        # start-up) goes to the log file.
        sys.stdout.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            _prepare(args.side, args.filter_map)
            loader = unittest.TestLoader()
            suite = unittest.TestSuite()
            for module in args.modules:
                suite.addTests(loader.loadTestsFromName(module))
            if args.filter:
                suite = unittest.TestSuite(t for t in _flatten(suite) if args.filter in t.id())
            runner = unittest.TextTestRunner(stream=log, verbosity=2,
                                             resultclass=_Recorder)
            result = runner.run(suite)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
    with open(args.json, 'w') as out:
        json.dump({'side': args.side, 'modules': args.modules,
                   'outcomes': result.outcomes}, out, indent=1, sort_keys=True)
    passed = sum(1 for o in result.outcomes.values() if o['outcome'] == 'pass')
    print(f'{args.side}: {passed} of {len(result.outcomes)} passed')
    return 0


def _flatten(suite: unittest.TestSuite) -> list[unittest.TestCase]:
    tests: list[unittest.TestCase] = []
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            tests.extend(_flatten(item))
        else:
            tests.append(item)
    return tests


if __name__ == '__main__':
    sys.exit(main())
