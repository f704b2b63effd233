"""``scheduler-manage simulate`` capacity options: what they hand the runner, and misuse."""
from __future__ import annotations

import pytest

from scheduler.cmd import manage
from scheduler.cmd.manage import build_parser, main
from scheduler.cmd.manage_simulate import simulation_inputs
from scheduler.simulate.runner import CloudSource
from scheduler.simulate.workload_file import FillEntry


def _inputs(*argv: str) -> dict:
    return simulation_inputs(build_parser().parse_args(['simulate', *argv]), 200)


def test_the_synthetic_cloud_gets_the_generated_stream_by_default():
    inputs = _inputs()
    assert inputs['requests'] == 200
    assert inputs['source'] == CloudSource() and inputs['workload_file'] is None


def test_a_capacity_question_sends_only_what_it_asks_unless_requests_are_given():
    assert _inputs('--fill', 'm1.large')['requests'] == 0
    assert _inputs('--snapshot', 's.json')['requests'] == 0
    assert _inputs('--fill', 'm1.large', '--requests', '50')['requests'] == 50


def test_fill_options_become_fill_entries_in_order():
    workload = _inputs('--fill', 'm1.large', '--fill', 'm1.small')['workload_file']
    assert [f.flavor for f in workload.fills] == ['m1.large', 'm1.small']
    assert isinstance(workload.fills[0], FillEntry)


def test_from_placement_without_a_config_file_is_a_usage_error(capsys):
    assert main(['simulate', '--from-placement', '--fill', 'm1.large']) == manage.EXIT_USAGE
    assert '--config-file' in capsys.readouterr().err


def test_an_unknown_fill_flavor_is_a_usage_error(capsys):
    assert main(['simulate', '--fill', 'm9.huge']) == manage.EXIT_USAGE
    assert "unknown flavor 'm9.huge'" in capsys.readouterr().err


@pytest.mark.parametrize('argv', [
    ['--from-placement', '--snapshot', 's.json'],
    ['--workload', 'w.yaml', '--fill', 'm1.large'],
])
def test_exclusive_sources_and_workloads_are_refused_by_the_parser(argv, capsys):
    assert main(['simulate', *argv]) == manage.EXIT_USAGE
    assert 'not allowed with' in capsys.readouterr().err
