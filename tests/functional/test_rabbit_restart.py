"""RabbitMQ restarted under the running service.

The broker is a private RabbitMQ node started for this test (tests/fixtures/
rabbit_node.py), so stopping it never disturbs the machine's broker or anything
else using it. Its application is stopped with a call in flight (held inside
the service by a hanging Placement, through the fault proxy) and started
again; the service process is never restarted.
"""
from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import oslo_messaging as messaging
import pytest

from scheduler.catalog import HostCatalog
from scheduler.objects.codec import encode_request_spec
from scheduler.rpc.client import SchedulerClient
from scheduler.rpc.transport import get_transport
from scheduler.service import SchedulerService
from tests.builders import CONTEXT, SERVICE_CELL, boot_spec, new_uuids
from tests.fixtures import fault_proxy as fp
from tests.fixtures import rabbit_node
from tests.fixtures.processes import wait_for
from tests.fixtures.service import REQUIRE_RABBIT, conf_for
from tests.functional.cloud import add_host

pytestmark = pytest.mark.rabbit

# The in-flight call's own timeout: how long its caller waits for an answer.
IN_FLIGHT_TIMEOUT = 3


@pytest.fixture
def private_rabbit() -> Iterator[rabbit_node.PrivateRabbit]:
    if not rabbit_node.available():
        if REQUIRE_RABBIT:
            pytest.fail('rabbitmq-server/rabbitmqctl are not installed and '
                        'SCHEDULER_TEST_REQUIRE_RABBIT=1: the broker restart test must run')
        pytest.skip('rabbitmq-server/rabbitmqctl are not installed')
    node = rabbit_node.PrivateRabbit()
    try:
        node.start()
    except (RuntimeError, OSError) as e:
        node.shutdown()
        if REQUIRE_RABBIT:
            pytest.fail(f'could not start a private RabbitMQ node: {e}')
        pytest.skip(f'could not start a private RabbitMQ node: {e}')
    try:
        yield node
    finally:
        node.shutdown()


def test_a_broker_restart_fails_the_call_in_flight_cleanly_and_the_service_serves_again(
        private_rabbit, placement, placement_client):
    host = add_host(placement_client, 'cn0')
    proxy = fp.FaultProxy(placement.url).start()
    topic = f'scheduler-restart-{uuid.uuid4().hex[:8]}'
    conf = conf_for(proxy.url, private_rabbit.url, **{
        'scheduler.rpc_topic': topic,
        # Reconnect attempts every 1-2 s instead of backing off to 30 s.
        'oslo_messaging_rabbit.rabbit_interval_max': 2})
    service = SchedulerService(conf, transport=get_transport(conf),
                               catalog=HostCatalog(default_cell_uuid=SERVICE_CELL))
    client_transport = get_transport(conf)
    client = SchedulerClient(client_transport, topic=topic, timeout=30)
    impatient = SchedulerClient(client_transport, topic=topic, timeout=IN_FLIGHT_TIMEOUT)
    service.start()
    try:
        assert client.select_destinations(CONTEXT, encode_request_spec(boot_spec()),
                                          new_uuids(1))[0][0].compute_node_uuid == host

        # A call in flight: the service holds it, waiting for Placement.
        proxy.set_mode(fp.HANG)
        in_flight: dict[str, object] = {}

        def call() -> None:
            try:
                in_flight['result'] = impatient.select_destinations(
                    CONTEXT, encode_request_spec(boot_spec()), new_uuids(1))
            except Exception as e:  # noqa: BLE001 - asserted below
                in_flight['error'] = e

        caller = threading.Thread(target=call)
        caller.start()
        wait_for(proxy.in_progress, 'the call to reach Placement')

        private_rabbit.stop_app()
        try:
            caller.join(timeout=IN_FLIGHT_TIMEOUT * 20)
            assert not caller.is_alive(), 'the call in flight never returned'
        finally:
            private_rabbit.start_app()
        proxy.set_mode(fp.PASS)

        # The caller was told, within its own timeout, in oslo.messaging's terms.
        assert isinstance(in_flight.get('error'), messaging.MessagingTimeout), in_flight

        # The same service (never restarted) answers again once it has reconnected.
        def answers() -> bool:
            try:
                impatient.call(CONTEXT, 'ping', version='1.1', namespace='baseapi', arg=1)
            except messaging.MessagingException:
                return False
            return True

        wait_for(answers, 'the service to reconnect to the restarted broker')
        [instance] = new_uuids(1)
        [selections] = client.select_destinations(CONTEXT, encode_request_spec(boot_spec()),
                                                  [instance])
        assert selections[0].compute_node_uuid == host
        assert placement_client.get_allocations(instance).allocations
    finally:
        proxy.stop()
        service.stop()
        service.wait()
        service.transport.cleanup()
        client_transport.cleanup()
