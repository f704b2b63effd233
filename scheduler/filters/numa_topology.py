"""NUMATopologyFilter: the requested NUMA topology must fit the host's NUMA cells.

Nova 34's candidate filter: for each allocation candidate, the instance's NUMA
cells (from the RequestSpec's ``numa_topology``, else derived from the flavor
and image: ``hw:numa_nodes``, ``hw:numa_cpus.N``/``hw:numa_mem.N``, CPU
pinning, thread and emulator-thread policies, ``hw:mem_page_size``) must fit
distinct host cells (:mod:`scheduler.filters.numa_fit`): memory and page sizes,
shared CPUs within the node's ``cpu_allocation_ratio``/``ram_allocation_ratio``,
free dedicated CPUs placed by the thread policy, the request's PCI devices with
their NUMA affinity, and the NUMA affinity of its networks. A candidate that
allocates from NUMA node providers (cells that name their ``provider_uuid``)
must fit those cells; Nova 34 models no NUMA node in Placement, so otherwise
the whole host is judged for every candidate. A passing host gets Nova's
``limits['numa_topology']`` (the ratios and network metadata) for the compute
node's own claim.

Host data (doc/host-data.md): the topology comes from the cell databases
(``[cell_database] connections``) or the hosts file (``numa_topology``).

* No topology known for a host, request with one: the host fails, as in Nova
  (which fails hosts without a topology), with a reason that says the data is
  missing, and a WARNING once per host naming the sources. Passing it would
  let pinned or huge-page guests land where they cannot start.
* Allocation ratios unknown (a hosts file entry without them): the per-node
  overcommit limits of shared CPUs and memory are not checked (as Nova's
  compute does without limits; Placement still enforces the host's totals),
  and no ``limits`` are sent; WARNING once per host.
* PCI pools unknown while the request has PCI devices: their NUMA affinity is
  not checked (as in Nova without pools; PciPassthroughFilter judges the
  devices); WARNING once per host.
"""
from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

from scheduler.exceptions import RequestTranslationError
from scheduler.filters.base import FilterResult, host_label
from scheduler.filters.candidate import BaseCandidateFilter, RequestMemo
from scheduler.filters.log_once import LogOnce
from scheduler.filters.numa_fit import (
    Networks,
    NumaFit,
    PciCheck,
    Ratios,
    apply_fit,
    fit_instance,
)
from scheduler.filters.pci_fit import NumaCells, PciFit, fit_requests, use_devices
from scheduler.filters.reasons import brief
from scheduler.objects.codec import encode_network_metadata
from scheduler.request.numa import InstanceTopology, requested_topology
from scheduler.request.pci import PciRequest, aliases_from_conf, requested_pci

if TYPE_CHECKING:
    from placement_client.models import AllocationRequest
    from scheduler.host_state import HostState
    from scheduler.objects.numa import HostNUMACell, HostNUMATopology
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

NO_TOPOLOGY = 'no NUMA topology known for the host'
NO_SMT = "thread policy 'require' needs a host with SMT sibling threads"

SOURCES = ('[cell_database] connections (Nova\'s cell databases) or numa_topology in the '
           '[scheduler] hosts_file')
LIMITS_VERSION = '1.1'


@dataclass(frozen=True)
class _Request:
    topology: InstanceTopology | None
    pci: tuple[PciRequest, ...]
    networks: Networks | None
    network_metadata: Any
    error: str | None = None


