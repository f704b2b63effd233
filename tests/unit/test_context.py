"""RequestContext: what the conductor's context becomes, and the token it must never show."""
from __future__ import annotations

import pytest

from scheduler.context import MAX_CONTEXT_STRING, RequestContext
from tests.fixtures import wire_samples


def wire_context() -> dict:
    """The context of the real 4.5 call, as oslo.messaging hands it to the serializer."""
    message = wire_samples.call_message()
    return {k[len('_context_'):]: v for k, v in message.items() if k.startswith('_context_')}


def test_the_wire_context_is_read_with_novas_field_names():
    values = wire_context()

    ctxt = RequestContext.from_dict(values)

    assert ctxt.request_id == values['request_id']
    assert ctxt.global_request_id == values['global_request_id']
    assert (ctxt.user_id, ctxt.project_id) == (values['user_id'], values['project_id'])
    assert ctxt.roles == values['roles']
    assert ctxt.is_admin is values['is_admin']
    assert ctxt.auth_token == values['auth_token']
    assert ctxt.global_id == values['global_request_id']


def test_the_token_never_appears_in_repr_or_the_log_dict():
    values = wire_context()
    token = values['auth_token']
    assert token

    ctxt = RequestContext.from_dict(values)

    assert token not in repr(ctxt)
    assert token not in str(ctxt)
    assert token not in repr(ctxt.to_log_dict())
    assert 'auth_token' not in ctxt.to_log_dict()


def test_the_service_catalog_and_other_extras_stay_out_of_repr_but_go_back_out():
    values = wire_context()
    ctxt = RequestContext.from_dict(values)

    assert 'service_catalog' in ctxt.extra
    assert 'service_catalog' not in repr(ctxt)
    # Casts carry the rest of the context back untouched.
    out = ctxt.to_dict()
    assert {k: out[k] for k in values} == values


def test_the_log_dict_holds_only_ids_and_names():
    ctxt = RequestContext(request_id='req-1', global_request_id='req-g', user_id='u',
                          project_id='p', user_name='alice', project_name='demo',
                          roles=['admin'], auth_token='tok')

    assert ctxt.to_log_dict() == {'request_id': 'req-1', 'global_request_id': 'req-g',
                                  'user': 'u', 'project': 'p', 'user_name': 'alice',
                                  'project_name': 'demo'}


@pytest.mark.parametrize('odd', [7, ['u'], {'a': 1}, 'x' * (MAX_CONTEXT_STRING + 1)])
def test_odd_or_oversized_strings_are_dropped(odd):
    ctxt = RequestContext.from_dict({'user_id': odd, 'project_id': odd, 'user_name': odd,
                                     'global_request_id': odd, 'auth_token': odd,
                                     'request_id': odd})

    assert (ctxt.user_id, ctxt.project_id, ctxt.user_name, ctxt.global_request_id,
            ctxt.auth_token) == (None, None, None, None, None)
    assert ctxt.request_id.startswith('req-') and ctxt.request_id != odd


def test_a_string_at_the_limit_is_kept():
    value = 'u' * MAX_CONTEXT_STRING

    assert RequestContext.from_dict({'user_id': value}).user_id == value


def test_user_and_project_fall_back_to_oslo_contexts_short_keys():
    ctxt = RequestContext.from_dict({'user': 'u', 'project': 'p'})

    assert (ctxt.user_id, ctxt.project_id) == ('u', 'p')


def test_roles_are_bounded_and_only_short_strings_survive():
    roles = ['member', 7, 'r' * 256, 'reader'] + [f'role{i}' for i in range(100)]

    ctxt = RequestContext.from_dict({'roles': roles})

    assert ctxt.roles[:2] == ['member', 'reader']
    assert len(ctxt.roles) == 64 - 2     # the first 64 entries, minus the two odd ones
    assert RequestContext.from_dict({'roles': 'admin'}).roles == []


@pytest.mark.parametrize('value, expected', [(True, True), ('true', False), (1, False),
                                             (None, False)])
def test_is_admin_is_true_only_for_a_real_true(value, expected):
    assert RequestContext.from_dict({'is_admin': value}).is_admin is expected


def test_the_global_id_is_the_request_id_without_a_global_one():
    assert RequestContext.from_dict({'request_id': 'req-local'}).global_id == 'req-local'


def test_oslo_log_gets_the_ids_but_never_the_token():
    ctx = RequestContext.from_dict({'request_id': 'req-1', 'auth_token': 'SECRET-TOKEN'})

    values = ctx.get_logging_values()

    assert values['request_id'] == 'req-1'
    assert 'SECRET-TOKEN' not in repr(values)
