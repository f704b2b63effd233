"""End to end and throughput: the real service on RabbitMQ against a real Placement.

Placement 16 runs on PostgreSQL behind several gunicorn workers
(:mod:`bench.deploy`), seeded with ``make_cloud(providers)`` (providers,
inventories, traits and the cloud's usage as allocations); the service is
``scheduler-service`` as operators run it, with the shipped default filters,
weighers and request filters and the cloud's hosts file; the clients are
this process, calling ``select_destinations`` over RabbitMQ the way
nova-conductor does (one m1.medium instance per call, instance uuid given,
alternates asked for), so every call claims.

How a request's wall time is split (:func:`run_end_to_end`): requests run
one at a time. *Wall* is measured at the client around the RPC call.
*Placement GET* and *PUT* are Placement's own server-side durations from its
access log (gunicorn ``%(D)s``), attributed to the request by the request id
the service forwards. *Own time* is the rest: everything the request spent
outside Placement's server (RPC both ways through RabbitMQ, decoding, request
filters, the HTTP exchanges on the service's side and decoding Placement's
answer, host states, filters, weighers, building and encoding the answer).
The service's own stage timers (its ``/metrics`` endpoint, scraped before and
after each request) break that down further in the rows marked "service:".

Throughput (:func:`run_throughput`): ``clients`` threads each send one call
after another for ``seconds`` (after ``warmup`` seconds not counted) to a
service with 1, 2, 4 workers; decisions/s = calls answered with a claimed
host, each counted for the share of its duration inside the window (calls
last seconds at 1,000 providers, so whole answers alone would be a coarse
count). Placement's ceiling is the same clients doing the service's exact
``GET /allocation_candidates`` query (read from the access log) and a
``PUT /allocations`` of a random candidate directly, measured before the
first and after the last worker phase; the ratios are against the mean of the
two. All claims are deleted after each phase and every phase starts from a
``VACUUM ANALYZE``d database; the database is dropped at the end.

Everything shares the machine: Placement's workers, PostgreSQL, RabbitMQ, the
service and the clients (and whatever else runs there), so the numbers are
for this machine at that moment; compare rows of one run with each other.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import pathlib
import random
import statistics
import sys
import threading
import time
import uuid as uuidlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench import deploy, profiling
from bench.report import Row, render, write_json

DEFAULT_PROVIDERS = 1000
DEFAULT_REQUESTS = 200
DEFAULT_WORKERS = (1, 2, 4)
DEFAULT_CLIENTS = 8
DEFAULT_SECONDS = 45.0
DEFAULT_WARMUP = 5.0
OWN_SHARE_TARGET = 10.0      # percent of a request's wall time
THROUGHPUT_TARGET = 0.9      # of Placement's ceiling, with several workers
#: The stretch measurement's [scheduler] candidates_reuse_window, in seconds.
REUSE_WINDOW = 1.0
#: The microversion the service claims and queries at (placement_client.client).
SERVICE_MICROVERSION = '1.36'


# ---------------------------------------------------------------- requests


class _Calls:
    """Placement calls by request id, read from the access log as they appear."""

    def __init__(self, log: deploy.AccessLog):
        self.log = log
        self.by_request: dict[str, list[deploy.PlacementCall]] = defaultdict(list)

    def pump(self) -> None:
        for call in self.log.read_new():
            self.by_request[call.request_id].append(call)

    def wait_for_claim(self, request_id: str, consumer: str,
                       timeout: float = 10.0) -> list[deploy.PlacementCall]:
        """The request's calls once its successful PUT is logged (workers log after
        answering, so the line may land just after the RPC reply)."""
        deadline = time.monotonic() + timeout
        while True:
            self.pump()
            calls = self.by_request.get(request_id, [])
            if any(c.kind == 'PUT alloc' and c.status == 204 and consumer in c.path
                   for c in calls):
                return self.by_request.pop(request_id)
            if time.monotonic() > deadline:
                raise RuntimeError(f'Placement logged no successful claim for request '
                                   f'{request_id} within {timeout}s (calls seen: {calls})')
            time.sleep(0.01)


@dataclass
class _Sample:
    wall: float
    get: float
    put: float
    other: float
    puts: int
    gets: int
    stages: dict[str, float] = field(default_factory=dict)
    server: float | None = None   # the service's own select_destinations timer

    @property
    def own(self) -> float:
        return self.wall - self.get - self.put - self.other


_STAGE_KEY = 'scheduler_stage_seconds_sum{{stage="{}"}}'
_REQUEST_KEY = 'scheduler_select_destinations_seconds_sum'
_STAGES = ('request_filters', 'placement_query', 'host_states', 'filtering', 'weighing',
           'claim')


@contextlib.contextmanager
def _deployment(providers: int, deployment: deploy.Deployment | None
                ) -> Iterator[deploy.Deployment]:
    if deployment is not None:
        yield deployment
        return
    with deploy.seeded_deployment(providers) as made:
        yield made


# ---------------------------------------------------------------- end to end


def run_end_to_end(providers: int = DEFAULT_PROVIDERS, requests: int = DEFAULT_REQUESTS, *,
                   warmup: int = 5, deployment: deploy.Deployment | None = None,
                   profile: str | None = None) -> list[Row]:
    """Median and p99 of one request's wall time and its split (see the module doc).

    ``profile``: a path for py-spy's raw samples of the worker during the
    measured requests (when py-spy is installed); the hotspots go in a note.
    """
    with _deployment(providers, deployment) as dep:
        # Requests alternate between the service as shipped (claims journal on) and
        # its baseline without the journal, both running: whatever else the machine
        # does at a moment weighs on both alike.
        by_config, sampler = _sequential(dep, requests, warmup, profile=profile, configs={
            'shipped': '', 'no journal': '[claims_journal]\ndirectory =\n'})
    samples, baseline = by_config['shipped'], by_config['no journal']
    rows = _e2e_rows(providers, samples)
    for name, pick in (('wall', lambda s: s.wall), ('own time', lambda s: s.own)):
        with_journal = statistics.median(pick(s) for s in samples)
        without = statistics.median(pick(s) for s in baseline)
        rows.append(Row(f'e2e: {name} median, no claims journal (baseline)', providers,
                        without * 1000.0, ratio=with_journal / without if without else 0.0,
                        note=f'{len(baseline)} requests, alternating with the measured ones; '
                             'ratio: with the journal / without'))
    if sampler is not None and profile and pathlib.Path(profile).exists():
        spots = profiling.hotspots(profile, top=8)
        top = '; '.join(f'{f} {s * 100:.0f}%' for f, s in spots['self'][:8])
        rows.append(Row('e2e: service hotspots (py-spy, self time)', providers, None,
                        note=top))
    return rows


def _sequential(dep: deploy.Deployment, requests: int, warmup: int, *,
                configs: dict[str, str], profile: str | None = None
                ) -> tuple[dict[str, list[_Sample]], Any]:
    """``requests`` boots one at a time (after ``warmup``) to each of the services
    ``configs`` name (extra configuration each), in turn; each boot split into its
    parts. ``profile`` samples the first service."""
    from scheduler.rpc.client import SchedulerClient

    with contextlib.ExitStack() as stack:
        services = {name: stack.enter_context(deploy.scheduler_service(
            dep.workdir, placement_url=dep.url, workers=1,
            hosts_file=dep.hosts_file(), metrics=True, extra_config=extra))
            for name, extra in configs.items()}
        clients = {name: SchedulerClient(tr, topic=svc.topic, timeout=120)
                   for name, (svc, tr) in services.items()}
        calls = _Calls(dep.access_log())
        samples: dict[str, list[_Sample]] = {name: [] for name in configs}
        claimed: list[str] = []
        sampler = None
        try:
            for i in range(warmup + requests):
                if i == warmup and profile:
                    sampler = profiling.start(next(iter(services.values()))[0].pid, profile)
                for name, (svc, _) in services.items():
                    sample = _one(dep, clients[name], svc, calls, claimed)
                    if i >= warmup:
                        samples[name].append(sample)
        finally:
            if sampler is not None:
                sampler.stop()
            deploy.delete_consumers(dep.url, claimed)
    return samples, sampler


def _one(dep: deploy.Deployment, client: Any, svc: Any, calls: _Calls,
         claimed: list[str]) -> _Sample:
    rid, consumer = deploy.new_request_id(), str(uuidlib.uuid4())
    context, spec, uuids = deploy.boot_call(rid, consumer)
    before = deploy.scrape(svc.metrics_url)
    started = time.perf_counter()
    result = client.select_destinations(context, spec, uuids, return_objects=True,
                                        return_alternates=True)
    wall = time.perf_counter() - started
    after = deploy.scrape(svc.metrics_url)
    if len(result) != 1 or not result[0]:
        raise RuntimeError(f'malformed answer to request {rid}: {result!r}')
    claimed.append(consumer)
    placement_calls = calls.wait_for_claim(rid, consumer)
    if dep.query is None:
        dep.query = next(c.query for c in placement_calls if c.kind == 'GET a_c')
    by_kind: dict[str, list[float]] = defaultdict(list)
    for c in placement_calls:
        by_kind[c.kind].append(c.seconds)
    return _Sample(
        wall=wall, get=sum(by_kind['GET a_c']), put=sum(by_kind['PUT alloc']),
        other=sum(by_kind['other']), puts=len(by_kind['PUT alloc']),
        gets=len(by_kind['GET a_c']),
        stages={s: after.get(_STAGE_KEY.format(s), 0.0)
                - before.get(_STAGE_KEY.format(s), 0.0) for s in _STAGES},
        server=after.get(_REQUEST_KEY, 0.0) - before.get(_REQUEST_KEY, 0.0))


def _e2e_rows(providers: int, samples: list[_Sample]) -> list[Row]:
    if not samples:
        raise RuntimeError('no request was measured')
    ms = 1000.0
    n = len(samples)
    p99_note = (f'nearest rank of {n}' + ('; below 100 requests that is the slowest'
                                          if n < 100 else ''))

    def pair(name: str, values: list[float], note: str = '') -> list[Row]:
        return [Row(f'e2e: {name} median', providers, statistics.median(values) * ms,
                    note=note),
                Row(f'e2e: {name} p99', providers, deploy.percentile(values, 99) * ms,
                    note=p99_note)]

    shares = [s.own / s.wall * 100 for s in samples]
    share = statistics.median(shares)
    total_share = sum(s.own for s in samples) / sum(s.wall for s in samples) * 100
    puts = Counter(s.puts for s in samples)
    others = sum(1 for s in samples if s.other)
    rows = [
        *pair('wall', [s.wall for s in samples],
              f'{n} requests one at a time; client-side, around the RPC call'),
        *pair('Placement GET /allocation_candidates', [s.get for s in samples],
              "Placement's server-side time (access log %(D)s)"),
        *pair('Placement PUT /allocations (claims)', [s.put for s in samples],
              'PUTs per request: ' + ', '.join(f'{k}: {v}' for k, v in sorted(puts.items()))),
        *pair('own time', [s.own for s in samples],
              'wall - Placement server time' + (f'; {others} requests made other Placement '
                                                 'calls, counted as Placement' if others else '')),
        Row('e2e: own time share', providers, share, target=f'<= {OWN_SHARE_TARGET:g}%',
            passed=share <= OWN_SHARE_TARGET, unit='%',
            note=f'median of per-request own/wall; p99 '
                 f'{deploy.percentile(shares, 99):.1f}%; all requests together '
                 f'{total_share:.1f}%'),
    ]
    # The service's view of its own time, from its stage timers.
    if all(s.server is not None for s in samples):
        rpc = [s.wall - s.server for s in samples]
        rows.append(Row('e2e: service: RPC round trip + (de)serialisation', providers,
                        statistics.median(rpc) * ms,
                        note='wall - the service\'s select_destinations timer'))
        query_overhead = [s.stages['placement_query'] - s.get for s in samples]
        rows.append(Row('e2e: service: GET answer transfer + decode', providers,
                        statistics.median(query_overhead) * ms,
                        note='placement_query stage - Placement server time'))
        claim_overhead = [s.stages['claim'] - s.put for s in samples]
        rows.append(Row('e2e: service: claim HTTP overhead', providers,
                        statistics.median(claim_overhead) * ms,
                        note='claim stage - Placement PUT server time'))
        for stage in ('request_filters', 'host_states', 'filtering', 'weighing'):
            rows.append(Row(f'e2e: service: {stage}', providers,
                            statistics.median([s.stages.get(stage, 0.0) for s in samples])
                            * ms))
        rest = [s.server - sum(s.stages.values()) for s in samples]
        rows.append(Row('e2e: service: outside the stage timers', providers,
                        statistics.median(rest) * ms,
                        note='decoding the call, alternates, encoding the answer, logging'))
    return rows


# ---------------------------------------------------------------- throughput


@dataclass
class _Phase:
    #: answers received inside the window
    completed: int = 0
    #: each answered call weighed by the share of its duration inside the window
    work: float = 0.0
    errors: Counter = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    consumers: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        """Decisions per second. Calls straddling an edge of the window count for the
        part of them inside it: with calls lasting seconds and a window of tens of
        seconds, counting whole answers alone would be off by up to one call per
        client."""
        return self.work / self.seconds if self.seconds else 0.0


def _closed_loop(clients: int, seconds: float, warmup: float,
                 decide: Callable[[], str], *, until: Callable[[], bool] | None = None,
                 check_every: float = 2.0) -> _Phase:
    """``clients`` threads call ``decide`` back to back for ``warmup + seconds``; the
    window is the last ``seconds``. Calls in flight at its end are finished (and
    their claims recorded for the clean-up) but count only for their part inside.
    With ``until``, asked every ``check_every`` seconds inside the window, the
    window ends as soon as it answers True (``seconds`` is then a cap).

    ``decide`` returns the claimed consumer uuid or raises.
    """
    phase = _Phase(seconds=seconds)
    lock = threading.Lock()
    start = time.monotonic()
    window = [start + warmup, start + warmup + seconds]

    def loop() -> None:
        while time.monotonic() < window[1]:
            began = time.monotonic()
            try:
                consumer = decide()
            except Exception as e:  # noqa: BLE001 - counted, the loop goes on
                with lock:
                    phase.errors[f'{type(e).__name__}: {str(e)[:80]}'] += 1
                time.sleep(0.05)
                continue
            done = time.monotonic()
            inside = min(done, window[1]) - max(began, window[0])
            with lock:
                phase.consumers.append(consumer)
                if inside > 0:
                    phase.work += inside / (done - began)
                if window[0] <= done <= window[1]:
                    phase.completed += 1
                    phase.latencies.append(done - began)

    def watch() -> None:
        while time.monotonic() < window[1]:
            time.sleep(check_every)
            now = time.monotonic()
            if now > window[0] and until is not None and until():
                window[1] = now
                return

    threads = [threading.Thread(target=loop, name=f'bench-client-{i}', daemon=True)
               for i in range(clients)]
    if until is not None:
        threads.append(threading.Thread(target=watch, name='bench-until', daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    phase.seconds = window[1] - window[0]
    return phase


def _scheduler_phase(dep: deploy.Deployment, workers: int, clients: int, seconds: float,
                     warmup: float, extra_config: str = '') -> tuple[_Phase, Counter]:
    from scheduler.rpc.client import SchedulerClient

    log = dep.access_log()
    with deploy.scheduler_service(dep.workdir, placement_url=dep.url, workers=workers,
                                  hosts_file=dep.hosts_file(),
                                  extra_config=extra_config) as (svc, tr):
        client = SchedulerClient(tr, topic=svc.topic, timeout=120)
        log.skip_to_end()
        _, spec, _ = deploy.boot_call(deploy.new_request_id(), str(uuidlib.uuid4()))

        def decide() -> str:
            rid, consumer = deploy.new_request_id(), str(uuidlib.uuid4())
            context, _, _ = deploy.boot_call(rid, consumer)
            result = client.select_destinations(context, copy.deepcopy(spec), [consumer],
                                                return_objects=True, return_alternates=True)
            if len(result) != 1 or not result[0]:
                raise RuntimeError(f'malformed answer {result!r}')
            return consumer

        phase = _closed_loop(clients, seconds, warmup, decide)
    statuses = Counter(f'{c.method} {c.status}' for c in log.read_new() if c.kind != 'other')
    deploy.delete_consumers(dep.url, phase.consumers)
    return phase, statuses


def _learn_query(dep: deploy.Deployment) -> str:
    """The ``GET /allocation_candidates`` query string the service sends for the
    benchmark's request, as Placement logged it (one call, claim deleted)."""
    from scheduler.rpc.client import SchedulerClient

    if dep.query is None:
        with deploy.scheduler_service(dep.workdir, placement_url=dep.url, workers=1,
                                      hosts_file=dep.hosts_file()) as (svc, tr):
            calls = _Calls(dep.access_log())
            rid, consumer = deploy.new_request_id(), str(uuidlib.uuid4())
            context, spec, uuids = deploy.boot_call(rid, consumer)
            SchedulerClient(tr, topic=svc.topic, timeout=120).select_destinations(
                context, spec, uuids)
            dep.query = next(c.query for c in calls.wait_for_claim(rid, consumer)
                             if c.kind == 'GET a_c')
            deploy.delete_consumers(dep.url, [consumer])
    return dep.query


