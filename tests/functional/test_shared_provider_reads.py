"""The provider view read once for all the workers of a service, on a real Placement.

The service's provider reader (scheduler/catalog/provider_reader.py) serves the
workers' questions from a thread here, over the same private directory and
datagram socket the service's processes use; each worker is a
:class:`TakenReads` over a reader of its own, as a worker builds it. Other
clients of Placement write between reads. What a worker holds after taking the
reader's reads must be what a whole read of Placement's database holds then.
"""
from __future__ import annotations

import random
import threading
import time

import pytest

from scheduler.catalog.placement_db import PlacementDatabaseReader
from scheduler.catalog.provider_reader import Publisher
from scheduler.catalog.shared_provider_reads import SharedProviderReads, TakenReads
from scheduler.simulate import seed
from tests.functional.test_provider_view import random_changes, random_cloud, state_of


@pytest.fixture
def shared():
    shared = SharedProviderReads.create()
    yield shared
    shared.remove()


@pytest.fixture
def serving(placement, shared):
    """The service's provider reader, serving until the test ends; its reader."""
    reader = PlacementDatabaseReader(f'sqlite:///{placement.db_path}', deletions_every=0)
    publisher = Publisher(reader, shared)
    stop = threading.Event()
    thread = threading.Thread(target=publisher.serve, args=(stop,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while shared.latest()[0] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)        # its first, whole read: begun before any worker's
    yield reader
    stop.set()
    thread.join(timeout=5)
    reader.close()


def worker(placement, shared) -> tuple[TakenReads, PlacementDatabaseReader]:
    own = PlacementDatabaseReader(f'sqlite:///{placement.db_path}', deletions_every=0)
    # newer_than 0: the reader's read must begin after the worker asks, so that it
    # holds every write made before (the service takes one begun a little earlier).
    return TakenReads(own.read, shared, newer_than=0.0), own


def test_workers_taking_the_reader_s_reads_hold_what_a_whole_read_holds(
        placement, placement_client, shared, request):
    rng = random.Random(20261129)
    # Large enough that no read of changes here takes a quarter of the providers
    # (the reader would read them whole).
    providers, children = random_cloud(placement_client, rng, 30)
    # The reader's first read (whole) is of this cloud, as the workers' are.
    serving = request.getfixturevalue('serving')
    workers = [worker(placement, shared) for _ in range(2)]
    snapshots = [taken(None) for taken, _ in workers]      # each worker's first, own read
    consumers: list[str] = []
    whole = PlacementDatabaseReader(f'sqlite:///{placement.db_path}')
    done = []
    for round_ in range(30):
        for _ in range(rng.randint(1, 3)):
            # Deletions below: on SQLite a claim after one can take the deleted
            # consumer's id, which hides it from the consumers' marks until the
            # provider's slice is read again (as it does from a worker's own reads).
            done.append(random_changes(placement_client, rng, providers + children, consumers,
                                       kinds=('claim', 'inventory', 'traits', 'aggregates')))
        for i, (taken, _) in enumerate(workers):
            if rng.random() < 0.4:
                continue        # this one takes the reads it missed later, merged
            snapshots[i] = taken(snapshots[i])
            assert state_of(snapshots[i]) == state_of(whole.read()), (round_, done[-3:])

    # Instances deleted (DELETE /allocations moves no generation): found by the
    # reader's checksums of usage, and taken in by each worker.
    for consumer in rng.sample(consumers, 3):
        placement_client.delete_allocations(consumer)
    for i, (taken, _) in enumerate(workers):
        snapshots[i] = taken(snapshots[i])
        assert state_of(snapshots[i]) == state_of(whole.read())
    assert serving.usage_checks >= 1

    for taken, own in workers:
        # Every read after the first was the service reader's.
        assert (own.whole_reads, own.change_reads) == (1, 0)
        assert taken.own == 1 and taken.taken > 10
    assert serving.change_reads > 10
    whole.close()


def test_after_the_reader_read_whole_a_worker_that_read_before_reads_on_its_own_once(
        placement, placement_client, shared, request):
    # A provider created: the reader's read is whole, which a worker's snapshot of
    # other providers cannot take in.
    rng = random.Random(11)
    providers, _ = random_cloud(placement_client, rng, 4, nested=False)
    request.getfixturevalue('serving')
    taken, own = worker(placement, shared)
    snapshot = taken(taken(None))
    assert (taken.own, taken.taken) == (1, 1)

    new = seed.create_provider(placement_client, name='shared-new', inventories={'VCPU': 8})
    snapshot = taken(snapshot)

    assert new in snapshot.index and (taken.own, own.whole_reads) == (2, 2)
    seed.set_traits(placement_client, new, ['CUSTOM_SSD'])
    snapshot = taken(snapshot)
    assert taken.taken == 2 and 'CUSTOM_SSD' in snapshot.traits.of(snapshot.index[new])


def test_a_worker_whose_reader_is_gone_reads_on_its_own(placement, placement_client, shared):
    rng = random.Random(5)
    providers, _ = random_cloud(placement_client, rng, 3, nested=False)
    taken, own = worker(placement, shared)
    snapshot = taken(None)

    seed.set_traits(placement_client, providers[0], ['CUSTOM_SSD'])
    snapshot = taken(snapshot)

    assert (taken.own, taken.taken, own.change_reads) == (2, 0, 1)
    assert 'CUSTOM_SSD' in snapshot.traits.of(snapshot.index[providers[0]])
