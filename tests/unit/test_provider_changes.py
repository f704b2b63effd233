"""What a read of changes took again, taken into snapshots other than the reader's.

The service's provider reader publishes each read of changes as the providers it
read again, whole (scheduler/catalog/provider_changes.py); a worker takes every
read it has not taken yet, merged, into a snapshot of its own. Here the database
is a description of each provider's rows, snapshots are built from it as a whole
read builds them, and changes as a read of changes reads them.
"""
from __future__ import annotations

import copy
import functools
import random
import uuid

import numpy as np

from scheduler.catalog.provider_changes import Changes
from scheduler.provider_view.snapshot import Keyed, ProviderSnapshot

CLASSES = ('VCPU', 'MEMORY_MB', 'DISK_GB', 'VGPU')
TRAITS = ('HW_CPU_X86_AVX2', 'CUSTOM_SSD', 'COMPUTE_STATUS_DISABLED')
AGGREGATES = tuple(str(uuid.uuid5(uuid.NAMESPACE_DNS, f'agg{i}')) for i in range(3))
# Placement's ids of the names: the same in every read.
CODES = {name: code for code, name in enumerate(CLASSES + TRAITS + AGGREGATES, start=1)}
NAMES = {code: name for name, code in CODES.items()}


def random_provider(rng: random.Random) -> dict:
    inventories = {rc: (rng.choice((4, 8, 16)), rng.choice((0, 1)), 1, 16, 1,
                        rng.choice((1.0, 4.0)))
                   for rc in rng.sample(CLASSES, rng.randint(1, 3))}
    return {'generation': 1, 'inventories': inventories,
            'usages': {rc: rng.randint(0, 4) for rc in inventories if rng.random() < 0.6},
            'traits': set(rng.sample(TRAITS, rng.randint(0, 2))),
            'aggregates': set(rng.sample(AGGREGATES, rng.randint(0, 2)))}


def random_database(rng: random.Random, providers: int) -> dict[int, dict]:
    return {i: random_provider(rng) for i in range(1, providers + 1)}


def written(rng: random.Random, database: dict[int, dict], how_many: int
            ) -> tuple[dict[int, dict], list[int]]:
    """The database after ``how_many`` providers were written (generations moved), and
    which."""
    after = copy.deepcopy(database)
    ids = rng.sample(sorted(after), how_many)
    for i in ids:
        fresh = random_provider(rng)
        fresh['generation'] = after[i]['generation'] + 1
        after[i] = fresh
    return after, sorted(ids)


def uuid_of(i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f'provider-{i}'))


def whole_read(database: dict[int, dict], marks: object = None) -> ProviderSnapshot:
    return ProviderSnapshot.from_rows(
        [(i, uuid_of(i), p['generation'], None) for i, p in database.items()],
        [(i, rc, *values) for i, p in database.items() for rc, values in p['inventories'].items()],
        [(i, rc, used) for i, p in database.items() for rc, used in p['usages'].items()],
        [(i, t) for i, p in database.items() for t in p['traits']],
        [(i, a) for i, p in database.items() for a in p['aggregates']], marks=marks)


def keyed(rows: list[tuple], width: int, dtype=np.int64) -> Keyed:
    """Rows of (provider id, name, *values), coded by Placement's ids as a read codes them."""
    return Keyed(np.array([r[0] for r in rows], dtype=np.int64),
                 np.array([CODES[r[1]] for r in rows], dtype=np.int64), NAMES,
                 np.array([r[2:] for r in rows], dtype=dtype).reshape(len(rows), width))


def read_of(database: dict[int, dict], ids: list[int], marks: object = None) -> Changes:
    """What a read of changes takes of ``database`` for the providers ``ids``."""
    of = {i: database[i] for i in ids}
    return Changes(
        np.array(ids, dtype=np.int64), np.array([p['generation'] for p in of.values()]),
        inventories=keyed([(i, rc, *values) for i, p in of.items()
                           for rc, values in p['inventories'].items()], 6, np.float64),
        usages=keyed([(i, rc, used) for i, p in of.items() for rc, used in p['usages'].items()],
                     1),
        traits=keyed([(i, t) for i, p in of.items() for t in p['traits']], 0),
        aggregates=keyed([(i, a) for i, p in of.items() for a in p['aggregates']], 0),
        marks=marks)


