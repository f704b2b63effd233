"""Plugins written the way operators write them for Nova, loaded by dotted path in tests.

Nothing here is registered as an entry point.
"""
from __future__ import annotations

# Nova's spelling is ``from nova.scheduler import filters, weights``: porting
# a Nova plugin changes only this line.
from scheduler import filters, weights


class RackFilter(filters.BaseHostFilter):
    """Only hosts whose name starts with the ``rack`` scheduler hint (default "r1-")."""

    def host_passes(self, host_state, spec_obj):
        rack = spec_obj.get_scheduler_hint('rack', 'r1-')
        return host_state.host.startswith(rack)


class FewestInstancesWeigher(weights.BaseHostWeigher):
    def _weigh_object(self, host_state, weight_properties):
        return -host_state.num_instances


class NotAPlugin:
    def host_passes(self, host_state, spec_obj):
        return True
