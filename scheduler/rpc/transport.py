"""The oslo.messaging transport, from ``[DEFAULT] transport_url``."""
from __future__ import annotations

import oslo_messaging as messaging
from oslo_config import cfg

# The conductor rebuilds our failures from this module only (nova/rpc.py,
# ALLOWED_EXMODS; doc/design.md#the-rpc-boundary);
# our own client must accept the same ones.
ALLOWED_REMOTE_EXMODS = ['nova.exception']


def get_transport(conf: cfg.ConfigOpts, url: str | None = None) -> messaging.Transport:
    return messaging.get_rpc_transport(conf, url=url,
                                       allowed_remote_exmods=ALLOWED_REMOTE_EXMODS)


def get_notification_transport(conf: cfg.ConfigOpts) -> messaging.Transport:
    return messaging.get_notification_transport(conf)
