"""The RPC endpoints, called the way oslo.messaging's dispatcher calls them.

Arguments are Nova's real wire samples (tests/fixtures/wire/). A call's
error reaches the dispatcher as ExpectedException wrapping NoValidHost or
InvalidInput (logged without a traceback, rebuilt by the conductor); a cast
never raises.
"""
from __future__ import annotations

import logging

import oslo_messaging as messaging
import pytest

from scheduler import exceptions as exc
from scheduler.catalog import HostCatalog
from scheduler.context import RequestContext
from scheduler.objects.codec import DecodeLimits
from scheduler.objects.selection import Selection
from scheduler.rpc.endpoint import BaseAPIEndpoint, SchedulerEndpoint
from tests.builders import CELL
from tests.fixtures import wire_samples

NODE = '1f0e2d3c-4b5a-4697-8877-665544332211'
CONTEXT = RequestContext(request_id='req-endpoint', auth_token='secret-token')


def selection(host: str) -> Selection:
    return Selection(compute_node_uuid=NODE, service_host=host, nodename=host, cell_uuid=CELL,
                     allocation_request='null', allocation_request_version=None,
                     availability_zone='nova')


class RecordingManager:
    def __init__(self, error: Exception | None = None):
        self.calls: list[dict] = []
        self.error = error

    def select_destinations(self, ctxt, spec, instance_uuids, *, return_objects,
                            return_alternates, finish):
        self.calls.append({'ctxt': ctxt, 'spec': spec, 'instance_uuids': instance_uuids,
                           'return_objects': return_objects,
                           'return_alternates': return_alternates})
        if self.error is not None:
            raise self.error
        count = len(instance_uuids) if instance_uuids else spec.num_instances
        # Like the real manager, the endpoint's encoder runs on the Selections.
        return finish([[selection(f'cn{i}'), selection(f'alt{i}')] for i in range(count)])


@pytest.fixture
def manager() -> RecordingManager:
    return RecordingManager()


@pytest.fixture
def catalog() -> HostCatalog:
    return HostCatalog(default_cell_uuid=CELL)


@pytest.fixture
def endpoint(manager, catalog) -> SchedulerEndpoint:
    return SchedulerEndpoint(manager, catalog, DecodeLimits())


def call_args() -> dict:
    return dict(wire_samples.call_message()['args'])


def rpc_error(call) -> Exception:
    """The error a call answers with, unwrapped from oslo.messaging's ExpectedException."""
    with pytest.raises(messaging.ExpectedException) as raised:
        call()
    return raised.value.exc_info[1]


# ---------------------------------------------------------------------- select_destinations


def test_a_4_5_call_reaches_the_manager_decoded_and_answers_selection_objects(
        endpoint, manager):
    args = call_args()

    result = endpoint.select_destinations(CONTEXT, **args)

    [call] = manager.calls
    assert call['ctxt'] is CONTEXT
    assert call['spec'].flavor.name == 'g1.medium'
    assert call['instance_uuids'] == args['instance_uuids']
    assert (call['return_objects'], call['return_alternates']) == (True, True)
    assert [[s['nova_object.name'] for s in per] for per in result] == [['Selection'] * 2] * 2
    assert result[0][0]['nova_object.data']['service_host'] == 'cn0'


def test_without_return_objects_the_answer_is_nova_legacy_host_dicts(endpoint):
    args = call_args()
    del args['return_objects'], args['return_alternates']

    result = endpoint.select_destinations(CONTEXT, **args)

    assert result == [{'host': 'cn0', 'nodename': 'cn0', 'limits': {}},
                      {'host': 'cn1', 'nodename': 'cn1', 'limits': {}}]


def test_the_legacy_request_spec_of_a_4_0_call_is_decoded(endpoint, manager):
    legacy = wire_samples.legacy_args()

    result = endpoint.select_destinations(CONTEXT, request_spec=legacy['request_spec'],
                                          filter_properties=legacy['filter_properties'])

    [call] = manager.calls
    assert call['spec'].flavor.name == 'g1.medium'
    assert call['instance_uuids'] is None
    assert call['return_objects'] is False
    assert len(result) == call['spec'].num_instances == 2


def test_unknown_arguments_are_invalid_input_naming_them(endpoint, manager):
    error = rpc_error(lambda: endpoint.select_destinations(
        CONTEXT, **call_args(), zebra=1, aardvark=2))

    assert isinstance(error, exc.InvalidInput)
    assert error.reason == 'select_destinations: unexpected argument(s): aardvark, zebra'
    assert manager.calls == []


def test_the_names_of_unknown_arguments_are_bounded(endpoint):
    extra = {f'{"k" * 200}{i:02d}': i for i in range(30)}

    error = rpc_error(lambda: endpoint.select_destinations(CONTEXT, **call_args(), **extra))

    assert error.reason.count('k' * 64) == 10
    assert len(error.reason) < 64 * 10 + 100


@pytest.mark.parametrize('name', ['return_objects', 'return_alternates'])
@pytest.mark.parametrize('value', ['yes', 1, None, [True]])
def test_a_flag_that_is_not_a_boolean_is_invalid_input(endpoint, manager, name, value):
    args = call_args()
    args[name] = value

    error = rpc_error(lambda: endpoint.select_destinations(CONTEXT, **args))

    assert isinstance(error, exc.InvalidInput)
    assert error.reason == f'select_destinations: {name} must be a boolean'
    assert manager.calls == []


