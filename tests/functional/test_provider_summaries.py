"""PlacementClient.get_provider_summaries against the REAL Placement.

A rebuild check asks for no allocation candidates, yet its host state must be
the one a scheduling request would see. Placement's own provider summaries
(from ``GET /allocation_candidates``) are the yardstick.
"""
from __future__ import annotations

from placement_client.models import AllocationRequest, Candidates
from scheduler.simulate import seed

INSTANCE = '6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e0001'


def test_summaries_read_from_inventories_equal_what_allocation_candidates_report(
        placement_client):
    seed.ensure_trait(placement_client, 'CUSTOM_NVIDIA_A16')
    root = seed.create_provider(
        placement_client, name='cn0',
        inventories={'VCPU': {'total': 16, 'reserved': 2, 'allocation_ratio': 4.0},
                     'MEMORY_MB': {'total': 32768, 'reserved': 512, 'allocation_ratio': 1.5},
                     'DISK_GB': {'total': 100}},
        traits=['HW_CPU_X86_AVX2'])
    gpu = seed.create_provider(placement_client, name='cn0-gpu', parent_uuid=root,
                               inventories={'VGPU': {'total': 4}}, traits=['CUSTOM_NVIDIA_A16'])
    placement_client.put_allocations(
        INSTANCE, AllocationRequest({root: {'VCPU': 3, 'MEMORY_MB': 1024}, gpu: {'VGPU': 1}}),
        project_id='p', user_id='u', consumer_generation=None)

    ours = placement_client.get_provider_summaries(root)

    answer = placement_client.request(
        'GET', '/allocation_candidates', microversion='1.36',
        params={'resources': 'VCPU:1', 'resources1': 'VGPU:1', 'group_policy': 'none'}).json()
    theirs = Candidates.from_json(answer, '1.36').provider_summaries
    assert ours == {rp: theirs[rp] for rp in (root, gpu)}
    assert ours[root].resources['VCPU'].capacity == 56


def test_an_unknown_root_has_no_summaries(placement_client):
    assert placement_client.get_provider_summaries(INSTANCE) == {}
