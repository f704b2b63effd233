"""What one worker's reads of its provider view cost, by the size of the cloud.

``python -m bench.reads --providers N[,N...]`` (also ``tox -e bench -- --reads
N[,N...]``): per size, one Placement on PostgreSQL seeded with the synthetic cloud
(bench.seed_sql), and the view's reader (:class:`PlacementDatabaseReader`) in this
process. Between two reads the benchmark writes what a busy region writes in
``interval`` seconds: ``claims`` new instances' allocations (``PUT /allocations``
on random hosts) and, in the rows "+ N deletions", ``deletes`` earlier
instances' allocations removed (``DELETE /allocations/{consumer}``, which moves
no provider's generation: Nova deletes instances that way). Then one read of
what changed, timed on the reading thread's own CPU clock (what a worker spends,
whatever the database and Placement spend), on the wall clock, and on the
database's: the CPU of the PostgreSQL backend serving the reader (its parallel
workers turned off for the reader's session, so that one process does all of a
statement's work; ``/proc`` counts in hundredths of a second, hence the means).

Side by side in the same run, on the same database: one whole read (what a
worker would pay every ``max_age`` without reads of changes), and the baseline,
the same reader looking at everything at every read (``deletions_every=0``: the
providers' marks and generations, the consumers' marks) as every read of
changes did before ``DELETIONS_EVERY``, after the same writes; the reader as
shipped does so every ``DELETIONS_EVERY`` seconds, and in between takes the
providers of the allocation rows written since.

The target (the issue): a read of changes costs a worker the same CPU at 1,000
and at 50,000 providers for the same writes.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests

from bench import deploy
from bench.cli import notes
from bench.cpu import process_seconds
from bench.report import Row, render, write_json
from scheduler.catalog.placement_db import PlacementDatabaseReader, reader_from_conf
from scheduler.provider_view.snapshot import ProviderSnapshot
from tests.fixtures.postgres_placement import POSTGRES_URL

DEFAULT_PROVIDERS = (1000, 10000, 50000)
DEFAULT_READS = 30
#: What the benchmark's provider-view window writes in a quarter of a second
#: (``provider_view_max_age``) at 50 instances a second, and a quarter of that
#: deleted: a region whose instances come and go.
DEFAULT_CLAIMS = 12
DEFAULT_DELETES = 3
SMALL = {'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}


@dataclass
class Reads:
    """Per read: the reading thread's CPU seconds, and wall seconds; the database
    backend's CPU seconds over all of them."""

    cpu: list[float]
    wall: list[float]
    database_cpu: float = 0.0
    #: When each read began (monotonic seconds).
    began: list[float] = field(default_factory=list)

    def span(self) -> float:
        """Seconds from the first read's start to the last's: the writes between two
        reads take longer than max_age on a loaded machine, and how many reads look
        at everything depends on it (DELETIONS_EVERY)."""
        return self.began[-1] - self.began[0] if self.began else 0.0

    def row(self, name: str, providers: int, note: str = '') -> Row:
        return Row(name, providers, _ms(statistics.median(self.cpu)), unit='ms CPU',
                   note=(f'p90 {_ms(_p90(self.cpu)):.1f} ms CPU; database CPU mean '
                         f'{_ms(self.database_cpu / len(self.cpu)):.1f} ms; wall median '
                         f'{_ms(statistics.median(self.wall)):.1f} ms, p90 '
                         f'{_ms(_p90(self.wall)):.1f} ms; {len(self.cpu)} reads'
                         + (f'; {note}' if note else '')))


class Backend:
    """The CPU time of the PostgreSQL process serving ``reader``'s kept connection."""

    def __init__(self, reader: PlacementDatabaseReader):
        with reader.connect() as connection:
            self.pid = connection.raw.get_backend_pid()
            with connection.raw.cursor() as cursor:
                cursor.execute('SET SESSION max_parallel_workers_per_gather = 0')
            connection.raw.commit()

    def cpu(self) -> float:
        return process_seconds(self.pid)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _p90(values: list[float]) -> float:
    return deploy.percentile(values, 90)


def _reader(url: str, **kwargs: Any) -> PlacementDatabaseReader:
    """The reader a worker of the service makes, at the options' defaults (and
    ``kwargs``)."""
    from oslo_config import cfg

    from scheduler.conf import register_opts

    conf = cfg.ConfigOpts()
    register_opts(conf)
    conf([], project='placement-scheduler', default_config_files=[], default_config_dirs=[])
    conf.set_override('connection', url, group='placement_database')
    return reader_from_conf(conf, **kwargs)


def _max_age() -> float:
    from scheduler.conf.scheduler import nova_opts

    return next(o.default for o in nova_opts if o.name == 'provider_view_max_age')


def timed(read: Callable[[], ProviderSnapshot]) -> tuple[ProviderSnapshot, float, float]:
    cpu, wall = time.thread_time(), time.perf_counter()
    snapshot = read()
    return snapshot, time.thread_time() - cpu, time.perf_counter() - wall


