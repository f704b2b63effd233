"""MetricsWeigher: Σ metric × ratio from ``[metrics] weight_setting``; with ``required`` a
host missing a metric is left out with that reason instead of failing the whole request
(Nova raises)."""
from __future__ import annotations

import logging
import random

import pytest

from scheduler import exceptions as exc
from scheduler import plugins
from scheduler.catalog import HostCatalog
from scheduler.catalog.hosts_file import metric_as_nova_reads_it, parse_metrics
from scheduler.manager import SchedulerManager
from scheduler.pipeline.claimer import PendingCleanups
from scheduler.weights.base import Exclusion, weigh_hosts
from scheduler.weights.metrics import MetricsWeigher
from scheduler.weights.ram import RAMWeigher
from tests.builders import (
    CELL,
    make_aggregate,
    make_conf,
    make_host,
    make_spec,
    select,
    user_spec,
)
from tests.unit.fake_placement import FakePlacement

SETTING = ['cpu.frequency=1.0', 'cpu.percent=-100']
MISSING_FREQUENCY = 'host does not report metric cpu.frequency ([metrics] required)'


def configured(**metrics):
    metrics.setdefault('weight_setting', SETTING)
    weigher = MetricsWeigher()
    weigher.conf = make_conf(metrics=metrics)
    return weigher


def host(name, **metrics):
    return make_host(name, metrics=metrics)


def weights(weighed):
    return {w.host.host: w.weight for w in weighed}


# Weighing ------------------------------------------------------------------------------

def test_a_host_weighs_the_sum_of_its_metrics_times_their_ratios():
    weigher = configured()
    assert weigher._weigh_object(host('h', **{'cpu.frequency': 3.0, 'cpu.percent': 0.25}),
                                 make_spec()) == pytest.approx(3.0 - 25.0)


def test_hosts_are_ordered_by_normalised_metric_weight_times_the_multiplier():
    hosts = [host('hot', **{'cpu.frequency': 2.0, 'cpu.percent': 0.9}),
             host('cool', **{'cpu.frequency': 2.0, 'cpu.percent': 0.1}),
             host('warm', **{'cpu.frequency': 2.0, 'cpu.percent': 0.5})]
    weighed = weigh_hosts([configured(weight_multiplier=2.0)], hosts, make_spec())
    assert [w.host.host for w in weighed] == ['cool', 'warm', 'hot']
    assert weights(weighed) == pytest.approx({'cool': 2.0, 'warm': 1.0, 'hot': 0.0})


def test_the_aggregate_key_is_metrics_weight_multiplier():
    mild = make_aggregate('mild', metadata={'metrics_weight_multiplier': '0.5',
                                            'weight_multiplier': '99'})
    weigher = configured(weight_multiplier=3.0)
    assert weigher.weight_multiplier(make_host('in', aggregates=[mild])) == 0.5
    assert weigher.weight_multiplier(make_host('out')) == 3.0


def test_an_empty_weight_setting_weighs_every_host_zero_and_needs_no_metric():
    hosts = [host('a'), host('b', **{'cpu.frequency': 9.0})]
    weighed = weigh_hosts([configured(weight_setting=[])], hosts, make_spec())
    assert weights(weighed) == {'a': 0.0, 'b': 0.0}


# Metrics as nova-compute stores them ----------------------------------------------------

# compute_nodes.metrics as nova-compute writes it (MonitorMetric.to_dict: the
# monitor's 29 % stored as 0.29).
COMPUTE_NODES_METRICS = [
    {'name': 'cpu.percent', 'value': 0.29, 'timestamp': '2026-01-15T10:30:00.000000',
     'source': 'libvirt.LibvirtDriver'},
    {'name': 'cpu.frequency', 'value': 2400, 'timestamp': '2026-01-15T10:30:00.000000',
     'source': 'libvirt.LibvirtDriver'},
    {'name': 'numa.membw.max', 'numa_membw_values': {'0': 100},
     'timestamp': '2026-01-15T10:30:00.000000', 'source': 'x'},
]