class NUMATopologyFilter(BaseCandidateFilter):
    """Keeps the candidates on which the requested NUMA topology fits."""

    RUN_ON_REBUILD = False

    def __init__(self) -> None:
        self._log_once = LogOnce(LOG)
        self._memo = RequestMemo()

    def check_configuration(self) -> None:
        aliases_from_conf(self.require_conf())  # an invalid [pci] alias stops start-up
        if not _cell_databases(self.require_conf()):
            LOG.info('NUMATopologyFilter: [cell_database] connections is empty, so host NUMA '
                     'topologies come only from the hosts file (numa_topology); a request '
                     'with a NUMA topology fails every host without one')

    def host_verdict(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult | None:
        request = self._request(spec_obj)
        if request.error is not None:
            return FilterResult.fail(request.error)
        host_topology = host_state.numa_topology
        if host_topology is not None and not host_topology.has_threads \
                and _asks_for_smt(spec_obj):
            return FilterResult.fail(NO_SMT)
        if request.topology is None:
            return FilterResult.ok()
        if host_state.numa_topology is None:
            label = host_label(host_state)
            self._log_once.warning(
                ('no topology', label), '%s: no NUMA topology known for host %s; it fails '
                'every request that asks for a NUMA topology until %s gives one', self.name,
                label, SOURCES)
            return FilterResult.fail(NO_TOPOLOGY)
        return None

    def candidate_key(self, host_state: HostState, spec_obj: RequestSpec,
                      allocation_request: AllocationRequest) -> Hashable:
        """The NUMA cells the candidate may use and the providers of its PCI devices:
        all a candidate changes about the fit."""
        assert host_state.numa_topology is not None
        cells = tuple(c.id for c in _cells_for(host_state.numa_topology,
                                                allocation_request).cells)
        return cells, _placed_devices(self._request(spec_obj).pci, allocation_request)

    def candidate_passes(self, host_state: HostState, spec_obj: RequestSpec,
                         allocation_request: AllocationRequest | None) -> FilterResult:
        request = self._request(spec_obj)
        assert request.topology is not None and host_state.numa_topology is not None
        full = host_state.numa_topology
        host = _cells_for(full, allocation_request)
        ratios = Ratios(full.cpu_allocation_ratio, full.ram_allocation_ratio)
        label = host_label(host_state)
        if (ratios.cpu is None or ratios.ram is None) and any(
                c.shared for c in request.topology.cells):
            self._log_once.warning(
                ('ratios', label), '%s: the allocation ratios of host %s are unknown; the '
                'per-NUMA-node overcommit limits of shared CPUs and memory are not checked '
                'there (Placement still enforces the host\'s totals)', self.name, label)
        stats = host_state.pci_stats
        pci_check: PciCheck | None = None
        if request.pci:
            if stats is None:
                self._log_once.warning(
                    ('pci', label), '%s: no PCI pools known for host %s; the NUMA affinity '
                    'of requested PCI devices is not checked there', self.name, label)
            else:
                mappings = allocation_request.mappings if allocation_request else None
                socket_of = {c.id: c.socket for c in full.cells}

                def check_devices(cells: Sequence[HostNUMACell]) -> PciFit:
                    return fit_requests(stats, request.pci, mappings=mappings,
                                        numa=NumaCells(frozenset(c.id for c in cells),
                                                       socket_of))
                pci_check = check_devices
        pci_counts: dict[int, int] | None = None
        if stats is not None:
            # Nova orders host cells by their free devices (the host's pools).
            pci_counts = {}
            for pool in stats.pools:
                if pool.numa_node is not None:
                    pci_counts[pool.numa_node] = pci_counts.get(pool.numa_node, 0) + pool.count
        fit = fit_instance(host, request.topology, ratios=ratios, pci_check=pci_check,
                           networks=request.networks, pci_counts=pci_counts,
                           pci_requested=bool(request.pci))
        if not fit.passed:
            return FilterResult.fail(f'the requested NUMA topology '
                                     f'({request.topology.describe()}) does not fit: {fit.reason}')
        topology = request.topology
        self.record_usage(host_state, allocation_request, 'numa_cells',
                          lambda h: _use_cells(h, fit, spec_obj, topology))
        if fit.pci is not None and fit.pci.taken:
            taken = fit.pci.taken
            self.record_usage(host_state, allocation_request, 'pci_devices',
                              lambda h: use_devices(h, taken))
        if ratios.cpu is not None and ratios.ram is not None:
            host_state.limits['numa_topology'] = _limits(ratios, request.network_metadata)
        return FilterResult.ok()

    def _request(self, spec_obj: RequestSpec) -> _Request:
        conf = self.conf
        key = (id(spec_obj.numa_topology), id(spec_obj.pci_requests),
               id(spec_obj.network_metadata), id(spec_obj.image),
               tuple(sorted((spec_obj.flavor.extra_specs or {}).items())),
               spec_obj.flavor.vcpus, spec_obj.flavor.memory_mb)
        return self._memo.get(spec_obj, key, lambda: _read_request(spec_obj, conf))


def _asks_for_smt(spec_obj: RequestSpec) -> bool:
    """Nova's ``NUMATopologyFilter._satisfies_cpu_policy``: a flavor or image asking
    for ``dedicated`` CPUs and a flavor or image asking for the ``require`` thread
    policy need a host with SMT siblings, whichever policy the two resolve to
    (flavor ``prefer`` and image ``require`` resolve to ``prefer``)."""
    extra_specs = spec_obj.flavor.extra_specs or {}
    props = spec_obj.image.properties if spec_obj.image is not None else {}
    return ('dedicated' in (extra_specs.get('hw:cpu_policy'), props.get('hw_cpu_policy'))
            and 'require' in (extra_specs.get('hw:cpu_thread_policy'),
                              props.get('hw_cpu_thread_policy')))


def _read_request(spec_obj: RequestSpec, conf: cfg.ConfigOpts | None) -> _Request:
    try:
        topology = requested_topology(spec_obj)
    except RequestTranslationError as e:
        return _Request(None, (), None, None,
                        error=f'the requested NUMA topology is invalid: {brief(e, 200)}')
    try:
        pci = tuple(requested_pci(spec_obj, aliases_from_conf(conf) if conf else None))
    except RequestTranslationError:
        pci = ()  # PciPassthroughFilter fails the request with the reason
    metadata = spec_obj.network_metadata or {}
    networks = Networks(frozenset(metadata.get('physnets') or ()),
                        bool(metadata.get('tunneled')))
    return _Request(topology, pci, networks if networks.physnets or networks.tunneled else None,
                    metadata)


def _cells_for(host: HostNUMATopology, allocation_request: AllocationRequest | None
               ) -> HostNUMATopology:
    """The cells a candidate may use: those whose providers it allocates from, when
    Placement models NUMA nodes and the candidate uses them; else all."""
    if allocation_request is None or not any(c.provider_uuid for c in host.cells):
        return host
    used = [c for c in host.cells if c.provider_uuid in allocation_request.allocations]
    return host.with_cells(used) if used else host


def _placed_devices(requests: tuple[PciRequest, ...],
                    allocation_request: AllocationRequest) -> tuple[tuple[str, ...], ...]:
    """The providers a candidate allocates the requests' PCI devices from (PCI in Placement)."""
    mappings = allocation_request.mappings
    return tuple(tuple(mappings.get(group, ())) for request in requests
                 for group in request.placement_groups())


def _use_cells(host_state: HostState, fit: NumaFit, spec_obj: RequestSpec,
               requested: InstanceTopology) -> None:
    if host_state.numa_topology is not None:
        host_state.numa_topology = apply_fit(host_state.numa_topology, fit)
    # Nova's HostState.consume_from_request replaces the request's numa_topology with
    # the fitted one, so the later instances of the request ask for what the first
    # got: a 'small', 'large' or 'any' page size becomes the size chosen here, and
    # the cells are named after the host cells they took.
    spec_obj.numa_topology = fitted_topology(requested, fit)


def fitted_topology(requested: InstanceTopology, fit: NumaFit) -> dict[str, Any]:
    """The InstanceNUMATopology (its data) Nova leaves in the spec after ``fit``
    (``_numa_fit_instance_cell``: each cell's ``id`` becomes its host cell's, its
    ``pagesize`` the size chosen, or None when none was asked for)."""
    assert fit.cells is not None
    cells = [{'id': c.host_cell_id, 'cpuset': sorted(c.instance_cell.cpuset),
              'pcpuset': sorted(c.instance_cell.pcpuset), 'memory': c.instance_cell.memory,
              'pagesize': c.page_size_kb, 'cpu_policy': c.instance_cell.cpu_policy,
              'cpu_thread_policy': c.instance_cell.cpu_thread_policy} for c in fit.cells]
    return {'cells': cells, 'emulator_threads_policy': requested.emulator_threads_policy}



def _limits(ratios: Ratios, network_metadata: Any) -> dict[str, Any]:
    """Nova's NUMATopologyLimits primitive, as the Selection carries it."""
    return {
        'nova_object.name': 'NUMATopologyLimits',
        'nova_object.namespace': 'nova',
        'nova_object.version': LIMITS_VERSION,
        'nova_object.data': {
            'cpu_allocation_ratio': ratios.cpu,
            'ram_allocation_ratio': ratios.ram,
            'network_metadata': encode_network_metadata(network_metadata),
        },
    }


def _cell_databases(conf: cfg.ConfigOpts) -> list[str]:
    try:
        return list(conf.cell_database.connections or ())
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        return []
