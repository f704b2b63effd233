"""PlacementClient: error mapping, retry policy, headers, claim bodies, auth refusal.

Error paths a real Placement cannot produce on demand (5xx, lost answers,
TLS failures) use a scripted adapter; timeouts, headers and logging use real
sockets on 127.0.0.1.
"""
from __future__ import annotations

import gc
import json
import logging
import socket
import threading
import weakref
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg

from placement_client import client as client_mod
from placement_client.client import (
    ALLOCATION_CANDIDATES_MICROVERSION,
    MIN_MICROVERSION,
    PlacementClient,
    allocations_body,
    error_from_response,
)
from placement_client.exceptions import (
    BadRequest,
    CapacityExceeded,
    ClaimConflict,
    ConsumerGenerationConflict,
    NotFound,
    PlacementAuthError,
    PlacementConfigError,
    PlacementError,
    PlacementUnavailable,
    PlacementVersionTooOld,
    ProviderGenerationConflict,
)
from placement_client.models import AllocationRequest
from placement_client.query import AllocationCandidatesQuery
from scheduler.conf import placement as placement_opts
from scheduler.exceptions import ConfigurationError
from tests.fixtures.placement import make_placement_conf

RP = 'ba7af103-8f6c-516b-9348-502cf15b4160'
CONSUMER = '7d3e5f0a-1b2c-4d5e-8f90-a1b2c3d4e5f6'
GLOBAL_ID = 'req-1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b'


def _error_body(status: int, title: str, code: str, detail: str) -> dict[str, Any]:
    return {'errors': [{'status': status, 'title': title, 'code': code, 'detail': detail,
                        'request_id': 'req-f91c920c-389d-4dd5-ba01-cd5192989de9'}]}


# Real Placement 16 error bodies (tests/fixtures/wire/placement_error_bodies.json), verbatim.
_CONFLICT = 'There was a conflict when trying to complete your request.\n\n '
_BAD = ('The server could not comply with the request since it is either malformed or '
        'otherwise incorrect.\n\n ')
CAPACITY_EXCEEDED = _error_body(
    409, 'Conflict', 'placement.undefined_code',
    _CONFLICT + "Unable to allocate inventory: Unable to create allocation for 'VCPU' on "
    "resource provider 'ba7af103-8f6c-516b-9348-502cf15b4160'. The requested amount would "
    'violate inventory constraints.  ')
CONSUMER_CONFLICT_NULL = _error_body(
    409, 'Conflict', 'placement.concurrent_update',
    _CONFLICT + 'consumer generation conflict - expected 1 but got None  ')
CONSUMER_CONFLICT_NEW = _error_body(
    409, 'Conflict', 'placement.concurrent_update',
    _CONFLICT + 'consumer generation conflict - expected null but got 0  ')
PROVIDER_CONFLICT = _error_body(
    409, 'Conflict', 'placement.concurrent_update',
    _CONFLICT + 'resource provider generation conflict  ')
MISSING_GROUP_POLICY = _error_body(
    400, 'Bad Request', 'placement.undefined_code',
    _BAD + 'The "group_policy" parameter is required when specifying more than one '
    '"resources{N}" parameter.  ')
UNKNOWN_TRAIT = _error_body(
    400, 'Bad Request', 'placement.undefined_code',
    _BAD + 'No such trait(s): CUSTOM_DOES_NOT_EXIST.  ')
DUPLICATE_NAME = _error_body(
    409, 'Conflict', 'placement.duplicate_name',
    _CONFLICT + 'Conflicting resource provider name: cn1 already exists.  ')


def make_response(status: int, body: Any = None, *, text: str | None = None) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response.encoding = 'utf-8'
    if body is not None:
        response._content = json.dumps(body).encode()
        response.headers['Content-Type'] = 'application/json'
    else:
        response._content = (text or '').encode()
    return response


class ScriptedAdapter:
    """Answers each request with the next scripted response or exception."""

    def __init__(self, *outcomes: requests.Response | Exception):
        self.outcomes = list(outcomes)
        self.calls: list[dict[str, Any]] = []

    def request(self, url: str, method: str, **kwargs: Any) -> requests.Response:
        self.calls.append({'url': url, 'method': method, **kwargs})
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            try:
                raise outcome
            finally:
                del outcome     # as keystoneauth does: the frame keeps no error it raised
        return outcome


