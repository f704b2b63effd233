"""Run the configured filters over the hosts of one instance, Nova's way.

Order is the configured order; once-per-request filters run only for the
first instance; on a rebuild check only RUN_ON_REBUILD filters run (the others
auto-pass); filtering stops as soon as no host is left. Every step is recorded
(hosts in, hosts removed grouped by reason, or why the filter did not run) so
that NoValidHost and the explain command can say which filter emptied the list.
"""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from scheduler.exceptions import FilterError
from scheduler.filters.base import BaseHostFilter, host_label
from scheduler.host_table import HostView, RowLabels, as_view
from scheduler.vector_hooks import trusted_hook

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

SKIPPED_ONCE_PER_REQUEST = 'runs once per request'
SKIPPED_ON_REBUILD = 'not run on rebuild'
SKIPPED_NO_HOSTS = 'no hosts left'
#: Reason recorded when a plugin's filter_all returns None (Nova: "stop filtering").
STOPPED_FILTERING = 'filter stopped filtering'

# Bounds the host names listed per reason in the DEBUG log line; the FilterStep keeps all.
_LOG_NAMES_PER_REASON = 20


@dataclass(frozen=True)
class FilterStep:
    """What one filter did for one instance."""

    name: str
    hosts_in: int
    #: reason -> names of the hosts removed for it, in input order
    removed: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: why the filter did not run (one of the SKIPPED_* values); None if it ran
    skipped: str | None = None

    @property
    def ran(self) -> bool:
        return self.skipped is None

    @property
    def removed_count(self) -> int:
        if isinstance(self.removed, RemovedHosts):
            return self.removed.hosts
        return sum(len(names) for names in self.removed.values())

    def removed_counts(self) -> Mapping[str, int]:
        """Reason -> how many hosts were removed for it, in the order of ``removed``
        (counted when first read: :func:`removed_total` needs no count)."""
        if isinstance(self.removed, RemovedHosts):
            return self.removed.counts()
        return {why: len(names) for why, names in self.removed.items()}

    @property
    def hosts_out(self) -> int:
        return self.hosts_in - self.removed_count

    def describe(self) -> str:
        if self.skipped is not None:
            return f'{self.name} not run ({self.skipped})'
        return f'Filter {self.name} returned {self.hosts_out} of {self.hosts_in} hosts'


@dataclass(frozen=True)
class FilterRun:
    """The outcome of :func:`apply_filters`."""

    #: the hosts that passed
    hosts: HostView
    steps: list[FilterStep]

    @property
    def emptied_by(self) -> FilterStep | None:
        """The filter that removed the last host, if one did."""
        for step in self.steps:
            if step.ran and step.hosts_in > 0 and step.hosts_out == 0:
                return step
        return None

    def summary(self) -> str:
        return '; '.join(step.describe() for step in self.steps)


def apply_filters(filters: Sequence[BaseHostFilter], hosts: Sequence[HostState],
                  spec_obj: RequestSpec, *, instance_index: int,
                  rebuild: bool = False, vectorised: bool = True) -> FilterRun:
    """Filter ``hosts`` for the instance at ``instance_index`` of the request.

    ``hosts`` are rows of a host table (a :class:`~scheduler.host_table.HostView`;
    other sequences of HostStates become one), and so are the hosts that pass.
    With ``vectorised``, a filter with a trusted column-wise hook judges all rows
    at once, and HostStates are built only for the rows it leaves undecided;
    without, every filter judges host by host.

    Raises :class:`FilterError` (naming the filter and host) when a plugin raises.
    """
    remaining = as_view(hosts)
    hosts_in = len(remaining)
    steps: list[FilterStep] = []
    for filter_ in filters:
        name = filter_.name
        if not remaining:
            steps.append(FilterStep(name, 0, skipped=SKIPPED_NO_HOSTS))
            continue
        if rebuild and not filter_.RUN_ON_REBUILD:
            steps.append(FilterStep(name, len(remaining), skipped=SKIPPED_ON_REBUILD))
            continue
        if not filter_.run_filter_for_index(instance_index):
            steps.append(FilterStep(name, len(remaining), skipped=SKIPPED_ONCE_PER_REQUEST))
            continue
        passed, removed = _evaluate(filter_, remaining, spec_obj, vectorised)
        step = FilterStep(name, len(remaining), removed)
        steps.append(step)
        _log_removals(step, instance_index)
        remaining = passed
    run = FilterRun(remaining, steps)
    if filters and LOG.isEnabledFor(logging.INFO):
        LOG.info('Filtering for instance index %d: %d of %d hosts passed: %s',
                 instance_index, len(remaining), hosts_in, run.summary())
    return run


def _evaluate(filter_: BaseHostFilter, view: HostView, spec_obj: RequestSpec,
              vectorised: bool) -> tuple[HostView, Mapping[str, Sequence[str]]]:
    table, rows = view.table, view.rows
    if type(filter_).filter_all is not BaseHostFilter.filter_all:
        passed, dropped = _evaluate_filter_all(filter_, list(view), spec_obj)
        kept = {id(h) for h in passed}
        return view.where(np.array([id(table.host(r)) in kept for r in rows.tolist()],
                                   dtype=bool)), dropped
    hook = (trusted_hook(filter_, 'filter_rows', BaseHostFilter,
                         ('filter_result', 'host_passes')) if vectorised else None)
    verdict = None
    if hook is not None:
        try:
            verdict = hook(table, rows, spec_obj)
        except Exception as exc:
            raise FilterError(filter_.name, f'{type(exc).__name__}: {exc}') from exc
    if verdict is None:
        mask = np.zeros(len(rows), dtype=bool)
        failed: dict[int, str] = {}
    else:
        mask = np.array(verdict.passed, dtype=bool, copy=True)
        failed = dict(verdict.failed)
    # What the hook left undecided (everything, without one) is judged host by host.
    undecided = np.flatnonzero(~mask)
    for pos in undecided.tolist():
        if pos in failed:
            continue
        host = table.host(int(rows[pos]))
        try:
            result = filter_.filter_result(host, spec_obj)
        except Exception as exc:
            raise FilterError(filter_.name, f'{type(exc).__name__}: {exc}',
                              host=host_label(host)) from exc
        if result.passed:
            mask[pos] = True
        else:
            failed[pos] = result.reason or filter_.failure_reason
    return view.where(mask), _removed(view, failed)


