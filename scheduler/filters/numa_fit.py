"""Does a requested NUMA topology fit a host's NUMA cells? (pure)

Nova 34's ``nova.virt.hardware`` arithmetic, written for this service's data,
deciding as Nova does down to the host CPUs pinned:

* host cells are tried in Nova's order (``numa_fit_instance_to_host``): when the
  host has more cells than the request, emptier cells first (most free memory,
  then fewest shared CPUs used, or most free dedicated CPUs for pinned
  requests), then by the number of free PCI devices (fewest first, or most
  first for a request with PCI devices) when the host's PCI pools are known;
  assignments are tried in ``itertools.permutations`` order, the first that
  fits wins. Nova caches which (host cell, instance cell) pairs fit while it
  tries them, keyed by the instance cell's id, which a fit changes to the host
  cell's, and a fit also fixes a symbolic page size: :func:`fit_instance` keeps
  the same state, so it picks the same assignment (and gives up after
  :data:`MAX_PERMUTATIONS`).
* an instance cell fits a host cell (``_numa_fit_instance_cell``) when:

  - memory: with a page size requested, enough free pages of that size
    (``small``: the smallest size, ``large``: any other, ``any``: any, largest
    first) and a whole number of pages; without one, on a cell reporting page
    sizes, a whole number of its smallest pages, counted against their total —
    or, for pinned instances, their free count; on a cell reporting none, the
    cell's memory — for pinned instances its free memory;
  - pinned vCPUs (``dedicated``, ``mixed``), plus one for the emulator threads
    on the first instance cell with ``hw:emulator_threads_policy=isolate``: no
    more than the cell's dedicated CPUs, no more than the free ones, and placed
    as ``_pack_instance_onto_cores`` places them (:func:`pack_pcpus`);
  - shared vCPUs (``shared``, ``mixed``, none): no more than the cell's shared
    CPUs, and with the node's ratios known, ``cpu_usage`` and ``memory_usage``
    within cell size × ``cpu_allocation_ratio`` / ``ram_allocation_ratio``;
* then, for the whole assignment: the request's PCI devices with their NUMA
  affinity (when the host's PCI pools are known), and the physical and tunnelled
  networks of the request on a chosen cell whenever some cell of the host has
  affinity to them.

:func:`apply_fit` returns the host topology with a fit's usage added, for the
next instance of the same request (Nova's ``numa_usage_from_instance_numa``).
"""
from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.filters.pci_fit import PciFit
from scheduler.objects.numa import HostNUMACell, HostNUMATopology, MemoryPages
from scheduler.request.numa import (
    PAGES_ANY,
    PAGES_LARGE,
    PAGES_SMALL,
    InstanceCell,
    InstanceTopology,
)

#: Complete assignments checked for PCI devices and networks before giving up.
MAX_ASSIGNMENTS = 10_000
#: Permutations of host cells tried before giving up (Nova tries every one; 16 host
#: cells and 8 instance cells would be half a billion).
MAX_PERMUTATIONS = 100_000

# Why an instance cell does not fit a host cell, worded for users (no host data).
PAGES = 'no NUMA node has enough free memory pages of the requested size'
MEMORY = 'not enough memory in a NUMA node'
SHARED_CPUS = 'not enough shared CPUs in a NUMA node'
DEDICATED_CPUS = 'not enough free dedicated CPUs in a NUMA node'
REQUIRE = "thread policy 'require' needs free SMT sibling threads in a NUMA node"
ISOLATE = "thread policy 'isolate' needs enough free whole cores in a NUMA node"
ISOLATE_SMT = ("thread policy 'isolate' cannot be met on a NUMA node with SMT siblings "
               "whose dedicated CPUs come from cpu_dedicated_set (Nova bug 1889633)")
CPU_LIMIT = 'a NUMA node would exceed its CPU overcommit (cpu_allocation_ratio)'
RAM_LIMIT = 'a NUMA node would exceed its memory overcommit (ram_allocation_ratio)'
NETWORKS = 'the networks NUMA affinity asks for are not on the chosen NUMA nodes'
TOO_MANY = 'too many NUMA placements to try'

