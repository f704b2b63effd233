"""What the read of the held services before a request costs, with and without the
hosts no answer can be on, side by side in one run.

``python -m bench.held_reads [--providers N] [--reads R] [--rounds K]``: bench.host_data's
cell database of the synthetic cloud of ``N`` computes (bench.view's, 50,000 by
default) on the machine's PostgreSQL, its heartbeats written as nova-compute writes
them, and a NovaSync reading it through the service's own CellServicesReader, with
``[nova] service_state_max_age`` 0 and no read of every row in between (what a request
reads between two scans, scheduler/catalog/nova_sync.py). Then, in ``K`` rounds, ``R``
requests' reads each way, one after the other:

* ``every held service``: the rows of every service held as disabled, forced down or
  silent, read again by id (the read before every request until 74c2eed);
* ``the disabled left out``: the same read leaving out the disabled computes, whose
  roots carry COMPUTE_STATUS_DISABLED in bench.view's Placement, which every request
  forbids on roots (scheduler/provider_view/reach.py): what the read of a request
  answered through the provider view costs now;
* ``the disabled left out, in a transaction``: that read as it was sent until the
  reads before a request became statements on their own (``DirectDatabase.each_on_its_own``):
  in a repeatable-read transaction, the kept connection checked first, four round trips
  (``BEGIN``, ``SELECT 1``, the statement, ``ROLLBACK``) where it is now one; through a
  reader of its own, which sends the check itself (a transaction begins with its check
  now, three round trips).

Per way: PostgreSQL's CPU a read (the backend serving the reader, from ``/proc``; its
ticks are hundredths of a second, hence many reads), and the wall time a read takes
in this process (the worker's part: building and sending the statement, parsing the
rows). Linux only.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from bench import deploy
from bench.cpu import process_seconds
from bench.report import Row, render
from bench.synthetic import CELL_UUID, SyntheticCloud, make_cloud

DEFAULT_PROVIDERS = 50000
DEFAULT_READS = 400
DEFAULT_ROUNDS = 3


def left_out(cloud: SyntheticCloud) -> frozenset[str]:
    """The service hosts of the cloud's disabled computes (bench.deploy puts
    COMPUTE_STATUS_DISABLED on their roots)."""
    return frozenset(host.name for host in cloud.hosts if host.disabled)


def _backend_cpu(pids: list[int]) -> float:
    return sum(process_seconds(pid) for pid in pids)


def _reader_backends(cell: Any) -> list[int]:
    """The PostgreSQL backends of the cell database but the heartbeats' and this one."""
    connection = cell.connect()
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
                "AND query NOT LIKE 'UPDATE%%'")
            return [row[0] for row in cursor.fetchall()]
    finally:
        connection.close()


def run(opts: argparse.Namespace) -> list[Row]:
    from bench.host_data import CellDatabase
    from scheduler.catalog import HostCatalog
    from scheduler.catalog.cell_db import CellDatabaseReader
    from scheduler.catalog.cell_services import CellServicesReader
    from scheduler.catalog.nova_sync import NovaSync

    cloud = make_cloud(opts.providers, nested=True)
    skip = left_out(cloud)
    cell = CellDatabase(cloud)
    try:
        clock = [0.0]

        def synced(reader: CellDatabaseReader) -> NovaSync:
            services = CellServicesReader([reader], down_time=deploy.SERVICE_DOWN_TIME)
            sync = NovaSync(HostCatalog(default_cell_uuid=CELL_UUID), _NoApi(),  # type: ignore[arg-type]
                            interval=3600, service_state_max_age=0.0, services=services,
                            scan_every=1e9, clock=lambda: clock[0])
            sync.fresh_service_states()     # the scan: every row, once
            return sync

        sync = synced(CellDatabaseReader(cell.url, keep_connection=True))
        in_transactions = synced(_reader_in_transactions(cell.url, keep_connection=True))
        held = set(sync.held_hosts())
        pids = _reader_backends(cell)
        ways = {'every held service': (sync, frozenset()),
                'the disabled left out': (sync, skip),
                'the disabled left out, in a transaction': (in_transactions, skip)}
        cpu: dict[str, list[float]] = {way: [] for way in ways}
        wall: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(opts.rounds):
            for way, (reading, leaving) in ways.items():
                for _ in range(20):         # the first read of a new set is by host
                    clock[0] += 1.0
                    reading.fresh_service_states(leaving)
                before, started = _backend_cpu(pids), time.perf_counter()
                for _ in range(opts.reads):
                    clock[0] += 1.0
                    reading.fresh_service_states(leaving)
                wall[way].append((time.perf_counter() - started) / opts.reads)
                cpu[way].append((_backend_cpu(pids) - before) / opts.reads)
    finally:
        cell.drop()
    n = opts.providers
    base = statistics.median(cpu['every held service'])
    rows = []
    for way, (_, leaving) in ways.items():
        read = len(held - leaving)
        rows.append(Row(f'held services: {way}: PostgreSQL a read', n,
                        statistics.median(cpu[way]) * 1000, unit='ms CPU',
                        ratio=statistics.median(cpu[way]) / base if base else None,
                        note=f'{read} of {len(held)} held services read; rounds '
                             + ', '.join(f'{c * 1000:.2f}' for c in cpu[way])))
        rows.append(Row(f'held services: {way}: wall time a read', n,
                        statistics.median(wall[way]) * 1000,
                        note='rounds ' + ', '.join(f'{w * 1000:.2f}' for w in wall[way])))
    return rows


def _reader_in_transactions(url: str, *, keep_connection: bool) -> Any:
    """A cell's reader that sends the reads before a request as they were sent until
    they became statements on their own: one repeatable-read transaction each."""
    from scheduler.catalog.cell_db import CellDatabaseReader

    class InTransactions(CellDatabaseReader):
        def each_on_its_own(self, query: str, parameter_sets: Any) -> list[tuple]:
            with self.connect() as connection:
                connection.rows('SELECT 1')
                return [row for parameters in parameter_sets
                        for row in connection.rows(query, parameters)]

    return InTransactions(url, keep_connection=keep_connection)


class _NoApi:
    def read_services(self) -> Any:
        raise AssertionError('the compute API was read')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--providers', type=int, default=DEFAULT_PROVIDERS)
    parser.add_argument('--reads', type=int, default=DEFAULT_READS)
    parser.add_argument('--rounds', type=int, default=DEFAULT_ROUNDS)
    rows = run(parser.parse_args(argv))
    print(render(rows))
    for row in rows:
        print(f'- {row.name}: {row.note}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
