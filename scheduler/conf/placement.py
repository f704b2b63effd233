"""``[placement]``: how to reach Placement.

keystoneauth1's session, auth and adapter options are registered through
``keystoneauth1.loading`` exactly as Nova does, so an existing nova.conf
``[placement]`` section works unchanged. The options below them are this
service's own: explicit timeouts and a bounded retry policy.
"""
from __future__ import annotations

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

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
    # A fresh OptGroup for every ConfigOpts: oslo.config registers only a shallow
    # copy of the group, so a shared module-level one would make every ConfigOpts
    # share (and leak) option overrides.
    conf.register_group(cfg.OptGroup(GROUP, title=placement_group.title,
                                     help=placement_group.help))
    conf.register_opts(placement_opts, group=GROUP)
    ks_loading.register_session_conf_options(conf, GROUP)
    ks_loading.register_auth_conf_options(conf, GROUP)
    ks_loading.register_adapter_conf_options(conf, GROUP, include_deprecated=False)
    for name, value in ADAPTER_DEFAULTS.items():
        conf.set_default(name, value, group=GROUP)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    # keystoneauth builds new option objects on every call, so the defaults
    # set in register_opts() must be applied again for the sample to show them.
    adapter_opts = ks_loading.get_adapter_conf_options(include_deprecated=False)
    cfg.set_defaults(adapter_opts, **ADAPTER_DEFAULTS)
    return {
        placement_group: (
            placement_opts
            + ks_loading.get_session_conf_options()
            + ks_loading.get_auth_common_conf_options()
            + ks_loading.get_auth_plugin_conf_options('password')
            + adapter_opts
        )
    }
