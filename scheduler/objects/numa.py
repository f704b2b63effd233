"""A compute host's NUMA topology as plain, immutable data (no Nova import).

nova-compute writes the topology into its cell database (``compute_nodes.
numa_topology``, the JSON of a ``NUMATopology`` primitive whose ``cells`` are
``NUMACell`` objects with ``NUMAPagesTopology`` memory pages); the hosts file
may carry the same fields. :func:`parse_host_numa_topology` reads either into
:class:`HostNUMATopology`. Field names and meanings are Nova's:

* ``cpuset``: host CPUs for unpinned (shared) guests, ``pcpuset``: for pinned
  guests (``[compute] cpu_shared_set`` / ``cpu_dedicated_set``);
* ``memory`` MB, ``cpu_usage`` (shared CPUs in use), ``memory_usage`` MB,
  ``pinned_cpus`` (dedicated CPUs in use), ``siblings`` (SMT thread sets),
  ``mempages`` (page size in KiB, total/used/reserved pages), ``socket``,
  ``network_metadata`` (physnets and tunnelled networks with affinity to the cell).

Two additions of this service, never in Nova's rows: the node's
``cpu_allocation_ratio`` / ``ram_allocation_ratio`` (Nova reads them from other
columns of the same row; the per-cell overcommit limits need them) and a cell's
``provider_uuid`` (a NUMA node modelled as a resource provider in Placement).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from scheduler.objects.host_fields import Fields, cpu_set, load_json

_TOPOLOGY_KEYS = frozenset({'cells', 'cpu_allocation_ratio', 'ram_allocation_ratio'})
_CELL_KEYS = frozenset({
    'id', 'cpuset', 'pcpuset', 'memory', 'cpu_usage', 'memory_usage', 'pinned_cpus',
    'siblings', 'mempages', 'network_metadata', 'socket', 'provider_uuid'})
_PAGES_KEYS = frozenset({'size_kb', 'total', 'used', 'reserved'})
_NETWORK_KEYS = frozenset({'physnets', 'tunneled'})


@dataclass(frozen=True)
class MemoryPages:
    """Pages of one size on one NUMA cell (Nova's NUMAPagesTopology)."""

    size_kb: int
    total: int
    used: int = 0
    reserved: int = 0

    @property
    def free(self) -> int:
        return self.total - self.used - self.reserved

    @property
    def free_kb(self) -> int:
        return self.free * self.size_kb

    @property
    def total_kb(self) -> int:
        return self.total * self.size_kb


@dataclass(frozen=True)
class CpuOrder:
    """How Nova's scheduler holds a cell's ``pcpuset`` and ``siblings`` (Python sets).

    Nova picks pinned CPUs in the iteration order of those sets, and a set of
    integers iterates in hash-table order, not sorted ({5, 17} iterates 17, 5): the
    order follows from the JSON lists nova-compute wrote and how many times Nova
    has copied the sets since (once when reading the row, once more each time
    ``numa_usage_from_instance_numa`` rebuilds the cell). Nothing else copies them:
    nova-scheduler fits NUMATopologyFilter and ``consume_from_request`` on the same
    HostState. A ``copy.deepcopy`` of it would rebuild each set from its iteration
    order (``set(list(s))``), which lays it out anew: the sibling set {3, 11} read
    from [3, 11] iterates 3, 11 (its free CPUs 11, 3), its deep copy 11, 3 (free
    CPUs 3, 11), so a deep-copied HostState no longer pins what nova-scheduler pins.
    """

    pcpuset: tuple[int, ...]
    siblings: tuple[tuple[int, ...], ...]
    copies: int = 1

    def copied(self) -> CpuOrder:
        return dataclasses.replace(self, copies=self.copies + 1)


@dataclass(frozen=True)
class HostNUMACell:
    id: int
    cpuset: frozenset[int] = frozenset()
    pcpuset: frozenset[int] = frozenset()
    memory: int = 0
    cpu_usage: int = 0
    memory_usage: int = 0
    pinned_cpus: frozenset[int] = frozenset()
    siblings: tuple[frozenset[int], ...] = ()
    mempages: tuple[MemoryPages, ...] = ()
    socket: int | None = None
    physnets: frozenset[str] = frozenset()
    tunneled: bool = False
    #: The cell's resource provider in Placement, when Placement models NUMA nodes.
    provider_uuid: str | None = None
    #: The order Nova iterates the CPU sets in (None: sorted, as written by hand).
    cpu_order: CpuOrder | None = field(default=None, compare=False, repr=False)

    @property
    def free_pcpus(self) -> frozenset[int]:
        return self.pcpuset - self.pinned_cpus

    @property
    def avail_memory(self) -> int:
        return self.memory - self.memory_usage

    @property
    def threads_per_core(self) -> int:
        return max((len(s) for s in self.siblings), default=0) or 1

    def free_cores(self) -> list[frozenset[int]]:
        """The free dedicated CPUs grouped by core (SMT siblings), in sibling order;
        a dedicated CPU no sibling set names is a core of its own."""
        free = self.free_pcpus
        cores = [s & free for s in self.siblings]
        named = frozenset().union(*self.siblings) if self.siblings else frozenset()
        cores.extend(frozenset({cpu}) for cpu in sorted(free - named))
        return [c for c in cores if c]

    def pages(self, size_kb: int) -> MemoryPages | None:
        return next((p for p in self.mempages if p.size_kb == size_kb), None)


@dataclass(frozen=True)
class HostNUMATopology:
    cells: tuple[HostNUMACell, ...]
    #: The compute node's ratios (``compute_nodes`` columns, or the hosts file);
    #: None when no source gave them.
    cpu_allocation_ratio: float | None = None
    ram_allocation_ratio: float | None = None

    @property
    def has_threads(self) -> bool:
        """Whether any cell has SMT siblings (Nova's ``NUMATopology.has_threads``)."""
        return any(len(s) > 1 for cell in self.cells for s in cell.siblings)

    def with_ratios(self, cpu: float | None, ram: float | None) -> HostNUMATopology:
        return dataclasses.replace(
            self, cpu_allocation_ratio=cpu if cpu is not None else self.cpu_allocation_ratio,
            ram_allocation_ratio=ram if ram is not None else self.ram_allocation_ratio)

    def with_cells(self, cells: Iterable[HostNUMACell]) -> HostNUMATopology:
        return dataclasses.replace(self, cells=tuple(cells))


def parse_host_numa_topology(value: Any, *, where: str, strict: bool) -> HostNUMATopology:
    """A NUMATopology primitive (or its JSON text, or the hosts file's mapping).

    Raises :class:`~scheduler.exceptions.HostDataError` naming the field.
    """
    fields = Fields(load_json(value, where), where, allowed=_TOPOLOGY_KEYS, strict=strict,
                    kind='NUMATopology')
    cells = [_cell(item, f'{where}.cells[{i}]', strict)
             for i, item in enumerate(fields.items('cells'))]
    ids = [c.id for c in cells]
    if len(set(ids)) != len(ids):
        raise fields.error('cells', f'cell ids must be unique, got {ids}')
    return HostNUMATopology(cells=tuple(cells),
                            cpu_allocation_ratio=fields.number('cpu_allocation_ratio'),
                            ram_allocation_ratio=fields.number('ram_allocation_ratio'))


def _cell(value: Any, where: str, strict: bool) -> HostNUMACell:
    f = Fields(value, where, allowed=_CELL_KEYS, strict=strict, kind='NUMACell')
    siblings = []
    for i, item in enumerate(f.items('siblings')):
        siblings.append(Fields({'s': item}, f'{where}.siblings[{i}]', allowed=(), strict=False,
                               kind='').cpus('s'))
    pages = []
    for i, item in enumerate(f.items('mempages')):
        p = Fields(item, f'{where}.mempages[{i}]', allowed=_PAGES_KEYS, strict=strict,
                   kind='NUMAPagesTopology')
        pages.append(MemoryPages(size_kb=p.integer('size_kb', minimum=1), total=p.integer('total'),
                                 used=p.integer('used', default=0),
                                 reserved=p.integer('reserved', default=0)))
    physnets: frozenset[str] = frozenset()
    tunneled = False
    if f.has('network_metadata'):
        n = Fields(f.data['network_metadata'], f'{where}.network_metadata',
                   allowed=_NETWORK_KEYS, strict=strict, kind='NetworkMetadata')
        nets = n.items('physnets')
        if not all(isinstance(x, str) and x for x in nets):
            raise n.error('physnets', f'must be a list of names, got {nets!r}')
        physnets = frozenset(nets)
        tunneled_value = n.data.get('tunneled', False)
        if not isinstance(tunneled_value, bool):
            raise n.error('tunneled', f'must be true or false, got {tunneled_value!r}')
        tunneled = tunneled_value
    cell = HostNUMACell(
        cpu_order=CpuOrder(_listed(f.data.get('pcpuset')),
                           tuple(_listed(item) for item in f.items('siblings'))),
        id=f.integer('id'), cpuset=f.cpus('cpuset'), pcpuset=f.cpus('pcpuset'),
        memory=f.integer('memory'), cpu_usage=f.integer('cpu_usage', default=0),
        memory_usage=f.integer('memory_usage', default=0), pinned_cpus=f.cpus('pinned_cpus'),
        siblings=tuple(siblings), mempages=tuple(pages), socket=f.optional_integer('socket'),
        physnets=physnets, tunneled=tunneled, provider_uuid=f.string('provider_uuid'))
    if strict and not cell.pinned_cpus <= cell.pcpuset:
        raise f.error('pinned_cpus', 'must be a subset of pcpuset')
    return cell


def _listed(value: Any) -> tuple[int, ...]:
    """A CPU list in the order written (JSON), or sorted when written another way."""
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return tuple(value)
    if isinstance(value, str):
        return tuple(sorted(cpu_set(value, 'cpus')))
    return ()
