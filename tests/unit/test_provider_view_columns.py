"""The snapshot's index of uuids and its trees, held as columns, say what a dict of
uuids and a list of rows per tree said (scheduler/provider_view/snapshot.py)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler.provider_view.snapshot import ProviderSnapshot, _Index


def forest(rng: random.Random, n: int) -> ProviderSnapshot:
    """``n`` providers with random ids (a child's often lower than its root's) and
    random trees of any depth."""
    ids = rng.sample(range(1, 10 * n + 2), n)
    parent: dict[int, int | None] = {}
    for i, provider in enumerate(ids):
        parent[provider] = rng.choice(ids[:i]) if i and rng.random() < 0.6 else None
    rows = [(provider, f'uuid-{provider}', 1, parent[provider]) for provider in ids]
    rng.shuffle(rows)
    return ProviderSnapshot.from_rows(rows, [], [], [], [])


def trees_as_lists(snapshot: ProviderSnapshot) -> dict[int, list[int]]:
    """What the snapshot held before: per root of a tree of more than it, its rows."""
    trees: dict[int, list[int]] = {}
    for row, root in enumerate(snapshot.roots.tolist()):
        if root != row:
            trees.setdefault(root, [root]).append(row)
    return {root: sorted(rows) for root, rows in trees.items()}


@pytest.mark.parametrize('seed', range(40))
def test_trees_and_index_say_what_lists_and_a_dict_of_the_same_providers_say(seed):
    rng = random.Random(seed)
    snapshot = forest(rng, rng.randint(0, 60))

    expected = trees_as_lists(snapshot)
    assert dict(snapshot.trees) == expected
    assert len(snapshot.trees) == len(expected)
    assert snapshot.nested == bool(expected)
    for row in range(len(snapshot)):
        assert snapshot.tree(row) == expected.get(row, [row])
    assert dict(snapshot.index) == {rp: row for row, rp in enumerate(snapshot.uuids)}


def test_a_root_with_a_higher_id_than_its_children_is_in_its_tree_in_row_order():
    snapshot = ProviderSnapshot.from_rows(
        [(9, 'root', 1, None), (3, 'child', 1, 9), (12, 'grandchild', 1, 3),
         (5, 'alone', 1, None)], [], [], [], [])

    # Rows in the order of the ids: child 3, alone 5, root 9, grandchild 12.
    root = snapshot.index['root']
    assert root == 2
    assert snapshot.tree(root) == [0, 2, 3]
    assert dict(snapshot.trees) == {2: [0, 2, 3]}
    assert snapshot.tree(snapshot.index['alone']) == [snapshot.index['alone']]
    assert snapshot.trees.get(snapshot.index['child']) is None


class _SameHash(str):
    """A uuid whose hash is every other's: the index must compare the uuids."""

    def __hash__(self) -> int:
        return 7


def test_uuids_of_one_hash_are_each_found_at_their_own_row():
    uuids = [_SameHash(f'uuid-{i}') for i in range(5)]
    index = _Index(uuids)

    assert [index[rp] for rp in uuids] == [0, 1, 2, 3, 4]
    assert _SameHash('uuid-9') not in index
    assert index.get(_SameHash('uuid-9')) is None


def test_what_the_snapshot_does_not_hold_is_not_in_its_index():
    snapshot = ProviderSnapshot.from_rows([(1, 'a', 1, None), (2, 'b', 1, 1)], [], [], [], [])

    assert 'c' not in snapshot.index
    assert snapshot.index.get('c') is None
    assert snapshot.index.get(1) is None  # type: ignore[call-overload]
    with pytest.raises(KeyError):
        snapshot.index['c']
    assert list(snapshot.index) == ['a', 'b']
    assert len(snapshot.index) == 2


def test_inventory_rows_are_the_providers_rows():
    snapshot = ProviderSnapshot.from_rows(
        [(4, 'a', 1, None), (2, 'b', 1, None)],
        [(4, 'VCPU', 8, 0, 1, 8, 1, 1.0), (2, 'VCPU', 4, 0, 1, 4, 1, 1.0)], [], [], [])

    inv = snapshot.inventories['VCPU']
    assert inv.rows.tolist() == [snapshot.index['b'], snapshot.index['a']]
    assert np.array_equal(snapshot.ids[inv.rows], [2, 4])
    assert inv.total.tolist() == [4, 8]


