"""When a worker takes the service reader's reads, and when it reads on its own.

The reader here is a thread serving the real protocol (a private directory, a
datagram socket, a lock held for its life) and publishing reads of a database
described in memory; the worker's own read counts its calls.
"""
from __future__ import annotations

import os
import random
import threading
import time

import pytest

from scheduler.catalog.shared_provider_reads import KEEP, SharedProviderReads, TakenReads
from tests.unit.test_provider_changes import random_database, read_of, state_of, whole_read, written


class OwnReads:
    def __init__(self, database: dict):
        self.database = database
        self.count = 0

    def __call__(self, previous):
        self.count += 1
        return whole_read(self.database)


@pytest.fixture
def shared():
    shared = SharedProviderReads.create()
    yield shared
    shared.remove()


def publishing(shared: SharedProviderReads, database: dict, ids: list[int]):
    """A reader's read: it publishes a read of ``ids`` of ``database`` as it is then."""
    def read() -> float:
        started = time.monotonic()
        shared.publish(started, read_of(database, ids))
        return started
    return read


def serve(shared: SharedProviderReads, read) -> threading.Event:
    """The reader serving ``read`` on a thread, until the event returned is set."""
    stop = threading.Event()
    threading.Thread(target=shared.reads.serve, args=(read, stop), daemon=True).start()
    # Serving once its socket is bound too: the reader takes its lock first, and a
    # worker asking in between reads on its own (on a loaded machine, once in CI).
    for _ in range(500):
        if shared.reads._reader_alive() and os.path.exists(shared.reads.reader_path):
            break
        time.sleep(0.01)
    return stop


def a_worker(shared: SharedProviderReads, database: dict, **kwargs):
    """A worker's reads after its first, own read: (its own reads, its reads, its snapshot)."""
    own = OwnReads(database)
    taken = TakenReads(own, shared, newer_than=0.0, **kwargs)
    return own, taken, taken(None)


def test_a_worker_takes_what_the_reader_read_since_its_own_read(shared):
    rng = random.Random(1)
    database = random_database(rng, 8)
    own, taken, snapshot = a_worker(shared, database)
    after, ids = written(rng, database, 3)
    stop = serve(shared, publishing(shared, after, ids))

    snapshot = taken(snapshot)

    assert (own.count, taken.taken) == (1, 1)
    assert state_of(snapshot) == state_of(whole_read(after))
    stop.set()


def test_a_worker_that_missed_more_reads_than_are_kept_reads_on_its_own(shared):
    rng = random.Random(2)
    database = random_database(rng, 8)
    own, taken, snapshot = a_worker(shared, database)
    for _ in range(KEEP):
        shared.publish(time.monotonic(), read_of(database, [1]))
    # The read it asks for: one more than kept.
    stop = serve(shared, publishing(shared, database, [2]))

    taken(snapshot)

    assert (own.count, taken.taken) == (2, 0)
    stop.set()


def test_a_worker_whose_reader_does_not_answer_in_time_reads_on_its_own(shared):
    rng = random.Random(3)
    database = random_database(rng, 4)
    own, taken, snapshot = a_worker(shared, database, wait=0.2)
    gate = threading.Event()

    def slow_read() -> float:
        gate.wait(5)
        return time.monotonic()

    stop = serve(shared, slow_read)

    taken(snapshot)

    assert (own.count, taken.taken) == (2, 0)
    gate.set()
    stop.set()
