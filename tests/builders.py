"""Builders of test data, for unit and functional tests alike: ids, HostStates from
provider summaries, aggregates, RequestSpecs, configuration, and select_destinations
asked the way Nova's conductor asks it.

Keep them general (every argument optional but the name); a test that wants other
defaults wraps one of these in a named helper of its own.
"""
from __future__ import annotations

import atexit
import contextlib
import datetime
import shutil
import tempfile
import uuid as uuidlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

from placement_client.models import (
    AllocationRequest,
    Candidates,
    ProviderSummary,
    ResourceUsage,
)
from scheduler import conf as scheduler_conf
from scheduler.conf import filter_scheduler as filter_scheduler_group
from scheduler.conf import metrics as metrics_group
from scheduler.conf import pci as pci_group
from scheduler.conf import placement_database as placement_database_group
from scheduler.conf import scheduler as scheduler_group
from scheduler.conf import service as service_group
from scheduler.conf import workarounds as workarounds_group
from scheduler.context import RequestContext
from scheduler.host_state import HostData, HostRecord, HostState
from scheduler.host_table import HostTable
from scheduler.manager import SchedulerManager
from scheduler.objects.codec import encode_request_spec
from scheduler.objects.spec import (
    Aggregate,
    Flavor,
    ImageMeta,
    ImageMetaProps,
    InstanceGroup,
    RequestLevelParams,
    RequestSpec,
)
from scheduler.rpc.client import SchedulerClient

if TYPE_CHECKING:
    from scheduler.objects.spec import Destination, RequestGroup

# -- ids ---------------------------------------------------------------------------------------
#: The cell of the catalogs and managers tests build (``HostCatalog(default_cell_uuid=CELL)``).
CELL = '00000000-0000-4000-8000-0000000000c1'
#: A second cell, for requests that must not cross from one cell to another.
CELL2 = '00000000-0000-4000-8000-0000000000c2'
#: The cell ``make_host`` puts a host in unless told otherwise.
CELL_UUID = '00000000-0000-4000-8000-00000000ce11'
#: The ``[scheduler] default_cell_uuid`` of the service the functional and interop tests start.
SERVICE_CELL = '00000000-0000-0000-0000-0000000000c1'
#: The project and user that ask for instances (Nova's ids are 32 hex digits).
PROJECT = 'a4f1c0de5b6e4a8fa1b2c3d4e5f60718'
USER = '9e2b7d04c1a34f6b8d5e0f1a2b3c4d5e'
#: The request context Nova's conductor sends over RPC: PROJECT's USER, a member.
CONTEXT = {'request_id': 'req-functional', 'user_id': USER, 'project_id': PROJECT,
           'auth_token': 'gAAAAA-functional-test-token', 'roles': ['member']}
#: The token of REQUEST_CONTEXT: no log line, reason or error may ever show it.
TOKEN = 'gAAAAA-unit-test-token-must-never-leak'
#: A request of PROJECT's USER as the manager gets it, in process.
REQUEST_CONTEXT = RequestContext(request_id='req-unit', user_id=USER, project_id=PROJECT,
                                 auth_token=TOKEN)

_NAMESPACE = uuidlib.UUID('5f1d1c2e-6f0a-4e49-9b8e-2a1c0b7f4d11')


def uuid_for(name: str) -> str:
    """A stable uuid derived from a name, so tests can refer to providers by name."""
    return str(uuidlib.uuid5(_NAMESPACE, name))


def uuids(n: int) -> list[str]:
    """``n`` instance uuids, the same in every run (…0001, …0002, …)."""
    return [f'6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e{i:04x}' for i in range(1, n + 1)]


def new_uuids(n: int) -> list[str]:
    """``n`` fresh random uuids: consumers no other test of a shared Placement has used."""
    return [str(uuidlib.uuid4()) for _ in range(n)]


# -- hosts and aggregates ----------------------------------------------------------------------
# (capacity, used) per resource class; capacity as Placement reports it.
Usage = tuple[int, int]


def make_aggregate(name: str, *, metadata: Mapping[str, str] | None = None,
                   hosts: Sequence[str] = (), id: int = 1) -> Aggregate:
    return Aggregate(id=id, uuid=uuid_for(f'aggregate:{name}'), name=name,
                     hosts=list(hosts), metadata=dict(metadata or {}))


