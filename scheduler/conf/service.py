"""``[DEFAULT]`` options this service owns that Nova also defines.

Same names and defaults as Nova 34, so the ``[DEFAULT]`` section of an existing
nova.conf means the same here. ``transport_url``, ``control_exchange`` and the
other messaging options belong to oslo.messaging; logging options to oslo.log.
"""
from __future__ import annotations

import socket

from oslo_config import cfg

service_opts = [
    cfg.HostDomainOpt('host', default=socket.gethostname(), sample_default='<hostname>',
                      help='Hostname, FQDN or IP address of this host.\n\n'
                           'The RPC server name of this scheduler; give each scheduler '
                           'sharing a message bus its own.'),
    cfg.IntOpt('service_down_time', default=60,
               help='Maximum time in seconds since last check-in for up service.\n\n'
                    'The ComputeFilter treats a compute service whose last heartbeat is '
                    'older than this as down. The host catalog has no heartbeats unless '
                    'its source provides ``last_seen_up``.'),
    cfg.StrOpt('default_availability_zone', default='nova',
               help='Default availability zone for compute services.\n\n'
                    'The availability zone of a host that is in no aggregate with '
                    '``availability_zone`` metadata, as reported in Selections.'),
    cfg.StrOpt('state_path', default='/var/lib/placement-scheduler',
               help="Top-level directory for maintaining the service's state.\n\n"
                    'Holds the claims journal (``[claims_journal] directory``). Nova\'s '
                    'default is its package directory; this service\'s is a directory of '
                    'its own, as distribution packages set Nova\'s.'),
    cfg.IntOpt('graceful_shutdown_timeout', default=180,
               help='Specify a timeout after which a gracefully shutdown server will exit. '
                    'Zero value means endless wait.\n\n'
                    'On SIGTERM the service stops consuming and waits this long for '
                    'requests in progress (and their claims) to finish.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(service_opts)


def list_opts() -> dict[str, list[cfg.Opt]]:
    return {'DEFAULT': service_opts}
