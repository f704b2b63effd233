"""What the host-data sources of a Nova cloud cost the provider view, side by side.

``python -m bench.host_data --providers N[,N...] [--seconds S]`` (also ``python -m
bench --host-data N[,N...]``): per size, the synthetic cloud seeded straight into
Placement's tables (``deploy.seeded_deployment(n, direct=True)``), and beside it

* a stand-in compute API (:class:`PreSerialisedNova`, tests.fixtures.fake_nova's
  FakeNova with every answer serialised once) in a process of its own, holding
  that cloud's compute services, hypervisors and aggregates in Nova's API shapes
  (microversion 2.87, tests.fixtures.nova_api_samples). It times each answer
  itself (from the request read to the last byte written) and serves those
  totals on ``GET /_stats``, and the requests it has not answered yet on ``GET
  /_in_flight``;
* a cell database on the machine's PostgreSQL: Nova's ``compute_nodes`` table
  (tests.fixtures.cell_databases' schema) with one row per compute, a NUMA
  topology on a fifth of them and PCI pools on a tenth, ``deleted = 0``; and its
  ``services`` table, one nova-compute row per compute, each heartbeat
  (``last_seen_up``, ``updated_at``) written every 10 s as nova-compute's
  service reports write it (a tenth of the rows each second, one ``UPDATE``); and
  ``NODE_WRITES`` of the ``compute_nodes`` rows written again each second, as a
  resource tracker writes its node's row when its usage moved (about the rate at
  which the phases place instances).

Then, on the same seeded Placement, with bench.view's workers, clients, workload
and provider view (``_view_config``), one service per phase, all started at once
and each warmed up for ``warmup`` seconds:

a. ``baseline``: the hosts file only, as bench.view runs the service;
b. ``nova``: ``[nova]`` at its defaults (``sync_interval`` 60,
   ``service_state_max_age`` 0: a ``GET /os-services?binary=nova-compute`` begun
   after each request arrived, read by the service's workers in turns and taken by
   every request waiting for one);
c. ``nova+cell``: ``[nova]`` and ``[cell_database]`` at their defaults (the read
   before each request takes the cell database's ``services`` table,
   scheduler/catalog/cell_services.py, and the ``[nova]`` sync leaves the
   hypervisors to the cell database once it holds them all);
d. ``nova, max_age -1``: ``[nova] service_state_max_age = -1``, the periodic
   sync only (``--no-periodic-only`` leaves it out);
e. with ``--cell-alone``, ``cell``: ``[cell_database]`` at its defaults, without
   ``[nova]``;
f. with ``--max-age S``, ``nova, max_age S``: ``[nova] service_state_max_age = S``, a
   read before a request only when the last is older than S seconds;
g. ``nova+cell, api services``: c with ``[cell_database] service_states = false``,
   the read before each request being ``GET /os-services`` as in b (the default
   until 2026-11-30);
h. ``nova+cell, scan per request``: c with ``[cell_database] service_scan_interval =
   0``, every row of the ``services`` table read before each request (the default
   until 2026-11-30, later): c reads every row every 10 s and, in between, a few
   rows by id before a request and by host before its answer.
i. ``nova+cell, no hosts file``: c without the hosts file, the sources an operator of
   a Nova cloud configures (the service names, places and describes its hosts from the
   compute API and the cell database alone, its ``stats`` included: the rows carry them
   as nova-compute writes them, with its counters per VM state, task state, OS type and
   project, :func:`node_stats`).

A service that reads the services' state from the cells (c and h) reads ``GET
/os-services`` once at start-up and then once an hour, in one of its workers, to check
that the cells hold every compute node the compute API knows; at 50,000 computes nova-api
takes minutes for that answer on a loaded machine. Such a phase's clients go on past the
warm-up until its service has had that answer and has no other on the way (at most
``CHECK_WAIT`` seconds), so that the window measures the steady state; the check's GETs
and the compute API's own time for them are a row of their own.

The phases take turns in slices of about ``slice`` seconds (a, b, c, d, then d, c,
b, a, ...) until each had ``seconds``, so that the load of a shared machine, which
drifts over minutes, weighs on all of them alike; the claims of each slice are
deleted after it. The idle services' periodic syncs run meanwhile (a load every
slice shares, which at 50,000 providers outweighs the rest: ``--one-at-a-time``
then runs each phase's service alone, for all its ``seconds``, in the order above).
The hosts file stays configured in every phase but i, so that only the sources added
differ; i shows what the file itself adds to c. Each phase's rows: throughput, p50 and
p99, errors (NoValidHost apart), each worker's peak resident memory (``VmHWM``, after
its last slice) and what it holds once that slice's clients stopped (``VmRSS``), the
GETs of ``/os-services`` per request and the stand-in's own time for them.
No metric of the service times its wait for the services' state (it happens
before the ``host_states`` stage), so that wait shows only as the latency it adds
to the baseline's. Before the phases, the stand-in's ``GET /os-services`` and the
cell database's whole ``SELECT`` are timed alone (what each source costs by itself).

``--nested`` seeds bench.view's cloud with nested trees and runs its mixed workload
(vGPU, two isolated vGPUs, pinned CPUs on a NUMA node and a PCI device in Placement,
30% of the requests): each phase's rows then also count how each of those kinds was
answered. In every phase a row counts the ``GET /allocation_candidates`` Placement's log
shows for the window, by kind (none while the provider view answers).

The stand-in is not nova-api: nova-api builds that answer from its services table
and the servicegroup driver, per cell; this one writes bytes it serialised once, but
for the heartbeats: each live service's ``updated_at`` moves every 10 s, as a real
API's answers show (so two reads differ by the heartbeats sent between them). Its
cost is the least such a read can cost. ``python -m bench.nova_api`` measures it
against Nova 34's own nova-api on the same cloud (the same states read from both
answers; the time each takes), and ``--compute-api nova`` runs the phases against
that nova-api instead, its cell1 database serving as the phases' cell database.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import pathlib
import statistics
import subprocess
import sys
import threading
import time
import uuid as uuidlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

from bench import cpu, deploy
from bench.cli import finish, rows_per_size, settings_from, settings_parser
from bench.e2e import _closed_loop, _Phase
from bench.report import Row, render
from bench.synthetic import CELL_UUID, SyntheticCloud
from bench.view import (
    DEFAULT_CLIENTS,
    DEFAULT_WORKERS,
    Options,
    _Rngs,
    _service_decide,
    _view_config,
    kinds_for,
    peak_rss_mb,
    query_kind,
    status_mb,
)
from tests.fixtures import nova_api_samples as samples
from tests.fixtures.fake_nova import TOKEN, FakeNova

DEFAULT_PROVIDERS = (1000,)
DEFAULT_SECONDS = 30.0
DEFAULT_WARMUP = 5.0
DEFAULT_SLICE = 10.0
#: Projects whose instances the computes run, and how many one compute's instances
#: belong to at most (nova-compute counts a host's instances per project).
PROJECTS = 2000
PROJECTS_PER_HOST = 3
#: Shares of the cell database's rows with a NUMA topology, with PCI pools.
NUMA_SHARE = 0.2
PCI_SHARE = 0.1
SERVICES_PATH = '/v2.1/os-services'
#: compute_nodes rows written each second (the module's doc).
NODE_WRITES = 20
#: Reads by host timed, after a first one, for each median of the setup's rows.
BY_HOST_SAMPLES = 5
#: nova-compute's ``report_interval``: how often each live compute sends its heartbeat.
REPORT_INTERVAL = 10.0
#: While ``GET /os-services`` was read within this many seconds, the stand-in joins its
#: answer at each heartbeat, so that reads made before every request find it ready.
READ_RECENTLY = 1.0
#: Phase name -> the config it adds to bench.view's provider view config.
PHASES = ('baseline', 'nova', 'nova+cell', 'nova, max_age -1', 'cell',
          'nova+cell, api services', 'nova+cell, scan per request',
          'nova+cell, no hosts file')
#: The phase whose service has no hosts file: only the sources a Nova cloud's operator
#: configures.
WITHOUT_FILE = PHASES[7]
#: Timed GETs of /os-services, alone, before the phases.
ALONE_SAMPLES = 15
#: The phases whose service reads the compute services' state from the cells'
#: services tables ([nova] and [cell_database], ``service_states`` at its default):
#: no GET /os-services before a request, but one by one of its workers at start-up
#: and every hour, checking that the cells hold every compute node the compute API
#: knows (scheduler.catalog.nova_sync, HYPERVISOR_CHECK_EVERY).
CHECKING_PHASES = frozenset({'nova+cell', 'nova+cell, scan per request', WITHOUT_FILE})
#: The longest such a phase's clients run on past the warm-up for that check's
#: answer (nova-api took about 105 s for it at 50,000 computes on a loaded 2 cores),
#: deleting their claims every ``CHECK_CHUNK`` seconds, as the slices do after each.
CHECK_WAIT = 900.0
CHECK_CHUNK = 60.0


# ---------------------------------------------------------------- the stand-in compute API


class PreSerialisedNova(FakeNova):
    """FakeNova whose answers are serialised once per path and query (the documents
    do not change during a benchmark), over HTTP/1.1 keep-alive as nova-api behind a
    web server is reached, timing each answer on the server side: ``stats`` is path ->
    [answers, seconds from the request line read to the last byte written], ``started``
    path -> requests begun (:meth:`in_flight`: those not answered yet), as
    bench.nova_api counts nova-api's."""

    def __init__(self, *, token: str):
        super().__init__(token=token)
        self._cache: dict[str, tuple[int, bytes]] = {}
        self._lock = threading.Lock()
        self.stats: dict[str, list[float]] = {}
        self.started: dict[str, int] = {}
        # GET /os-services as the heartbeats leave it (see report), once they run.
        self._services_answer: bytes | None = None
        self._reporting = threading.Event()
        self._services_lock = threading.Lock()
        self._services_publish: Callable[[], None] | None = None
        self._services_moved = False
        self._services_read_at = -math.inf
        #: Times the services' answer was joined anew (the module's tests read it).
        self.services_joined = 0

    def report(self, *, interval: float = REPORT_INTERVAL, ticks: int = 100) -> None:
        """nova-compute's service reports as nova-api shows them: every up service's
        ``updated_at`` moves every ``interval`` seconds, a ``ticks``-th of them each
        ``interval / ticks`` s, so that two reads of ``GET /os-services`` differ by
        the heartbeats sent between them, as a real API's do (every service here is
        a nova-compute, so the answer is the same for any ``binary``). A down
        service sends none.

        A heartbeat writes its service's text around the new ``updated_at``; the
        answer is joined when it is asked for, or at each heartbeat while it was
        asked for within :data:`READ_RECENTLY` seconds (then a read finds it joined
        already, as before). A real nova-api does no work between requests: joining
        the 12.8 MB answer of 50,000 services at every heartbeat, read or not, took a
        tenth of a core on the service's half of a split machine, where bench.view's
        services read it at start-up and then hourly (doc/performance.md)."""
        records = self.services
        pieces = [json.dumps(record).encode() for record in records]
        live = [i for i, record in enumerate(records) if record['state'] == 'up']
        # Each live service's text before and after its updated_at's value.
        marker = '\x00updated_at\x00'
        around = {}
        for i in live:
            head, _, tail = json.dumps({**records[i], 'updated_at': marker}).encode().partition(
                json.dumps(marker).encode())
            around[i] = head, tail

        def publish() -> None:
            self._services_answer = b'{"services": [' + b', '.join(pieces) + b']}'
            self._services_moved = False
            self.services_joined += 1

        def beat() -> None:
            tick = 0
            while not self._reporting.wait(interval / ticks):
                now = datetime.datetime.now(datetime.timezone.utc).strftime(
                    '%Y-%m-%dT%H:%M:%S.%f')
                stamp = json.dumps(now).encode()
                with self._services_lock:
                    for i in live[tick % ticks::ticks]:
                        records[i]['updated_at'] = now
                        head, tail = around[i]
                        pieces[i] = head + stamp + tail
                    self._services_moved = True
                    if time.monotonic() - self._services_read_at < READ_RECENTLY:
                        publish()
                tick += 1

        with self._services_lock:
            publish()
            self._services_publish = publish
        threading.Thread(target=beat, name='fake-nova-heartbeats', daemon=True).start()

    def services_answer(self) -> bytes | None:
        """``GET /os-services`` as the heartbeats leave it now; None before :meth:`report`."""
        with self._services_lock:
            if self._services_moved and self._services_publish is not None:
                self._services_publish()
            self._services_read_at = time.monotonic()
            return self._services_answer

    def stop(self) -> None:
        self._reporting.set()
        super().stop()

    def start(self) -> PreSerialisedNova:
        nova = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'
            # Headers and body are two writes: without TCP_NODELAY each answer would
            # wait out the client's delayed ACK (40 ms on Linux).
            disable_nagle_algorithm = True

            def log_message(self, format, *args):  # noqa: A002 - stdlib signature
                pass

            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                started = time.perf_counter()
                # /p-<phase>/v2.1/...: the endpoint one service was given, so that the
                # answers are counted per service as well.
                label, path = '', self.path
                if path.startswith('/p-'):
                    label, _, rest = path[1:].partition('/')
                    path = '/' + rest
                keys = _keys(urlsplit(path).path, label)
                nova.begin(keys)
                try:
                    status, data = nova.answer_bytes(path, self.headers)
                    self.send_response(status)
                    self.send_header('Content-Type', 'application/json')
                    self.send_header('Content-Length', str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except BaseException:
                    # No answer, and no longer in flight (the client went away).
                    nova.begin(keys, -1)
                    raise
                nova.count(keys, time.perf_counter() - started)

        self._server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={'poll_interval': 0.05},
                         name='fake-nova', daemon=True).start()
        return self

    def answer_bytes(self, raw_path: str, headers: Any) -> tuple[int, bytes]:
        if urlsplit(raw_path).path == '/_stats':
            with self._lock:
                return 200, json.dumps(self.stats).encode()
        if urlsplit(raw_path).path == '/_in_flight':
            return 200, json.dumps(self.in_flight()).encode()
        good = (headers.get('X-Auth-Token') == self.token
                and bool(headers.get('OpenStack-API-Version')) and self.fail_with is None)
        if good and urlsplit(raw_path).path.endswith('/os-services'):
            answer = self.services_answer()
            if answer is not None:
                return 200, answer
        cached = self._cache.get(raw_path) if good else None
        if cached is None:
            status, document = self.answer(raw_path, headers)
            cached = (status, json.dumps(document).encode())
            if good:
                self._cache[raw_path] = cached
        return cached

    def begin(self, keys: tuple[str, ...], step: int = 1) -> None:
        """A request begun under ``keys`` (:func:`_keys`); -1: one ended unanswered."""
        with self._lock:
            for key in keys:
                self.started[key] = self.started.get(key, 0) + step

    def count(self, keys: tuple[str, ...], seconds: float) -> None:
        """A request begun under ``keys`` answered, ``seconds`` after it was read."""
        with self._lock:
            for key in keys:
                entry = self.stats.setdefault(key, [0, 0.0])
                entry[0] += 1
                entry[1] += seconds

    def in_flight(self) -> dict[str, int]:
        """Path -> requests begun and not answered yet."""
        with self._lock:
            return {key: count - int(self.stats.get(key, [0, 0.0])[0])
                    for key, count in self.started.items()}