def _ceiling_phase(dep: deploy.Deployment, clients: int, seconds: float,
                   warmup: float) -> tuple[_Phase, Counter]:
    """Placement alone: the service's query and a claim of a random candidate, directly."""
    import requests

    query = _learn_query(dep)
    log = dep.access_log()
    local = threading.local()
    headers = {**deploy.HEADERS, 'OpenStack-API-Version': f'placement {SERVICE_MICROVERSION}'}
    url = f'{dep.url}/allocation_candidates?{query}'

    def decide() -> str:
        session = getattr(local, 'session', None)
        if session is None:
            session = local.session = requests.Session()
            session.headers.update(headers)
        response = session.get(url)
        response.raise_for_status()
        return put_random_candidate(session, dep, response.json()['allocation_requests'])

    log.skip_to_end()
    phase = _closed_loop(clients, seconds, warmup, decide)
    statuses = Counter(f'{c.method} {c.status}' for c in log.read_new() if c.kind != 'other')
    deploy.delete_consumers(dep.url, phase.consumers)
    return phase, statuses


def put_random_candidate(session, dep: deploy.Deployment, candidates: list) -> str:
    """Claim one of ``candidates`` for a new consumer, as a scheduler would: a random
    one, and up to two others after a 409; the consumer's uuid."""
    return claim_first_of(session, dep, random.sample(candidates, min(3, len(candidates))))


