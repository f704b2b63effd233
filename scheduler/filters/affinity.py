"""Server-group (anti-)affinity and the same_host / different_host hints."""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.filters.base import BaseHostFilter, FilterResult, RowsVerdict, all_pass

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import InstanceGroup, RequestSpec

# Bounds the uuids/host names quoted in a reason; reasons travel to users.
_QUOTED = 3


def _quote(items: Iterable[str]) -> str:
    items = sorted(items)
    shown = ', '.join(items[:_QUOTED])
    return shown + (f' and {len(items) - _QUOTED} more' if len(items) > _QUOTED else '')


def _has_policy(group: InstanceGroup | None, policy: str) -> bool:
    # Nova reads ``policy`` for anti-affinity and the deprecated ``policies``
    # list for affinity; a group decoded from an older primitive may carry
    # only one of them, so either counts.
    if group is None:
        return False
    return group.policy == policy or policy in (group.policies or ())


def _hinted_uuids(spec_obj: RequestSpec, hint: str) -> set[str]:
    value: Any = spec_obj.get_scheduler_hint(hint)
    if not value:
        return set()
    if isinstance(value, str):
        return {value}
    return {str(v) for v in value}


# Which hosts the members are on is the cloud's layout: the log and explain name them.
_AFFINITY_REASON = 'affinity: members of group are on other hosts'


class ServerGroupAffinityFilter(BaseHostFilter):
    """Policy ``affinity``: once the group has hosts, only those hosts pass.

    ``group.hosts`` is where the group's members run; the selection loop adds
    each host it picks for this request (as Nova does), so later instances of
    the same request follow the first one.
    """

    RUN_ON_REBUILD = False

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        group = spec_obj.instance_group
        if group is None or not _has_policy(group, 'affinity'):
            return FilterResult.ok()
        if not group.hosts or host_state.host in group.hosts:
            return FilterResult.ok()
        return FilterResult.fail(_AFFINITY_REASON)

    def filter_rows(self, table: HostTable, rows: np.ndarray,
                    spec_obj: RequestSpec) -> RowsVerdict:
        group = spec_obj.instance_group
        if group is None or not _has_policy(group, 'affinity') or not group.hosts:
            return all_pass(rows)
        wanted, names = set(group.hosts), table.host_names
        passed = np.array([names[r] in wanted for r in rows.tolist()], dtype=bool)
        reason = _AFFINITY_REASON
        return RowsVerdict(passed, dict.fromkeys(np.flatnonzero(~passed).tolist(), reason))



class ServerGroupAntiAffinityFilter(BaseHostFilter):
    """Policy ``anti-affinity``: fewer than ``max_server_per_host`` (default 1) group
    members may already run on the host.

    Members on the host are ``host_state.instances`` ∩ ``group.members``. The group's
    members include the instances of this very request, and ``HostState.consume()``
    adds each placed instance to ``host_state.instances``, which is how the rule
    holds between the instances of one multi-instance request.
    """

    RUN_ON_REBUILD = False

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        group = spec_obj.instance_group
        if group is None or not _has_policy(group, 'anti-affinity'):
            return FilterResult.ok()
        # A move (resize to the same host, ...) checks the instance's own host:
        # the instance does not count against itself there.
        if spec_obj.instance_uuid and spec_obj.instance_uuid in host_state.instances:
            return FilterResult.ok()
        on_host = len(set(host_state.instances) & set(group.members))
        limit = max_server_per_host(group)
        if on_host < limit:
            return FilterResult.ok()
        noun = 'member' if on_host == 1 else 'members'
        return FilterResult.fail(
            f'anti-affinity: {on_host} {noun} of group already on host (max {limit})')

    def filter_rows(self, table: HostTable, rows: np.ndarray,
                    spec_obj: RequestSpec) -> RowsVerdict:
        group = spec_obj.instance_group
        if group is None or not _has_policy(group, 'anti-affinity'):
            return all_pass(rows)
        # Hosts under the limit pass; the few at it are judged one by one
        # (a move may find the instance itself there).
        counts = table.members_on_rows(group.members)[rows]
        return RowsVerdict(counts < max_server_per_host(group))


def max_server_per_host(group: InstanceGroup) -> int:
    """The group's ``max_server_per_host`` rule; 1 when absent.

    Nova's API only accepts positive integers here; anything else is read as
    the strictest value rather than failing the request.
    """
    raw = (group.rules or {}).get('max_server_per_host')
    if raw is None:
        return 1
    try:
        return max(1, int(raw))
    except (TypeError, ValueError):
        return 1


class SameHostFilter(BaseHostFilter):
    """Hint ``same_host``: the host must run at least one of the listed instances."""

    # The instances the hint names do not move within a request.
    run_filter_once_per_request = True
    RUN_ON_REBUILD = False

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        wanted = _hinted_uuids(spec_obj, 'same_host')
        if not wanted or wanted & set(host_state.instances):
            return FilterResult.ok()
        return FilterResult.fail(
            f'same_host: host runs none of the instances {_quote(wanted)}')


class DifferentHostFilter(BaseHostFilter):
    """Hint ``different_host``: the host must run none of the listed instances."""

    run_filter_once_per_request = True
    RUN_ON_REBUILD = False

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        avoided = _hinted_uuids(spec_obj, 'different_host')
        overlap = avoided & set(host_state.instances)
        if not overlap:
            return FilterResult.ok()
        return FilterResult.fail(f'different_host: host runs instance {_quote(overlap)}')