_ISOLATE, _REQUIRE = 'isolate', 'require'


@dataclass(frozen=True)
class Ratios:
    cpu: float | None = None
    ram: float | None = None


@dataclass(frozen=True)
class Pinning:
    """Where ``_pack_instance_onto_cores`` puts a cell's pinned vCPUs."""

    pairs: tuple[tuple[int, int], ...] = ()   # (vCPU, host CPU), vCPUs ascending
    reserved: frozenset[int] = frozenset()    # host CPUs for the emulator threads


@dataclass(frozen=True)
class CellFit:
    instance_cell: InstanceCell
    host_cell_id: int
    pinning: tuple[tuple[int, int], ...] = ()  # (vCPU, host CPU)
    reserved: frozenset[int] = frozenset()     # host CPUs for the emulator threads
    #: The page size as Nova leaves the instance cell's ``pagesize``: the size chosen
    #: when one was requested, None when none was (the memory then comes from the
    #: smallest pages).
    page_size_kb: int | None = None

    @property
    def pinned(self) -> frozenset[int]:
        """The host CPUs the cell takes (an isolated cell also takes their siblings)."""
        return frozenset(cpu for _, cpu in self.pinning) | self.reserved


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
class _CellState:
    """An instance cell as Nova's ``numa_fit_instance_to_host`` leaves it between
    permutations: a fit sets its id to the host cell's, a page size check fixes a
    symbolic page size, and packing records the last pinning."""

    id: int
    pagesize: int | None
    pinning: tuple[tuple[int, int], ...] = ()
    reserved: frozenset[int] = frozenset()


def fit_instance(host: HostNUMATopology, instance: InstanceTopology, *, ratios: Ratios,
                 pci_check: PciCheck | None = None,
                 networks: Networks | None = None,
                 pci_counts: Mapping[int, int] | None = None,
                 pci_requested: bool = False) -> NumaFit:
    """The assignment of instance cells to host cells Nova would choose, or why none fits.

    ``pci_counts``: free PCI devices per host cell id, when the host's PCI pools are
    known (Nova then orders host cells by them; ``pci_requested``: whether the
    request asks for devices).
    """
    wanted = len(instance.cells)
    if len(host.cells) < wanted:
        return NumaFit(None, f'the host has fewer NUMA nodes than the {wanted} requested')
    cells = host_cell_order(host, instance, pci_counts, pci_requested)
    states = [_CellState(c.id, c.pagesize) for c in instance.cells]
    fits: set[tuple[int, int]] = set()
    not_fit: dict[tuple[int, int], str] = {}
    best_depth, reason = -1, None
    assignments = 0

    def note(depth: int, why: str) -> None:
        # The reason of the assignment that got furthest is the most telling.
        nonlocal best_depth, reason
        if depth > best_depth:
            best_depth, reason = depth, why

    for tried, permutation in enumerate(itertools.permutations(cells, wanted)):
        if tried >= MAX_PERMUTATIONS:
            return NumaFit(None, f'{TOO_MANY} (tried {MAX_PERMUTATIONS}); last: '
                                 f'{reason or MEMORY}')
        chosen: list[CellFit] = []
        for depth, (host_cell, cell, state) in enumerate(
                zip(permutation, instance.cells, states, strict=True)):
            pair = (host_cell.id, state.id)
            if pair in not_fit:
                note(depth, not_fit[pair])
                break
            if pair not in fits:
                got = _fit_and_update(host_cell, cell, state, ratios,
                                      reserved=1 if instance.emulator_threads_isolated
                                      and not chosen else 0)
                if got is not None:
                    not_fit[pair] = got
                    note(depth, got)
                    break
                fits.add(pair)
            # A pair Nova found fitting before is taken as it is: the cell keeps
            # the page size and pinning it was last fitted with.
            state.id = host_cell.id
            chosen.append(CellFit(cell, host_cell.id, state.pinning, state.reserved,
                                  state.pagesize))
        else:
            assignments += 1
            chosen_cells = list(permutation)
            pci: PciFit | None = None
            if pci_check is not None:
                pci = pci_check(chosen_cells)
                if not pci.passed:
                    note(wanted, pci.reason or NETWORKS)
                    if assignments >= MAX_ASSIGNMENTS:
                        break
                    continue
            if networks is not None and not _networks_fit(host, chosen_cells, networks):
                note(wanted, NETWORKS)
                if assignments >= MAX_ASSIGNMENTS:
                    break
                continue
            return NumaFit(tuple(chosen), pci=pci)
    if assignments >= MAX_ASSIGNMENTS:
        return NumaFit(None, f'{TOO_MANY} (tried {MAX_ASSIGNMENTS}); last: {reason}')
    return NumaFit(None, reason or MEMORY)


