"""Workload files for capacity questions: a flavor mix, counts, and "fill until full".

YAML (or JSON, which YAML reads too)::

    flavors:                      # optional; m1.small ... m1.xlarge are built in
      gpu.large: {vcpus: 8, memory_mb: 32768, disk_gb: 100,
                  extra_specs: {"trait:CUSTOM_GPU": required}}
    requests:                     # optional; sent first, in this order
      - {flavor: m1.small, count: 100}                    # 100 boots of 1 instance
      - {flavor: m1.medium, count: 5, instances: 3, anti_affinity: true, az: az1}
    fill: m1.large                # optional; or a list; or [{flavor: x, az: az2, max: 50}]

``count`` boots of ``instances`` instances each (a multi-create, all or none);
``anti_affinity`` puts each boot's instances in a new anti-affinity group.
A fill keeps booting one instance at a time until the first NoValidHost (or
``max``). Parsing is pure; :func:`to_boot_requests` turns entries into the
simulator's :class:`BootRequest`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from scheduler.exceptions import ConfigurationError
from scheduler.simulate.workload import FLAVORS, PROJECTS, BootRequest, FlavorDef, _uuid

#: A fill stops here at the latest when the file gives no ``max``: far above any cloud
#: this simulator can hold, and a bound on a run that would otherwise never end.
DEFAULT_FILL_MAX = 100_000
_FLAVOR_KEYS = frozenset({'vcpus', 'memory_mb', 'disk_gb', 'root_gb', 'extra_specs'})
_REQUEST_KEYS = frozenset({'flavor', 'count', 'instances', 'anti_affinity', 'az'})
_FILL_KEYS = frozenset({'flavor', 'az', 'max'})
_TOP_KEYS = frozenset({'flavors', 'requests', 'fill'})
_FIRST_FLAVOR_ID = 1000


class WorkloadFileError(ConfigurationError):
    """A workload file that cannot be read or says something impossible."""


@dataclass(frozen=True)
class WorkloadFlavor:
    name: str
    vcpus: int
    memory_mb: int
    disk_gb: int
    extra_specs: Mapping[str, str] = field(default_factory=dict)

    def resources(self) -> dict[str, int]:
        """What one instance takes from Placement (no swap or ephemeral disk)."""
        amounts = {'VCPU': self.vcpus, 'MEMORY_MB': self.memory_mb, 'DISK_GB': self.disk_gb}
        return {rc: n for rc, n in amounts.items() if n}


@dataclass(frozen=True)
class RequestEntry:
    flavor: str
    count: int = 1
    instances: int = 1
    anti_affinity: bool = False
    az: str | None = None


@dataclass(frozen=True)
class FillEntry:
    flavor: str
    az: str | None = None
    max: int = DEFAULT_FILL_MAX


@dataclass(frozen=True)
class WorkloadFile:
    flavors: Mapping[str, WorkloadFlavor]
    requests: tuple[RequestEntry, ...] = ()
    fills: tuple[FillEntry, ...] = ()


BUILTIN_FLAVORS: dict[str, WorkloadFlavor] = {
    f.name: WorkloadFlavor(f.name, f.vcpus, f.memory_mb, f.root_gb) for f in FLAVORS}


def _int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise WorkloadFileError(f'{where} must be an integer of at least {minimum}, '
                                f'not {value!r}')
    return value


def _mapping(value: Any, where: str, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise WorkloadFileError(f'{where} must be a mapping, not {type(value).__name__}')
    unknown = sorted(str(k) for k in set(value) - allowed)
    if unknown:
        raise WorkloadFileError(f'{where}: unknown key(s) {unknown} '
                                f'(allowed: {sorted(allowed)})')
    return value


def _optional_str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str) and value:
        return value
    raise WorkloadFileError(f'{where} must be a non-empty string or null, not {value!r}')


def _flavor(name: str, data: Any) -> WorkloadFlavor:
    where = f'flavors.{name}'
    data = _mapping(data, where, _FLAVOR_KEYS)
    if 'disk_gb' in data and 'root_gb' in data:
        raise WorkloadFileError(f'{where}: give disk_gb or root_gb, not both')
    extra = data.get('extra_specs', {}) or {}
    if not isinstance(extra, Mapping):
        raise WorkloadFileError(f'{where}.extra_specs must be a mapping')
    return WorkloadFlavor(
        name=name, vcpus=_int(data.get('vcpus'), f'{where}.vcpus', 1),
        memory_mb=_int(data.get('memory_mb'), f'{where}.memory_mb', 1),
        disk_gb=_int(data.get('disk_gb', data.get('root_gb', 0)), f'{where}.disk_gb', 0),
        extra_specs={str(k): str(v) for k, v in extra.items()})


def _known(flavor: Any, flavors: Mapping[str, WorkloadFlavor], where: str) -> str:
    if not isinstance(flavor, str) or flavor not in flavors:
        raise WorkloadFileError(f'{where}: unknown flavor {flavor!r} '
                                f'(known: {", ".join(sorted(flavors))})')
    return flavor


def _request(data: Any, index: int, flavors: Mapping[str, WorkloadFlavor]) -> RequestEntry:
    where = f'requests[{index}]'
    data = _mapping(data, where, _REQUEST_KEYS)
    anti = data.get('anti_affinity', False)
    if not isinstance(anti, bool):
        raise WorkloadFileError(f'{where}.anti_affinity must be true or false')
    return RequestEntry(
        flavor=_known(data.get('flavor'), flavors, where),
        count=_int(data.get('count', 1), f'{where}.count', 0),
        instances=_int(data.get('instances', 1), f'{where}.instances', 1),
        anti_affinity=anti, az=_optional_str(data.get('az'), f'{where}.az'))


def _fill(data: Any, index: int, flavors: Mapping[str, WorkloadFlavor]) -> FillEntry:
    where = f'fill[{index}]'
    if isinstance(data, str):
        return FillEntry(flavor=_known(data, flavors, where))
    data = _mapping(data, where, _FILL_KEYS)
    return FillEntry(flavor=_known(data.get('flavor'), flavors, where),
                     az=_optional_str(data.get('az'), f'{where}.az'),
                     max=_int(data.get('max', DEFAULT_FILL_MAX), f'{where}.max', 1))


def parse_workload(data: Any) -> WorkloadFile:
    """A parsed document -> WorkloadFile; WorkloadFileError names the first problem."""
    data = _mapping(data, 'the workload', _TOP_KEYS)
    flavors = dict(BUILTIN_FLAVORS)
    flavors_data = data.get('flavors') or {}
    if not isinstance(flavors_data, Mapping):
        raise WorkloadFileError('flavors must be a mapping of name to flavor')
    flavors.update({str(name): _flavor(str(name), f) for name, f in flavors_data.items()})
    requests_data = data.get('requests') or []
    if not isinstance(requests_data, list):
        raise WorkloadFileError('requests must be a list')
    fill_data = data.get('fill') or []
    if not isinstance(fill_data, list):
        fill_data = [fill_data]
    workload = WorkloadFile(
        flavors=flavors,
        requests=tuple(_request(r, i, flavors) for i, r in enumerate(requests_data)),
        fills=tuple(_fill(f, i, flavors) for i, f in enumerate(fill_data)))
    if not workload.requests and not workload.fills:
        raise WorkloadFileError('the workload has neither requests nor fill')
    return workload


def load_workload(path: str) -> WorkloadFile:
    try:
        with open(path, encoding='utf-8') as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise WorkloadFileError(f'cannot read workload {path}: {e.strerror or e}') from None
    except yaml.YAMLError as e:
        raise WorkloadFileError(f'workload {path} is neither YAML nor JSON: {e}') from None
    if data is None:
        raise WorkloadFileError(f'workload {path} is empty')
    return parse_workload(data)


def flavor_def(workload: WorkloadFile, name: str) -> FlavorDef:
    """The simulator's FlavorDef of ``name`` (a stable id from the sorted flavor names)."""
    flavor = workload.flavors[name]
    flavor_id = _FIRST_FLAVOR_ID + sorted(workload.flavors).index(name)
    return FlavorDef(name, flavor_id, vcpus=flavor.vcpus, memory_mb=flavor.memory_mb,
                     root_gb=flavor.disk_gb, weight=0)


def boot_request(workload: WorkloadFile, *, index: int, flavor: str, instances: int = 1,
                 anti_affinity: bool = False, az: str | None = None) -> BootRequest:
    """The ``index``-th boot of a run: uuids derive from the index, so runs are repeatable."""
    return BootRequest(
        index=index, flavor=flavor_def(workload, flavor), required_traits=(),
        instance_uuids=tuple(_uuid(0, 'capacity-instance', index, n) for n in range(instances)),
        project_id=PROJECTS[index % len(PROJECTS)], availability_zone=az,
        group_uuid=_uuid(0, 'capacity-group', index) if anti_affinity else None,
        request_id=f'req-{_uuid(0, "capacity-request", index)}',
        extra_specs=dict(workload.flavors[flavor].extra_specs))
