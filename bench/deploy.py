"""The real pieces the end-to-end benchmarks run: Placement on PostgreSQL, RabbitMQ,
``scheduler-service`` processes, and the seeding that puts a synthetic cloud in Placement.

Everything started here is stopped by the context manager that started it, on
failure too: gunicorn and its database (a fresh one per run, dropped at the
end), service processes, and the RabbitMQ exchange and queues of the run
(each run has its own exchange and topic, so nothing meets other users of
the broker).

Placement's access log is the benchmark's stopwatch for Placement's share of
a request: every line carries the method, path, status, the server-side
duration (gunicorn's ``%(D)s``, microseconds from the parsed request to the
last byte written) and the ``X-OpenStack-Request-ID`` the caller sent, which
the service sets to the RPC context's global request id. So each Placement
call is attributed to the ``select_destinations`` call that made it, however
many run at once.
"""
from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import random
import re
import shutil
import socket
import tempfile
import time
import uuid as uuidlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

from bench.synthetic import CELL_UUID, SyntheticCloud
from tests.fixtures.postgres_placement import (
    POSTGRES_URL,
    PostgresPlacement,
    ServiceMissing,
    _drop_database,
    start_postgres_placement,
)
from tests.fixtures.processes import ServiceProcess

LOG = logging.getLogger(__name__)

RABBIT_URL = os.environ.get('SCHEDULER_BENCH_RABBIT_URL',
                            os.environ.get('SCHEDULER_TEST_RABBIT_URL',
                                           'rabbit://guest:guest@127.0.0.1:5672/'))
#: ``[DEFAULT] service_down_time`` of the benchmarked service: longer than any run
#: (the provider view's at 50,000 providers lasts over ten minutes after its hosts
#: file is written), shorter than the synthetic cloud's down hosts' silence (3,600 s
#: and more).
SERVICE_DOWN_TIME = 3000
#: Placement server processes (gunicorn sync workers).
PLACEMENT_WORKERS = 4
#: What the service and the direct clients send; Placement 16 understands up to 1.39.
HEADERS = {'X-Auth-Token': 'admin', 'Accept': 'application/json',
           'OpenStack-API-Version': 'placement 1.39'}
PROJECT_ID = '9d6c6d7f1c8e4f4fa2b1f0e3d2c1b0a9'
USER_ID = '5e1f2a3b4c5d4e6f8a9b0c1d2e3f4a5b'

# method path status microseconds request-id query; request-id is '-' when not sent.
ACCESS_LOG_FORMAT = '%(m)s %(U)s %(s)s %(D)s %({x-openstack-request-id}i)s %(q)s'


# ---------------------------------------------------------------- peers


def require_rabbit(url: str = RABBIT_URL) -> None:
    """ServiceMissing naming the broker when nothing answers at ``url``."""
    parts = urlsplit(url.replace('rabbit://', 'amqp://', 1))
    host, port = parts.hostname or '127.0.0.1', parts.port or 5672
    try:
        with socket.create_connection((host, port), timeout=2):
            pass
    except OSError as e:
        raise ServiceMissing(f'RabbitMQ at {host}:{port} does not answer ({e}); the '
                             f'end-to-end benchmarks need it (set SCHEDULER_BENCH_RABBIT_URL '
                             f'to use another broker)') from e


# ---------------------------------------------------------------- access log


@dataclass(frozen=True)
class PlacementCall:
    method: str
    path: str
    status: int
    seconds: float
    request_id: str
    query: str

    @property
    def kind(self) -> str:
        """'GET a_c', 'PUT alloc', or 'other' (what the split of a request counts)."""
        if self.method == 'GET' and self.path == '/allocation_candidates':
            return 'GET a_c'
        if self.method == 'PUT' and self.path.startswith('/allocations/'):
            return 'PUT alloc'
        return 'other'


