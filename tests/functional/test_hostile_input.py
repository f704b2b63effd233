"""Hostile and malformed ``select_destinations`` calls, sent through the real transport.

Each call gets a clear, bounded error naming what is wrong; nothing is
claimed (read back from Placement); and the service answers the very next
valid call. One service per transport serves the whole module, so a call
that broke it would fail every case after it.

Limits are configured low ([scheduler] max_instances_per_request = 4,
max_string_length = 256, max_extra_specs = 16, max_nesting_depth = 8) so the
cases stay small; the codec's unit and fuzz tests cover the defaults.
"""
from __future__ import annotations

import copy
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import kombu
import pytest

from placement_client.client import PlacementClient
from scheduler import exceptions as exc
from scheduler.catalog import HostCatalog
from scheduler.objects.codec import encode_request_spec
from scheduler.rpc.client import SchedulerClient
from scheduler.rpc.transport import get_transport
from scheduler.service import SchedulerService
from tests.builders import CONTEXT, SERVICE_CELL, boot_spec
from tests.fixtures.placement import make_placement_conf
from tests.fixtures.service import RABBIT_URL, REQUIRE_RABBIT, conf_for, rabbit_answers
from tests.functional.cloud import add_host, consumers_with_allocations

MAX_INSTANCES = 4
MAX_STRING = 256
MAX_EXTRA_SPECS = 16
MAX_DEPTH = 8


@dataclass
class Served:
    client: SchedulerClient
    placement: PlacementClient
    hosts: list[str]
    topic: str


@pytest.fixture(scope='module', params=['fake', 'rabbit'])
def served(request, embedded_placement) -> Iterator[Served]:
    if request.param == 'rabbit' and not rabbit_answers():
        if REQUIRE_RABBIT:
            pytest.fail('RabbitMQ on 127.0.0.1:5672 does not answer and '
                        'SCHEDULER_TEST_REQUIRE_RABBIT=1')
        pytest.skip('RabbitMQ on 127.0.0.1:5672 does not answer')
    embedded_placement.wipe()
    placement = PlacementClient.from_conf(make_placement_conf(embedded_placement.url))
    hosts = [add_host(placement, f'cn{i}') for i in range(2)]
    topic = f'scheduler-hostile-{uuid.uuid4().hex[:8]}'
    conf = conf_for(embedded_placement.url,
                    'fake://' if request.param == 'fake' else RABBIT_URL, **{
                        'scheduler.rpc_topic': topic,
                        'scheduler.max_instances_per_request': MAX_INSTANCES,
                        'scheduler.max_string_length': MAX_STRING,
                        'scheduler.max_extra_specs': MAX_EXTRA_SPECS,
                        'scheduler.max_nesting_depth': MAX_DEPTH})
    transport = get_transport(conf)
    service = SchedulerService(conf, transport=transport,
                               catalog=HostCatalog(default_cell_uuid=SERVICE_CELL))
    service.start()
    try:
        yield Served(SchedulerClient(transport, topic=topic, timeout=30), placement, hosts,
                     topic)
    finally:
        service.stop()
        service.wait()
        transport.cleanup()
        embedded_placement.wipe()


# ------------------------------------------------------------------------- cases


def _spec(**changes: Any) -> dict[str, Any]:
    return encode_request_spec(boot_spec(**changes))


