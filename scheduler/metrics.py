"""Every metric this service exports, and the Prometheus text format they are read in.

One module declares them all, so what an operator can graph is listed in one
place. The registry is a few dozen lines of stdlib instead of
``prometheus_client``: the service needs counters, gauges read at scrape time
and histograms, and one scrape target per worker process (see
:mod:`scheduler.metrics_server`), which needs none of prometheus_client's
multiprocess machinery (shared mmap files, a directory to clean on restart).

Instrumentation points are deliberately thin: :func:`stage` (a context
manager or decorator) times a stage of a request and remembers it as the
last stage the request entered, which is what a NoValidHost is attributed
to; :func:`request` times a whole request and counts its outcome; the claim
and Placement hooks count conflicts and errors where they are recognised.
All of it is per process and thread-safe; a request runs on one thread, so
the "last stage" is thread-local.
"""
from __future__ import annotations

import contextlib
import functools
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from scheduler import exceptions as exc

F = TypeVar('F', bound=Callable[..., Any])

CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

#: Seconds; Placement answers in tens to hundreds of ms, a whole request in up to seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
CANDIDATE_BUCKETS = (0, 1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000)

STAGES = ('request_filters', 'placement_query', 'host_states', 'filtering', 'weighing', 'claim')


def _escape(value: str) -> str:
    return value.replace('\\', r'\\').replace('\n', r'\n').replace('"', r'\"')


def _format_value(value: float) -> str:
    if math.isinf(value):
        return '+Inf' if value > 0 else '-Inf'
    if math.isnan(value):
        return 'NaN'
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _labels_text(names: Sequence[str], values: Sequence[str],
                 extra: tuple[str, str] | None = None) -> str:
    pairs = list(zip(names, values, strict=True))
    if extra is not None:
        pairs.append(extra)
    if not pairs:
        return ''
    return '{' + ','.join(f'{n}="{_escape(v)}"' for n, v in pairs) + '}'


class _Metric:
    kind = ''

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str] = ()):
        self.name = name
        self.help = help_text
        self.labelnames = tuple(labelnames)
        self._lock = threading.Lock()

    def _key(self, labels: dict[str, str]) -> tuple[str, ...]:
        if set(labels) != set(self.labelnames):
            raise ValueError(f'{self.name} takes labels {self.labelnames}, got {sorted(labels)}')
        return tuple(str(labels[n]) for n in self.labelnames)

    def header(self) -> list[str]:
        help_text = self.help.replace('\\', r'\\').replace('\n', r'\n')
        return [f'# HELP {self.name} {help_text}', f'# TYPE {self.name} {self.kind}']

    def samples(self) -> list[str]:
        raise NotImplementedError


class Counter(_Metric):
    """A monotonically increasing count. ``name`` must end in ``_total``."""

    kind = 'counter'

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str] = ()):
        super().__init__(name, help_text, labelnames)
        self._values: dict[tuple[str, ...], float] = {}

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        if amount < 0:
            raise ValueError('a counter only goes up')
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        with self._lock:
            return self._values.get(self._key(labels), 0.0)

    def samples(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        return [f'{self.name}{_labels_text(self.labelnames, k)} {_format_value(v)}'
                for k, v in items]


class Gauge(_Metric):
    """A value read when scraped, from the function the service registered."""

    kind = 'gauge'

    def __init__(self, name: str, help_text: str):
        super().__init__(name, help_text)
        self._read: Callable[[], float] | None = None

    def set_function(self, read: Callable[[], float] | None) -> None:
        with self._lock:
            self._read = read

    def value(self) -> float | None:
        with self._lock:
            read = self._read
        if read is None:
            return None
        try:
            return float(read())
        except Exception:  # a scrape must never fail because one source did
            return math.nan

    def samples(self) -> list[str]:
        value = self.value()
        return [] if value is None else [f'{self.name} {_format_value(value)}']


class Histogram(_Metric):
    """Observations in cumulative buckets, with their sum and count."""

    kind = 'histogram'

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str] = (),
                 buckets: Sequence[float] = LATENCY_BUCKETS):
        super().__init__(name, help_text, labelnames)
        if list(buckets) != sorted(set(buckets)):
            raise ValueError('buckets must be increasing')
        self.buckets = tuple(float(b) for b in buckets) + (math.inf,)
        # key -> (per-bucket counts, sum, count)
        self._values: dict[tuple[str, ...], tuple[list[int], float, int]] = {}

    def observe(self, value: float, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            counts, total, count = self._values.get(key, ([0] * len(self.buckets), 0.0, 0))
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    counts[i] += 1
                    break
            self._values[key] = (counts, total + value, count + 1)

    def count(self, **labels: str) -> int:
        with self._lock:
            return self._values.get(self._key(labels), ([], 0.0, 0))[2]

    def samples(self) -> list[str]:
        with self._lock:
            items = sorted((k, (list(c), s, n)) for k, (c, s, n) in self._values.items())
        lines = []
        for key, (counts, total, count) in items:
            cumulative = 0
            for bound, in_bucket in zip(self.buckets, counts, strict=True):
                cumulative += in_bucket
                le = ('le', _format_value(bound) if math.isinf(bound) else repr(bound))
                lines.append(f'{self.name}_bucket{_labels_text(self.labelnames, key, le)} '
                             f'{cumulative}')
            labels = _labels_text(self.labelnames, key)
            lines.append(f'{self.name}_sum{labels} {_format_value(total)}')
            lines.append(f'{self.name}_count{labels} {count}')
        return lines


class Registry:
    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}
        self._lock = threading.Lock()

    def register(self, metric: _Metric) -> Any:
        with self._lock:
            if metric.name in self._metrics:
                raise ValueError(f'metric {metric.name} is declared twice')
            self._metrics[metric.name] = metric
        return metric

    def render(self) -> str:
        """The Prometheus text exposition format (0.0.4) of every metric."""
        with self._lock:
            metrics = list(self._metrics.values())
        lines: list[str] = []
        for metric in metrics:
            lines.extend(metric.header())
            lines.extend(metric.samples())
        return '\n'.join(lines) + '\n'