@pytest.fixture
def conf():
    conf = make_placement_conf('http://127.0.0.1:9')
    conf.set_override('max_retries', 3, group='placement')
    conf.set_override('retry_backoff', 0.5, group='placement')
    conf.set_override('retry_backoff_max', 1.5, group='placement')
    return conf


def scripted_client(conf, *outcomes, rng=lambda: 1.0) -> tuple[PlacementClient, ScriptedAdapter,
                                                                list[float]]:
    adapter = ScriptedAdapter(*outcomes)
    sleeps: list[float] = []
    return PlacementClient(conf, adapter=adapter, sleep=sleeps.append, rng=rng), adapter, sleeps


# ----------------------------------------------------------------- error counting


@pytest.mark.parametrize('status,kind', [(400, 'bad_request'), (404, 'not_found'),
                                         (409, 'conflict'), (406, 'version'),
                                         (418, 'client_error')])
def test_an_error_status_is_told_to_on_error_by_kind(conf, status, kind):
    told: list[str] = []
    client = PlacementClient(conf, adapter=ScriptedAdapter(make_response(status, {})),
                             on_error=told.append)

    client.request('GET', '/resource_providers', microversion=None)

    assert told == [kind]


def test_successful_answers_are_not_errors(conf):
    told: list[str] = []
    client = PlacementClient(conf, adapter=ScriptedAdapter(make_response(200, {}),
                                                           make_response(204)),
                             on_error=told.append)

    client.request('GET', '/resource_providers', microversion=None)
    client.request('DELETE', f'/allocations/{CONSUMER}', microversion=None)

    assert told == []


@pytest.mark.parametrize('outcomes,error,kind', [
    ([make_response(503, text='down')] * 4, PlacementUnavailable, 'unavailable'),
    ([make_response(401, text='no')], PlacementAuthError, 'auth'),
])
def test_a_failed_call_is_told_to_on_error_by_kind_and_raised(conf, outcomes, error, kind):
    told: list[str] = []
    client = PlacementClient(conf, adapter=ScriptedAdapter(*outcomes), sleep=lambda s: None,
                             on_error=told.append)

    with pytest.raises(error):
        client.request('GET', '/resource_providers', microversion=None)

    assert told == [kind]


# ----------------------------------------------------------------- error mapping


def test_over_capacity_409_is_capacity_exceeded_with_placements_detail():
    error = error_from_response(make_response(409, CAPACITY_EXCEEDED))
    assert isinstance(error, CapacityExceeded)
    assert error.status == 409 and error.code == 'placement.undefined_code'
    assert error.detail.startswith('Unable to allocate inventory')
    assert 'would violate inventory constraints' in str(error)
    assert error.request_id == 'req-f91c920c-389d-4dd5-ba01-cd5192989de9'


def test_older_exceed_the_capacity_wording_is_capacity_exceeded_too():
    body = _error_body(409, 'Conflict', 'placement.undefined_code',
                       _CONFLICT + 'Unable to allocate inventory: ... would exceed the capacity')
    assert isinstance(error_from_response(make_response(409, body)), CapacityExceeded)


def test_consumer_generation_conflict_reports_expected_and_sent_generations():
    error = error_from_response(make_response(409, CONSUMER_CONFLICT_NULL))
    assert isinstance(error, ConsumerGenerationConflict)
    assert (error.expected, error.sent) == (1, None)


def test_consumer_generation_conflict_on_a_new_consumer_expects_none():
    error = error_from_response(make_response(409, CONSUMER_CONFLICT_NEW))
    assert isinstance(error, ConsumerGenerationConflict)
    assert (error.expected, error.sent) == (None, 0)


def test_other_concurrent_update_is_a_provider_generation_conflict():
    error = error_from_response(make_response(409, PROVIDER_CONFLICT))
    assert isinstance(error, ProviderGenerationConflict)
    assert not isinstance(error, ConsumerGenerationConflict)


def test_a_409_that_is_no_claim_conflict_is_a_plain_placement_error():
    error = error_from_response(make_response(409, DUPLICATE_NAME))
    assert type(error) is PlacementError
    assert not isinstance(error, ClaimConflict)
    assert error.code == 'placement.duplicate_name'


