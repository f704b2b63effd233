"""``[placement]``: how to reach Placement.

keystoneauth1's session, auth and adapter options are registered through
``keystoneauth1.loading`` exactly as Nova does, so an existing nova.conf
``[placement]`` section works unchanged. The options below them are this
service's own: explicit timeouts and a bounded retry policy.
"""
from __future__ import annotations

from collections.abc import Callable

from oslo_config import cfg

from placement_client.client import PlacementClient
from placement_client.exceptions import PlacementConfigError
from scheduler.conf.ksa import list_ksa_opts, register_ksa_group
from scheduler.exceptions import ConfigurationError

GROUP = 'placement'

placement_group = cfg.OptGroup(
    GROUP, title='Placement Service Options',
    help='Configuration options for connecting to the OpenStack Placement API. '
         'The scheduler refuses to start without an auth plugin; to talk to a '
         'Placement that runs without authentication, set auth_type explicitly '
         '(for example "none" with endpoint_override).')

placement_opts = [
    cfg.FloatOpt('connect_timeout', default=5.0, min=0.1,
                 help='Seconds to wait for a TCP connection to Placement before the '
                      'attempt counts as failed.'),
    cfg.FloatOpt('read_timeout', default=30.0, min=0.1,
                 help='Seconds to wait for Placement to answer once connected. '
                      'GET /allocation_candidates at 10,000 providers takes about 2 s.'),
    cfg.IntOpt('max_retries', default=3, min=0, max=20,
               help='Extra attempts after a connection error, a timeout or a 5xx answer. '
                    'Writes are retried too: a claim whose answer was lost is recognised '
                    'on the next attempt.'),
    cfg.FloatOpt('retry_backoff', default=0.5, min=0.0,
                 help='Base of the exponential back-off between attempts, in seconds; '
                      'each wait is drawn uniformly from [0, base * 2**attempt] (full jitter).'),
    cfg.FloatOpt('retry_backoff_max', default=8.0, min=0.0,
                 help='Upper bound of a single back-off wait, in seconds.'),
]


# Nova's defaults for keystoneauth's adapter options.
ADAPTER_DEFAULTS = {'service_type': 'placement', 'valid_interfaces': ['internal', 'public']}


def register_opts(conf: cfg.ConfigOpts) -> None:
    register_ksa_group(conf, placement_group, placement_opts, ADAPTER_DEFAULTS)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return list_ksa_opts(placement_group, placement_opts, ADAPTER_DEFAULTS)


def load_client(conf: cfg.ConfigOpts, *,
                on_error: Callable[[str], None] | None = None) -> PlacementClient:
    """The Placement client ``[placement]`` describes; ConfigurationError (the
    service refuses to start) when its options cannot work."""
    try:
        return PlacementClient.from_conf(conf, group=GROUP, on_error=on_error)
    except PlacementConfigError as e:
        raise ConfigurationError(str(e)) from e
