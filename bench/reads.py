"""What one worker's reads of its provider view cost, by the size of the cloud.

``python -m bench.reads --providers N[,N...]`` (also ``tox -e bench -- --reads
N[,N...]``): per size, one Placement on PostgreSQL seeded with the synthetic cloud
(bench.seed_sql), and the view's reader (:class:`PlacementDatabaseReader`) in this
process. Between two reads the benchmark writes what a busy region writes in
``interval`` seconds: ``claims`` new instances' allocations (``PUT /allocations``
on random hosts) and, in the rows "with deletions", ``deletes`` earlier
instances' allocations removed (``DELETE /allocations/{consumer}``, which moves
no provider's generation: Nova deletes instances that way). Then one read of
what changed, timed on the reading thread's own CPU clock (what a worker spends,
whatever the database and Placement spend) and on the wall clock.

Side by side in the same run, on the same database: one whole read (what a
worker would pay every ``max_age`` without reads of changes), and reads of
changes with each of the reader's settings given to ``--compare`` (none by
default).

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
from dataclasses import dataclass

import requests

from bench import deploy
from bench.report import Row, render, write_json
from scheduler.catalog.placement_db import PlacementDatabaseReader
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
    """Per read: the reading thread's CPU seconds, and wall seconds."""

    cpu: list[float]
    wall: list[float]

    def row(self, name: str, providers: int, note: str = '') -> Row:
        return Row(name, providers, _ms(statistics.median(self.cpu)), unit='ms CPU',
                   note=(f'p90 {_ms(_p90(self.cpu)):.1f} ms CPU; wall median '
                         f'{_ms(statistics.median(self.wall)):.1f} ms, p90 '
                         f'{_ms(_p90(self.wall)):.1f} ms; {len(self.cpu)} reads'
                         + (f'; {note}' if note else '')))


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _p90(values: list[float]) -> float:
    return deploy.percentile(values, 90)


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


def reads_of_changes(reader: PlacementDatabaseReader, snapshot: ProviderSnapshot,
                     writer: Writer, *, reads: int, claims: int, deletes: int
                     ) -> tuple[Reads, ProviderSnapshot]:
    out = Reads([], [])
    for _ in range(reads):
        writer.claim(claims)
        writer.delete(deletes)
        snapshot, cpu, wall = timed(lambda s=snapshot: reader.read(s))
        out.cpu.append(cpu)
        out.wall.append(wall)
    return out, snapshot


def run(providers: int, opts: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    with deploy.seeded_deployment(providers, direct=True) as dep:
        url = POSTGRES_URL.rsplit('/', 1)[0] + f'/{dep.placement.database}'
        reader = PlacementDatabaseReader(url)
        snapshot, _, _ = timed(reader.read)         # the first read: imports, caches
        whole = Reads([], [])
        for _ in range(3):
            snapshot, cpu, wall = timed(lambda s=snapshot: reader.read(s, whole=True))
            whole.cpu.append(cpu)
            whole.wall.append(wall)
        rows.append(whole.row('a whole read', providers))
        writer = Writer(dep, opts.seed)
        try:
            for deletes in (0, opts.deletes):
                before = (reader.whole_reads, reader.generation_scans, reader.usage_checks)
                changes, snapshot = reads_of_changes(reader, snapshot, writer,
                                                     reads=opts.reads, claims=opts.claims,
                                                     deletes=deletes)
                writes = f'{opts.claims} claims' + (f' + {deletes} deletions' if deletes else '')
                rows.append(changes.row(
                    f'a read of changes, {writes}', providers,
                    note=f'whole reads among them {reader.whole_reads - before[0]}, '
                         f'generation scans {reader.generation_scans - before[1]}, '
                         f'usage checksums {reader.usage_checks - before[2]}'))
        finally:
            writer.clean_up()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m bench.reads', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--providers', default=','.join(map(str, DEFAULT_PROVIDERS)))
    parser.add_argument('--reads', type=int, default=DEFAULT_READS)
    parser.add_argument('--claims', type=int, default=DEFAULT_CLAIMS)
    parser.add_argument('--deletes', type=int, default=DEFAULT_DELETES)
    parser.add_argument('--seed', type=int, default=20261127)
    parser.add_argument('--json', help='also write the rows here')
    opts = parser.parse_args(argv)
    rows: list[Row] = []
    for providers in (int(p) for p in opts.providers.split(',')):
        rows.extend(run(providers, opts))
        print(f'{providers:,} providers done', flush=True)
    print(render(rows))
    for row in rows:
        print(f'{row.name}, {row.n:,} providers: {row.note}')
    if opts.json:
        write_json(rows, opts.json)
    return 0


if __name__ == '__main__':
    sys.exit(main())