def state_of(snapshot: ProviderSnapshot) -> dict:
    return {rp: (int(snapshot.generations[row]), snapshot.traits.of(row),
                 snapshot.aggregates.of(row), snapshot.inventory_of(row))
            for row, rp in enumerate(snapshot.uuids)}


def test_a_read_taken_into_a_snapshot_of_the_state_before_it_gives_the_state_after_it():
    for seed in range(30):
        rng = random.Random(seed)
        before = random_database(rng, 12)
        after, ids = written(rng, before, rng.randint(0, 5))
        # A read also takes again providers that did not change (its slice).
        read_again = sorted(set(ids) | set(rng.sample(sorted(before), 2)))

        taken = read_of(after, read_again, marks='after').apply(whole_read(before))

        assert taken is not None and taken.marks == 'after'
        assert state_of(taken) == state_of(whole_read(after)), seed


def test_reads_merged_in_order_give_what_taking_each_in_turn_gives():
    # A worker that took no read for a while takes all it missed in one pass.
    for seed in range(30):
        rng = random.Random(seed)
        states = [random_database(rng, 10)]
        reads = []
        for n in range(rng.randint(2, 5)):
            after, ids = written(rng, states[-1], rng.randint(1, 4))
            states.append(after)
            reads.append(read_of(after, sorted(set(ids) | {rng.randint(1, 10)}), marks=n))

        merged = functools.reduce(Changes.then, reads).apply(whole_read(states[0]))
        in_turn = whole_read(states[0])
        for read in reads:
            in_turn = read.apply(in_turn)

        assert merged is not None and in_turn is not None
        assert state_of(merged) == state_of(in_turn) == state_of(whole_read(states[-1])), seed
        assert merged.marks == reads[-1].marks


def test_a_provider_the_snapshot_read_later_keeps_what_the_snapshot_holds():
    # The worker read on its own after the service's reader had begun its read:
    # that read is older for the providers written in between.
    rng = random.Random(7)
    first = random_database(rng, 6)
    second, ids = written(rng, first, 3)
    older_read = read_of(first, [1, 2, 3, 4, 5, 6])

    taken = older_read.apply(whole_read(second))

    assert taken is not None
    assert state_of(taken) == state_of(whole_read(second))


def test_a_read_of_a_provider_the_snapshot_does_not_hold_cannot_be_taken():
    # Providers were created since that snapshot: only a whole read will do.
    rng = random.Random(3)
    database = random_database(rng, 5)
    grown = {**database, 6: random_provider(rng)}

    assert read_of(grown, [2, 6]).apply(whole_read(database)) is None


def test_a_read_that_took_nothing_again_changes_only_the_marks():
    rng = random.Random(5)
    database = random_database(rng, 4)
    snapshot = whole_read(database, marks='old')

    taken = read_of(database, [], marks='new').apply(snapshot)

    assert taken is not None and taken.marks == 'new'
    assert state_of(taken) == state_of(snapshot)


def test_the_reader_publishes_only_the_providers_that_moved_of_those_it_read_again():
    # A read takes a slice of providers again whatever their generation says; of
    # those, only what moves no generation (an allocation deleted, an aggregate set
    # below microversion 1.19) is news to a worker.
    for seed in range(20):
        rng = random.Random(seed)
        before = random_database(rng, 12)
        after, written_ids = written(rng, before, rng.randint(0, 3))
        unmoved = [i for i in sorted(after) if i not in written_ids]
        deleted, regrouped = rng.sample(unmoved, 2)
        after[deleted]['usages'] = {}
        after[regrouped]['aggregates'] = {AGGREGATES[0]} ^ after[regrouped]['aggregates']
        read_again = sorted(set(written_ids) | {deleted, regrouped} | set(rng.sample(unmoved, 4)))
        old = whole_read(before)
        read = read_of(after, read_again)
        new = read.apply(old)
        assert new is not None

        moved = read.that_moved(old, new)

        expected = {i for i in read_again if state_of(whole_read({i: before[i]}))
                    != state_of(whole_read({i: after[i]}))}
        assert set(moved.ids.tolist()) == expected, seed
        assert state_of(moved.apply(old)) == state_of(whole_read(after)), seed