def test_a_call_without_any_spec_is_invalid_input(endpoint, manager):
    error = rpc_error(lambda: endpoint.select_destinations(CONTEXT, instance_uuids=[NODE]))

    assert isinstance(error, exc.InvalidInput)
    assert 'spec_obj is required' in error.reason
    assert manager.calls == []


def test_malformed_instance_uuids_are_invalid_input(endpoint, manager):
    args = call_args()
    args['instance_uuids'] = ['not-a-uuid']

    error = rpc_error(lambda: endpoint.select_destinations(CONTEXT, **args))

    assert isinstance(error, exc.InvalidInput)
    assert 'instance_uuids[0]' in error.reason
    assert manager.calls == []


def test_no_valid_host_from_the_manager_is_an_expected_answer(catalog):
    failure = exc.NoValidHost(reason='There are not enough hosts available.')
    endpoint = SchedulerEndpoint(RecordingManager(error=failure), catalog, DecodeLimits())

    assert rpc_error(lambda: endpoint.select_destinations(CONTEXT, **call_args())) is failure


# ---------------------------------------------------------------------- casts


def test_well_formed_casts_update_the_catalog(endpoint, catalog):
    endpoint.update_aggregates(CONTEXT, **wire_samples.cast_args('update_aggregates'))
    endpoint.update_instance_info(CONTEXT, **wire_samples.cast_args('update_instance_info'))
    endpoint.sync_instance_info(CONTEXT, **wire_samples.cast_args('sync_instance_info'))

    assert [a.name for a in catalog.aggregates_with_metadata('availability_zone', 'az1')] == [
        'az1-hosts']
    synced = wire_samples.cast_args('sync_instance_info')['instance_uuids']
    assert list(catalog.instances_on_host('compute-01')) == synced

    endpoint.delete_instance_info(CONTEXT, host_name='compute-01', instance_uuid=synced[0])

    assert list(catalog.instances_on_host('compute-01')) == synced[1:]


def test_a_delete_aggregate_cast_removes_the_aggregate(endpoint, catalog):
    args = wire_samples.cast_args('delete_aggregate')
    aggregate = dict(args['aggregate'])
    aggregate['nova_object.data'] = dict(aggregate['nova_object.data'],
                                         metadata={'availability_zone': 'gone'})
    endpoint.update_aggregates(CONTEXT, aggregates=[aggregate])
    assert catalog.aggregates_with_metadata('availability_zone', 'gone')

    endpoint.delete_aggregate(CONTEXT, aggregate=aggregate)

    assert catalog.aggregates_with_metadata('availability_zone', 'gone') == []


MALFORMED_CASTS = [
    ('update_aggregates', {'aggregates': 'junk'}),
    ('update_aggregates', {'aggregates': [{'nova_object.name': 'Aggregate'}]}),
    ('delete_aggregate', {'aggregate': None}),
    ('update_instance_info', {'host_name': 7, 'instance_info': {}}),
    ('update_instance_info', {'host_name': 'cn1', 'instance_info': {'objects': 'x'}}),
    ('delete_instance_info', {'host_name': 'cn1', 'instance_uuid': 'not-a-uuid'}),
    ('delete_instance_info', {'host_name': 'h' * 300, 'instance_uuid': NODE}),
    ('sync_instance_info', {'host_name': '', 'instance_uuids': [NODE]}),
    ('sync_instance_info', {'host_name': 'cn1', 'instance_uuids': 'x'}),
    ('sync_instance_info', {'host_name': 'cn1', 'instance_uuids': [NODE], 'extra': 1}),
]


@pytest.mark.parametrize('method, kwargs', MALFORMED_CASTS,
                         ids=[f'{m}-{i}' for i, (m, _) in enumerate(MALFORMED_CASTS)])
def test_a_malformed_cast_is_logged_and_ignored(endpoint, catalog, caplog, method, kwargs):
    before = catalog.snapshot_stats()

    with caplog.at_level(logging.WARNING, logger='scheduler.rpc.endpoint'):
        assert getattr(endpoint, method)(CONTEXT, **kwargs) is None

    assert catalog.snapshot_stats() == before
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.getMessage().startswith(f'ignored malformed {method} cast: ')


class BrokenCatalog:
    def sync_instance_info(self, host, uuids):
        raise RuntimeError('catalog bug')


def test_a_cast_the_catalog_fails_to_apply_is_logged_never_raised(manager, caplog):
    endpoint = SchedulerEndpoint(manager, BrokenCatalog(), DecodeLimits())

    with caplog.at_level(logging.ERROR, logger='scheduler.rpc.endpoint'):
        endpoint.sync_instance_info(CONTEXT, host_name='cn1', instance_uuids=[NODE])

    [record] = caplog.records
    assert record.getMessage() == 'could not apply sync_instance_info cast'
    assert record.exc_info is not None


# ---------------------------------------------------------------------- baseapi


def test_ping_answers_who_we_are_in_the_baseapi_namespace():
    endpoint = BaseAPIEndpoint()

    assert endpoint.ping(CONTEXT, arg='hi') == {'service': 'scheduler', 'arg': 'hi'}
    assert (endpoint.target.namespace, endpoint.target.version) == ('baseapi', '1.1')
    assert endpoint.get_backdoor_port(CONTEXT) is None


def test_the_scheduler_endpoint_serves_novas_api_version():
    assert SchedulerEndpoint.target.version == '4.5'
    assert SchedulerEndpoint.target.namespace is None
