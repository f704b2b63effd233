"""ComputeFilter: the host's nova-compute service must be enabled and up."""
from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.filters.base import BaseHostFilter, FilterResult, RowsVerdict

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec

# Hosts whose heartbeat age is within this many seconds of service_down_time
# are judged one by one, with datetime arithmetic, rather than from floats.
_EDGE_SECONDS = 1.0

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

DISABLED = 'compute service is disabled'
FORCED_DOWN = 'compute service is forced down'


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
        return self._verdict(host_state.service, self.clock(),
                             self.require_conf().service_down_time)

    def filter_rows(self, table: HostTable, rows: np.ndarray,
                    spec_obj: RequestSpec) -> RowsVerdict:
        now = self.clock()
        down_time = self.require_conf().service_down_time
        seen = table.last_seen_up[rows]
        with np.errstate(invalid='ignore'):
            age = np.abs(_as_utc(now).timestamp() - seen)
            alive = np.isnan(seen) | (age < down_time - _EDGE_SECONDS)
            # Far past the edge, only the reason's number is left to work out.
            silent = ~alive & (age > down_time + _EDGE_SECONDS)
        disabled = table.disabled[rows]
        forced_down = table.forced_down[rows] & ~disabled
        passed = alive & ~disabled & ~forced_down
        failed = dict.fromkeys(np.flatnonzero(disabled).tolist(), DISABLED)
        failed.update(dict.fromkeys(np.flatnonzero(forced_down).tolist(), FORCED_DOWN))
        silent &= ~(disabled | forced_down)
        # Whole seconds as the datetime arithmetic gives them, from microseconds
        # (a float timestamp holds them exactly): the hosts whose compute went
        # silent, one in two hundred of a large cloud, each took a datetime
        # subtraction and a dict lookup per request.
        at = np.flatnonzero(silent)
        elapsed = _microseconds(now) - np.round(seen[at] * 1e6).astype(np.int64)
        failed.update(zip(at.tolist(), (_silent_reason(us, down_time)
                                        for us in elapsed.tolist()), strict=True))
        for pos in np.flatnonzero(~(passed | disabled | forced_down | silent)).tolist():
            record = table.records[int(rows[pos])]
            verdict = self._verdict({'disabled': record.disabled,
                                     'forced_down': record.forced_down,
                                     'last_seen_up': record.last_seen_up}, now, down_time)
            if verdict.passed:
                passed[pos] = True
            else:
                failed[pos] = verdict.reason or self.failure_reason
        return RowsVerdict(passed, failed)

    @staticmethod
    def _verdict(service: Mapping[str, Any], now: datetime.datetime,
                 down_time: int) -> FilterResult:
        if service.get('disabled'):
            # disabled_reason is operator free text; it stays out of a user-facing reason.
            return FilterResult.fail(DISABLED)
        if service.get('forced_down'):
            return FilterResult.fail(FORCED_DOWN)
        last_seen_up = service.get('last_seen_up')
        if last_seen_up is None:
            return FilterResult.ok()
        elapsed = now - _as_utc(last_seen_up)
        if abs(elapsed.total_seconds()) > down_time:
            return FilterResult.fail(_silent_reason(
                elapsed // datetime.timedelta(microseconds=1), down_time))
        return FilterResult.ok()


def _microseconds(moment: datetime.datetime) -> int:
    return (_as_utc(moment) - _EPOCH) // datetime.timedelta(microseconds=1)


def _silent_reason(elapsed_us: int, down_time: int) -> str:
    """Why a service last seen up ``elapsed_us`` microseconds ago (negative: in the
    future), beyond ``down_time`` seconds either way, is not up."""
    if elapsed_us > 0:
        return (f'compute service not seen up for {elapsed_us // 10**6}s '
                f'(service_down_time {down_time}s)')
    return (f'compute service last seen up {-elapsed_us // 10**6}s in the future '
            f'(clock skew beyond service_down_time {down_time}s)')
