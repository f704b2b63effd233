"""Capacity answers: "how many more of flavor X fit, and where do they land?"

The entries of a workload file run one boot at a time, in file order: with
one request in flight the first NoValidHost of an entry is a property of the
cloud, not of a race between client threads. :func:`run_entries` does the
I/O (through a send function, the runner's RPC call); the rest is pure.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from scheduler.simulate.report import Outcome
from scheduler.simulate.workload import BootRequest
from scheduler.simulate.workload_file import FillEntry, RequestEntry, WorkloadFile, boot_request

HOSTS_SHOWN = 8

Send = Callable[[BootRequest], Outcome]
AzOf = Callable[[str], str]


@dataclass(frozen=True)
class EntryResult:
    """What one workload entry achieved."""

    label: str                          # 'fill m1.large', '100 x m1.small', ...
    flavor: str
    fill: bool
    boots_sent: int
    instances_requested: int            # for a fill: instances tried, the failed one included
    placed_before_first_failure: int    # instances
    instances_placed: int
    first_failure: str | None = None    # 'NoValidHost: <reason>' or another error
    stopped_at_max: bool = False
    per_host: dict[str, int] = field(default_factory=dict)
    per_az: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class CapacityReport:
    entries: tuple[EntryResult, ...]

    def by_flavor(self) -> dict[str, int]:
        """Flavor -> instances placed before the first failure of each entry, summed."""
        totals: Counter[str] = Counter()
        for e in self.entries:
            totals[e.flavor] += e.placed_before_first_failure
        return dict(totals)


def _label_request(entry: RequestEntry) -> str:
    parts = [f'{entry.count} x {entry.flavor}']
    if entry.instances > 1:
        parts.append(f'({entry.instances} instances each)')
    if entry.anti_affinity:
        parts.append('anti-affinity')
    if entry.az:
        parts.append(f'@{entry.az}')
    return ' '.join(parts)


def _label_fill(entry: FillEntry) -> str:
    return f'fill {entry.flavor}' + (f' @{entry.az}' if entry.az else '')


def _failure(outcome: Outcome) -> str:
    return f'{outcome.error}: {outcome.reason}' if outcome.reason else str(outcome.error)


def _result(label: str, flavor: str, fill: bool, outcomes: Sequence[Outcome], az_of: AzOf,
            *, stopped_at_max: bool = False) -> EntryResult:
    hosts: Counter[str] = Counter()
    zones: Counter[str] = Counter()
    before = 0
    first: Outcome | None = None
    for o in outcomes:
        for placed in o.placed:
            hosts[placed.host] += 1
            zones[az_of(placed.host)] += 1
        if o.ok and first is None:
            before += len(o.placed)
        elif not o.ok and first is None:
            first = o
    return EntryResult(
        label=label, flavor=flavor, fill=fill, boots_sent=len(outcomes),
        instances_requested=sum(o.num_instances for o in outcomes),
        placed_before_first_failure=before,
        instances_placed=sum(len(o.placed) for o in outcomes),
        first_failure=_failure(first) if first is not None else None,
        stopped_at_max=stopped_at_max,
        per_host=dict(sorted(hosts.items(), key=lambda kv: (-kv[1], kv[0]))),
        per_az=dict(sorted(zones.items())))


def run_entries(workload: WorkloadFile, send: Send, az_of: AzOf, *,
                first_index: int = 0) -> CapacityReport:
    """Requests first (every boot is sent, failures or not), then each fill until its first
    failure or its ``max``. Boots are numbered from ``first_index``."""
    index = first_index
    results = []
    for entry in workload.requests:
        outcomes = []
        for _ in range(entry.count):
            outcomes.append(send(boot_request(workload, index=index, flavor=entry.flavor,
                                              instances=entry.instances,
                                              anti_affinity=entry.anti_affinity,
                                              az=entry.az)))
            index += 1
        results.append(_result(_label_request(entry), entry.flavor, False, outcomes, az_of))
    for fill in workload.fills:
        outcomes = []
        while len(outcomes) < fill.max:
            outcome = send(boot_request(workload, index=index, flavor=fill.flavor, az=fill.az))
            index += 1
            outcomes.append(outcome)
            if not outcome.ok:
                break
        stopped = bool(outcomes) and outcomes[-1].ok
        results.append(_result(_label_fill(fill), fill.flavor, True, outcomes, az_of,
                               stopped_at_max=stopped))
    return CapacityReport(entries=tuple(results))


def to_json(report: CapacityReport) -> dict[str, Any]:
    return {'entries': [asdict(e) for e in report.entries], 'by_flavor': report.by_flavor()}


def _hosts_line(per_host: Mapping[str, int]) -> str:
    items = list(per_host.items())
    shown = ', '.join(f'{host} {n}' for host, n in items[:HOSTS_SHOWN])
    hidden = len(items) - HOSTS_SHOWN
    return shown + (f', ... {hidden} more hosts (see --json)' if hidden > 0 else '')


def render(report: CapacityReport) -> str:
    lines = ['Capacity (one boot at a time, in workload order):']
    for e in report.entries:
        if e.fill:
            head = (f'  {e.label}: {e.placed_before_first_failure} more fit'
                    + (f' (stopped at max {e.boots_sent}, not full)' if e.stopped_at_max
                       else ''))
        else:
            head = (f'  {e.label}: {e.instances_placed}/{e.instances_requested} instances '
                    f'placed, {e.placed_before_first_failure} before the first failure')
        lines.append(head)
        if e.first_failure:
            lines.append(f'    stopped by: {e.first_failure}')
        if e.per_az:
            lines.append('    per AZ:   ' + ', '.join(f'{az} {n}' for az, n in e.per_az.items()))
        if e.per_host:
            lines.append(f'    per host ({len(e.per_host)} hosts): {_hosts_line(e.per_host)}')
    return '\n'.join(lines)
