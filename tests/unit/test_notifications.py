"""select_destinations notifications: payload shapes, secrets, enabling, failures.

Delivery through a real Notifier and listener is in
tests/functional/test_notifications.py.
"""
from __future__ import annotations

import json
import logging

import oslo_messaging as messaging
import pytest

from scheduler import exceptions as exc
from scheduler import notifications
from scheduler.catalog import HostCatalog
from scheduler.context import RequestContext
from scheduler.objects.codec import DecodeLimits
from scheduler.objects.spec import (
    CellMapping,
    Destination,
    Flavor,
    ImageMeta,
    ImageMetaProps,
    InstanceGroup,
    RequestSpec,
)
from scheduler.rpc.endpoint import SchedulerEndpoint
from tests.builders import CELL, service_conf
from tests.fixtures import wire_samples
from tests.unit.test_endpoint import RecordingManager

CELL_SECRET_URL = 'rabbit://cell1:cell-password@cell1-rabbit:5672/'
CELL_SECRET_DB = 'mysql+pymysql://nova:db-password@cell1-db/nova_cell1'
TOKEN = 'gAAAAA-user-token'


def spec_with_everything() -> RequestSpec:
    return RequestSpec(
        flavor=Flavor(id=7, flavorid='m1', name='m1.small', vcpus=2, memory_mb=2048, root_gb=20,
                      extra_specs={'hw:cpu_policy': 'shared'}),
        image=ImageMeta(id='0f6c1e0e-9d3c-4b0a-8f4b-3a2b1c0d9e8f', name='cirros',
                        disk_format='qcow2', properties=ImageMetaProps(hw_machine_type='q35')),
        instance_uuid='5d2c1b0a-9e8f-4d7c-8b6a-5f4e3d2c1b0a', num_instances=2,
        project_id='p1', user_id='u1', availability_zone='az1', force_hosts=['h1'],
        ignore_hosts=['h9'],
        requested_destination=Destination(
            host='h1', cell=CellMapping(uuid='c1', name='cell1', transport_url=CELL_SECRET_URL,
                                        database_connection=CELL_SECRET_DB)),
        instance_group=InstanceGroup(uuid='g1', policy='anti-affinity', members=['i1']),
        scheduler_hints={'group': ['g1'], 'size': [3]})


def test_the_legacy_payload_is_novas_legacy_request_spec_dict():
    legacy = notifications.legacy_request_spec(spec_with_everything())
    assert set(legacy) == {'image', 'instance_properties', 'instance_type', 'num_instances'}
    assert legacy['num_instances'] == 2
    assert legacy['instance_properties'] == {
        'numa_topology': None, 'pci_requests': None, 'project_id': 'p1', 'user_id': 'u1',
        'availability_zone': 'az1', 'uuid': '5d2c1b0a-9e8f-4d7c-8b6a-5f4e3d2c1b0a',
        'root_gb': 20, 'ephemeral_gb': 0, 'memory_mb': 2048, 'vcpus': 2}
    assert legacy['instance_type']['flavorid'] == 'm1'
    assert legacy['instance_type']['extra_specs'] == {'hw:cpu_policy': 'shared'}
    assert legacy['image']['properties'] == {'hw_machine_type': 'q35'}


def test_the_legacy_payload_of_a_spec_without_image_has_an_empty_image():
    assert notifications.legacy_request_spec(RequestSpec())['image'] == {}


def test_the_versioned_payload_is_a_request_spec_payload_primitive():
    payload = notifications.request_spec_payload(spec_with_everything())
    assert payload['nova_object.name'] == 'RequestSpecPayload'
    assert payload['nova_object.namespace'] == 'nova'
    data = payload['nova_object.data']
    assert data['flavor']['nova_object.name'] == 'FlavorPayload'
    assert data['flavor']['nova_object.data']['vcpus'] == 2
    assert data['image']['nova_object.name'] == 'ImageMetaPayload'
    assert data['force_hosts'] == 'h1'       # Nova sends the first forced host only
    assert data['force_nodes'] is None
    assert data['ignore_hosts'] == ['h9']
    assert data['instance_group']['nova_object.data']['policy'] == 'anti-affinity'
    assert data['scheduler_hints'] == {'group': ['g1'], 'size': ['3']}
    destination = data['requested_destination']['nova_object.data']
    assert destination['host'] == 'h1'
    assert destination['cell']['nova_object.data'] == {'uuid': 'c1', 'name': 'cell1',
                                                       'disabled': False}


@pytest.mark.parametrize('build', [notifications.legacy_request_spec,
                                   notifications.request_spec_payload])