class AccessLog:
    """Reads the lines Placement appended since the last read."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0
        self._partial = b''

    def skip_to_end(self) -> None:
        self.offset = self.path.stat().st_size if self.path.exists() else 0
        self._partial = b''

    def read_new(self) -> list[PlacementCall]:
        if not self.path.exists():
            return []
        with self.path.open('rb') as f:
            f.seek(self.offset)
            data = self._partial + f.read()
            self.offset = f.tell()
        lines = data.split(b'\n')
        self._partial = lines.pop()   # a line still being written
        calls = []
        for raw in lines:
            parts = raw.decode(errors='replace').split(' ', 5)
            if len(parts) < 5 or not parts[3].isdigit():
                continue
            calls.append(PlacementCall(parts[0], parts[1], int(parts[2]),
                                       int(parts[3]) / 1e6, parts[4],
                                       parts[5] if len(parts) > 5 else ''))
        return calls


# ---------------------------------------------------------------- Placement


@contextlib.contextmanager
def placement_on_postgres(workdir: pathlib.Path, *,
                          workers: int = PLACEMENT_WORKERS) -> Iterator[PostgresPlacement]:
    """A real Placement (gunicorn, ``workers`` processes) on a fresh PostgreSQL database.

    ``[placement] allocation_conflict_retry_count`` is 1, as the race tests use
    it (tests/fixtures/postgres_placement.py explains why).
    """
    server, connection = start_postgres_placement(
        workdir, workers=workers, access_log_format=ACCESS_LOG_FORMAT,
        database_prefix='placement_bench', request_timeout=900)
    try:
        yield server
    finally:
        server.stop()
        try:
            _drop_database(connection, server.database)
        finally:
            connection.close()


def connect(placement: PostgresPlacement):
    """A psycopg2 connection to ``placement``'s database (the caller closes it)."""
    import psycopg2
    from sqlalchemy.engine import make_url

    url = make_url(POSTGRES_URL)
    return psycopg2.connect(host=url.host, port=url.port or 5432, user=url.username,
                            password=url.password, dbname=placement.database,
                            connect_timeout=5)


def select(placement: PostgresPlacement, query: str) -> list[tuple]:
    """The rows of one SELECT on ``placement``'s database."""
    connection = connect(placement)
    try:
        with connection.cursor() as cursor:
            cursor.execute(query)
            return cursor.fetchall()
    finally:
        connection.close()


def analyze(placement: PostgresPlacement, *, vacuum: bool = False) -> None:
    """``ANALYZE`` (with ``vacuum``: ``VACUUM ANALYZE``) Placement's database.

    Right after a bulk load PostgreSQL has no statistics until autovacuum gets
    round to it, and Placement's candidate query is then planned badly:
    measured at 1,000 providers, GET /allocation_candidates took 1.3 s before
    and 0.28 s after (a database in service has statistics).

    ``vacuum`` also clears the dead rows that claims and their clean-up leave
    (every claim rewrites its providers' generation row; the candidate query
    joins those tables), so that benchmark phases run one after another each
    start from the same database instead of one autovacuum happens to tidy.
    """
    connection = connect(placement)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute('VACUUM ANALYZE' if vacuum else 'ANALYZE')
    finally:
        connection.close()


def _session(pool: int = 8) -> requests.Session:
    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=pool, pool_maxsize=pool)
    session.mount('http://', adapter)
    session.headers.update(HEADERS)
    return session


def _check(response: requests.Response, what: str, ok: tuple[int, ...] = (200, 201, 204)) -> Any:
    if response.status_code not in ok:
        raise RuntimeError(f'seeding Placement: {what} answered {response.status_code}: '
                           f'{response.text[:300]}')
    return response.json() if response.content else None


