"""Seeding helpers against a REAL Placement."""
from __future__ import annotations

import uuid

import pytest

from placement_client.client import MIN_MICROVERSION
from placement_client.exceptions import NotFound
from scheduler.simulate import seed


def _get(client, url):
    response = client.request('GET', url, microversion=MIN_MICROVERSION)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_provider_gets_its_inventories_traits_and_aggregates(placement_client):
    agg = str(uuid.uuid4())
    rp = seed.create_provider(
        placement_client, name='cn1',
        inventories={'VCPU': 16, 'MEMORY_MB': {'total': 8192, 'reserved': 512,
                                               'allocation_ratio': 1.5, 'max_unit': 4096}},
        traits=['HW_CPU_X86_AVX2', 'CUSTOM_GOLD'], aggregates=[agg])
    inventories = _get(placement_client, f'/resource_providers/{rp}/inventories')['inventories']
    assert inventories['VCPU']['total'] == 16
    memory = inventories['MEMORY_MB']
    assert (memory['total'], memory['reserved'], memory['allocation_ratio'],
            memory['max_unit']) == (8192, 512, 1.5, 4096)
    traits = _get(placement_client, f'/resource_providers/{rp}/traits')['traits']
    assert set(traits) == {'HW_CPU_X86_AVX2', 'CUSTOM_GOLD'}
    assert _get(placement_client, f'/resource_providers/{rp}/aggregates')['aggregates'] == [agg]


def test_a_provider_keeps_the_uuid_and_parent_it_was_given(placement_client):
    root = seed.create_provider(placement_client, name='cn1', uuid=str(uuid.uuid4()))
    child = seed.create_provider(placement_client, name='cn1_gpu', parent_uuid=root,
                                 inventories={'CUSTOM_GPU': 2})
    [rp] = placement_client.get_resource_providers(name='cn1_gpu')
    assert (rp.uuid, rp.parent_provider_uuid, rp.root_provider_uuid) == (child, root, root)


def test_ensure_trait_is_idempotent_and_refuses_an_unknown_standard_trait(placement_client):
    seed.ensure_trait(placement_client, 'CUSTOM_X')
    seed.ensure_trait(placement_client, 'CUSTOM_X')
    seed.ensure_trait(placement_client, 'HW_CPU_X86_AVX2')
    with pytest.raises(NotFound):
        seed.ensure_trait(placement_client, 'HW_NOT_A_REAL_TRAIT')


def test_set_aggregates_reads_the_generation_when_not_given(placement_client):
    rp = seed.create_provider(placement_client, name='cn1', inventories={'VCPU': 1})
    aggs = [str(uuid.uuid4()), str(uuid.uuid4())]
    seed.set_aggregates(placement_client, rp, aggs)
    got = _get(placement_client, f'/resource_providers/{rp}/aggregates')['aggregates']
    assert sorted(got) == sorted(aggs)


def test_allocate_creates_and_then_replaces_a_consumers_allocations(placement_client):
    rp = seed.create_provider(placement_client, name='cn1', inventories={'VCPU': 8})
    consumer = str(uuid.uuid4())
    seed.allocate(placement_client, consumer, {rp: {'VCPU': 2}}, 'proj', 'user')
    seed.allocate(placement_client, consumer, {rp: {'VCPU': 3}}, 'proj', 'user')
    held = placement_client.get_allocations(consumer)
    assert held.allocations == {rp: {'VCPU': 3}}
    assert held.consumer_generation == 2


def test_delete_all_removes_nested_trees_with_allocations(placement_client):
    root = seed.create_provider(placement_client, name='cn1', inventories={'VCPU': 8})
    child = seed.create_provider(placement_client, name='cn1_nic', parent_uuid=root,
                                 inventories={'CUSTOM_VF': 4})
    seed.create_provider(placement_client, name='cn1_nic_port', parent_uuid=child)
    seed.allocate(placement_client, str(uuid.uuid4()), {root: {'VCPU': 1}, child: {'CUSTOM_VF': 1}},
                  'proj', 'user')
    assert seed.delete_all(placement_client) == 3
    assert placement_client.get_resource_providers() == []
