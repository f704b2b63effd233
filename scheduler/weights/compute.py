"""BuildFailureWeigher: hosts with recent failed builds lose.

The raw value is the host's ``failed_builds`` stat; the multiplier is the
configured (or aggregate) ``build_failure_weight_multiplier`` **negated**, so
with Nova's default of 1000000 one failure outweighs every other weigher.
nova-compute resets the stat after a successful build; here it comes from the
hosts file, so it changes when the file does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier

if TYPE_CHECKING:
    import numpy as np

    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec


class BuildFailureWeigher(BaseHostWeigher):
    def weight_multiplier(self, host_state: HostState) -> float:
        return -1.0 * get_weight_multiplier(
            host_state, 'build_failure_weight_multiplier',
            self.require_conf().filter_scheduler.build_failure_weight_multiplier)

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        return host_state.failed_builds

    def multipliers(self, table: HostTable, rows: np.ndarray) -> np.ndarray | float:
        config_value = self.require_conf().filter_scheduler.build_failure_weight_multiplier
        return -1.0 * table.multiplier('build_failure_weight_multiplier', config_value, rows)

    def raw_weights(self, table: HostTable, rows: np.ndarray,
                    weight_properties: RequestSpec) -> np.ndarray | None:
        return table.failed_builds[rows]
