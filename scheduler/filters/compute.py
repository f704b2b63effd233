"""ComputeFilter: the host's nova-compute service must be enabled and up."""
from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler.filters.base import BaseHostFilter, FilterResult

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _as_utc(moment: datetime.datetime) -> datetime.datetime:
    # Nova stores naive UTC timestamps; treat naive values as UTC, not local time.
    if moment.tzinfo is None:
        return moment.replace(tzinfo=datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc)


class ComputeFilter(BaseHostFilter):
    """Fails hosts whose compute service is disabled, forced down or not seen up lately.

    Liveness follows Nova's DB servicegroup driver: up if the last heartbeat is
    within ``[DEFAULT] service_down_time`` seconds of now, in either direction
    (Nova compares the absolute difference, tolerating clock skew). Unlike
    Nova, a host with no liveness data at all (``last_seen_up`` is None) passes:
    here Placement and the host catalog are the sources of hosts, and a catalog
    fed by a static hosts file has no heartbeats.
    """

    # Service state does not change within one request.
    run_filter_once_per_request = True
    RUN_ON_REBUILD = False

    #: Source of "now"; replaceable so that behaviour can be specified without sleeping.
    clock: Callable[[], datetime.datetime] = staticmethod(_utcnow)

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        service = host_state.service
        if service.get('disabled'):
            # disabled_reason is operator free text; it stays out of a user-facing reason.
            return FilterResult.fail('compute service is disabled')
        if service.get('forced_down'):
            return FilterResult.fail('compute service is forced down')
        last_seen_up = service.get('last_seen_up')
        if last_seen_up is None:
            return FilterResult.ok()
        down_time = self.require_conf().service_down_time
        elapsed = (self.clock() - _as_utc(last_seen_up)).total_seconds()
        if elapsed > down_time:
            return FilterResult.fail(
                f'compute service not seen up for {int(elapsed)}s '
                f'(service_down_time {down_time}s)')
        if -elapsed > down_time:
            return FilterResult.fail(
                f'compute service last seen up {int(-elapsed)}s in the future '
                f'(clock skew beyond service_down_time {down_time}s)')
        return FilterResult.ok()
