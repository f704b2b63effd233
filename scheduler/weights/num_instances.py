"""NumInstancesWeigher: weighs hosts by their instance count (off by default).

``num_instances`` is the larger of the instances the catalog knows on the host
and its ``num_instances`` stat, plus the instances this request placed there.
A negative multiplier spreads by count, a positive one packs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec


class NumInstancesWeigher(BaseHostWeigher):
    def weight_multiplier(self, host_state: HostState) -> float:
        return get_weight_multiplier(
            host_state, 'num_instances_weight_multiplier',
            self.require_conf().filter_scheduler.num_instances_weight_multiplier)

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        return host_state.num_instances