def seed_cloud(url: str, cloud: SyntheticCloud, *, threads: int = 6,
               providers_per_consumer: int = 50) -> int:
    """Write ``cloud``'s providers, inventories, traits and usage into Placement.

    Three requests per provider (create, inventories, traits), chained on the
    provider generation; the traits are created once up front, not checked per
    provider as ``scheduler.simulate.seed`` does (which triples the request
    count). A disabled host carries ``COMPUTE_STATUS_DISABLED``, as Nova's
    compute sets it. Usage becomes real allocations (batched ``POST
    /allocations``), split into consumers no bigger than a provider's
    ``max_unit`` (= total, as Nova reports it), so that Placement's answer
    has the same capacity and usage as ``cloud.placement_body()``. Aggregates
    are Nova's (availability zones, weights), so they live in the hosts file
    only. Returns the number of usage consumers.
    """
    session = _session(threads + 2)
    traits = sorted({t for h in cloud.hosts for p in h.providers for t in p.traits}
                    | {'COMPUTE_STATUS_DISABLED'})
    for trait in traits:
        if trait.startswith('CUSTOM_'):
            _check(session.put(f'{url}/traits/{trait}'), f'PUT /traits/{trait}')
    for rc in sorted({rc for h in cloud.hosts for p in h.providers for rc in p.inventory}):
        if rc.startswith('CUSTOM_'):
            _check(session.put(f'{url}/resource_classes/{rc}'), f'PUT /resource_classes/{rc}')

    def provider(p, extra_traits: tuple[str, ...] = ()) -> None:
        body: dict[str, Any] = {'name': p.name, 'uuid': p.uuid}
        if p.parent_uuid:
            body['parent_provider_uuid'] = p.parent_uuid
        gen = _check(session.post(f'{url}/resource_providers', json=body),
                     f'POST /resource_providers {p.name}')['generation']
        inventories = {rc: {'total': total, 'reserved': reserved, 'allocation_ratio': ratio,
                            'min_unit': 1, 'max_unit': total, 'step_size': 1}
                       for rc, (total, reserved, ratio, _) in p.inventory.items()}
        gen = _check(session.put(f'{url}/resource_providers/{p.uuid}/inventories',
                                 json={'resource_provider_generation': gen,
                                       'inventories': inventories}),
                     f'PUT inventories of {p.name}')['resource_provider_generation']
        _check(session.put(f'{url}/resource_providers/{p.uuid}/traits',
                           json={'resource_provider_generation': gen,
                                 'traits': sorted({*p.traits, *extra_traits})}),
               f'PUT traits of {p.name}')

    def host(h) -> None:
        provider(h.root, ('COMPUTE_STATUS_DISABLED',) if h.disabled else ())
        for child in h.children:
            provider(child)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(host, cloud.hosts))

    batches = usage_batches(cloud, providers_per_consumer)

    def post(batch: dict[str, Any]) -> None:
        # A 409 can still come from rows Placement shares between consumers (project,
        # user); the same batch again settles it.
        for attempt in range(5):
            response = session.post(f'{url}/allocations', json=batch)
            if response.status_code != 409 or attempt == 4:
                _check(response, 'POST /allocations (usage)')
                return

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(post, batches))
    consumers = sum(len(b) for b in batches)
    return consumers


def usage_batches(cloud: SyntheticCloud, providers_per_consumer: int = 50
                  ) -> list[dict[str, Any]]:
    """``cloud``'s usage as ``POST /allocations`` bodies (consumer uuid -> allocations).

    Each provider's usage in chunks of at most its max_unit; consumer k of a
    group of providers holds chunk k of each (Placement's cost grows with
    consumers, so the count is kept as Placement-seeded runs always had it).
    One batch per group of providers: batches then touch disjoint providers and
    can go in parallel (two batches on one provider conflict on its generation).
    Consumer uuids come from the cloud's seed, so both seeders write the same.
    """
    rng = random.Random(cloud.seed)
    chunks: list[tuple[str, list[dict[str, int]]]] = []
    for p in (p for h in cloud.hosts for p in h.providers):
        left = {rc: used for rc, (_, _, _, used) in p.inventory.items() if used > 0}
        mine = []
        while left:
            chunk = {rc: min(used, p.inventory[rc][0]) for rc, used in left.items()}
            left = {rc: used - chunk[rc] for rc, used in left.items() if used > chunk[rc]}
            mine.append(chunk)
        if mine:
            chunks.append((p.uuid, mine))
    batches: list[dict[str, Any]] = []
    for g in range(0, len(chunks), providers_per_consumer):
        group = chunks[g:g + providers_per_consumer]
        batches.append({str(uuidlib.UUID(int=rng.getrandbits(128), version=4)): {
            'allocations': {rp: {'resources': c[k]} for rp, c in group if k < len(c)},
            'project_id': PROJECT_ID, 'user_id': USER_ID,
            'consumer_generation': None, 'consumer_type': 'INSTANCE'}
            for k in range(max(len(c) for _, c in group))})
    return batches


