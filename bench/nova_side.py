"""Nova 34's own scheduler code on a :class:`~bench.synthetic.SyntheticCloud`.

The "Nova" column of the benchmark: the same three stages as ``bench.ours_side``
(same API), run by the code of ``nova==34.*`` installed from PyPI (``tox -e
bench``). Nova is imported when a :class:`NovaSide` is built, never at module
import, so ``bench`` works without Nova installed.

What runs, per stage (everything Nova does after Placement answers):

* **build(raw)** -- the body is decoded by ``requests.Response.json()``, which
  is what ``SchedulerReportClient.get_allocation_candidates`` calls on the
  keystoneauth response; the allocation requests are mapped to providers the
  way ``SchedulerManager.select_destinations`` does (``alloc_reqs_by_rp_uuid``);
  then Nova's ``SchedulerManager._get_all_host_states`` runs unmodified: all
  provider-summary keys become ``compute_uuids``,
  ``HostManager.get_host_states_by_uuids`` scatter-gathers over the enabled
  cells (a real thread pool and ``target_cell``, as the threading-mode
  scheduler of Nova 34 does), ``ServiceList.get_by_binary`` and
  ``ComputeNodeList.get_all_by_uuids`` load their objects with Nova's own
  ``_from_db_object``, and ``HostManager._get_host_states`` makes a fresh
  ``HostState`` per node and calls ``HostState.update(compute, service,
  aggregates, instances)``. Each host state then gets a deep copy of its
  allocation requests, as ``_schedule``'s ``hosts_with_alloc_reqs`` does.
* **decide(built, kind)** -- ``_schedule``'s per-instance loop over the built
  states: ``SchedulerManager._get_sorted_hosts`` (Nova's
  ``HostFilterHandler.get_filtered_objects`` with the default
  ``enabled_filters``, ``HostWeightHandler.get_weighed_objects`` with all
  weighers of ``nova.scheduler.weights.all_weighers``, then the
  ``host_subset_size``/shuffle ordering), the first host that still has an
  allocation candidate, ``nova.scheduler.utils.claim_resources`` on its first
  candidate, the request groups' provider mapping, ``_consume_selected_host``
  (``HostState.consume_from_request`` plus the server-group bookkeeping), and
  ``_ensure_sufficient_hosts``. The loop itself is transcribed (12 lines)
  because ``_schedule`` would rebuild the host states first.
* **whole(raw)** -- the decode and mapping above, then Nova's real
  ``SchedulerManager._schedule`` for one instance (host states, filtering,
  weighing, ordering, claim, consume, Selection objects with the two alternates
  the conductor asks for on boot).

What is replaced, and only that:

* **Database reads.** ``ComputeNodeList._db_compute_node_get_all_by_uuids`` and
  ``nova.db.main.api.service_get_all_by_binary`` (the two per-request cell-DB
  queries) return rows from in-memory tables keyed by the targeted cell; at
  start-up ``CellMappingList._get_all_from_db`` and the aggregate module's
  ``_get_all_from_db`` return this cloud's cell mappings and aggregates while
  Nova's own ``HostManager()`` constructor runs. The rows are written the way
  Nova writes them: compute-node JSON columns (``stats``,
  ``supported_instances``, ``pci_stats``) go through ``ComputeNode``'s own
  to-DB converters. The services' heartbeats are kept fresh on every read
  (``now - age``), as computes reporting every ``report_interval`` keep them,
  with the live hosts' ages scaled into one report interval (see
  :func:`_heartbeat_ages`); otherwise a long run would see hosts go "down"
  after ``service_down_time`` (60 s) that the cloud means to be up.
* **Instance tracking.** ``HostManager._init_instance_info`` (an asynchronous
  DB load at start-up) is skipped; the per-host instance map is filled as it
  is once computes have synced (``updated=True``), so ``_get_instance_info``
  reads memory as in steady state. The instances are ``Instance(uuid=...)``
  stubs: the default filters and weighers only read the keys. After a group
  request, :meth:`NovaSide.decide` removes the stubs ``_consume_selected_host``
  left in that shared map (production's next compute sync would), so every
  repetition sees the same cloud.
* **The Placement claim.** ``claim_resources`` runs, but the report client it
  is given answers the ``PUT /allocations`` with success (the benchmark
  measures choosing, not HTTP). The cleanup ``DELETE`` likewise.

Nothing in Nova's filters, weighers, ``HostState`` or ``HostManager`` is
patched. ``SchedulerManager`` is created without its ``__init__`` (which wants
RPC, a notifier and a keystone session) and given the ``HostManager`` built by
Nova's own constructor; the methods used touch only ``self.host_manager`` and
``self.placement_client``.

Not measured, on either side of the comparison: what precedes the Placement
call (request filters, ``ResourceRequest``), the RPC message itself, and
``_select_destinations``' start/end notifications (per request, not per host).
The ``RequestSpec`` is rebuilt inside :meth:`NovaSide.decide` (the conductor's
``from_components``; about 0.3 ms) because the loop mutates it.

Configuration is Nova's defaults (``nova.config.parse_args`` with no config
file), hence the default filters, all weighers, ``host_subset_size=1``,
``shuffle_best_same_weighed_hosts=False``, ``max_attempts=3``; the one
exception is ``service_down_time`` (see :data:`SERVICE_DOWN_TIME`). Logging: the
``nova`` logger keeps oslo.log's default level (INFO, ``debug=False``) but does
not propagate; it writes to ``$SCHEDULER_BENCH_NOVA_LOG`` (default
``<tmp>/nova-side-bench.log``; empty value: a NullHandler), so the INFO and
WARNING lines Nova emits per request (e.g. a down host) cost what a log file
costs in production without reaching the terminal.

Run ``python -m bench.nova_side --n 1000`` (in the bench env) for medians of
each stage.
"""
from __future__ import annotations

