"""Small, explicit clouds for functional tests, built in the real Placement.

The specs, ids and the select_destinations call they meet are in tests/builders.py.
"""
from __future__ import annotations

import datetime
import sqlite3
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


def bulk_hosts(placement, names, *, vcpus: int = 16, ram_mb: int = 32768,
               disk_gb: int = 1000) -> list[str]:
    """Compute node providers for ``names``, written straight into the embedded
    Placement's database; their uuids, in the order of ``names``.

    Placement has no bulk API: at three or four requests a provider, 5,000 hosts
    take minutes through it. The rows written are those its own API writes for
    add_host (a root provider with VCPU, MEMORY_MB and DISK_GB, ratios 1.0);
    everything after (queries, claims) goes through the API as usual.
    """
    now = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S')
    con = sqlite3.connect(placement.db_path, timeout=30)
    try:
        with con:
            classes = dict(con.execute("SELECT name, id FROM resource_classes WHERE name IN "
                                       "('VCPU', 'MEMORY_MB', 'DISK_GB')"))
            uuids = []
            for name in names:
                rp_uuid = str(uuid.uuid5(uuid.NAMESPACE_DNS, name))
                row = con.execute(
                    'INSERT INTO resource_providers (created_at, uuid, name, generation) '
                    'VALUES (?, ?, ?, 1)', (now, rp_uuid, name)).lastrowid
                con.execute('UPDATE resource_providers SET root_provider_id = ? WHERE id = ?',
                            (row, row))
                con.executemany(
                    'INSERT INTO inventories (created_at, resource_provider_id, '
                    'resource_class_id, total, reserved, min_unit, max_unit, step_size, '
                    'allocation_ratio) VALUES (?, ?, ?, ?, 0, 1, ?, 1, 1.0)',
                    [(now, row, classes[rc], total, total) for rc, total in
                     (('VCPU', vcpus), ('MEMORY_MB', ram_mb), ('DISK_GB', disk_gb))])
                uuids.append(rp_uuid)
    finally:
        con.close()
    return uuids
