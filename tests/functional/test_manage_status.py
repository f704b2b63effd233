"""``scheduler-manage status`` against the real Placement and real transports.

The healthy case runs on both transports (an in-process service on ``fake://``
and on RabbitMQ); the failure cases use whichever transport can produce them:
a stopped Placement, a too-old one (a tiny HTTP server answering Placement's
version document with max_version 1.30), credentials Placement refuses (its
``noauth2`` gives a non-admin token no access to providers), a RabbitMQ queue
nobody consumes, one with a consumer that never answers, and a broker port
nothing listens on.
"""
from __future__ import annotations

import http.server
import json
import pathlib
import socket
import threading
import uuid
from collections.abc import Iterator

import kombu
import pytest

from placement_client.client import PlacementClient
from scheduler.cmd import manage
from scheduler.cmd.manage_status import FAILURE, OK, SKIPPED, WARNING, exit_code, run_checks
from tests.builders import SERVICE_CELL
from tests.fixtures.placement import make_placement_conf
from tests.fixtures.service import RABBIT_URL, conf_for, rabbit_answers
from tests.functional.cloud import add_host

NAMES = ['config', 'placement', 'credentials', 'catalog', 'broker', 'workers']


def _by_name(checks) -> dict:
    return {c.name: c for c in checks}


def _providers(placement, *names: str) -> None:
    client = PlacementClient.from_conf(make_placement_conf(placement.url))
    for name in names:
        add_host(client, name)


def _hosts_file(path: pathlib.Path, *nodenames: str) -> str:
    path.write_text('hosts:\n' + ''.join(f'  - nodename: {n}\n' for n in nodenames))
    return str(path)


def _config_file(path: pathlib.Path, *, placement_url: str, transport_url: str = 'fake://',
                 token: str = 'admin', extra: str = '') -> str:
    path.write_text(f"""
[DEFAULT]
transport_url = {transport_url}
host = status-test

[scheduler]
workers = 1
rpc_topic = status-{uuid.uuid4().hex[:8]}
default_cell_uuid = {SERVICE_CELL}

[placement]
auth_type = admin_token
token = {token}
endpoint = {placement_url}
max_retries = 0
{extra}
""")
    return str(path)


def _status_cli(capsys, *args: str) -> tuple[int, str]:
    code = manage.main(['status', '--timeout', '0.5', *args])
    return code, capsys.readouterr().out


# --------------------------------------------------------------------- healthy


def test_a_healthy_deployment_passes_every_check_and_exits_0(start_scheduler, placement,
                                                             tmp_path):
    _providers(placement, 'cn1', 'cn2')
    running = start_scheduler(**{'scheduler.workers': 1,
                                 'scheduler.hosts_file': _hosts_file(tmp_path / 'hosts.yaml',
                                                                     'cn1', 'cn2')})

    checks = run_checks(running.conf, timeout=5)

    assert [(c.name, c.status) for c in checks] == [(name, OK) for name in NAMES], checks
    assert exit_code(checks) == 0
    checks = _by_name(checks)
    assert checks['credentials'].details == {'providers': 2, 'roots': 2}
    assert (checks['catalog'].details['hosts'], checks['catalog'].details['findings']) == (2, [])
    workers = checks['workers'].details
    assert workers['topic_answered'] == workers['topic_pings'] >= 1
    assert workers['host_answered'] == workers['host_pings'] >= 1
    if running.transport_name == 'rabbit':
        # The broker's own count: one in-process service consumes each queue.
        assert (workers['topic_consumers'], workers['host_consumers']) == (1, 1)


# ------------------------------------------------------------------- Placement


def test_a_stopped_placement_fails_the_status_with_the_outage_named(placement, tmp_path,
                                                                    capsys):
    config = _config_file(tmp_path / 's.conf', placement_url=placement.url)
    placement.stop()

    code, out = _status_cli(capsys, '--config-file', config, '--json')

    assert code == 2
    report = json.loads(out)
    checks = {c['name']: c for c in report['checks']}
    assert (report['status'], report['exit_code']) == (FAILURE, 2)
    assert checks['placement']['status'] == FAILURE
    assert 'Placement unavailable' in checks['placement']['summary']
    assert 'Connection refused' in checks['placement']['summary']
    assert checks['credentials']['status'] == SKIPPED


@pytest.fixture
def old_placement() -> Iterator[str]:
    """An HTTP server answering GET / like a Placement whose newest microversion is 1.30."""
    document = json.dumps({'versions': [{
        'id': 'v1.0', 'max_version': '1.30', 'min_version': '1.0', 'status': 'CURRENT',
        'links': [{'rel': 'self', 'href': ''}]}]}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(document)))
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f'http://127.0.0.1:{server.server_address[1]}'
    server.shutdown()
    server.server_close()