import argparse
import collections
import copy
import datetime
import gc
import importlib
import json
import logging
import os
import statistics
import tempfile
import time
import types
import uuid as uuidlib
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench.synthetic import REQUEST_RESOURCES, SyntheticCloud, SyntheticHost, make_cloud

KINDS = ('one', 'ten', 'group10')

#: The booted image's properties. ImagePropertiesFilter checks the first two
#: against each host's supported_instances ([x86_64, kvm, hvm]); the rest are
#: typical of a cloud image and only make the object realistic.
IMAGE_PROPERTIES = {
    'hw_architecture': 'x86_64',
    'hw_vm_mode': 'hvm',
    'hw_disk_bus': 'virtio',
    'hw_vif_model': 'virtio',
    'os_distro': 'ubuntu',
    'os_type': 'linux',
}
SUPPORTED_INSTANCES = (('x86_64', 'kvm', 'hvm'), ('i686', 'kvm', 'hvm'))
CELL0_UUID = '00000000-0000-0000-0000-000000000000'
PROJECT_ID = '6f70656e-7374-6163-6b20-70726f6a6563'
USER_ID = '75736572-2d62-656e-6368-000000000001'

#: [DEFAULT] service_down_time, the one non-default option (Nova: 60 s). ComputeFilter
#: compares heartbeats read at the start of the host-state build with the clock
#: at filtering time; at 50,000 hosts the build alone takes about 30 s of CPU,
#: and on a loaded benchmark machine the wall clock can pass 60 s, when every
#: host would look down (NoValidHost). 300 s keeps the cloud's down hosts
#: (last seen 3,600-7,200 s ago) down and its live ones up, whatever the load;
#: the comparison costs the same.
SERVICE_DOWN_TIME = 300

_NS = uuidlib.UUID('2b1f3c52-6a47-4f0e-9d8e-5c1d7d0e8a10')  # bench-only uuid5 namespace
_LOG_ENV = 'SCHEDULER_BENCH_NOVA_LOG'
_CONFIGURED = False  # nova.conf.CONF parsed (once per process)