def _two_hosts() -> ProviderSnapshot:
    return ProviderSnapshot.from_rows(
        [(1, 'a', 1, None), (2, 'b', 1, None)],
        [(i, 'VCPU', 8, 0, 1, 8, 1, 1.0) for i in (1, 2)], [],
        [(1, 'HW_CPU_X86_AVX2'), (2, 'CUSTOM_GOLD'), (2, 'HW_CPU_X86_AVX2')],
        [(1, 'agg-1')])


def _read_again(first: ProviderSnapshot, traits: list, aggregates: list) -> ProviderSnapshot:
    return first.with_changes(first.generations + [1, 0], [1],
                              inventories=[(1, 'VCPU', 8, 0, 1, 8, 1, 1.0)],
                              usages=[(1, 'VCPU', 2)], traits=traits,
                              aggregates=aggregates, marks=None)


def test_a_read_that_finds_the_same_traits_and_aggregates_shares_them_with_the_last():
    first = _two_hosts()
    gold = first.with_trait('CUSTOM_GOLD')

    second = _read_again(first, [(1, 'HW_CPU_X86_AVX2')], [(1, 'agg-1')])

    assert second.traits is first.traits and second.aggregates is first.aggregates
    assert second.with_trait('CUSTOM_GOLD') is gold
    assert second.inventories['VCPU'].used.tolist() == [2, 0]


def test_a_read_that_moves_a_trait_or_an_aggregate_holds_the_new_ones():
    first = _two_hosts()

    second = _read_again(first, [(1, 'CUSTOM_GOLD')], [(1, 'agg-1')])
    third = _read_again(first, [(1, 'HW_CPU_X86_AVX2')], [])

    assert second.traits is not first.traits
    assert [second.traits.of(row) for row in range(2)] == [
        ('CUSTOM_GOLD',), ('CUSTOM_GOLD', 'HW_CPU_X86_AVX2')]
    assert second.with_trait('CUSTOM_GOLD').tolist() == [True, True]
    assert first.with_trait('CUSTOM_GOLD').tolist() == [False, True]
    assert second.aggregates is first.aggregates
    assert third.traits is first.traits
    assert [third.aggregates.of(row) for row in range(2)] == [(), ()]
    assert [first.aggregates.of(row) for row in range(2)] == [('agg-1',), ()]


def test_the_search_reads_parents_made_once_for_the_same_providers_and_traits_once_a_read():
    first = _two_hosts()
    parents, avx2 = first.parents_for_search(), first.trait_flags('HW_CPU_X86_AVX2')

    second = _read_again(first, [(1, 'CUSTOM_GOLD')], [(1, 'agg-1')])

    assert parents.tolist() == [-1, -1] and avx2.tolist() == [1, 1]
    assert first.parents_for_search() is parents and first.trait_flags('HW_CPU_X86_AVX2') is avx2
    assert second.parents_for_search() is parents
    # Traits may move between reads: each snapshot says its own.
    assert second.trait_flags('HW_CPU_X86_AVX2').tolist() == [0, 1]


def test_each_provider_says_which_classes_it_holds_and_where_from_one_read_to_the_next():
    first = _two_hosts()
    assert [first.classes_of(row) for row in range(2)] == [['VCPU'], ['VCPU']]
    inv = first.inventories['VCPU']
    assert [inv.position(row) for row in range(2)] == [0, 1]

    second = first.with_changes(first.generations + [1, 0], [1],
                                inventories=[(1, 'VCPU', 8, 0, 1, 8, 1, 1.0),
                                             (1, 'DISK_GB', 100, 0, 1, 100, 1, 1.0)],
                                usages=[], traits=[], aggregates=[], marks=None)

    assert [second.classes_of(row) for row in range(2)] == [['VCPU', 'DISK_GB'], ['VCPU']]
    assert second.inventories['DISK_GB'].position(0) == 0
    assert second.inventories['DISK_GB'].position(1) is None
    assert first.classes_of(0) == ['VCPU']


_CLASSES = ('VCPU', 'MEMORY_MB', 'DISK_GB', 'PCPU', 'VGPU')
_TRAITS = ('HW_CPU_X86_AVX2', 'CUSTOM_GOLD', 'MISC_SHARES_VIA_AGGREGATE')


