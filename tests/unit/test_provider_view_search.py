"""The search for a tree's allocation requests: Placement's rules on a combination,
and a search that settles a host in few steps.

Which hosts and requests Placement itself gives is held to a real Placement in
tests/functional/test_provider_view_nested.py; these tests pin each rule and
the pruning on trees written out by hand (rows: 0 the root, the others below).
"""
from __future__ import annotations

import pytest

from scheduler.provider_view.search import Cloud, Rules, Slot, Unsettled, assignments


def vgpu_host(room: list[int], *, parents: list[int] | None = None,
              has: dict[str, list[bool]] | None = None) -> Cloud:
    """A root (row 0) and a child per entry of ``room`` after the first, with that
    much VGPU room (the root's entry is its own)."""
    return Cloud(room={'VGPU': room}, parent=parents or [-1] + [0] * (len(room) - 1),
                 has=has or {})


def vgpus(count: int, *, twins: bool = False) -> tuple[Slot, ...]:
    return tuple(Slot(str(n), (('VGPU', 1),), granular=True,
                      twin=n - 1 if twins and n > 0 else -1) for n in range(count))


def test_isolate_refuses_more_groups_than_providers_within_its_first_steps():
    # Nine groups, eight devices: Placement's product is 8**9 combinations; the
    # matching sees at once that nine cannot each have a device of their own.
    host = vgpu_host([0] + [4] * 8)
    children = list(range(1, 9))

    assert assignments(Rules(vgpus(9), isolate=True), host, [children] * 9,
                       limit=4, budget=20) == []
    assert len(assignments(Rules(vgpus(8), isolate=True), host, [children] * 8,
                           limit=4, budget=200)) == 4


def test_groups_share_a_provider_only_as_far_as_its_room_goes_together():
    # Two groups, policy none, each one VGPU: together on one device only where
    # that device has room for both (Placement's check on the consolidated request).
    rules = Rules(vgpus(2))
    one_each = vgpu_host([0, 1, 1])
    two_on_first = vgpu_host([0, 2, 0])

    assert sorted(assignments(rules, one_each, [[1, 2], [1, 2]], limit=10)) == [(1, 2), (2, 1)]
    assert assignments(rules, two_on_first, [[1], [1]], limit=10) == [(1, 1)]
    assert assignments(Rules(vgpus(2), isolate=True), two_on_first, [[1], [1]], limit=10) == []


def test_a_same_subtree_set_has_one_of_its_providers_above_all_the_others():
    # root 0 -> numa 1 -> vgpu 3, root 0 -> numa 2 -> vgpu 4
    host = Cloud(room={'MEMORY_MB': [0, 1024, 1024, 0, 0], 'VGPU': [0, 0, 0, 1, 1]},
                 parent=[-1, 0, 0, 1, 2], has={})
    cell = Slot('1', (('MEMORY_MB', 512),), granular=True)
    device = Slot('2', (('VGPU', 1),), granular=True)
    rules = Rules((cell, device), same_subtree=(frozenset({'1', '2'}),))

    assert sorted(assignments(rules, host, [[1, 2], [3, 4]], limit=10)) == [(1, 3), (2, 4)]
    # Two devices alone: neither is above the other.
    assert assignments(Rules((device, Slot('3', (('VGPU', 1),), granular=True)),
                             same_subtree=(frozenset({'2', '3'}),)),
                       host, [[3, 4], [3, 4]], limit=10) == []


