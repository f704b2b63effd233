"""DiskWeigher: more free disk wins (a negative multiplier stacks instead of spreading)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier

if TYPE_CHECKING:
    import numpy as np

    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec


class DiskWeigher(BaseHostWeigher):
    minval = 0

    def weight_multiplier(self, host_state: HostState) -> float:
        return get_weight_multiplier(
            host_state, 'disk_weight_multiplier',
            self.require_conf().filter_scheduler.disk_weight_multiplier)

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        return host_state.free_disk_mb

    def multipliers(self, table: HostTable, rows: np.ndarray) -> np.ndarray | float:
        config_value = self.require_conf().filter_scheduler.disk_weight_multiplier
        return table.multiplier('disk_weight_multiplier', config_value, rows)

    def raw_weights(self, table: HostTable, rows: np.ndarray,
                    weight_properties: RequestSpec) -> np.ndarray | None:
        return table.free_at('DISK_GB', rows) * 1024