def _utcnow() -> datetime.datetime:
    """Naive UTC, as database rows carry it."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def _uuid5(*parts: object) -> str:
    return str(uuidlib.uuid5(_NS, '/'.join(str(p) for p in parts)))


# --------------------------------------------------------------------------- Nova loading
def _load_nova() -> types.SimpleNamespace:
    """Import Nova, parse its default configuration once, register its objects.

    Imported here, not at module level, so that ``bench`` imports without Nova.
    """
    names = {
        'conf': 'nova.conf',
        'config': 'nova.config',
        'context': 'nova.context',
        'objects': 'nova.objects',
        'obj_aggregate': 'nova.objects.aggregate',
        'obj_service': 'nova.objects.service',
        'main_db': 'nova.db.main.api',
        'host_manager': 'nova.scheduler.host_manager',
        'manager': 'nova.scheduler.manager',
        'sched_utils': 'nova.scheduler.utils',
        'report': 'nova.scheduler.client.report',
        'requests': 'requests',
        'requests_utils': 'requests.utils',
    }
    with warnings.catch_warnings():
        # futurist imports eventlet to probe for it; its deprecation notice is noise here.
        warnings.simplefilter('ignore')
        nova = types.SimpleNamespace(
            **{k: importlib.import_module(v) for k, v in names.items()})
    nova.objects.register_all()
    global _CONFIGURED
    if not _CONFIGURED:
        # nova-scheduler's own start-up parse, with no config file (all defaults).
        # RPC is initialised (transports are lazy: nothing connects) because
        # CellMapping reads [DEFAULT] transport_url, which oslo.messaging
        # registers; the databases are not configured: their reads are replaced.
        nova.config.parse_args(['nova-scheduler'], default_config_files=[],
                               configure_db=False, init_rpc=True)
        nova.conf.CONF.set_override('service_down_time', SERVICE_DOWN_TIME)
        _CONFIGURED = True
    _quiet_nova_logging()
    _install_cell_db_readers(nova)
    return nova


def _quiet_nova_logging() -> None:
    """oslo.log's default level for Nova (INFO), written to a file, not the terminal."""
    logger = logging.getLogger('nova')
    if getattr(logger, '_bench_configured', False):
        return
    path = os.environ.get(_LOG_ENV, os.path.join(tempfile.gettempdir(), 'nova-side-bench.log'))
    handler: logging.Handler
    if path:
        handler = logging.FileHandler(path, mode='w', delay=True)
        handler.setFormatter(logging.Formatter(
            '%(asctime)s %(process)d %(levelname)s %(name)s %(message)s'))
    else:
        handler = logging.NullHandler()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger._bench_configured = True  # type: ignore[attr-defined]


@contextmanager
def _replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    saved = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


# ----------------------------------------------------------------- the synthetic "cell DB"
@dataclass
class _CellTables:
    """One cell database: the rows the two per-request queries read."""

    compute_nodes: dict[str, dict[str, Any]]  # uuid -> compute_nodes row
    services: list[dict[str, Any]]            # services rows (nova-compute)
    heartbeat_ages: list[datetime.timedelta]  # per service row: now - last_seen_up

    def refresh_heartbeats(self) -> None:
        # Computes write last_seen_up every report_interval: each row reads
        # as old as _heartbeat_ages says, whenever it is read (a few hundred
        # nanoseconds per row, counted in stage a as part of the "query").
        now = _utcnow()
        for row, age in zip(self.services, self.heartbeat_ages, strict=True):
            row['last_seen_up'] = row['updated_at'] = now - age


#: cell uuid -> its tables; the replaced queries look up the targeted cell here.
_CELL_DBS: dict[str, _CellTables] = {}


def _compute_nodes_by_uuids(context: Any, compute_uuids: list[str]) -> list[dict[str, Any]]:
    """Replaces ``SELECT * FROM compute_nodes WHERE uuid IN (...) AND deleted = 0``."""
    table = _CELL_DBS[context.cell_uuid].compute_nodes
    return [table[u] for u in compute_uuids if u in table]


