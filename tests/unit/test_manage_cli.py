"""scheduler-manage's command line: arguments are checked before anything starts."""
from __future__ import annotations

import pytest

from scheduler.cmd import manage
from scheduler.cmd.manage import build_parser, main
from scheduler.simulate import runner


def test_without_a_command_usage_is_printed_and_the_status_is_2(capsys):
    assert main([]) == 2
    assert 'simulate' in capsys.readouterr().err


@pytest.mark.parametrize('args', [
    ['simulate', '--hosts', '0'],
    ['simulate', '--requests', '-1'],
    ['simulate', '--concurrency', '0'],
    ['simulate', '--hosts', 'many'],
    ['simulate', '--unknown'],
])
def test_invalid_simulate_arguments_exit_2_with_a_message(args, capsys):
    assert main(args) == 2
    assert 'error:' in capsys.readouterr().err


def test_help_exits_0(capsys):
    assert main(['simulate', '--help']) == 0
    assert '--concurrency' in capsys.readouterr().out


def test_simulate_defaults():
    args = build_parser().parse_args(['simulate'])
    assert (args.hosts, args.seed, args.concurrency) == (
        manage.DEFAULT_HOSTS, manage.DEFAULT_SEED, manage.DEFAULT_CONCURRENCY)
    # None: DEFAULT_REQUESTS on the synthetic cloud, 0 for capacity questions
    # (tests/unit/test_manage_simulate.py).
    assert args.requests is None
    assert args.json is None and args.config_file is None and args.verbose == 0


def test_verbosity_maps_to_log_levels():
    assert [manage._log_level(v) for v in (0, 1, 2, 3)] == ['WARNING', 'INFO', 'DEBUG', 'DEBUG']


def test_simulate_passes_its_arguments_and_exits_1_when_placement_disagrees(monkeypatch):
    # The runner is replaced: an inconsistent Placement cannot be produced on demand.
    seen = {}

    class _Summary:
        def __init__(self, problems):
            self._problems = problems

        def problems(self):
            return self._problems

    def fake_run(**kwargs):
        seen.update(kwargs)
        return _Summary([])

    monkeypatch.setattr(runner, 'run_simulation', fake_run)
    assert main(['simulate', '--hosts', '3', '--requests', '4', '--seed', '5',
                 '--concurrency', '2', '--json', '/tmp/x.json', '-v']) == 0
    assert seen == {'hosts': 3, 'requests': 4, 'seed': 5, 'concurrency': 2,
                    'json_path': '/tmp/x.json', 'log_level': 'INFO', 'config_file': None,
                    'source': runner.CloudSource(), 'workload_file': None,
                    'save_snapshot': None, 'chart': False}
    monkeypatch.setattr(runner, 'run_simulation',
                        lambda **kw: _Summary(['disabled hosts got instances: cn-1']))
    assert main(['simulate']) == manage.EXIT_INCONSISTENT


def test_a_missing_config_file_is_reported_before_anything_starts(tmp_path, capsys):
    assert main(['simulate', '--config-file', str(tmp_path / 'missing.conf')]) == 2
    assert 'missing.conf' in capsys.readouterr().err


def test_an_invalid_option_value_is_reported_before_anything_starts(tmp_path, capsys):
    path = tmp_path / 'bad.conf'
    path.write_text('[scheduler]\nmax_attempts = many\n')
    assert main(['simulate', '--config-file', str(path)]) == 2
    err = capsys.readouterr().err
    assert 'max_attempts' in err
    assert 'embedded Placement' not in err


def test_the_simulation_conf_reads_the_given_file_and_uses_the_in_process_transport(tmp_path):
    path = tmp_path / 'sim.conf'
    path.write_text('[DEFAULT]\ntransport_url = rabbit://u:p@broker/\n'
                    '[scheduler]\nmax_attempts = 5\n'
                    '[placement]\nauth_type = password\n')
    conf = runner.build_conf(str(path))
    runner.use_placement(conf, 'http://127.0.0.1:9999')
    assert conf.scheduler.max_attempts == 5
    assert conf.transport_url == 'fake://'
    assert (conf.placement.auth_type, conf.placement.token, conf.placement.endpoint) == (
        'admin_token', 'admin', 'http://127.0.0.1:9999')
