"""A synthetic cloud written straight into Placement's PostgreSQL tables.

Through Placement's API a provider costs three requests (create, inventories,
traits): 10,000 providers took 8.5 minutes here, 50,000 would take most of an
hour, longer than everything the benchmark measures. This writes the rows those
requests and the usage's ``POST /allocations`` write (custom resource classes,
providers with their root and parent, inventories, traits, projects, users,
consumers, allocations) in a few bulk statements, for the benchmarks only: what
they then measure (queries, claims, reads) goes through Placement as usual.

``bench.deploy.seed_cloud`` is the API's way of writing the same cloud;
``tests/functional/test_bench_seed.py`` holds Placement's answers after either
to be the same.
"""
from __future__ import annotations

import datetime
from typing import Any

from bench.deploy import PROJECT_ID, USER_ID, usage_batches
from bench.synthetic import SyntheticCloud

DISABLED_TRAIT = 'COMPUTE_STATUS_DISABLED'
#: The generation a provider has after the API's three requests (create: 0,
#: inventories: 1, traits: 2); usage claims then add one each.
SEEDED_GENERATION = 2
#: Placement's first id for a custom resource class (ResourceClass.MIN_CUSTOM_RESOURCE_CLASS_ID).
CUSTOM_CLASS_ID = 10000


def seed_cloud_sql(connection: Any, cloud: SyntheticCloud, *,
                   providers_per_consumer: int = 50) -> int:
    """Write ``cloud`` into the Placement database behind ``connection`` (psycopg2,
    a schema Placement built and nothing seeded yet) in one transaction; the
    number of usage consumers, as ``bench.deploy.seed_cloud`` returns it."""
    from psycopg2.extras import execute_values

    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    batches = usage_batches(cloud, providers_per_consumer)
    with connection, connection.cursor() as cursor:
        cursor.execute('SELECT name, id FROM resource_classes')
        classes = dict(cursor.fetchall())
        # Custom classes (PCI in Placement's) as PUT /resource_classes/{name} makes them:
        # ids from CUSTOM_CLASS_ID up.
        custom = sorted({rc for h in cloud.hosts for p in h.providers for rc in p.inventory}
                        - set(classes))
        if custom:
            first = max([CUSTOM_CLASS_ID - 1, *classes.values()]) + 1
            execute_values(cursor, 'INSERT INTO resource_classes (created_at, id, name) VALUES %s',
                           [(now, first + i, rc) for i, rc in enumerate(custom)])
            classes.update({rc: first + i for i, rc in enumerate(custom)})
        names = sorted({t for h in cloud.hosts for p in h.providers for t in p.traits}
                       | {DISABLED_TRAIT})
        cursor.execute('SELECT name FROM traits')
        known = {r[0] for r in cursor.fetchall()}
        execute_values(cursor, 'INSERT INTO traits (created_at, name) VALUES %s',
                       [(now, t) for t in names if t not in known])
        cursor.execute('SELECT name, id FROM traits')
        traits = dict(cursor.fetchall())

        # Ids chosen here (the tables are empty), then the sequences moved past them.
        providers = [(h, p) for h in cloud.hosts for p in h.providers]
        id_of = {p.uuid: i for i, (_, p) in enumerate(providers, start=1)}
        execute_values(
            cursor, 'INSERT INTO resource_providers (created_at, id, uuid, name, generation, '
                    'root_provider_id, parent_provider_id) VALUES %s',
            [(now, id_of[p.uuid], p.uuid, p.name, SEEDED_GENERATION, id_of[p.root_uuid],
              id_of[p.parent_uuid] if p.parent_uuid else None) for _, p in providers],
            page_size=5000)
        execute_values(
            cursor, 'INSERT INTO inventories (created_at, resource_provider_id, '
                    'resource_class_id, total, reserved, min_unit, max_unit, step_size, '
                    'allocation_ratio) VALUES %s',
            [(now, id_of[p.uuid], classes[rc], total, reserved, 1, total, 1, ratio)
             for _, p in providers for rc, (total, reserved, ratio, _) in p.inventory.items()],
            page_size=5000)
        execute_values(
            cursor, 'INSERT INTO resource_provider_traits (created_at, trait_id, '
                    'resource_provider_id) VALUES %s',
            [(now, traits[t], id_of[p.uuid]) for h, p in providers
             for t in sorted({*p.traits, *((DISABLED_TRAIT,) if h.disabled and p is h.root
                                            else ())})],
            page_size=5000)

        cursor.execute('INSERT INTO projects (created_at, external_id) VALUES (%s, %s) '
                       'RETURNING id', (now, PROJECT_ID))
        project = cursor.fetchone()[0]
        cursor.execute('INSERT INTO users (created_at, external_id) VALUES (%s, %s) '
                       'RETURNING id', (now, USER_ID))
        user = cursor.fetchone()[0]
        cursor.execute("INSERT INTO consumer_types (created_at, name) VALUES (%s, 'INSTANCE') "
                       'RETURNING id', (now,))
        consumer_type = cursor.fetchone()[0]
        consumers = [(uuid, body) for batch in batches for uuid, body in batch.items()]
        # A consumer's generation after its one write; providers' generations count
        # the usage claims that touched them, as Placement's writes would have.
        execute_values(
            cursor, 'INSERT INTO consumers (created_at, uuid, project_id, user_id, generation, '
                    'consumer_type_id) VALUES %s',
            [(now, uuid, project, user, 1, consumer_type) for uuid, _ in consumers],
            page_size=5000)
        execute_values(
            cursor, 'INSERT INTO allocations (created_at, resource_provider_id, consumer_id, '
                    'resource_class_id, used) VALUES %s',
            [(now, id_of[rp], uuid, classes[rc], used) for uuid, body in consumers
             for rp, allocation in body['allocations'].items()
             for rc, used in allocation['resources'].items()],
            page_size=5000)
        touched: dict[int, int] = {}
        for batch in batches:
            for rp in {rp for body in batch.values() for rp in body['allocations']}:
                touched[id_of[rp]] = touched.get(id_of[rp], 0) + 1
        execute_values(
            cursor, 'UPDATE resource_providers AS p SET generation = p.generation + t.n '
                    'FROM (VALUES %s) AS t (id, n) WHERE p.id = t.id',
            list(touched.items()), page_size=5000)
        cursor.execute("SELECT setval('resource_providers_id_seq', %s)", (len(providers),))
    return len(consumers)