def _services_by_binary(context: Any, binary: str,
                        include_disabled: bool = False) -> list[dict[str, Any]]:
    """Replaces ``service_get_all_by_binary`` (``SELECT * FROM services WHERE ...``)."""
    tables = _CELL_DBS[context.cell_uuid]
    tables.refresh_heartbeats()
    return [row for row in tables.services
            if row['binary'] == binary and (include_disabled or not row['disabled'])]


def _install_cell_db_readers(nova: types.SimpleNamespace) -> None:
    """Point the two per-request queries at :data:`_CELL_DBS` (process-wide, once)."""
    node_list = nova.objects.ComputeNodeList
    if getattr(node_list, '_bench_readers', False):
        return
    node_list._db_compute_node_get_all_by_uuids = staticmethod(_compute_nodes_by_uuids)
    nova.main_db.service_get_all_by_binary = _services_by_binary
    node_list._bench_readers = True


class _AcceptingPlacement:
    """The report client ``claim_resources`` is handed: every claim succeeds."""

    def claim_resources(self, context: Any, consumer_uuid: str, alloc_request: dict[str, Any],
                        project_id: str, user_id: str,
                        allocation_request_version: str | None = None,
                        consumer_generation: int | None = None) -> bool:
        return True  # PUT /allocations/{consumer_uuid} -> 204

    def delete_allocation_for_instance(self, context: Any, uuid: str, **kwargs: Any) -> bool:
        return True


# ------------------------------------------------------------------------ rows and objects
def _compute_node_row(nova: types.SimpleNamespace, host: SyntheticHost, row_id: int,
                      service_id: int) -> dict[str, Any]:
    """The compute_nodes row Nova's resource tracker would have written for ``host``."""
    inv = host.root.inventory
    vcpus, _, cpu_ratio, vcpus_used = inv['VCPU']
    memory_mb, reserved_mb, ram_ratio, memory_used = inv['MEMORY_MB']
    local_gb, _, disk_ratio, local_gb_used = inv['DISK_GB']
    # Placement's usage is the sum of allocations; the resource tracker's
    # memory_mb_used also counts reserved_host_memory_mb.
    memory_mb_used = memory_used + reserved_mb
    stamp = host.last_seen_up.replace(tzinfo=None)
    objects = nova.objects
    updates: dict[str, Any] = {
        'stats': {'num_instances': str(host.num_instances),
                  'io_workload': str(host.io_workload),
                  'failed_builds': str(host.failed_builds)},
        'host_ip': host.host_ip,
        'supported_hv_specs': [objects.HVSpec.from_list(list(s)) for s in SUPPORTED_INSTANCES],
        'pci_device_pools': objects.PciDevicePoolList(objects=[]),
    }
    converter = objects.ComputeNode
    converter._convert_stats_to_db_format(updates)
    converter._convert_host_ip_to_db_format(updates)
    converter._convert_supported_instances_to_db_format(updates)
    converter._convert_pci_stats_to_db_format(updates)
    updates.update({
        'id': row_id, 'uuid': host.root.uuid, 'service_id': service_id, 'host': host.name,
        'vcpus': vcpus, 'memory_mb': memory_mb, 'local_gb': local_gb,
        'vcpus_used': vcpus_used, 'memory_mb_used': memory_mb_used,
        'local_gb_used': local_gb_used,
        'hypervisor_type': 'QEMU', 'hypervisor_version': host.hypervisor_version,
        'hypervisor_hostname': host.name,
        'free_ram_mb': memory_mb - memory_mb_used,
        'free_disk_gb': local_gb - local_gb_used,
        'current_workload': host.io_workload, 'running_vms': host.num_instances,
        'cpu_info': json.dumps(host.cpu_info),
        'disk_available_least': local_gb - local_gb_used,
        'metrics': '[]',
        'numa_topology': None,
        'cpu_allocation_ratio': cpu_ratio, 'ram_allocation_ratio': ram_ratio,
        'disk_allocation_ratio': disk_ratio,
        'mapped': 1,
        'created_at': stamp - datetime.timedelta(days=90), 'updated_at': stamp,
        'deleted_at': None, 'deleted': 0,
    })
    return updates


