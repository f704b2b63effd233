"""select_destinations notifications through a real Notifier, seen by a real listener.

Over oslo.messaging's in-process ``fake://`` driver and over RabbitMQ (the
``transport_url`` fixture): the service sends with the ``messaging`` driver,
a notification listener on the same notification transport receives.
"""
from __future__ import annotations

import json
import queue
import uuid

import oslo_messaging as messaging
import pytest

from scheduler import exceptions as exc
from scheduler.catalog import HostCatalog
from scheduler.objects.codec import encode_request_spec
from scheduler.rpc.client import SchedulerClient
from scheduler.rpc.transport import get_transport
from scheduler.service import SchedulerService
from tests.builders import CONTEXT, SERVICE_CELL, boot_spec, new_uuids, select
from tests.fixtures.service import conf_for
from tests.functional.cloud import add_host


class Recorder:
    def __init__(self):
        self.received: queue.Queue = queue.Queue()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self.received.put({'ctxt': ctxt, 'publisher_id': publisher_id,
                           'event_type': event_type, 'payload': payload})


def receive(recorder: Recorder, count: int) -> list[dict]:
    # Bounded: a missing notification fails the test instead of hanging it.
    return [recorder.received.get(timeout=20) for _ in range(count)]


@pytest.fixture
def notified_scheduler(placement, transport_url):
    """The real service with notifications in both formats, and a listener of both topics."""
    suffix = uuid.uuid4().hex[:8]
    legacy_topic, versioned_topic = f'notifications-{suffix}', f'versioned-{suffix}'
    topic = f'scheduler-test-{suffix}'
    conf = conf_for(placement.url, transport_url, **{
        'scheduler.rpc_topic': topic,
        'oslo_messaging_notifications.driver': ['messaging'],
        'oslo_messaging_notifications.topics': [legacy_topic],
        'notifications.notification_format': 'both',
        'notifications.versioned_notifications_topics': [versioned_topic]})
    notification_transport = messaging.get_notification_transport(conf)
    recorder = Recorder()
    listener = messaging.get_notification_listener(
        notification_transport,
        [messaging.Target(topic=legacy_topic), messaging.Target(topic=versioned_topic)],
        [recorder], executor='threading')
    listener.start()
    transport = get_transport(conf)
    service = SchedulerService(conf, transport=transport,
                               catalog=HostCatalog(default_cell_uuid=SERVICE_CELL),
                               notification_transport=notification_transport)
    service.start()
    client = SchedulerClient(transport, topic=topic, timeout=60)
    yield client, recorder
    service.stop()
    service.wait()
    listener.stop()
    listener.wait()
    transport.cleanup()
    notification_transport.cleanup()


def test_a_placed_request_sends_start_and_end_in_both_formats_without_the_token(
        notified_scheduler, placement_client):
    client, recorder = notified_scheduler
    add_host(placement_client, 'cn0')
    [instance] = new_uuids(1)

    spec = boot_spec(vcpus=2, instance_uuid=instance)
    select(client, spec, [instance])

    got = receive(recorder, 4)
    by_key = {(n['publisher_id'], n['event_type']): n for n in got}
    assert set(by_key) == {
        ('scheduler.scheduler-test', 'scheduler.select_destinations.start'),
        ('scheduler.scheduler-test', 'scheduler.select_destinations.end'),
        ('nova-scheduler:scheduler-test', 'scheduler.select_destinations.start'),
        ('nova-scheduler:scheduler-test', 'scheduler.select_destinations.end')}
    legacy = by_key[('scheduler.scheduler-test', 'scheduler.select_destinations.end')]
    assert legacy['payload']['request_spec']['instance_properties']['vcpus'] == 2
    assert legacy['payload']['request_spec']['instance_properties']['uuid'] == instance
    versioned = by_key[('nova-scheduler:scheduler-test', 'scheduler.select_destinations.start')]
    assert versioned['payload']['nova_object.name'] == 'RequestSpecPayload'
    assert versioned['payload']['nova_object.data']['flavor']['nova_object.data']['vcpus'] == 2
    assert versioned['ctxt']['request_id'] == CONTEXT['request_id']
    for notification in got:
        assert CONTEXT['auth_token'] not in json.dumps(notification, default=str)


def test_a_request_that_fails_sends_only_start(notified_scheduler, placement_client):
    client, recorder = notified_scheduler
    add_host(placement_client, 'cn0', vcpus=2)

    with pytest.raises(exc.NoValidHost):
        select(client, boot_spec(vcpus=64), new_uuids(1))

    got = receive(recorder, 2)
    assert {n['event_type'] for n in got} == {'scheduler.select_destinations.start'}
    # Whatever else arrives would be an .end; a successful call flushes the order.
    client.select_destinations(CONTEXT, encode_request_spec(boot_spec(vcpus=1)), new_uuids(1))
    later = receive(recorder, 4)
    assert [n['event_type'] for n in later].count('scheduler.select_destinations.end') == 2
