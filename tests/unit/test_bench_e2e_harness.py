"""The end-to-end benchmark's own parts that need no peers: reading Placement's
access log, percentiles, py-spy sample summaries, the stub Placement, and the
service configuration it writes."""
from __future__ import annotations

import json
import pathlib

import requests

from bench import deploy, profiling
from bench.stub_placement import StubPlacement

RID = 'req-4600c131-f797-4d86-80b5-96c6c4c40ab7'
CONSUMER = 'c30dc7c3-faf0-4e4a-bbf6-f2e0fd1e7d5c'


def test_access_log_lines_become_calls_with_server_time_and_request_id(tmp_path):
    log = tmp_path / 'access.log'
    log.write_text(
        f'GET /allocation_candidates 200 70811 {RID} limit=1000&resources=VCPU%3A2\n'
        f'PUT /allocations/{CONSUMER} 204 51493 {RID} \n'
        'GET / 200 2782 - \n')
    reader = deploy.AccessLog(log)
    reader.offset = 0

    calls = reader.read_new()

    assert [(c.kind, c.status, c.request_id) for c in calls] == [
        ('GET a_c', 200, RID), ('PUT alloc', 204, RID), ('other', 200, '-')]
    assert calls[0].seconds == 0.070811
    assert calls[0].query == 'limit=1000&resources=VCPU%3A2'


def test_access_log_keeps_a_half_written_line_for_the_next_read(tmp_path):
    log = tmp_path / 'access.log'
    log.write_text('GET / 200 2782 - \nPUT /allocations/')
    reader = deploy.AccessLog(log)
    reader.offset = 0
    assert len(reader.read_new()) == 1

    with log.open('a') as f:
        f.write(f'{CONSUMER} 204 51493 {RID} \n')

    assert [c.path for c in reader.read_new()] == [f'/allocations/{CONSUMER}']


def test_access_log_starts_at_the_end_of_what_is_already_there(tmp_path):
    log = tmp_path / 'access.log'
    log.write_text('GET / 200 2782 - \n')
    assert deploy.AccessLog(log).read_new() == []


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert deploy.percentile(values, 50) == 50.0
    assert deploy.percentile(values, 99) == 99.0
    assert deploy.percentile([3.0, 1.0, 2.0], 99) == 3.0


def test_hotspots_count_only_stacks_inside_a_request(tmp_path):
    raw = tmp_path / 'samples.txt'
    request = 'run (threading.py:1);select_destinations (/work/main/scheduler/manager.py:90)'
    raw.write_text(
        f'{request};raw_decode (/usr/lib/python3.11/json/decoder.py:353) 3\n'
        f'{request};weigh_hosts (/work/main/scheduler/weights/base.py:10) 1\n'
        'run (threading.py:1);heartbeat (/x/site-packages/kombu/c.py:5) 50\n')

    spots = profiling.hotspots(str(raw))

    assert spots['self'] == [('raw_decode (json/decoder.py)', 0.75),
                             ('weigh_hosts (scheduler/weights/base.py)', 0.25)]
    assert ('select_destinations (scheduler/manager.py)', 1.0) in spots['inclusive']


def test_stub_placement_answers_like_placement_16_and_takes_every_claim():
    body = json.dumps({'allocation_requests': [], 'provider_summaries': {}}).encode()
    stub = StubPlacement(body).start()
    try:
        root = requests.get(stub.url + '/', timeout=5).json()
        candidates = requests.get(stub.url + '/allocation_candidates?limit=5', timeout=5)
        claim = requests.put(f'{stub.url}/allocations/{CONSUMER}',
                             json={'allocations': {}}, timeout=5)
        unknown = requests.get(stub.url + '/traits', timeout=5)
    finally:
        stub.stop()

    assert root['versions'][0]['max_version'] == '1.39'
    assert candidates.content == body
    assert claim.status_code == 204
    assert stub.claims == 1
    assert unknown.status_code == 404


def test_service_config_has_the_runs_own_exchange_and_topic(tmp_path):
    path = deploy.write_service_config(
        tmp_path / 's.conf', placement_url='http://127.0.0.1:1', transport_url='fake://',
        topic='bench-t', exchange='bench-x', host='bench-h', workers=2,
        hosts_file=pathlib.Path('/h.json'), metrics_port=9999)

    text = path.read_text()

    for line in ('control_exchange = bench-x', 'rpc_topic = bench-t', 'workers = 2',
                 'hosts_file = /h.json', 'metrics_listen = 127.0.0.1:9999',
                 f'service_down_time = {deploy.SERVICE_DOWN_TIME}'):
        assert line in text