def host_cell_order(host: HostNUMATopology, instance: InstanceTopology,
                    pci_counts: Mapping[int, int] | None = None,
                    pci_requested: bool = False) -> list[HostNUMACell]:
    """The order Nova's ``numa_fit_instance_to_host`` tries host cells in (spreading:
    ``[compute] packing_host_numa_cells_allocation_strategy`` is false by default)."""
    cells = list(host.cells)
    if len(cells) <= len(instance.cells):
        return cells  # every cell is used: Nova sorts nothing
    # Stable sorts, each a tie-break of the next: free memory, CPUs, PCI devices.
    cells.sort(key=lambda c: c.avail_memory, reverse=True)
    if instance.cells[0].pinned:
        cells.sort(key=lambda c: len(c.free_pcpus), reverse=True)
    else:
        cells.sort(key=lambda c: c.cpu_usage)
    if pci_counts is not None:
        cells.sort(key=lambda c: pci_counts.get(c.id, 0), reverse=pci_requested)
    return cells


def _fit_and_update(host: HostNUMACell, cell: InstanceCell, state: _CellState,
                    ratios: Ratios, *, reserved: int) -> str | None:
    """Fit ``cell`` as ``state`` has it now; update ``state`` as Nova's fit mutates the
    instance cell. None when it fits, else why not."""
    if state.pagesize:
        # Nova stores the size it found before its other checks, fit or not.
        size = _requested_pages(host, state.pagesize, cell.memory * 1024)
        if size is not None:
            state.pagesize = size
    got, packed = _fit_cell(host, dataclasses.replace(cell, pagesize=state.pagesize), ratios,
                            reserved=reserved)
    if packed is not None:
        # Packing renames and pins the cell even when the overcommit limits then
        # reject it.
        state.id, state.pinning, state.reserved = host.id, packed.pairs, packed.reserved
    return got if isinstance(got, str) else None


def fit_cell(host: HostNUMACell, cell: InstanceCell, ratios: Ratios, *,
             reserved: int = 0) -> CellFit | str:
    """How ``cell`` fits ``host``, or why it does not (one of this module's reasons);
    follows ``nova.virt.hardware._numa_fit_instance_cell``."""
    return _fit_cell(host, cell, ratios, reserved=reserved)[0]


