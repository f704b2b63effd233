"""Filters that cap a host's workload: concurrent I/O-heavy operations and instances.

The counts are Nova's HostState ones: ``num_io_ops`` is the compute node's
``io_workload`` stat (instances building, resizing, snapshotting, migrating,
rescuing or unshelving), ``num_instances`` the larger of its ``num_instances``
stat and the instances the ``*_instance_info`` casts reported. Both grow by one
for every instance this scheduler places on the host within a request, so the
cap holds between the instances of one multi-instance request, as in Nova.

When the host catalog has no such data for a host (no stat in the hosts file,
no instance casts from its nova-compute yet), Nova's reading is "zero": the
filter counts only what this request places there and so lets the host pass
below the cap. These filters do the same, and say so: a WARNING once per host
per process, naming the host and what is missing.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar

from scheduler.filters.aggregate_metadata import AggregateLimit, aggregate_int_limit
from scheduler.filters.base import BaseHostFilter, FilterResult, host_label
from scheduler.filters.log_once import LogOnce

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

IO_OPS_OPTION = 'max_io_ops_per_host'
INSTANCES_OPTION = 'max_instances_per_host'


class _HostCountFilter(BaseHostFilter):
    """A count on the host must stay below a limit (configured, or per aggregate)."""

    # The count changes as this request places instances: not once per request.
    RUN_ON_REBUILD = False
    #: the [filter_scheduler] option, also the aggregate metadata key
    limit_option: ClassVar[str]
    #: whether the host's aggregates may set the limit
    per_aggregate: ClassVar[bool] = False

    def __init__(self) -> None:
        self._log_once = LogOnce(LOG)

    # What a subclass says about its count.
    def count(self, host_state: HostState) -> int:
        raise NotImplementedError

    def count_is_known(self, host_state: HostState) -> bool:
        raise NotImplementedError

    def missing_data(self) -> str:
        """What the host catalog lacks when the count is not known."""
        raise NotImplementedError

    def describe(self, count: int) -> str:
        raise NotImplementedError

    # The shared rule.
    def limit(self, host_state: HostState) -> AggregateLimit:
        configured = int(getattr(self.require_conf().filter_scheduler, self.limit_option))
        if not self.per_aggregate:
            return AggregateLimit(configured, False)
        limit = aggregate_int_limit(host_state, self.limit_option, configured)
        if limit.invalid:
            self._log_once.warning(
                ('invalid', limit.invalid),
                '%s: aggregate metadata %s=%s is not an integer and is ignored; hosts in '
                'such an aggregate use the smallest valid aggregate value, else '
                '[filter_scheduler] %s', self.name, self.limit_option,
                ', '.join(limit.invalid), self.limit_option)
        return limit

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        if not self.count_is_known(host_state):
            label = host_label(host_state)
            self._log_once.warning(
                ('unknown', label),
                '%s: the host catalog has %s for host %s; the filter counts only the '
                'instances this scheduler places there within one request, so the host '
                'passes unless that reaches %s', self.name, self.missing_data(), label,
                self.limit_option)
        count = self.count(host_state)
        limit = self.limit(host_state)
        if count < limit.value:
            return FilterResult.ok()
        return FilterResult.fail(f'{self.describe(count)} ({limit.describe(self.limit_option)})')


class IoOpsFilter(_HostCountFilter):
    """Fails hosts with ``[filter_scheduler] max_io_ops_per_host`` or more
    I/O-heavy operations in progress."""

    limit_option = IO_OPS_OPTION

    def count(self, host_state: HostState) -> int:
        return host_state.num_io_ops

    def count_is_known(self, host_state: HostState) -> bool:
        return 'io_workload' in host_state.stats

    def missing_data(self) -> str:
        return 'no io_workload stat'

    def describe(self, count: int) -> str:
        return f'host has {count} I/O-heavy operation{"" if count == 1 else "s"} in progress'


class AggregateIoOpsFilter(IoOpsFilter):
    """IoOpsFilter whose limit an aggregate of the host may set (metadata
    ``max_io_ops_per_host``; the smallest value wins)."""

    per_aggregate = True


class NumInstancesFilter(_HostCountFilter):
    """Fails hosts with ``[filter_scheduler] max_instances_per_host`` or more instances."""

    limit_option = INSTANCES_OPTION

    def count(self, host_state: HostState) -> int:
        return host_state.num_instances

    def count_is_known(self, host_state: HostState) -> bool:
        return 'num_instances' in host_state.stats or host_state.instance_info_known

    def missing_data(self) -> str:
        return 'no num_instances stat and no instance info from casts'

    def describe(self, count: int) -> str:
        return f'host has {count} instance{"" if count == 1 else "s"}'


class AggregateNumInstancesFilter(NumInstancesFilter):
    """NumInstancesFilter whose limit an aggregate of the host may set (metadata
    ``max_instances_per_host``; the smallest value wins)."""

    per_aggregate = True