def claim_first_of(session, dep: deploy.Deployment, candidates: list) -> str:
    """The first of ``candidates`` (allocation requests) Placement accepts for a new
    consumer, trying the next after a 409; the consumer's uuid."""
    consumer = str(uuidlib.uuid4())
    for candidate in candidates:
        if put_allocations(session, dep, consumer, candidate):
            return consumer
    raise RuntimeError(f'{len(candidates)} candidates in a row were refused (409)')


def put_allocations(session, dep: deploy.Deployment, consumer: str, candidate: dict) -> bool:
    """Claim ``candidate`` (an allocation request) for the new ``consumer``: True when
    Placement accepted it, False when it refused it (409); RuntimeError otherwise."""
    body = {'allocations': candidate['allocations'],
            'project_id': deploy.PROJECT_ID, 'user_id': deploy.USER_ID,
            'consumer_generation': None}
    if candidate.get('mappings'):
        body['mappings'] = candidate['mappings']
    put = session.put(f'{dep.url}/allocations/{consumer}', json=body)
    if put.status_code not in (204, 409):
        raise RuntimeError(f'PUT /allocations answered {put.status_code}: {put.text[:200]}')
    return put.status_code == 204


def _phase_note(phase: _Phase, statuses: Counter, clients: int) -> str:
    lat = (f'latency median {statistics.median(phase.latencies) * 1000:.0f} ms, p99 '
           f'{deploy.percentile(phase.latencies, 99) * 1000:.0f} ms; ' if phase.latencies
           else '')
    errors = sum(phase.errors.values())
    conflicts = statuses.get('PUT 409', 0)
    note = (f'{phase.completed} answered in the {phase.seconds:g}s window, {clients} clients; '
            f'{lat}'
            f'PUT 409s {conflicts}; errors {errors}')
    if errors:
        note += ' (' + '; '.join(f'{k} x{v}' for k, v in phase.errors.most_common(2)) + ')'
    return note