@pytest.mark.parametrize(('name', 'stored', 'seen'), [
    ('cpu.percent', 0.29, 28.0),  # 0.29 * 100 = 28.999..., truncated as Nova's IntegerField
    ('cpu.user.percent', 0.5, 50.0), ('cpu.kernel.percent', 1, 100.0),
    ('cpu.idle.percent', -0.005, 0.0), ('cpu.iowait.percent', 0.071, 7.0),
    ('cpu.frequency', 2400.7, 2400.0), ('cpu.user.time', 12345, 12345.0),
    ('custom.load', 0.29, 0.29)])
def test_metrics_are_read_as_nova_s_monitor_metric_list_from_json_reads_them(
        name, stored, seen):
    """As nova.objects.monitor_metric.MonitorMetricList.from_json: the five
    percentages times 100, Nova's metric values as integers; names Nova does not
    know as given."""
    assert metric_as_nova_reads_it(name, stored) == seen


def test_a_hosts_file_written_from_compute_nodes_metrics_weighs_as_nova(tmp_path):
    """The column verbatim (a list) or as name -> stored value: either weighs as
    Nova's MetricsWeigher._weigh_object weighs MonitorMetricList.from_json's list."""
    as_list = parse_metrics(COMPUTE_NODES_METRICS)
    as_mapping = parse_metrics({'cpu.percent': 0.29, 'cpu.frequency': 2400})
    assert as_list == as_mapping == {'cpu.percent': 28.0, 'cpu.frequency': 2400.0}
    weigher = configured()
    assert weigher._weigh_object(make_host('h', metrics=as_list), make_spec()) == \
        2400.0 - 28.0 * 100


@pytest.mark.parametrize(('value', 'error'), [
    ('high', 'metrics must be a mapping or a list'),
    ([{'value': 1}], 'metrics items must be mappings with a name'),
    ([{'name': 'cpu.percent', 'value': 'x'}], 'metrics.cpu.percent must be a finite number'),
    ({'cpu.percent': float('nan')}, 'metrics.cpu.percent must be a finite number'),
    ({'cpu.percent': True}, 'metrics.cpu.percent must be a finite number')])
def test_malformed_metrics_are_refused(value, error):
    with pytest.raises(ValueError, match=error):
        parse_metrics(value)


# Missing metrics, not required ----------------------------------------------------------

def test_without_required_a_host_missing_a_metric_weighs_weight_of_unavailable():
    weigher = configured(required=False, weight_of_unavailable=-500.0)
    hosts = [host('blind', **{'cpu.percent': 0.1}),
             host('seen', **{'cpu.frequency': 1.0, 'cpu.percent': 0.9})]
    assert weigher._weigh_object(hosts[0], make_spec()) == -500.0
    assert [w.host.host for w in weigh_hosts([weigher], hosts, make_spec())] == ['seen', 'blind']


def test_a_missing_metric_with_a_zero_ratio_does_not_count():
    weigher = configured(required=False, weight_setting=['cpu.frequency=0', 'cpu.percent=1'])
    assert weigher._weigh_object(host('h', **{'cpu.percent': 0.5}), make_spec()) == 0.5


def test_a_missing_metric_does_not_count_on_a_host_whose_multiplier_is_zero():
    off = make_aggregate('off', metadata={'metrics_weight_multiplier': '0'})
    weigher = configured(required=False)
    assert weigher._weigh_object(make_host('h', aggregates=[off]), make_spec()) == 0.0


# Missing metrics, required -------------------------------------------------------------

def test_a_host_missing_a_required_metric_is_left_out_and_the_others_are_weighed():
    hosts = [host('blind', **{'cpu.percent': 0.1}),
             host('seen', **{'cpu.frequency': 1.0, 'cpu.percent': 0.9}),
             host('also', **{'cpu.frequency': 1.0, 'cpu.percent': 0.1})]
    excluded: list[Exclusion] = []
    weighed = weigh_hosts([configured()], hosts, make_spec(), excluded=excluded)
    assert [w.host.host for w in weighed] == ['also', 'seen']
    assert [(e.weigher, e.host.host, e.reason) for e in excluded] == [
        ('MetricsWeigher', 'blind', MISSING_FREQUENCY)]


def test_a_lone_host_missing_a_required_metric_is_not_weighed_and_stays():
    """Follows nova.weights.BaseWeightHandler.get_weighed_objects, which returns a
    lone host before any weigher sees it: nova-scheduler places it."""
    excluded: list[Exclusion] = []
    weighed = weigh_hosts([configured()], [host('blind')], make_spec(), excluded=excluded)
    assert [(w.host.host, w.weight) for w in weighed] == [('blind', 0.0)]
    assert excluded == []