def _removed(view: HostView, failed: dict[int, str]) -> Mapping[str, Sequence[str]]:
    return RemovedHosts(view, failed) if failed else {}


class ReasonCounts(Mapping[str, int]):
    """Reason -> how many hosts were removed for it, reasons in the order of their
    first host; counted when first read. Every request logs how many hosts each
    filter removed, and only a NoValidHost or an explanation says why: at 50,000
    hosts, counting the reasons of every request (one per silent compute, which
    says for how long) was 4% of a worker's profile samples."""

    __slots__ = ('_failed', '_counts')

    def __init__(self, failed: Mapping[int, str]):
        self._failed = failed
        self._counts: dict[str, int] | None = None

    @property
    def total(self) -> int:
        return len(self._failed)

    def _counted(self) -> dict[str, int]:
        if self._counts is None:
            failed = self._failed
            self._counts = dict(Counter(map(failed.__getitem__, sorted(failed))))
        return self._counts

    def __getitem__(self, why: str) -> int:
        return self._counted()[why]

    def __iter__(self) -> Iterator[str]:
        return iter(self._counted())

    def __len__(self) -> int:
        return len(self._counted())

    def __repr__(self) -> str:
        return repr(self._counted())


def removed_total(counts: Mapping[str, int]) -> int:
    """How many hosts a step's counts (:meth:`FilterStep.removed_counts`) removed."""
    return counts.total if isinstance(counts, ReasonCounts) else sum(counts.values())


class RemovedHosts(Mapping[str, Sequence[str]]):
    """Reason -> the labels of the hosts removed for it (positions in a view), in input
    order, reasons in the order of their first host; grouped when first read.

    Every request counts the hosts each filter removed per reason (:meth:`counts`);
    a DEBUG line or an explanation names them. At 50,000 hosts, grouping them into
    rows per reason on every request was 3% of a worker's profile samples: the
    compute filter's reason for a silent service says for how long, so it differs
    from host to host."""

    __slots__ = ('_names', '_nodes', '_rows', '_failed', '_groups')

    def __init__(self, view: HostView, failed: dict[int, str]):
        table = view.table
        self._names, self._nodes, self._rows = table.host_names, table.nodenames, view.rows
        self._failed = failed
        self._groups: dict[str, RowLabels] | None = None

    @property
    def hosts(self) -> int:
        return len(self._failed)

    def counts(self) -> ReasonCounts:
        return ReasonCounts(self._failed)

    def _grouped(self) -> dict[str, RowLabels]:
        if self._groups is None:
            positions: dict[str, list[int]] = {}
            failed = self._failed
            for pos in sorted(failed):
                positions.setdefault(failed[pos], []).append(pos)
            self._groups = {
                why: RowLabels(self._names, self._nodes,
                               self._rows[np.array(at, dtype=np.intp)])
                for why, at in positions.items()}
        return self._groups

    def __getitem__(self, why: str) -> RowLabels:
        return self._grouped()[why]

    def __iter__(self) -> Iterator[str]:
        return iter(self._grouped())

    def __len__(self) -> int:
        if self._groups is not None:
            return len(self._groups)
        return len(set(self._failed.values()))


def _evaluate_filter_all(filter_: BaseHostFilter, hosts: Sequence[HostState],
                         spec_obj: RequestSpec) -> tuple[list[HostState], dict[str, list[str]]]:
    # A plugin that overrides filter_all judges the hosts together and gives
    # no per-host reason: its failure_reason stands for all hosts it dropped.
    try:
        kept = filter_.filter_all(list(hosts), spec_obj)
        kept_ids = None if kept is None else {id(h) for h in kept}
    except Exception as exc:
        raise FilterError(filter_.name, f'{type(exc).__name__}: {exc}') from exc
    reason = STOPPED_FILTERING if kept_ids is None else filter_.failure_reason
    kept_ids = kept_ids or set()
    # Input order is kept whatever order the plugin returned; hosts it made up are ignored.
    passed = [h for h in hosts if id(h) in kept_ids]
    dropped = [host_label(h) for h in hosts if id(h) not in kept_ids]
    return passed, ({reason: dropped} if dropped else {})


def _log_removals(step: FilterStep, instance_index: int) -> None:
    if not LOG.isEnabledFor(logging.DEBUG) or not step.removed:
        return
    parts = []
    for reason, names in step.removed.items():
        shown = ', '.join(names[:_LOG_NAMES_PER_REASON])
        more = len(names) - _LOG_NAMES_PER_REASON
        if more > 0:
            shown += f' (+{more} more)'
        parts.append(f'{reason} ({len(names)}): {shown}')
    LOG.debug('Filter %s removed %d of %d hosts for instance index %d: %s',
              step.name, step.removed_count, step.hosts_in, instance_index, '; '.join(parts))
