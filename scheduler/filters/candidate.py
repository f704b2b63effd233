"""Candidate filters: judge each allocation candidate of a host, not the host.

Placement proposes, per host, allocation requests that may differ in which
providers they use (a NUMA node, a PCI device's provider). Nova's
NUMATopologyFilter and PciPassthroughFilter judge each one with its
``mappings`` and keep only those that fit. A :class:`BaseCandidateFilter`
subclass implements :meth:`~BaseCandidateFilter.candidate_passes`; its
``filter_result``:

* asks :meth:`~BaseCandidateFilter.host_verdict` first, for what decides the
  host whatever the candidate (the request asks nothing of this filter: pass,
  candidates untouched; the host lacks the data to judge: fail once);
* then prunes ``host_state.allocation_candidates`` to the candidates that pass,
  in their order (the claim walks them in order, so Placement's preference and
  the weighers' view stay as they were), and fails the host with the reason of
  the last rejected candidate when none remains. Candidates with the same
  :meth:`~BaseCandidateFilter.candidate_key` look alike to the filter and are
  judged once (Nova 34 models no NUMA node in Placement, so a host's candidates
  usually differ only in what the filter does not look at).

A host without candidates (a rebuild check reads the host's provider tree and
asks Placement for none) is judged once, with ``allocation_request=None``: the
host as a whole. Nova does not run these filters on rebuild (they are not
RUN_ON_REBUILD: the API refuses a rebuild that changes the NUMA constraints),
and neither does this service unless a subclass sets RUN_ON_REBUILD.

The handler needs nothing special: it calls ``filter_result`` per host, as for
any filter. What a candidate takes on the host (NUMA cells, PCI devices) is
recorded in ``host_state.candidate_usage`` for ``HostState.consume``, so that the
next instance of the same request sees it used.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from scheduler.filters.base import BaseHostFilter, FilterResult

if TYPE_CHECKING:
    from placement_client.models import AllocationRequest
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec


class BaseCandidateFilter(BaseHostFilter):
    """Base of filters that keep the allocation candidates of a host that fit."""

    def host_verdict(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult | None:
        """A verdict for the whole host, before any candidate; None to judge each one."""
        return None

    def candidate_passes(self, host_state: HostState, spec_obj: RequestSpec,
                         allocation_request: AllocationRequest | None) -> FilterResult:
        """Whether the instance fits the host when placed with ``allocation_request``
        (None: no candidate, judge the host as a whole)."""
        raise NotImplementedError(f'{self.name} must implement candidate_passes()')

    def candidate_key(self, host_state: HostState, spec_obj: RequestSpec,
                      allocation_request: AllocationRequest) -> Hashable | None:
        """What of the candidate this filter looks at: candidates with equal keys get
        one verdict (and the same usage). None: judge each candidate."""
        return None

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        verdict = self.host_verdict(host_state, spec_obj)
        if verdict is not None:
            return verdict
        candidates = host_state.allocation_candidates
        if not candidates:
            return self.candidate_passes(host_state, spec_obj, None)
        kept = []
        rejected: FilterResult | None = None
        # key -> (verdict, the usage this filter recorded for it)
        judged: dict[Hashable, tuple[FilterResult, dict[str, Any]]] = {}
        for candidate in candidates:
            key = self.candidate_key(host_state, spec_obj, candidate)
            seen = judged.get(key) if key is not None else None
            if seen is None:
                before = dict(host_state.candidate_usage.get(id(candidate), {}))
                result = self.candidate_passes(host_state, spec_obj, candidate)
                if key is not None:
                    after = host_state.candidate_usage.get(id(candidate), {})
                    judged[key] = (result, {what: apply for what, apply in after.items()
                                            if before.get(what) is not apply})
            else:
                result, usage = seen
                if result.passed and usage:
                    host_state.candidate_usage.setdefault(id(candidate), {}).update(usage)
            if result.passed:
                kept.append(candidate)
            else:
                rejected = result
        if len(kept) != len(candidates):
            host_state.allocation_candidates = kept
        if kept:
            return FilterResult.ok()
        assert rejected is not None
        return FilterResult(False, rejected.reason or self.failure_reason)

    def record_usage(self, host_state: HostState, allocation_request: AllocationRequest | None,
                     what: str, apply: Callable[[HostState], None], *,
                     keep_existing: bool = False) -> None:
        """Have ``HostState.consume`` call ``apply`` if this candidate is the one placed.

        ``what`` names the resource: filters that both fit, say, PCI devices use the
        same name, so that it is counted once; ``keep_existing`` leaves another
        filter's (more precise) record in place.
        """
        if allocation_request is None:
            return
        usage = host_state.candidate_usage.setdefault(id(allocation_request), {})
        if not (keep_existing and what in usage):
            usage[what] = apply


class RequestMemo:
    """What a filter derives from the request, computed once per request, not once
    per host and candidate. One entry per thread (requests run on several RPC
    threads); the entry keeps its spec alive, so the spec's identity cannot be reused
    while cached, and ``key`` catches a spec changed in place."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self, spec_obj: Any, key: Hashable, compute: Callable[[], Any]) -> Any:
        entry = getattr(self._local, 'entry', None)
        if entry is not None and entry[0] is spec_obj and entry[1] == key:
            return entry[2]
        value = compute()
        self._local.entry = (spec_obj, key, value)
        return value
