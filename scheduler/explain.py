"""Why a request ended where it did.

Every stage of a request records what it saw in a :class:`RequestTrace`
(Nomad-style: explanations are collected while deciding, not reconstructed
afterwards). :func:`failure_reason` turns a trace into the one-line,
bounded, secret-free reason that travels back in NoValidHost, and
:func:`log_lines` into the detail that goes to the log.

:func:`build_report` turns the trace of a dry run (``SchedulerManager.explain``)
into an :class:`ExplainReport`: every stage with the hosts it removed and why,
the weighed top hosts with each weigher's share, and the host that would be
chosen. ``scheduler-manage explain`` prints it.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.filters.handler import removed_total

if TYPE_CHECKING:
    from scheduler.filters.handler import FilterStep
    from scheduler.host_table import WeighedHost
    from scheduler.objects.selection import Selection
    from scheduler.weights.base import Exclusion

#: Longest reason sent to the caller; Nova stores it in the instance fault.
MAX_REASON_LENGTH = 512
_MAX_QUERY_IN_REASON = 200
#: Host names per reason in a NoValidHost reason when ``explain_host_names`` is on.
MAX_NAMES_IN_REASON = 3


@dataclass
class InstanceAttempt:
    """What happened while placing one instance of the request."""

    index: int
    hosts_in: int = 0
    # (filter name, hosts in, {reason: count}) in the order the filters ran
    filter_steps: list[tuple[str, int, Mapping[str, int]]] = field(default_factory=list)
    hosts_after_filters: int = 0
    claim_failures: Counter = field(default_factory=Counter)   # reason -> count
    claimed_host: str | None = None
    # The detail behind filter_steps (host names per reason) and the weighing, kept
    # by reference: the manager built these lists anyway.
    steps: list[FilterStep] = field(default_factory=list)
    exclusions: list[Exclusion] = field(default_factory=list)
    weighed: Sequence[WeighedHost] = field(default_factory=list)
    #: True when a forced host (without a check type) skipped the filters, as in Nova
    filters_skipped: bool = False
    #: Whether ``weighed`` keeps each weigher's share of every host's weight (see
    #: :attr:`RequestTrace.weigher_shares`).
    weigher_shares: bool = False


@dataclass
class RequestTrace:
    num_instances: int = 0
    query: str | None = None
    #: The query as a reason may show it: no aggregate or provider uuid.
    query_for_users: str | None = None
    limit: int | None = None
    candidates: int | None = None
    hosts: int | None = None
    request_filters: list[str] = field(default_factory=list)
    prefilter_removed: dict[str, int] = field(default_factory=dict)
    attempts: list[InstanceAttempt] = field(default_factory=list)
    placement_error: str | None = None
    #: Whether the weighing keeps each weigher's share of every host's weight, which
    #: only an explanation shows: an array per weigher of every weighed host, held to
    #: the end of the request (7.5 of the 25 MB a worker's requests held at its peak,
    #: at 50,000 hosts: doc/performance.md).
    weigher_shares: bool = False

    def new_attempt(self, index: int, hosts_in: int) -> InstanceAttempt:
        attempt = InstanceAttempt(index=index, hosts_in=hosts_in,
                                  weigher_shares=self.weigher_shares)
        self.attempts.append(attempt)
        return attempt

    def restart_query(self) -> None:
        """Forget what the Placement query and the stages after it recorded, to decide
        once more on a new answer (the request filters ran once and stay)."""
        self.query = self.query_for_users = None
        self.limit = self.candidates = self.hosts = None
        self.prefilter_removed = {}
        self.attempts = []
        self.placement_error = None

    def note_retry_without_limit(self, first_limit: int | None) -> None:
        note = (f'asked again without a limit: the first {first_limit} candidates '
                f'had no host that could be chosen')
        self.query = f'{self.query} ({note})'
        self.query_for_users = f'{self.query_for_users} ({note})'

    @property
    def truncated(self) -> bool:
        """Placement may have had more candidates than the limit let through."""
        return (self.limit is not None and self.candidates is not None
                and self.candidates >= self.limit)


def _limit_note(trace: RequestTrace) -> str:
    """Said in a reason only when it matters: hosts beyond the limit were never seen."""
    if not trace.truncated:
        return ''
    return (f'; Placement returned {trace.candidates} candidates (limit {trace.limit}: '
            f'other hosts were not considered)')


def _bounded(text: str, limit: int = MAX_REASON_LENGTH) -> str:
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _removed_names(attempt: InstanceAttempt) -> dict[tuple[str, str], list[str]]:
    """(filter or weigher, reason) -> names of the hosts it removed."""
    names: dict[tuple[str, str], list[str]] = {}
    for step in attempt.steps:
        for reason, hosts in step.removed.items():
            names.setdefault((step.name, reason), []).extend(hosts)
    for e in attempt.exclusions:
        names.setdefault((e.weigher, e.reason), []).append(_label(e.host))
    return names


def _label(host: Any) -> str:
    from scheduler.filters.base import host_label  # filters import the host state; keep lazy
    return host_label(host)


def _with_names(reason: str, names: list[str]) -> str:
    if not names:
        return reason
    shown = ', '.join(names[:MAX_NAMES_IN_REASON])
    more = len(names) - MAX_NAMES_IN_REASON
    return f'{reason}: {shown}' + (f' +{more} more' if more > 0 else '')


def _filters_summary(attempt: InstanceAttempt, *, host_names: bool = False) -> str:
    names = _removed_names(attempt) if host_names else {}
    parts = []
    for name, _hosts_in, removed in attempt.filter_steps:
        count = removed_total(removed)
        if not count:
            continue
        if len(removed) == 1:
            reason = next(iter(removed))
            why = _with_names(reason, names.get((name, reason), []))
        else:
            why = '; '.join(f'{n} × {_with_names(reason, names.get((name, reason), []))}'
                            for reason, n in sorted(removed.items(), key=lambda kv: -kv[1]))
        parts.append(f'{name} removed {count} ({why})')
    return '; '.join(parts)


#: nova-scheduler's reason when no host is left for an instance.
NOVA_NOT_ENOUGH_HOSTS = 'There are not enough hosts available.'


def no_candidates_reason(trace: RequestTrace) -> str:
    query = trace.query_for_users or trace.query or ''
    if len(query) > _MAX_QUERY_IN_REASON:
        query = query[:_MAX_QUERY_IN_REASON - 3] + '...'
    return _bounded(f'Placement returned no allocation candidates for {query}')


def nova_failure_reason(trace: RequestTrace) -> str:
    """nova-scheduler's own reason for the same outcome (``no_valid_host_reason =
    nova``): empty when Placement had no candidates, "There are not enough hosts
    available." when filters or claims left none. A Placement outage is still
    said as such."""
    if trace.placement_error:
        return _bounded(trace.placement_error)
    if trace.candidates == 0:
        return ''
    return NOVA_NOT_ENOUGH_HOSTS


def failure_reason(trace: RequestTrace, *, host_names: bool = False) -> str:
    """The decisive stage, in one line.

    No host names unless ``host_names`` (``[scheduler] explain_host_names``):
    the reason reaches the user's instance fault. When Placement's answer
    was cut by the limit the line ends saying so, whatever its length.
    """
    if trace.placement_error:
        return _bounded(trace.placement_error)
    if trace.candidates == 0:
        return no_candidates_reason(trace)
    failed = next((a for a in trace.attempts if a.claimed_host is None), None)
    note = _limit_note(trace)
    if failed is None and not trace.attempts and trace.prefilter_removed:
        # Every host was set aside before any instance was tried.
        removed = ', '.join(f'{why}: {n}' for why, n in trace.prefilter_removed.items())
        total = sum(trace.prefilter_removed.values())
        return _bounded(f'0/{total} hosts available: {removed}' + note)
    if failed is None:
        return _bounded(NOVA_NOT_ENOUGH_HOSTS + note)
    which = (f'instance {failed.index + 1} of {trace.num_instances}'
             if trace.num_instances > 1 else '')
    of = f'{which}: ' if which else ''
    prefix = ''
    if trace.prefilter_removed:
        prefix = ', '.join(f'{why}: {n}' for why, n in trace.prefilter_removed.items()) + '; '
    if failed.hosts_after_filters == 0:
        # Like Nova, a host filtered out for one instance is not reconsidered for
        # the next; count from the first instance so the numbers add up.
        total = trace.attempts[0].hosts_in
        head = f'0/{total} hosts available' + (f' for {which}' if which else '')
        earlier = total - failed.hosts_in
        if earlier:
            prefix += f'{earlier} excluded for earlier instances of this request; '
        summary = _filters_summary(failed, host_names=host_names) or 'no hosts left'
        return _bounded(f'{head}: {prefix}{summary}', MAX_REASON_LENGTH - len(note)) + note
    claims = ', '.join(f'{why}: {n}' for why, n in failed.claim_failures.most_common())
    return _bounded(
        f'{of}claims failed on all {failed.hosts_after_filters} hosts that passed the filters'
        f' ({claims or "no candidate left to claim"})', MAX_REASON_LENGTH - len(note)) + note


def log_lines(trace: RequestTrace) -> list[str]:
    """Detail for the INFO log: counts per stage; host names stay at DEBUG elsewhere."""
    lines = [f'query: {trace.query} -> {trace.candidates} candidates on {trace.hosts} hosts'
             f' (limit {trace.limit})']
    if trace.request_filters:
        lines.append('request filters applied: ' + ', '.join(trace.request_filters))
    for a in trace.attempts:
        steps = ', '.join(f'{name} {hosts_in}->{hosts_in - removed_total(removed)}'
                          for name, hosts_in, removed in a.filter_steps)
        claims = dict(a.claim_failures)
        lines.append(f'instance {a.index + 1}: {a.hosts_in} hosts; filters: {steps or "none"};'
                     f' claim failures: {claims or "none"}; chosen: {a.claimed_host or "-"}')
    return lines


# ---------------------------------------------------------------- explain report
#: Weighed hosts shown per instance unless asked otherwise.
DEFAULT_TOP = 5


@dataclass(frozen=True)
class Removal:
    """Hosts one filter (or weigher) removed for one reason."""

    reason: str
    hosts: list[str]


@dataclass(frozen=True)
class StageReport:
    """One filter, or a weigher that could not weigh some hosts, for one instance."""

    name: str
    kind: str                      # 'filter' or 'weigher'
    hosts_in: int
    hosts_out: int
    removed: list[Removal]
    #: why the filter did not run; None when it ran
    skipped: str | None = None


@dataclass(frozen=True)
class WeighedReport:
    host: str
    nodename: str
    weight: float
    #: weigher name -> multiplier * normalised value (they sum to ``weight``)
    contributions: dict[str, float]


@dataclass(frozen=True)
class InstanceReport:
    index: int
    hosts_in: int
    stages: list[StageReport]
    hosts_passed: int
    #: the best ``top`` hosts by weight, best first; the chosen one may be another
    #: (``host_subset_size`` picks at random among the best)
    weighed: list[WeighedReport]
    chosen: str | None
    chosen_node: str | None
    alternates: list[str]
    #: why hosts that passed could not take the instance (e.g. full after earlier
    #: instances of this request)
    not_chosen: dict[str, int]
    filters_skipped: bool = False


@dataclass(frozen=True)
class PlacementReport:
    query: str | None
    limit: int | None
    candidates: int | None
    hosts: int | None
    truncated: bool
    error: str | None


@dataclass(frozen=True)
class ExplainReport:
    """What a request would get, stage by stage; nothing was claimed to find out."""

    num_instances: int
    request_filters: list[str]
    placement: PlacementReport
    #: Nova's host restrictions before the filters (destination, ignore/force hosts)
    prefilter_removed: dict[str, int]
    instances: list[InstanceReport]
    #: the NoValidHost reason the caller would get; None when every instance is placed
    reason: str | None
    #: the exception class the caller would get (NoValidHost, InvalidInput), or None
    error: str | None = None

    @property
    def placed(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data['placed'] = self.placed
        return data


def _stage_reports(attempt: InstanceAttempt) -> list[StageReport]:
    stages = [StageReport(name=s.name, kind='filter', hosts_in=s.hosts_in,
                          hosts_out=s.hosts_out,
                          removed=[Removal(reason, list(hosts))
                                   for reason, hosts in s.removed.items()],
                          skipped=s.skipped)
              for s in attempt.steps]
    by_weigher: dict[str, dict[str, list[str]]] = {}
    for e in attempt.exclusions:
        by_weigher.setdefault(e.weigher, {}).setdefault(e.reason, []).append(_label(e.host))
    hosts_in = len(attempt.weighed) + len(attempt.exclusions)
    for name, removed in by_weigher.items():
        out = hosts_in - sum(len(h) for h in removed.values())
        stages.append(StageReport(name=name, kind='weigher', hosts_in=hosts_in, hosts_out=out,
                                  removed=[Removal(r, h) for r, h in removed.items()]))
        hosts_in = out
    return stages


def build_report(trace: RequestTrace, *, selections: Sequence[Sequence[Selection]] = (),
                 error: Exception | None = None, top: int = DEFAULT_TOP) -> ExplainReport:
    """The report of a dry run: ``selections`` per placed instance (first = chosen),
    ``error`` the NoValidHost/InvalidInput the request would have got."""
    instances = []
    for i, attempt in enumerate(trace.attempts):
        chosen = selections[i] if i < len(selections) and selections[i] else ()
        instances.append(InstanceReport(
            index=attempt.index, hosts_in=attempt.hosts_in, stages=_stage_reports(attempt),
            hosts_passed=attempt.hosts_after_filters,
            weighed=[WeighedReport(host=w.host.host, nodename=w.host.nodename,
                                   weight=w.weight, contributions=dict(w.contributions))
                     for w in attempt.weighed[:max(top, 0)]],
            chosen=chosen[0].service_host if chosen else attempt.claimed_host,
            chosen_node=chosen[0].nodename if chosen else None,
            alternates=[s.service_host for s in chosen[1:]],
            not_chosen=dict(attempt.claim_failures), filters_skipped=attempt.filters_skipped))
    return ExplainReport(
        num_instances=trace.num_instances, request_filters=list(trace.request_filters),
        placement=PlacementReport(query=trace.query, limit=trace.limit,
                                  candidates=trace.candidates, hosts=trace.hosts,
                                  truncated=trace.truncated, error=trace.placement_error),
        prefilter_removed=dict(trace.prefilter_removed), instances=instances,
        reason=getattr(error, 'reason', None) or (str(error) if error else None),
        error=type(error).__name__ if error is not None else None)
