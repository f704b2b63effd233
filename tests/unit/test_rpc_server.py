"""The RPC server: how long its listener waits for the next message after one, and
when a call's large objects are freed."""
from __future__ import annotations

import inspect
import threading
import weakref

import oslo_messaging as messaging
import pytest
from oslo_config import cfg
from oslo_messaging._drivers import amqpdriver

from scheduler.conf import parse_args
from scheduler.memory import DeferredRelease
from scheduler.rpc import server


@pytest.fixture
def oslo_floor(monkeypatch):
    """oslo.messaging's own floor, restored after the test."""
    monkeypatch.setattr(amqpdriver, 'ACK_REQUEUE_EVERY_SECONDS_MIN', 0.001)


def test_oslo_messaging_still_has_the_floor_the_server_raises():
    # The setting is oslo.messaging's, not an API: an upgrade that renames it would
    # leave the listener waking every few milliseconds after each call, silently.
    assert isinstance(amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MIN, (int, float))
    assert '_current_timeout = ACK_REQUEUE_EVERY_SECONDS_MIN' in inspect.getsource(
        amqpdriver.AMQPListener)


def test_building_the_server_raises_the_listeners_first_wait(oslo_floor):
    conf = cfg.ConfigOpts()
    transport = messaging.get_rpc_transport(conf, url='fake:///')
    server.get_rpc_server(transport, messaging.Target(topic='scheduler', server='h'), [],
                          serializer=None, access_policy=None, journal=None)
    assert amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MIN == server.LISTENER_WAIT_AFTER_MESSAGE


def test_a_longer_floor_set_elsewhere_is_kept(monkeypatch):
    monkeypatch.setattr(amqpdriver, 'ACK_REQUEUE_EVERY_SECONDS_MIN', 2.0)
    server.wait_longer_after_messages()
    assert amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MIN == 2.0


class _HandsOver:
    """An endpoint that hands an object to a release held for an hour, as the manager
    hands a request's trace over."""

    def __init__(self, release: DeferredRelease, freed: threading.Event):
        self.release, self.freed = release, freed

    def decide(self, ctxt: dict, value: int) -> int:
        payload = _Payload()
        weakref.finalize(payload, self.freed.set)
        self.release.later(payload)
        return value + 1


class _Payload:
    pass


def test_what_a_call_hands_over_is_freed_by_its_own_thread_once_it_has_answered():
    conf = parse_args([])
    transport = messaging.get_rpc_transport(conf, url='fake:///')
    target = messaging.Target(topic='scheduler', server='h')
    release, freed = DeferredRelease(delay=3600), threading.Event()
    rpc = server.get_rpc_server(transport, target, [_HandsOver(release, freed)],
                                serializer=None, access_policy=None, journal=None)
    rpc.start()
    try:
        client = messaging.get_rpc_client(transport, messaging.Target(topic='scheduler'))
        assert client.prepare(timeout=30).call({}, 'decide', value=1) == 2
        # Not after the background thread's hour: when the call's thread is done.
        assert freed.wait(30)
        assert release.pending() == 0 and release._thread is None
    finally:
        rpc.stop()
        rpc.wait()
        release.stop()
