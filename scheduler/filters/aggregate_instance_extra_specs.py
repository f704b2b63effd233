"""AggregateInstanceExtraSpecsFilter: flavor extra specs against aggregate metadata."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scheduler.filters import extra_specs_ops
from scheduler.filters.aggregate_metadata import aggregate_metadata_by_key
from scheduler.filters.base import BaseHostFilter, FilterResult, host_label
from scheduler.filters.reasons import brief

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

SCOPE = 'aggregate_instance_extra_specs'
#: Extra specs Nova itself defines without a namespace (its extra-spec validators'
#: "null" namespace). They configure Nova, they are not aggregate requirements.
NOVA_UNSCOPED_EXTRA_SPECS = frozenset({'group_policy', 'hide_hypervisor_id'})


def aggregate_key(extra_spec: str) -> str | None:
    """The aggregate metadata key a flavor extra spec requires; None if it requires none.

    ``aggregate_instance_extra_specs:<key>`` requires ``<key>`` (which may contain
    colons); a key without a colon requires itself; other namespaces belong to
    other consumers.
    """
    scope, sep, rest = extra_spec.partition(':')
    if sep:
        return rest if scope == SCOPE else None
    return None if extra_spec in NOVA_UNSCOPED_EXTRA_SPECS else extra_spec


class AggregateInstanceExtraSpecsFilter(BaseHostFilter):
    """Every extra spec that is colon-less or ``aggregate_instance_extra_specs:``-scoped
    must be set on one of the host's aggregates, and one of the aggregate values
    (comma-separated entries count separately) must satisfy it with the extra-spec
    operators (:mod:`scheduler.filters.extra_specs_ops`)."""

    # Aggregates and the flavor do not change within a request.
    run_filter_once_per_request = True
    RUN_ON_REBUILD = False

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        extra_specs = spec_obj.flavor.extra_specs or {}
        if not extra_specs:
            return FilterResult.ok()
        metadata = aggregate_metadata_by_key(host_state)
        for key, raw in extra_specs.items():
            wanted = aggregate_key(key)
            if wanted is None:
                continue
            requirement = extra_specs_ops.parse(str(raw))
            spec = f"extra spec {brief(key)}='{brief(raw)}'"
            if requirement.problem:
                return FilterResult.fail(f'{spec} can never be met: {requirement.problem}')
            values = metadata.get(wanted)
            if not values:
                return FilterResult.fail(
                    f'{spec}: no aggregate of the host sets {brief(wanted)}')
            if not any(extra_specs_ops.match(v, requirement) for v in values):
                LOG.debug('%s: host %s aggregate values %s of %r do not meet %r', self.name,
                          host_label(host_state), sorted(values), wanted, requirement.raw)
                return FilterResult.fail(f'{spec} not met by the aggregate metadata')
        return FilterResult.ok()
