"""What the read of the held services before a request costs, with and without the
hosts no answer can be on, side by side in one run.

``python -m bench.held_reads [--providers N] [--reads R] [--rounds K] [--cell mariadb]``:
bench.host_data's cell database of the synthetic cloud of ``N`` computes (bench.view's,
50,000 by default) on the machine's PostgreSQL (with ``--cell mariadb``, its
``services`` table on the machine's MariaDB, :class:`MariaDBServices`), its heartbeats
written as nova-compute writes them, and a NovaSync reading it through the service's
own CellServicesReader, with
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
  on PostgreSQL (``BEGIN``, ``SELECT 1``, the statement, ``ROLLBACK``) and three on
  MariaDB (``SELECT 1``, which began the transaction, the statement, ``ROLLBACK``)
  where it is now one; through a reader of its own, which sends PostgreSQL's check
  itself (a transaction begins with its check now, on either server, three round trips).

Per way: the server's CPU a read (the PostgreSQL backend, or the MariaDB connection
thread, serving the reader, from ``/proc``; its ticks are hundredths of a second, hence
many reads), and the wall time a read takes in this process (the worker's part:
building and sending the statement, parsing the rows). Linux only.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Sequence
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


def _backend_cpu(pids: Sequence[int | str]) -> float:
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


class MariaDBServices:
    """Nova's ``services`` table of the cloud's computes, in a database of the machine's
    MariaDB (the reads timed here read nothing else), its heartbeats written as
    bench.host_data.CellDatabase writes them; dropped by :meth:`drop`."""

    def __init__(self, cloud: SyntheticCloud):
        from bench.host_data import _service_rows
        from tests.fixtures.cell_databases import _MYSQL_SERVICES, MYSQL_URL

        self._server = MYSQL_URL.rsplit('/', 1)[0]
        self.database = f'bench_cell_{uuid.uuid4().hex[:10]}'
        self.url = f'{self._server}/{self.database}'
        admin = self._connect(None)
        with admin.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE {self.database}')
        admin.close()
        connection = self.connect()
        try:
            with connection.cursor() as cursor:
                cursor.execute(_MYSQL_SERVICES)
                rows = _service_rows(cloud)
                for start in range(0, len(rows), 2000):
                    cursor.executemany(
                        'INSERT INTO services (id, created_at, updated_at, host, `binary`, '
                        'topic, report_count, disabled, disabled_reason, forced_down, '
                        'last_seen_up, uuid, version, deleted) VALUES (%s, UTC_TIMESTAMP() - '
                        "INTERVAL 1 DAY, %s, %s, 'nova-compute', 'compute', %s, %s, %s, %s, "
                        '%s, %s, 66, 0)', rows[start:start + 2000])
                cursor.execute('ANALYZE TABLE services')
        except BaseException:
            connection.close()
            self.drop()
            raise
        connection.close()
        self._stop = threading.Event()
        self._heartbeats = threading.Thread(target=self._report, name='cell-heartbeats',
                                            daemon=True)
        self._heartbeats.start()

    def _connect(self, database: str | None) -> Any:
        import pymysql
        from sqlalchemy.engine import make_url

        url = make_url(self._server + '/')
        return pymysql.connect(host=url.host, port=url.port or 3306, user=url.username,
                               password=url.password or '', database=database,
                               autocommit=True)

    def connect(self) -> Any:
        return self._connect(self.database)

    def _report(self) -> None:
        """A tenth of the computes that report write their heartbeat each second."""
        from bench.host_data import every_second

        def write(cursor: Any, tick: int) -> None:
            cursor.execute(
                'UPDATE services SET last_seen_up = UTC_TIMESTAMP(), updated_at = '
                'UTC_TIMESTAMP(), report_count = report_count + 1 '
                'WHERE id %% 10 = %s AND report_count > 0', (tick % 10,))
        every_second(self.connect(), self._stop, write)

    def reader_threads(self) -> list[str]:
        """The server threads of this database's connections but the heartbeats' and
        this one (``/proc`` paths of MariaDB's one thread per connection)."""
        connection = self.connect()
        try:
            with connection.cursor() as cursor:
                cursor.execute('SELECT @@pid_file, @@datadir')
                pid_file, datadir = cursor.fetchone()
                pid = pathlib.Path(datadir, pid_file).read_text().strip()   # if relative
                cursor.execute(
                    'SELECT tid FROM information_schema.processlist WHERE db = %s AND '
                    "id <> CONNECTION_ID() AND COALESCE(info, '') NOT LIKE 'UPDATE%%'",
                    (self.database,))
                return [f'{pid}/task/{row[0]}' for row in cursor.fetchall()]
        finally:
            connection.close()

    def drop(self) -> None:
        if hasattr(self, '_stop'):
            self._stop.set()
            self._heartbeats.join(10)
        admin = self._connect(None)
        with admin.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS {self.database}')
        admin.close()


def run(opts: argparse.Namespace) -> list[Row]:
    from bench.host_data import CellDatabase
    from scheduler.catalog import HostCatalog
    from scheduler.catalog.cell_db import CellDatabaseReader
    from scheduler.catalog.cell_services import CellServicesReader
    from scheduler.catalog.nova_sync import NovaSync

    cloud = make_cloud(opts.providers, nested=True)
    skip = left_out(cloud)
    mariadb = opts.cell == 'mariadb'
    cell = MariaDBServices(cloud) if mariadb else CellDatabase(cloud)
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
        pids = cell.reader_threads() if mariadb else _reader_backends(cell)
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
    server = 'MariaDB' if mariadb else 'PostgreSQL'
    for way, (_, leaving) in ways.items():
        read = len(held - leaving)
        rows.append(Row(f'held services: {way}: {server} a read', n,
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
    they became statements on their own: one repeatable-read transaction each, the
    kept connection checked first. On PostgreSQL the check was a ``SELECT 1`` after the
    ``BEGIN``; on MariaDB the ``SELECT 1`` began the transaction, where a transaction's
    begin, sent by hand, now is the check: as many round trips."""
    from scheduler.catalog.cell_db import CellDatabaseReader

    class InTransactions(CellDatabaseReader):
        def each_on_its_own(self, query: str, parameter_sets: Any) -> list[tuple]:
            with self.connect() as connection:
                if connection.backend == 'postgresql':
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
    parser.add_argument('--cell', choices=('postgresql', 'mariadb'), default='postgresql',
                        help="the server of the cell database's services table")
    rows = run(parser.parse_args(argv))
    print(render(rows))
    for row in rows:
        print(f'- {row.name}: {row.note}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
