"""Why a request ended where it did.

Every stage of a request records what it saw in a :class:`RequestTrace`
(Nomad-style: explanations are collected while deciding, not reconstructed
afterwards). :func:`failure_reason` turns a trace into the one-line,
bounded, secret-free reason that travels back in NoValidHost, and
:func:`log_lines` into the detail that goes to the log.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

#: Longest reason sent to the caller; Nova stores it in the instance fault.
MAX_REASON_LENGTH = 512
_MAX_QUERY_IN_REASON = 200


@dataclass
class InstanceAttempt:
    """What happened while placing one instance of the request."""

    index: int
    hosts_in: int = 0
    # (filter name, hosts in, {reason: count}) in the order the filters ran
    filter_steps: list[tuple[str, int, dict[str, int]]] = field(default_factory=list)
    hosts_after_filters: int = 0
    claim_failures: Counter = field(default_factory=Counter)   # reason -> count
    claimed_host: str | None = None


@dataclass
class RequestTrace:
    num_instances: int = 0
    query: str | None = None
    limit: int | None = None
    candidates: int | None = None
    hosts: int | None = None
    request_filters: list[str] = field(default_factory=list)
    prefilter_removed: dict[str, int] = field(default_factory=dict)
    attempts: list[InstanceAttempt] = field(default_factory=list)
    placement_error: str | None = None

    def new_attempt(self, index: int, hosts_in: int) -> InstanceAttempt:
        attempt = InstanceAttempt(index=index, hosts_in=hosts_in)
        self.attempts.append(attempt)
        return attempt


def _bounded(text: str, limit: int = MAX_REASON_LENGTH) -> str:
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _filters_summary(attempt: InstanceAttempt) -> str:
    parts = []
    for name, _hosts_in, removed in attempt.filter_steps:
        count = sum(removed.values())
        if not count:
            continue
        if len(removed) == 1:
            why = next(iter(removed))
        else:
            why = '; '.join(f'{n} × {reason}' for reason, n in sorted(removed.items(),
                                                                       key=lambda kv: -kv[1]))
        parts.append(f'{name} removed {count} ({why})')
    return '; '.join(parts)


def no_candidates_reason(trace: RequestTrace) -> str:
    query = trace.query or ''
    if len(query) > _MAX_QUERY_IN_REASON:
        query = query[:_MAX_QUERY_IN_REASON - 3] + '...'
    return _bounded(f'Placement returned no allocation candidates for {query}')


def failure_reason(trace: RequestTrace) -> str:
    """The decisive stage, in one line (no host names: they may be sensitive)."""
    if trace.placement_error:
        return _bounded(trace.placement_error)
    if trace.candidates == 0:
        return no_candidates_reason(trace)
    failed = next((a for a in trace.attempts if a.claimed_host is None), None)
    if failed is None:
        return _bounded('There are not enough hosts available.')
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
        summary = _filters_summary(failed) or 'no hosts left'
        return _bounded(f'{head}: {prefix}{summary}')
    claims = ', '.join(f'{why}: {n}' for why, n in failed.claim_failures.most_common())
    return _bounded(
        f'{of}claims failed on all {failed.hosts_after_filters} hosts that passed the filters'
        f' ({claims or "no candidate left to claim"})')


def log_lines(trace: RequestTrace) -> list[str]:
    """Detail for the INFO log: counts per stage; host names stay at DEBUG elsewhere."""
    lines = [f'query: {trace.query} -> {trace.candidates} candidates on {trace.hosts} hosts'
             f' (limit {trace.limit})']
    if trace.request_filters:
        lines.append('request filters applied: ' + ', '.join(trace.request_filters))
    for a in trace.attempts:
        steps = ', '.join(f'{name} {hosts_in}->{hosts_in - sum(removed.values())}'
                          for name, hosts_in, removed in a.filter_steps)
        claims = dict(a.claim_failures)
        lines.append(f'instance {a.index + 1}: {a.hosts_in} hosts; filters: {steps or "none"};'
                     f' claim failures: {claims or "none"}; chosen: {a.claimed_host or "-"}')
    return lines
