"""``simulate --from-placement`` / ``--snapshot`` / ``--fill``: capacity answers on a copy.

The "real" Placement is a second, independent Placement in a child process
(one embedded Placement per process: its database is configured once), with
a small hand-made cloud whose remaining capacity is easy to work out. The
simulator snapshots it read-only, replays it into the in-process embedded
Placement and fills it with m1.large; the answer must match the arithmetic,
and the source must be exactly as it was.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from placement_client.client import MIN_MICROVERSION, PlacementClient
from scheduler.cmd.manage import main
from scheduler.simulate import seed, snapshot
from tests.fixtures.placement import make_placement_conf

PROJECT = 'a' * 32
USER = 'b' * 32
# m1.large: 4 VCPU, 8192 MEMORY_MB, 80 DISK_GB.
LARGE = {'VCPU': 4, 'MEMORY_MB': 8192, 'DISK_GB': 80}

_CHILD = textwrap.dedent('''
    import sys
    from scheduler.simulate.embedded_placement import EmbeddedPlacement
    placement = EmbeddedPlacement(db_dir=sys.argv[1]).start()
    print(placement.url, flush=True)
    sys.stdin.read()          # until the test closes our stdin
    placement.stop()
''')


@pytest.fixture
def source_placement(tmp_path) -> Iterator[str]:
    """URL of a Placement in a child process, stopped when the test ends."""
    child = subprocess.Popen([sys.executable, '-c', _CHILD, str(tmp_path)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = child.stdout.readline().strip()
        assert url.startswith('http://127.0.0.1:'), 'the source Placement did not start'
        yield url
    finally:
        child.stdin.close()
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _inv(total: int, *, ratio: float = 1.0, reserved: int = 0, max_unit: int | None = None):
    return {'total': total, 'reserved': reserved, 'allocation_ratio': ratio, 'min_unit': 1,
            'max_unit': max_unit or total, 'step_size': 1}


def _seed_source(client: PlacementClient) -> int:
    """A small cloud with usage; returns how many more m1.large fit, worked out by hand."""
    # host-a: 32 VCPU (8 x 4.0), 32 GiB, 400 GB; one instance holds 4/16384/80.
    #   free: 28 VCPU -> 7, 16384 MB -> 2, 320 GB -> 4: 2 fit.
    a = seed.create_provider(client, name='host-a', inventories={
        'VCPU': _inv(8, ratio=4.0), 'MEMORY_MB': _inv(32768), 'DISK_GB': _inv(400)},
        traits=['HW_CPU_X86_AVX2'], aggregates=['11111111-1111-4111-8111-111111111111'])
    seed.allocate(client, 'c0000000-0000-4000-8000-00000000000a',
                  {a: {'VCPU': 4, 'MEMORY_MB': 16384, 'DISK_GB': 80}}, PROJECT, USER)
    # host-b: VCPU max_unit 4, so its summed usage (8) breaks its own max_unit: the
    # replay must still carry it. free: 8 VCPU -> 2, 57344 MB -> 7, 160 GB -> 2: 2 fit.
    b = seed.create_provider(client, name='host-b', inventories={
        'VCPU': _inv(16, max_unit=4), 'MEMORY_MB': _inv(65536), 'DISK_GB': _inv(200)})
    for n in range(2):
        seed.allocate(client, f'c0000000-0000-4000-8000-00000000000{n}',
                      {b: {'VCPU': 4, 'MEMORY_MB': 4096, 'DISK_GB': 20}}, PROJECT, USER)
    # host-c: large but disabled: 0 fit.
    seed.create_provider(client, name='host-c', inventories={
        'VCPU': _inv(64), 'MEMORY_MB': _inv(262144), 'DISK_GB': _inv(4000)},
        traits=['COMPUTE_STATUS_DISABLED'])
    # host-d: a tree; the disk lives on a child. 8 VCPU -> 2, 16384 MB -> 2, 100 GB -> 1.
    d = seed.create_provider(client, name='host-d', inventories={
        'VCPU': _inv(8), 'MEMORY_MB': _inv(16384)})
    seed.create_provider(client, name='host-d-disk', parent_uuid=d,
                         inventories={'DISK_GB': _inv(100)})
    # host-e: its memory inventory shrank below its usage (Placement allows that): over
    # capacity before the simulation starts, and 0 fit.
    e = seed.create_provider(client, name='host-e', inventories={
        'VCPU': _inv(8), 'MEMORY_MB': _inv(32768), 'DISK_GB': _inv(400)})
    seed.allocate(client, 'c0000000-0000-4000-8000-00000000000e',
                  {e: {'VCPU': 2, 'MEMORY_MB': 16384, 'DISK_GB': 20}}, PROJECT, USER)
    seed.set_inventories(client, e, {'VCPU': _inv(8), 'MEMORY_MB': _inv(8192),
                                     'DISK_GB': _inv(400)})
    return 2 + 2 + 0 + 1 + 0


def _state(client: PlacementClient) -> dict[str, object]:
    """Everything a write would change: generations and every provider's allocations."""
    def get(url: str) -> dict:
        response = client.request('GET', url, microversion=MIN_MICROVERSION)
        assert response.status_code == 200, (url, response.text)
        return response.json()

    providers = get('/resource_providers')['resource_providers']
    return {p['name']: (p['generation'],
                        get(f'/resource_providers/{p["uuid"]}/allocations')['allocations'],
                        get(f'/resource_providers/{p["uuid"]}/usages')['usages'])
            for p in providers}


