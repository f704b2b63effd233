"""bench.host_data's stand-in compute API shows the heartbeats a real one would:
between two reads of ``GET /os-services`` every live service's ``updated_at``
moves in its turn, a down service's never does, and nothing else changes."""
from __future__ import annotations

import json
import time

from bench.host_data import PreSerialisedNova
from tests.fixtures import nova_api_samples as samples

HEADERS = {'X-Auth-Token': 'token', 'OpenStack-API-Version': 'compute 2.87'}
PATH = '/p-nova/v2.1/os-services?binary=nova-compute'


def _read(nova):
    status, data = nova.answer_bytes(PATH, HEADERS)
    assert status == 200
    return json.loads(data)['services']


def test_live_services_report_in_turn_and_down_ones_stay_silent():
    nova = PreSerialisedNova(token='token')
    nova.services = [samples.compute_service(f'compute{i}', up=i % 3 != 0,
                                             updated_at='2026-11-27T12:00:00.000000')
                     for i in range(6)]
    before = json.loads(json.dumps(nova.services))
    nova.report(interval=0.2, ticks=2)
    try:
        assert _read(nova) == before
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            after = _read(nova)
            if all(a['updated_at'] != b['updated_at'] for a, b in zip(after, before, strict=True)
                   if b['state'] == 'up'):
                break
            time.sleep(0.05)
        else:
            raise AssertionError('the live services sent no heartbeat in 30 s')
    finally:
        nova.stop()
    for was, now in zip(before, after, strict=True):
        if was['state'] == 'down':
            assert now == was
        else:
            assert {**now, 'updated_at': None} == {**was, 'updated_at': None}


def test_the_answer_is_the_services_serialised_whole_and_joined_only_when_read():
    nova = PreSerialisedNova(token='token')
    nova.services = [samples.compute_service(f'compute{i}', up=i % 3 != 0,
                                             reason='a "quoted" reason' if i == 4 else None,
                                             updated_at='2026-11-27T12:00:00.000000')
                     for i in range(6)]
    nova.report(interval=0.2, ticks=2)
    try:
        deadline = time.monotonic() + 30
        while all(s['updated_at'].startswith('2026-11-27') for s in nova.services):
            assert time.monotonic() < deadline, 'no heartbeat in 30 s'
            time.sleep(0.05)
        # Heartbeats since the start, no read: nothing joined since report's own.
        assert nova.services_joined == 1
        status, data = nova.answer_bytes(PATH, HEADERS)
        assert nova.services_joined == 2
    finally:
        nova.stop()
    assert status == 200
    whole = json.loads(data)['services']
    assert data == json.dumps({'services': whole}).encode()
    assert any(not s['updated_at'].startswith('2026-11-27') for s in whole)
