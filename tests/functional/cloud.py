"""Small, explicit clouds for functional tests, built in the real Placement."""
from __future__ import annotations

import uuid

from scheduler.objects.spec import Flavor, ImageMeta, InstanceGroup, RequestSpec
from scheduler.simulate import seed

PROJECT = 'a4f1c0de5b6e4a8fa1b2c3d4e5f60718'
USER = '9e2b7d04c1a34f6b8d5e0f1a2b3c4d5e'
CONTEXT = {'request_id': 'req-functional', 'user_id': USER, 'project_id': PROJECT,
           'auth_token': 'gAAAAA-functional-test-token', 'roles': ['member']}


def add_host(client, name: str, *, vcpus: int = 8, ram_mb: int = 16384, disk_gb: int = 100,
             traits=(), aggregates=()) -> str:
    """A compute node provider named like its host; ratios 1.0 so numbers read plainly."""
    return seed.create_provider(
        client, name=name, uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
        inventories={'VCPU': {'total': vcpus, 'allocation_ratio': 1.0},
                     'MEMORY_MB': {'total': ram_mb, 'allocation_ratio': 1.0},
                     'DISK_GB': {'total': disk_gb, 'allocation_ratio': 1.0}},
        traits=traits, aggregates=aggregates)


def boot_spec(*, vcpus: int = 1, ram_mb: int = 1024, disk_gb: int = 10, extra_specs=None,
              group_policy: str | None = None, group_members=(), num_instances: int = 1,
              **fields) -> RequestSpec:
    spec = RequestSpec(
        flavor=Flavor(id=1, flavorid='f1', name=f'test.{vcpus}-{ram_mb}', vcpus=vcpus,
                      memory_mb=ram_mb, root_gb=disk_gb, extra_specs=dict(extra_specs or {})),
        image=ImageMeta(id=str(uuid.uuid4()), name='cirros', disk_format='qcow2',
                        container_format='bare'),
        project_id=PROJECT, user_id=USER, num_instances=num_instances, **fields)
    if group_policy:
        group_uuid = str(uuid.uuid4())
        spec.instance_group = InstanceGroup(uuid=group_uuid, policy=group_policy,
                                            policies=[group_policy], members=list(group_members))
        spec.scheduler_hints['group'] = [group_uuid]
    return spec


def new_uuids(n: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(n)]


def consumers_with_allocations(client, provider_uuids) -> dict[str, dict]:
    """consumer -> {provider: resources}, read back from Placement."""
    found: dict[str, dict] = {}
    for rp in provider_uuids:
        body = client.request('GET', f'/resource_providers/{rp}/allocations',
                              microversion='1.36').json()
        for consumer, entry in body['allocations'].items():
            found.setdefault(consumer, {})[rp] = entry['resources']
    return found