@pytest.mark.parametrize('body, detail', [
    (MISSING_GROUP_POLICY, 'The "group_policy" parameter is required when specifying more '
                           'than one "resources{N}" parameter.'),
    (UNKNOWN_TRAIT, 'No such trait(s): CUSTOM_DOES_NOT_EXIST.'),
])
def test_400_is_bad_request_carrying_the_specific_part_of_placements_detail(body, detail):
    error = error_from_response(make_response(400, body), method='GET',
                                url='/allocation_candidates')
    assert isinstance(error, BadRequest)
    assert error.detail == detail
    assert 'GET /allocation_candidates' in str(error)


@pytest.mark.parametrize('status, cls', [(401, PlacementAuthError), (403, PlacementAuthError),
                                         (404, NotFound), (406, PlacementVersionTooOld),
                                         (418, PlacementError)])
def test_status_codes_map_to_typed_errors(status, cls):
    error = error_from_response(make_response(status, text='nope'))
    assert type(error) is cls
    assert error.status == status and error.detail == 'nope'


# ------------------------------------------------------------------- retry policy


def test_connection_errors_are_retried_until_an_answer_arrives(conf):
    client, adapter, sleeps = scripted_client(
        conf, ks_exc.ConnectFailure('refused'), ks_exc.ConnectTimeout('slow'),
        make_response(200, {'resource_providers': []}))
    assert client.get_resource_providers() == []
    assert len(adapter.calls) == 3
    assert len(sleeps) == 2


def test_persistent_failure_raises_unavailable_after_max_retries_plus_one_attempts(conf):
    client, adapter, sleeps = scripted_client(
        conf, *[ks_exc.ConnectFailure('refused')] * 4)
    with pytest.raises(PlacementUnavailable) as info:
        client.get_resource_providers()
    assert info.value.attempts == 4
    assert len(adapter.calls) == 4
    # No pointless wait after the last attempt.
    assert len(sleeps) == 3


def test_backoff_grows_exponentially_and_is_capped(conf):
    client, _, sleeps = scripted_client(conf, *[ks_exc.ConnectFailure('x')] * 4,
                                        rng=lambda: 1.0)
    with pytest.raises(PlacementUnavailable):
        client.delete_allocations(CONSUMER)
    # base 0.5, cap 1.5: 0.5, 1.0, then capped.
    assert sleeps == [0.5, 1.0, 1.5]


def test_backoff_is_full_jitter_over_the_ceiling(conf):
    client, _, sleeps = scripted_client(conf, *[ks_exc.ConnectFailure('x')] * 4,
                                        rng=lambda: 0.25)
    with pytest.raises(PlacementUnavailable):
        client.delete_allocations(CONSUMER)
    assert sleeps == [0.125, 0.25, 0.375]


def test_zero_max_retries_means_exactly_one_attempt(conf):
    conf.set_override('max_retries', 0, group='placement')
    client, adapter, sleeps = scripted_client(conf, ks_exc.ConnectFailure('refused'))
    with pytest.raises(PlacementUnavailable) as info:
        client.get_resource_providers()
    assert info.value.attempts == 1 and len(adapter.calls) == 1 and sleeps == []


def test_5xx_is_retried_and_its_status_reported_when_retries_run_out(conf):
    client, adapter, _ = scripted_client(conf, *[make_response(503, text='down')] * 4)
    with pytest.raises(PlacementUnavailable) as info:
        client.get_allocations(CONSUMER)
    assert info.value.status == 503 and info.value.attempts == 4
    assert 'down' in str(info.value)


def test_a_5xx_followed_by_success_is_success(conf):
    client, adapter, _ = scripted_client(conf, make_response(500, text='boom'),
                                         make_response(204))
    assert client.delete_allocations(CONSUMER) is True
    assert len(adapter.calls) == 2


def test_4xx_is_not_retried(conf):
    client, adapter, sleeps = scripted_client(conf, make_response(400, UNKNOWN_TRAIT))
    with pytest.raises(BadRequest):
        client.get_allocation_candidates(AllocationCandidatesQuery())
    assert len(adapter.calls) == 1 and sleeps == []


