"""Large reads come a chunk at a time from each real driver.

At 50,000 providers the drivers' own copy of a whole result (psycopg2 and PyMySQL
receive all of it when the query is sent) was most of a worker's peak, so the
readers of Placement's and the cells' databases (scheduler/catalog/placement_db.py,
cell_db.py) ask for a server-side cursor (``DirectConnection.chunks``). These
tests read a table of the REAL MariaDB and PostgreSQL of this machine through a
read-only connection of the driver's own, as the reader does.
"""
from __future__ import annotations

import warnings

import pytest

from scheduler.catalog import placement_db
from scheduler.catalog.dbapi import DirectDatabase
from scheduler.provider_view.view import ProviderViewError

ROWS = 10
_INSERT = ('INSERT INTO compute_nodes (host, uuid, vcpus, memory_mb, local_gb, vcpus_used, '
           'memory_mb_used, local_gb_used, hypervisor_type, hypervisor_version, cpu_info) '
           "VALUES (%s, %s, %s, 1024, 10, 0, 0, 0, 'QEMU', 1, '{}')")


def _filled(cell) -> DirectDatabase:
    """``cell`` with ROWS compute nodes (vcpus 0..ROWS-1), opened as the reader does."""
    connection = cell.connect()     # autocommit
    try:
        cursor = connection.cursor()
        for i in range(ROWS):
            cursor.execute(_INSERT, (f'host{i}', f'00000000-0000-0000-0000-{i:012d}', i))
    finally:
        connection.close()
    return DirectDatabase(cell.reader_url, option='[test] connection', error=ProviderViewError)


@pytest.fixture(params=['mariadb_cell', 'postgres_cell'])
def reader(request):
    reader = _filled(request.getfixturevalue(request.param))
    yield reader
    reader.close()


def test_a_large_result_arrives_in_chunks_with_every_row_once(reader, monkeypatch):
    monkeypatch.setattr(placement_db, 'FETCH_CHUNK', 3)

    with reader.connect() as connection:
        chunks = list(connection.chunks('SELECT vcpus FROM compute_nodes', 3))
        columns = placement_db._fetch_columns(connection, 'SELECT id, vcpus FROM compute_nodes',
                                              2)

    assert [len(c) for c in chunks] == [3, 3, 3, 1]
    assert sorted(r[0] for c in chunks for r in c) == list(range(ROWS))
    assert sorted(columns[:, 1].tolist()) == list(range(ROWS))


def test_on_postgresql_the_rows_stay_on_the_server_until_they_are_fetched(postgres_cell):
    reader = _filled(postgres_cell)
    with reader.connect() as connection:
        chunks = connection.chunks('SELECT vcpus FROM compute_nodes WHERE vcpus >= :least', 3,
                                   {'least': 0})
        next(chunks)
        open_cursors = connection.rows('SELECT name, is_holdable FROM pg_cursors')
        rest = list(chunks)

    reader.close()
    assert [name for name, _ in open_cursors if name.startswith('scheduler_read_')]
    assert sum(len(c) for c in rest) == ROWS - 3


def test_a_large_read_given_up_and_closed_after_its_transaction_leaves_the_next_one_whole(
        reader):
    """A read that fails halfway can leave its chunks' generator alive past the end of its
    transaction (its traceback holds it). On MySQL the reader reads the rest of its result
    before the ROLLBACK, the protocol's only way to end it, rather than leave that to the
    driver (PyMySQL warns; mysqlclient's C library refuses the ROLLBACK). Closed later, the
    generator must not touch the connection, which by then may be in the next read's
    transaction."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with reader.connect() as connection:
            chunks = connection.chunks('SELECT vcpus FROM compute_nodes ORDER BY vcpus', 3)
            assert next(chunks) == [(0,), (1,), (2,)]
        with reader.connect() as connection:
            chunks.close()                  # the late close, within the next transaction
            assert connection.rows('SELECT COUNT(*) FROM compute_nodes') == [(ROWS,)]
        with reader.connect() as connection:
            assert connection.one('SELECT MAX(vcpus) FROM compute_nodes') == (ROWS - 1,)

    assert [str(w.message) for w in caught] == []
