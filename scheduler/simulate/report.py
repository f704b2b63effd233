"""Outcomes of a simulation: progress while it runs, a summary at the end.

Pure apart from the streams it is handed: the runner collects one
:class:`Outcome` per request and reads :class:`ProviderUsage` back from
Placement; :func:`summarise` turns both into a :class:`Summary`, which
:func:`render` prints and :func:`to_json` serialises.
"""
from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import IO, Any

#: Resource classes the utilisation summary reports, in this order.
REPORTED_CLASSES = ('VCPU', 'MEMORY_MB', 'DISK_GB')
#: Usage bands (upper bounds, percent); a host at exactly a bound falls in the lower band.
BANDS = ((25, '0-25%'), (50, '25-50%'), (75, '50-75%'), (100, '75-100%'))
OVER_CAPACITY = '>100%'
LOADED_HOSTS_SHOWN = 5
REASON_GROUPS_SHOWN = 10
_REASON_EXAMPLE_LENGTH = 160

_UUID_RE = re.compile(r'[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-'
                      r'[0-9a-fA-F]{12}')
_NUMBER_RE = re.compile(r'\d+')


# Inputs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlacedInstance:
    instance_uuid: str
    host: str
    compute_node_uuid: str
    alternates: int = 0


@dataclass(frozen=True)
class Outcome:
    """What one ``select_destinations`` call returned."""

    index: int
    kind: str
    num_instances: int
    latency_s: float
    placed: tuple[PlacedInstance, ...] = ()
    error: str | None = None     # 'NoValidHost', 'InvalidInput' or an exception class name
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ProviderUsage:
    """One root provider as Placement reports it after the run."""

    uuid: str
    name: str
    capacity: Mapping[str, int]
    used: Mapping[str, int]
    consumers: frozenset[str] = frozenset()
    disabled: bool = False

    def ratio(self, resource_class: str) -> float | None:
        capacity = self.capacity.get(resource_class, 0)
        if capacity <= 0:
            return None
        return self.used.get(resource_class, 0) / capacity

    @property
    def load(self) -> float:
        """The fullest reported class decides how loaded a host is."""
        ratios = [r for r in (self.ratio(rc) for rc in REPORTED_CLASSES) if r is not None]
        return max(ratios, default=0.0)

    @property
    def over_capacity(self) -> tuple[str, ...]:
        return tuple(rc for rc, used in self.used.items()
                     if used > self.capacity.get(rc, 0))


@dataclass(frozen=True)
class Scenario:
    hosts: int
    requests: int
    seed: int
    concurrency: int
    availability_zones: int = 0
    disabled_hosts: int = 0


# Progress ------------------------------------------------------------------------------


class Progress:
    """A progress bar on a TTY; on anything else a plain line at every 10 %."""

    WIDTH = 30

    def __init__(self, total: int, stream: IO[str], *, is_tty: bool | None = None,
                 clock=time.monotonic):
        self.total = total
        self.stream = stream
        self.is_tty = stream.isatty() if is_tty is None else is_tty
        self._clock = clock
        self._start = clock()
        self._next_decile = 1

    def _line(self, done: int, placed: int, failed: int) -> str:
        share = done / self.total if self.total else 1.0
        elapsed = self._clock() - self._start
        return (f'{done}/{self.total} requests ({share:.0%}), {placed} placed, '
                f'{failed} failed, {elapsed:.1f} s')

    def update(self, done: int, placed: int, failed: int) -> None:
        if self.is_tty:
            filled = int(self.WIDTH * done / self.total) if self.total else self.WIDTH
            bar = '#' * filled + '.' * (self.WIDTH - filled)
            self.stream.write(f'\r[{bar}] {self._line(done, placed, failed)}')
            if done >= self.total:
                self.stream.write('\n')
            self.stream.flush()
            return
        # One line per decile crossed, however many requests a step completes.
        reached = done * 10 // self.total if self.total else 10
        if reached >= self._next_decile:
            self._next_decile = reached + 1
            self.stream.write(self._line(done, placed, failed) + '\n')
            self.stream.flush()


