"""No token, password or credential ever reaches the logs, even at DEBUG.

``scheduler-service`` runs as operators run it (a process, a config file,
oslo.log) with DEBUG on for itself and for keystoneauth, oslo.messaging, kombu,
amqp and urllib3, and with secrets planted everywhere one can hide:

* ``[placement] password``: keystoneauth's password plugin, authenticating
  against a loopback Keystone (tests/fixtures/fake_keystone.py) that checks the
  password and issues the token the embedded Placement accepts;
* ``[DEFAULT] transport_url``: the password of a RabbitMQ user created for
  this test (and deleted after it);
* the RPC context's ``auth_token``;
* ``requested_destination.cell``'s ``transport_url`` and ``database_connection``.

Requests that succeed, fail with NoValidHost and fail with InvalidInput are
sent; then everything the process wrote is searched for each secret.
"""
from __future__ import annotations

import logging
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from scheduler import conf as scheduler_conf
from scheduler import exceptions as exc
from scheduler.objects.codec import encode_request_spec
from scheduler.objects.spec import CellMapping, Destination
from scheduler.rpc.client import SchedulerClient
from scheduler.rpc.transport import get_transport
from scheduler.service import SchedulerService
from tests.builders import CONTEXT, SERVICE_CELL, boot_spec, new_uuids
from tests.fixtures.fake_keystone import FakeKeystone
from tests.fixtures.processes import wait_for
from tests.fixtures.service import RABBIT_URL, REQUIRE_RABBIT, conf_for, rabbit_answers
from tests.functional.cloud import add_host

REPO = pathlib.Path(__file__).resolve().parents[2]
SECRETS = {name: f'Planted{name.title().replace("-", "")}{uuid.uuid4().hex}' for name in (
    'placement-password', 'rabbit-password', 'rpc-auth-token', 'cell-mq-password',
    'cell-db-password')}
DEBUG_LOGGERS = ('scheduler', 'placement_client', 'keystoneauth', 'keystoneauth1',
                 'oslo.messaging', 'oslo_messaging', 'kombu', 'amqp', 'urllib3', 'stevedore')


