"""The RPC server's listener: how long it waits for the next message after one."""
from __future__ import annotations

import inspect

import oslo_messaging as messaging
import pytest
from oslo_config import cfg
from oslo_messaging._drivers import amqpdriver

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