def test_the_reason_names_every_missing_metric():
    reason = configured().unweighable_reason(host('blind'), make_spec())
    assert reason == ('host does not report metrics cpu.frequency, cpu.percent '
                      '([metrics] required)')


def test_a_left_out_host_is_logged_once_with_its_name(caplog):
    caplog.set_level(logging.WARNING, logger='scheduler.weights.base')
    weigher = configured(weight_setting=['once.only=1'])
    for _ in range(3):
        weigh_hosts([weigher], [host('lonely-unit-host'), host('b', **{'once.only': 1})],
                    make_spec())
    [warning] = [r.getMessage() for r in caplog.records if 'lonely-unit-host' in r.getMessage()]
    assert warning == ('MetricsWeigher leaves host lonely-unit-host out of scheduling: '
                       'host does not report metric once.only ([metrics] required)')


# Through the manager -------------------------------------------------------------------

@pytest.fixture
def manager(tmp_path):
    """cn0 has more RAM; only cn1 reports cpu.frequency."""
    fake = FakePlacement()
    fake.add_compute('cn0', ram_mb=65536)
    fake.add_compute('cn1', ram_mb=8192)
    hosts_file = tmp_path / 'hosts.yaml'
    hosts_file.write_text('hosts:\n  - nodename: cn0\n'
                          '  - nodename: cn1\n    metrics:\n      cpu.frequency: 2.5\n')
    built = []

    def build(**metrics):
        conf = make_conf(metrics=metrics)
        weighers = [RAMWeigher(), MetricsWeigher()]
        for weigher in weighers:
            weigher.conf = conf
        m = SchedulerManager(conf, placement=fake,
                             catalog=HostCatalog.from_file(str(hosts_file),
                                                           default_cell_uuid=CELL),
                             filters=[], weighers=weighers, request_filters=[],
                             cleanups=PendingCleanups(fake, interval=3600),
                             rng=random.Random(0))
        built.append(m)
        return m

    yield build
    for m in built:
        m.cleanups.stop()


def choose(manager, instance_uuids):
    """As many instances of PROJECT's USER as uuids, without alternates."""
    return select(manager, user_spec(num_instances=len(instance_uuids)), instance_uuids,
                  return_alternates=False)


def test_the_request_goes_to_the_host_that_reports_the_required_metric(manager):
    result = choose(manager(weight_setting=['cpu.frequency=1']),
                    ['6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e0001'])
    assert result[0][0].service_host == 'cn1'


def test_without_required_the_host_lacking_the_metric_is_only_weighed_down(manager):
    # cn0 weighs weight_of_unavailable: metrics 0 * 0.5 + RAM 1.0 beats cn1's
    # metrics 1 * 0.5 + RAM 8192/65536.
    result = choose(manager(weight_setting=['cpu.frequency=1'], required=False,
                            weight_multiplier=0.5),
                    ['6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e0002'])
    assert result[0][0].service_host == 'cn0'


def test_when_no_host_reports_a_required_metric_novalidhost_says_so(manager):
    with pytest.raises(exc.NoValidHost) as caught:
        choose(manager(weight_setting=['cpu.frequency=1', 'mem.free=1']),
               ['6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e0003'])
    assert caught.value.reason.startswith('0/2 hosts available: MetricsWeigher removed 2 (')
    assert 'host does not report metric mem.free ([metrics] required)' in caught.value.reason
    assert 'cn0' not in caught.value.reason and 'cn1' not in caught.value.reason


# Start-up ------------------------------------------------------------------------------

def test_start_up_names_the_invalid_entries_of_the_weight_setting_once(caplog):
    conf = make_conf(filter_scheduler={'weight_classes': ['MetricsWeigher']},
                     metrics={'weight_setting': ['cpu.frequency=1', 'oops', 'x=y']})
    [weigher] = plugins.load_weighers(conf)
    weigher.setting()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ['Ignoring the invalid elements of the option [metrics] weight_setting: '
                        'oops, x=y']
    assert weigher.setting() == [('cpu.frequency', 1.0)]
