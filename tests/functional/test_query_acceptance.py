"""Translated queries against the REAL Placement 16: accepted, and meaning what they should.

Every query the translation builds must be one Placement answers with 200 at
microversion 1.36, in particular the rewrites of groups without resources
(where Nova's own query gets a 400) and the baremetal flavor. Where the
rewrite changes the query's shape, the candidates show that its meaning is
the intended one.

The world: two compute nodes with a GPU child provider each, and one
baremetal node.

    cn1 (in AZ aggregate az1; AVX2, VIRTIO_PACKED, HYPERTHREADING, OWNER_NOVA)
      +- cn1-gpu  (VGPU; CUSTOM_NVIDIA_A16)
      +- cn1-nic  (SRIOV_NET_VF, NET_BW_EGR_KILOBIT_PER_SEC; CUSTOM_PHYSNET_PUBLIC)
    cn2 (no aggregate; OWNER_NOVA only)
      +- cn2-gpu  (VGPU; CUSTOM_NVIDIA_A16)
      +- cn2-nic  (SRIOV_NET_VF, NET_BW_EGR_KILOBIT_PER_SEC; CUSTOM_PHYSNET_PUBLIC)
    bm1 (CUSTOM_BAREMETAL_GOLD; OWNER_NOVA)
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from scheduler.objects.spec import Destination, RequestGroup, RequestSpec
from scheduler.request.translate import build_query
from scheduler.simulate.embedded_placement import EmbeddedPlacement
from tests.fixtures.request_specs import (
    AZ1_AGG,
    CN_UUID,
    LIMIT,
    PORT_UUID,
    make_spec,
    sample_spec,
)

MICROVERSION = 'placement 1.36'
CN1 = CN_UUID
CN2 = str(uuid.uuid5(uuid.NAMESPACE_URL, 'cn2'))
BM1 = str(uuid.uuid5(uuid.NAMESPACE_URL, 'bm1'))
CUSTOM_TRAITS = ('CUSTOM_NVIDIA_A16', 'CUSTOM_PHYSNET_PUBLIC', 'CUSTOM_MAINTENANCE')
ALL_GRANULAR = {'resources:VCPU': '0', 'resources:MEMORY_MB': '0', 'resources:DISK_GB': '0',
                'resources1:VGPU': '1'}


class Api:
    def __init__(self, url: str):
        self.url = url
        self.session = requests.Session()
        self.session.headers.update({'X-Auth-Token': 'admin', 'Accept': 'application/json',
                                     'OpenStack-API-Version': MICROVERSION})

    def call(self, method: str, path: str, body: Any = None,
             expect: tuple[int, ...] = (200, 201, 204)) -> requests.Response:
        response = self.session.request(method, self.url + path, json=body, timeout=30)
        assert response.status_code in expect, (method, path, response.status_code,
                                                response.text)
        return response

    def provider(self, name: str, rp_uuid: str, *, parent: str | None = None,
                 inventories: dict[str, int], traits: tuple[str, ...] = (),
                 aggregates: tuple[str, ...] = ()) -> None:
        self.call('POST', '/resource_providers',
                  {'name': name, 'uuid': rp_uuid, 'parent_provider_uuid': parent})
        for path, body in (
                ('inventories', {'inventories': {rc: {'total': n}
                                                 for rc, n in inventories.items()}}),
                ('traits', {'traits': list(traits)}),
                ('aggregates', {'aggregates': list(aggregates)})):
            generation = self.call('GET', f'/resource_providers/{rp_uuid}').json()['generation']
            self.call('PUT', f'/resource_providers/{rp_uuid}/{path}',
                      dict(body, resource_provider_generation=generation))

    def candidates(self, querystring: str) -> requests.Response:
        return self.session.get(f'{self.url}/allocation_candidates?{querystring}', timeout=30)


@pytest.fixture(scope='module')
def api(embedded_placement: EmbeddedPlacement) -> Iterator[Api]:
    embedded_placement.wipe()
    api = Api(embedded_placement.url)
    for trait in CUSTOM_TRAITS:
        api.call('PUT', f'/traits/{trait}')
    api.call('PUT', '/resource_classes/CUSTOM_BAREMETAL_GOLD')
    compute = {'VCPU': 16, 'PCPU': 8, 'MEMORY_MB': 32768, 'DISK_GB': 1000}
    for name, rp_uuid, traits, aggs in (
            ('cn1', CN1, ('HW_CPU_X86_AVX2', 'COMPUTE_NET_VIRTIO_PACKED',
                          'HW_CPU_HYPERTHREADING', 'OWNER_NOVA'), (AZ1_AGG,)),
            ('cn2', CN2, ('OWNER_NOVA',), ())):
        api.provider(name, rp_uuid, inventories=compute, traits=traits, aggregates=aggs)
        api.provider(f'{name}-gpu', str(uuid.uuid5(uuid.NAMESPACE_URL, f'{name}-gpu')),
                     parent=rp_uuid, inventories={'VGPU': 4}, traits=('CUSTOM_NVIDIA_A16',))
        api.provider(f'{name}-nic', str(uuid.uuid5(uuid.NAMESPACE_URL, f'{name}-nic')),
                     parent=rp_uuid,
                     inventories={'SRIOV_NET_VF': 8, 'NET_BW_EGR_KILOBIT_PER_SEC': 10000},
                     traits=('CUSTOM_PHYSNET_PUBLIC',))
    api.provider('bm1', BM1, inventories={'CUSTOM_BAREMETAL_GOLD': 1}, traits=('OWNER_NOVA',))
    yield api
    embedded_placement.wipe()


@dataclass
class Case:
    spec: RequestSpec
    in_tree: str | None = None
    limit: int | None = LIMIT
    roots: frozenset[str] | None = None   # the root providers the candidates must come from


def roots_of(response: requests.Response) -> frozenset[str]:
    body = response.json()
    summaries = body['provider_summaries']
    return frozenset(summaries[rp]['root_provider_uuid']
                     for request in body['allocation_requests'] for rp in request['allocations'])


CASES = {
    'plain': Case(make_spec(), roots=frozenset({CN1, CN2})),
    'swap and ephemeral': Case(make_spec(swap=1025, ephemeral_gb=10)),
    'boot from volume': Case(make_spec(is_bfv=True)),
    'dedicated': Case(make_spec(extra_specs={'hw:cpu_policy': 'dedicated'})),
    'dedicated, emulator isolate, thread require': Case(
        make_spec(extra_specs={'hw:cpu_policy': 'dedicated',
                               'hw:emulator_threads_policy': 'isolate',
                               'hw:cpu_thread_policy': 'require'}),
        roots=frozenset({CN1})),
    'mixed with a dedicated mask': Case(
        make_spec(extra_specs={'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '^0-1'})),
    'baremetal: standard classes zeroed, one custom class': Case(
        make_spec(extra_specs={'resources:VCPU': '0', 'resources:MEMORY_MB': '0',
                               'resources:DISK_GB': '0', 'resources:CUSTOM_BAREMETAL_GOLD': '1'}),
        roots=frozenset({BM1})),
    'granular groups with isolate': Case(
        make_spec(extra_specs={'resources1:VGPU': '1', 'trait1:CUSTOM_NVIDIA_A16': 'required',
                               'resources_NET:SRIOV_NET_VF': '1',
                               'trait_NET:CUSTOM_PHYSNET_PUBLIC': 'required',
                               'group_policy': 'isolate'}),
        roots=frozenset({CN1, CN2})),
    'availability zone': Case(make_spec(destination=Destination(aggregates=[AZ1_AGG])),
                              roots=frozenset({CN1})),
    'in_tree': Case(make_spec(), in_tree=CN2, roots=frozenset({CN2})),
    'no limit (group hint)': Case(make_spec(hints={'group': [str(uuid.uuid4())]})),
    'QoS port group with same_subtree': Case(
        make_spec(requested_resources=[RequestGroup(
            requester_id=PORT_UUID, resources={'NET_BW_EGR_KILOBIT_PER_SEC': 1000},
            required_traits={'CUSTOM_PHYSNET_PUBLIC'})], same_subtree=[[PORT_UUID]]),
        roots=frozenset({CN1, CN2})),
    'the sample spec of the wire samples': Case(sample_spec(), in_tree=CN1,
                                                roots=frozenset({CN1})),
    # Groups without resources (Nova: resources= / resources1= -> 400).
    'AZ with every resource in numbered groups': Case(
        make_spec(extra_specs=ALL_GRANULAR, destination=Destination(aggregates=[AZ1_AGG])),
        roots=frozenset({CN1})),
    'unsuffixed traits with every resource in numbered groups': Case(
        make_spec(extra_specs={**ALL_GRANULAR, 'trait:HW_CPU_X86_AVX2': 'required'}),
        roots=frozenset({CN1})),
    'unsuffixed forbidden trait with every resource in numbered groups': Case(
        make_spec(extra_specs={**ALL_GRANULAR, 'trait:HW_CPU_X86_AVX2': 'forbidden'}),
        roots=frozenset({CN2})),
    'in_tree with every resource in numbered groups': Case(
        make_spec(extra_specs={**ALL_GRANULAR, 'resources2:SRIOV_NET_VF': '1',
                               'group_policy': 'none'}),
        in_tree=CN2, roots=frozenset({CN2})),
    'in_tree and AZ with every resource in numbered groups (contradictory: no candidates)': Case(
        make_spec(extra_specs=ALL_GRANULAR, destination=Destination(aggregates=[AZ1_AGG])),
        in_tree=CN2, roots=frozenset()),
    'a numbered group with traits only': Case(
        make_spec(extra_specs={'trait1:CUSTOM_NVIDIA_A16': 'required'}),
        roots=frozenset({CN1, CN2})),
    'a numbered group with a trait no provider has (no candidates)': Case(
        make_spec(extra_specs={'trait1:CUSTOM_MAINTENANCE': 'required'}), roots=frozenset()),
}


@pytest.mark.parametrize('case', CASES.values(), ids=CASES.keys())
def test_placement_accepts_every_translated_query(api: Api, case: Case) -> None:
    query = build_query(case.spec, limit=case.limit, in_tree=case.in_tree).query

    response = api.candidates(query.to_querystring())

    assert response.status_code == 200, (query.describe(), response.text)
    if case.roots is not None:
        assert roots_of(response) == case.roots, query.describe()


def test_nova_literal_query_for_a_resourceless_unsuffixed_group_is_refused(api: Api) -> None:
    # The contrast: what Nova sends for 'AZ with every resource in numbered groups'.
    response = api.candidates(f'limit=1000&member_of=in%3A{AZ1_AGG}&resources=&resources1='
                              f'VGPU%3A1&root_required=OWNER_NOVA%2C%21COMPUTE_STATUS_DISABLED')

    assert response.status_code == 400
    assert 'Badly formed resources parameter' in response.text


def test_a_candidate_of_a_resourceless_group_query_can_be_claimed(api: Api) -> None:
    # The mappings of such a candidate name the resourceless group's provider,
    # which has no allocation; the claim (PUT with mappings) must still work.
    spec = make_spec(extra_specs=ALL_GRANULAR, destination=Destination(aggregates=[AZ1_AGG]))
    query = build_query(spec, limit=LIMIT).query
    candidate = api.candidates(query.to_querystring()).json()['allocation_requests'][0]
    consumer = str(uuid.uuid4())

    api.call('PUT', f'/allocations/{consumer}',
             dict(candidate, project_id=str(uuid.uuid4()), user_id=str(uuid.uuid4()),
                  consumer_generation=None), expect=(204,))

    allocations = api.call('GET', f'/allocations/{consumer}').json()['allocations']
    assert [a['resources'] for a in allocations.values()] == [{'VGPU': 1}]
    api.call('DELETE', f'/allocations/{consumer}', expect=(204,))