def _fit_cell(host: HostNUMACell, cell: InstanceCell, ratios: Ratios, *,
              reserved: int = 0) -> tuple[CellFit | str, Pinning | None]:
    """:func:`fit_cell`, and the pinning when packing succeeded (fit or not)."""
    page_size: int | None = None
    memory_kb = cell.memory * 1024
    if cell.pagesize:
        page_size = _requested_pages(host, cell.pagesize, memory_kb)
        if page_size is None:
            return PAGES, None
    elif host.mempages:
        # Shared guests may overcommit the smallest pages (counted against their
        # total); pinned guests, for legacy reasons, only take free ones.
        smallest = host.pages(min(p.size_kb for p in host.mempages))
        assert smallest is not None
        if not _fits_pages(smallest, memory_kb, use_free=cell.pinned):
            return MEMORY, None
    elif cell.memory > (host.avail_memory if cell.pinned else host.memory):
        return MEMORY, None

    # An instance never overcommits CPUs on its own.
    if cell.pinned and len(cell.pcpuset) + reserved > len(host.pcpuset):
        return DEDICATED_CPUS, None
    if cell.shared and len(cell.cpuset) > len(host.cpuset):
        return SHARED_CPUS, None

    pinning = Pinning()
    packed: Pinning | None = None
    if cell.pinned:
        if len(cell.pcpuset) + reserved > len(host.free_pcpus):
            return DEDICATED_CPUS, None
        got = pack_pcpus(host, cell.pcpuset, cell.cpu_thread_policy, reserved=reserved)
        if isinstance(got, str):
            return got, None
        pinning = packed = got

    if cell.shared:
        if ratios.cpu is not None and \
                host.cpu_usage + len(cell.cpuset) > len(host.cpuset) * ratios.cpu:
            return CPU_LIMIT, packed
        if ratios.ram is not None and \
                host.memory_usage + cell.memory > host.memory * ratios.ram:
            return RAM_LIMIT, packed
    return CellFit(cell, host.id, pinning.pairs, pinning.reserved,
                   page_size if cell.pagesize else None), packed


def pack_pcpus(host: HostNUMACell, vcpus: Iterable[int], thread_policy: str | None, *,
               reserved: int = 0) -> Pinning | str:
    """The host CPUs ``vcpus`` are pinned to, and ``reserved`` more for the emulator
    threads, or why they cannot be; follows ``nova.virt.hardware.
    _pack_instance_onto_cores`` CPU for CPU.

    Free CPUs are grouped by SMT sibling set. ``isolate``: one vCPU per fully free
    core (on hosts whose dedicated and shared CPU sets are the same, Nova's legacy
    ``vcpu_pin_set``; with SMT and ``cpu_dedicated_set`` Nova refuses it).
    Otherwise the most threads per core that hold all vCPUs first (``require``: at
    least two), then (not ``require``) any free CPUs. CPUs are taken in the order
    Nova iterates its sets.
    """
    vcpus = sorted(vcpus)
    siblings = _nova_siblings(host)
    threads_per_core = max(map(len, siblings), default=0) or 1
    free = _nova_set(_order(host).pcpuset, _order(host).copies) - set(host.pinned_cpus)
    sibling_sets: dict[int, list[set[int]]] = collections.defaultdict(list)
    for sib in (s & free for s in siblings):
        for threads in range(1, len(sib) + 1):
            sibling_sets[threads].append(sib)

    pairs: list[tuple[int, int]] | None
    taken: set[int] | None = None
    if thread_policy == _ISOLATE:
        if threads_per_core not in sibling_sets:
            return ISOLATE
        if threads_per_core != 1 and host.pcpuset != host.cpuset:
            return ISOLATE_SMT
        pairs = _pairs(1, sibling_sets[threads_per_core], vcpus)
        taken = _reserve(sibling_sets[1], pairs, reserved, isolate=True)
        if not pairs or (reserved and not taken):
            return ISOLATE
        return Pinning(tuple(pairs), frozenset(taken or ()))
    if thread_policy == _REQUIRE and threads_per_core <= 1:
        return REQUIRE
    pairs, threads = None, 1
    # Most threads per core first: Nova's way to spread guests over cores.
    for threads, cores in sorted(sibling_sets.items(), reverse=True):
        if thread_policy == _REQUIRE and threads <= 1:
            continue
        pairs = _pairs(threads, cores, vcpus)
        taken = _reserve(sibling_sets[1], pairs, reserved)
        if pairs is None or (reserved and not taken):
            continue
        break
    if thread_policy != _REQUIRE and not pairs:
        # Any free CPUs, each thread as a core of its own.
        singles = [{cpu} for cpu in itertools.chain(*sibling_sets[1])]
        pairs = _pairs(threads, singles, vcpus)
        taken = _reserve(singles, pairs, reserved)
    if pairs is None or (reserved and not taken):
        return REQUIRE if thread_policy == _REQUIRE else DEDICATED_CPUS
    return Pinning(tuple(pairs), frozenset(taken or ()))


