"""``scheduler-manage simulate`` end to end: real Placement, real service, fake:// transport.

The summary is checked against Placement itself, read here independently of
the simulator's own read-back.
"""
from __future__ import annotations

import json

from placement_client.client import MIN_MICROVERSION, PlacementClient
from scheduler.cmd.manage import main
from scheduler.simulate.cloud import CloudSpec, generate_cloud

HOSTS = 20
REQUESTS = 30
SEED = 7


def _get(client: PlacementClient, url: str) -> dict:
    response = client.request('GET', url, microversion=MIN_MICROVERSION)
    assert response.status_code == 200, (url, response.status_code, response.text)
    return response.json()


def _placement_state(client: PlacementClient) -> dict[str, dict]:
    """name -> {'capacity': {rc: n}, 'used': {rc: n}, 'consumers': set}"""
    state = {}
    for rp in client.get_resource_providers():
        inventories = _get(client, f'/resource_providers/{rp.uuid}/inventories')['inventories']
        allocations = _get(client, f'/resource_providers/{rp.uuid}/allocations')['allocations']
        used: dict[str, int] = {}
        for consumer in allocations.values():
            for rc, amount in consumer['resources'].items():
                used[rc] = used.get(rc, 0) + amount
        state[rp.name] = {
            'capacity': {rc: int((i['total'] - i['reserved']) * i['allocation_ratio'])
                         for rc, i in inventories.items()},
            'used': used,
            'consumers': set(allocations),
        }
    return state


def test_simulate_summary_agrees_with_placement(placement, placement_client, tmp_path, capsys):
    json_path = tmp_path / 'summary.json'

    code = main(['simulate', '--hosts', str(HOSTS), '--requests', str(REQUESTS),
                 '--seed', str(SEED), '--concurrency', '3', '--json', str(json_path)])
    out, err = capsys.readouterr()

    assert code == 0, out + err
    summary = json.loads(json_path.read_text())
    state = _placement_state(placement_client)

    # The cloud was seeded as defined, and nothing else is in Placement.
    cloud = generate_cloud(CloudSpec(hosts=HOSTS, seed=SEED))
    assert set(state) == {h.name for h in cloud.hosts}

    # Every request was answered; every placed instance is exactly one consumer.
    assert summary['requests'] == REQUESTS
    assert summary['requests_placed'] + summary['requests_failed'] == REQUESTS
    assert summary['errors'] == {}
    assert summary['instances_placed'] > 0
    consumers = set().union(*(s['consumers'] for s in state.values()))
    assert len(consumers) == summary['instances_placed']
    assert summary['consumers_in_placement'] == summary['instances_placed']
    assert summary['instances_placed'] <= summary['instances_requested']

    # No provider over capacity; disabled hosts got nothing.
    for name, s in state.items():
        for rc, used in s['used'].items():
            assert used <= s['capacity'][rc], (name, rc, used, s['capacity'][rc])
    for host in cloud.hosts:
        if host.disabled:
            assert not state[host.name]['consumers'], host.name

    # The summary's usage totals are Placement's.
    for rc, totals in summary['utilisation']['totals'].items():
        assert totals['used'] == sum(s['used'].get(rc, 0) for s in state.values()), rc
        assert totals['capacity'] == sum(s['capacity'].get(rc, 0) for s in state.values()), rc
    assert summary['problems'] == []

    # What the operator sees: progress lines on stderr, the summary on stdout.
    assert f'{REQUESTS}/{REQUESTS} requests (100%)' in err
    assert f'Requests:  {summary["requests_placed"]}/{REQUESTS} placed' in out
    assert 'Consistency: ok' in out


def test_simulate_runs_again_in_the_same_process_from_a_clean_placement(placement,
                                                                        placement_client,
                                                                        tmp_path, capsys):
    first, second = tmp_path / 'first.json', tmp_path / 'second.json'
    args = ['simulate', '--hosts', '5', '--requests', '6', '--seed', '3', '--concurrency', '1']

    assert main([*args, '--json', str(first)]) == 0
    assert main([*args, '--json', str(second)]) == 0
    capsys.readouterr()

    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    # The second run did not see the first one's instances or providers.
    assert b['consumers_in_placement'] == b['instances_placed']
    assert b['utilisation']['hosts'] == 5
    consumers = set().union(*(s['consumers'] for s in _placement_state(placement_client)
                              .values()))
    assert len(consumers) == b['instances_placed']
    # One client thread and the same seed: the same decisions.
    assert (a['instances_placed'], a['utilisation']['totals']) == \
        (b['instances_placed'], b['utilisation']['totals'])
