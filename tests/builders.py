"""Builders of test data: HostStates from provider summaries, aggregates, specs, config.

Shared by unit and functional tests; keep them general (every argument optional but the name).
"""
from __future__ import annotations

import datetime
import importlib
import uuid as uuidlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from oslo_config import cfg

from placement_client.models import AllocationRequest, ProviderSummary, ResourceUsage
from scheduler.host_state import HostRecord, HostState
from scheduler.objects.spec import Aggregate, Flavor, InstanceGroup, RequestSpec

CELL_UUID = '00000000-0000-4000-8000-00000000ce11'
_NAMESPACE = uuidlib.UUID('5f1d1c2e-6f0a-4e49-9b8e-2a1c0b7f4d11')

# (capacity, used) per resource class; capacity as Placement reports it.
Usage = tuple[int, int]


def uuid_for(name: str) -> str:
    """A stable uuid derived from a name, so tests can refer to providers by name."""
    return str(uuidlib.uuid5(_NAMESPACE, name))


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


def make_spec(*, instance_uuid: str | None = None, group: InstanceGroup | None = None,
              hints: Mapping[str, Any] | None = None, flavor: Flavor | None = None,
              rebuild: bool = False, **fields: Any) -> RequestSpec:
    """A RequestSpec; hints are given as plain values and stored as Nova's lists."""
    scheduler_hints = {k: v if isinstance(v, list) else [v] for k, v in (hints or {}).items()}
    if rebuild:
        scheduler_hints['_nova_check_type'] = ['rebuild']
    return RequestSpec(flavor=flavor or Flavor(vcpus=1, memory_mb=512, root_gb=1),
                       instance_uuid=instance_uuid, instance_group=group,
                       scheduler_hints=scheduler_hints, **fields)


# Options this test support needs; registered only where the service's own
# conf modules (written separately) have not registered them already.
_FALLBACK_OPTS: dict[str | None, list[cfg.Opt]] = {
    'filter_scheduler': [
        cfg.ListOpt('enabled_filters', default=[
            'ComputeFilter', 'ComputeCapabilitiesFilter', 'ImagePropertiesFilter',
            'ServerGroupAntiAffinityFilter', 'ServerGroupAffinityFilter']),
        cfg.ListOpt('weight_classes', default=['nova.scheduler.weights.all_weighers']),
        cfg.FloatOpt('ram_weight_multiplier', default=1.0),
        cfg.FloatOpt('cpu_weight_multiplier', default=1.0),
        cfg.FloatOpt('disk_weight_multiplier', default=1.0),
        cfg.IntOpt('host_subset_size', default=1, min=1),
        cfg.BoolOpt('shuffle_best_same_weighed_hosts', default=False),
    ],
    None: [cfg.IntOpt('service_down_time', default=60)],
}


def _register_service_opts(conf: cfg.ConfigOpts) -> None:
    for module_name in ('scheduler.conf.filter_scheduler', 'scheduler.conf.service',
                        'scheduler.conf.scheduler', 'scheduler.conf.metrics',
                        'scheduler.conf.workarounds'):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        register = getattr(module, 'register_opts', None)
        if register is not None:
            register(conf)


def make_conf(*, filter_scheduler: Mapping[str, Any] | None = None,
              default: Mapping[str, Any] | None = None,
              scheduler: Mapping[str, Any] | None = None,
              metrics: Mapping[str, Any] | None = None,
              workarounds: Mapping[str, Any] | None = None) -> cfg.ConfigOpts:
    """A fresh ConfigOpts with the scheduler's options, overridden as given."""
    conf = cfg.ConfigOpts()
    # A fresh group first: registering a module-level OptGroup object makes
    # ConfigOpts share its option table (overrides included) with every other
    # ConfigOpts that registered the same object, so overrides would leak
    # between tests.
    conf.register_group(cfg.OptGroup('filter_scheduler'))
    _register_service_opts(conf)
    for group, opts in _FALLBACK_OPTS.items():
        for opt in opts:
            try:
                conf.register_opt(opt, group=group)
            except cfg.DuplicateOptError:
                pass  # the service's own definition wins
    for name, value in (filter_scheduler or {}).items():
        conf.set_override(name, value, group='filter_scheduler')
    for name, value in (default or {}).items():
        conf.set_override(name, value)
    for name, value in (scheduler or {}).items():
        conf.set_override(name, value, group='scheduler')
    for name, value in (metrics or {}).items():
        conf.set_override(name, value, group='metrics')
    for name, value in (workarounds or {}).items():
        conf.set_override(name, value, group='workarounds')
    return conf
