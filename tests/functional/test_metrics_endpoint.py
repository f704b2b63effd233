"""The metrics endpoint of a running service moves with the calls it answers."""
from __future__ import annotations

import os
import signal
import socket
import urllib.error
import urllib.request
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from scheduler import exceptions as exc
from tests.builders import boot_spec, new_uuids, select
from tests.fixtures.processes import ServiceProcess, wait_for, write_config
from tests.fixtures.service import RABBIT_URL, REQUIRE_RABBIT, rabbit_answers
from tests.functional.cloud import add_host


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics', timeout=10) as reply:
        text = reply.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_a_scrape_shows_the_requests_stages_and_catalog_of_the_worker(
        start_scheduler, placement_client):
    for i in range(2):
        add_host(placement_client, f'cn{i}', vcpus=4)
    running = start_scheduler(**{'scheduler.metrics_listen': '127.0.0.1:0'})
    port = running.service.metrics.port
    before = scrape(port)

    select(running, boot_spec(vcpus=2), new_uuids(1))
    with pytest.raises(exc.NoValidHost):
        select(running, boot_spec(vcpus=64), new_uuids(1))

    after = scrape(port)
    requests = 'scheduler_select_destinations_total'
    assert value(after, requests, outcome='selected', stage='') - \
        value(before, requests, outcome='selected', stage='') == 1
    # Placement has no candidate for 64 VCPUs: the request ended at the query.
    assert value(after, requests, outcome='novalidhost', stage='placement_query') - \
        value(before, requests, outcome='novalidhost', stage='placement_query') == 1
    assert value(after, 'scheduler_select_destinations_seconds_count') - \
        value(before, 'scheduler_select_destinations_seconds_count') == 2
    for stage, calls in (('placement_query', 2), ('filtering', 1), ('weighing', 1),
                         ('claim', 1)):
        assert value(after, 'scheduler_stage_seconds_count', stage=stage) - \
            value(before, 'scheduler_stage_seconds_count', stage=stage) >= calls, stage
    assert value(after, 'scheduler_allocation_candidates_count') - \
        value(before, 'scheduler_allocation_candidates_count') == 2
    assert value(after, 'scheduler_pending_cleanups') == 0
    # No hosts file and no compute API sync in this test: present, and zero.
    assert after[('scheduler_catalog_hosts', ())] == 0
    assert after[('scheduler_catalog_nova_hypervisors', ())] == 0
    assert after[('scheduler_catalog_instances', ())] == 0


def test_without_metrics_listen_no_endpoint_is_started(start_scheduler):
    assert start_scheduler().service.metrics is None


def two_free_ports() -> int:
    """A port p with p and p + 1 free right now."""
    for _ in range(20):
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            port = s.getsockname()[1]
        if port < 65535:
            try:
                with socket.socket() as s:
                    s.bind(('127.0.0.1', port + 1))
                return port
            except OSError:
                continue
    pytest.fail('no two consecutive free ports')


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics', timeout=2):
            return True
    except (urllib.error.URLError, OSError):
        return False


def test_each_worker_serves_metrics_on_port_plus_its_index_and_a_replacement_takes_it_over(
        tmp_path, placement):
    if not rabbit_answers():
        if REQUIRE_RABBIT:
            pytest.fail('RabbitMQ on 127.0.0.1:5672 does not answer (worker processes need it)')
        pytest.skip('RabbitMQ on 127.0.0.1:5672 does not answer')
    port = two_free_ports()
    config = write_config(tmp_path / 'scheduler.conf', placement_url=placement.url,
                          transport_url=RABBIT_URL, topic=f'metrics-{uuid.uuid4().hex[:8]}',
                          workers=2, filters='ComputeFilter',
                          extra=f'[scheduler]\nmetrics_listen = 127.0.0.1:{port}\n')
    process = ServiceProcess(config)
    try:
        wait_for(lambda: _answers(port) and _answers(port + 1), 'both workers\' metrics',
                 timeout=90)
        victim = sorted(process.workers())[0]
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: len(process.workers()) == 2 and victim not in process.workers(),
                 'a replacement worker')
        # The replacement listens where the dead worker did: both ports answer again.
        wait_for(lambda: _answers(port) and _answers(port + 1), 'both ports after the restart',
                 timeout=90)
        assert 'metrics on http://127.0.0.1:' in process.output()
    finally:
        process.stop()