@pytest.mark.parametrize('status', [401, 403])
def test_auth_failures_raise_auth_error_without_retry(conf, status):
    client, adapter, _ = scripted_client(conf, make_response(status, text='denied'))
    with pytest.raises(PlacementAuthError):
        client.request('GET', '/resource_providers', microversion=MIN_MICROVERSION)
    assert len(adapter.calls) == 1


def test_keystone_refusing_our_credentials_is_an_auth_error(conf):
    client, adapter, _ = scripted_client(conf, ks_exc.Unauthorized('bad password'))
    with pytest.raises(PlacementAuthError):
        client.get_resource_providers()
    assert len(adapter.calls) == 1


def test_tls_errors_are_not_retried(conf):
    client, adapter, _ = scripted_client(conf, ks_exc.SSLError('certificate verify failed'))
    with pytest.raises(PlacementUnavailable) as info:
        client.get_resource_providers()
    assert info.value.attempts == 1 and len(adapter.calls) == 1


def test_a_missing_endpoint_is_unavailable_without_retry(conf):
    client, adapter, _ = scripted_client(conf, ks_exc.EndpointNotFound())
    with pytest.raises(PlacementUnavailable):
        client.get_resource_providers()
    assert len(adapter.calls) == 1


def test_each_attempt_uses_a_connect_read_timeout_and_no_keystoneauth_retries(conf):
    conf.set_override('connect_timeout', 1.5, group='placement')
    conf.set_override('read_timeout', 7.0, group='placement')
    client, adapter, _ = scripted_client(conf, make_response(200, {'resource_providers': []}))
    client.get_resource_providers()
    call = adapter.calls[0]
    assert call['timeout'] == (1.5, 7.0)
    assert call['raise_exc'] is False
    assert call['connect_retries'] == 0 and call['status_code_retries'] == 0


# ------------------------------------------------------------------------ headers


def test_the_global_request_id_and_microversion_go_in_the_headers_of_every_attempt(conf):
    client, adapter, _ = scripted_client(conf, ks_exc.ConnectFailure('x'),
                                         make_response(200, {'resource_providers': []}))
    client.get_resource_providers(request_id=GLOBAL_ID)
    for call in adapter.calls:
        assert call['headers']['X-OpenStack-Request-ID'] == GLOBAL_ID
        assert call['headers']['OpenStack-API-Version'] == f'placement {MIN_MICROVERSION}'


def test_without_a_request_id_one_is_generated_and_kept_across_retries(conf):
    client, adapter, _ = scripted_client(conf, ks_exc.ConnectFailure('x'), make_response(204))
    client.delete_allocations(CONSUMER)
    ids = {call['headers']['X-OpenStack-Request-ID'] for call in adapter.calls}
    assert len(ids) == 1
    assert ids.pop().startswith('req-')


def test_a_malformed_request_id_is_replaced_rather_than_sent(conf):
    client, adapter, _ = scripted_client(conf, make_response(204))
    client.delete_allocations(CONSUMER, request_id='evil\r\nX-Injected: 1')
    sent = adapter.calls[0]['headers']['X-OpenStack-Request-ID']
    assert sent.startswith('req-') and '\n' not in sent


def test_delete_sends_a_microversion(conf):
    client, adapter, _ = scripted_client(conf, make_response(204))
    client.delete_allocations(CONSUMER)
    assert adapter.calls[0]['headers']['OpenStack-API-Version'].startswith('placement 1.')


# ---------------------------------------------------------------------- claims

CLAIM = AllocationRequest(allocations={RP: {'VCPU': 1, 'MEMORY_MB': 512}},
                          mappings={'': (RP,)})


def _body(microversion: str) -> dict[str, Any]:
    return allocations_body(CLAIM, project_id='p', user_id='u', consumer_generation=None,
                            microversion=microversion, consumer_type='INSTANCE')


def test_claim_body_at_1_36_has_mappings_but_no_consumer_type():
    body = _body('1.36')
    assert body == {'allocations': {RP: {'resources': {'VCPU': 1, 'MEMORY_MB': 512}}},
                    'mappings': {'': [RP]}, 'project_id': 'p', 'user_id': 'u',
                    'consumer_generation': None}


def test_claim_body_sends_consumer_type_from_1_38_on():
    assert 'consumer_type' not in _body('1.37')
    assert _body('1.38')['consumer_type'] == 'INSTANCE'
    assert _body('1.39')['consumer_type'] == 'INSTANCE'


