"""The NUMA topology a flavor and image ask for, when the spec does not carry Nova's own."""
from __future__ import annotations

import pytest

from scheduler.exceptions import RequestTranslationError
from scheduler.objects.spec import Flavor, ImageMetaProps
from scheduler.request.numa import (
    PAGES_ANY,
    PAGES_LARGE,
    PAGES_SMALL,
    InstanceCell,
    page_size,
    topology_from_flavor,
)


def flavor(vcpus=4, memory_mb=4096, **extra_specs):
    return Flavor(vcpus=vcpus, memory_mb=memory_mb, extra_specs=extra_specs)


def cells(extra_specs, image=None, vcpus=4, memory_mb=4096):
    topology = topology_from_flavor(flavor(vcpus, memory_mb, **extra_specs),
                                    ImageMetaProps(image or {}))
    return None if topology is None else list(topology.cells)


TOPOLOGIES = [
    pytest.param({}, None, id='nothing asks for a topology'),
    pytest.param({'hw:cpu_thread_policy': 'require'}, None,
                 id='a thread policy alone asks for none'),
    pytest.param({'hw:numa_nodes': '2'},
                 [InstanceCell(0, cpuset=frozenset({0, 1}), memory=2048),
                  InstanceCell(1, cpuset=frozenset({2, 3}), memory=2048)],
                 id='two nodes: vCPUs and memory split evenly'),
    pytest.param({'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'},
                 [InstanceCell(0, pcpuset=frozenset({0, 1, 2, 3}), memory=4096,
                               cpu_policy='dedicated', cpu_thread_policy='isolate')],
                 id='pinning alone: one node, every vCPU pinned'),
    pytest.param({'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '2-3', 'hw:numa_nodes': '2'},
                 [InstanceCell(0, cpuset=frozenset({0, 1}), memory=2048, cpu_policy='mixed'),
                  InstanceCell(1, pcpuset=frozenset({2, 3}), memory=2048, cpu_policy='mixed')],
                 id='mixed: the masked vCPUs are pinned, in their node'),
    pytest.param({'hw:mem_page_size': 'large'},
                 [InstanceCell(0, cpuset=frozenset({0, 1, 2, 3}), memory=4096,
                               pagesize=PAGES_LARGE)], id='a page size alone: one node'),
    pytest.param({'hw:pmem': '4GB'},
                 [InstanceCell(0, cpuset=frozenset({0, 1, 2, 3}), memory=4096)],
                 id='persistent memory: one node'),
    pytest.param({'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0', 'hw:numa_cpus.1': '1-3',
                  'hw:numa_mem.0': '1024', 'hw:numa_mem.1': '3072'},
                 [InstanceCell(0, cpuset=frozenset({0}), memory=1024),
                  InstanceCell(1, cpuset=frozenset({1, 2, 3}), memory=3072)],
                 id='cells spelt out'),
]


@pytest.mark.parametrize('extra_specs,expected', TOPOLOGIES)
def test_requested_topology(extra_specs, expected):
    assert cells(extra_specs) == expected


def test_the_image_may_ask_for_nodes_when_the_flavor_does_not():
    assert len(cells({}, image={'hw_numa_nodes': 2})) == 2


INVALID = [
    ({'hw:numa_nodes': '3'}, None, 'cannot be split evenly over 3 NUMA nodes'),
    ({'hw:numa_nodes': '0'}, None, 'must be at least 1'),
    ({'hw:numa_nodes': '2'}, {'hw_numa_nodes': 2}, 'the flavor already sets hw:numa_nodes'),
    ({'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0-1', 'hw:numa_cpus.1': '2-3'}, None,
     'must be set together'),
    ({'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0-2', 'hw:numa_cpus.1': '2-3',
      'hw:numa_mem.0': '2048', 'hw:numa_mem.1': '2048'}, None, 'that no other node names'),
    ({'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0-1', 'hw:numa_cpus.1': '2-3',
      'hw:numa_mem.0': '1024', 'hw:numa_mem.1': '1024'}, None, 'add up to the flavor memory'),
    ({'hw:emulator_threads_policy': 'isolate', 'hw:numa_nodes': '1'}, None,
     'needs pinned CPUs'),
    ({'hw:mem_page_size': 'huge'}, None, 'is not small, large, any or a page size'),
]


@pytest.mark.parametrize('extra_specs,image,message', INVALID)
def test_topologies_novas_api_would_refuse_raise_with_a_reason(extra_specs, image, message):
    with pytest.raises(RequestTranslationError, match=message):
        cells(extra_specs, image)


@pytest.mark.parametrize('flavor_value,image_value,expected', [
    ('small', None, PAGES_SMALL),
    ('any', None, PAGES_ANY),
    ('2048', None, 2048),
    ('2MB', None, 2048),
    ('1GB', None, 1048576),
    ('large', '1GB', 1048576),
    ('any', 'small', PAGES_SMALL),
    (None, None, None),
])
def test_page_sizes_in_kib(flavor_value, image_value, expected):
    extra_specs = {'hw:mem_page_size': flavor_value} if flavor_value else {}
    image = ImageMetaProps({'hw_mem_page_size': image_value} if image_value else {})
    assert page_size(flavor(**extra_specs), image) == expected


@pytest.mark.parametrize('flavor_value', [None, '2MB', 'small'])
def test_the_image_may_only_choose_a_page_size_the_flavor_leaves_open(flavor_value):
    extra_specs = {'hw:mem_page_size': flavor_value} if flavor_value else {}
    with pytest.raises(RequestTranslationError, match='hw_mem_page_size'):
        page_size(flavor(**extra_specs), ImageMetaProps({'hw_mem_page_size': '1GB'}))