def _keys(path: str, label: str) -> tuple[str, ...]:
    """What a request for ``path`` is counted under: the path, and the path under the
    ``/p-<label>`` prefix it came with, if any."""
    return (path, f'/{label}{path}') if label else (path,)


def _last_seen(host: dict[str, Any]) -> datetime.datetime:
    """A hosts-document host's last heartbeat, aware UTC."""
    seen = datetime.datetime.fromisoformat(host['last_seen_up'])
    return seen if seen.tzinfo is not None else seen.replace(tzinfo=datetime.timezone.utc)


def _silent(seen: datetime.datetime, now: datetime.datetime) -> bool:
    """Silent for longer than the service's ``service_down_time`` (bench.deploy)."""
    return (now - seen).total_seconds() >= deploy.SERVICE_DOWN_TIME


def nova_documents(cloud: SyntheticCloud) -> dict[str, list[dict[str, Any]]]:
    """The cloud's compute services, hypervisors and aggregates as Nova's API answers
    them at 2.87: a service is ``down`` when forced down or silent for longer than the
    service's ``service_down_time`` (bench.deploy), as nova-api would judge it."""
    document = cloud.hosts_document()
    now = datetime.datetime.now(datetime.timezone.utc)
    services, hypervisors = [], []
    for host in document['hosts']:
        seen = _last_seen(host)
        up = not host['forced_down'] and not _silent(seen, now)
        service = samples.compute_service(
            host['service_host'], up=up, disabled=host['disabled'],
            reason='bench: disabled' if host['disabled'] else None,
            forced_down=host['forced_down'],
            updated_at=seen.strftime('%Y-%m-%dT%H:%M:%S.%f'))
        service['id'] = _service_uuid(host['service_host'])
        services.append(service)
        hypervisor = samples.hypervisor(
            host['provider_uuid'], host['nodename'], host['service_host'],
            host_ip=host['host_ip'], hypervisor_type=host['hypervisor_type'],
            hypervisor_version=host['hypervisor_version'], cpu_info=host['cpu_info'],
            state='up' if up else 'down',
            status='disabled' if host['disabled'] else 'enabled')
        hypervisor['service']['id'] = service['id']
        hypervisors.append(hypervisor)
    aggregates = [samples.aggregate(a['id'], a['uuid'], a['name'], a['hosts'], a['metadata'])
                  for a in document['aggregates']]
    return {'services': services, 'hypervisors': hypervisors, 'aggregates': aggregates}


