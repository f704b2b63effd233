"""HypervisorVersionWeigher: newer hypervisors win (a negative multiplier prefers older).

The version is the host's ``hypervisor_version`` in the hosts file, in Nova's
integer encoding (libvirt 8.2.0 is 8002000); a host without one weighs 0.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier

if TYPE_CHECKING:
    import numpy as np

    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec


class HypervisorVersionWeigher(BaseHostWeigher):
    def weight_multiplier(self, host_state: HostState) -> float:
        return get_weight_multiplier(
            host_state, 'hypervisor_version_weight_multiplier',
            self.require_conf().filter_scheduler.hypervisor_version_weight_multiplier)

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        return host_state.hypervisor_version or 0

    def multipliers(self, table: HostTable, rows: np.ndarray) -> np.ndarray | float:
        config_value = self.require_conf().filter_scheduler.hypervisor_version_weight_multiplier
        return table.multiplier('hypervisor_version_weight_multiplier', config_value, rows)

    def raw_weights(self, table: HostTable, rows: np.ndarray,
                    weight_properties: RequestSpec) -> np.ndarray | None:
        return table.hypervisor_version[rows]