def test_claim_body_sends_mappings_only_from_1_34_on():
    assert 'mappings' not in _body('1.33')
    assert 'mappings' in _body('1.34')


def test_claim_body_always_carries_the_consumer_generation_key():
    assert _body('1.28')['consumer_generation'] is None


def test_put_allocations_sends_the_body_for_its_microversion(conf):
    client, adapter, _ = scripted_client(conf, make_response(204))
    client.put_allocations(CONSUMER, CLAIM, project_id='p', user_id='u',
                           consumer_generation=3, microversion='1.39',
                           consumer_type='MIGRATION', request_id=GLOBAL_ID)
    call = adapter.calls[0]
    assert (call['method'], call['url']) == ('PUT', f'/allocations/{CONSUMER}')
    assert call['headers']['OpenStack-API-Version'] == 'placement 1.39'
    assert call['json']['consumer_type'] == 'MIGRATION'
    assert call['json']['consumer_generation'] == 3


def test_put_allocations_defaults_to_the_candidates_microversion(conf):
    client, adapter, _ = scripted_client(conf, make_response(204))
    client.put_allocations(CONSUMER, CLAIM, project_id='p', user_id='u', consumer_generation=None)
    assert adapter.calls[0]['headers']['OpenStack-API-Version'] == \
        f'placement {ALLOCATION_CANDIDATES_MICROVERSION}'
    assert 'consumer_type' not in adapter.calls[0]['json']


def _held(allocations: dict[str, dict[str, int]]) -> requests.Response:
    return make_response(200, {
        'allocations': {rp: {'resources': res, 'generation': 5} for rp, res in allocations.items()},
        'consumer_generation': 1, 'project_id': 'p', 'user_id': 'u'})


def test_a_claim_whose_first_answer_was_lost_is_recognised_as_landed(conf):
    client, adapter, _ = scripted_client(
        conf, ks_exc.ConnectTimeout('read timed out'), make_response(409, CONSUMER_CONFLICT_NULL),
        _held({RP: {'VCPU': 1, 'MEMORY_MB': 512}}))
    client.put_allocations(CONSUMER, CLAIM, project_id='p', user_id='u', consumer_generation=None)
    assert [c['method'] for c in adapter.calls] == ['PUT', 'PUT', 'GET']


def test_a_lost_answer_then_a_conflict_for_someone_elses_claim_is_still_a_conflict(conf):
    client, _, _ = scripted_client(
        conf, ks_exc.ConnectFailure('reset'), make_response(409, CONSUMER_CONFLICT_NULL),
        _held({RP: {'VCPU': 2}}))
    with pytest.raises(ConsumerGenerationConflict) as info:
        client.put_allocations(CONSUMER, CLAIM, project_id='p', user_id='u',
                               consumer_generation=None)
    assert info.value.expected == 1


def test_a_conflict_without_an_earlier_transport_error_is_raised_without_a_lookup(conf):
    client, adapter, _ = scripted_client(conf, make_response(409, CONSUMER_CONFLICT_NULL))
    with pytest.raises(ConsumerGenerationConflict):
        client.put_allocations(CONSUMER, CLAIM, project_id='p', user_id='u',
                               consumer_generation=None)
    assert len(adapter.calls) == 1


def test_a_5xx_before_a_conflict_is_no_sign_that_the_claim_landed(conf):
    client, adapter, _ = scripted_client(conf, make_response(500, text='db'),
                                         make_response(409, CONSUMER_CONFLICT_NULL))
    with pytest.raises(ConsumerGenerationConflict):
        client.put_allocations(CONSUMER, CLAIM, project_id='p', user_id='u',
                               consumer_generation=None)
    assert [c['method'] for c in adapter.calls] == ['PUT', 'PUT']


@pytest.mark.parametrize('body, cls', [(CAPACITY_EXCEEDED, CapacityExceeded),
                                       (PROVIDER_CONFLICT, ProviderGenerationConflict)])
def test_put_allocations_raises_the_mapped_conflict(conf, body, cls):
    client, _, _ = scripted_client(conf, make_response(409, body))
    with pytest.raises(cls):
        client.put_allocations(CONSUMER, CLAIM, project_id='p', user_id='u',
                               consumer_generation=None)


