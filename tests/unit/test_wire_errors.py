"""Failures on the wire look exactly like nova-scheduler's (doc/design.md#the-rpc-boundary).

oslo.messaging names a failure by its class's module and name and rebuilds it
on the caller's side with ``cls(*args, **kwargs)``; nova-conductor accepts only
``nova.exception``. These tests serialize our errors with oslo.messaging's own
code and compare with the real NoValidHost reply Nova produced.
"""
from __future__ import annotations

import importlib.util
import json
import sys

import oslo_messaging as messaging
import pytest
from oslo_messaging._drivers import common as rpc_common

from scheduler import exceptions as exc
from scheduler.rpc.client import _typed_error
from tests.fixtures.wire_samples import load


def serialized(error: Exception) -> dict:
    try:
        raise error
    except Exception:
        return json.loads(rpc_common.serialize_remote_exception(sys.exc_info()))


@pytest.mark.parametrize('reason', ['', 'There are not enough hosts available.'])
def test_no_valid_host_serializes_like_novas(reason):
    sample = load('no_valid_host_failure.json')
    nova = sample['no_candidates' if not reason else 'not_enough_hosts']['failure_field_decoded']

    ours = serialized(exc.NoValidHost(reason=reason))

    for key in ('class', 'module', 'message', 'args', 'kwargs'):
        assert ours[key] == nova[key], key


def test_invalid_input_claims_novas_class_with_a_reason_and_code_400():
    ours = serialized(exc.InvalidInput(reason='spec_obj.flavor: required'))

    assert (ours['module'], ours['class']) == ('nova.exception', 'InvalidInput')
    assert ours['kwargs'] == {'reason': 'spec_obj.flavor: required', 'code': 400}
    assert ours['message'] == 'Invalid input received: spec_obj.flavor: required'


@pytest.mark.skipif(importlib.util.find_spec('nova') is not None,
                    reason='nova is installed: oslo.messaging rebuilds its own NoValidHost')
def test_a_caller_without_nova_gets_our_no_valid_host_back_with_its_reason():
    failure = rpc_common.serialize_remote_exception(
        (exc.NoValidHost, exc.NoValidHost(reason='0/3 hosts available'), None))
    # No nova package here: oslo.messaging falls back to RemoteError.
    remote = rpc_common.deserialize_remote_exception(failure, ['nova.exception'])
    assert isinstance(remote, messaging.RemoteError)

    typed = _typed_error(remote)

    assert isinstance(typed, exc.NoValidHost)
    assert typed.reason == '0/3 hosts available'


def test_other_remote_errors_are_left_alone():
    remote = messaging.RemoteError('KeyError', 'boom', '')

    assert _typed_error(remote) is remote