def _with(path: str, value: Any, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """The spec primitive with the field at ``path`` (``/``-separated; ``data`` stands
    for ``nova_object.data``)."""
    spec = copy.deepcopy(spec or _spec())
    *parents, last = [k if k != 'data' else 'nova_object.data' for k in path.split('/')]
    node = spec
    for key in parents:
        node = node[key]
    node[last] = value
    return spec


def _extra_specs(specs: dict[str, str]) -> dict[str, Any]:
    return _spec(extra_specs=specs)


def _nested(levels: int) -> Any:
    value: Any = 'x'
    for _ in range(levels):
        value = [value]
    return value


@dataclass(frozen=True)
class Case:
    kwargs: Callable[[str], dict[str, Any]]   # instance uuid -> select_destinations kwargs
    error: type[Exception]
    reason: str                                # a fragment the reason must contain


def _call(spec: Any = None, uuids: Any = None, **other: Any) -> Callable[[str], dict]:
    def build(instance: str) -> dict[str, Any]:
        kwargs = {'spec_obj': spec, 'instance_uuids': [instance] if uuids is None else uuids,
                  'return_objects': True, 'return_alternates': False}
        kwargs.update(other)
        return kwargs
    return build


_UUID = '2c5a0e0e-5f6d-4b39-9c5e-6f5d2a9c0b11'

CASES = {
    # Wrong types, missing and unknown arguments.
    'spec_obj is a string': Case(_call('DROP TABLE hosts'), exc.InvalidInput, 'spec_obj'),
    'spec_obj is missing': Case(_call(None), exc.InvalidInput, 'spec_obj is required'),
    'an unknown argument': Case(_call(_spec(), evil=1), exc.InvalidInput,
                                'unexpected argument(s): evil'),
    'instance_uuids is a string': Case(_call(_spec(), uuids=_UUID), exc.InvalidInput,
                                       'instance_uuids'),
    'an instance uuid is malformed': Case(_call(_spec(), uuids=['../../etc/passwd']),
                                          exc.InvalidInput, 'instance_uuids'),
    'instance uuids repeat': Case(_call(_spec(), uuids=[_UUID, _UUID]), exc.InvalidInput,
                                  'instance_uuids'),
    'return_objects is not a boolean': Case(_call(_spec(), return_objects='yes'),
                                            exc.InvalidInput, 'return_objects'),
    'a flavor amount is a string': Case(_call(_with('data/flavor/data/vcpus', 'many')),
                                        exc.InvalidInput, 'spec_obj.flavor.vcpus'),
    'the flavor is another object': Case(
        _call(_with('data/flavor/nova_object.name', 'ImageMeta')), exc.InvalidInput,
        'spec_obj.flavor'),
    # Unknown objects and versions.
    'an unknown object': Case(_call(_with('nova_object.name', 'EvilSpec')), exc.InvalidInput,
                              'spec_obj'),
    'an unknown major version': Case(_call(_with('nova_object.version', '2.0')),
                                     exc.InvalidInput, 'spec_obj'),
    'a foreign namespace': Case(_call(_with('nova_object.namespace', 'evil')),
                                exc.InvalidInput, 'spec_obj'),
    # Beyond the configured bounds.
    'more instance uuids than allowed': Case(
        _call(_spec(), uuids=[str(uuid.uuid4()) for _ in range(MAX_INSTANCES + 1)]),
        exc.InvalidInput, 'instance_uuids'),
    'num_instances beyond the maximum': Case(
        _call(_spec(num_instances=MAX_INSTANCES + 1)), exc.InvalidInput, 'num_instances'),
    'an oversized string': Case(_call(_with('data/flavor/data/name', 'x' * (MAX_STRING + 1))),
                                exc.InvalidInput, 'spec_obj.flavor.name'),
    'an oversized extra spec value': Case(
        _call(_extra_specs({'hw:cpu_policy': 'x' * (MAX_STRING + 1)})), exc.InvalidInput,
        'extra_specs'),
    'too many extra specs': Case(
        _call(_extra_specs({f'custom:k{i}': 'v' for i in range(MAX_EXTRA_SPECS + 1)})),
        exc.InvalidInput, 'extra_specs'),
    'a deeply nested hint': Case(
        _call(_with('data/scheduler_hints', {'evil': _nested(MAX_DEPTH * 4)})),
        exc.InvalidInput, f'nested deeper than {MAX_DEPTH} levels'),
    # Negative and absurd amounts.
    'a negative amount': Case(_call(_with('data/flavor/data/vcpus', -1)), exc.InvalidInput,
                              'spec_obj.flavor.vcpus'),
    'an absurd flavor amount': Case(_call(_with('data/flavor/data/root_gb', 2**40)),
                                    exc.InvalidInput, 'spec_obj.flavor.root_gb'),
    'an absurd amount in an extra spec': Case(
        _call(_extra_specs({'resources:VCPU': '9' * 30})), exc.InvalidInput,
        'larger than Placement can hold'),
    'a negative amount in an extra spec': Case(
        _call(_extra_specs({'resources:VCPU': '-2'})), exc.InvalidInput, 'negative'),
    # Unknown or malformed resource classes and traits.
    'a malformed resource class': Case(_call(_extra_specs({'resources:vcpu': '1'})),
                                       exc.InvalidInput, "'vcpu'"),
    'a resource class Placement does not know': Case(
        _call(_extra_specs({'resources:CUSTOM_NO_SUCH_CLASS': '1'})), exc.NoValidHost,
        'CUSTOM_NO_SUCH_CLASS'),
    'a malformed trait': Case(_call(_extra_specs({'trait:has spaces': 'required'})),
                              exc.InvalidInput, "'has spaces'"),
    'a trait Placement does not know': Case(
        _call(_extra_specs({'trait:CUSTOM_NO_SUCH_TRAIT': 'required'})), exc.NoValidHost,
        'No such trait(s): CUSTOM_NO_SUCH_TRAIT'),
    'an image trait that is no trait': Case(
        _call(_with('data/image/data/properties', {
            'nova_object.name': 'ImageMetaProps', 'nova_object.namespace': 'nova',
            'nova_object.version': '1.44',
            'nova_object.data': {'traits_required': ['not a trait']}})),
        exc.InvalidInput, 'traits_required'),
}


@pytest.mark.parametrize('case', CASES.values(), ids=CASES.keys())
def test_a_hostile_call_gets_a_clear_error_claims_nothing_and_the_service_keeps_serving(
        served: Served, case: Case) -> None:
    instance = str(uuid.uuid4())

    with pytest.raises(case.error) as failure:
        served.client.call(CONTEXT, 'select_destinations', version='4.5',
                           **case.kwargs(instance))

    reason = failure.value.reason
    assert case.reason in reason, reason
    assert len(reason) <= 512
    assert consumers_with_allocations(served.placement, served.hosts) == {}

    # The very next valid call is served (and its claim is given back).
    valid = str(uuid.uuid4())
    [selections] = served.client.select_destinations(CONTEXT, _spec(), [valid],
                                                     return_alternates=False)
    assert selections[0].compute_node_uuid in served.hosts
    assert served.placement.delete_allocations(valid) is True


def test_an_unknown_field_inside_a_known_object_is_ignored_as_nova_ignores_it(
        served: Served) -> None:
    # oslo.versionedobjects ignores fields it does not know (a newer minor
    # version may add some), and so does the codec: the call is served.
    instance = str(uuid.uuid4())
    spec = _with('data/flavor/data/evil_field', {'anything': ['at', 'all']})

    [selections] = served.client.select_destinations(CONTEXT, spec, [instance],
                                                     return_alternates=False)

    assert selections[0].compute_node_uuid in served.hosts
    assert served.placement.delete_allocations(instance) is True


def test_an_oversized_context_is_dropped_not_trusted(served: Served) -> None:
    instance = str(uuid.uuid4())
    context = dict(CONTEXT, auth_token='t' * 1_000_000, roles='admin', is_admin='yes',
                   request_id={'not': 'a string'})

    [selections] = served.client.select_destinations(context, _spec(), [instance],
                                                     return_alternates=False)

    assert selections[0].compute_node_uuid in served.hosts
    assert served.placement.delete_allocations(instance) is True


GARBAGE = {
    'not JSON': b'not json at all {{{',
    'JSON nested beyond any decoder': b'[' * 100_000 + b']' * 100_000,
    'an envelope whose message is not JSON': b'{"oslo.version": "2.0", "oslo.message": "{{"}',
    'a message whose method is not a name': json.dumps(
        {'oslo.version': '2.0', 'oslo.message': json.dumps(
            {'method': 5, 'args': {}, 'version': '4.5'})}).encode(),
    'a message without a method': b'{"args": {}, "version": "4.5"}',
}


@pytest.mark.parametrize('served', ['rabbit'], indirect=True)
def test_raw_garbage_on_the_queue_is_skipped_and_the_service_keeps_serving(served: Served,
                                                                           caplog):
    # What a broken or hostile publisher can put on the queue without our client.
    caplog.set_level(logging.ERROR, logger='oslo.messaging')
    with kombu.Connection(RABBIT_URL.replace('rabbit://', 'amqp://')) as connection:
        producer = connection.Producer()
        for body in GARBAGE.values():
            producer.publish(body, exchange='nova', routing_key=served.topic,
                             content_type='application/json', content_encoding='utf-8')

    # The queue is consumed in order: these are answered only after the garbage.
    assert served.client.call(CONTEXT, 'ping', version='1.1', namespace='baseapi',
                              arg='after') == {'service': 'scheduler', 'arg': 'after'}
    instance = str(uuid.uuid4())
    [selections] = served.client.select_destinations(CONTEXT, _spec(), [instance],
                                                     return_alternates=False)
    assert selections[0].compute_node_uuid in served.hosts
    assert served.placement.delete_allocations(instance) is True
    # The garbage did reach the service: the transport rejected what it could not decode.
    skipped = [r for r in caplog.records if 'skipping it' in r.getMessage()]
    assert len(skipped) >= 3, [r.getMessage() for r in caplog.records]