def run_throughput(providers: int = DEFAULT_PROVIDERS,
                   workers: Sequence[int] = DEFAULT_WORKERS, clients: int = DEFAULT_CLIENTS,
                   seconds: float = DEFAULT_SECONDS, *, warmup: float = DEFAULT_WARMUP,
                   deployment: deploy.Deployment | None = None,
                   reuse_workers: Sequence[int] = (4,)) -> list[Row]:
    """Decisions/s with each worker count, next to Placement's own ceiling; then
    with ``reuse_workers`` workers reusing Placement answers (information)."""
    rows: list[Row] = []
    with _deployment(providers, deployment) as dep:
        # Every phase starts from the same database (deploy.analyze explains),
        # and the ceiling is measured first and last: the phases are compared
        # with its mean, so that a drift of the machine over the run shows
        # instead of favouring whichever phase came first.
        deploy.analyze(dep.placement, vacuum=True)
        first, statuses = _ceiling_phase(dep, clients, seconds, warmup)
        rows.append(Row('throughput: Placement ceiling, first (GET + PUT, no scheduler)',
                        providers, first.rate, unit='req/s',
                        note=_phase_note(first, statuses, clients) + '; random candidate'))
        measured: dict[int, float] = {}
        for count in workers:
            deploy.analyze(dep.placement, vacuum=True)
            phase, statuses = _scheduler_phase(dep, count, clients, seconds, warmup)
            measured[count] = phase.rate
            rows.append(Row(f'throughput: {count} service worker{"s" if count > 1 else ""}',
                            providers, phase.rate, unit='req/s',
                            note=_phase_note(phase, statuses, clients)))
        # The baseline of the claims journal (on, as shipped, in the phases above):
        # the most workers once more without it, in the same run.
        journal_off = max(workers)
        deploy.analyze(dep.placement, vacuum=True)
        phase, statuses = _scheduler_phase(dep, journal_off, clients, seconds, warmup,
                                           extra_config='[claims_journal]\ndirectory =\n')
        rows.append(Row(f'throughput: {journal_off} workers, no claims journal (baseline)',
                        providers, phase.rate, unit='req/s',
                        ratio=phase.rate / measured[journal_off] if measured[journal_off]
                        else 0.0, note=_phase_note(phase, statuses, clients)
                        + '; ratio: this / the same workers with the journal'))
        deploy.analyze(dep.placement, vacuum=True)
        last, statuses = _ceiling_phase(dep, clients, seconds, warmup)
        rows.append(Row('throughput: Placement ceiling, last (GET + PUT, no scheduler)',
                        providers, last.rate, unit='req/s',
                        note=_phase_note(last, statuses, clients) + '; random candidate'))
        ceiling = (first.rate + last.rate) / 2
        rows.append(Row('throughput: Placement ceiling (mean of first and last)', providers,
                        ceiling, unit='req/s'))
        # The stretch: reuse one Placement answer for the same query within a
        # window ([scheduler] candidates_reuse_window, off by default).
        for count in reuse_workers:
            deploy.analyze(dep.placement, vacuum=True)
            phase, statuses = _scheduler_phase(
                dep, count, clients, seconds, warmup,
                extra_config=f'[scheduler]\ncandidates_reuse_window = {REUSE_WINDOW}\n')
            conflicts = statuses.get('PUT 409', 0)
            rows.append(Row(f'throughput: {count} workers, answers reused for {REUSE_WINDOW:g}s',
                            providers, phase.rate, unit='req/s',
                            ratio=phase.rate / ceiling if ceiling else 0.0,
                            note=_phase_note(phase, statuses, clients)
                            + f'; {conflicts} claims refused (409)'))
    for count, rate in measured.items():
        ratio = rate / ceiling if ceiling else 0.0
        several = count > 1
        rows.append(Row(f'throughput: {count} worker{"s" if several else ""} / ceiling',
                        providers, ratio, ratio=ratio,
                        target=f'ratio >= {THROUGHPUT_TARGET:g}' if several else None,
                        passed=(ratio >= THROUGHPUT_TARGET) if several else None, unit='x'))
    return rows