def _service_row(nova: types.SimpleNamespace, host: SyntheticHost,
                 row_id: int) -> dict[str, Any]:
    stamp = host.last_seen_up.replace(tzinfo=None)
    return {
        'id': row_id, 'uuid': _uuid5('service', host.name), 'host': host.name,
        'binary': 'nova-compute', 'topic': 'compute', 'report_count': 100_000 + row_id,
        'disabled': host.disabled,
        'disabled_reason': 'maintenance' if host.disabled else None,
        'last_seen_up': stamp, 'forced_down': host.forced_down,
        'version': nova.obj_service.SERVICE_VERSION,
        'created_at': stamp - datetime.timedelta(days=90), 'updated_at': stamp,
        'deleted_at': None, 'deleted': 0,
    }


def _heartbeat_ages(nova: types.SimpleNamespace,
                    cloud: SyntheticCloud) -> list[datetime.timedelta]:
    """Each service's heartbeat age, as the replaced services query will report it.

    The cloud's "up" hosts were last seen 0-50 s before it was made; a live
    compute reports every ``report_interval`` (10 s), so their ages are scaled
    into one interval (order kept). "Down" hosts (older than
    ``service_down_time``) keep their age. Without the scaling a host seen 49 s
    ago would turn "down" whenever more than 11 s pass between the services
    read and ComputeFilter -- seconds at 50,000 hosts -- which no real cloud does.
    """
    conf = nova.conf.CONF
    down_after = datetime.timedelta(seconds=conf.service_down_time)
    scale = conf.report_interval / conf.service_down_time
    seen = [h.last_seen_up.replace(tzinfo=None) for h in cloud.hosts]
    made = max(seen, default=_utcnow())  # the freshest heartbeat: "now" when made
    return [age if age > down_after else age * scale
            for age in (made - s for s in seen)]


@dataclass
class NovaBuilt:
    """Stage a's product: what ``_schedule``'s loop starts from."""

    hosts: list[Any]                         # nova HostState, with allocation_candidates
    alloc_reqs_by_rp_uuid: dict[str, list[dict[str, Any]]]
    provider_summaries: dict[str, Any]


