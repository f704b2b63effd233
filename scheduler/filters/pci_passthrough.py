"""PciPassthroughFilter: the request's PCI devices must be free on the host.

Nova 34's candidate filter: for each allocation candidate, the PCI requests of
the RequestSpec (flavor aliases and SR-IOV ports; a flavor alias the spec
carries no request for is read from ``[pci] alias``) must be satisfiable
together from the host's free PCI device pools (:mod:`scheduler.filters.pci_fit`).
A request the candidate allocates in Placement (PCI in Placement: its request
groups ``<request_id>-<n>`` are in the candidate's mappings) is judged from
Placement's answer, which already counted the devices; the pools serve only
what Placement does not model (ports, aliases without PCI in Placement).

Host data (doc/host-data.md): the pools come from the cell databases
(``[cell_database] connections``) or the hosts file (``pci_pools``).

* No pools known for a host and a request Placement does not model: the host
  fails, as in Nova (which fails hosts without PCI stats), with a reason that
  says the data is missing, and a WARNING once per host naming the sources.
* A flavor alias no ``[pci] alias`` defines (only for specs without PCI
  requests of their own): every host fails with a reason naming the alias.
"""
from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from scheduler.exceptions import RequestTranslationError
from scheduler.filters.base import FilterResult, host_label
from scheduler.filters.candidate import BaseCandidateFilter, RequestMemo
from scheduler.filters.log_once import LogOnce
from scheduler.filters.pci_fit import NO_POOLS, fit_requests, use_devices
from scheduler.filters.reasons import brief
from scheduler.request.pci import PciRequest, aliases_from_conf, requested_pci

if TYPE_CHECKING:
    from placement_client.models import AllocationRequest
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

SOURCES = ('[cell_database] connections (Nova\'s cell databases) or pci_pools in the '
           '[scheduler] hosts_file')


class PciPassthroughFilter(BaseCandidateFilter):
    """Keeps the candidates with which the request's PCI devices can be had."""

    RUN_ON_REBUILD = False

    def __init__(self) -> None:
        self._log_once = LogOnce(LOG)
        self._memo = RequestMemo()

    def check_configuration(self) -> None:
        aliases_from_conf(self.require_conf())  # an invalid [pci] alias stops start-up

    def host_verdict(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult | None:
        requests = self._requests(spec_obj)
        if isinstance(requests, str):
            return FilterResult.fail(requests)
        return FilterResult.ok() if not requests else None

    def candidate_key(self, host_state: HostState, spec_obj: RequestSpec,
                      allocation_request: AllocationRequest) -> Hashable:
        """Where the candidate allocates the requests' devices in Placement, if anywhere."""
        requests = self._requests(spec_obj)
        assert not isinstance(requests, str)
        mappings = allocation_request.mappings
        return tuple(tuple(mappings.get(group, ())) for request in requests
                     for group in request.placement_groups())

    def candidate_passes(self, host_state: HostState, spec_obj: RequestSpec,
                         allocation_request: AllocationRequest | None) -> FilterResult:
        requests = self._requests(spec_obj)
        assert not isinstance(requests, str)
        mappings = allocation_request.mappings if allocation_request is not None else None
        fit = fit_requests(host_state.pci_stats, requests, mappings=mappings)
        if not fit.passed:
            if fit.reason == NO_POOLS:
                label = host_label(host_state)
                self._log_once.warning(
                    label, '%s: no PCI device pools known for host %s; it fails every '
                    'request for PCI devices that Placement does not allocate until %s gives '
                    'them', self.name, label, SOURCES)
            return FilterResult.fail(fit.reason or self.failure_reason)
        if fit.taken:
            taken = fit.taken
            # NUMATopologyFilter's record, when it has one, took NUMA affinity into account.
            self.record_usage(host_state, allocation_request, 'pci_devices',
                              lambda h: use_devices(h, taken), keep_existing=True)
        return FilterResult.ok()

    def _requests(self, spec_obj: RequestSpec) -> tuple[PciRequest, ...] | str:
        conf = self.conf
        key = (id(spec_obj.pci_requests), id(spec_obj.image),
               (spec_obj.flavor.extra_specs or {}).get('pci_passthrough:alias'))
        return self._memo.get(spec_obj, key, lambda: _read_requests(spec_obj, conf))


def _read_requests(spec_obj: RequestSpec, conf: Any) -> tuple[PciRequest, ...] | str:
    try:
        return tuple(requested_pci(spec_obj, aliases_from_conf(conf) if conf else None))
    except RequestTranslationError as e:
        return f'invalid PCI request: {brief(e, 200)}'