def _config(tmp_path, url: str) -> str:
    path = tmp_path / 'scheduler.conf'
    path.write_text(f'[placement]\nauth_type = admin_token\ntoken = admin\n'
                    f'endpoint = {url}\nendpoint_override = {url}\n')
    return str(path)


def test_fill_on_a_read_only_copy_of_a_placement_matches_the_arithmetic(
        placement, source_placement, tmp_path, capsys):
    source = PlacementClient.from_conf(make_placement_conf(source_placement))
    expected = _seed_source(source)
    before = _state(source)
    saved = tmp_path / 'snapshot.json'
    summary_path = tmp_path / 'summary.json'

    code = main(['simulate', '--from-placement', '--config-file', _config(tmp_path,
                                                                          source_placement),
                 '--fill', 'm1.large', '--save-snapshot', str(saved),
                 '--json', str(summary_path)])
    out, err = capsys.readouterr()

    assert code == 0, out + err
    assert _state(source) == before, 'the source Placement was written to'
    body = json.loads(summary_path.read_text())
    (fill,) = body['capacity']['entries']
    assert fill['placed_before_first_failure'] == expected
    assert fill['first_failure'].startswith('NoValidHost')
    assert fill['per_host'] == {'host-a': 2, 'host-b': 2, 'host-d': 1}
    assert f'fill m1.large: {expected} more fit' in out
    assert 'Utilisation chart' in out
    # Only the fill's instances count as consumers: the snapshot's usage is not an instance,
    # and a host that was over capacity in the source is not the simulation's problem.
    assert body['consumers_in_placement'] == expected
    assert body['problems'] == []
    assert body['utilisation']['over_capacity'] == []

    # The saved snapshot carries the tree and the usage, and replays to the same answer.
    snap = snapshot.load(str(saved))
    assert snap.provider('host-d-disk').parent_provider_uuid == snap.provider('host-d').uuid
    assert snap.provider('host-b').usages == {'VCPU': 8, 'MEMORY_MB': 8192, 'DISK_GB': 40}
    assert 'COMPUTE_STATUS_DISABLED' in snap.provider('host-c').traits
    assert snap.provider('host-e').usages['MEMORY_MB'] > snap.provider('host-e').capacity(
        'MEMORY_MB')

    code = main(['simulate', '--snapshot', str(saved), '--fill', 'm1.large',
                 '--json', str(summary_path)])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    again = json.loads(summary_path.read_text())['capacity']['entries'][0]
    assert again['placed_before_first_failure'] == expected