class _Cloud:
    """Placement's rows of a small random cloud of trees, written to at random."""

    def __init__(self, rng: random.Random, n: int):
        self.rng = rng
        ids = list(range(1, n + 1))
        self.providers = [(i, f'uuid-{i}', 1, rng.choice(ids[:i - 1])
                           if i > 1 and rng.random() < 0.5 else None) for i in ids]
        self.inventories = {(i, rc): (rng.randint(1, 64), 0, 1, 64, 1, 1.0)
                            for i in ids for rc in _CLASSES if rng.random() < 0.4}
        self.used = {key: rng.randint(0, 8) for key in self.inventories}
        self.traits = {(i, t) for i in ids for t in _TRAITS if rng.random() < 0.2}
        self.aggregates = {(i, f'agg-{rng.randrange(3)}') for i in ids if rng.random() < 0.5}

    def write(self) -> list[int]:
        """Claims on a few providers, now and then an inventory, trait or aggregate
        moved: the ids of the providers written."""
        rng = self.rng
        written = rng.sample(range(1, len(self.providers) + 1), rng.randint(0, 4))
        for i in written:
            kind = rng.random()
            if kind < 0.6:
                for key in [k for k in self.inventories if k[0] == i]:
                    self.used[key] = rng.randint(0, 8)
            elif kind < 0.75:
                key = (i, rng.choice(_CLASSES))
                if key in self.inventories and rng.random() < 0.5:
                    del self.inventories[key]
                    self.used.pop(key, None)
                else:
                    self.inventories[key] = (rng.randint(1, 64), 0, 1, 64, 1, 1.0)
            elif kind < 0.9:
                self.traits ^= {(i, rng.choice(_TRAITS))}
            else:
                self.aggregates ^= {(i, f'agg-{rng.randrange(3)}')}
        return written

    def rows(self, ids: set[int] | None = None) -> dict:
        def of(rows):
            return [r for r in rows if ids is None or r[0] in ids]
        return {'inventories': of([(i, rc, *values)
                                   for (i, rc), values in self.inventories.items()]),
                'usages': of([(i, rc, used) for (i, rc), used in self.used.items()]),
                'traits': of(sorted(self.traits)), 'aggregates': of(sorted(self.aggregates))}


def _derived(snapshot: ProviderSnapshot) -> dict:
    """What a snapshot works out from its rows, as plain values."""
    return {
        'nested': snapshot.nested_classes, 'shared': snapshot.shared_classes,
        'sharing': (snapshot.sharing, snapshot.sharing_rows.tolist(),
                    snapshot.sharing_below_root),
        # (in the order of the snapshot's classes, which a read of changes that
        # finds a new one appends)
        'classes': [sorted(snapshot.classes_of(row)) for row in range(len(snapshot))],
        'flags': {t: snapshot.trait_flags(t).tolist() for t in _TRAITS},
        'anchors': [snapshot.anchors(row).tolist() for row in snapshot.sharing_rows.tolist()],
        'used': {rc: (inv.rows.tolist(), inv.used.tolist())
                 for rc, inv in sorted(snapshot.inventories.items())},
    }


@pytest.mark.parametrize('seed', range(30))
def test_each_read_of_changes_works_out_what_a_whole_read_of_the_same_rows_does(seed):
    # A read of changes takes from the last snapshot what derives only from what did
    # not change (classes_of, trait flags, the sharing providers, their anchors):
    # asked of each snapshot before the next read, whatever it kept must still be
    # what a whole read works out.
    rng = random.Random(seed)
    cloud = _Cloud(rng, 24)
    snapshot = ProviderSnapshot.from_rows(cloud.providers, **cloud.rows())
    for _ in range(25):
        _derived(snapshot)
        written = cloud.write()
        snapshot = snapshot.with_changes(
            snapshot.generations, written, marks=None, **cloud.rows(set(written)))
        whole = ProviderSnapshot.from_rows(cloud.providers, **cloud.rows())

        assert _derived(snapshot) == _derived(whole)


def test_a_read_that_moves_only_usage_keeps_what_the_last_one_worked_out():
    first = _two_hosts()
    avx2, classes = first.trait_flags('HW_CPU_X86_AVX2'), first.classes_of(0)

    second = _read_again(first, [(1, 'HW_CPU_X86_AVX2')], [(1, 'agg-1')])

    assert second.trait_flags('HW_CPU_X86_AVX2') is avx2
    assert second.classes_of(0) == classes
    assert second._classes_held is first._classes_held
    assert second.nested_classes is first.nested_classes