def test_a_placement_older_than_1_36_fails_the_status(old_placement, tmp_path, capsys):
    config = _config_file(tmp_path / 's.conf', placement_url=old_placement)

    code, out = _status_cli(capsys, '--config-file', config)

    assert code == 2
    [line] = [line for line in out.splitlines() if ' placement ' in line]
    assert line.startswith('FAILURE')
    assert 'too old' in line and '>= 1.36' in line and '1.30' in line
    assert out.splitlines()[-1] == 'status: failure (exit 2)'


def test_credentials_placement_refuses_fail_the_status(placement, tmp_path, capsys):
    # noauth2 gives any token but "admin" a non-admin user: GET / answers, providers do not.
    config = _config_file(tmp_path / 's.conf', placement_url=placement.url,
                          token='someone:elsewhere')

    code, out = _status_cli(capsys, '--config-file', config)

    lines = {line.split()[1]: line for line in out.splitlines()[:-1]}
    assert code == 2
    assert lines['placement'].startswith('OK')
    assert lines['credentials'].startswith('FAILURE')
    assert 'refused' in lines['credentials'] and '403' in lines['credentials']
    assert 'someone' not in out   # the token is never printed


# --------------------------------------------------------------------- catalog


def test_hosts_file_entries_placement_does_not_know_are_a_warning(start_scheduler, placement,
                                                                  tmp_path):
    _providers(placement, 'cn1')
    hosts_file = _hosts_file(tmp_path / 'hosts.yaml', 'cn1', 'retired-7')
    running = start_scheduler(**{'scheduler.workers': 1, 'scheduler.hosts_file': hosts_file})

    checks = run_checks(running.conf, timeout=5)

    catalog = _by_name(checks)['catalog']
    assert catalog.status == WARNING
    assert '1 listed host(s) match no Placement root provider' in catalog.summary
    assert 'retired-7' in catalog.summary and 'cn1,' not in catalog.summary
    assert exit_code(checks) == 1


def test_a_hosts_file_the_service_would_refuse_fails_the_status(placement, tmp_path, capsys):
    hosts = tmp_path / 'hosts.yaml'
    hosts.write_text('hosts:\n  - nodename: cn1\n    colour: blue\n')
    config = _config_file(tmp_path / 's.conf', placement_url=placement.url,
                          extra=f'[scheduler]\nhosts_file = {hosts}\n')

    code, out = _status_cli(capsys, '--config-file', config)

    [line] = [line for line in out.splitlines() if ' catalog ' in line]
    assert code == 2
    assert line.startswith('FAILURE') and 'colour' in line and str(hosts) in line


# ---------------------------------------------------------------------- broker


def _require_rabbit() -> None:
    if not rabbit_answers():
        pytest.skip('RabbitMQ on 127.0.0.1:5672 does not answer')


def test_a_topic_nobody_consumes_fails_the_status(placement):
    _require_rabbit()
    conf = conf_for(placement.url, RABBIT_URL,
                    **{'scheduler.rpc_topic': f'status-none-{uuid.uuid4().hex[:8]}',
                       'scheduler.workers': 1})

    checks = _by_name(run_checks(conf, timeout=1))

    assert checks['broker'].status == OK
    assert checks['workers'].status == FAILURE
    assert 'no scheduler consumes topic status-none-' in checks['workers'].summary
    assert checks['workers'].details['topic_pings'] == 0   # nothing to ping, no wait


def test_a_consumer_that_never_answers_is_a_warning(placement):
    _require_rabbit()
    topic = f'status-hung-{uuid.uuid4().hex[:8]}'
    conf = conf_for(placement.url, RABBIT_URL,
                    **{'scheduler.rpc_topic': topic, 'scheduler.workers': 1})
    from scheduler.rpc.transport import get_transport
    from scheduler.service import SchedulerService

    transport = get_transport(conf)
    service = SchedulerService(conf, transport=transport)
    service.start()
    # A second consumer of the topic queue that takes messages and never answers:
    # a hung worker, as the broker sees it.
    silent = kombu.Connection(RABBIT_URL.replace('rabbit://', 'amqp://'))
    channel = silent.channel()
    channel.basic_consume(queue=topic, callback=lambda message: None)
    try:
        checks = _by_name(run_checks(conf, timeout=1))
    finally:
        silent.release()
        service.stop()
        service.wait()
        transport.cleanup()

    workers = checks['workers']
    assert workers.status == WARNING
    assert (workers.details['topic_consumers'], workers.details['topic_pings'],
            workers.details['topic_answered']) == (2, 2, 1)
    assert 'does not answer' in workers.summary


def test_an_unreachable_broker_fails_the_status_without_hanging(placement):
    with socket.socket() as probe:   # a port nothing listens on once closed
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    conf = conf_for(placement.url, f'rabbit://guest:secret-pw@127.0.0.1:{port}/',
                    **{'scheduler.workers': 1})

    checks = _by_name(run_checks(conf, timeout=1))

    assert checks['broker'].status == FAILURE
    assert f'127.0.0.1:{port}' in checks['broker'].summary
    assert 'secret-pw' not in checks['broker'].summary
    assert checks['workers'].status == SKIPPED