# ------------------------------------------------------------------------------ the side
class NovaSide:
    """Nova 34's scheduler, after Placement answers, on one synthetic cloud."""

    name = 'nova'

    def __init__(self, cloud: SyntheticCloud) -> None:
        nova = self._nova = _load_nova()
        self.cloud = cloud
        self.cell_uuid = str(uuidlib.uuid4())  # this side's own cell DB in _CELL_DBS
        service_ids = {h.name: i + 1 for i, h in enumerate(cloud.hosts)}
        services = [_service_row(nova, h, service_ids[h.name]) for h in cloud.hosts]
        _CELL_DBS[self.cell_uuid] = _CellTables(
            compute_nodes={h.root.uuid: _compute_node_row(nova, h, i + 1, service_ids[h.name])
                           for i, h in enumerate(cloud.hosts)},
            services=services,
            heartbeat_ages=_heartbeat_ages(nova, cloud))
        weakref.finalize(self, _CELL_DBS.pop, self.cell_uuid, None)

        self.host_manager = self._start_host_manager()
        self.manager = self._scheduler_manager()
        self.context = nova.context.RequestContext(
            user_id=USER_ID, project_id=PROJECT_ID, roles=['member', 'reader'])
        self.allocation_request_version = nova.report.SAME_SUBTREE_VERSION
        self.instance_uuids = {kind: [_uuid5(cloud.seed, len(cloud.hosts), kind, i)
                                      for i in range(1 if kind == 'one' else 10)]
                               for kind in KINDS}
        self.group_uuid = _uuid5(cloud.seed, len(cloud.hosts), 'group')
        #: What _get_all_host_states reads from the spec (only requested_destination).
        self._build_spec = self.request_spec('one')
        #: The Selection lists of the last :meth:`whole` (claimed allocation request inside).
        self.last_selections: list[list[Any]] = []

    # ----------------------------------------------------------------- untimed set-up
    def _start_host_manager(self) -> Any:
        """Nova's own ``HostManager()``, reading this cloud's API DB rows."""
        nova, cloud = self._nova, self.cloud
        epoch = datetime.datetime(2025, 1, 1)
        cell_rows = [
            {'id': 1, 'uuid': CELL0_UUID, 'name': 'cell0', 'transport_url': 'none:///',
             'database_connection': 'sqlite://', 'disabled': False,
             'created_at': epoch, 'updated_at': None},
            {'id': 2, 'uuid': self.cell_uuid, 'name': 'cell1', 'transport_url': 'none:///',
             'database_connection': 'sqlite://', 'disabled': False,
             'created_at': epoch, 'updated_at': None},
        ]
        agg_rows = [{'id': agg_id, 'uuid': agg_uuid, 'name': name, 'hosts': list(hosts),
                     'metadetails': dict(metadata), 'created_at': epoch, 'updated_at': None}
                    for agg_id, agg_uuid, name, hosts, metadata in cloud.aggregates]
        hm_cls = nova.host_manager.HostManager
        with _replaced(nova.objects.CellMappingList, '_get_all_from_db',
                       staticmethod(lambda context: cell_rows)), \
                _replaced(nova.obj_aggregate, '_get_all_from_db', lambda context: agg_rows), \
                _replaced(hm_cls, '_init_instance_info',
                          lambda self, computes_by_cell=None: None):
            hm = hm_cls()
        # Instance info as after the computes' first sync: in memory, trusted.
        Instance = nova.objects.Instance
        hm._instance_info = {
            h.name: {'instances': {u: Instance(uuid=u, host=h.name, node=h.name)
                                   for u in h.instances},
                     'updated': True}
            for h in cloud.hosts}
        return hm

    def _scheduler_manager(self) -> Any:
        base = self._nova.manager.SchedulerManager
        claims = _AcceptingPlacement()

        class BenchSchedulerManager(base):  # type: ignore[misc, valid-type]
            # The property reads a keystone-backed singleton; the claim is not measured.
            placement_client = property(lambda self: claims)

        manager = object.__new__(BenchSchedulerManager)
        manager.host_manager = self.host_manager
        return manager

    def request_spec(self, kind: str) -> Any:
        """The RequestSpec the conductor sends for ``kind`` (built the API's way)."""
        nova = self._nova
        objects = nova.objects
        uuids = self.instance_uuids[kind]
        flavor = objects.Flavor(
            id=42, flavorid='bench.medium', name='bench.medium',
            vcpus=REQUEST_RESOURCES['VCPU'], memory_mb=REQUEST_RESOURCES['MEMORY_MB'],
            root_gb=REQUEST_RESOURCES['DISK_GB'], ephemeral_gb=0, swap=0,
            rxtx_factor=1.0, vcpu_weight=0, disabled=False, is_public=True,
            extra_specs={}, description=None)
        image = {'id': _uuid5('image'), 'name': 'ubuntu-24.04', 'status': 'active',
                 'disk_format': 'qcow2', 'container_format': 'bare', 'min_ram': 0,
                 'min_disk': 0, 'size': 2_361_393_152, 'properties': dict(IMAGE_PROPERTIES)}
        group = None
        if kind == 'group10':
            group = objects.InstanceGroup(
                id=1, uuid=self.group_uuid, name='bench-anti', user_id=USER_ID,
                project_id=PROJECT_ID, policy='anti-affinity', policies=['anti-affinity'],
                rules={}, members=list(uuids), hosts=[])
        spec = objects.RequestSpec.from_components(
            self.context, uuids[0], image, flavor, None,
            objects.InstancePCIRequests(requests=[]), {'scheduler_hints': {}}, group, None,
            security_groups=objects.SecurityGroupList(
                objects=[objects.SecurityGroup(name='default')]),
            project_id=PROJECT_ID, user_id=USER_ID)
        spec.num_instances = len(uuids)
        return spec

    # ----------------------------------------------------------------- the stages
    def _decode(self, raw: bytes) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
        """The report client's ``resp.json()`` and ``select_destinations``' mapping."""
        requests = self._nova.requests
        resp = requests.Response()
        resp.status_code = 200
        resp.headers['Content-Type'] = 'application/json'
        resp.encoding = self._nova.requests_utils.get_encoding_from_headers(resp.headers)
        resp._content = raw
        data = resp.json()
        alloc_reqs, provider_summaries = data['allocation_requests'], data['provider_summaries']
        alloc_reqs_by_rp_uuid: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        for ar in alloc_reqs:
            for rp_uuid in ar['allocations']:
                alloc_reqs_by_rp_uuid[rp_uuid].append(ar)
        return alloc_reqs_by_rp_uuid, provider_summaries

    def build(self, raw: bytes) -> NovaBuilt:
        """Stage a: raw Placement body -> HostStates carrying their allocation candidates."""
        alloc_reqs_by_rp_uuid, provider_summaries = self._decode(raw)
        elevated = self.context.elevated()
        states = self.manager._get_all_host_states(elevated, self._build_spec,
                                                  provider_summaries)
        hosts = []
        for host in states:  # _schedule's hosts_with_alloc_reqs
            host.allocation_candidates = copy.deepcopy(alloc_reqs_by_rp_uuid[host.uuid])
            hosts.append(host)
        return NovaBuilt(hosts, alloc_reqs_by_rp_uuid, provider_summaries)

    def decide(self, built: NovaBuilt, kind: str) -> list[str]:
        """Stage b: ``_schedule``'s loop over built states; the host chosen per instance."""
        if kind not in KINDS:
            raise ValueError(f'kind must be one of {KINDS}, not {kind!r}')
        spec = self.request_spec(kind)
        uuids = self.instance_uuids[kind]
        placed: list[tuple[Any, dict[str, Any]]] = []
        try:
            self._place(built.hosts, spec, uuids, placed)
        finally:
            if spec.instance_group is not None:
                self._forget_stub_instances([host for host, _ in placed], uuids)
        return [host.host for host, _ in placed]

    @staticmethod
    def _forget_stub_instances(hosts: list[Any], instance_uuids: list[str]) -> None:
        """Undo ``_consume_selected_host``'s group bookkeeping in the shared instance map.

        ``HostState.instances`` is HostManager's own per-host map (the same
        dict every request gets), and ``_consume_selected_host`` adds an
        ``Instance(uuid)`` stub there for group requests. In production the
        compute's next sync accounts for it; here the next repetition must
        see the map as it was, or the group's hosts stay taken.
        """
        for host in hosts:
            for uuid in instance_uuids:
                host.instances.pop(uuid, None)

    def _place(self, hosts: list[Any], spec: Any, instance_uuids: list[str],
               claimed: list[tuple[Any, dict[str, Any]]]) -> None:
        """``SchedulerManager._schedule``'s per-instance loop (Nova 34), step by step.

        Appends (host state, claimed allocation request) per instance to ``claimed``.
        """
        manager, claim = self.manager, self._nova.sched_utils.claim_resources
        elevated = self.context.elevated()
        claimed_uuids: list[str] = []
        for num, instance_uuid in enumerate(instance_uuids):
            spec.instance_uuid = instance_uuid
            spec.obj_reset_changes(['instance_uuid'])
            hosts = manager._get_sorted_hosts(spec, hosts, num)
            if not hosts:
                break
            chosen = None
            for host in hosts:
                if not host.allocation_candidates:
                    continue
                alloc_req = host.allocation_candidates[0]
                if claim(elevated, manager.placement_client, spec, instance_uuid, alloc_req,
                         allocation_request_version=self.allocation_request_version):
                    chosen = (host, alloc_req)
                    break
            if chosen is None:
                break
            claimed_uuids.append(instance_uuid)
            claimed.append(chosen)
            for request_group in spec.requested_resources:
                request_group.provider_uuids = chosen[1]['mappings'][request_group.requester_id]
            manager._consume_selected_host(chosen[0], spec, instance_uuid=instance_uuid)
        manager._ensure_sufficient_hosts(elevated, [h for h, _ in claimed],
                                         len(instance_uuids), claimed_uuids)

    def whole(self, raw: bytes) -> list[str]:
        """Stage c: decode, map, then Nova's ``_schedule`` for one instance (with alternates)."""
        alloc_reqs_by_rp_uuid, provider_summaries = self._decode(raw)
        spec = self.request_spec('one')
        selections = self.manager._schedule(
            self.context, spec, self.instance_uuids['one'], alloc_reqs_by_rp_uuid,
            provider_summaries, self.allocation_request_version, return_alternates=True)
        self.last_selections = selections
        return [alternatives[0].service_host for alternatives in selections]