def run_all(providers: int = DEFAULT_PROVIDERS, requests: int = DEFAULT_REQUESTS, *,
            workers: Sequence[int] = DEFAULT_WORKERS, clients: int = DEFAULT_CLIENTS,
            seconds: float = DEFAULT_SECONDS, warmup: float = DEFAULT_WARMUP,
            profile: str | None = None) -> list[Row]:
    """End to end, then throughput, on one seeded Placement (seeding once saves minutes)."""
    started = time.monotonic()
    with deploy.seeded_deployment(providers) as dep:
        rows = [Row('e2e: seed Placement (setup)', providers, dep.seed_seconds, unit='s',
                    note=f'PostgreSQL, {deploy.PLACEMENT_WORKERS} gunicorn workers; '
                         f'{dep.usage_consumers} usage consumers')]
        rows += run_end_to_end(providers, requests, deployment=dep, profile=profile)
        rows += run_throughput(providers, workers, clients, seconds, warmup=warmup,
                               deployment=dep)
    rows.append(Row('e2e + throughput: total time (setup)', providers,
                    time.monotonic() - started, unit='s'))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m bench.e2e', description=__doc__.split(
        '\n\n')[0])
    parser.add_argument('--providers', type=int, default=DEFAULT_PROVIDERS)
    parser.add_argument('--requests', type=int, default=DEFAULT_REQUESTS,
                        help='end-to-end requests measured (one at a time)')
    parser.add_argument('--workers', default=','.join(map(str, DEFAULT_WORKERS)),
                        help='service worker counts for the throughput phases')
    parser.add_argument('--clients', type=int, default=DEFAULT_CLIENTS)
    parser.add_argument('--seconds', type=float, default=DEFAULT_SECONDS,
                        help='measured window of each throughput phase')
    parser.add_argument('--warmup', type=float, default=DEFAULT_WARMUP)
    parser.add_argument('--only', choices=('e2e', 'throughput'))
    parser.add_argument('--profile', metavar='FILE',
                        help="py-spy raw samples of the worker during the e2e requests")
    parser.add_argument('--json', metavar='PATH', help='also write the rows as JSON')
    args = parser.parse_args(argv)
    workers = tuple(int(w) for w in args.workers.split(','))
    try:
        if args.only == 'e2e':
            rows = run_end_to_end(args.providers, args.requests, profile=args.profile)
        elif args.only == 'throughput':
            rows = run_throughput(args.providers, workers, args.clients, args.seconds,
                                  warmup=args.warmup)
        else:
            rows = run_all(args.providers, args.requests, workers=workers,
                           clients=args.clients, seconds=args.seconds, warmup=args.warmup,
                           profile=args.profile)
    except deploy.ServiceMissing as e:
        print(f'cannot run: {e}', file=sys.stderr)
        return 2
    print(render(rows))
    if args.profile and pathlib.Path(args.profile).exists():
        print()
        print(profiling.format_hotspots(profiling.hotspots(args.profile)))
    if args.json:
        write_json(rows, args.json)
    return 0


if __name__ == '__main__':
    sys.exit(main())


