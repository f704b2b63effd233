"""A real nova-api on a seeded database, to calibrate the stand-in compute API against.

``python -m bench.nova_api --providers N[,N...]`` (nova 34 installed, as ``tox -e
bench`` installs it): per size, the synthetic cloud's computes served twice, side by
side on the same machine:

* by bench.host_data's stand-in (:class:`bench.host_data.StandIn`);
* by Nova 34's own ``osapi_compute`` WSGI application (``nova.wsgi.osapi_compute``,
  unmodified) under gunicorn, on PostgreSQL databases made by ``nova-manage`` (API
  database, cell0, cell1 mapped with ``cell_v2 map_cell0``/``create_cell``, schemas
  from ``api_db sync``/``db sync``) and seeded with the rows a running cloud of that
  size holds: one ``services`` row (nova-compute, the service version of the
  installed Nova, a uuid) and one ``compute_nodes`` row per compute in cell1
  (bench.host_data's cell rows), a ``host_mappings`` row per compute, the cloud's
  aggregates with their hosts and metadata in the API database. nova-compute's
  heartbeats are written as the database servicegroup driver writes them
  (bench.host_data.CellDatabase).

What is not Nova's: keystonemiddleware's ``authtoken`` is replaced in the paste
pipeline by :func:`auth_filter_factory`, which accepts the bench's token and sets the
headers authtoken sets for an admin (Nova's ``keystonecontext`` then builds the request
context from them, as in production); and each answer is timed around the
application, with the ``/p-<label>`` prefix bench.host_data gives each phase's
service stripped before Nova sees the path.

Rows, per size and for each API: ``GET /os-services?binary=nova-compute`` alone (client
side, and the server's own time), ``GET /os-hypervisors/{uuid}`` of one node (a look-up),
``GET /os-aggregates``, and the whole paged ``GET /os-hypervisors/detail`` as the
``[nova]`` sync reads it (``--no-hypervisors`` leaves it out: 8-10 ms a node in
nova-api); then whether the service's own parsers (``scheduler.catalog.nova_api``) read
the same service states, aggregates and hypervisors from both answers (a failed row,
exit status 1, when they do not).
bench.host_data runs its phases against this API with ``--compute-api nova``.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid as uuidlib
from collections.abc import Iterator
from typing import Any

from bench import deploy
from bench.synthetic import SyntheticCloud

#: What authtoken would give the bench's admin.
_ROLES = 'admin,member,reader'
#: The microversion of every read: the [nova] sync's default, and the stand-in's shapes.
MICROVERSION = '2.87'
#: gunicorn worker processes, as a small nova-api deployment runs (uwsgi ``processes``).
DEFAULT_API_WORKERS = 2
SAMPLES = 7


# ---------------------------------------------------------------- inside nova-api's processes


def auth_filter_factory(global_conf: dict[str, Any], **local_conf: Any) -> Any:
    """Paste filter in authtoken's place: the bench token gets what authtoken sets
    for a project admin; anything else a 401, as authtoken answers."""
    token = local_conf['token']

    def wrap(app: Any) -> Any:
        def call(environ: dict[str, Any], start_response: Any) -> Any:
            if environ.get('HTTP_X_AUTH_TOKEN') != token:
                start_response('401 Unauthorized', [('Content-Type', 'application/json')])
                return [b'{"error": {"code": 401, "title": "Unauthorized"}}']
            environ.update({
                'HTTP_X_IDENTITY_STATUS': 'Confirmed', 'HTTP_X_USER_ID': 'bench-admin',
                'HTTP_X_USER_NAME': 'admin', 'HTTP_X_PROJECT_ID': deploy.PROJECT_ID,
                'HTTP_X_PROJECT_NAME': 'admin', 'HTTP_X_ROLES': _ROLES,
                'HTTP_X_USER_DOMAIN_ID': 'default', 'HTTP_X_PROJECT_DOMAIN_ID': 'default'})
            return app(environ, start_response)
        return call
    return wrap


class _Timed:
    """Nova's application, timed: path -> [answers, seconds from the call to the whole
    body], by path and by ``/p-<label>`` path, and path -> requests started, in a file
    per worker process that :func:`read_stats` and :func:`read_in_flight` add up.

    The requests started are counted as well as the answers because one GET of
    ``/os-services`` at 50,000 computes keeps a worker for 20 s to minutes: whether
    one is still being answered (started, not answered) tells a bench whether the
    compute API is still busy with it."""

    def __init__(self, app: Any, stats_dir: pathlib.Path):
        self._app = app
        self._file = stats_dir / f'stats-{os.getpid()}.json'
        self._stats: dict[str, list[float]] = {}
        self._started: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        started = time.perf_counter()
        path, label = environ.get('PATH_INFO', ''), ''
        if path.startswith('/p-'):
            label, _, rest = path[1:].partition('/')
            path = environ['PATH_INFO'] = '/' + rest
        keys = (path, f'/{label}{path}') if label else (path,)
        self._count_started(keys, 1)
        try:
            body = b''.join(self._app(environ, start_response))
        except BaseException:
            # No answer, and no longer in flight: in flight stays started minus answered.
            self._count_started(keys, -1)
            raise
        seconds = time.perf_counter() - started
        with self._lock:
            for key in keys:
                entry = self._stats.setdefault(key, [0, 0.0])
                entry[0] += 1
                entry[1] += seconds
            self._write()
        return [body]

    def _count_started(self, keys: tuple[str, ...], step: int) -> None:
        with self._lock:
            for key in keys:
                self._started[key] = self._started.get(key, 0) + step
            self._write()

    def _write(self) -> None:
        """Both counts, replaced at once: a reader sees the whole of one write, in
        which the requests started are never fewer than the answers."""
        partial = self._file.with_suffix('.part')
        partial.write_text(json.dumps({'answered': self._stats, 'started': self._started}))
        partial.replace(self._file)


def _worker_counts(directory: pathlib.Path,
                   ) -> Iterator[tuple[dict[str, list[float]], dict[str, int]]]:
    """Each worker's :class:`_Timed` counts in ``directory``: its answers (path ->
    [answers, seconds]) and its requests started (path -> count)."""
    for path in directory.glob('stats-*.json'):
        try:
            stats = json.loads(path.read_text())
        except ValueError:  # written by rename, so only a file from before that was cut short
            continue
        yield stats['answered'], stats['started']


def read_stats(directory: pathlib.Path) -> dict[str, list[float]]:
    """Every worker's :class:`_Timed` answers in ``directory``, added up: path ->
    [answers, seconds]."""
    total: dict[str, list[float]] = {}
    for answered, _ in _worker_counts(directory):
        for key, (count, seconds) in answered.items():
            entry = total.setdefault(key, [0, 0.0])
            entry[0] += count
            entry[1] += seconds
    return total


def read_in_flight(directory: pathlib.Path) -> dict[str, int]:
    """Every worker's :class:`_Timed` requests started and not answered yet, added up:
    path -> count (each worker's from one write of its file, so never below 0)."""
    total: dict[str, int] = {}
    for answered, started in _worker_counts(directory):
        for key, count in started.items():
            total[key] = total.get(key, 0) + count - int(answered.get(key, [0, 0.0])[0])
    return total


def _application() -> Any:
    """nova.wsgi.osapi_compute's application, built once per gunicorn worker."""
    # nova parses sys.argv as its own command line: gunicorn's is not.
    sys.argv = [sys.argv[0]]
    from nova.wsgi import osapi_compute

    return _Timed(osapi_compute.application, pathlib.Path(os.environ['OS_NOVA_CONFIG_DIR']))


_built: Any = None
_built_lock = threading.Lock()


def application(environ: dict[str, Any], start_response: Any) -> Any:
    """gunicorn's entry point (``bench.nova_api:application``)."""
    global _built
    if _built is None:
        with _built_lock:
            if _built is None:
                _built = _application()
    return _built(environ, start_response)


# ---------------------------------------------------------------- the deployment


def service_version() -> int:
    """The installed Nova's service version: what its computes would report."""
    from nova.objects.service import SERVICE_VERSION

    return int(SERVICE_VERSION)


def nova_paste_ini() -> str:
    """The api-paste.ini that Nova's package installs (``etc/nova`` under its prefix)."""
    path = pathlib.Path(sys.prefix) / 'etc' / 'nova' / 'api-paste.ini'
    if not path.exists():
        raise RuntimeError(f'{path} is missing: is nova installed here (pip install nova)?')
    return path.read_text()


def paste_ini(nova_paste: str, token: str) -> str:
    """Nova's own ``nova_paste`` with keystonemiddleware's ``authtoken`` replaced by
    :func:`auth_filter_factory` in every ``keystone`` pipeline, and nothing else changed."""
    lines, replaced = [], 0
    for line in nova_paste.splitlines():
        if line.startswith('keystone =') and ' authtoken ' in f'{line} ':
            line = f'{line} '.replace(' authtoken ', ' benchauth ').rstrip()
            replaced += 1
        lines.append(line)
    if not replaced:
        raise RuntimeError('no keystone pipeline with authtoken in Nova\'s api-paste.ini')
    return '\n'.join(lines) + (
        '\n\n[filter:benchauth]\n'
        'paste.filter_factory = bench.nova_api:auth_filter_factory\n'
        f'token = {token}\n')


def _nova_conf(api_url: str, cell1_url: str, workdir: pathlib.Path,
               response_validation: str) -> str:
    return f"""[DEFAULT]
transport_url = rabbit://guest:guest@127.0.0.1:5672/
service_down_time = {deploy.SERVICE_DOWN_TIME}
use_stderr = true
debug = false
# The log line per request (nova.api.openstack.requestlog) is nova-api's default.

[api]
# Nova's default is warn: every answer is checked against its response schema.
response_validation = {response_validation}

[api_database]
connection = {api_url}

[database]
connection = {cell1_url}

[wsgi]
api_paste_config = {workdir / 'api-paste.ini'}

[oslo_concurrency]
lock_path = {workdir / 'locks'}
"""


def _manage(workdir: pathlib.Path, *args: str) -> None:
    """nova-manage, as an operator runs it (``nova.cmd.manage``)."""
    command = [sys.executable, '-c', 'import sys; from nova.cmd.manage import main; '
               'sys.argv[0] = "nova-manage"; sys.exit(main())',
               '--config-file', str(workdir / 'nova.conf'), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f'nova-manage {" ".join(args)} failed ({done.returncode}): '
                           f'{done.stderr.strip()[-2000:]}')


def _api_rows(cloud: SyntheticCloud, cell_mapping_id: int) -> dict[str, list[tuple[Any, ...]]]:
    """host_mappings and the aggregates' rows of the API database."""
    document = cloud.hosts_document()
    hosts = [(h['service_host'], cell_mapping_id) for h in document['hosts']]
    aggregates, members, metadata = [], [], []
    for a in document['aggregates']:
        aggregates.append((a['id'], a['uuid'], a['name']))
        members.extend((host, a['id']) for host in a['hosts'])
        metadata.extend((key, value, a['id']) for key, value in a['metadata'].items())
    return {'hosts': hosts, 'aggregates': aggregates, 'members': members,
            'metadata': metadata}


def _seed_api(connection: Any, cloud: SyntheticCloud) -> None:
    from psycopg2.extras import execute_values

    with connection.cursor() as cursor:
        cursor.execute('SELECT id FROM cell_mappings WHERE name = %s', ('cell1',))
        (cell_id,) = cursor.fetchone()
        rows = _api_rows(cloud, cell_id)
        execute_values(cursor, 'INSERT INTO host_mappings (created_at, host, cell_id) '
                       'VALUES %s', rows['hosts'],
                       template="(timezone('UTC', now()), %s, %s)", page_size=2000)
        execute_values(cursor, 'INSERT INTO aggregates (created_at, id, uuid, name) '
                       'VALUES %s', rows['aggregates'],
                       template="(timezone('UTC', now()), %s, %s, %s)")
        if rows['aggregates']:
            cursor.execute("SELECT setval('aggregates_id_seq', (SELECT max(id) FROM aggregates))")
        execute_values(cursor, 'INSERT INTO aggregate_hosts (created_at, host, aggregate_id) '
                       'VALUES %s', rows['members'],
                       template="(timezone('UTC', now()), %s, %s)", page_size=2000)
        execute_values(cursor, 'INSERT INTO aggregate_metadata (created_at, key, value, '
                       'aggregate_id) VALUES %s', rows['metadata'],
                       template="(timezone('UTC', now()), %s, %s, %s)")
        cursor.execute('ANALYZE host_mappings')
    connection.commit()


def _wait_listening(port: int, process: subprocess.Popen[Any], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f'nova-api exited ({process.returncode}) before it listened')
        with socket.socket() as s:
            if s.connect_ex(('127.0.0.1', port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f'nova-api did not listen on {port} within {timeout:.0f} s')


class NovaApi:
    """Nova 34's compute API on a seeded database (the module's doc), with the stand-in's
    interface (:class:`bench.host_data.StandIn`): ``url``, ``stats``, ``in_flight``,
    ``services_read``, ``config``, ``stop``. The cell1 database is ``cell``'s
    (:class:`bench.host_data.CellDatabase` built with ``prepare=`` :meth:`sync_cell`),
    so that ``[cell_database]`` reads the rows nova-api serves."""

    def __init__(self, workdir: pathlib.Path, token: str, *, response_validation: str = 'warn'):
        from tests.fixtures.postgres_placement import POSTGRES_URL, _maintenance_connection

        self.workdir = workdir / 'nova-api'
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / 'locks').mkdir(exist_ok=True)
        self.token = token
        self.response_validation = response_validation
        tag = uuidlib.uuid4().hex[:10]
        self.databases = [f'bench_nova_api_{tag}', f'bench_nova_cell0_{tag}']
        self._admin = _maintenance_connection()
        with self._admin.cursor() as cursor:
            for database in self.databases:
                cursor.execute(f'CREATE DATABASE "{database}"')
        base = POSTGRES_URL.rsplit('/', 1)[0]
        self.api_url, self.cell0_url = (f'{base}/{d}' for d in self.databases)
        self.process: subprocess.Popen[Any] | None = None
        self.url = self.base = ''
        self._session: Any = None

    def sync_cell(self, cell1_url: str) -> None:
        """The schemas, as an operator deploys them, with ``cell1_url`` as cell1."""
        (self.workdir / 'nova.conf').write_text(
            _nova_conf(self.api_url, cell1_url, self.workdir, self.response_validation))
        (self.workdir / 'api-paste.ini').write_text(paste_ini(nova_paste_ini(), self.token))
        _manage(self.workdir, 'api_db', 'sync')
        _manage(self.workdir, 'cell_v2', 'map_cell0', '--database_connection', self.cell0_url)
        _manage(self.workdir, 'cell_v2', 'create_cell', '--name', 'cell1',
                '--database_connection', cell1_url, '--verbose')
        _manage(self.workdir, 'db', 'sync')

    def start(self, cloud: SyntheticCloud, *, workers: int = DEFAULT_API_WORKERS) -> NovaApi:
        """Seed the API database with ``cloud`` and start nova-api."""
        import psycopg2
        from sqlalchemy.engine import make_url

        url = make_url(self.api_url)
        connection = psycopg2.connect(host=url.host, port=url.port or 5432, user=url.username,
                                      password=url.password, dbname=url.database)
        try:
            _seed_api(connection, cloud)
        finally:
            connection.close()
        port = deploy._free_port()
        # Nova's default files, api-paste.ini then nova.conf, from this directory.
        env = {**os.environ, 'OS_NOVA_CONFIG_DIR': str(self.workdir)}
        env.pop('OS_NOVA_CONFIG_FILES', None)
        with open(self.workdir / 'nova-api.log', 'ab') as log:
            self.process = subprocess.Popen(
                [sys.executable, '-m', 'gunicorn', '--workers', str(workers),
                 '--worker-class', 'sync', '--bind', f'127.0.0.1:{port}', '--timeout', '600',
                 '--keep-alive', '75', 'bench.nova_api:application'],
                env=env, stdout=log, stderr=log)
        _wait_listening(port, self.process, 120)
        import requests

        self.base = f'http://127.0.0.1:{port}'
        self.url = f'{self.base}/v2.1'
        self._session = requests.Session()
        # Each gunicorn worker builds Nova's application at its first request: the
        # version document is the cheapest that does (an os-services read at 50,000
        # computes takes half a minute).
        try:
            for _ in range(4 * workers):
                self._session.get(f'{self.url}/', timeout=300).raise_for_status()
            self.services_read()
        except requests.HTTPError as e:
            log = (self.workdir / 'nova-api.log').read_text(errors='replace')
            raise RuntimeError(f'nova-api answered {e}; its log ends:\n{log[-4000:]}') from e
        return self

    def _headers(self) -> dict[str, str]:
        return {'X-Auth-Token': self.token, 'OpenStack-API-Version': f'compute {MICROVERSION}',
                'Accept': 'application/json'}

    def get(self, path: str, **params: Any) -> Any:
        response = self._session.get(f'{self.url}{path}', params=params or None, timeout=900,
                                     headers=self._headers())
        response.raise_for_status()
        return response

    def stats(self) -> dict[str, list[float]]:
        return read_stats(self.workdir)

    def in_flight(self) -> dict[str, int]:
        return read_in_flight(self.workdir)

    def services_read(self) -> tuple[float, int]:
        """One GET /os-services?binary=nova-compute as the sync sends it: seconds, bytes."""
        started = time.perf_counter()
        response = self.get('/os-services', binary='nova-compute')
        return time.perf_counter() - started, len(response.content)

    def config(self, label: str, **extra: Any) -> str:
        from bench.host_data import nova_config

        return nova_config(self.base, label, self.token, **extra)

    def stop(self) -> None:
        from tests.fixtures.postgres_placement import _drop_database

        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for database in self.databases:
            _drop_database(self._admin, database)
        self._admin.close()


# ---------------------------------------------------------------- side by side


def _states(body: bytes) -> dict[str, Any]:
    """What the service reads from a GET /os-services answer: state by host."""
    from scheduler.catalog import nova_api

    services, unknown, _ = nova_api.ServicesParser().parse_raw_with_keys(body)
    assert not unknown
    return services


def _timed(read: Any, samples: int = SAMPLES) -> float:
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        read()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _hypervisors(api: Any, page: int = 1000) -> dict[str, Any]:
    """The ``[nova]`` sync's paged read of every hypervisor (its default page), as the
    service reads them: by compute node uuid."""
    from scheduler.catalog import nova_api

    marker, found = None, {}
    while True:
        params = {'limit': page, **({'marker': marker} if marker else {})}
        body = api.get('/os-hypervisors/detail', **params).json()
        found.update((h.provider_uuid, h) for h in nova_api.parse_hypervisors(body))
        marker = nova_api.next_hypervisor_marker(body)
        if marker is None:
            return found


def _aggregates(api: Any) -> dict[str, Any]:
    """GET /os-aggregates as the service reads it: by uuid, hosts in one order."""
    import dataclasses

    from scheduler.catalog import nova_api

    return {a.uuid: dataclasses.replace(a, hosts=sorted(a.hosts))
            for a in nova_api.parse_aggregates(api.get('/os-aggregates').json())}


def _server_ms(stats: dict[str, list[float]], before: dict[str, list[float]], path: str) -> float:
    count = stats.get(path, [0, 0.0])[0] - before.get(path, [0, 0.0])[0]
    seconds = stats.get(path, [0, 0.0])[1] - before.get(path, [0, 0.0])[1]
    return seconds / count * 1000 if count else float('nan')


def compare(providers: int, *, hypervisors: bool = True, samples: int = SAMPLES,
            response_validation: str = 'warn') -> Iterator[Any]:
    """One size's rows (the module's doc)."""
    from bench.host_data import SERVICES_PATH, CellDatabase, StandIn
    from bench.report import Row
    from bench.synthetic import make_cloud
    from tests.fixtures.fake_nova import TOKEN

    cloud = make_cloud(providers)
    n = len(cloud.hosts)
    with tempfile.TemporaryDirectory(prefix='bench-nova-api-') as tmp:
        workdir = pathlib.Path(tmp)
        started = time.monotonic()
        nova = NovaApi(workdir, TOKEN, response_validation=response_validation)
        stand_in = cell = None
        try:
            cell = CellDatabase(cloud, prepare=nova.sync_cell, service_version=service_version())
            nova.start(cloud)
            yield Row('nova-api: databases synced, seeded, started (setup)', n,
                      time.monotonic() - started, unit='s',
                      note=f'Nova 34, 2 gunicorn sync workers, [api] response_validation = '
                           f'{response_validation}')
            stand_in = StandIn(cloud, workdir)
            stand_in.get('/os-services', binary='nova-compute')  # serialised at the first
            for name, api in (('stand-in', stand_in), ('nova-api', nova)):
                stats = api.stats
                before = stats()
                client = _timed(lambda api=api: api.get('/os-services', binary='nova-compute'),
                                samples)
                size = len(api.get('/os-services', binary='nova-compute').content)
                yield Row(f'GET /os-services?binary=nova-compute alone: {name}', n,
                          client * 1000, note=f'client side, median of {samples}; server '
                          f'side {_server_ms(stats(), before, SERVICES_PATH):.1f} ms mean; '
                          f'{size / 1e6:.2f} MB')
            node = cloud.hosts[len(cloud.hosts) // 2].root.uuid
            for name, api in (('stand-in', stand_in), ('nova-api', nova)):
                yield Row(f'GET /os-hypervisors/{{uuid}}, one node: {name}', n,
                          _timed(lambda api=api: api.get(f'/os-hypervisors/{node}'),
                                 samples) * 1000,
                          note=f'client side, median of {samples}; the node and its service, '
                               f'as a look-up of one node reads them')
            theirs = _states(nova.get('/os-services', binary='nova-compute').content)
            mine = _states(stand_in.get('/os-services', binary='nova-compute').content)
            differ = sorted(h for h in set(theirs) | set(mine) if theirs.get(h) != mine.get(h))
            yield Row('the service reads the same states from both answers', n,
                      float(len(differ)), unit='hosts differ', passed=not differ,
                      note=f'{len(theirs)} hosts from nova-api, {len(mine)} from the '
                           f'stand-in (scheduler.catalog.nova_api.ServicesParser)'
                           + ''.join(f'; {h}: nova-api {theirs.get(h)}, stand-in {mine.get(h)}'
                                     for h in differ[:3]))
            read: dict[str, dict[str, dict[str, Any]]] = {}
            for name, api in (('stand-in', stand_in), ('nova-api', nova)):
                yield Row(f'GET /os-aggregates: {name}', n,
                          _timed(lambda api=api: api.get('/os-aggregates'), 3) * 1000,
                          note='client side, median of 3')
                read[name] = {'aggregates': _aggregates(api)}
                if hypervisors:
                    started_at = time.perf_counter()
                    read[name]['hypervisors'] = _hypervisors(api)
                    yield Row(f'GET /os-hypervisors/detail, every page of 1,000: {name}', n,
                              time.perf_counter() - started_at, unit='s',
                              note=f'{len(read[name]["hypervisors"])} hypervisors, as the '
                                   f'[nova] sync pages them')
            for what in read['nova-api']:
                theirs, mine = read['nova-api'][what], read['stand-in'][what]
                differ = sorted(k for k in set(theirs) | set(mine)
                                if theirs.get(k) != mine.get(k))
                yield Row(f'the service reads the same {what} from both answers', n,
                          float(len(differ)), unit='differ', passed=not differ,
                          note=f'{len(theirs)} from nova-api, {len(mine)} from the stand-in'
                               + ''.join(f'; {k}: nova-api {theirs.get(k)}, stand-in '
                                         f'{mine.get(k)}' for k in differ[:2]))
        finally:
            if stand_in is not None:
                stand_in.stop()
            nova.stop()
            if cell is not None:
                cell.drop()


def main(argv: list[str] | None = None) -> int:
    from bench.cli import finish
    from bench.report import render

    parser = argparse.ArgumentParser(prog='python -m bench.nova_api', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--providers', default='1000', help='numbers of computes, comma-separated')
    parser.add_argument('--no-hypervisors', action='store_true',
                        help='leave the paged GET /os-hypervisors/detail out')
    parser.add_argument('--response-validation', choices=('warn', 'ignore', 'error'),
                        default='warn', help="nova-api's [api] response_validation "
                        "(Nova's default: warn)")
    parser.add_argument('--samples', type=int, default=SAMPLES,
                        help='timed reads of each kind (the median is reported)')
    parser.add_argument('--json', metavar='PATH', help='also write the rows as JSON')
    args = parser.parse_args(argv)
    rows = []
    for n in (int(p) for p in args.providers.split(',') if p.strip()):
        for row in compare(n, hypervisors=not args.no_hypervisors, samples=args.samples,
                           response_validation=args.response_validation):
            rows.append(row)
            print(render([row]).splitlines()[-1], file=sys.stderr, flush=True)
    return finish(rows, args.json)


if __name__ == '__main__':
    sys.exit(main())