def test_the_unsuffixed_group_s_traits_are_held_by_its_providers_together():
    # VCPU from a NUMA node (1, 2), DISK_GB from the root (0); the trait is on the
    # root only, so every answer takes the disk from the root - and a request
    # without disk could not have it at all.
    host = Cloud(room={'VCPU': [0, 4, 4], 'DISK_GB': [100, 0, 0]}, parent=[-1, 0, 0],
                 has={'HW_CPU_X86_AVX2': [True, False, False]})
    vcpu, disk = Slot('', (('VCPU', 2),), granular=False), Slot('', (('DISK_GB', 10),),
                                                                 granular=False)

    assert sorted(assignments(Rules((vcpu, disk), traits=frozenset({'HW_CPU_X86_AVX2'})),
                              host, [[1, 2], [0]], limit=10)) == [(1, 0), (2, 0)]
    assert assignments(Rules((vcpu,), traits=frozenset({'HW_CPU_X86_AVX2'})),
                       host, [[1, 2]], limit=10) == []


def test_identical_groups_give_no_mirror_images_and_the_answers_spread_over_the_tree():
    host = vgpu_host([0] + [1] * 8)
    children = list(range(1, 9))

    found = assignments(Rules(vgpus(4, twins=True), isolate=True), host, [children] * 4,
                        limit=4)

    assert len(found) == 4 and len(set(found)) == 4
    assert all(list(a) == sorted(a) for a in found)      # no permutation of another
    # A claim refused on one device finds alternatives without it.
    assert len({row for a in found for row in a}) > 4


def test_a_tree_with_too_little_room_in_all_is_refused_before_any_step():
    # Seven groups of one VGPU, three devices with room for two each.
    assert assignments(Rules(vgpus(7)), vgpu_host([0, 2, 2, 2]), [[1, 2, 3]] * 7,
                       limit=1, budget=0) == []


def test_under_isolate_a_tree_with_fewer_providers_than_groups_is_refused_unsearched(
        monkeypatch):
    # Two NUMA-cell groups on a host without NUMA children: the root is the only
    # provider either may take. Refused before a search is set up for the tree.
    from scheduler.provider_view import search

    host = Cloud(room={'MEMORY_MB': [8192]}, parent=[-1], has={})
    cell = Slot('1', (('MEMORY_MB', 1024),), granular=True)
    other = Slot('2', (('MEMORY_MB', 1024),), granular=True, twin=0)
    monkeypatch.setattr(search, '_Search', None)

    assert assignments(Rules((cell, other), isolate=True), host, [[0], [0]], limit=4) == []


def test_a_search_that_cannot_settle_within_its_budget_says_so():
    # Six groups of two VGPUs and two of one, five devices with room for three
    # each: there is room in all (14 of 15), every group fits alone, but no device
    # holds two groups of two. The search tries many partial assignments before
    # it knows: a few steps are not enough, its budget is.
    host = vgpu_host([0] + [3] * 5)
    slots = tuple(Slot(str(n), (('VGPU', 2 if n < 6 else 1),), granular=True)
                  for n in range(8))
    candidates = [[1, 2, 3, 4, 5]] * 8

    with pytest.raises(Unsettled):
        assignments(Rules(slots), host, candidates, limit=1, budget=50)
    assert assignments(Rules(slots), host, candidates, limit=1) == []


def test_with_touch_only_answers_taking_something_of_the_tree_count():
    # Row 0 a root without disk, row 1 a pool of another tree (its own root): two
    # groups of one GB each, which the pool alone could serve. An answer for the
    # root must take something of its tree; it has no disk: none.
    disks = (Slot('1', (('DISK_GB', 1),), granular=True),
             Slot('2', (('DISK_GB', 1),), granular=True))
    pool_only = Cloud(room={'DISK_GB': [-1, 10]}, parent=[-1, -1], has={})
    with_local = Cloud(room={'DISK_GB': [5, 10]}, parent=[-1, -1], has={})

    assert assignments(Rules(disks), pool_only, [[1], [1]], limit=4) == [(1, 1)]
    assert assignments(Rules(disks), pool_only, [[1], [1]], limit=4,
                       touch=frozenset({0})) == []
    assert sorted(assignments(Rules(disks), with_local, [[0, 1], [0, 1]], limit=4,
                              touch=frozenset({0}))) == [(0, 0), (0, 1), (1, 0)]
