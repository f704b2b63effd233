"""Nova objects built the way nova-api and nova-conductor build them."""
from __future__ import annotations

import uuid

from nova import context as nova_context
from nova import objects

#: The cell the service's [scheduler] default_cell_uuid names.
SERVICE_CELL = '00000000-0000-0000-0000-0000000000c1'
#: The project and user that ask for instances (Nova's ids are 32 hex digits).
PROJECT = 'a4f1c0de5b6e4a8fa1b2c3d4e5f60718'
USER = '9e2b7d04c1a34f6b8d5e0f1a2b3c4d5e'


def new_uuids(n: int) -> list[str]:
    """Fresh consumers: none that another test of the session's Placement used."""
    return [str(uuid.uuid4()) for _ in range(n)]


def user_context() -> nova_context.RequestContext:
    """A member's context, as nova-api hands it to the conductor."""
    return nova_context.RequestContext(user_id=USER, project_id=PROJECT, roles=['member'],
                                       auth_token='gAAAAA-interop-token',
                                       request_id=f'req-{uuid.uuid4()}')


def admin_context() -> nova_context.RequestContext:
    return nova_context.get_admin_context()


def flavor(*, vcpus: int = 1, ram_mb: int = 1024, disk_gb: int = 10, extra_specs=None,
           flavor_id: int = 1) -> objects.Flavor:
    return objects.Flavor(id=flavor_id, flavorid=f'f{flavor_id}',
                          name=f'interop.{vcpus}-{ram_mb}', vcpus=vcpus, memory_mb=ram_mb,
                          root_gb=disk_gb, ephemeral_gb=0, swap=0, rxtx_factor=1.0,
                          vcpu_weight=0, disabled=False, is_public=True,
                          extra_specs=dict(extra_specs or {}), description=None)


def image() -> objects.ImageMeta:
    return objects.ImageMeta.from_dict({
        'id': str(uuid.uuid4()), 'name': 'cirros', 'disk_format': 'qcow2',
        'container_format': 'bare', 'min_ram': 0, 'min_disk': 0, 'size': 21430272,
        'status': 'active', 'properties': {'hw_architecture': 'x86_64'}})


def boot_request_spec(ctxt, *, instance_uuid: str, num_instances: int = 1,
                      filter_properties=None, instance_group=None, availability_zone=None,
                      **flavor_kw) -> objects.RequestSpec:
    """nova-api's ``_provision_instances``: ``RequestSpec.from_components`` + boot fields."""
    spec = objects.RequestSpec.from_components(
        ctxt, instance_uuid, image(), flavor(**flavor_kw), None, None,
        dict(filter_properties or {}), instance_group, availability_zone,
        project_id=PROJECT, user_id=USER, port_resource_requests=None,
        request_level_params=objects.RequestLevelParams())
    spec.is_bfv = False
    spec.num_instances = num_instances
    return spec


#: A CellMapping as the conductor loads it from the API database: with the
#: cell's credentials, which travel in the RequestSpec and must never be logged.
CELL_SECRET = 'cell1-secret-pw'


def same_cell_destination() -> objects.Destination:
    """What the conductor pins a move to: the instance's own cell."""
    cell = objects.CellMapping(
        id=2, uuid=SERVICE_CELL, name='cell1', disabled=False,
        transport_url=f'rabbit://nova:{CELL_SECRET}@rabbit.example:5672/',
        database_connection=f'mysql+pymysql://nova:{CELL_SECRET}@db.example/nova_cell1')
    return objects.Destination(cell=cell)


def anti_affinity_group(members: list[str]) -> objects.InstanceGroup:
    """The group as ``scheduler_utils.setup_instance_group`` leaves it for a boot."""
    return objects.InstanceGroup(uuid=str(uuid.uuid4()), name='spread', policy='anti-affinity',
                                 rules={}, members=list(members), hosts=[],
                                 project_id=PROJECT, user_id=USER)


def instance(uuid_: str, host: str) -> objects.Instance:
    """An Instance as nova-compute has it when it casts its instance info."""
    return objects.Instance(uuid=uuid_, host=host, node=host, project_id=PROJECT, user_id=USER,
                            vm_state='active', task_state=None, power_state=1,
                            availability_zone='nova', display_name=f'vm-{uuid_[:8]}',
                            flavor=flavor())
