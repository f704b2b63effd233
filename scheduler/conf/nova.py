"""``[nova]``: the optional host-data sync through Nova's compute API.

keystoneauth1's session, auth and adapter options are registered through
``keystoneauth1.loading`` like ``[placement]``'s (service type ``compute``),
so the credentials an operator already gives Neutron's ``[nova]`` section
work here. The options above them are this service's own. Without an auth
plugin the sync is off, whatever ``sync_interval`` says.
"""
from __future__ import annotations

from oslo_config import cfg

from scheduler.conf.ksa import list_ksa_opts, register_ksa_group

GROUP = 'nova'

#: The highest compute API microversion whose GET /os-hypervisors/detail still
#: reports cpu_info (2.88 removed it, with the resource counters).
MAX_MICROVERSION = '2.87'
#: Hypervisor and service ids are UUIDs from 2.53 on; the hypervisor id is the
#: compute node uuid, which is also its root resource provider's uuid.
MIN_MICROVERSION = '2.53'

nova_group = cfg.OptGroup(
    GROUP, title='Nova compute API (host data sync)',
    help='Where the scheduler reads aggregates, compute services and hypervisors '
         'from, periodically, so that a restarted scheduler knows availability zones, '
         'disabled and down hosts before the first fanout cast arrives. Off unless '
         'auth_type is set.')

nova_opts = [
    cfg.IntOpt('sync_interval', default=60, min=0,
               help='Seconds between two reads of aggregates, services and hypervisors '
                    'from the compute API, by each worker. 0 turns the sync off; so does '
                    'an empty auth_type. A failed read keeps the last good data and is '
                    'tried again at the next interval. Nova 34\'s nova-api takes about '
                    '10 ms per compute node to list hypervisors (84 s at 10,000, '
                    'measured by bench.nova_api), each worker once per sync: at that '
                    'size, lengthen the interval.'),
    cfg.StrOpt('microversion', default=MAX_MICROVERSION,
               help=f'Compute API microversion of every request, from {MIN_MICROVERSION} '
                    f'(UUID ids) to {MAX_MICROVERSION} (the last that reports cpu_info '
                    f'of hypervisors).'),
    cfg.FloatOpt('startup_sync_timeout', default=10.0, min=0.0,
                 help='At start-up, seconds to wait for the first sync before taking '
                      'calls; the service starts anyway when it takes longer (the '
                      'sync goes on in the background). 0: do not wait.'),
    cfg.FloatOpt('service_state_max_age', default=0.0, min=-1.0,
                 help='How old, in seconds, the compute services\' state (disabled, forced '
                      'down, up) may be when a request is decided; older, the request first '
                      'reads GET /os-services?binary=nova-compute (one read at a time for '
                      'all the workers of the service, taken by every request that arrived '
                      'before it began). 0, the default: before every '
                      'request, as nova-scheduler reads its services table per request, so '
                      'a host disabled or forced down through the API is never chosen '
                      'after the API answered. -1: only with the periodic sync. Nova 34\'s '
                      'nova-api takes about half a millisecond per compute service to '
                      'answer that read (0.55 s at 1,000, 5.4 s at 10,000, measured by '
                      'bench.nova_api), and each request waits for one: beyond a few '
                      'hundred computes, read the services table instead ([cell_database] '
                      'service_states, as nova-scheduler does) or use -1.'),
    cfg.FloatOpt('connect_timeout', default=5.0, min=0.1,
                 help='Seconds to wait for a TCP connection to the compute API.'),
    cfg.FloatOpt('read_timeout', default=30.0, min=0.1,
                 help='Seconds to wait for the compute API to answer one request.'),
    cfg.IntOpt('hypervisor_page_size', default=1000, min=1, max=10000,
               help='Hypervisors per GET /os-hypervisors/detail page (limit/marker '
                    'paging; Nova caps a page at its own [api] max_limit).'),
]

# keystoneauth's adapter defaults for the compute service.
ADAPTER_DEFAULTS = {'service_type': 'compute', 'valid_interfaces': ['internal', 'public']}


def register_opts(conf: cfg.ConfigOpts) -> None:
    register_ksa_group(conf, nova_group, nova_opts, ADAPTER_DEFAULTS)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return list_ksa_opts(nova_group, nova_opts, ADAPTER_DEFAULTS)
