"""``[neutron]``: the optional, read-only source of routed network segments.

Only ``[scheduler] query_placement_for_routed_network_aggregates`` reads it:
which segments a requested network has, and which segment a requested port's
fixed IP is on, as Nova's routed networks request filter asks Neutron.
keystoneauth1's session, auth and adapter options are registered like
``[nova]``'s (service type ``network``); without an auth plugin it is off.
"""
from __future__ import annotations

from oslo_config import cfg

from scheduler.conf.ksa import list_ksa_opts, register_ksa_group

GROUP = 'neutron'

neutron_group = cfg.OptGroup(
    GROUP, title='Neutron (routed network segments, read-only)',
    help='Where the routed networks request filter asks which segments a network has and '
         'which segment a port\'s fixed IP is on (GET /v2.0/ports/{id}, /v2.0/subnets). '
         'Off unless auth_type is set; with query_placement_for_routed_network_aggregates '
         'on and this off, a request naming a network or port fails with a reason saying so.')

neutron_opts = [
    cfg.FloatOpt('connect_timeout', default=5.0, min=0.1,
                 help='Seconds to wait for a TCP connection to Neutron.'),
    cfg.FloatOpt('read_timeout', default=30.0, min=0.1,
                 help='Seconds to wait for Neutron to answer one request.'),
    cfg.IntOpt('extensions_cache_time', default=600, min=0,
               help='Seconds the list of Neutron\'s extensions (is ``segment`` enabled?) is '
                    'kept before it is asked for again.'),
]

ADAPTER_DEFAULTS = {'service_type': 'network', 'valid_interfaces': ['internal', 'public']}


def register_opts(conf: cfg.ConfigOpts) -> None:
    register_ksa_group(conf, neutron_group, neutron_opts, ADAPTER_DEFAULTS)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return list_ksa_opts(neutron_group, neutron_opts, ADAPTER_DEFAULTS)