def make_host(name: str, *,
              vcpu: Usage | None = (16, 0),
              ram: Usage | None = (32768, 0),
              disk: Usage | None = (1000, 0),
              resources: Mapping[str, Usage] | None = None,
              aggregates: Iterable[Aggregate] = (),
              instances: Iterable[str] = (),
              disabled: bool = False,
              disabled_reason: str | None = None,
              forced_down: bool = False,
              last_seen_up: datetime.datetime | None = None,
              traits: Iterable[str] = (),
              nodename: str | None = None,
              service_host: str | None = None,
              cell_uuid: str = CELL_UUID,
              stats: Mapping[str, str] | None = None,
              allocation_candidates: Sequence[AllocationRequest] | None = None,
              **record_fields: Any) -> HostState:
    """A HostState for a single-provider host named ``name``.

    ``vcpu`` / ``ram`` / ``disk`` are (capacity, used) of VCPU, MEMORY_MB and
    DISK_GB (None leaves the class out); ``resources`` adds or replaces other
    classes. The root provider uuid is ``uuid_for(nodename)``. Without
    ``allocation_candidates`` the host has one candidate asking 1 VCPU,
    512 MB and 1 GB from its root. Other HostRecord fields (host_ip,
    hypervisor_type, cpu_info, ...) pass through ``record_fields``.
    """
    node = nodename or name
    root = uuid_for(node)
    usage: dict[str, ResourceUsage] = {}
    for rc, value in (('VCPU', vcpu), ('MEMORY_MB', ram), ('DISK_GB', disk)):
        if value is not None:
            usage[rc] = ResourceUsage(*value)
    for rc, value in (resources or {}).items():
        usage[rc] = ResourceUsage(*value)
    summary = ProviderSummary(uuid=root, root_provider_uuid=root, parent_provider_uuid=None,
                              resources=usage, traits=frozenset(traits))
    record = HostRecord(nodename=node, service_host=service_host or name, cell_uuid=cell_uuid,
                        provider_uuid=root, disabled=disabled, disabled_reason=disabled_reason,
                        forced_down=forced_down, last_seen_up=last_seen_up,
                        stats=dict(stats or {}), **record_fields)
    if allocation_candidates is None:
        allocation_candidates = [AllocationRequest(
            allocations={root: {'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}})]
    return HostState(uuid=root, record=record, summaries=[summary],
                     allocation_candidates=list(allocation_candidates),
                     aggregates=list(aggregates),
                     instances={u: {'uuid': u} for u in instances})


def host_states(candidates: Candidates, catalog: HostData, **table_options: Any
                ) -> list[HostState]:
    """The HostStates of a Placement answer, as the host stage builds them: the rows
    of one host table."""
    return list(HostTable(candidates, catalog, **table_options).view())


# -- specs -------------------------------------------------------------------------------------
def make_spec(*, vcpus: int = 1, memory_mb: int = 512, root_gb: int = 1, ephemeral_gb: int = 0,
              swap: int = 0, extra_specs: Mapping[str, str] | None = None,
              flavor: Flavor | None = None, image_props: Mapping[str, Any] | None = None,
              instance_uuid: str | None = None, group: InstanceGroup | None = None,
              hints: Mapping[str, Any] | None = None, rebuild: bool = False,
              **fields: Any) -> RequestSpec:
    """A RequestSpec: a flavor of ``vcpus``, ``memory_mb``, ``root_gb``... (or ``flavor``),
    an image with ``image_props`` (no image without them; or pass ``image``), and
    hints given as plain values, stored as Nova's lists. Other fields pass through."""
    scheduler_hints = {k: v if isinstance(v, list) else [v] for k, v in (hints or {}).items()}
    if rebuild:
        scheduler_hints['_nova_check_type'] = ['rebuild']
    if flavor is None:
        flavor = Flavor(vcpus=vcpus, memory_mb=memory_mb, root_gb=root_gb,
                        ephemeral_gb=ephemeral_gb, swap=swap, extra_specs=dict(extra_specs or {}))
    if image_props is not None:
        fields['image'] = ImageMeta(properties=ImageMetaProps(image_props))
    return RequestSpec(flavor=flavor, instance_uuid=instance_uuid, instance_group=group,
                       scheduler_hints=scheduler_hints, **fields)


def user_spec(**fields: Any) -> RequestSpec:
    """make_spec, asked for by PROJECT's USER."""
    fields.setdefault('project_id', PROJECT)
    fields.setdefault('user_id', USER)
    return make_spec(**fields)


def boot_spec(*, vcpus: int = 1, ram_mb: int = 1024, disk_gb: int = 10,
              extra_specs: Mapping[str, str] | None = None, group_policy: str | None = None,
              group_members: Sequence[str] = (), num_instances: int = 1,
              **fields: Any) -> RequestSpec:
    """A boot as nova-api asks for it: a named flavor, a cirros image, PROJECT's USER, and
    with ``group_policy`` a new server group of that policy (and its ``group`` hint)."""
    group, hints = None, {}
    if group_policy:
        group = InstanceGroup(uuid=str(uuidlib.uuid4()), policy=group_policy,
                              policies=[group_policy], members=list(group_members))
        hints = {'group': [group.uuid]}
    return make_spec(
        flavor=Flavor(id=1, flavorid='f1', name=f'test.{vcpus}-{ram_mb}', vcpus=vcpus,
                      memory_mb=ram_mb, root_gb=disk_gb, extra_specs=dict(extra_specs or {})),
        image=ImageMeta(id=str(uuidlib.uuid4()), name='cirros', disk_format='qcow2',
                        container_format='bare'),
        project_id=PROJECT, user_id=USER, num_instances=num_instances, group=group,
        hints=hints, **fields)


def nova_spec(*, vcpus: int = 4, memory_mb: int = 4096, root_gb: int = 40,
              image_props: Mapping[str, Any] | None = None, image: bool = True,
              root_required: tuple[str, ...] = ('OWNER_NOVA',),
              root_forbidden: tuple[str, ...] = ('COMPUTE_STATUS_DISABLED',),
              same_subtree: list[list[str]] | None = None,
              requested_resources: list[RequestGroup] | None = None,
              destination: Destination | None = None, **fields: Any) -> RequestSpec:
    """The spec Nova's scheduler translates for a 4 vCPU, 4096 MB, 40 GB flavor with an
    image: after its always-on request filters (``nova/scheduler/request_filter.py``) put
    ``OWNER_NOVA`` (``owner_nova_filter``) and ``!COMPUTE_STATUS_DISABLED``
    (``compute_status_filter``) on the root."""
    return make_spec(
        vcpus=vcpus, memory_mb=memory_mb, root_gb=root_gb,
        image_props=(image_props or {}) if image else None,
        request_level_params=RequestLevelParams(root_required=set(root_required),
                                                root_forbidden=set(root_forbidden),
                                                same_subtree=list(same_subtree or [])),
        requested_resources=list(requested_resources or []),
        requested_destination=destination, **fields)


# -- select_destinations -----------------------------------------------------------------------
def select(scheduler: Any, spec: RequestSpec, instance_uuids: Sequence[str] | None, *,
           context: RequestContext | Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
    """select_destinations as Nova's conductor calls it: alternates asked for unless
    ``return_alternates=False``.

    ``scheduler`` is a SchedulerManager, called in process with the spec itself and
    REQUEST_CONTEXT (Selection objects back); or a SchedulerClient, or a running service
    (its ``client``), called over RPC with the spec encoded and CONTEXT.
    """
    kwargs.setdefault('return_alternates', True)
    if isinstance(scheduler, SchedulerManager):
        kwargs.setdefault('return_objects', True)
        return scheduler.select_destinations(context or REQUEST_CONTEXT, spec, instance_uuids,
                                             **kwargs)
    client = scheduler if isinstance(scheduler, SchedulerClient) else scheduler.client
    return client.select_destinations(context or CONTEXT, encode_request_spec(spec),
                                      instance_uuids, **kwargs)


def first_choice(scheduler: Any, spec: RequestSpec | None = None) -> Any:
    """The Selection chosen for one new instance of ``spec`` (a plain boot_spec by default)."""
    [selections] = select(scheduler, spec or boot_spec(), new_uuids(1))
    return selections[0]


def chosen_host(scheduler: Any, spec: RequestSpec | None = None) -> str:
    """The service host chosen for one new instance of ``spec``."""
    return first_choice(scheduler, spec).service_host


# -- configuration -----------------------------------------------------------------------------
def make_conf(*, filter_scheduler: Mapping[str, Any] | None = None,
              default: Mapping[str, Any] | None = None,
              scheduler: Mapping[str, Any] | None = None,
              metrics: Mapping[str, Any] | None = None,
              workarounds: Mapping[str, Any] | None = None,
              pci: Mapping[str, Any] | None = None,
              **options: Any) -> cfg.ConfigOpts:
    """A fresh ConfigOpts with the options filters, weighers and the manager read
    ([DEFAULT], [scheduler], [filter_scheduler], [metrics], [workarounds],
    [placement_database], and [pci] when given), overridden per group
    (``scheduler={'max_attempts': 1}``) or by dotted name (see ``override``). Cheap
    enough for every test; ``service_conf`` has all the service's options."""
    conf = cfg.ConfigOpts()
    for group_conf in (service_group, scheduler_group, filter_scheduler_group, metrics_group,
                       workarounds_group, placement_database_group,
                       *([pci_group] if pci is not None else [])):
        group_conf.register_opts(conf)
    for group, values in (('filter_scheduler', filter_scheduler), (None, default),
                          ('scheduler', scheduler), ('metrics', metrics),
                          ('workarounds', workarounds), ('pci', pci)):
        for name, value in (values or {}).items():
            conf.set_override(name, value, group=group)
    return override(conf, **options)


def configured(plugin_cls: type, **filter_scheduler: Any) -> Any:
    """A filter or weigher of ``plugin_cls`` reading ``[filter_scheduler]`` as given."""
    plugin = plugin_cls()
    plugin.conf = make_conf(filter_scheduler=filter_scheduler)
    return plugin


def service_conf(**options: Any) -> cfg.ConfigOpts:
    """A fresh ConfigOpts with every option the service registers (oslo.messaging's and
    oslo.log's included), parsed as the service parses it but with no config file and no
    environment, overridden by dotted name (see ``override``)."""
    conf = cfg.ConfigOpts()
    scheduler_conf.register_opts(conf)
    conf([], project=scheduler_conf.PROJECT, default_config_files=[], default_config_dirs=[],
         use_env=False)
    # Each service its own claims journal, never the machine's /var/lib.
    return override(conf, state_path=_scratch_directory(), **options)


def _scratch_directory() -> str:
    path = tempfile.mkdtemp(prefix='scheduler-test-state-')
    atexit.register(shutil.rmtree, path, True)
    return path


def override(conf: cfg.ConfigOpts, **options: Any) -> cfg.ConfigOpts:
    """Set options named ``group.option`` (``option`` alone for [DEFAULT]), e.g.
    ``**{'oslo_messaging_notifications.driver': ['noop']}`` or ``host='sched-1'``;
    returns ``conf``."""
    for name, value in options.items():
        group, _, opt = name.rpartition('.')
        conf.set_override(opt, value, group=group or None)
    return conf


@contextlib.contextmanager
def compute_filtered_manager(placement: Any, catalog: HostData,
                             **kwargs: Any) -> Iterator[SchedulerManager]:
    """A manager on ``placement`` and ``catalog`` with ComputeFilter and the RAM
    weigher (``kwargs``: the manager's other arguments), stopped after use."""
    import random

    from scheduler.filters.compute import ComputeFilter
    from scheduler.pipeline.claimer import PendingCleanups
    from scheduler.weights.ram import RAMWeigher

    conf = make_conf()
    compute, weigher = ComputeFilter(), RAMWeigher()
    compute.conf = weigher.conf = conf
    manager = SchedulerManager(
        conf, placement=placement, catalog=catalog, filters=[compute], weighers=[weigher],
        request_filters=[], cleanups=PendingCleanups(placement, interval=3600),
        rng=random.Random(0), **kwargs)
    try:
        yield manager
    finally:
        manager.cleanups.stop()
        manager.release.stop()
