"""Does a requested NUMA topology fit a host's NUMA cells? (pure)

Nova's ``numa_fit_instance_to_host`` semantics, written for this service's
data. Each instance cell must go to its own host cell; the first assignment
found, trying host cells in order, wins (Nova tries the permutations in the
same order). An instance cell fits a host cell when:

* memory: with a page size requested, the host cell has enough free pages of
  that size (``small``: the smallest size, ``large``: any other size, largest
  first, ``any``: largest first) and the memory is a whole number of pages;
  without one, it fits into the cell's pages of the smallest size (or its
  memory when it reports no pages) — an instance never overcommits on itself;
* shared vCPUs (policy shared, mixed, or none): no more than the cell's shared
  CPUs, and with the node's ``cpu_allocation_ratio`` / ``ram_allocation_ratio``
  known, ``cpu_usage`` and ``memory_usage`` stay within cell size × ratio;
* pinned vCPUs (dedicated, mixed), plus one for the emulator threads on the
  first cell with ``hw:emulator_threads_policy=isolate``: that many free
  dedicated CPUs and free (never overcommitted) memory, placed by the thread
  policy: ``require`` — on SMT sibling threads only; ``isolate`` — one vCPU per
  fully free core, the whole core taken; ``prefer`` or none — siblings first,
  any free CPU otherwise;
* then, for the whole assignment: the request's PCI devices with their NUMA
  affinity (when the host's PCI pools are known), and the physical and tunnelled
  networks of the request on a chosen cell whenever some cell of the host has
  affinity to them.

:func:`apply_fit` returns the host topology with a fit's usage added, for the
next instance of the same request (Nova's ``consume_from_request``).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.filters.pci_fit import PciFit
from scheduler.objects.numa import HostNUMACell, HostNUMATopology, MemoryPages
from scheduler.request.numa import (
    PAGES_ANY,
    PAGES_LARGE,
    PAGES_SMALL,
    InstanceCell,
    InstanceTopology,
)

#: Complete assignments checked for PCI devices and networks before giving up
#: (Nova tries every permutation; 16 host cells and 8 instance cells would be
#: half a billion).
MAX_ASSIGNMENTS = 10_000

# Why an instance cell does not fit a host cell, worded for users (no host data).
PAGES = 'no NUMA node has enough free memory pages of the requested size'
MEMORY = 'not enough memory in a NUMA node'
SHARED_CPUS = 'not enough shared CPUs in a NUMA node'
DEDICATED_CPUS = 'not enough free dedicated CPUs in a NUMA node'
REQUIRE = "thread policy 'require' needs free SMT sibling threads in a NUMA node"
ISOLATE = "thread policy 'isolate' needs enough free whole cores in a NUMA node"
CPU_LIMIT = 'a NUMA node would exceed its CPU overcommit (cpu_allocation_ratio)'
RAM_LIMIT = 'a NUMA node would exceed its memory overcommit (ram_allocation_ratio)'
NETWORKS = 'the networks NUMA affinity asks for are not on the chosen NUMA nodes'
TOO_MANY = 'too many NUMA placements to try'


@dataclass(frozen=True)
class Ratios:
    cpu: float | None = None
    ram: float | None = None


@dataclass(frozen=True)
class CellFit:
    instance_cell: InstanceCell
    host_cell_id: int
    pinned: frozenset[int] = frozenset()   # host CPUs taken (whole cores for isolate)
    page_size_kb: int | None = None        # the page size the memory comes from
    pages: int = 0


@dataclass(frozen=True)
class NumaFit:
    cells: tuple[CellFit, ...] | None
    reason: str | None = None
    pci: PciFit | None = None

    @property
    def passed(self) -> bool:
        return self.cells is not None


@dataclass(frozen=True)
class Networks:
    physnets: frozenset[str] = frozenset()
    tunneled: bool = False


# Checks the whole assignment's PCI devices (given the chosen host cells).
PciCheck = Callable[[Sequence[HostNUMACell]], PciFit]


@dataclass
class _Search:
    pairs: list[list[CellFit | str]]   # [instance cell][host cell position]
    leaf: Callable[[list[int]], tuple[str | None, PciFit | None]]
    best_depth: int = -1
    reason: str | None = None
    assignments: int = 0
    found: list[int] | None = None
    pci: PciFit | None = None
    used: set[int] = field(default_factory=set)

    def run(self, chosen: list[int]) -> bool:
        depth = len(chosen)
        if depth == len(self.pairs):
            self.assignments += 1
            reason, pci = self.leaf(chosen)
            if reason is None:
                self.found, self.pci = list(chosen), pci
                return True
            self._note(depth, reason)
            return self.assignments >= MAX_ASSIGNMENTS
        for position, pair in enumerate(self.pairs[depth]):
            if position in self.used:
                continue
            if isinstance(pair, str):
                self._note(depth, pair)
                continue
            self.used.add(position)
            chosen.append(position)
            done = self.run(chosen)
            chosen.pop()
            self.used.discard(position)
            if done:
                return True
        return False

    def _note(self, depth: int, reason: str) -> None:
        # The reason of the assignment that got furthest is the most telling.
        if depth > self.best_depth:
            self.best_depth, self.reason = depth, reason


def fit_instance(host: HostNUMATopology, instance: InstanceTopology, *, ratios: Ratios,
                 pci_check: PciCheck | None = None,
                 networks: Networks | None = None,
                 prefer_cells_without_pci: frozenset[int] = frozenset()) -> NumaFit:
    """The first assignment of instance cells to host cells that fits, or why none does.

    ``prefer_cells_without_pci``: cells that have PCI devices, tried last when the
    request asks for no device (Nova keeps them for requests that do).
    """
    wanted = len(instance.cells)
    if len(host.cells) < wanted:
        return NumaFit(None, f'the host has fewer NUMA nodes than the {wanted} requested')
    cells = sorted(host.cells, key=lambda c: c.id in prefer_cells_without_pci)
    pairs: list[list[CellFit | str]] = [
        [fit_cell(h, c, ratios, reserved=1 if i == 0 and instance.emulator_threads_isolated
                  else 0) for h in cells]
        for i, c in enumerate(instance.cells)]

    def leaf(chosen: list[int]) -> tuple[str | None, PciFit | None]:
        chosen_cells = [cells[p] for p in chosen]
        if networks is not None and not _networks_fit(host, chosen_cells, networks):
            return NETWORKS, None
        if pci_check is not None:
            pci = pci_check(chosen_cells)
            if not pci.passed:
                return pci.reason, pci
            return None, pci
        return None, None

    search = _Search(pairs, leaf)
    search.run([])
    if search.found is None:
        reason = search.reason or MEMORY
        if search.assignments >= MAX_ASSIGNMENTS:
            reason = f'{TOO_MANY} (tried {MAX_ASSIGNMENTS}); last: {reason}'
        return NumaFit(None, reason)
    fitted = tuple(pairs[i][p] for i, p in enumerate(search.found))
    return NumaFit(fitted, pci=search.pci)  # type: ignore[arg-type]


def fit_cell(host: HostNUMACell, cell: InstanceCell, ratios: Ratios, *,
             reserved: int = 0) -> CellFit | str:
    """How ``cell`` fits ``host``, or why it does not (one of this module's reasons)."""
    page_size: int | None = None
    pages = 0
    memory_kb = cell.memory * 1024
    if cell.pagesize:
        page_size = _requested_pages(host, cell.pagesize, memory_kb)
        if page_size is None:
            return PAGES
        pages = memory_kb // page_size
    elif host.mempages:
        smallest = min(host.mempages, key=lambda p: p.size_kb)
        if not _fits_pages(smallest, memory_kb, use_free=False):
            return MEMORY
    elif cell.memory > host.memory:
        return MEMORY

    if cell.pinned and len(cell.pcpuset) + reserved > len(host.pcpuset):
        return DEDICATED_CPUS
    if cell.shared and len(cell.cpuset) > len(host.cpuset):
        return SHARED_CPUS

    pinned: frozenset[int] = frozenset()
    if cell.pinned:
        count = len(cell.pcpuset) + reserved
        if count > len(host.free_pcpus):
            return DEDICATED_CPUS
        if cell.memory > host.avail_memory:
            return MEMORY
        chosen = pick_pcpus(host, count, cell.cpu_thread_policy)
        if isinstance(chosen, str):
            return chosen
        pinned = chosen

    if cell.shared:
        if ratios.cpu is not None and \
                host.cpu_usage + len(cell.cpuset) > len(host.cpuset) * ratios.cpu:
            return CPU_LIMIT
        if ratios.ram is not None and \
                host.memory_usage + cell.memory > host.memory * ratios.ram:
            return RAM_LIMIT
    return CellFit(cell, host.id, pinned, page_size, pages)


def pick_pcpus(host: HostNUMACell, count: int, thread_policy: str | None
               ) -> frozenset[int] | str:
    """The host CPUs ``count`` pinned vCPUs take under ``thread_policy`` (isolate: whole
    cores), or the reason there are none."""
    if count == 0:
        return frozenset()  # a mixed cell whose vCPUs are all shared
    cores = host.free_cores()
    if thread_policy == 'isolate':
        whole = [c for c in cores if len(c) >= host.threads_per_core]
        if len(whole) < count:
            return ISOLATE
        return frozenset().union(*whole[:count])
    if thread_policy == 'require' and host.threads_per_core <= 1:
        return REQUIRE
    lowest = 2 if thread_policy == 'require' else 1
    for threads in range(max((len(c) for c in cores), default=0), lowest - 1, -1):
        usable = [c for c in cores if len(c) >= threads]
        if threads * len(usable) >= count:
            taken = [cpu for core in usable for cpu in sorted(core)[:threads]]
            return frozenset(taken[:count])
    if thread_policy == 'require':
        return REQUIRE
    # prefer (or none): any free CPUs, core boundaries aside.
    return frozenset(sorted(host.free_pcpus)[:count])


def apply_fit(host: HostNUMATopology, fit: NumaFit) -> HostNUMATopology:
    """``host`` with the fit's usage added (shared CPUs, memory, pinned CPUs, pages)."""
    if fit.cells is None:
        return host
    by_id: Mapping[int, CellFit] = {c.host_cell_id: c for c in fit.cells}
    cells = []
    for cell in host.cells:
        used = by_id.get(cell.id)
        if used is None:
            cells.append(cell)
            continue
        mempages = tuple(
            dataclasses.replace(p, used=p.used + used.pages)
            if used.pages and p.size_kb == used.page_size_kb else p for p in cell.mempages)
        cells.append(dataclasses.replace(
            cell, cpu_usage=cell.cpu_usage + len(used.instance_cell.cpuset),
            memory_usage=cell.memory_usage + used.instance_cell.memory,
            pinned_cpus=cell.pinned_cpus | used.pinned, mempages=mempages))
    return host.with_cells(cells)


def _requested_pages(host: HostNUMACell, requested: int, memory_kb: int) -> int | None:
    sizes = sorted((p.size_kb for p in host.mempages), reverse=True)
    if requested == PAGES_SMALL:
        candidates = sizes[-1:]
    elif requested == PAGES_LARGE:
        candidates = sizes[:-1]
    elif requested == PAGES_ANY:
        candidates = sizes
    else:
        candidates = [requested] if requested in sizes else []
    for size in candidates:
        pages = host.pages(size)
        if pages is not None and _fits_pages(pages, memory_kb, use_free=True):
            return size
    return None


def _fits_pages(pages: MemoryPages, memory_kb: int, *, use_free: bool) -> bool:
    available = pages.free_kb if use_free else pages.total_kb
    return memory_kb <= available and memory_kb % pages.size_kb == 0


def _networks_fit(host: HostNUMATopology, chosen: Sequence[HostNUMACell],
                  networks: Networks) -> bool:
    """A physnet (or tunnelled networks) with affinity to some host cell must have it
    to a chosen cell; networks without affinity anywhere constrain nothing."""
    missing = set(networks.physnets)
    for cell in chosen:
        missing -= cell.physnets
    if any(missing & cell.physnets for cell in host.cells):
        return False
    if networks.tunneled and not any(c.tunneled for c in chosen):
        if any(c.tunneled for c in host.cells):
            return False
    return True
