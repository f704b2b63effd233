"""What `tox -e nova-functional` counts on, checked without Nova installed.

Every Nova functional test that may pass with nova-scheduler and fail with this service
is documented, with the line of Nova's test that reaches into nova-scheduler's code, in
doc/nova-compatibility.md, and names a test of ours that proves the same behaviour.
"""
from __future__ import annotations

import pathlib
import sys
import types

import pytest

from tests.nova_functional import swap
from tests.nova_functional.__main__ import (
    DEFAULT_MODULES,
    GROUPS,
    REGRESSION_MODULES,
    _module_name,
    _runs,
    of_module,
    print_table,
    summarise,
)
from tests.nova_functional.known_differences import KNOWN_CLASSES, KNOWN_DIFFERENCES, documented

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = (ROOT / 'doc' / 'nova-compatibility.md').read_text()
PREFIX = 'nova.tests.functional.'


@pytest.mark.parametrize('test_id', sorted(KNOWN_DIFFERENCES))
def test_each_documented_difference_is_in_the_compatibility_doc_with_its_line(test_id):
    difference = KNOWN_DIFFERENCES[test_id]
    method = test_id.rsplit('.', 1)[1]

    assert method in DOC
    assert difference.where in DOC


@pytest.mark.parametrize('class_id', sorted(KNOWN_CLASSES))
def test_each_documented_class_is_in_the_compatibility_doc_with_its_line(class_id):
    assert class_id.removeprefix(PREFIX) in DOC
    assert KNOWN_CLASSES[class_id].where in DOC


@pytest.mark.parametrize('test_id', sorted(KNOWN_DIFFERENCES) + sorted(KNOWN_CLASSES))
def test_each_documented_difference_names_a_test_of_ours_that_exists(test_id):
    difference = KNOWN_DIFFERENCES.get(test_id) or KNOWN_CLASSES[test_id]
    for proof in difference.proven_by.split(';'):
        path, _, name = proof.strip().partition('::')
        source = (ROOT / path).read_text()
        assert not name or f'def {name}(' in source, proof


def outcome(result):
    return {'outcome': result, 'seconds': 1.0, 'detail': 'AssertionError: boom'}


def test_a_test_that_passes_with_nova_only_is_named_and_counts_unless_documented(capsys):
    documented = next(iter(KNOWN_DIFFERENCES))
    nova = {f'{PREFIX}m.T.test_a': outcome('pass'), f'{PREFIX}m.T.test_b': outcome('pass'),
            documented: outcome('pass'), f'{PREFIX}m.T.test_c': outcome('fail')}
    ours = {f'{PREFIX}m.T.test_a': outcome('pass'), f'{PREFIX}m.T.test_b': outcome('fail'),
            documented: outcome('fail'), f'{PREFIX}m.T.test_c': outcome('pass')}

    row = summarise(f'{PREFIX}m', {'nova': nova, 'ours': ours})

    assert (row['tests'], row['passed_nova'], row['passed_ours']) == (4, 3, 2)
    assert row['unexplained'] == [f'{PREFIX}m.T.test_b']
    assert row['only_ours'] == [f'{PREFIX}m.T.test_c']
    print_table([row])
    printed = capsys.readouterr().out
    assert 'FAILS       m.T.test_b: AssertionError: boom' in printed
    assert 'documented' in printed


def test_a_side_whose_runner_died_is_a_failure_not_a_pass():
    row = summarise(f'{PREFIX}m', {'nova': {'error': 'runner exited 1'}, 'ours': {}})

    assert row == {'module': f'{PREFIX}m', 'error': 'runner exited 1'}


def test_every_test_of_a_documented_class_is_documented_and_no_other():
    [class_id] = [c for c in KNOWN_CLASSES if c.endswith('.NUMAServersTest')]

    assert documented(f'{class_id}.test_anything') is KNOWN_CLASSES[class_id]
    assert documented(f'{class_id}Other.test_anything') is None


def test_the_regressions_modules_run_by_default_together_in_one_run_counted_per_module():
    assert set(REGRESSION_MODULES) <= set(DEFAULT_MODULES)
    assert GROUPS['regressions'] == REGRESSION_MODULES
    modules = [_module_name(m) for m in ('test_server_group', 'regressions.test_bug_1718455',
                                         'test_aggregates', 'regressions.test_bug_2160224')]

    runs = _runs(modules)

    assert runs == [('test_server_group', [f'{PREFIX}test_server_group']),
                    ('regressions', [f'{PREFIX}regressions.test_bug_1718455',
                                     f'{PREFIX}regressions.test_bug_2160224']),
                    ('test_aggregates', [f'{PREFIX}test_aggregates'])]


def test_a_module_of_a_run_is_counted_on_its_own_tests_and_a_dead_runner_on_each():
    module = f'{PREFIX}regressions.test_bug_1'
    results = {'nova': {f'{module}.T.test_a': outcome('pass'),
                        f'{module}0.T.test_a': outcome('pass')},
               'ours': {'error': 'runner exited 1'}}

    part = of_module(module, results)

    assert part == {'nova': {f'{module}.T.test_a': outcome('pass')},
                    'ours': {'error': 'runner exited 1'}}


def test_the_scheduler_s_placement_is_the_test_s_current_fixture_and_down_without_one(
        monkeypatch):
    # A test may start the scheduler before its PlacementFixture, replace it, or have none.
    intercepts = {}
    monkeypatch.setitem(sys.modules, 'wsgi_intercept',
                        types.SimpleNamespace(_wsgi_intercept=intercepts))
    monkeypatch.setattr(swap._WIRING, 'placement_endpoint', None)
    statuses = []

    def call():
        body = swap._placement({'PATH_INFO': '/resource_providers'},
                               lambda status, headers: statuses.append(status))
        return b''.join(body)

    def fixture_app(environ, start_response):
        start_response('200 OK', [])
        return [f'fixture {environ["PATH_INFO"]}'.encode()]

    assert call() == b'no Placement in this test'
    swap._WIRING.placement_endpoint = 'http://1234-abcd/placement'
    assert call() == b'no Placement in this test'  # its intercept is gone (cleaned up)
    intercepts[('1234-abcd', 80)] = (lambda: fixture_app, '/placement')
    assert call() == b'fixture /resource_providers'
    assert statuses == ['503 Service Unavailable', '503 Service Unavailable', '200 OK']
