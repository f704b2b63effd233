"""ComputeCapabilitiesFilter: flavor extra specs against what the host reports."""
from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from scheduler.filters import extra_specs_ops
from scheduler.filters.base import BaseHostFilter, FilterResult, all_pass, host_label
from scheduler.filters.host_attributes import (
    MISSING,
    NOVA_HOST_STATE_ATTRIBUTES,
    host_attribute,
    is_absent,
    walk,
)
from scheduler.filters.reasons import brief

if TYPE_CHECKING:
    import numpy as np

    from scheduler.filters.base import RowsVerdict
    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

SCOPE = 'capabilities'
#: Nova checks this flavor extra spec as ``capabilities:cpu_info:maxphysaddr:bits >= N``.
MAXPHYSADDR_BITS = 'hw:maxphysaddr_bits'
MAXPHYSADDR_PATH = ('cpu_info', 'maxphysaddr', 'bits')
#: The extra spec ``hw:maxphysaddr_bits`` stands for; Nova overwrites it with
#: ``>= <bits>`` when both are set, so the flavor's own value of it is not checked.
MAXPHYSADDR_CAPABILITY = 'capabilities:cpu_info:maxphysaddr:bits'


def capability_path(key: str, host_state: HostState) -> tuple[str, ...] | None:
    """Which host capability the extra spec ``key`` names; None if it names none.

    ``capabilities:<a>:<b>...`` names ``<a>`` then ``<b>`` inside it. A key
    without a colon is a capability only if the host has a Nova HostState
    attribute or a stats key of that name (Nova's backward compatibility), so
    it depends on the host. Other namespaces belong to other consumers.
    """
    if key == MAXPHYSADDR_BITS:
        return MAXPHYSADDR_PATH
    scope = key.split(':')
    if len(scope) == 1:
        if host_attribute(host_state, key) is MISSING and key not in (host_state.stats or {}):
            return None
        return (key,)
    if scope[0] != SCOPE:
        return None
    return tuple(scope[1:])


def host_capability(host_state: HostState, path: tuple[str, ...]) -> Any:
    """The value at ``path`` on the host, or MISSING.

    The first name is a Nova HostState attribute, else a key of ``stats``; the
    rest step into mappings and JSON-object strings (``cpu_info`` in Nova).
    """
    first = path[0]
    value = host_attribute(host_state, first)
    if value is MISSING or value is None:
        value = (host_state.stats or {}).get(first, MISSING)
    value = walk(value, path[1:])
    return MISSING if value is None else value


def render(value: Any, path: tuple[str, ...]) -> str:
    """The capability as the string the operators compare, as Nova renders it.

    Nova holds ``cpu_info`` as a JSON string, so the whole of it compares as
    JSON; anything else compares as Python's ``str()``.
    """
    if path == ('cpu_info',) and isinstance(value, dict):
        return json.dumps(value)
    return str(value)


class ComputeCapabilitiesFilter(BaseHostFilter):
    """Each flavor extra spec that names a host capability must be satisfied by the host.

    A capability the host does not report fails the host, as in Nova; when the
    host catalog has no data at all for the attribute (a host known only from
    Placement), the reason says so.
    """

    # Flavor and host capabilities do not change within a request.
    run_filter_once_per_request = True
    RUN_ON_REBUILD = False

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        extra_specs = spec_obj.flavor.extra_specs or {}
        for key, raw in extra_specs.items():
            if key == MAXPHYSADDR_CAPABILITY and MAXPHYSADDR_BITS in extra_specs:
                continue  # replaced by hw:maxphysaddr_bits, as Nova's _satisfies_extra_specs
            path = capability_path(key, host_state)
            if path is None:
                continue
            req = f'>= {raw}' if key == MAXPHYSADDR_BITS else str(raw)
            verdict = self._check(host_state, key, str(raw), path, req)
            if not verdict.passed:
                return verdict
        return FilterResult.ok()

    def filter_rows(self, table: HostTable, rows: np.ndarray,
                    spec_obj: RequestSpec) -> RowsVerdict | None:
        # Only a flavor that names a capability needs the hosts one by one.
        unscoped = []
        for key in spec_obj.flavor.extra_specs or {}:
            if key == MAXPHYSADDR_BITS or key.split(':', 1)[0] == SCOPE:
                return None
            if ':' not in key:
                if key in NOVA_HOST_STATE_ATTRIBUTES:
                    return None
                unscoped.append(key)
        if not unscoped:
            return all_pass(rows)
        # A key without a colon that is no HostState attribute (``group_policy``)
        # names a capability only on a host whose stats have that key: those hosts
        # one by one, the others pass (50,000 hosts one by one took seconds).
        records = table.records
        verdict = all_pass(rows)
        for pos, row in enumerate(rows.tolist()):
            stats = records[row].stats or {}
            if any(key in stats for key in unscoped):
                verdict.passed[pos] = False
        return verdict

    def _check(self, host_state: HostState, key: str, raw: str, path: tuple[str, ...],
               req: str) -> FilterResult:
        requirement = extra_specs_ops.parse(req)
        spec = f"extra spec {brief(key)}='{brief(raw)}'"
        if requirement.problem:
            return FilterResult.fail(f'{spec} can never be met: {requirement.problem}')
        if not path or not all(path):
            return FilterResult.fail(f'{spec} names no capability')
        where = ':'.join(path)
        value = host_capability(host_state, path)
        if value is MISSING:
            LOG.debug('%s: host %s has no capability %s', self.name, host_label(host_state),
                      where)
            top = host_attribute(host_state, path[0])
            if is_absent(top) and path[0] not in (host_state.stats or {}):
                return FilterResult.fail(
                    f'{spec}: the host catalog has no {brief(path[0])} for the host')
            return FilterResult.fail(f'{spec}: host does not report {brief(where)}')
        rendered = render(value, path)
        if extra_specs_ops.match(rendered, requirement):
            return FilterResult.ok()
        LOG.debug("%s: host %s: %s is %r, which does not meet %r", self.name,
                  host_label(host_state), where, brief(rendered, 200), req)
        checked_as = f' ({where} {req})' if key == MAXPHYSADDR_BITS else ''
        return FilterResult.fail(f'{spec} not met{checked_as}')