def test_no_payload_carries_the_cells_credentials(build):
    text = json.dumps(build(spec_with_everything()))
    assert 'password' not in text
    assert CELL_SECRET_URL not in text and CELL_SECRET_DB not in text


def test_the_notification_context_has_no_auth_token():
    context = RequestContext(request_id='req-1', user_id='u1', auth_token=TOKEN,
                             extra={'service_catalog': [{'type': 'image'}]})
    serialized = notifications.NotificationSerializer().serialize_context(context)
    assert serialized['request_id'] == 'req-1'
    assert 'auth_token' not in serialized and 'service_catalog' not in serialized
    assert TOKEN not in json.dumps(serialized)


def test_the_redacted_copy_of_a_context_keeps_the_ids_and_drops_the_token():
    context = RequestContext(request_id='req-1', project_id='p1', auth_token=TOKEN,
                             extra={'service_catalog': [{'type': 'image'}], 'tenant': 'p1'})
    copy = context.redacted_copy()
    assert (copy.request_id, copy.project_id, copy.auth_token) == ('req-1', 'p1', None)
    assert copy.extra == {'tenant': 'p1'}
    assert context.auth_token == TOKEN   # the original is untouched


def test_without_a_driver_there_is_no_notifier():
    assert notifications.from_conf(service_conf()) is None
    assert notifications.from_conf(
        service_conf(**{'oslo_messaging_notifications.driver': ['noop']})) is None


@pytest.mark.parametrize('fmt,expected', [
    ('unversioned', ['scheduler.sched-1']),
    ('versioned', ['nova-scheduler:sched-1']),
    ('both', ['scheduler.sched-1', 'nova-scheduler:sched-1']),
])
def test_the_format_option_chooses_which_notifications_are_sent(fmt, expected):
    conf = service_conf(host='sched-1', **{'oslo_messaging_notifications.driver': ['test'],
                                           'notifications.notification_format': fmt})
    transport = messaging.get_notification_transport(conf, url='fake://')
    notifier = notifications.from_conf(conf, transport)
    assert notifier is not None and notifier.enabled
    # The 'test' driver records what a real driver would have sent.
    from oslo_messaging.notify import _impl_test
    _impl_test.reset()
    notifier.start(RequestContext(request_id='req-n', auth_token=TOKEN), spec_with_everything())
    sent = _impl_test.NOTIFICATIONS
    # The context travels (oslo.messaging drops one it cannot redact), minus the token.
    assert all(n[0].get('request_id') == 'req-n' for n in sent)
    assert [n[1]['publisher_id'] for n in sent] == expected
    assert {n[1]['event_type'] for n in sent} == {notifications.EVENT_START}
    assert all(TOKEN not in json.dumps(n[0]) for n in sent)
    transport.cleanup()


def test_a_notification_that_cannot_be_built_is_logged_and_never_raised(caplog,
                                                                        monkeypatch):
    conf = service_conf(host='sched-1', **{'oslo_messaging_notifications.driver': ['test']})
    transport = messaging.get_notification_transport(conf, url='fake://')
    notifier = notifications.from_conf(conf, transport)

    def broken(spec):
        raise TypeError('a payload bug')

    # oslo.messaging swallows driver failures itself; what could still escape is ours.
    monkeypatch.setattr(notifications, 'legacy_request_spec', broken)
    with caplog.at_level(logging.WARNING, logger='scheduler.notifications'):
        notifier.start(RequestContext(request_id='req-x'), RequestSpec())
    assert 'could not send scheduler.select_destinations.start' in caplog.text
    transport.cleanup()


class RecordingNotifier:
    def __init__(self):
        self.events: list[str] = []

    def start(self, context, spec):
        self.events.append('start')

    def end(self, context, spec):
        self.events.append('end')


def endpoint_with(manager, notifier) -> SchedulerEndpoint:
    return SchedulerEndpoint(manager, HostCatalog(default_cell_uuid=CELL), DecodeLimits(),
                             notifier=notifier)


def test_the_endpoint_notifies_start_and_end_around_a_request():
    notifier = RecordingNotifier()
    endpoint = endpoint_with(RecordingManager(), notifier)
    endpoint.select_destinations(RequestContext(), **dict(wire_samples.call_message()['args']))
    assert notifier.events == ['start', 'end']


def test_a_failed_request_gets_a_start_but_no_end_as_in_nova():
    notifier = RecordingNotifier()
    endpoint = endpoint_with(RecordingManager(error=exc.NoValidHost(reason='x')), notifier)
    # The dispatcher's wrapper of an expected error (the conductor gets NoValidHost).
    with pytest.raises(messaging.ExpectedException):
        endpoint.select_destinations(RequestContext(),
                                     **dict(wire_samples.call_message()['args']))
    assert notifier.events == ['start']