def _serve(documents_path: str) -> None:
    """The stand-in's own process: serve the documents until stdin closes."""
    documents = json.loads(pathlib.Path(documents_path).read_text())
    nova = PreSerialisedNova(token=TOKEN)
    nova.services = documents['services']
    nova.hypervisors = documents['hypervisors']
    nova.aggregates = documents['aggregates']
    nova.report()
    nova.start()
    print(nova.url, flush=True)
    sys.stdin.read()
    nova.stop()


class ComputeApi(Protocol):
    """What the phases need of a compute API: the stand-in's, or nova-api's
    (bench.nova_api.NovaApi)."""

    url: str

    def stats(self) -> dict[str, list[float]]: ...

    def in_flight(self) -> dict[str, int]:
        """Path -> requests begun and not answered yet, by path and by ``/p-<label>``
        path, as :meth:`stats` counts the answers."""
        ...

    def services_read(self) -> tuple[float, int]: ...

    def config(self, label: str, **extra: Any) -> str: ...

    def stop(self) -> None: ...


def nova_config(base: str, label: str, token: str, **extra: Any) -> str:
    """``[nova]`` for one phase's service, reaching the compute API at ``base`` under
    ``/label``, so that its requests are counted under ``label``."""
    url = f'{base}/{label}/v2.1'
    options = {'auth_type': 'admin_token', 'token': token, 'endpoint': url,
               'endpoint_override': url, **extra}
    return '[nova]\n' + ''.join(f'{k} = {v}\n' for k, v in options.items())


class StandIn:
    """The stand-in compute API in a process of its own (not the clients' GIL)."""

    def __init__(self, cloud: SyntheticCloud, workdir: pathlib.Path):
        import requests

        documents = nova_documents(cloud)
        path = workdir / 'nova-documents.json'
        path.write_text(json.dumps(documents))
        self.services_bytes = len(json.dumps({'services': documents['services']}))
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'bench.host_data', '--serve-stand-in', str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith('http'):
            self.stop()
            raise RuntimeError('the stand-in compute API did not start')
        self.base = self.url.rsplit('/v2.1', 1)[0]
        self._session = requests.Session()

    def stats(self) -> dict[str, list[float]]:
        return self._session.get(f'{self.base}/_stats', timeout=30).json()

    def in_flight(self) -> dict[str, int]:
        return self._session.get(f'{self.base}/_in_flight', timeout=30).json()

    def get(self, path: str, **params: Any) -> Any:
        """GET ``path`` (below /v2.1) as the sync sends it; an HTTP error raises."""
        response = self._session.get(
            f'{self.url}{path}', params=params or None, timeout=60,
            headers={'X-Auth-Token': TOKEN, 'OpenStack-API-Version': 'compute 2.87'})
        response.raise_for_status()
        return response

    def services_read(self) -> tuple[float, int]:
        """One GET /os-services?binary=nova-compute as the sync sends it: seconds, bytes."""
        started = time.perf_counter()
        response = self.get('/os-services', binary='nova-compute')
        return time.perf_counter() - started, len(response.content)

    def config(self, label: str, **extra: Any) -> str:
        return nova_config(self.base, label, TOKEN, **extra)

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# ---------------------------------------------------------------- the cell database


def _service_uuid(host: str) -> str:
    """The uuid of ``host``'s nova-compute service, in the stand-in's answers and the
    cell database's rows alike."""
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, 'service:' + host))


