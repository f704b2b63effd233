"""AllHostsFilter: passes every host (Nova's no-op filter)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.filters.base import BaseHostFilter, FilterResult

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec


class AllHostsFilter(BaseHostFilter):
    run_filter_once_per_request = True
    RUN_ON_REBUILD = False

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        return FilterResult.ok()