REGISTRY = Registry()

# ------------------------------------------------------------------ the metrics

REQUESTS = REGISTRY.register(Counter(
    'scheduler_select_destinations_total',
    'select_destinations calls by outcome (selected, novalidhost, invalid_input, error); '
    'for novalidhost, stage is the last stage the request entered.',
    ('outcome', 'stage')))
REQUEST_LATENCY = REGISTRY.register(Histogram(
    'scheduler_select_destinations_seconds',
    'Duration of whole select_destinations calls, decoding to encoded answer.'))
STAGE_LATENCY = REGISTRY.register(Histogram(
    'scheduler_stage_seconds',
    'Duration of each stage of a request (request_filters, placement_query, filtering, '
    'weighing, claim); filtering and weighing are observed once per instance (and once more '
    'when alternates are chosen for several instances), '
    'claim once per allocation candidate tried.',
    ('stage',)))
CLAIM_CONFLICTS = REGISTRY.register(Counter(
    'scheduler_claim_conflicts_total',
    'Placement conflicts while claiming: provider_generation (retried), capacity (the '
    'candidate is gone), consumer (the consumer changed or already existed).',
    ('kind',)))
PLACEMENT_ERRORS = REGISTRY.register(Counter(
    'scheduler_placement_errors_total',
    'Placement calls that did not succeed, by kind: unavailable (after retries), auth, '
    'bad_request, not_found, conflict, version, client_error, other.',
    ('kind',)))
RETRIES_WITHOUT_LIMIT = REGISTRY.register(Counter(
    'scheduler_retries_without_limit_total',
    'Requests whose answer, cut at max_placement_results, had no host that could be '
    'chosen, asked again without the limit ([scheduler] retry_without_limit), by outcome '
    '(placed, novalidhost).',
    ('outcome',)))
PROVIDER_VIEW_QUERIES = REGISTRY.register(Counter(
    'scheduler_provider_view_queries_total',
    'Candidate queries with the provider view on ([scheduler] provider_view), by who '
    'answered (view, placement) and, for placement, why the view could not.',
    ('answer', 'why')))
PROVIDER_VIEW_READS = REGISTRY.register(Counter(
    'scheduler_provider_view_reads_total',
    'Reads of changes a worker took into its provider view with [scheduler] '
    'provider_view_shared_reads, by where from: the service\'s provider view reader '
    '(shared) or its own read of Placement\'s database (own: its first read, and any the '
    'reader did not answer or could not serve).',
    ('source',)))
PROVIDER_VIEW_REORDERS = REGISTRY.register(Counter(
    'scheduler_provider_view_reorders_total',
    'Times an instance\'s hosts were ordered again from the provider view after Placement '
    'refused a claim for capacity (the view was behind on that host), or a claim was '
    'withheld (scheduler_provider_view_claims_withheld_total); at most two per instance.'))
PROVIDER_VIEW_CLAIMS_WITHHELD = REGISTRY.register(Counter(
    'scheduler_provider_view_claims_withheld_total',
    'Claims not sent to Placement: at the moment of the claim, the host chosen from the '
    'provider view no longer had room for the request once the claims the service\'s '
    'other workers made since were counted; the hosts are ordered again instead (one of '
    'the reorders, at most two per instance).'))
