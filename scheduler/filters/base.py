"""Host filters: the plugin surface.

A filter written for Nova keeps working here: subclass :class:`BaseHostFilter`
and implement ``host_passes(host_state, spec_obj) -> bool``, reading the same
attribute names Nova's ``HostState`` and ``RequestSpec`` have. Such a filter
removes hosts with its ``failure_reason``.

Built-in filters override :meth:`BaseHostFilter.filter_result` instead, so that
every removed host carries a precise, user-facing reason ("compute service is
disabled") that the explain output and NoValidHost can quote.

Built-in filters may also implement :meth:`BaseHostFilter.filter_rows`, which
judges every row of a :class:`~scheduler.host_table.HostTable` at once with
array operations and must agree with ``filter_result`` (the handler uses it
only when the class that defines it also defines the per-host method, so a
subclass that changes the per-host rule is judged host by host).

Filters that judge each allocation candidate of a host rather than the host
(Nova's NUMATopologyFilter and PciPassthroughFilter) subclass
:class:`scheduler.filters.candidate.BaseCandidateFilter`.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from scheduler.exceptions import ConfigurationError

if TYPE_CHECKING:
    from oslo_config import cfg

    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec


@dataclass(frozen=True)
class RowsVerdict:
    """:meth:`BaseHostFilter.filter_rows`' answer for the rows it was given.

    ``passed[i]`` is True for rows known to pass; ``failed`` maps positions
    (indexes into the rows) to the reason they fail. Rows in neither are
    judged host by host with :meth:`BaseHostFilter.filter_result`.
    """

    passed: np.ndarray
    failed: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FilterResult:
    """A filter's verdict on one host; ``reason`` says why it failed, for users."""

    passed: bool
    reason: str | None = None

    @classmethod
    def ok(cls) -> FilterResult:
        return _PASSED

    @classmethod
    def fail(cls, reason: str) -> FilterResult:
        return cls(False, reason)


_PASSED = FilterResult(True, None)


class BaseHostFilter:
    """Base class of host filters, with Nova's surface.

    Subclasses implement :meth:`host_passes` (Nova's way) or
    :meth:`filter_result` (precise reasons); implementing either is enough.
    """

    # These three are class attributes of a filter written here; the adapter of a
    # Nova filter (scheduler/nova_plugins.py) sets them on its instance.
    #: Run only for the first instance of a multi-instance request, because
    #: what the filter reads cannot change between instances.
    run_filter_once_per_request: bool = False
    #: Evaluated for rebuild checks; other filters auto-pass on rebuild.
    RUN_ON_REBUILD: bool = False
    #: Reason used when :meth:`host_passes` says no; defaults per class to
    #: "rejected by <ClassName>" (set in ``__init_subclass__``).
    failure_reason: str = 'rejected by BaseHostFilter'
    _failure_reason_is_default: ClassVar[bool] = True

    #: The service's ConfigOpts, set by the plugin loader after instantiation
    #: (Nova's filters take no constructor arguments, so neither do ours).
    conf: cfg.ConfigOpts | None = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if 'failure_reason' in cls.__dict__:
            cls._failure_reason_is_default = False
        elif cls._failure_reason_is_default:
            cls.failure_reason = f'rejected by {cls.__name__}'

    @property
    def name(self) -> str:
        return type(self).__name__

    def host_passes(self, host_state: HostState, spec_obj: RequestSpec) -> bool:
        """Nova's entry point: True if the host can take the instance."""
        if type(self).filter_result is BaseHostFilter.filter_result:
            raise NotImplementedError(
                f'{self.name} must implement host_passes() or filter_result()')
        return self.filter_result(host_state, spec_obj).passed

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        """The verdict with a reason; by default wraps :meth:`host_passes`."""
        if self.host_passes(host_state, spec_obj):
            return _PASSED
        return FilterResult(False, self.failure_reason)

    def filter_rows(self, table: HostTable, rows: np.ndarray,
                    spec_obj: RequestSpec) -> RowsVerdict | None:
        """Judge the hosts at ``rows`` of ``table`` together, or None to judge
        each host with :meth:`filter_result` (the default)."""
        return None

    def run_filter_for_index(self, index: int) -> bool:
        """Nova's hook: whether to run for the instance at ``index`` of the request."""
        return not (self.run_filter_once_per_request and index > 0)

    def filter_all(self, hosts: Iterable[HostState],
                   spec_obj: RequestSpec) -> Sequence[HostState] | None:
        """The hosts that pass, in input order (Nova's signature).

        A plugin may override this to judge hosts together; the handler then
        records its failure_reason for the hosts it dropped.
        """
        return [h for h in hosts if self.filter_result(h, spec_obj).passed]

    def require_conf(self) -> cfg.ConfigOpts:
        """The configuration, or a clear error if the filter was built by hand without it."""
        if self.conf is None:
            raise ConfigurationError(
                f'{self.name} has no configuration; set .conf (the plugin loader does)')
        return self.conf


def all_pass(rows: np.ndarray) -> RowsVerdict:
    """Every row passes (the request asks nothing this filter checks)."""
    return RowsVerdict(np.ones(len(rows), dtype=bool))


def host_label(host_state: HostState) -> str:
    """How a host is named in reasons and logs: the service host, plus the node if different
    (several nodes per service host, as with ironic)."""
    node = host_state.nodename
    if not node or node == host_state.host:
        return host_state.host
    return f'{host_state.host} ({node})'
