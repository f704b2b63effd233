"""``[metrics]``: the MetricsWeigher, with Nova 34's names and defaults."""
from __future__ import annotations

from oslo_config import cfg

GROUP = 'metrics'

metrics_group = cfg.OptGroup(
    GROUP, title='Metrics parameters',
    help='How the MetricsWeigher turns the metrics compute hosts report into a weight. '
         'This service reads host metrics from the host catalog: the metrics named by '
         '``weight_setting`` in each compute node\'s row of its cell database '
         '(``[cell_database] connections``), else the ``metrics`` of a host in the hosts '
         'file.')

metrics_opts = [
    cfg.FloatOpt('weight_multiplier', default=1.0,
                 help='Multiplier used for weighing hosts based on reported metrics.\n\n'
                      'An aggregate of the host whose metadata has the key '
                      '``metrics_weight_multiplier`` overrides this value for that host.'),
    cfg.ListOpt('weight_setting', default=[],
                help='Mapping of metric to weight modifier.\n\n'
                     'Entries ``name=ratio``, for example ``cpu.frequency=1, '
                     'cpu.user.percent=-1``. A host weighs the sum of metric value times '
                     'ratio; the MetricsFilter requires every metric named here.'),
    cfg.BoolOpt('required', default=True,
                help='Whether metrics are required.\n\n'
                     'True: a host lacking a metric of ``weight_setting`` is left out of '
                     'scheduling, with that reason (Nova fails the whole request instead; '
                     'the MetricsFilter removes such hosts before weighing). False: such a '
                     'host weighs ``weight_of_unavailable``.'),
    cfg.FloatOpt('weight_of_unavailable', default=-10000.0,
                 help='Default weight for unavailable metrics.\n\n'
                      'Used when ``required`` is False and a host lacks a metric.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # A new OptGroup for every ConfigOpts: oslo.config copies a registered group
    # shallowly, so registering the module-level object would share option state
    # (overrides, defaults) between all ConfigOpts instances of the process.
    conf.register_group(cfg.OptGroup(GROUP, title=metrics_group.title, help=metrics_group.help))
    conf.register_opts(metrics_opts, group=GROUP)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {metrics_group: metrics_opts}