class _RequestState:
    """Stands for what a scheduling request holds while it claims (its view of the
    hosts: megabytes at 50,000 providers)."""


def _claim_and_forget_the_error(client: PlacementClient) -> weakref.ref[_RequestState]:
    state = _RequestState()
    try:
        client.put_allocations(CONSUMER, CLAIM, project_id='p', user_id='u',
                               consumer_generation=None)
    except PlacementError:
        pass
    return weakref.ref(state)


def _freed_by_reference_counting(client: PlacementClient) -> bool:
    """Whether the caller's objects are gone when it returns, the collector off."""
    gc.disable()
    try:
        return _claim_and_forget_the_error(client)() is None
    finally:
        gc.enable()


@pytest.mark.parametrize('outcomes', [
    lambda: [make_response(409, CAPACITY_EXCEEDED)],
    lambda: [ks_exc.ConnectFailure('reset'), make_response(409, CONSUMER_CONFLICT_NULL),
             _held({RP: {'VCPU': 2}})],
    lambda: [make_response(503, text='down') for _ in range(4)],
    lambda: [make_response(503, text='down'), make_response(204)],
    # A new exception each time, as keystoneauth raises them: one kept here would
    # keep the traceback of its last raise.
    lambda: [ks_exc.ConnectFailure('refused') for _ in range(4)],
], ids=['refused for capacity', 'someone else\'s claim after a lost answer',
        'unavailable, 5xx', 'landed after a 5xx', 'unavailable, no connection'])
def test_a_claim_that_met_an_error_leaves_its_callers_objects_to_reference_counting(
        conf, outcomes):
    # A request's objects must go when it ends, without the collector, which is
    # paused while requests overlap (scheduler/memory/gc_pause.py): an exception
    # kept in a local of the frame that raised it is a cycle through its
    # traceback, and the frames it holds hold the caller's.
    client, _, _ = scripted_client(conf, *outcomes())
    assert _freed_by_reference_counting(client)


def test_a_claim_to_a_placement_that_refuses_connections_leaves_its_caller_to_reference_counting():
    # Through the real keystoneauth, requests and urllib3: urllib3 keeps the error of
    # a failed connection in a local of a frame its traceback holds, a cycle, and
    # those frames hold ours (their callers).
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    conf = make_placement_conf(f'http://127.0.0.1:{port}')
    conf.set_override('max_retries', 1, group='placement')
    client = PlacementClient(conf, sleep=lambda _: None)
    _claim_and_forget_the_error(client)             # what a first call sets up
    assert _freed_by_reference_counting(client)


def test_delete_allocations_tells_deleted_from_nothing_there(conf):
    client, _, _ = scripted_client(conf, make_response(204), make_response(404, text='none'))
    assert client.delete_allocations(CONSUMER) is True
    assert client.delete_allocations(CONSUMER) is False


# ----------------------------------------------------------------- negotiation


def _root(max_version: str) -> requests.Response:
    return make_response(200, {'versions': [{'id': 'v1.0', 'max_version': max_version,
                                             'min_version': '1.0', 'status': 'CURRENT'}]})


def test_negotiate_returns_and_remembers_placements_max_microversion(conf):
    client, adapter, _ = scripted_client(conf, _root('1.39'))
    assert client.negotiate() == '1.39'
    assert client.max_microversion == '1.39'
    assert adapter.calls[0]['url'] == '/'


def test_negotiate_refuses_a_placement_older_than_1_36_naming_both_versions(conf):
    client, _, _ = scripted_client(conf, _root('1.35'))
    with pytest.raises(PlacementVersionTooOld, match=r'>= 1\.36, found 1\.35'):
        client.negotiate()
    assert client.max_microversion is None


def test_negotiate_compares_versions_numerically_not_as_text(conf):
    client, _, _ = scripted_client(conf, _root('1.100'))
    assert client.negotiate() == '1.100'


def test_negotiate_against_something_that_is_not_placement_is_an_error(conf):
    client, _, _ = scripted_client(conf, make_response(200, text='<html>hello</html>'))
    with pytest.raises(PlacementError):
        client.negotiate()


# --------------------------------------------------------------- configuration