def delete_consumers(url: str, consumers: list[str], *, threads: int = 4) -> int:
    """DELETE the allocations of ``consumers`` (what a benchmark claimed); how many existed."""
    session = _session(threads)

    def delete(consumer: str) -> bool:
        response = session.delete(f'{url}/allocations/{consumer}')
        if response.status_code not in (204, 404):
            raise RuntimeError(f'DELETE /allocations/{consumer} answered '
                               f'{response.status_code}: {response.text[:200]}')
        return response.status_code == 204

    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(delete, consumers))


# ---------------------------------------------------------------- the service


@dataclass
class RunningService:
    process: ServiceProcess
    topic: str
    exchange: str
    host: str
    workers: int
    metrics_url: str | None
    #: its configuration file
    config: pathlib.Path | None = None

    @property
    def pid(self) -> int:
        return self.process.proc.pid

    def worker_pids(self) -> list[int]:
        """The processes that serve calls: the service itself with one worker."""
        if self.workers == 1:
            return [self.pid]
        readers = set(self.reader_pids())
        return sorted(pid for pid in self.process.workers() if pid not in readers)

    def reader_pids(self) -> list[int]:
        """The service's readers (the compute services', the provider view's): children
        of the service that read for its workers and serve no call."""
        if self.workers == 1:
            return []
        children = self.process.workers()
        return sorted({int(pid) for pid in _READER_STARTED.findall(self.process.output())}
                      & children)


#: The line a reader of the service logs when it starts (its pid).
_READER_STARTED = re.compile(r'reader (\d+) serving the workers')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def write_service_config(path: pathlib.Path, *, placement_url: str, transport_url: str,
                         topic: str, exchange: str, host: str, workers: int,
                         hosts_file: pathlib.Path | None, metrics_port: int | None = None,
                         extra: str = '') -> pathlib.Path:
    """A scheduler.conf with the shipped defaults (filters, weighers, request filters)."""
    lines = [
        '[DEFAULT]', f'transport_url = {transport_url}', f'control_exchange = {exchange}',
        f'host = {host}', 'graceful_shutdown_timeout = 10',
        # The claims journal (on, as shipped) beside the run's other files.
        f'state_path = {path.parent}',
        # The hosts file's heartbeats are static (written just before the start):
        # a longer down time keeps the hosts that were up, up for the whole run.
        f'service_down_time = {SERVICE_DOWN_TIME}', '',
        '[scheduler]', f'workers = {workers}', f'rpc_topic = {topic}',
        f'default_cell_uuid = {CELL_UUID}',
    ]
    if hosts_file is not None:
        lines.append(f'hosts_file = {hosts_file}')
    if metrics_port is not None:
        lines.append(f'metrics_listen = 127.0.0.1:{metrics_port}')
    lines += ['', '[placement]', 'auth_type = admin_token', 'token = admin',
              f'endpoint = {placement_url}', 'max_retries = 1',
              # A candidate query of 50,000 providers under load takes longer than
              # the shipped 30 s; the benchmark measures it rather than cutting it.
              'read_timeout = 600', '', extra]
    path.write_text('\n'.join(lines) + '\n')
    return path


def rpc_transport(transport_url: str, exchange: str):
    """An oslo.messaging transport on the run's own exchange, for the bench's clients."""
    from oslo_config import cfg

    from scheduler import conf as scheduler_conf
    from scheduler.rpc.transport import get_transport

    conf = cfg.ConfigOpts()
    scheduler_conf.register_opts(conf)
    conf([], project='scheduler', default_config_files=[], default_config_dirs=[],
         use_env=False)
    conf.set_override('transport_url', transport_url)
    conf.set_override('control_exchange', exchange)
    return get_transport(conf)