class Collector:
    """Thread-safe sink for the client threads' outcomes."""

    def __init__(self, progress: Progress | None = None):
        self._lock = threading.Lock()
        self._outcomes: list[Outcome] = []
        self._progress = progress
        self._placed = 0
        self._failed = 0

    def add(self, outcome: Outcome) -> None:
        with self._lock:
            self._outcomes.append(outcome)
            if outcome.ok:
                self._placed += 1
            else:
                self._failed += 1
            if self._progress is not None:
                self._progress.update(len(self._outcomes), self._placed, self._failed)

    @property
    def outcomes(self) -> list[Outcome]:
        with self._lock:
            return sorted(self._outcomes, key=lambda o: o.index)


# Summary -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LatencyStats:
    """Milliseconds per ``select_destinations`` call, as the client saw it."""

    count: int = 0
    p50: float = 0.0
    p90: float = 0.0
    p99: float = 0.0
    max: float = 0.0
    mean: float = 0.0


@dataclass(frozen=True)
class HostLoad:
    name: str
    uuid: str
    load: float
    usage: dict[str, float]   # resource class -> share of capacity


@dataclass(frozen=True)
class Utilisation:
    hosts: int = 0
    #: resource class -> band label -> number of hosts
    bands: dict[str, dict[str, int]] = field(default_factory=dict)
    #: resource class -> {'used': n, 'capacity': n}
    totals: dict[str, dict[str, int]] = field(default_factory=dict)
    most_loaded: list[HostLoad] = field(default_factory=list)
    least_loaded: list[HostLoad] = field(default_factory=list)
    over_capacity: list[str] = field(default_factory=list)     # provider names
    disabled_with_allocations: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Summary:
    scenario: Scenario
    wall_time_s: float
    requests_placed: int
    requests_failed: int
    instances_requested: int
    instances_placed: int
    consumers_in_placement: int
    no_valid_host: dict[str, int]      # reason group -> count
    no_valid_host_examples: dict[str, str]
    errors: dict[str, int]             # error class -> count (not NoValidHost)
    error_examples: dict[str, str]     # error class -> the first message seen
    latency: LatencyStats
    utilisation: Utilisation
    #: seconds per phase of the run (placement_start, seed, service_start, requests, ...)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return self.requests_placed + self.requests_failed

    def problems(self) -> list[str]:
        """What a correct scheduler never produces; NoValidHost is not among them."""
        found = []
        if self.errors:
            found.append('calls failed with errors other than NoValidHost: '
                         + ', '.join(f'{n} {name}' for name, n in self.errors.items()))
        if self.consumers_in_placement != self.instances_placed:
            found.append(f'{self.consumers_in_placement} consumers hold allocations in '
                         f'Placement but {self.instances_placed} instances were placed')
        if self.utilisation.over_capacity:
            found.append('providers over capacity: '
                         + ', '.join(self.utilisation.over_capacity))
        if self.utilisation.disabled_with_allocations:
            found.append('disabled hosts got instances: '
                         + ', '.join(self.utilisation.disabled_with_allocations))
        return found


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def latency_stats(latencies_s: Iterable[float]) -> LatencyStats:
    ms = sorted(v * 1000.0 for v in latencies_s)
    if not ms:
        return LatencyStats()
    return LatencyStats(count=len(ms), p50=percentile(ms, 50), p90=percentile(ms, 90),
                        p99=percentile(ms, 99), max=ms[-1], mean=sum(ms) / len(ms))


def reason_group(reason: str | None) -> str:
    """Reasons of one kind differ only in uuids and counts; group them without those."""
    if not reason:
        return '(no reason given)'
    return _NUMBER_RE.sub('N', _UUID_RE.sub('<uuid>', reason))


def band_of(ratio: float) -> str:
    pct = ratio * 100
    for bound, label in BANDS:
        if pct <= bound:
            return label
    return OVER_CAPACITY


def utilisation(usages: Sequence[ProviderUsage]) -> Utilisation:
    bands: dict[str, dict[str, int]] = {}
    totals: dict[str, dict[str, int]] = {}
    for rc in REPORTED_CLASSES:
        counts = {label: 0 for _, label in BANDS}
        for u in usages:
            ratio = u.ratio(rc)
            if ratio is not None:
                label = band_of(ratio)
                counts[label] = counts.get(label, 0) + 1
        bands[rc] = counts
        totals[rc] = {'used': sum(u.used.get(rc, 0) for u in usages),
                      'capacity': sum(u.capacity.get(rc, 0) for u in usages)}

    def load(u: ProviderUsage) -> HostLoad:
        return HostLoad(name=u.name, uuid=u.uuid, load=u.load,
                        usage={rc: r for rc in REPORTED_CLASSES
                               if (r := u.ratio(rc)) is not None})

    # Disabled hosts take nothing new, so they would crowd the least-loaded list.
    enabled = sorted((u for u in usages if not u.disabled), key=lambda u: (-u.load, u.name))
    most = [load(u) for u in enabled[:LOADED_HOSTS_SHOWN]]
    least = [load(u) for u in reversed(enabled[-LOADED_HOSTS_SHOWN:])] if enabled else []
    return Utilisation(
        hosts=len(usages), bands=bands, totals=totals, most_loaded=most, least_loaded=least,
        over_capacity=sorted(u.name for u in usages if u.over_capacity),
        disabled_with_allocations=sorted(u.name for u in usages if u.disabled and u.consumers))