def _pairs(threads: int, cores: Sequence[set[int]], vcpus: Sequence[int]
           ) -> list[tuple[int, int]] | None:
    """Nova's ``_get_pinning``: the first ``threads`` CPUs of each core, in order."""
    if threads * len(cores) < len(vcpus):
        return None
    usable = itertools.chain(*(list(core)[:threads] for core in cores))
    return list(zip(vcpus, usable, strict=False))  # the vCPUs may be fewer


def _reserve(cores: Sequence[set[int]], pairs: list[tuple[int, int]] | None, count: int, *,
             isolate: bool = False) -> set[int] | None:
    """Nova's ``_get_reserved``: the first ``count`` CPUs the pinning left free (for
    isolate, on cores it left untouched)."""
    if not pairs or not count:
        return None
    usable = [list(core) for core in cores]
    for _, cpu in pairs:
        for core in usable:
            if cpu in core:
                if isolate:
                    usable.remove(core)
                else:
                    core.remove(cpu)
    return set(list(itertools.chain(*usable))[:count]) or None


def _order(host: HostNUMACell) -> _Order:
    if host.cpu_order is not None:
        return _Order(host.cpu_order.pcpuset, host.cpu_order.siblings, host.cpu_order.copies)
    return _Order(tuple(sorted(host.pcpuset)),
                  tuple(tuple(sorted(s)) for s in host.siblings), 1)


@dataclass(frozen=True)
class _Order:
    pcpuset: tuple[int, ...]
    siblings: tuple[tuple[int, ...], ...]
    copies: int


def _nova_siblings(host: HostNUMACell) -> list[set[int]]:
    """The cell's sibling sets as Nova holds them; a cell that names none (written by
    hand: libvirt names every CPU) has one per CPU."""
    order = _order(host)
    if not order.siblings:
        return [{cpu} for cpu in sorted(host.pcpuset | host.cpuset)]
    return [_nova_set(s, order.copies) for s in order.siblings]


def _nova_set(values: Sequence[int], copies: int) -> set[int]:
    """A set laid out as Nova's: built from the JSON list (``Set.from_primitive``),
    then copied ``copies`` times by ``Set.coerce`` (element by element, then merged),
    so that it iterates in the same order."""
    result = {v for v in values}
    for _ in range(copies):
        items: set[int] = set()
        for v in result:
            items.add(v)
        result = set()
        result.update(items)
    return result


def apply_fit(host: HostNUMATopology, fit: NumaFit) -> HostNUMATopology:
    """``host`` with the fit's usage added; follows ``nova.virt.hardware.
    numa_usage_from_instance_numa``: shared vCPUs and memory on every fitted cell,
    the memory's pages of the size it was fitted on (the smallest when none was
    asked for), pinned and emulator CPUs (with ``isolate``, their whole sibling
    sets)."""
    if fit.cells is None:
        return host
    cells = []
    for cell in host.cells:
        order = cell.cpu_order.copied() if cell.cpu_order is not None else None
        for used in fit.cells:
            if used.host_cell_id != cell.id:
                continue
            instance = used.instance_cell
            size = used.page_size_kb if used.page_size_kb else (
                min(p.size_kb for p in cell.mempages) if cell.mempages else None)
            # Nova divides in floats and truncates when storing the count.
            mempages = tuple(
                dataclasses.replace(p, used=int(max(0, p.used + instance.memory * 1024
                                                    / p.size_kb)))
                if p.size_kb == size else p for p in cell.mempages)
            pinned = cell.pinned_cpus
            if instance.pinned:
                cpus = used.pinned
                if instance.cpu_thread_policy == _ISOLATE and cell.siblings:
                    cpus = frozenset().union(*(s for s in cell.siblings if s & cpus))
                pinned = pinned | cpus
            cell = dataclasses.replace(
                cell, cpu_usage=cell.cpu_usage + len(instance.cpuset),
                memory_usage=cell.memory_usage + instance.memory,
                pinned_cpus=pinned, mempages=mempages)
        cells.append(dataclasses.replace(cell, cpu_order=order))
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
