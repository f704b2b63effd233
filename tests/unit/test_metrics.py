"""The metrics registry, its Prometheus text format, and the instrumentation helpers.

The text is parsed with prometheus_client's own parser (installed with
oslo.messaging, through oslo.metrics; the service itself does not use it).
"""
from __future__ import annotations

import math
import threading
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from scheduler import exceptions as exc
from scheduler import metrics
from scheduler.exceptions import ConfigurationError
from scheduler.metrics_server import MetricsServer, parse_listen, worker_port


def parse(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample_value(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return None


def test_an_empty_registry_renders_a_valid_document():
    assert metrics.Registry().render() == '\n'


def test_a_counter_renders_help_type_and_one_sample_per_label_set():
    registry = metrics.Registry()
    c = registry.register(metrics.Counter('demo_calls_total', 'Calls "so far"\nby kind',
                                          ('kind',)))
    c.inc(kind='a')
    c.inc(2, kind='b\\"x"')
    text = registry.render()
    assert '# TYPE demo_calls_total counter' in text
    family = parse(text)['demo_calls']
    assert family.type == 'counter'
    assert {s.labels['kind']: s.value for s in family.samples} == {'a': 1.0, 'b\\"x"': 2.0}


def test_a_counter_refuses_to_go_down_and_wrong_labels():
    c = metrics.Counter('x_total', 'x', ('kind',))
    with pytest.raises(ValueError):
        c.inc(-1, kind='a')
    with pytest.raises(ValueError):
        c.inc(other='a')


def test_a_metric_name_can_be_declared_only_once():
    registry = metrics.Registry()
    registry.register(metrics.Counter('x_total', 'x'))
    with pytest.raises(ValueError):
        registry.register(metrics.Gauge('x_total', 'x'))


def test_a_histogram_has_cumulative_buckets_ending_in_inf_with_sum_and_count():
    registry = metrics.Registry()
    h = registry.register(metrics.Histogram('demo_seconds', 'd', ('stage',),
                                            buckets=(0.1, 1.0)))
    for value in (0.05, 0.5, 0.5, 7.0):
        h.observe(value, stage='s')
    text = registry.render()
    family = parse(text)['demo_seconds']
    assert family.type == 'histogram'
    buckets = {s.labels['le']: s.value for s in family.samples if s.name.endswith('_bucket')}
    assert buckets == {'0.1': 1.0, '1.0': 3.0, '+Inf': 4.0}
    assert sample_value(text, 'demo_seconds_count', stage='s') == 4
    assert sample_value(text, 'demo_seconds_sum', stage='s') == pytest.approx(8.05)


def test_a_gauge_is_read_at_scrape_time_and_a_failing_source_reads_nan():
    registry = metrics.Registry()
    g = registry.register(metrics.Gauge('demo_size', 'd'))
    assert sample_value(registry.render(), 'demo_size') is None   # no source: no sample
    size = [3]
    g.set_function(lambda: size[0])
    size[0] = 5
    assert sample_value(registry.render(), 'demo_size') == 5
    g.set_function(lambda: 1 / 0)
    assert math.isnan(sample_value(registry.render(), 'demo_size'))


def test_the_service_registry_declares_every_metric_and_renders_valid_text():
    text = metrics.REGISTRY.render()
    names = set(parse(text))
    assert {'scheduler_select_destinations', 'scheduler_select_destinations_seconds',
            'scheduler_stage_seconds', 'scheduler_claim_conflicts',
            'scheduler_placement_errors', 'scheduler_allocation_candidates',
            'scheduler_catalog_hosts', 'scheduler_catalog_aggregates',
            'scheduler_catalog_instances', 'scheduler_pending_cleanups'} <= names


def test_a_novalidhost_is_counted_against_the_last_stage_the_request_entered():
    before = metrics.REQUESTS.value(outcome='novalidhost', stage='filtering')
    filtering_before = metrics.STAGE_LATENCY.count(stage='filtering')
    with pytest.raises(exc.NoValidHost):
        with metrics.request():
            with metrics.stage('placement_query'):
                pass
            with metrics.stage('filtering'):
                pass
            raise exc.NoValidHost(reason='none left')
    assert metrics.REQUESTS.value(outcome='novalidhost', stage='filtering') == before + 1
    assert metrics.STAGE_LATENCY.count(stage='filtering') == filtering_before + 1


@pytest.mark.parametrize('error,outcome', [
    (None, 'selected'),
    (exc.InvalidInput(reason='bad'), 'invalid_input'),
    (RuntimeError('bug'), 'error'),
])
def test_each_request_outcome_is_counted_and_timed(error, outcome):
    before = metrics.REQUESTS.value(outcome=outcome, stage='')
    timed = metrics.REQUEST_LATENCY.count()
    try:
        with metrics.request():
            if error is not None:
                raise error
    except Exception as e:
        assert e is error
    assert metrics.REQUESTS.value(outcome=outcome, stage='') == before + 1
    assert metrics.REQUEST_LATENCY.count() == timed + 1


def test_a_stage_decorator_times_each_call_even_when_it_raises():
    @metrics.stage('claim')
    def claim(fail: bool) -> str:
        if fail:
            raise ValueError('conflict')
        return 'ok'

    before = metrics.STAGE_LATENCY.count(stage='claim')
    assert claim(False) == 'ok'
    with pytest.raises(ValueError):
        claim(True)
    assert metrics.STAGE_LATENCY.count(stage='claim') == before + 2
    assert metrics.last_stage() == 'claim'


def test_an_unknown_stage_name_is_a_programming_error():
    with pytest.raises(ValueError):
        metrics.stage('filtring')


def _placement_errors() -> float:
    family = parse(metrics.REGISTRY.render())['scheduler_placement_errors']
    return sum(s.value for s in family.samples)


def test_a_failed_placement_call_is_counted_under_its_kind():
    # The client tells the kind (tests/unit/test_placement_client.py); the service
    # hands it this counter.
    before, total = metrics.PLACEMENT_ERRORS.value(kind='conflict'), _placement_errors()

    metrics.count_placement_error('conflict')

    assert metrics.PLACEMENT_ERRORS.value(kind='conflict') == before + 1
    assert _placement_errors() == total + 1


@pytest.mark.parametrize('value,expected', [('127.0.0.1:9180', ('127.0.0.1', 9180)),
                                            ('[::1]:0', ('::1', 0)),
                                            ('metrics.example:80', ('metrics.example', 80))])
def test_metrics_listen_is_host_and_port(value, expected):
    assert parse_listen(value) == expected


@pytest.mark.parametrize('value', ['9180', ':9180', 'host:', 'host:99999', 'host:http'])
def test_a_malformed_metrics_listen_is_a_configuration_error(value):
    with pytest.raises(ConfigurationError):
        parse_listen(value)


def test_each_worker_listens_on_the_port_plus_its_index_and_port_zero_stays_free():
    assert [worker_port(9180, i) for i in range(3)] == [9180, 9181, 9182]
    assert worker_port(0, 5) == 0
    with pytest.raises(ConfigurationError):
        worker_port(65535, 1)


def test_the_server_answers_metrics_and_404_for_anything_else():
    registry = metrics.Registry()
    registry.register(metrics.Counter('demo_total', 'd')).inc()
    server = MetricsServer('127.0.0.1', 0, registry)
    server.start()
    try:
        with urllib.request.urlopen(f'http://127.0.0.1:{server.port}/metrics',
                                    timeout=5) as reply:
            assert reply.headers['Content-Type'] == metrics.CONTENT_TYPE
            assert sample_value(reply.read().decode(), 'demo_total') == 1
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f'http://127.0.0.1:{server.port}/other', timeout=5)
        assert err.value.code == 404
    finally:
        server.stop()


def test_a_port_in_use_is_a_configuration_error():
    server = MetricsServer('127.0.0.1', 0, metrics.Registry())
    try:
        with pytest.raises(ConfigurationError):
            MetricsServer('127.0.0.1', server.port, metrics.Registry())
    finally:
        server.stop()


def test_counting_is_thread_safe():
    c = metrics.Counter('t_total', 't')

    def work():
        for _ in range(1000):
            c.inc()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.value() == 4000
