"""NumInstancesWeigher: weighs hosts by their instance count (off by default).

``num_instances`` is the larger of the instances the catalog knows on the host
and its ``num_instances`` stat, plus the instances this request placed there.
A negative multiplier spreads by count, a positive one packs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier

if TYPE_CHECKING:
    import numpy as np

    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec


class NumInstancesWeigher(BaseHostWeigher):
    def weight_multiplier(self, host_state: HostState) -> float:
        return get_weight_multiplier(
            host_state, 'num_instances_weight_multiplier',
            self.require_conf().filter_scheduler.num_instances_weight_multiplier)

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        return host_state.num_instances

    def multipliers(self, table: HostTable, rows: np.ndarray) -> np.ndarray | float:
        config_value = self.require_conf().filter_scheduler.num_instances_weight_multiplier
        return table.multiplier('num_instances_weight_multiplier', config_value, rows)

    def raw_weights(self, table: HostTable, rows: np.ndarray,
                    weight_properties: RequestSpec) -> np.ndarray | None:
        return table.num_instances[rows]
