"""Nova's own scheduler client against this service, the way nova-conductor talks to it.

Run with ``tox -e interop`` (nova 34) or ``tox -e interop-<series>`` (that
release's nova under that series' upper-constraints, tests/interop/constraints/).
The test process plays nova-conductor, nova-api and nova-compute: Nova's
``SchedulerQueryClient``/``SchedulerAPI``, Nova's objects and Nova's
serializers, on a transport made by ``nova.rpc.init`` from ``nova.conf.CONF``
(``control_exchange = nova``, ``allowed_remote_exmods = ['nova.exception']``).
It imports nothing of this service that needs more than Nova's own libraries.
The service under test is ``scheduler-service`` in a subprocess, consuming
topic ``scheduler`` on exchange ``nova`` of the RabbitMQ on 127.0.0.1:5672,
against a real Placement in another subprocess; both run from the service's
own Python (tests/interop/service_side.py). RabbitMQ is required: without it
these tests fail, they never skip.
"""
from __future__ import annotations

import os
import pathlib
import socket
from collections.abc import Iterator

import pytest

from placement_client.client import PlacementClient
from scheduler.simulate import seed
from tests.fixtures.placement import make_placement_conf
from tests.fixtures.processes import wait_for, write_config
from tests.interop import service_side

try:
    import nova.conf
    from nova import baserpc, config, objects, rpc
    from nova.objects import base as objects_base
    from nova.scheduler.client import query
except ImportError:  # pragma: no cover - only outside the interop env
    pytest.fail('tests/interop needs Nova: run them with `tox -e interop`', pytrace=False)

from tests.interop.nova_builders import SERVICE_CELL, admin_context  # noqa: E402 - needs Nova

RABBIT_URL = os.environ.get('SCHEDULER_TEST_RABBIT_URL', 'rabbit://guest:guest@127.0.0.1:5672/')

FILTERS = ('ComputeFilter,ServerGroupAntiAffinityFilter,'
           'ServerGroupAffinityFilter,SameHostFilter,DifferentHostFilter,'
           'AggregateInstanceExtraSpecsFilter')


@pytest.fixture(scope='session')
def rabbit() -> str:
    try:
        socket.create_connection(('127.0.0.1', 5672), timeout=1).close()
    except OSError:
        pytest.fail('the interop tests need RabbitMQ on 127.0.0.1:5672 (guest/guest): Nova\'s '
                    'client only speaks to a real broker', pytrace=False)
    return RABBIT_URL


@pytest.fixture(scope='session')
def nova_conf(rabbit: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """nova.conf.CONF parsed as a Nova service parses it, and Nova's RPC layer initialised.

    ``nova.config.parse_args`` sets ``control_exchange`` to ``nova`` and calls
    ``nova.rpc.init`` (transport with ``allowed_remote_exmods = ['nova.exception']``);
    the databases are not configured because nothing here reads them.
    """
    path = tmp_path_factory.mktemp('nova') / 'nova.conf'
    path.write_text(f'[DEFAULT]\ntransport_url = {rabbit}\nrpc_response_timeout = 30\n'
                    'long_rpc_timeout = 120\n')
    config.parse_args(['nova-interop', '--config-file', str(path)], configure_db=False)
    objects.register_all()
    assert rpc.get_allowed_exmods() == ['nova.exception']
    yield nova.conf.CONF
    rpc.cleanup()


@pytest.fixture(scope='session')
def placement_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Placement (openstack-placement on sqlite) for the session."""
    process, url = service_side.start_placement(tmp_path_factory.mktemp('placement'))
    try:
        yield url
    finally:
        process.stop()


@pytest.fixture
def placement_client(placement_url: str) -> PlacementClient:
    return PlacementClient.from_conf(make_placement_conf(placement_url))


@pytest.fixture
def placement(placement_client: PlacementClient) -> Iterator[PlacementClient]:
    """Placement for one test; every provider and allocation deleted afterwards."""
    yield placement_client
    seed.delete_all(placement_client)


@pytest.fixture(scope='session')
def scheduler_process(placement_url: str, rabbit: str, nova_conf,
                      tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[service_side.SideProcess]:
    """One ``scheduler-service`` for the session, on Nova's own topic and exchange."""
    config_path = write_config(
        pathlib.Path(tmp_path_factory.mktemp('scheduler')) / 'scheduler.conf',
        placement_url=placement_url, transport_url=rabbit, topic='scheduler',
        workers=1, filters=FILTERS, weighers='RAMWeigher',
        extra=f'[scheduler]\ndefault_cell_uuid = {SERVICE_CELL}\nmax_attempts = 3\n')
    process = service_side.start_scheduler(config_path)
    # Nova's own baseapi client: a ping before the queue exists is lost, so ask often.
    pinger = baserpc.BaseAPI('scheduler')
    ctxt = admin_context()

    def answers():
        if process.proc.poll() is not None:
            pytest.fail(f'scheduler-service exited early:\n{process.output()}')
        try:
            return pinger.ping(ctxt, 'interop', timeout=2)
        except Exception:  # noqa: BLE001 - not up yet
            return None

    try:
        assert wait_for(answers, 'scheduler-service to answer ping', timeout=90) == {
            'service': 'scheduler', 'arg': 'interop'}
        yield process
    finally:
        process.stop()


@pytest.fixture
def query_client(scheduler_process) -> query.SchedulerQueryClient:
    """What nova-conductor holds as ``self.query_client``."""
    client = query.SchedulerQueryClient()
    # Nova's own serializers carry the context and the objects both ways.
    serializer = client.scheduler_rpcapi.client.serializer
    assert isinstance(serializer, rpc.RequestContextSerializer)
    assert isinstance(serializer._base, objects_base.NovaObjectSerializer)
    return client

