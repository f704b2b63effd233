"""Trees the provider view settles without a search are those a search settles.

:func:`scheduler.provider_view.trees.answer` decides most trees from columns
(the query's shape, the candidates' counts, the traits they hold) and searches
the rest; the search is what tests/functional/test_provider_view_nested.py holds
to Placement's own answers. Here, on random nested clouds and queries shaped
as Nova shapes them, the roots answered are the same when every tree is
searched.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from placement_client.query import AllocationCandidatesQuery, RequestGroupQuery
from scheduler.provider_view import trees
from scheduler.provider_view.snapshot import ProviderSnapshot

VGPU_TYPES = ('CUSTOM_A10_4Q', 'CUSTOM_A10_8Q')
CPU_TRAIT = 'HW_CPU_X86_AVX2'
NUMA = 'HW_NUMA_ROOT'


def random_cloud(rng: random.Random, hosts: int) -> ProviderSnapshot:
    """Hosts flat or with NUMA nodes (VCPU and DISK_GB on the root, PCPU and
    MEMORY_MB below), vGPUs of a type each, or PCI devices; traits on roots and
    sometimes on children; some of it used."""
    providers, inventories, usages, traits = [], [], [], []

    def add(parent: int | None, inventory: dict[str, int], names: list[str]) -> int:
        pid = len(providers) + 1
        providers.append((pid, f'00000000-0000-0000-0000-{pid:012d}', 1, parent))
        for rc, total in inventory.items():
            inventories.append((pid, rc, total, 0, 1, total, 1, 1.0))
            usages.append((pid, rc, rng.randint(0, total) if rng.random() < 0.3 else 0))
        traits.extend((pid, t) for t in names)
        return pid

    for _ in range(hosts):
        shape = rng.choice(('flat', 'numa', 'vgpu', 'pci'))
        root_traits = [CPU_TRAIT] if rng.random() < 0.3 else []
        root_inventory = {'VCPU': rng.choice((4, 8)), 'DISK_GB': 100}
        if shape != 'numa':
            root_inventory['MEMORY_MB'] = rng.choice((4096, 8192))
        root = add(None, root_inventory, root_traits)
        if shape == 'numa':
            for _ in range(rng.randint(1, 3)):
                add(root, {'PCPU': 4, 'MEMORY_MB': 4096},
                    [NUMA] + ([CPU_TRAIT] if rng.random() < 0.2 else []))
        elif shape == 'vgpu':
            for _ in range(rng.randint(1, 5)):
                add(root, {'VGPU': rng.choice((1, 2, 4))}, [rng.choice(VGPU_TYPES)])
        elif shape == 'pci':
            for _ in range(rng.randint(1, 4)):
                add(root, {'CUSTOM_PCI_10DE_2236': 1}, [])
    return ProviderSnapshot.from_rows(providers, inventories, usages, traits, [])


def random_query(rng: random.Random) -> AllocationCandidatesQuery:
    query = AllocationCandidatesQuery()
    unsuffixed = query.group('')
    unsuffixed.resources = {'VCPU': rng.choice((1, 2)), 'DISK_GB': 10}
    if rng.random() < 0.6:
        unsuffixed.resources['MEMORY_MB'] = rng.choice((1024, 4096))
    if rng.random() < 0.4:
        unsuffixed.required_traits = {rng.choice((CPU_TRAIT, NUMA))}
    suffixes = iter(range(1, 10))
    devices = rng.choice(('none', 'numa', 'vgpu', 'pci'))   # as the hosts have them
    if devices == 'numa':       # a guest NUMA cell, or two
        for _ in range(rng.randint(1, 2)):
            query.group(str(next(suffixes))).resources = {
                'PCPU': rng.choice((1, 2)), 'MEMORY_MB': rng.choice((1024, 2048))}
    vgpu_type = rng.choice(VGPU_TYPES)
    for _ in range(rng.randint(1, 3) if devices == 'vgpu' else 0):    # often of one type
        group = query.group(str(next(suffixes)))
        group.resources = {'VGPU': rng.choice((1, 1, 2))}
        if rng.random() < 0.8:
            group.required_traits = {vgpu_type if rng.random() < 0.8
                                     else rng.choice(VGPU_TYPES)}
    for _ in range(rng.randint(1, 2) if devices == 'pci' else 0):
        query.group(str(next(suffixes))).resources = {'CUSTOM_PCI_10DE_2236': 1}
    if len([g for g in query.groups if g.suffix]) > 1 or rng.random() < 0.5:
        query.group_policy = rng.choice(('none', 'isolate'))
    return query


def searched_everywhere(monkeypatch) -> None:
    monkeypatch.setattr(trees, '_settled_without_search', lambda _snapshot, found: (
        np.zeros(len(found.roots), dtype=bool),) * 2)


@pytest.mark.parametrize('seed', range(12))
def test_the_roots_answered_are_those_a_search_of_every_tree_answers(seed, monkeypatch):
    rng = random.Random(seed)
    cloud = random_cloud(rng, 40)
    queries = [random_query(rng) for _ in range(30)]
    settled = [trees.answer(cloud, q, {}).roots.tolist() for q in queries]
    searched_everywhere(monkeypatch)
    searched = [trees.answer(cloud, q, {}).roots.tolist() for q in queries]

    assert settled == searched
    assert sum(map(bool, settled)) >= 10      # not only empty answers


def numa_host(*cells: tuple[int, str | None], root_trait: str | None = None
              ) -> ProviderSnapshot:
    """One host with VCPU and DISK_GB on its root and a NUMA node per cell (its
    free MEMORY_MB, a trait of its own)."""
    providers = [(1, '00000000-0000-0000-0000-000000000001', 1, None)]
    inventories = [(1, 'VCPU', 8, 0, 1, 8, 1, 1.0), (1, 'DISK_GB', 100, 0, 1, 100, 1, 1.0)]
    traits = [(1, root_trait)] if root_trait else []
    for i, (memory_mb, trait) in enumerate(cells, 2):
        providers.append((i, f'00000000-0000-0000-0000-{i:012d}', 1, 1))
        inventories.append((i, 'MEMORY_MB', memory_mb, 0, 1, memory_mb, 1, 1.0))
        traits += [(i, NUMA)] + ([(i, trait)] if trait else [])
    return ProviderSnapshot.from_rows(providers, inventories, [], traits, [])


def counting_searches(monkeypatch) -> list:
    searched: list = []
    search = trees.assignments
    monkeypatch.setattr(trees, 'assignments', lambda rules, cloud, rows, **kw:
                        searched.append(rows) or search(rules, cloud, rows, **kw))
    return searched


def test_a_tree_whose_providers_lack_the_flavors_trait_is_refused_unsearched(monkeypatch):
    searched = counting_searches(monkeypatch)
    flavor = AllocationCandidatesQuery(groups=[RequestGroupQuery(
        resources={'VCPU': 2, 'MEMORY_MB': 1024, 'DISK_GB': 10},
        required_traits={CPU_TRAIT})])

    assert not len(trees.answer(numa_host((4096, None), (4096, None)), flavor, {}).roots)
    assert searched == []
    # Nor does a guest NUMA cell's provider count: the flavor's trait is asked of
    # the unsuffixed group's providers.
    cell = RequestGroupQuery(suffix='1', resources={'MEMORY_MB': 1024})
    flavor_and_cell = AllocationCandidatesQuery(groups=[RequestGroupQuery(
        resources={'VCPU': 2, 'DISK_GB': 10}, required_traits={CPU_TRAIT}), cell])
    assert not len(trees.answer(numa_host((4096, CPU_TRAIT)), flavor_and_cell, {}).roots)
    assert searched == []
    # A NUMA node that has it may serve the flavor's memory: that tree is searched.
    assert len(trees.answer(numa_host((4096, None), (4096, CPU_TRAIT)), flavor, {}).roots)
    assert len(searched) == 1


def test_identical_groups_under_isolate_need_as_many_providers_and_no_search(monkeypatch):
    searched = counting_searches(monkeypatch)

    def cells(*memory_mb: int) -> AllocationCandidatesQuery:
        return AllocationCandidatesQuery(
            groups=[RequestGroupQuery(resources={'VCPU': 2})]
            + [RequestGroupQuery(suffix=str(n), resources={'MEMORY_MB': mb},
                                 required_traits={NUMA}) for n, mb in enumerate(memory_mb, 1)],
            group_policy='isolate')

    host = numa_host((4096, None), (1024, None), (2048, None))
    assert len(trees.answer(host, cells(2048, 2048), {}).roots)
    assert not len(trees.answer(host, cells(2048, 2048, 2048), {}).roots)
    assert searched == []
    # Groups that ask different amounts are matched by a search.
    assert len(trees.answer(host, cells(4096, 2048), {}).roots)
    assert len(searched) == 1
