"""PlacementClient against a REAL Placement (openstack-placement, embedded)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from placement_client.client import MIN_MICROVERSION, PlacementClient
from placement_client.exceptions import (
    BadRequest,
    CapacityExceeded,
    ConsumerGenerationConflict,
    PlacementUnavailable,
    PlacementVersionTooOld,
    ProviderGenerationConflict,
)
from placement_client.models import AllocationRequest
from placement_client.query import AllocationCandidatesQuery
from scheduler.simulate import seed

PROJECT = 'a4f1c0de5b6e4a8fa1b2c3d4e5f60718'
USER = '5e6f7a8b9c0d4e1fa2b3c4d5e6f7a8b9'


@dataclass(frozen=True)
class Cloud:
    cn1: str        # AVX2, in agg_a, with child cn1_nic (CUSTOM_VF: 4, HW_NIC_SRIOV)
    cn1_nic: str
    cn2: str        # no AVX2, in agg_b
    agg_a: str
    agg_b: str


@pytest.fixture
def cloud(placement_client: PlacementClient) -> Cloud:
    agg_a, agg_b = str(uuid.uuid4()), str(uuid.uuid4())
    cn1 = seed.create_provider(placement_client, name='cn1',
                               inventories={'VCPU': 8, 'MEMORY_MB': {'total': 4096,
                                                                     'reserved': 512}},
                               traits=['HW_CPU_X86_AVX2'], aggregates=[agg_a])
    cn1_nic = seed.create_provider(placement_client, name='cn1_nic', parent_uuid=cn1,
                                   inventories={'CUSTOM_VF': 4}, traits=['HW_NIC_SRIOV'])
    cn2 = seed.create_provider(placement_client, name='cn2',
                               inventories={'VCPU': 4, 'MEMORY_MB': 2048}, aggregates=[agg_b])
    return Cloud(cn1=cn1, cn1_nic=cn1_nic, cn2=cn2, agg_a=agg_a, agg_b=agg_b)


def _query(**unsuffixed) -> AllocationCandidatesQuery:
    query = AllocationCandidatesQuery()
    group = query.group('')
    group.resources = {'VCPU': 1, 'MEMORY_MB': 256}
    for name, value in unsuffixed.items():
        setattr(group, name, value)
    return query


def _roots(candidates) -> set[str]:
    return {rp for ar in candidates.allocation_requests for rp in ar.allocations}


def _claim(rp: str, **resources: int) -> AllocationRequest:
    return AllocationRequest(allocations={rp: resources})


# ---------------------------------------------------------------- negotiation


def test_negotiate_reports_placement_16s_max_microversion(placement_client):
    assert placement_client.negotiate() == '1.39'
    assert placement_client.max_microversion == '1.39'


# ------------------------------------------------------ allocation candidates


def test_candidates_without_constraints_cover_every_host(placement_client, cloud):
    candidates = placement_client.get_allocation_candidates(_query())
    assert _roots(candidates) == {cloud.cn1, cloud.cn2}
    assert candidates.microversion == '1.36'


def test_required_trait_keeps_only_hosts_with_it(placement_client, cloud):
    candidates = placement_client.get_allocation_candidates(
        _query(required_traits={'HW_CPU_X86_AVX2'}))
    assert _roots(candidates) == {cloud.cn1}


def test_forbidden_trait_removes_hosts_with_it(placement_client, cloud):
    candidates = placement_client.get_allocation_candidates(
        _query(forbidden_traits={'HW_CPU_X86_AVX2'}))
    assert _roots(candidates) == {cloud.cn2}


def test_member_of_keeps_only_hosts_in_the_aggregate(placement_client, cloud):
    candidates = placement_client.get_allocation_candidates(
        _query(member_of=[frozenset({cloud.agg_b})]))
    assert _roots(candidates) == {cloud.cn2}


def test_in_tree_keeps_only_that_tree(placement_client, cloud):
    candidates = placement_client.get_allocation_candidates(_query(in_tree=cloud.cn2))
    assert _roots(candidates) == {cloud.cn2}


def test_a_granular_group_is_served_by_the_nested_child_with_its_mapping(placement_client,
                                                                          cloud):
    query = _query()
    nic = query.group('_nic')
    nic.resources = {'CUSTOM_VF': 1}
    nic.required_traits = {'HW_NIC_SRIOV'}
    query.group_policy = 'none'
    candidates = placement_client.get_allocation_candidates(query)
    [ar] = candidates.allocation_requests
    assert ar.allocations == {cloud.cn1: {'VCPU': 1, 'MEMORY_MB': 256},
                              cloud.cn1_nic: {'CUSTOM_VF': 1}}
    assert ar.mappings == {'': (cloud.cn1,), '_nic': (cloud.cn1_nic,)}
    child = candidates.provider_summaries[cloud.cn1_nic]
    assert child.parent_provider_uuid == cloud.cn1
    assert child.root_provider_uuid == cloud.cn1
    assert child.resources['CUSTOM_VF'].capacity == 4
    assert 'HW_NIC_SRIOV' in child.traits
    # Capacity as Placement reports it: (total - reserved) * allocation_ratio.
    assert candidates.provider_summaries[cloud.cn1].resources['MEMORY_MB'].capacity == 3584


def test_an_unknown_trait_is_a_bad_request_with_placements_words(placement_client, cloud):
    with pytest.raises(BadRequest, match='No such trait'):
        placement_client.get_allocation_candidates(
            _query(required_traits={'CUSTOM_DOES_NOT_EXIST'}))


# --------------------------------------------------------------------- claims


def test_a_claim_from_a_candidate_is_visible_in_get_allocations(placement_client, cloud):
    candidates = placement_client.get_allocation_candidates(_query(in_tree=cloud.cn2))
    [ar] = candidates.allocation_requests
    consumer = str(uuid.uuid4())
    placement_client.put_allocations(consumer, ar, project_id=PROJECT, user_id=USER,
                                     consumer_generation=None)
    held = placement_client.get_allocations(consumer)
    assert held.allocations == {cloud.cn2: {'VCPU': 1, 'MEMORY_MB': 256}}
    assert held.consumer_generation == 1
    assert (held.project_id, held.user_id) == (PROJECT, USER)


def test_a_second_claim_with_a_stale_generation_is_a_consumer_generation_conflict(
        placement_client, cloud):
    consumer = str(uuid.uuid4())
    claim = _claim(cloud.cn2, VCPU=1)
    placement_client.put_allocations(consumer, claim, project_id=PROJECT, user_id=USER,
                                     consumer_generation=None)
    with pytest.raises(ConsumerGenerationConflict) as info:
        placement_client.put_allocations(consumer, claim, project_id=PROJECT, user_id=USER,
                                         consumer_generation=None)
    assert (info.value.expected, info.value.sent) == (1, None)
    # The right generation succeeds.
    placement_client.put_allocations(consumer, _claim(cloud.cn2, VCPU=2), project_id=PROJECT,
                                     user_id=USER, consumer_generation=1)
    assert placement_client.get_allocations(consumer).allocations == {cloud.cn2: {'VCPU': 2}}


def test_a_claim_beyond_capacity_is_capacity_exceeded_not_a_generation_conflict(
        placement_client, cloud):
    with pytest.raises(CapacityExceeded) as info:
        placement_client.put_allocations(str(uuid.uuid4()), _claim(cloud.cn2, VCPU=5),
                                         project_id=PROJECT, user_id=USER,
                                         consumer_generation=None)
    assert not isinstance(info.value, ConsumerGenerationConflict)
    assert info.value.status == 409


def test_a_stale_provider_generation_is_a_provider_generation_conflict(placement_client,
                                                                        cloud):
    with pytest.raises(ProviderGenerationConflict):
        seed.set_aggregates(placement_client, cloud.cn2, [cloud.agg_a], generation=0)


def test_a_claim_at_1_39_sends_consumer_type_and_placement_keeps_it(placement_client, cloud):
    consumer = str(uuid.uuid4())
    candidates = placement_client.get_allocation_candidates(_query(in_tree=cloud.cn1))
    placement_client.put_allocations(consumer, candidates.allocation_requests[0],
                                     project_id=PROJECT, user_id=USER, consumer_generation=None,
                                     microversion='1.39', consumer_type='MIGRATION')
    body = placement_client.request('GET', f'/allocations/{consumer}',
                                    microversion='1.38').json()
    assert body['consumer_type'] == 'MIGRATION'
    assert set(body['allocations']) == {cloud.cn1}


def test_a_microversion_placement_does_not_offer_is_version_too_old(placement_client, cloud):
    with pytest.raises(PlacementVersionTooOld):
        placement_client.put_allocations(str(uuid.uuid4()), _claim(cloud.cn1, VCPU=1),
                                         project_id=PROJECT, user_id=USER,
                                         consumer_generation=None, microversion='1.40')


def test_deleting_allocations_twice_reports_deleted_then_nothing(placement_client, cloud):
    consumer = str(uuid.uuid4())
    placement_client.put_allocations(consumer, _claim(cloud.cn1, VCPU=1), project_id=PROJECT,
                                     user_id=USER, consumer_generation=None)
    assert placement_client.delete_allocations(consumer) is True
    assert placement_client.delete_allocations(consumer) is False
    assert placement_client.get_allocations(consumer).allocations == {}


def test_resource_providers_can_be_listed_by_name_and_tree(placement_client, cloud):
    [cn2] = placement_client.get_resource_providers(name='cn2')
    assert (cn2.uuid, cn2.root_provider_uuid, cn2.parent_provider_uuid) == \
        (cloud.cn2, cloud.cn2, None)
    tree = placement_client.get_resource_providers(in_tree=cloud.cn1_nic)
    assert {rp.uuid for rp in tree} == {cloud.cn1, cloud.cn1_nic}


# --------------------------------------------------------------------- outage


def test_a_stopped_placement_is_unavailable_after_every_attempt_then_works_again(
        placement, placement_conf, placement_client):
    placement.stop()
    with pytest.raises(PlacementUnavailable) as info:
        placement_client.get_resource_providers()
    assert info.value.attempts == placement_conf.placement.max_retries + 1
    placement.start()
    assert placement_client.get_resource_providers() == []


# ------------------------------------------- what Placement accepts (facts)
#
# Request groups that carry constraints but no resources. The request
# translation needs to know exactly what Placement 16 accepts here.

RESOURCELESS_UNSUFFIXED = 'There must be at least one resources or resources[$S] parameter.'
RESOURCELESS_SUFFIXED = ('Resourceless suffixed group request should be specified in '
                         '`same_subtree` query param: bad group(s) - [{}].')


def _resourceless_cases(cloud: Cloud) -> list[tuple[list[tuple[str, str]], int, str | None]]:
    """(query params, status, detail or None) as observed on Placement 16 at 1.36 and 1.39."""
    return [
        ([('required', 'HW_CPU_X86_AVX2')], 400, RESOURCELESS_UNSUFFIXED),
        ([('member_of', f'in:{cloud.agg_a}')], 400, RESOURCELESS_UNSUFFIXED),
        ([('in_tree', cloud.cn1)], 400, RESOURCELESS_UNSUFFIXED),
        ([('resources', '')], 400, None),   # "Badly formed resources parameter ..."
        # A suffixed group without resources is refused unless same_subtree names it ...
        ([('resources', 'VCPU:1'), ('required1', 'HW_NIC_SRIOV')], 400,
         RESOURCELESS_SUFFIXED.format("'1'")),
        ([('resources', 'VCPU:1'), ('member_of1', f'in:{cloud.agg_a}'),
          ('group_policy', 'none')], 400, RESOURCELESS_SUFFIXED.format("'1'")),
        # ... and an unsuffixed group with only constraints next to suffixed
        # groups is refused the same way (it is reported as group '').
        ([('resources1', 'CUSTOM_VF:1'), ('required', 'HW_CPU_X86_AVX2')], 400,
         RESOURCELESS_SUFFIXED.format("''")),
        ([('resources1', 'CUSTOM_VF:1'), ('member_of', f'in:{cloud.agg_a}')], 400,
         RESOURCELESS_SUFFIXED.format("''")),
        ([('resources1', 'CUSTOM_VF:1'), ('in_tree', cloud.cn1)], 400,
         RESOURCELESS_SUFFIXED.format("''")),
        # Accepted: the resourceless suffixed group is named in same_subtree.
        ([('resources', 'VCPU:1'), ('required_x', 'HW_NIC_SRIOV'), ('same_subtree', '_x'),
          ('group_policy', 'none')], 200, None),
        # Accepted: unsuffixed constraints next to unsuffixed resources.
        ([('resources1', 'CUSTOM_VF:1'), ('resources', 'VCPU:1'),
          ('required', 'HW_CPU_X86_AVX2'), ('group_policy', 'none')], 200, None),
    ]


@pytest.mark.parametrize('microversion', ['1.36', '1.39'])
def test_what_placement_accepts_for_groups_with_constraints_but_no_resources(
        placement_client, cloud, microversion):
    for params, status, detail in _resourceless_cases(cloud):
        response = placement_client.request('GET', '/allocation_candidates',
                                            microversion=microversion, params=params)
        assert response.status_code == status, params
        if detail is not None:
            assert response.json()['errors'][0]['detail'].strip().endswith(detail), params


def test_a_resourceless_group_in_same_subtree_is_mapped_but_allocates_nothing(
        placement_client, cloud):
    response = placement_client.request(
        'GET', '/allocation_candidates', microversion=MIN_MICROVERSION,
        params=[('resources', 'VCPU:1'), ('required_x', 'HW_NIC_SRIOV'),
                ('same_subtree', '_x'), ('group_policy', 'none')])
    [ar] = response.json()['allocation_requests']
    assert ar['allocations'] == {cloud.cn1: {'resources': {'VCPU': 1}}}
    assert ar['mappings'] == {'': [cloud.cn1], '_x': [cloud.cn1_nic]}