def _rabbitmqctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(['rabbitmqctl', *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def secret_transport_url() -> Iterator[str]:
    """A RabbitMQ user of its own whose password is one of the planted secrets."""
    problem = None
    if not rabbit_answers():
        problem = 'RabbitMQ on 127.0.0.1:5672 does not answer'
    elif shutil.which('rabbitmqctl') is None:
        problem = 'rabbitmqctl is not installed (needed to create a user with a planted password)'
    if problem:
        if REQUIRE_RABBIT:
            pytest.fail(f'{problem} and SCHEDULER_TEST_REQUIRE_RABBIT=1')
        pytest.skip(problem)
    user = f'scheduler-secrets-{uuid.uuid4().hex[:8]}'
    added = _rabbitmqctl('add_user', user, SECRETS['rabbit-password'])
    if added.returncode != 0:
        pytest.fail(f'rabbitmqctl add_user failed: {added.stderr}')
    try:
        granted = _rabbitmqctl('set_permissions', '-p', '/', user, '.*', '.*', '.*')
        assert granted.returncode == 0, granted.stderr
        yield f'rabbit://{user}:{SECRETS["rabbit-password"]}@127.0.0.1:5672/'
    finally:
        _rabbitmqctl('delete_user', user)


@pytest.fixture
def keystone(placement) -> Iterator[FakeKeystone]:
    keystone = FakeKeystone(username='scheduler', password=SECRETS['placement-password'],
                            placement_url=placement.url).start()
    yield keystone
    keystone.stop()


def write_config(path: pathlib.Path, *, transport_url: str, topic: str,
                 keystone_url: str, password: str = SECRETS['placement-password']
                 ) -> pathlib.Path:
    levels = ','.join(f'{name}=DEBUG' for name in DEBUG_LOGGERS)
    path.write_text(f"""
[DEFAULT]
transport_url = {transport_url}
host = scheduler-secrets-test
state_path = {path.parent}
debug = true
default_log_levels = {levels}

[scheduler]
workers = 1
rpc_topic = {topic}
default_cell_uuid = {SERVICE_CELL}

[filter_scheduler]
enabled_filters = ComputeFilter
weight_classes = RAMWeigher

[placement]
auth_type = password
auth_url = {keystone_url}/v3
username = scheduler
password = {password}
user_domain_name = Default
project_name = service
project_domain_name = Default
region_name = RegionOne
valid_interfaces = internal
max_retries = 1
""")
    return path


def spec_with_cell_secrets(**flavor):
    cell = CellMapping(
        uuid=SERVICE_CELL, name='cell1',
        transport_url=f'rabbit://nova:{SECRETS["cell-mq-password"]}@cell1-mq:5672/',
        database_connection=(f'mysql+pymysql://nova:{SECRETS["cell-db-password"]}'
                             f'@cell1-db/nova_cell1'))
    return encode_request_spec(boot_spec(requested_destination=Destination(cell=cell),
                                         **flavor))


@pytest.mark.rabbit
def test_a_full_request_at_debug_logs_no_token_password_or_credential(
        tmp_path, placement, placement_client, keystone, secret_transport_url):
    host = add_host(placement_client, 'cn0')
    topic = f'scheduler-secrets-{uuid.uuid4().hex[:8]}'
    config = write_config(tmp_path / 'scheduler.conf', transport_url=secret_transport_url,
                          topic=topic, keystone_url=keystone.url)
    log_path = tmp_path / 'service.log'
    with log_path.open('wb') as log:
        process = subprocess.Popen(
            [sys.executable, '-m', 'scheduler.cmd.service', '--config-file', str(config)],
            cwd=REPO, env={**os.environ, 'PYTHONPATH': str(REPO)}, stdout=log,
            stderr=subprocess.STDOUT)
    transport = get_transport(conf_for(placement.url, RABBIT_URL))
    client = SchedulerClient(transport, topic=topic, timeout=20)
    # A ping sent before the service has declared its queue is lost: ask often, briefly.
    pinger = SchedulerClient(transport, topic=topic, timeout=2)
    context = dict(CONTEXT, auth_token=SECRETS['rpc-auth-token'])
    try:
        def answers():
            assert process.poll() is None, log_path.read_text(errors='replace')
            try:
                return pinger.call(context, 'ping', version='1.1', namespace='baseapi', arg=1)
            except Exception:  # noqa: BLE001 - not up yet
                return None

        wait_for(answers, 'the service to answer ping', timeout=90)

        [instance] = new_uuids(1)
        [selections] = client.select_destinations(context, spec_with_cell_secrets(),
                                                  [instance])
        assert selections[0].compute_node_uuid == host
        with pytest.raises(exc.NoValidHost):
            client.select_destinations(context, spec_with_cell_secrets(vcpus=64), new_uuids(1))
        malformed = spec_with_cell_secrets()
        malformed['nova_object.data']['flavor']['nova_object.data']['vcpus'] = -1
        with pytest.raises(exc.InvalidInput):
            client.select_destinations(context, malformed, new_uuids(1))
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
        transport.cleanup()
    output = log_path.read_text(errors='replace')

    # The planted secrets were really in use, and DEBUG really was on.
    assert SECRETS['placement-password'] in keystone.passwords_seen
    assert placement_client.get_allocations(instance).allocations
    for evidence in ('DEBUG keystoneauth', 'DEBUG oslo_messaging', 'REQ: curl',
                     'DEBUG scheduler.manager'):
        assert evidence in output, f'no {evidence!r} in the log: DEBUG was not on'
    leaks = {name: [line for line in output.splitlines() if secret in line][:3]
             for name, secret in SECRETS.items() if secret in output}
    assert not leaks, leaks


def test_credentials_placement_refuses_stop_start_up_without_showing_the_password(
        tmp_path, keystone, caplog):
    wrong = f'Wrong{uuid.uuid4().hex}'
    config = write_config(tmp_path / 'scheduler.conf', transport_url='fake://', topic='t',
                          keystone_url=keystone.url, password=wrong)
    conf = scheduler_conf.parse_args(['--config-file', str(config)])

    with caplog.at_level(logging.DEBUG), pytest.raises(exc.ConfigurationError) as failure:
        SchedulerService(conf)

    assert 'credentials were refused' in str(failure.value)
    assert wrong in keystone.passwords_seen     # it was really tried ...
    assert wrong not in str(failure.value)      # ... and is never shown
    assert wrong not in caplog.text
