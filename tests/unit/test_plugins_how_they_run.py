"""At start-up the log says, per filter and weigher, whether it judges the host
table column-wise or host by host: an operator's subclass that overrides a
per-host method gives up the built-in column-wise hook, and should know it."""
from __future__ import annotations

import logging

from scheduler import plugins
from scheduler.filters.compute import ComputeFilter
from scheduler.weights.ram import RAMWeigher
from tests.builders import make_conf


class StricterComputeFilter(ComputeFilter):
    def host_passes(self, host_state, spec_obj):
        return super().host_passes(host_state, spec_obj) and not host_state.host.startswith('x')


class TwiceTheRam(RAMWeigher):
    def _weigh_object(self, host_state, weight_properties):
        return 2 * super()._weigh_object(host_state, weight_properties)


def test_built_in_plugins_run_on_columns_and_a_subclass_overriding_a_per_host_method_does_not():
    assert plugins.runs_on_columns(ComputeFilter())
    assert plugins.runs_on_columns(RAMWeigher())
    assert not plugins.runs_on_columns(StricterComputeFilter())
    assert not plugins.runs_on_columns(TwiceTheRam())


def test_the_start_up_log_names_how_each_enabled_plugin_runs(caplog):
    conf = make_conf(filter_scheduler={'enabled_filters': ['ComputeFilter'],
                                       'weight_classes': ['RAMWeigher']})
    with caplog.at_level(logging.INFO, logger='scheduler.plugins'):
        plugins.load_filters(conf)
        plugins.load_weighers(conf)

    lines = [r.getMessage() for r in caplog.records]
    assert 'Host filters, how they run: ComputeFilter on columns' in lines
    assert 'Host weighers, how they run: RAMWeigher on columns' in lines


def test_with_columnar_host_states_off_the_log_says_every_plugin_runs_host_by_host(caplog):
    conf = make_conf(scheduler={'columnar_host_states': False},
                     filter_scheduler={'enabled_filters': ['ComputeFilter']})
    with caplog.at_level(logging.INFO, logger='scheduler.plugins'):
        plugins.load_filters(conf)

    assert ('Host filters run host by host: [scheduler] columnar_host_states is off'
            in [r.getMessage() for r in caplog.records])
