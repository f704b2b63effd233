"""The benchmark's shortcut writes what Placement's own API writes.

bench/seed_sql.py puts the synthetic cloud straight into Placement's tables
(50,000 providers through the API would take most of an hour). Everything the
benchmark then measures goes through Placement, so the shortcut must leave a
Placement that answers exactly as one seeded through its API: the same
providers, trees, generations, inventories, traits and usages, and the same
allocation candidates.
"""
from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator

import requests

from bench import deploy
from bench.seed_sql import seed_cloud_sql
from bench.synthetic import SyntheticCloud, make_cloud
from tests.fixtures.postgres_placement import (
    PostgresPlacement,
    ServiceMissing,
    _drop_database,
    require_or_skip,
    start_postgres_placement,
)

HOSTS = 40
HEADERS = {**deploy.HEADERS, 'OpenStack-API-Version': 'placement 1.36'}


@contextlib.contextmanager
def placement(workdir: pathlib.Path) -> Iterator[PostgresPlacement]:
    workdir.mkdir()
    try:
        server, connection = start_postgres_placement(workdir, workers=1,
                                                      database_prefix='placement_seed')
    except ServiceMissing as e:
        require_or_skip(str(e))
    try:
        yield server
    finally:
        server.stop()
        _drop_database(connection, server.database)
        connection.close()


def get(server: PostgresPlacement, path: str) -> dict:
    response = requests.get(f'{server.url}{path}', headers=HEADERS, timeout=30)
    response.raise_for_status()
    return response.json()


def what_placement_says(server: PostgresPlacement) -> dict:
    providers = get(server, '/resource_providers')['resource_providers']
    state = {}
    for p in providers:
        rp = p['uuid']
        state[rp] = (p['name'], p['generation'], p['parent_provider_uuid'],
                     p['root_provider_uuid'],
                     get(server, f'/resource_providers/{rp}/inventories')['inventories'],
                     sorted(get(server, f'/resource_providers/{rp}/traits')['traits']),
                     get(server, f'/resource_providers/{rp}/usages')['usages'])
    return state


def candidates(server: PostgresPlacement, query: str) -> tuple[list, dict]:
    body = get(server, f'/allocation_candidates?{query}')
    # Placement lists a provider's traits in no particular order.
    return (sorted(str(sorted(r['allocations'].items())) for r in body['allocation_requests']),
            {rp: {**summary, 'traits': sorted(summary['traits'])}
             for rp, summary in body['provider_summaries'].items()})


@contextlib.contextmanager
def seeded_both_ways(tmp_path: pathlib.Path, cloud: SyntheticCloud
                     ) -> Iterator[tuple[PostgresPlacement, PostgresPlacement]]:
    """(through the API, straight into the tables), ``cloud`` seeded into each and found
    the same: usage consumers, providers, trees, generations, inventories, traits, usages."""
    with placement(tmp_path / 'api') as through_api, placement(tmp_path / 'sql') as direct:
        consumers_api = deploy.seed_cloud(through_api.url, cloud)
        connection = deploy.connect(direct)
        try:
            consumers_sql = seed_cloud_sql(connection, cloud)
        finally:
            connection.close()

        assert consumers_sql == consumers_api
        assert what_placement_says(direct) == what_placement_says(through_api)
        yield through_api, direct


def test_the_cloud_written_into_the_tables_is_the_cloud_written_through_the_api(tmp_path):
    cloud = make_cloud(HOSTS, fill_mean=0.7)
    with seeded_both_ways(tmp_path, cloud) as (through_api, direct):
        # No forbidden trait: Placement 16 on PostgreSQL answers one with HTTP 500 once
        # any provider has a parent (tests/functional/test_provider_view.py says more).
        for query in ('resources=VCPU:2,MEMORY_MB:4096,DISK_GB:40',
                      'resources=VCPU:1,MEMORY_MB:2048,DISK_GB:20&required=HW_CPU_X86_AVX2',
                      'resources=VCPU:1,MEMORY_MB:512,DISK_GB:1&required=COMPUTE_STATUS_DISABLED',
                      'resources=VCPU:1,VGPU:1'):
            assert candidates(direct, query) == candidates(through_api, query), query
        # A claim and its generation move the same way on both.
        rp = cloud.hosts[0].root.uuid
        for server in (through_api, direct):
            put = requests.put(f'{server.url}/allocations/5f0c9a52-8d8c-4d8e-9a57-0e33a3c1a001',
                               headers=HEADERS, timeout=30,
                               json={'allocations': {rp: {'resources': {'VCPU': 1}}},
                                     'project_id': deploy.PROJECT_ID,
                                     'user_id': deploy.USER_ID, 'consumer_generation': None})
            assert put.status_code == 204, put.text
        assert what_placement_says(direct)[rp] == what_placement_says(through_api)[rp]


def test_a_cloud_with_nested_trees_written_into_the_tables_is_the_one_the_api_writes(tmp_path):
    """NUMA nodes, PCI devices (a custom resource class) and pGPUs under their roots, and
    the usage on them: what the API accepts (a usage consumer's allocations span roots
    and children) is what the shortcut writes."""
    # A seed whose 40 hosts hold every kind of tree (and pGPUs of the 8Q type).
    cloud = make_cloud(HOSTS, fill_mean=0.7, nested=True, seed=2)
    children = {rc for h in cloud.hosts for c in h.children for rc in c.inventory}
    assert {'PCPU', 'MEMORY_MB', 'VGPU', 'CUSTOM_PCI_10DE_2236'} <= children, children
    assert any(c.inventory[rc][3] for h in cloud.hosts for c in h.children for rc in c.inventory)
    with seeded_both_ways(tmp_path, cloud) as (through_api, direct):
        for query in ('resources=DISK_GB:20&resources1=PCPU:2,MEMORY_MB:4096'
                      '&required1=HW_NUMA_ROOT',
                      'resources=VCPU:2,MEMORY_MB:4096,DISK_GB:40&resources1=VGPU:1'
                      '&required1=CUSTOM_NVIDIA_A10_8Q',
                      'resources=VCPU:2,MEMORY_MB:4096,DISK_GB:40'
                      '&resources1=CUSTOM_PCI_10DE_2236:1',
                      'resources=VCPU:1,MEMORY_MB:2048,DISK_GB:20'):
            answer = candidates(direct, query)
            assert answer == candidates(through_api, query), query
            assert answer[0], query