def _delete_broker_objects(transport_url: str, *, queues: list[str],
                           exchanges: list[str]) -> None:
    """Remove the run's queues and exchanges (oslo.messaging leaves the topic queues)."""
    import kombu

    try:
        with kombu.Connection(transport_url.replace('rabbit://', 'amqp://', 1),
                              connect_timeout=5) as connection:
            channel = connection.channel()
            for queue in queues:
                with contextlib.suppress(Exception):
                    channel.queue_delete(queue)
            for exchange in exchanges:
                with contextlib.suppress(Exception):
                    channel.exchange_delete(exchange)
    except Exception as e:  # noqa: BLE001 - cleanup must not hide the run's own error
        LOG.warning('could not remove RabbitMQ queues/exchanges %s %s: %s', queues,
                    exchanges, e)


def wait_serving(service: RunningService, transport, *, timeout: float) -> None:
    """Until every worker logged that it serves, and one answers a ping."""
    from scheduler.rpc.client import SchedulerClient

    deadline = time.monotonic() + timeout
    while True:
        if service.process.proc.poll() is not None:
            raise RuntimeError(f'scheduler-service exited with {service.process.proc.returncode}'
                               f':\n{service.process.output()[-3000:]}')
        if service.process.output().count(' serving') >= service.workers:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f'scheduler-service did not start within {timeout:.0f}s:\n'
                               f'{service.process.output()[-3000:]}')
        time.sleep(0.2)
    client = SchedulerClient(transport, topic=service.topic, timeout=10)
    context = {'request_id': f'req-{uuidlib.uuid4()}', 'user_id': USER_ID,
               'project_id': PROJECT_ID, 'roles': ['admin'], 'is_admin': True}
    while True:
        try:
            client.call(context, 'ping', version='1.1', namespace='baseapi', arg='bench')
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextlib.contextmanager
def scheduler_service(workdir: pathlib.Path, *, placement_url: str, workers: int,
                      hosts_file: pathlib.Path | None, transport_url: str = RABBIT_URL,
                      metrics: bool = False, extra_config: str = '',
                      start_timeout: float = 300.0) -> Iterator[tuple[RunningService, Any]]:
    """``scheduler-service`` with its own topic and exchange, and a client transport.

    Yields (service, transport); stops the process (SIGTERM, as operators do)
    and removes the run's queues and exchange afterwards.
    """
    require_rabbit(transport_url)
    run = uuidlib.uuid4().hex[:10]
    topic, exchange, host = f'bench-{run}', f'bench-{run}', f'bench-{run}'
    metrics_port = _free_port() if metrics else None
    config = write_service_config(
        workdir / f'scheduler-{run}.conf', placement_url=placement_url,
        transport_url=transport_url, topic=topic, exchange=exchange, host=host,
        workers=workers, hosts_file=hosts_file, metrics_port=metrics_port, extra=extra_config)
    transport = rpc_transport(transport_url, exchange)
    process = ServiceProcess(config)
    service = RunningService(process, topic, exchange, host, workers,
                             f'http://127.0.0.1:{metrics_port}/metrics' if metrics else None,
                             config)
    try:
        wait_serving(service, transport, timeout=start_timeout)
        yield service, transport
    finally:
        process.stop()
        reply_queue = getattr(getattr(transport, '_driver', None), '_reply_q', None)
        transport.cleanup()
        _delete_broker_objects(
            transport_url,
            queues=[topic, f'{topic}.{host}'] + ([reply_queue] if reply_queue else []),
            exchanges=[exchange, f'{topic}_fanout'])


def scrape(metrics_url: str) -> dict[str, float]:
    """The worker's Prometheus text as {'name{labels}': value} (sums and counts only)."""
    text = requests.get(metrics_url, timeout=5).text
    values = {}
    for line in text.splitlines():
        if line.startswith('#') or not line:
            continue
        name, _, value = line.rpartition(' ')
        if '_bucket' in name:
            continue
        with contextlib.suppress(ValueError):
            values[name] = float(value)
    return values