def _conf_with(**overrides: Any):
    conf = make_placement_conf('http://127.0.0.1:9')
    for name, value in overrides.items():
        conf.set_override(name, value, group='placement')
    return conf


def test_no_auth_plugin_is_refused_at_construction():
    conf = _conf_with(auth_type=None)
    with pytest.raises(PlacementConfigError, match='auth_type is not set'):
        PlacementClient.from_conf(conf)


def test_admin_token_without_a_token_is_refused():
    with pytest.raises(PlacementConfigError, match='token'):
        PlacementClient.from_conf(_conf_with(token=None))


def test_an_unknown_auth_plugin_is_a_configuration_error():
    with pytest.raises(PlacementConfigError):
        PlacementClient.from_conf(_conf_with(auth_type='no-such-plugin'))


def test_an_explicit_none_plugin_with_an_endpoint_is_accepted():
    conf = cfg.ConfigOpts()
    placement_opts.register_opts(conf)
    conf(args=[], default_config_files=[], default_config_dirs=[], use_env=False)
    conf.set_override('auth_type', 'none', group='placement')
    conf.set_override('endpoint_override', 'http://127.0.0.1:9', group='placement')
    assert isinstance(PlacementClient.from_conf(conf), PlacementClient)


def test_an_empty_placement_section_is_refused():
    conf = cfg.ConfigOpts()
    placement_opts.register_opts(conf)
    conf(args=[], default_config_files=[], default_config_dirs=[], use_env=False)
    with pytest.raises(PlacementConfigError, match='auth_type is not set'):
        PlacementClient.from_conf(conf)
    # What the service builds: a configuration error, so that it refuses to start.
    with pytest.raises(ConfigurationError, match=r'\[placement\] auth_type is not set'):
        placement_opts.load_client(conf)


def test_admin_token_with_a_token_is_accepted():
    assert isinstance(PlacementClient.from_conf(_conf_with()), PlacementClient)


# --------------------------------------------------------- real sockets, loopback


