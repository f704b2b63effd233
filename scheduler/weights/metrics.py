"""MetricsWeigher: weigh hosts by the metrics they report.

A host weighs the sum of ``metric value × ratio`` over ``[metrics]
weight_setting`` (``name=ratio`` entries). The multiplier is ``[metrics]
weight_multiplier``, overridden per host by the aggregate metadata key
``metrics_weight_multiplier``.

A metric a host does not report:

* ``[metrics] required = False``: the host weighs ``weight_of_unavailable``
  (unless that metric's ratio or the host's multiplier is 0), as in Nova.
* ``[metrics] required = True`` (the default): Nova raises and the whole
  request fails, for every instance, because of one host. Here that host is
  left out with the reason "host does not report metric ..." (which
  NoValidHost quotes if no host is left), and the others are weighed.

Metrics come from the ``metrics`` of each host in the hosts file; this service
does not receive the monitors' periodic updates that Nova stores. The file gives
them as compute_nodes.metrics holds them (``cpu.percent`` 0.25 for 25 %) and they
are read as Nova's ``MonitorMetricList.from_json`` reads that column
(:func:`scheduler.catalog.hosts_file.metric_as_nova_reads_it`: percentages times
100, Nova's metrics as integers), so ``host_state.metrics`` holds the values
Nova's weigher multiplies.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier
from scheduler.weights.setting import parse_weight_setting

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec

SETTING_OPTION = '[metrics] weight_setting'
# Bounds the metric names quoted in a reason; reasons travel to users.
_QUOTED = 5


class MetricsWeigher(BaseHostWeigher):
    _setting: list[tuple[str, float]] | None = None

    def check_configuration(self) -> None:
        self.setting()

    def setting(self) -> list[tuple[str, float]]:
        """``[metrics] weight_setting`` as ``(metric, ratio)`` pairs (parsed once)."""
        if self._setting is None:
            self._setting = parse_weight_setting(
                self.require_conf().metrics.weight_setting, SETTING_OPTION)
        return self._setting

    def weight_multiplier(self, host_state: HostState) -> float:
        return get_weight_multiplier(host_state, 'metrics_weight_multiplier',
                                     self.require_conf().metrics.weight_multiplier)

    def unweighable_reason(self, host_state: HostState,
                           weight_properties: RequestSpec) -> str | None:
        if not self.require_conf().metrics.required:
            return None
        missing = sorted({name for name, _ratio in self.setting()} - set(host_state.metrics))
        if not missing:
            return None
        shown = ', '.join(missing[:_QUOTED]) + (
            f' and {len(missing) - _QUOTED} more' if len(missing) > _QUOTED else '')
        noun = 'metric' if len(missing) == 1 else 'metrics'
        # Worded like the MetricsFilter's reason, which removes the same hosts earlier.
        return f'host does not report {noun} {shown} ([metrics] required)'

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        conf = self.require_conf().metrics
        value = 0.0
        for name, ratio in self.setting():
            if name in host_state.metrics:
                value += host_state.metrics[name] * ratio
            elif conf.required:
                # Hosts without a required metric never get here
                # (unweighable_reason); a caller that skipped it gets an error.
                raise LookupError(f'host does not report required metric {name}')
            elif ratio * self.weight_multiplier(host_state) != 0:
                return conf.weight_of_unavailable
        return value

    def multipliers(self, table: HostTable, rows: np.ndarray) -> np.ndarray | float:
        return table.multiplier('metrics_weight_multiplier',
                                self.require_conf().metrics.weight_multiplier, rows)

    def weighs_every_host(self, weight_properties: RequestSpec) -> bool:
        return not self.setting() or not self.require_conf().metrics.required

    def raw_weights(self, table: HostTable, rows: np.ndarray,
                    weight_properties: RequestSpec) -> np.ndarray | None:
        if not self.setting():
            return np.zeros(len(rows))
        return None
