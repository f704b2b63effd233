"""generate_workload: a deterministic mix of boot requests, sent as Nova sends them."""
from __future__ import annotations

import pytest

from scheduler.simulate.cloud import TRAIT_AVX2, TRAIT_SSD
from scheduler.simulate.workload import (
    FLAVORS,
    MAX_INSTANCES_PER_REQUEST,
    WorkloadSpec,
    generate_workload,
)

ZONES = ('az1', 'az2', 'az3')


@pytest.fixture(scope='module')
def workload():
    return generate_workload(WorkloadSpec(requests=400, seed=11, availability_zones=ZONES))


def test_same_spec_gives_the_same_requests():
    spec = WorkloadSpec(requests=50, seed=3, availability_zones=ZONES)
    assert generate_workload(spec) == generate_workload(spec)


def test_different_seeds_give_different_requests():
    a = generate_workload(WorkloadSpec(requests=50, seed=3))
    b = generate_workload(WorkloadSpec(requests=50, seed=4))
    assert a != b


def test_the_mix_has_every_flavor_and_every_kind_of_constraint(workload):
    assert {r.flavor.name for r in workload} == {f.name for f in FLAVORS}
    assert any(TRAIT_AVX2 in r.required_traits for r in workload)
    assert any(TRAIT_SSD in r.required_traits for r in workload)
    assert any(r.group_uuid for r in workload)
    assert {r.availability_zone for r in workload} >= set(ZONES)
    assert any(r.availability_zone is None for r in workload)
    assert any(r.num_instances > 1 and not r.group_uuid for r in workload)


def test_instance_counts_are_between_one_and_five(workload):
    assert {r.num_instances for r in workload} <= set(range(1, MAX_INSTANCES_PER_REQUEST + 1))


def test_anti_affinity_requests_boot_several_instances(workload):
    assert all(r.num_instances >= 2 for r in workload if r.group_uuid)


def test_instance_uuids_are_unique_across_the_workload(workload):
    uuids = [u for r in workload for u in r.instance_uuids]
    assert len(uuids) == len(set(uuids))


def test_no_zone_requests_without_zones():
    assert all(r.availability_zone is None
               for r in generate_workload(WorkloadSpec(requests=100, seed=1)))


def test_rpc_arguments_are_a_request_spec_primitive_and_the_instance_uuids(workload):
    request = next(r for r in workload if r.num_instances > 1)
    spec, uuids = request.to_rpc()
    assert spec['nova_object.name'] == 'RequestSpec'
    data = spec['nova_object.data']
    assert uuids == list(request.instance_uuids)
    assert data['num_instances'] == request.num_instances
    assert data['instance_uuid'] == uuids[0]
    flavor = data['flavor']['nova_object.data']
    assert (flavor['vcpus'], flavor['memory_mb'], flavor['root_gb']) == (
        request.flavor.vcpus, request.flavor.memory_mb, request.flavor.root_gb)


def test_required_traits_travel_as_trait_extra_specs(workload):
    request = next(r for r in workload if r.required_traits)
    flavor = request.to_rpc()[0]['nova_object.data']['flavor']['nova_object.data']
    assert flavor['extra_specs'] == {f'trait:{t}': 'required' for t in request.required_traits}


def test_anti_affinity_group_is_filled_as_conductor_fills_it(workload):
    request = next(r for r in workload if r.group_uuid)
    data = request.to_rpc()[0]['nova_object.data']
    group = data['instance_group']['nova_object.data']
    assert group['policy'] == 'anti-affinity'
    assert group['policies'] == ['anti-affinity']
    assert group['_rules'] == {'max_server_per_host': '1'}
    assert group['members'] == list(request.instance_uuids)
    assert group['hosts'] == []
    assert data['scheduler_hints'] == {'group': [request.group_uuid]}


def test_zone_requests_name_the_zone(workload):
    request = next(r for r in workload if r.availability_zone)
    assert request.to_rpc()[0]['nova_object.data']['availability_zone'] == \
        request.availability_zone


def test_context_carries_the_request_id_and_no_token(workload):
    ctx = workload[0].context()
    assert ctx['request_id'] == workload[0].request_id
    assert ctx['request_id'].startswith('req-')
    assert 'auth_token' not in ctx


def test_image_does_not_need_supported_instances(workload):
    image = workload[0].to_rpc()[0]['nova_object.data']['image']['nova_object.data']
    props = image['properties']['nova_object.data']
    assert not {'hw_architecture', 'img_hv_type', 'hw_vm_mode'} & set(props)


def test_negative_request_counts_are_refused():
    with pytest.raises(ValueError):
        WorkloadSpec(requests=-1, seed=0)
