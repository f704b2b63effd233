"""CPUWeigher: more free vCPUs win (a negative multiplier stacks instead of spreading)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier

if TYPE_CHECKING:
    import numpy as np

    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec


class CPUWeigher(BaseHostWeigher):
    minval = 0

    def weight_multiplier(self, host_state: HostState) -> float:
        return get_weight_multiplier(
            host_state, 'cpu_weight_multiplier',
            self.require_conf().filter_scheduler.cpu_weight_multiplier)

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        # Nova's formula. Here the ratio is 1.0 and vcpus_total is Placement's
        # capacity, which already includes the allocation ratio (see host_state).
        return host_state.vcpus_total * host_state.cpu_allocation_ratio - host_state.vcpus_used

    def multipliers(self, table: HostTable, rows: np.ndarray) -> np.ndarray | float:
        config_value = self.require_conf().filter_scheduler.cpu_weight_multiplier
        return table.multiplier('cpu_weight_multiplier', config_value, rows)

    def raw_weights(self, table: HostTable, rows: np.ndarray,
                    weight_properties: RequestSpec) -> np.ndarray | None:
        total = table.capacity_at('VCPU', rows) + table.capacity_at('PCPU', rows)
        used = table.used_at('VCPU', rows) + table.used_at('PCPU', rows)
        # cpu_allocation_ratio is 1.0: Placement's capacity already includes it.
        return total * 1.0 - used