# ------------------------------------------------------------------------ sanity script
@dataclass
class _Timing:
    wall_ms: float  # median wall clock
    cpu_ms: float   # median process CPU time (all threads): steadier on a shared machine
    result: Any     # the last repetition's result


def _measure(fn: Callable[[Any], Any], reps: int,
             prepare: Callable[[], Any] = lambda: None) -> _Timing:
    """Median of ``reps`` runs of ``fn(prepare())``; ``prepare`` is not timed.

    Each run starts after a full collection (untimed): the cyclic collector's
    full passes over this process's few hundred thousand objects cost hundreds
    of milliseconds and otherwise land in whichever run crosses the threshold.
    """
    wall, cpu, result = [], [], None
    for _ in range(reps):
        result = None  # the previous result is garbage before the next run, as in a server
        arg = prepare()
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn(arg)
        cpu.append((time.process_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    return _Timing(statistics.median(wall), statistics.median(cpu), result)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog='python -m bench.nova_side',
        description="Medians of Nova 34's stages a/b/c on a synthetic cloud (sanity check).")
    parser.add_argument('--n', type=int, default=1000, help='compute hosts (default 1000)')
    parser.add_argument('--reps', type=int, default=5, help='repetitions per stage (default 5)')
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    cloud = make_cloud(args.n)
    raw = cloud.placement_json()
    side = NovaSide(cloud)
    print(f'N={args.n}: cloud + Placement body ({len(raw) / 1e6:.1f} MB) + Nova set-up '
          f'{time.perf_counter() - t0:.1f} s; medians of {args.reps}, wall / CPU')

    def row(stage: str, t: _Timing, note: str) -> None:
        print(f'  {stage:<18} {t.wall_ms:9.1f} / {t.cpu_ms:9.1f} ms  {note}')

    a = _measure(lambda _: side.build(raw), args.reps)
    built = a.result
    with_candidates = sum(1 for h in built.hosts if h.allocation_candidates)
    row('a build', a, f'{len(built.hosts)} host states ({with_candidates} with candidates), '
                      f'{len(built.provider_summaries)} provider summaries')
    del built, a
    chosen: dict[str, list[str]] = {}
    for kind in KINDS:
        b = _measure(lambda built, k=kind: side.decide(built, k), args.reps,
                     prepare=lambda: side.build(raw))
        chosen[kind] = b.result
        row(f'b decide {kind}', b, f'{b.result[:3]}{" ..." if len(b.result) > 3 else ""}')
    c = _measure(lambda _: side.whole(raw), args.reps)
    row('c whole', c, str(c.result))
    if c.result != chosen['one']:
        print(f'  !! _schedule chose {c.result}, the transcribed loop {chosen["one"]}')
    if len(set(chosen['group10'])) != len(chosen['group10']):
        print('  !! anti-affinity group placed two members on one host')


if __name__ == '__main__':
    main()
