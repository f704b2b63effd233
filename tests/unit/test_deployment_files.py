"""The shipped deployment files: the minimal config works, the systemd unit fits the service."""
from __future__ import annotations

import configparser
import pathlib
from importlib import metadata

import pytest
from oslo_config import cfg

from scheduler import conf as scheduler_conf
from scheduler.cmd.manage_status import OK, check_configuration
from scheduler.cmd.service import EXIT_CONFIG
from scheduler.conf.service import service_opts
from scheduler.rpc.transport import get_transport
from scheduler.service import build_catalog

REPO = pathlib.Path(__file__).resolve().parents[2]
MINIMAL = REPO / 'etc' / 'scheduler' / 'scheduler.conf.minimal'
UNIT = REPO / 'etc' / 'systemd' / 'scheduler-service.service'
#: The supervisor SIGKILLs workers this long after graceful_shutdown_timeout (cmd/service.py).
SUPERVISOR_GRACE = 5


def _minimal_conf() -> cfg.ConfigOpts:
    return scheduler_conf.parse_args(['--config-file', str(MINIMAL)], default_config_files=[])


def test_the_minimal_config_passes_the_checks_the_service_makes_before_starting():
    conf = _minimal_conf()

    check, client = check_configuration(conf)   # plugins, request filters, auth plugin

    assert check.status == OK, check.summary
    assert client is not None
    assert conf.transport_url.startswith('rabbit://')
    assert (conf.placement.auth_type, conf.placement.username) == ('password', 'nova')
    assert build_catalog(conf).snapshot_stats()['file_hosts'] == 0
    get_transport(conf).cleanup()   # the URL is one oslo.messaging can load (no connection)


def test_every_option_the_minimal_config_sets_exists():
    # oslo.config ignores unknown options silently: a typo here would go unnoticed.
    conf = _minimal_conf()
    check_configuration(conf)   # registers the password plugin's options
    parser = configparser.ConfigParser()
    parser.read(MINIMAL)
    for section in ['DEFAULT', *parser.sections()]:
        keys = parser.defaults() if section == 'DEFAULT' else {
            k: v for k, v in parser.items(section) if k not in parser.defaults()}
        for key in keys:
            group = conf if section == 'DEFAULT' else conf[section]
            try:
                getattr(group, key)
            except cfg.NoSuchOptError:  # pragma: no cover - the failure message
                pytest.fail(f'[{section}] {key} is not an option of the service')


def _unit() -> dict[str, dict[str, list[str]]]:
    """section -> directive -> values (systemd allows a directive more than once)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in UNIT.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(('#', ';')):
            continue
        if line.startswith('['):
            current = sections.setdefault(line.strip('[]'), {})
            continue
        key, _, value = line.partition('=')
        assert current is not None, f'directive outside a section: {line}'
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_the_systemd_unit_starts_the_real_console_script_with_the_config_file():
    [exec_start] = _unit()['Service']['ExecStart']
    program, *args = exec_start.split()
    scripts = {ep.name: ep.value for ep in metadata.entry_points(group='console_scripts')}

    assert pathlib.PurePosixPath(program).name == 'scheduler-service'
    assert scripts['scheduler-service'] == 'scheduler.cmd.service:main'
    assert args == ['--config-file', '/etc/scheduler/scheduler.conf']


def test_the_systemd_unit_lets_calls_in_flight_finish_before_it_kills():
    service = _unit()['Service']
    [graceful] = [o.default for o in service_opts if o.name == 'graceful_shutdown_timeout']

    assert service['KillSignal'] == ['SIGTERM']
    # SIGTERM to the supervisor only; it passes it on and waits for its workers.
    assert service['KillMode'] == ['mixed']
    assert int(service['TimeoutStopSec'][0]) > graceful + SUPERVISOR_GRACE
    assert service['Restart'] == ['on-failure']
    # A configuration the service refuses is not restarted in a loop.
    assert service['RestartPreventExitStatus'] == [str(EXIT_CONFIG)]
    assert service['Type'] == ['simple']
    assert (service['User'], service['NoNewPrivileges'], service['ProtectSystem']) == (
        ['scheduler'], ['yes'], ['strict'])


def test_the_systemd_unit_gives_the_claims_journal_its_default_directory():
    service = _unit()['Service']
    [state_path] = [o.default for o in service_opts if o.name == 'state_path']

    # ProtectSystem=strict leaves only the unit's own directories writable.
    assert service['StateDirectory'] == [pathlib.PurePosixPath(state_path).name]
    assert pathlib.PurePosixPath(state_path).parent == pathlib.PurePosixPath('/var/lib')
    assert service['StateDirectoryMode'] == ['0700']