@pytest.fixture
def silent_server() -> Iterator[tuple[str, list[socket.socket]]]:
    """Accepts connections and never answers; yields (url, accepted sockets)."""
    listener = socket.create_server(('127.0.0.1', 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            accepted.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f'http://127.0.0.1:{listener.getsockname()[1]}', accepted
    stop.set()
    thread.join(timeout=5)
    for conn in accepted:
        conn.close()
    listener.close()


def test_a_server_that_never_answers_hits_the_read_timeout_and_is_unavailable(silent_server):
    url, accepted = silent_server
    conf = make_placement_conf(url)
    conf.set_override('read_timeout', 0.2, group='placement')
    conf.set_override('max_retries', 1, group='placement')
    client = PlacementClient.from_conf(conf)
    with pytest.raises(PlacementUnavailable) as info:
        client.get_resource_providers()
    assert info.value.attempts == 2
    assert len(accepted) == 2


class _Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self.seen.append(dict(self.headers))
        body = json.dumps({'resource_providers': []}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture
def recording_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    handler = type('Handler', (_Recorder,), {'seen': seen})
    server = ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.05},
                              daemon=True)
    thread.start()
    yield f'http://127.0.0.1:{server.server_port}', seen
    server.shutdown()
    server.server_close()


def test_on_the_wire_requests_carry_token_microversion_and_global_request_id(recording_server):
    url, seen = recording_server
    conf = make_placement_conf(url)
    conf.set_override('token', 'wire-token', group='placement')
    PlacementClient.from_conf(conf).get_resource_providers(request_id=GLOBAL_ID)
    headers = {k.lower(): v for k, v in seen[0].items()}
    assert headers['x-auth-token'] == 'wire-token'
    assert headers['openstack-api-version'] == f'placement {MIN_MICROVERSION}'
    assert headers['x-openstack-request-id'] == GLOBAL_ID


def test_logs_never_contain_the_token(recording_server, silent_server, caplog):
    secret = 'gAAAAAB-very-secret-token-0123456789'
    caplog.set_level(logging.DEBUG)
    url, _ = recording_server
    conf = make_placement_conf(url)
    conf.set_override('token', secret, group='placement')
    PlacementClient.from_conf(conf).get_resource_providers(request_id=GLOBAL_ID)
    silent_url, _ = silent_server
    conf = make_placement_conf(silent_url)
    conf.set_override('token', secret, group='placement')
    conf.set_override('read_timeout', 0.2, group='placement')
    conf.set_override('max_retries', 1, group='placement')
    with pytest.raises(PlacementUnavailable) as info:
        PlacementClient.from_conf(conf).get_resource_providers()
    # The test must have captured the request logging it checks.
    assert any('resource_providers' in r.getMessage() for r in caplog.records)
    assert secret not in caplog.text
    assert secret not in str(info.value)


# ---------------------------------------------------- what requests reads from the environment

_PROXY_VARIABLES = ('http_proxy', 'https_proxy', 'all_proxy', 'no_proxy', 'ftp_proxy')


@pytest.fixture
def bare_environment(monkeypatch, tmp_path):
    """No proxy, CA bundle or netrc anywhere requests would look."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    for name in ('REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE', 'NETRC'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('HOME', str(tmp_path))
    monkeypatch.setattr('urllib.request.getproxies', dict)  # no system-wide proxy either
    return tmp_path


def test_a_bare_environment_gives_requests_nothing(bare_environment):
    assert not client_mod.environment_configures_requests()


@pytest.mark.parametrize('variable, value', [
    ('REQUESTS_CA_BUNDLE', '/etc/ssl/private-ca.pem'),
    ('CURL_CA_BUNDLE', '/etc/ssl/private-ca.pem'),
])
def test_a_ca_bundle_in_the_environment_is_read(bare_environment, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    assert client_mod.environment_configures_requests()


def test_a_proxy_is_read(bare_environment, monkeypatch):
    monkeypatch.setattr('urllib.request.getproxies',
                        lambda: {'https': 'http://proxy.example:3128'})
    assert client_mod.environment_configures_requests()


def test_a_netrc_file_is_read(bare_environment, monkeypatch):
    (bare_environment / '.netrc').write_text('machine placement login a password b\n')
    assert client_mod.environment_configures_requests()


def test_a_netrc_named_by_the_environment_is_read(bare_environment, monkeypatch):
    named = bare_environment / 'elsewhere'
    monkeypatch.setenv('NETRC', str(named))
    assert not client_mod.environment_configures_requests()
    named.write_text('machine placement login a password b\n')
    assert client_mod.environment_configures_requests()


def test_requests_skips_the_environment_only_when_it_holds_nothing(bare_environment,
                                                                   monkeypatch):
    bare = PlacementClient.from_conf(_conf_with())
    assert bare._adapter.session.session.trust_env is False
    assert bare._adapter.session.verify is True
    monkeypatch.setattr('urllib.request.getproxies',
                        lambda: {'https': 'http://proxy.example:3128'})
    configured = PlacementClient.from_conf(_conf_with())
    assert configured._adapter.session.session.trust_env is True


@pytest.mark.parametrize('variable', ['REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE'])
def test_a_ca_bundle_in_the_environment_is_taken_once_for_verify(bare_environment,
                                                                  monkeypatch, variable):
    monkeypatch.setenv(variable, '/etc/ssl/private-ca.pem')
    session = PlacementClient.from_conf(_conf_with())._adapter.session
    assert session.session.trust_env is False
    assert session.verify == '/etc/ssl/private-ca.pem'


def test_requests_order_between_the_two_bundles_is_kept(bare_environment, monkeypatch):
    monkeypatch.setenv('CURL_CA_BUNDLE', '/etc/ssl/curl.pem')
    monkeypatch.setenv('REQUESTS_CA_BUNDLE', '/etc/ssl/requests.pem')
    assert PlacementClient.from_conf(_conf_with())._adapter.session.verify == \
        '/etc/ssl/requests.pem'


def test_a_bundle_in_the_environment_does_not_override_the_configured_cafile_or_insecure(
        bare_environment, monkeypatch):
    monkeypatch.setenv('REQUESTS_CA_BUNDLE', '/etc/ssl/private-ca.pem')
    cafile = PlacementClient.from_conf(_conf_with(cafile='/etc/placement/ca.pem'))
    assert cafile._adapter.session.verify == '/etc/placement/ca.pem'
    insecure = PlacementClient.from_conf(_conf_with(insecure=True))
    assert insecure._adapter.session.verify is False