def summarise(outcomes: Sequence[Outcome], usages: Sequence[ProviderUsage], *,
              scenario: Scenario, wall_time_s: float,
              phases: Mapping[str, float] | None = None) -> Summary:
    nvh: Counter[str] = Counter()
    examples: dict[str, str] = {}
    errors: Counter[str] = Counter()
    error_examples: dict[str, str] = {}
    for o in outcomes:
        if o.error == 'NoValidHost':
            group = reason_group(o.reason)
            nvh[group] += 1
            examples.setdefault(group, o.reason or '')
        elif o.error is not None:
            errors[o.error] += 1
            error_examples.setdefault(o.error, o.reason or '')
    consumers: set[str] = set()
    for u in usages:
        consumers |= u.consumers
    return Summary(
        scenario=scenario,
        wall_time_s=wall_time_s,
        requests_placed=sum(1 for o in outcomes if o.ok),
        requests_failed=sum(1 for o in outcomes if not o.ok),
        instances_requested=sum(o.num_instances for o in outcomes),
        instances_placed=sum(len(o.placed) for o in outcomes),
        consumers_in_placement=len(consumers),
        no_valid_host=dict(nvh.most_common()),
        no_valid_host_examples=examples,
        errors=dict(errors.most_common()),
        error_examples=error_examples,
        latency=latency_stats(o.latency_s for o in outcomes),
        utilisation=utilisation(usages),
        phases=dict(phases or {}),
    )


# Output --------------------------------------------------------------------------------


def to_json(summary: Summary) -> dict[str, Any]:
    body = asdict(summary)
    body['requests'] = summary.requests
    body['problems'] = summary.problems()
    body['no_valid_host'] = [
        {'reason': group, 'count': count,
         'example': summary.no_valid_host_examples.get(group, '')}
        for group, count in summary.no_valid_host.items()]
    del body['no_valid_host_examples']
    return body


def write_json(summary: Summary, path: str) -> None:
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(to_json(summary), f, indent=2, sort_keys=True)
        f.write('\n')


def _pct(value: float) -> str:
    return f'{value * 100:.0f}%'


def _host_line(h: HostLoad) -> str:
    usage = ' '.join(f'{rc} {_pct(r)}' for rc, r in h.usage.items())
    return f'    {h.name}  {usage}'


def _shorten(text: str, length: int = _REASON_EXAMPLE_LENGTH) -> str:
    return text if len(text) <= length else text[:length - 3] + '...'


def _setup_times(phases: Mapping[str, float]) -> str:
    setup = [(label, phases[key]) for key, label in (
        ('placement_start', 'Placement start'), ('seed', 'seeding'),
        ('service_start', 'service start'), ('readback', 'usage read-back')) if key in phases]
    if not setup:
        return ''
    return '; ' + ', '.join(f'{label} {seconds:.1f} s' for label, seconds in setup)