TURN_WAIT = REGISTRY.register(Histogram(
    'scheduler_decision_turn_wait_seconds',
    'Time a request waited for its worker\'s turn to decide ([scheduler] '
    'concurrent_decisions), each time it had to: when it arrived, and after a wait on '
    'Placement or the services\' state, or to compute again after a claim on the provider '
    'view\'s hosts (resumed).',
    ('when',)))
CANDIDATES = REGISTRY.register(Histogram(
    'scheduler_allocation_candidates',
    'Allocation candidates Placement returned per request.', buckets=CANDIDATE_BUCKETS))
CATALOG_HOSTS = REGISTRY.register(Gauge(
    'scheduler_catalog_hosts', 'Compute nodes the hosts file describes.'))
CATALOG_NOVA_HYPERVISORS = REGISTRY.register(Gauge(
    'scheduler_catalog_nova_hypervisors',
    'Hypervisors the last compute API sync reported (0 when the sync is off).'))
CATALOG_AGGREGATES = REGISTRY.register(Gauge(
    'scheduler_catalog_aggregates', 'Aggregates the host catalog knows (file and casts).'))
CATALOG_INSTANCES = REGISTRY.register(Gauge(
    'scheduler_catalog_instances', 'Instances the host catalog knows from the casts.'))
PENDING_CLEANUPS = REGISTRY.register(Gauge(
    'scheduler_pending_cleanups',
    'Claims whose roll-back failed and is being retried in the background.'))
RECOVERED_CLAIMS = REGISTRY.register(Counter(
    'scheduler_recovered_claims_total',
    'Claims of requests never answered (their worker, the service or the machine died '
    'first) that the claims journal held, by outcome: undone (given back), left (Placement '
    'no longer showed them as claimed: never landed, or changed since), refused (a move\'s '
    'previous allocations no longer fit), expired (older than [claims_journal] max_age: '
    'dropped, not given back).',
    ('outcome',)))

# ------------------------------------------------------------------ instrumentation

_local = threading.local()


class stage:  # noqa: N801 - reads as a function at call sites
    """Time one stage of the current request; usable as ``with`` or as a decorator."""

    def __init__(self, name: str):
        if name not in STAGES:
            raise ValueError(f'unknown stage {name!r}; one of {STAGES}')
        self.name = name
        self._started = 0.0

    def __call__(self, func: F) -> F:
        # A decorated function is called from any thread, so each call times
        # itself with a stage of its own; a ``with stage(...)`` is used once.
        @functools.wraps(func)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with stage(self.name):
                return func(*args, **kwargs)
        return timed  # type: ignore[return-value]

    def __enter__(self) -> stage:
        _local.last_stage = self.name
        self._started = time.monotonic()
        return self

    def __exit__(self, *exc_info: object) -> None:
        STAGE_LATENCY.observe(time.monotonic() - self._started, stage=self.name)


def last_stage() -> str | None:
    """The last stage the current thread's request entered, if any."""
    return getattr(_local, 'last_stage', None)


def outcome_of(error: BaseException | None) -> tuple[str, str]:
    """(outcome, stage) labels for a request that ended with ``error`` (None: success)."""
    if error is None:
        return 'selected', ''
    if isinstance(error, exc.NoValidHost):
        return 'novalidhost', last_stage() or 'none'
    if isinstance(error, exc.InvalidInput):
        return 'invalid_input', ''
    return 'error', ''


@contextlib.contextmanager
def request() -> Iterator[None]:
    """Time one select_destinations call and count its outcome."""
    _local.last_stage = None
    started = time.monotonic()
    try:
        yield
    except BaseException as e:
        outcome, failed_stage = outcome_of(e)
        REQUESTS.inc(outcome=outcome, stage=failed_stage)
        raise
    else:
        REQUESTS.inc(outcome='selected', stage='')
    finally:
        REQUEST_LATENCY.observe(time.monotonic() - started)
        _local.last_stage = None


def claim_conflict(kind: str) -> None:
    CLAIM_CONFLICTS.inc(kind=kind)


def count_placement_error(kind: str) -> None:
    """The Placement client's ``on_error``: one failed call of that kind
    (``placement_client.client.error_kind``)."""
    PLACEMENT_ERRORS.inc(kind=kind)


def watch_catalog(catalog: Any, cleanups: Any) -> None:
    """Read the catalog sizes and pending cleanups of this worker at scrape time."""
    CATALOG_HOSTS.set_function(lambda: catalog.snapshot_stats()['file_hosts'])
    CATALOG_NOVA_HYPERVISORS.set_function(
        lambda: catalog.snapshot_stats().get('nova_hypervisors', 0))
    CATALOG_AGGREGATES.set_function(lambda: catalog.snapshot_stats()['aggregates'])
    CATALOG_INSTANCES.set_function(lambda: catalog.snapshot_stats()['instances'])
    PENDING_CLEANUPS.set_function(lambda: len(cleanups.pending()))