def node_stats(host: Any, index: int) -> dict[str, str]:
    """What nova-compute's resource tracker writes into a compute node's ``stats``
    (``nova.compute.stats.Stats``, as strings): the counts a scheduler reads and its
    counters per VM state, task state, OS type and project, the host's instances
    spread over up to :data:`PROJECTS_PER_HOST` of :data:`PROJECTS` projects."""
    count = host.num_instances
    stats = {'num_instances': str(count), 'io_workload': str(host.io_workload),
             'failed_builds': str(host.failed_builds)}
    if count:
        stats.update({'num_vm_active': str(count), 'num_task_None': str(count),
                      'num_os_type_None': str(count)})
        projects = min(count, PROJECTS_PER_HOST)
        for k in range(projects):
            share = count // projects + (1 if k < count % projects else 0)
            project = uuidlib.UUID(int=(index * PROJECTS_PER_HOST + k) % PROJECTS).hex
            stats[f'num_proj_{project}'] = str(share)
    return stats


def _service_rows(cloud: SyntheticCloud) -> list[tuple[Any, ...]]:
    """The services rows of the computes :func:`nova_documents` describes: the same
    hosts disabled and forced down; a compute silent there (its heartbeat older than
    ``service_down_time``) or forced down (fenced: its nova-compute is not running, as
    the stand-in's heartbeats assume) keeps that heartbeat and ``report_count`` 0 (it
    never reports: the heartbeats leave it alone); the others report from now on."""
    now = datetime.datetime.now(datetime.timezone.utc)
    rows = []
    for i, host in enumerate(cloud.hosts_document()['hosts'], 1):
        seen = _last_seen(host)
        silent = _silent(seen, now) or host['forced_down']
        heartbeat = (seen if silent else now).astimezone(datetime.timezone.utc).replace(
            tzinfo=None)
        rows.append((i, heartbeat, host['service_host'], 0 if silent else 1,
                     host['disabled'], 'bench: disabled' if host['disabled'] else None,
                     host['forced_down'], heartbeat, _service_uuid(host['service_host'])))
    return rows


def every_second(connection: Any, stop: threading.Event,
                 write: Callable[[Any, int], None]) -> None:
    """``write(cursor, tick)`` on ``connection`` (in autocommit) each second, ``tick``
    counting from 0, until ``stop`` is set; then the connection is closed."""
    try:
        tick = 0
        while not stop.wait(1.0):
            with connection.cursor() as cursor:
                write(cursor, tick)
            tick += 1
    finally:
        connection.close()