class Writer:
    """Claims and deletions as a busy region makes them, straight to Placement."""

    def __init__(self, dep: deploy.Deployment, seed: int):
        self.url = dep.url
        self.roots = [h.root.uuid for h in dep.cloud.hosts]
        self.rng = random.Random(seed)
        self.session = requests.Session()
        self.session.headers.update({**deploy.HEADERS,
                                     'OpenStack-API-Version': 'placement 1.36'})
        self.consumers: list[str] = []

    def claim(self, count: int) -> None:
        for _ in range(count):
            consumer = str(uuidlib.uuid4())
            for root in self.rng.sample(self.roots, 3):
                put = self.session.put(f'{self.url}/allocations/{consumer}', json={
                    'allocations': {root: {'resources': SMALL}},
                    'project_id': deploy.PROJECT_ID, 'user_id': deploy.USER_ID,
                    'consumer_generation': None})
                if put.status_code == 204:
                    self.consumers.append(consumer)
                    break
                if put.status_code != 409:
                    raise RuntimeError(f'PUT /allocations answered {put.status_code}')

    def delete(self, count: int) -> None:
        for _ in range(min(count, len(self.consumers))):
            consumer = self.consumers.pop(self.rng.randrange(len(self.consumers)))
            gone = self.session.delete(f'{self.url}/allocations/{consumer}')
            if gone.status_code not in (204, 404):
                raise RuntimeError(f'DELETE /allocations answered {gone.status_code}')

    def clean_up(self) -> None:
        self.delete(len(self.consumers))


def reads_of_changes(reader: PlacementDatabaseReader, backend: Backend,
                     snapshot: ProviderSnapshot, writer: Writer, *, reads: int, claims: int,
                     deletes: int, interval: float) -> tuple[Reads, ProviderSnapshot]:
    out = Reads([], [])
    for _ in range(reads):
        started = time.monotonic()
        writer.claim(claims)
        writer.delete(deletes)
        # A busy worker's reads come about every max_age seconds: the reader looks
        # at everything only every DELETIONS_EVERY seconds of them.
        time.sleep(max(0.0, interval - (time.monotonic() - started)))
        database = backend.cpu()
        out.began.append(time.monotonic())
        snapshot, cpu, wall = timed(lambda s=snapshot: reader.read(s))
        out.database_cpu += backend.cpu() - database
        out.cpu.append(cpu)
        out.wall.append(wall)
    return out, snapshot


def run(providers: int, opts: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    with deploy.seeded_deployment(providers, direct=True) as dep:
        url = POSTGRES_URL.rsplit('/', 1)[0] + f'/{dep.placement.database}'
        # The baseline: the same reader looking at everything at every read, as
        # every read of changes did before DELETIONS_EVERY.
        readers = {'': _reader(url), ', everything looked at by every read (baseline)':
                   _reader(url, deletions_every=0)}
        backends = {label: Backend(reader) for label, reader in readers.items()}
        snapshots = {label: reader.read() for label, reader in readers.items()}
        reader, backend = readers[''], backends['']
        whole = Reads([], [])
        for _ in range(3):
            database = backend.cpu()
            snapshots[''], cpu, wall = timed(
                lambda s=snapshots['']: reader.read(s, whole=True))
            whole.database_cpu += backend.cpu() - database
            whole.cpu.append(cpu)
            whole.wall.append(wall)
        rows.append(whole.row('a whole read', providers))
        writer = Writer(dep, opts.seed)
        try:
            for deletes in (0, opts.deletes):
                for label, reader in readers.items():
                    before = (reader.whole_reads, reader.generation_scans, reader.usage_checks)
                    changes, snapshots[label] = reads_of_changes(
                        reader, backends[label], snapshots[label], writer, reads=opts.reads,
                        claims=opts.claims, deletes=deletes, interval=opts.interval)
                    writes = (f'{opts.claims} claims'
                              + (f' + {deletes} deletions' if deletes else ''))
                    rows.append(changes.row(
                        f'a read of changes, {writes}{label}', providers,
                        note=f'whole reads among them {reader.whole_reads - before[0]}, '
                             f'generation scans {reader.generation_scans - before[1]}, '
                             f'usage checksums {reader.usage_checks - before[2]}, '
                             f'the reads spanning {changes.span():.2f} s'))
        finally:
            writer.clean_up()
            for reader in readers.values():
                reader.close()
    return rows


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='python -m bench.reads', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--providers', default=','.join(map(str, DEFAULT_PROVIDERS)))
    parser.add_argument('--reads', type=int, default=DEFAULT_READS)
    parser.add_argument('--claims', type=int, default=DEFAULT_CLAIMS)
    parser.add_argument('--deletes', type=int, default=DEFAULT_DELETES)
    parser.add_argument('--interval', type=float, default=_max_age(),
                        help='seconds from one read to the next (default: '
                             'provider_view_max_age, as a busy worker reads)')
    parser.add_argument('--seed', type=int, default=20261127)
    parser.add_argument('--json', help='also write the rows here')
    return parser


def run_all(sizes: list[int], opts: argparse.Namespace | None = None) -> list[Row]:
    """Every size's rows, with the command's defaults unless ``opts``."""
    opts = opts or _parser().parse_args([])
    rows: list[Row] = []
    for providers in sizes:
        rows.extend(run(providers, opts))
        print(f'reads: {providers:,} providers done', file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    opts = _parser().parse_args(argv)
    rows = run_all([int(p) for p in opts.providers.split(',')], opts)
    print(render(rows))
    print(notes(rows))
    if opts.json:
        write_json(rows, opts.json)
    return 0


if __name__ == '__main__':
    sys.exit(main())
