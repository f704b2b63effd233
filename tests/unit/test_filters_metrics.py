"""MetricsFilter: hosts must report every metric [metrics] weight_setting names."""
from __future__ import annotations

import logging

import pytest

from scheduler.filters.metrics import MetricsFilter
from tests.builders import make_conf, make_host, make_spec

LOGGER = 'scheduler.filters.metrics'


def metrics_filter(weight_setting):
    f = MetricsFilter()
    f.conf = make_conf(metrics={'weight_setting': list(weight_setting)})
    return f


# (weight_setting, host metrics) -> (passed, reason)
CASES = [
    pytest.param([], {}, (True, None), id='no setting: every host passes'),
    pytest.param(['cpu.frequency=1'], {'cpu.frequency': 2400.0}, (True, None),
                 id='the named metric is reported'),
    pytest.param(['cpu.frequency=1'], {'cpu.frequency': 2400.0, 'cpu.idle.percent': 3.0},
                 (True, None), id='extra metrics do not matter'),
    pytest.param(['cpu.frequency=1', 'cpu.user.percent=-1'], {'cpu.frequency': 2400.0},
                 (False, 'host does not report metric cpu.user.percent ([metrics] '
                         'weight_setting)'), id='one missing metric fails'),
    pytest.param(['b=1', 'a=1'], {},
                 (False, 'host does not report metrics a, b ([metrics] weight_setting)'),
                 id='a host without metrics fails, naming them all'),
    pytest.param(['cpu.frequency=0'], {'cpu.frequency': 0.0}, (True, None),
                 id='a ratio of 0 still names a metric; a value of 0 is reported'),
    pytest.param(['cpu.frequency'], {}, (True, None),
                 id='invalid entries are ignored, as in Nova'),
    pytest.param([' cpu.frequency = 1'], {'cpu.frequency': 1.0}, (True, None),
                 id='spaces around the name are ignored'),
]


@pytest.mark.parametrize('setting,metrics,expected', CASES)
def test_metrics_filter(setting, metrics, expected):
    result = metrics_filter(setting).filter_result(make_host('cn1', metrics=metrics),
                                                   make_spec())

    assert (result.passed, result.reason) == expected


def test_a_reason_lists_a_bounded_number_of_missing_metrics():
    f = metrics_filter([f'm{i}=1' for i in range(8)])

    assert f.filter_result(make_host('cn1'), make_spec()).reason == (
        'host does not report metrics m0, m1, m2, m3, m4 and 3 more ([metrics] weight_setting)')


def test_malformed_entries_name_no_required_metric_as_the_weigher_reads_them():
    f = metrics_filter(['a', '=1', 'b=x', 'c=nan', 'd=-0.5'])

    assert f.required_metrics() == {'d'}


def test_invalid_setting_entries_are_reported_once_not_per_host(caplog):
    f = metrics_filter(['broken', 'cpu.frequency=1'])
    hosts = [make_host(f'cn{i}', metrics={'cpu.frequency': 1.0}) for i in range(3)]

    with caplog.at_level(logging.WARNING):
        for host in hosts:
            assert f.filter_result(host, make_spec()).passed

    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning == 'Ignoring the invalid elements of the option [metrics] weight_setting: broken'


def test_a_host_with_no_metrics_at_all_is_reported_once(caplog):
    f = metrics_filter(['cpu.frequency=1'])
    bare, partial = make_host('cn1'), make_host('cn2', metrics={'other': 1.0})

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _request in range(3):
            for host in (bare, partial):
                assert not f.filter_result(host, make_spec()).passed

    [warning] = [r.getMessage() for r in caplog.records]
    assert 'no metrics for host cn1' in warning


def test_a_changed_setting_is_read_again():
    f = metrics_filter(['a=1'])
    host = make_host('cn1', metrics={'a': 1.0})
    assert f.filter_result(host, make_spec()).passed

    f.conf.set_override('weight_setting', ['b=1'], group='metrics')

    assert not f.filter_result(host, make_spec()).passed


def test_metrics_filter_runs_for_every_instance_and_not_on_rebuild():
    assert not MetricsFilter.run_filter_once_per_request
    assert not MetricsFilter.RUN_ON_REBUILD