def render(summary: Summary) -> str:
    s = summary.scenario
    u = summary.utilisation
    lat = summary.latency
    rate = summary.requests / summary.wall_time_s if summary.wall_time_s > 0 else 0.0
    lines = [
        f'Simulation: {s.hosts} hosts ({s.availability_zones} availability zones, '
        f'{s.disabled_hosts} disabled), {s.requests} requests, seed {s.seed}, '
        f'concurrency {s.concurrency}',
        f'Requests:  {summary.requests_placed}/{summary.requests} placed, '
        f'{sum(summary.no_valid_host.values())} NoValidHost, '
        f'{sum(summary.errors.values())} other errors',
        f'Instances: {summary.instances_placed}/{summary.instances_requested} placed; '
        f'{summary.consumers_in_placement} consumers hold allocations in Placement',
        f'Time:      {summary.wall_time_s:.1f} s for the requests ({rate:.1f} requests/s)'
        + _setup_times(summary.phases),
        f'Latency:   p50 {lat.p50:.0f} ms, p90 {lat.p90:.0f} ms, p99 {lat.p99:.0f} ms, '
        f'max {lat.max:.0f} ms (mean {lat.mean:.0f} ms)',
    ]
    if summary.no_valid_host:
        lines.append('NoValidHost by reason:')
        for group, count in list(summary.no_valid_host.items())[:REASON_GROUPS_SHOWN]:
            example = summary.no_valid_host_examples.get(group, group)
            lines.append(f'  {count:5d}  {_shorten(example)}')
        hidden = len(summary.no_valid_host) - REASON_GROUPS_SHOWN
        if hidden > 0:
            lines.append(f'         ... and {hidden} more kinds (see --json)')
    if summary.errors:
        lines.append('Errors:')
        for name, count in summary.errors.items():
            error_example = summary.error_examples.get(name)
            lines.append(f'  {count:5d}  {name}'
                         + (f': {_shorten(error_example)}' if error_example else ''))
    labels = [label for _, label in BANDS]
    if any(u.bands.get(rc, {}).get(OVER_CAPACITY) for rc in REPORTED_CLASSES):
        labels.append(OVER_CAPACITY)
    lines.append(f'Utilisation of {u.hosts} hosts (hosts per usage band, total used/capacity):')
    lines.append('  ' + ' ' * 10 + ''.join(f'{label:>9}' for label in labels) + '    total')
    for rc in REPORTED_CLASSES:
        counts = u.bands.get(rc, {})
        total = u.totals.get(rc, {'used': 0, 'capacity': 0})
        share = total['used'] / total['capacity'] if total['capacity'] else 0.0
        lines.append(f'  {rc:<10}' + ''.join(f'{counts.get(label, 0):>9}' for label in labels)
                     + f'    {total["used"]}/{total["capacity"]} ({_pct(share)})')
    if u.most_loaded:
        lines.append('  most loaded:')
        lines += [_host_line(h) for h in u.most_loaded]
    if u.least_loaded:
        lines.append('  least loaded (enabled hosts):')
        lines += [_host_line(h) for h in u.least_loaded]
    lines.append(f'  over capacity: {", ".join(u.over_capacity) or "none"}; '
                 f'disabled hosts with allocations: '
                 f'{", ".join(u.disabled_with_allocations) or "none"}')
    problems = summary.problems()
    lines.append('Consistency: ' + ('; '.join(problems) if problems else
                                    'ok (one consumer per placed instance, no provider over '
                                    'capacity, no disabled host used, no errors)'))
    return '\n'.join(lines)


# Chart ---------------------------------------------------------------------------------

CHART_WIDTH = 40


def _bar(share: float, width: int, fill: str = '#', empty: str = '.') -> str:
    """A bar of ``width`` characters; any non-zero share shows at least one ``fill``."""
    share = min(max(share, 0.0), 1.0)
    filled = round(share * width)
    if share > 0 and filled == 0:
        filled = 1
    return fill * filled + empty * (width - filled)


def render_chart(u: Utilisation, width: int = CHART_WIDTH) -> str:
    """Plain-text utilisation chart: one bar per resource class (used of capacity), then,
    per class, how many hosts sit in each usage band. No colour, no terminal codes."""
    lines = [f'Utilisation chart ({u.hosts} hosts; # used, . free):']
    for rc in REPORTED_CLASSES:
        total = u.totals.get(rc, {'used': 0, 'capacity': 0})
        share = total['used'] / total['capacity'] if total['capacity'] else 0.0
        lines.append(f'  {rc:<10} [{_bar(share, width)}] {_pct(share):>4}  '
                     f'{total["used"]}/{total["capacity"]}')
    labels = [label for _, label in BANDS] + [OVER_CAPACITY]
    for rc in REPORTED_CLASSES:
        counts = u.bands.get(rc, {})
        most = max(counts.values(), default=0)
        lines.append(f'  hosts by {rc} usage:')
        for label in labels:
            n = counts.get(label, 0)
            if label == OVER_CAPACITY and not n:
                continue
            bar = _bar(n / most if most else 0.0, width, empty=' ').rstrip()
            lines.append(f'    {label:>7} |{bar} {n}')
    return '\n'.join(lines)