# ---------------------------------------------------------------- a whole deployment


@dataclass
class Deployment:
    """Placement with a seeded cloud and its hosts file; shared by several benchmarks."""

    placement: PostgresPlacement
    cloud: SyntheticCloud
    workdir: pathlib.Path
    seed_seconds: float
    usage_consumers: int
    #: the a_c query string the service sends (learnt from the access log)
    query: str | None = None
    #: make_cloud's fill_mean of the seeded cloud
    fill_mean: float | None = None
    #: make_cloud's nested of the seeded cloud
    nested: bool = False

    @property
    def url(self) -> str:
        return self.placement.url

    def access_log(self) -> AccessLog:
        return AccessLog(self.placement.access_log)

    def hosts_file(self) -> pathlib.Path:
        """The cloud's hosts file with heartbeats as of now (see write_hosts_file)."""
        return write_hosts_file(len(self.cloud.hosts), self.workdir / 'hosts.json',
                                seed=self.cloud.seed, fill_mean=self.fill_mean,
                                nested=self.nested)


def write_hosts_file(hosts: int, path: pathlib.Path, *, seed: int = 20261122,
                     fill_mean: float | None = None, nested: bool = False) -> pathlib.Path:
    """``make_cloud(hosts)``'s hosts file, heartbeats relative to now, as JSON (which
    is YAML too; the loader reads it). Same seed, same hosts and uuids as the
    cloud seeded earlier (made with the same ``fill_mean`` and ``nested``: another
    draws other uuids): only the timestamps move."""
    import json

    from bench.synthetic import make_cloud

    path.write_text(json.dumps(make_cloud(hosts, seed=seed, fill_mean=fill_mean,
                                          nested=nested).hosts_document()))
    return path


@contextlib.contextmanager
def seeded_deployment(providers: int, *, seed: int = 20261122,
                      placement_workers: int = PLACEMENT_WORKERS,
                      keep_workdir: bool = False, direct: bool = False,
                      fill_mean: float | None = None,
                      nested: bool = False) -> Iterator[Deployment]:
    """PostgreSQL + Placement seeded with ``make_cloud(providers, fill_mean=...,
    nested=...)``; all gone afterwards. ``direct``: written into Placement's tables
    (bench.seed_sql), not through its API (seconds instead of most of an hour at 50,000
    providers)."""
    from bench.synthetic import make_cloud

    require_rabbit()
    workdir = pathlib.Path(tempfile.mkdtemp(prefix='bench-e2e-'))
    try:
        cloud = make_cloud(providers, seed=seed, fill_mean=fill_mean, nested=nested)
        with placement_on_postgres(workdir, workers=placement_workers) as placement:
            started = time.monotonic()
            if direct:
                from bench.seed_sql import seed_cloud_sql

                connection = connect(placement)
                try:
                    consumers = seed_cloud_sql(connection, cloud)
                finally:
                    connection.close()
            else:
                consumers = seed_cloud(placement.url, cloud)
            analyze(placement, vacuum=direct)
            yield Deployment(placement, cloud, workdir, time.monotonic() - started,
                             consumers, fill_mean=fill_mean, nested=nested)
    finally:
        if not keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def new_request_id() -> str:
    return f'req-{uuidlib.uuid4()}'


def boot_call(request_id: str, instance_uuid: str) -> tuple[dict, dict, list[str]]:
    """(context, spec primitive, instance uuids) of a one-instance m1.medium boot."""
    from scheduler.simulate.workload import FLAVORS, BootRequest

    medium = next(f for f in FLAVORS if f.name == 'm1.medium')
    boot = BootRequest(index=0, flavor=medium, required_traits=(),
                       instance_uuids=(instance_uuid,), project_id=PROJECT_ID,
                       request_id=request_id)
    spec, uuids = boot.to_rpc()
    return boot.context(), spec, uuids