class CellDatabase:
    """A Nova cell database on the machine's PostgreSQL: ``compute_nodes`` with one row
    per compute of the cloud; dropped by :meth:`drop`. ``prepare(url)``, when given,
    makes the schema (``nova-manage db sync``, bench.nova_api) in place of
    tests.fixtures.cell_databases' tables; ``service_version`` is then the installed
    Nova's, which nova-api checks the computes against."""

    def __init__(self, cloud: SyntheticCloud, *,
                 prepare: Callable[[str], None] | None = None, service_version: int = 66):
        import psycopg2

        from tests.fixtures.postgres_placement import POSTGRES_URL, _maintenance_connection

        self.database = f'bench_cell_{uuidlib.uuid4().hex[:10]}'
        # Each second the rows whose id is this tick modulo this, NODE_WRITES of them.
        self._node_cycle = max(1, len(cloud.hosts) // NODE_WRITES)
        self._admin = _maintenance_connection()
        with self._admin.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{self.database}"')
        self.url = POSTGRES_URL.rsplit('/', 1)[0] + f'/{self.database}'
        self._psycopg2 = psycopg2
        try:
            self._seed(cloud, prepare, service_version)
        except BaseException:
            from tests.fixtures.postgres_placement import _drop_database

            _drop_database(self._admin, self.database)
            self._admin.close()
            raise
        self._stop = threading.Event()
        self._heartbeats = threading.Thread(target=self._report, name='cell-heartbeats',
                                            daemon=True)
        self._heartbeats.start()

    def _seed(self, cloud: SyntheticCloud, prepare: Callable[[str], None] | None,
              service_version: int) -> None:
        """The schema (``prepare``'s, or the fixture's tables) and the cloud's rows."""
        from psycopg2.extras import execute_values

        from tests.fixtures.cell_databases import _POSTGRES_SERVICES, _POSTGRES_TABLE
        from tests.fixtures.nova_host_data import pci_pool, pci_stats_json, two_cell_host

        numa, pci = two_cell_host(), pci_stats_json(
            pci_pool('8086', '154d', 4, numa_node=0, dev_type='type-PF',
                     physical_network='physnet1'))
        rows = []
        for i, host in enumerate(cloud.hosts):
            inventory = host.root.inventory
            vcpus, _, cpu_ratio, vcpus_used = inventory.get('VCPU', (32, 0, 4.0, 0))
            memory, _, ram_ratio, memory_used = inventory.get('MEMORY_MB', (131072, 0, 1.0, 0))
            disk, _, _, disk_used = inventory.get('DISK_GB', (1000, 0, 1.0, 0))
            rows.append((host.name, host.root.uuid, vcpus, memory, disk, vcpus_used,
                         memory_used, disk_used, host.hypervisor_version, host.name,
                         json.dumps(host.cpu_info), host.host_ip,
                         '[["x86_64", "kvm", "hvm"], ["i686", "kvm", "hvm"]]',
                         numa if i % round(1 / NUMA_SHARE) == 0 else None,
                         pci if i % round(1 / PCI_SHARE) == 1 else None,
                         cpu_ratio, ram_ratio, json.dumps(node_stats(host, i))))
        if prepare is not None:
            prepare(self.url)
        connection = self.connect()
        try:
            cursor = connection.cursor()
            if prepare is None:
                cursor.execute(_POSTGRES_SERVICES)
                cursor.execute(_POSTGRES_TABLE)
            execute_values(cursor, (
                'INSERT INTO services (id, created_at, updated_at, host, "binary", topic, '
                'report_count, disabled, disabled_reason, forced_down, last_seen_up, uuid, '
                'version, deleted) VALUES %s'), _service_rows(cloud),
                template=("(%s, timezone('UTC', now()) - interval '1 day', %s, %s, "
                          "'nova-compute', 'compute', %s, %s, %s, %s, %s, %s, "
                          f"{int(service_version)}, 0)"),
                page_size=2000)
            cursor.execute("SELECT setval(pg_get_serial_sequence('services', 'id'), "
                           '(SELECT max(id) FROM services))')
            execute_values(cursor, (
                'INSERT INTO compute_nodes (created_at, host, uuid, vcpus, memory_mb, '
                'local_gb, vcpus_used, memory_mb_used, local_gb_used, hypervisor_version, '
                'hypervisor_hostname, cpu_info, host_ip, supported_instances, numa_topology, '
                'pci_stats, cpu_allocation_ratio, ram_allocation_ratio, stats, '
                'hypervisor_type, disk_allocation_ratio, deleted) VALUES %s'), rows,
                template=('(CURRENT_TIMESTAMP, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, '
                          '%s, %s, %s, %s, %s, %s, %s, \'QEMU\', 1.0, 0)'), page_size=2000)
            connection.commit()
            connection.autocommit = True
            cursor.execute('ANALYZE compute_nodes')
            cursor.execute('ANALYZE services')
        finally:
            connection.close()

    def _report(self) -> None:
        """nova-compute's service reports: every compute writes its heartbeat every
        ``REPORT_INTERVAL`` (10 s), here a tenth of them each second; and its resource
        tracker's writes of the compute node, :data:`NODE_WRITES` rows a second."""
        connection = self.connect()
        connection.autocommit = True

        def write(cursor: Any, tick: int) -> None:
            cursor.execute(
                "UPDATE services SET last_seen_up = timezone('UTC', now()), "
                "updated_at = timezone('UTC', now()), report_count = report_count + 1 "
                'WHERE id %% 10 = %s AND report_count > 0', (tick % 10,))
            cursor.execute(
                "UPDATE compute_nodes SET updated_at = timezone('UTC', now()) "
                'WHERE id %% %s = %s', (self._node_cycle, tick % self._node_cycle))
        every_second(connection, self._stop, write)

    def connect(self) -> Any:
        from sqlalchemy.engine import make_url

        url = make_url(self.url)
        return self._psycopg2.connect(host=url.host, port=url.port or 5432, user=url.username,
                                      password=url.password, dbname=self.database)

    def whole_read(self) -> float:
        """Seconds of the periodic read (scheduler.catalog.cell_db.QUERY) on a new
        connection, as the service makes one per read."""
        from scheduler.catalog.cell_db import QUERY

        started = time.perf_counter()
        connection = self.connect()
        try:
            with connection.cursor() as cursor:
                cursor.execute(QUERY)
                cursor.fetchall()
        finally:
            connection.close()
        return time.perf_counter() - started

    def services_reads(self) -> ServicesReads:
        """Seconds of the reads of the services' state a request of phase c waits for
        (scheduler.catalog.cell_services), through the service's own reader: the
        first read (every row), the next one (the unusual rows), then the two reads
        that come between two such scans: before a request, the rows of the hosts held
        as other than up and enabled (by id); before its answer, the chosen host's and
        the next ones' (by host, scheduler.pipeline.claim.SERVICES_AHEAD). Those two are
        timed as a worker makes them, after a first one (which found the ids and built
        the statements): the median of :data:`BY_HOST_SAMPLES`."""
        from bench.nova_api import _timed
        from scheduler.catalog.cell_db import CellDatabaseReader
        from scheduler.catalog.cell_services import CellServicesReader
        from scheduler.catalog.nova_sync import _unusual
        from scheduler.pipeline.claim import SERVICES_AHEAD

        reader = CellServicesReader([CellDatabaseReader(self.url, keep_connection=True)],
                                    down_time=deploy.SERVICE_DOWN_TIME)
        times = []
        for _ in range(2):
            started = time.perf_counter()
            services = reader.read_services()[0]
            times.append(time.perf_counter() - started)
        unusual = [host for host, state in services.items() if _unusual(state)]
        usual = sorted(set(services) - set(unusual))
        chosen = usual[len(usual) // 2:len(usual) // 2 + 1 + SERVICES_AHEAD]

        def timed(read: Callable[[], object]) -> float:
            read()   # builds the statements, as a worker's first read does
            return _timed(read, BY_HOST_SAMPLES)

        return ServicesReads(times[0], times[1], timed(lambda: reader.usual_again(unusual)),
                             len(unusual), timed(lambda: reader.unusual_now(chosen)),
                             len(chosen))

    def config(self) -> str:
        return f'[cell_database]\nconnections = {CELL_UUID}={self.url}\n'

    def drop(self) -> None:
        from tests.fixtures.postgres_placement import _drop_database

        self._stop.set()
        self._heartbeats.join(10)

        _drop_database(self._admin, self.database)
        self._admin.close()


@dataclass(frozen=True)
class ServicesReads:
    """:meth:`CellDatabase.services_reads`: seconds of each read, and hosts read by host."""

    first: float
    again: float
    held_unusual: float
    held_unusual_hosts: int
    chosen: float
    chosen_hosts: int


# ---------------------------------------------------------------- the phases


@dataclass
class Settings:
    workers: int = DEFAULT_WORKERS
    clients: int = DEFAULT_CLIENTS
    #: Each phase's measured seconds, in slices of ``slice`` seconds taken in turn.
    seconds: float = DEFAULT_SECONDS
    slice: float = DEFAULT_SLICE
    #: Each service's warm-up, once, before the first slice (not measured).
    warmup: float = DEFAULT_WARMUP
    #: Leave phase d (``service_state_max_age = -1``) out.
    no_periodic_only: bool = False
    #: Also phase e, ``[cell_database]`` alone (what it costs without ``[nova]``).
    cell_alone: bool = False
    #: Also phase f, ``[nova] service_state_max_age`` = this (> 0; 0: no such phase).
    max_age: float = 0.0
    #: One phase's service at a time, for all its ``seconds`` (no turns): where the
    #: idle services' periodic syncs would weigh too much (50,000 providers).
    one_at_a_time: bool = False
    #: ``stand-in`` (the module's doc) or ``nova``: Nova 34's own nova-api on a
    #: seeded database (bench.nova_api), whose cell1 database is the phases' cell
    #: database.
    compute_api: str = 'stand-in'
    #: Phases to leave out, by their letters in the module's doc (e.g. ``bg``: the ones
    #: that read ``GET /os-services`` before every request, hours at 10,000 nova-api
    #: computes).
    skip: str = ''
    #: bench.view's ``--nested``: a cloud with nested trees and a workload that mixes
    #: vGPU, PCI-in-Placement and NUMA-in-Placement flavors into the flat ones
    #: (bench.view.kinds_for); each phase's rows then also say which kinds were
    #: placed and what went to Placement's ``GET /allocation_candidates``.
    nested: bool = False
    #: ``[scheduler] heap_trim_interval`` of every phase's service (bench.view's).
    heap_trim_interval: float = Options.heap_trim_interval


@dataclass
class Measured:
    phase: _Phase
    calls: int
    services_gets: int
    services_seconds: float
    cores: dict[str, float]
    #: seconds the clients ran
    elapsed: float
    #: each worker's peak resident memory (VmHWM) after the slice, MB
    peaks: list[float]
    #: (kind's name, 'placed' | 'NoValidHost' | 'other error') -> requests
    outcomes: Counter
    #: GET /allocation_candidates in Placement's log during the slice, by kind
    #: (bench.view.query_kind)
    placement_gets: Counter
    #: each worker's resident memory (VmRSS) once the slice's clients stopped and its
    #: claims were deleted, MB: what it holds idle, where the peak adds what requests
    #: in flight at once hold
    resident: list[float]


@dataclass
class StartupCheck:
    """The start-up check of a phase's service (CHECKING_PHASES) as it stood when the
    phase's window began."""
    #: GET /os-services answered to the phase's service by then, and the compute
    #: API's own seconds for them
    gets: int
    seconds: float
    #: seconds the clients ran on past the warm-up for them
    waited: float
    #: GET /os-services of the phase's service the compute API was still answering
    in_flight: int

    @property
    def answered(self) -> bool:
        return self.gets > 0 and self.in_flight == 0


@dataclass
class PhaseService:
    """A phase's service, warmed up: its RPC client, the service, and its start-up
    check when it makes one."""
    client: Any
    svc: Any
    check: StartupCheck | None


def _label(name: str) -> str:
    return 'p-' + ''.join(c if c.isalnum() else '-' for c in name)


def _services_key(name: str | None) -> str:
    """Where the compute API counts the GETs of /os-services of phase ``name``'s
    service, or everyone's."""
    return SERVICES_PATH if name is None else f'/{_label(name)}{SERVICES_PATH}'


def _services(stats: dict[str, list[float]], name: str | None = None) -> tuple[int, float]:
    """GET /os-services answered so far (and the stand-in's seconds for them), by the
    service of phase ``name``, or by anyone."""
    count, seconds = stats.get(_services_key(name), [0, 0.0])
    return int(count), float(seconds)


def _phase_config(name: str, dep: deploy.Deployment, nova: ComputeApi, cell: CellDatabase,
                  settings: Settings) -> str:
    config = _view_config(dep, Options(heap_trim_interval=settings.heap_trim_interval))
    if name == 'baseline':
        return config
    if name == 'nova':
        return config + nova.config(_label(name))
    if name in ('nova+cell', WITHOUT_FILE):   # i differs from c by its hosts file alone
        return config + nova.config(_label(name)) + cell.config()
    if name == 'nova+cell, api services':
        return (config + nova.config(_label(name)) + cell.config()
                + 'service_states = false\n')
    if name == 'nova+cell, scan per request':
        return (config + nova.config(_label(name)) + cell.config()
                + 'service_scan_interval = 0\n')
    if name == 'cell':
        return config + cell.config()
    max_age = name.rsplit(' ', 1)[1]
    return config + nova.config(_label(name), service_state_max_age=max_age)


def _slice(name: str, service: PhaseService, dep: deploy.Deployment, nova: ComputeApi,
           clients: int, seconds: float, seed: int, nested: bool) -> Measured:
    """One slice of phase ``name``: ``clients`` back to back on its service for
    ``seconds``; the GETs of /os-services are that phase's service's only (not the idle
    ones' syncs). Placement's GETs of /allocation_candidates are everyone's: with
    phases in turns, an idle service sends none (it only reads its view)."""
    kinds, outcomes = kinds_for(nested), Counter()
    log = dep.access_log()
    gets_before, seconds_before = _services(nova.stats(), name)
    before, started = cpu.sample(), time.monotonic()
    phase = _closed_loop(clients, seconds, 0.0,
                         _service_decide(service.client, _Rngs(seed), kinds, outcomes))
    elapsed = time.monotonic() - started
    cores = cpu.used_between(before, cpu.sample(), elapsed)
    gets_after, seconds_after = _services(nova.stats(), name)
    placement_gets = Counter(query_kind(c.query, kinds) for c in log.read_new()
                             if c.kind == 'GET a_c')
    deploy.delete_consumers(dep.url, phase.consumers)
    workers = service.svc.worker_pids()
    return Measured(phase, len(phase.consumers) + sum(phase.errors.values()),
                    gets_after - gets_before, seconds_after - seconds_before, cores, elapsed,
                    peak_rss_mb(workers), outcomes, placement_gets,
                    status_mb(workers, 'VmRSS'))


#: The phases' letters in the module's doc (f, --max-age's, is not in PHASES).
LETTERS = dict(zip('abcdeghi', PHASES, strict=True))


def _phases(settings: Settings) -> list[str]:
    refused = set(settings.skip) - set('bcdefghi')   # a, the baseline, always runs
    if refused:
        raise SystemExit(f'--skip: not {"".join(sorted(refused))} '
                         f'(phases: {", ".join(f"{k} {v}" for k, v in LETTERS.items())}, '
                         f'f --max-age; the baseline, a, is always run)')
    skipped = {LETTERS[c] for c in settings.skip if c in LETTERS}
    return ([p for p in PHASES if not (settings.no_periodic_only and p == PHASES[3])
             and (settings.cell_alone or p != PHASES[4]) and p not in skipped]
            + ([f'nova, max_age {settings.max_age:g}']
               if settings.max_age > 0 and 'f' not in settings.skip else []))


def _percentile_ms(values: list[float], q: float) -> float:
    return deploy.percentile(values, q) * 1000 if values else float('nan')


def _rate(measured: list[Measured]) -> float:
    """Decisions per second over a phase's slices together."""
    return sum(m.phase.work for m in measured) / sum(m.phase.seconds for m in measured)


def _rows(n: int, name: str, measured: list[Measured], baseline: float | None,
          check: StartupCheck | None = None, nested: bool = False) -> list[Row]:
    """One phase's rows, its slices pooled, and its start-up check's."""
    rate = _rate(measured)
    latencies = [x for m in measured for x in m.phase.latencies]
    errors: Counter = Counter()
    cores: Counter = Counter()
    for m in measured:
        errors.update(m.phase.errors)
        cores.update({k: v * m.elapsed for k, v in m.cores.items()})
    elapsed = sum(m.elapsed for m in measured)
    no_valid_host = sum(v for k, v in errors.items() if 'NoValidHost' in k)
    calls = sum(m.calls for m in measured)
    gets = sum(m.services_gets for m in measured)
    served = sum(m.services_seconds for m in measured)
    completed = sum(m.phase.completed for m in measured)
    share = f'{rate / baseline:.0%} of the baseline; ' if baseline else ''
    other = sum(errors.values()) - no_valid_host
    note = (f'{share}{completed} answered in {len(measured)} slices of '
            f'{measured[0].phase.seconds:g}s (each: '
            + ', '.join(f'{m.phase.rate:.1f}' for m in measured) + ' req/s); '
            f'NoValidHost {no_valid_host}, other errors {other}'
            + (' (' + '; '.join(f'{k} x{v}' for k, v in errors.most_common(2)) + ')'
               if other else '')
            + f'; cores used: {cpu.describe({k: v / elapsed for k, v in cores.items()})}')
    label = f'host data: {name}'
    rows = [Row(f'{label}, throughput', n, rate, unit='req/s', note=note),
            Row(f'{label}, p50', n, _percentile_ms(latencies, 50)),
            Row(f'{label}, p99', n, _percentile_ms(latencies, 99))]
    peaks = measured[-1].peaks
    if peaks:
        rows.append(Row(f'{label}, peak memory per worker (VmHWM)', n, max(peaks), unit='MB',
                        note='each worker: ' + ', '.join(f'{p:.0f}' for p in peaks) + ' MB'))
    resident = measured[-1].resident
    if resident:
        rows.append(Row(f'{label}, memory per worker after the window (VmRSS)', n,
                        max(resident), unit='MB',
                        note='each worker: ' + ', '.join(f'{r:.0f}' for r in resident)
                             + ' MB, its clients stopped and their claims deleted'))
    rows.extend(_placement_rows(n, label, measured, nested))
    if name != 'baseline':
        rows.append(Row(f'{label}, GET /os-services per request', n,
                        gets / calls if calls else float('nan'), unit='n',
                        note=f'{gets} GETs for {calls} requests'
                             + (f'; {_check_note(check)}' if check else '')))
        if gets:
            rows.append(Row(f'{label}, compute API time per GET /os-services', n,
                            served / gets * 1000,
                            note=f'{served * 1000:.0f} ms of the compute API\'s own in the '
                                 f'{elapsed:.0f} s the clients ran'))
    if check:
        rows.append(Row(f'{label}, start-up check GET /os-services (before the window)', n,
                        check.seconds if check.gets else float('nan'), unit='s',
                        note=f'{_check_note(check)}; made at start-up and once an hour, '
                             f'not per request'))
    return rows


def _placement_rows(n: int, label: str, measured: list[Measured], nested: bool) -> list[Row]:
    """What a phase's requests left to Placement's ``GET /allocation_candidates`` (by
    kind) and, with ``nested``, how each kind of the workload fared."""
    gets: Counter = Counter()
    outcomes: Counter = Counter()
    for m in measured:
        gets.update(m.placement_gets)
        outcomes.update(m.outcomes)
    answered = sum(v for (_, outcome), v in outcomes.items() if outcome != 'other error')
    rows = [Row(f'{label}, GET /allocation_candidates per request', n,
                sum(gets.values()) / answered if answered else float('nan'), unit='n',
                note=f'{sum(gets.values())} GETs for {answered} requests answered'
                     + (' (' + ', '.join(f'{k} {v}' for k, v in sorted(gets.items())) + ')'
                        if gets else ''))]
    if nested:
        kinds = [k for k, _ in kinds_for(True) if k.nested]
        placed = sum(outcomes[k.name, 'placed'] for k in kinds)
        rows.append(Row(f'{label}, nested kinds placed', n, placed, unit='n',
                        note='per kind placed/NoValidHost/other error: ' + ', '.join(
                            f'{k.name} {outcomes[k.name, "placed"]}/'
                            f'{outcomes[k.name, "NoValidHost"]}/'
                            f'{outcomes[k.name, "other error"]}' for k in kinds)))
    return rows


def _check_note(check: StartupCheck) -> str:
    """A start-up check in words: its GETs, their cost, and where they fell."""
    each = f' ({_secs(check.seconds / check.gets)} s each)' if check.gets > 1 else ''
    spent = (f'{check.gets} GET{"s" if check.gets != 1 else ""}, {_secs(check.seconds)} s '
             f'of the compute API\'s own{each}, answered')
    if check.answered:
        return (f'start-up check: {spent} before the window (the clients ran '
                f'{check.waited:.1f} s past the warm-up for it)')
    return (f'start-up check: {spent}, and {check.in_flight} still in flight when the '
            f'window began, {check.waited:.1f} s past the warm-up (at most '
            f'{CHECK_WAIT:.0f} s): the window has it')


def _secs(seconds: float) -> str:
    """Seconds to a tenth, or to two figures below one (the stand-in's answers)."""
    return f'{seconds:.1f}' if seconds >= 1 else f'{seconds:.2g}'


def _check_state(nova: ComputeApi, name: str) -> StartupCheck:
    """Phase ``name``'s GETs of /os-services now (``waited`` left 0)."""
    # The answers first: they only grow, so with none in flight read after, every
    # GET the service began by then was answered.
    gets, seconds = _services(nova.stats(), name)
    in_flight = nova.in_flight().get(_services_key(name), 0)
    return StartupCheck(gets, seconds, 0.0, in_flight)


def _await_check(name: str, client: Any, dep: deploy.Deployment, nova: ComputeApi,
                 settings: Settings) -> StartupCheck:
    """Phase ``name``'s clients kept running, as in the warm-up, until its service's
    start-up check of the compute API is answered, at most ``CHECK_WAIT`` seconds.
    That GET /os-services comes once at start-up and once an hour: a window it fell
    into (a slow machine's warm-up too short for it) was charged with minutes of
    nova-api's CPU on a machine the service shares."""
    started = time.monotonic()
    while (time.monotonic() - started < CHECK_WAIT
           and not _check_state(nova, name).answered):
        more = _closed_loop(settings.clients,
                            min(CHECK_CHUNK, CHECK_WAIT - (time.monotonic() - started)), 0.0,
                            _service_decide(client, _Rngs(2), kinds_for(settings.nested)),
                            until=lambda: _check_state(nova, name).answered, check_every=1.0)
        deploy.delete_consumers(dep.url, more.consumers)
    check = _check_state(nova, name)
    check.waited = time.monotonic() - started
    print(f'  {name}: {_check_note(check)}', file=sys.stderr, flush=True)
    return check


@contextlib.contextmanager
def _phase_service(name: str, dep: deploy.Deployment, nova: ComputeApi, cell: CellDatabase,
                   settings: Settings) -> Iterator[PhaseService]:
    """Phase ``name``'s service, warmed up for ``settings.warmup`` and, in
    CHECKING_PHASES, until its start-up check was answered (:func:`_await_check`)."""
    from scheduler.rpc.client import SchedulerClient

    with deploy.scheduler_service(dep.workdir, placement_url=dep.url, workers=settings.workers,
                                  hosts_file=None if name == WITHOUT_FILE else dep.hosts_file(),
                                  extra_config=_phase_config(name, dep, nova, cell, settings)
                                  ) as (svc, tr):
        client = SchedulerClient(tr, topic=svc.topic, timeout=600)
        warm = _closed_loop(settings.clients, settings.warmup, 0.0,
                            _service_decide(client, _Rngs(1), kinds_for(settings.nested)))
        deploy.delete_consumers(dep.url, warm.consumers)
        check = (_await_check(name, client, dep, nova, settings)
                 if name in CHECKING_PHASES else None)
        deploy.analyze(dep.placement, vacuum=True)
        yield PhaseService(client, svc, check)


def _take(measured: dict[str, list[Measured]], name: str, service: PhaseService,
          dep: deploy.Deployment, nova: ComputeApi, settings: Settings, seconds: float,
          k: int) -> None:
    m = _slice(name, service, dep, nova, settings.clients, seconds, 20261127 + k,
               settings.nested)
    measured[name].append(m)
    print(f'  {name}: {m.phase.rate:.1f} req/s, {m.services_gets} GETs /os-services for '
          f'{m.calls} requests', file=sys.stderr, flush=True)


def _in_turns(measured: dict[str, list[Measured]], phases: list[str],
              stack: contextlib.ExitStack, dep: deploy.Deployment, nova: ComputeApi,
              cell: CellDatabase, settings: Settings) -> dict[str, StartupCheck | None]:
    """Every phase's service up at once, the phases taking turns in short slices: a
    machine whose load drifts weighs on all of them alike. Their start-up checks."""
    services = {name: stack.enter_context(_phase_service(name, dep, nova, cell, settings))
                for name in phases}
    slices = max(1, math.ceil(settings.seconds / settings.slice - 1e-9))
    for k in range(slices):
        for name in phases if k % 2 == 0 else phases[::-1]:
            _take(measured, name, services[name], dep, nova, settings,
                  settings.seconds / slices, k)
    return {name: service.check for name, service in services.items()}


def _compute_api(kind: str, dep: deploy.Deployment, stack: contextlib.ExitStack,
                 ) -> tuple[ComputeApi, CellDatabase, str]:
    """The compute API and the cell database of ``dep``'s cloud, and the API's name
    in the rows; both gone when ``stack`` closes."""
    if kind == 'stand-in':
        stand_in = StandIn(dep.cloud, dep.workdir)
        stack.callback(stand_in.stop)
        cell = CellDatabase(dep.cloud)
        stack.callback(cell.drop)
        return stand_in, cell, 'stand-in'
    if kind != 'nova':
        raise ValueError(f'--compute-api {kind}: stand-in or nova')
    from bench.nova_api import NovaApi, service_version

    nova = NovaApi(dep.workdir, TOKEN)
    stack.callback(nova.stop)
    cell = CellDatabase(dep.cloud, prepare=nova.sync_cell, service_version=service_version())
    stack.callback(cell.drop)
    nova.start(dep.cloud)
    return nova, cell, 'nova-api'


def nova_cloud_sources(dep: deploy.Deployment, stack: contextlib.ExitStack
                       ) -> tuple[ComputeApi, str]:
    """Phase i's sources for another benchmark's service (bench.view ``--sources``):
    the stand-in compute API and the cell database of ``dep``'s cloud, both gone when
    ``stack`` closes, and the sections that read them at their defaults. The service
    they are for is to have no hosts file, as phase i's has none."""
    nova, cell, _ = _compute_api('stand-in', dep, stack)
    return nova, nova.config(_label(WITHOUT_FILE)) + cell.config()


def await_startup_check(client: Any, dep: deploy.Deployment, nova: ComputeApi, *,
                        clients: int, nested: bool) -> StartupCheck:
    """:func:`_await_check` for a service of :func:`nova_cloud_sources`: its clients'
    warm-up kept going until the compute API answered that service's start-up check."""
    return _await_check(WITHOUT_FILE, client, dep, nova,
                        Settings(clients=clients, nested=nested))


def run(providers: int, settings: Settings | None = None) -> list[Row]:
    """One size's rows (the module's doc)."""
    settings = settings or Settings()
    rows: list[Row] = []

    def row(r: Row) -> None:
        rows.append(r)
        print(render([r]).splitlines()[-1], file=sys.stderr, flush=True)

    with deploy.seeded_deployment(providers, direct=True, nested=settings.nested) as dep, \
            contextlib.ExitStack() as stack:
        n = len(dep.cloud.hosts)
        row(Row('host data: seed Placement (setup)', n, dep.seed_seconds, unit='s'))
        started = time.monotonic()
        nova, cell, api = _compute_api(settings.compute_api, dep, stack)
        row(Row(f'host data: {api} and cell database (setup)', n,
                time.monotonic() - started, unit='s'))
        nova.services_read()  # the stand-in serialises the document at the first
        before = _services(nova.stats())
        alone = [nova.services_read() for _ in range(ALONE_SAMPLES)]
        after = _services(nova.stats())
        row(Row(f'host data: {api} GET /os-services alone (client side)', n,
                statistics.median(s for s, _ in alone) * 1000,
                note=f'{alone[0][1] / 1e6:.2f} MB, {n} services; server side '
                     f'{(after[1] - before[1]) / (after[0] - before[0]) * 1000:.1f} ms '
                     f'mean over {after[0] - before[0]}'))
        row(Row('host data: cell database whole SELECT alone', n,
                statistics.median(cell.whole_read() for _ in range(5)) * 1000,
                note=f'{n} compute_nodes rows, {NUMA_SHARE:.0%} with a NUMA topology, '
                     f'{PCI_SHARE:.0%} with PCI pools; a new connection each'))
        reads = [cell.services_reads() for _ in range(5)]
        row(Row('host data: cell database services, first read alone', n,
                statistics.median(r.first for r in reads) * 1000,
                note=f'{n} nova-compute rows through scheduler.catalog.cell_services '
                     f'(every row, states, a fresh parser), on a new reader'))
        row(Row('host data: cell database services, next read alone', n,
                statistics.median(r.again for r in reads) * 1000,
                note='the same reader again, on its connection: its count and the unusual '
                     'rows only, one statement'))
        from scheduler.catalog.cell_services import BY_ID_CHUNK

        held = reads[0].held_unusual_hosts
        row(Row('host data: cell database services, held-unusual rows by id alone', n,
                statistics.median(r.held_unusual for r in reads) * 1000,
                note=f'the rows of the {held} hosts held as disabled, forced down or silent, '
                     f'by the ids a first read by host found, in '
                     f'{math.ceil(held / BY_ID_CHUNK)} statement(s): what a request of phase '
                     f'c reads before it is decided, between two reads of every row'))
        row(Row('host data: cell database services, chosen hosts by host alone', n,
                statistics.median(r.chosen for r in reads) * 1000,
                note=f'the rows of {reads[0].chosen_hosts} up and enabled hosts, one '
                     f'statement: what a request of phase c reads before its answer (the '
                     f'host it claims and the next ones)'))
        phases = _phases(settings)
        measured: dict[str, list[Measured]] = {name: [] for name in phases}
        checks: dict[str, StartupCheck | None] = {}
        if settings.one_at_a_time:
            for name in phases:
                with _phase_service(name, dep, nova, cell, settings) as service:
                    checks[name] = service.check
                    _take(measured, name, service, dep, nova, settings, settings.seconds, 0)
        else:
            checks = _in_turns(measured, phases, stack, dep, nova, cell, settings)
        baseline = _rate(measured['baseline'])
        for name in phases:
            for r in _rows(n, name, measured[name], None if name == 'baseline' else baseline,
                           checks.get(name), settings.nested):
                row(r)
    return rows


def run_all(sizes: list[int], settings: Settings | None = None) -> list[Row]:
    return rows_per_size('host data', sizes, lambda n: run(n, settings))


def main(argv: list[str] | None = None) -> int:
    parser = settings_parser('python -m bench.host_data', __doc__, Settings())
    parser.add_argument('--providers', default=','.join(map(str, DEFAULT_PROVIDERS)),
                        help='numbers of providers, comma-separated')
    parser.add_argument('--json', metavar='PATH', help='also write the rows as JSON')
    parser.add_argument('--serve-stand-in', metavar='DOCUMENTS', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_stand_in:
        _serve(args.serve_stand_in)
        return 0
    settings = settings_from(args, Settings())
    sizes = [int(p) for p in args.providers.split(',') if p.strip()]
    try:
        rows = run_all(sizes, settings)
    except deploy.ServiceMissing as e:
        print(f'cannot run: {e}', file=sys.stderr)
        return 2
    return finish(rows, args.json)


if __name__ == '__main__':
    sys.exit(main())
