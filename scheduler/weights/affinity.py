"""Soft (anti-)affinity of server groups: preferences, not filters.

A host weighs the number of members of the request's server group it runs
(``host_state.instances`` ∩ ``group.members``): more is better for
``soft-affinity``, fewer for ``soft-anti-affinity``. Groups with another
policy, and requests without a group, weigh 0 everywhere.

Within a multi-instance request: the group's members include the instances of
this very request, and ``HostState.consume()`` adds each placed instance to the
host's instances, so the second instance already sees where the first went
(as in Nova). Callers that send no instance uuids (RPC 4.0-4.3 without claims)
give nothing to count, so there the weighers only see earlier members (as in
Nova, too).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec


def members_on_host(host_state: HostState, spec_obj: RequestSpec, policy: str) -> int:
    """Members of the request's group on the host, when the group has ``policy``."""
    group = spec_obj.instance_group
    # Nova reads ``policy``; a group decoded from an older primitive may only
    # carry the deprecated ``policies`` list (the affinity filters accept both).
    if group is None or (group.policy != policy and policy not in (group.policies or ())):
        return 0
    return len(set(host_state.instances) & set(group.members))


class _SoftAffinityWeigherBase(BaseHostWeigher):
    policy: ClassVar[str]
    multiplier_option: ClassVar[str]
    #: +1: members attract; -1: members repel.
    sign: ClassVar[int]

    def weight_multiplier(self, host_state: HostState) -> float:
        return get_weight_multiplier(
            host_state, self.multiplier_option,
            getattr(self.require_conf().filter_scheduler, self.multiplier_option))

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        return self.sign * members_on_host(host_state, weight_properties, self.policy)

    def multipliers(self, table: HostTable, rows: np.ndarray) -> np.ndarray | float:
        config_value = getattr(self.require_conf().filter_scheduler, self.multiplier_option)
        return table.multiplier(self.multiplier_option, config_value, rows)

    def raw_weights(self, table: HostTable, rows: np.ndarray,
                    weight_properties: RequestSpec) -> np.ndarray:
        group = weight_properties.instance_group
        if group is None or (group.policy != self.policy
                             and self.policy not in (group.policies or ())):
            return np.zeros(len(rows))
        return self.sign * table.members_on_rows(group.members)[rows]


class ServerGroupSoftAffinityWeigher(_SoftAffinityWeigherBase):
    policy = 'soft-affinity'
    multiplier_option = 'soft_affinity_weight_multiplier'
    sign = 1


class ServerGroupSoftAntiAffinityWeigher(_SoftAffinityWeigherBase):
    policy = 'soft-anti-affinity'
    multiplier_option = 'soft_anti_affinity_weight_multiplier'
    sign = -1
