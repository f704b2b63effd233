"""Small, explicit clouds for functional tests, built in the real Placement.

The specs, ids and the select_destinations call they meet are in tests/builders.py.
"""
from __future__ import annotations

import uuid

from scheduler.simulate import seed


def add_host(client, name: str, *, vcpus: int = 8, ram_mb: int = 16384, disk_gb: int = 100,
             traits=(), aggregates=()) -> str:
    """A compute node provider named like its host; ratios 1.0 so numbers read plainly."""
    return seed.create_provider(
        client, name=name, uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
        inventories={'VCPU': {'total': vcpus, 'allocation_ratio': 1.0},
                     'MEMORY_MB': {'total': ram_mb, 'allocation_ratio': 1.0},
                     'DISK_GB': {'total': disk_gb, 'allocation_ratio': 1.0}},
        traits=traits, aggregates=aggregates)


def consumers_with_allocations(client, provider_uuids) -> dict[str, dict]:
    """consumer -> {provider: resources}, read back from Placement."""
    found: dict[str, dict] = {}
    for rp in provider_uuids:
        body = client.request('GET', f'/resource_providers/{rp}/allocations',
                              microversion='1.36').json()
        for consumer, entry in body['allocations'].items():
            found.setdefault(consumer, {})[rp] = entry['resources']
    return found
