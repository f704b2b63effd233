"""Plugins written for nova-scheduler, imported the way Nova's own are."""
from nova.scheduler import filters, weights


class RackHintFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True

    def host_passes(self, host_state, spec_obj):
        return host_state.host.startswith(spec_obj.get_scheduler_hint('rack', 'r1-'))


class HostNameWeigher(weights.BaseHostWeigher):
    # As Nova's functional tests' own weigher: a fixed preference by host name.
    _weights = {'host1': 100, 'host2': 50, 'host3': 10}

    def _weigh_object(self, host_state, weight_properties):
        return self._weights.get(host_state.host, 0)


class CappedProjectWeigher(weights.BaseHostWeigher):
    maxval = 5

    def weight_multiplier(self, host_state):
        return 2.0

    def _weigh_object(self, host_state, weight_properties):
        return len(weight_properties.project_id) + len(host_state.host)
