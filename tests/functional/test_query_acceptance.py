"""Translated queries against the REAL Placement 16: accepted, and meaning what they should.

Every query the translation builds must be one Placement answers with 200 at
microversion 1.36, in particular the rewrites of groups without resources
(where Nova's own query gets a 400) and the baremetal flavor. Where the
rewrite changes the query's shape, the candidates show that its meaning is
the intended one.

The world: two compute nodes with a GPU child provider each, one baremetal
node, and one "confidential" node with every hardware capability trait and a
memory encryption child provider (as Nova 34's libvirt driver reports SEV).

    cn1 (in AZ aggregate az1; AVX2, VIRTIO_PACKED, HYPERTHREADING, OWNER_NOVA)
      +- cn1-gpu  (VGPU; CUSTOM_NVIDIA_A16)
      +- cn1-nic  (SRIOV_NET_VF, NET_BW_EGR_KILOBIT_PER_SEC; CUSTOM_PHYSNET_PUBLIC)
    cn2 (no aggregate; OWNER_NOVA only)
      +- cn2-gpu  (VGPU; CUSTOM_NVIDIA_A16)
      +- cn2-nic  (SRIOV_NET_VF, NET_BW_EGR_KILOBIT_PER_SEC; CUSTOM_PHYSNET_PUBLIC)
    bm1 (CUSTOM_BAREMETAL_GOLD; OWNER_NOVA)
    cn3 (no DISK_GB, so the cases above never find it; PMEM namespaces; vTPM, secure
         boot, stateless firmware, maxphysaddr, PCI socket affinity and the request
         filters' traits; OWNER_NOVA)
      +- cn3_amd_sev (MEM_ENCRYPTION_CONTEXT; HW_CPU_X86_AMD_SEV)
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from oslo_config import cfg

from scheduler.catalog.catalog import HostCatalog
from scheduler.conf import parse_args
from scheduler.objects.spec import Aggregate, Destination, RequestGroup, RequestSpec
from scheduler.request.filters import load_request_filters, run_request_filters
from scheduler.request.translate import build_query
from scheduler.simulate.embedded_placement import EmbeddedPlacement
from tests.builders import nova_spec
from tests.fixtures.request_specs import (
    AZ1_AGG,
    CN_UUID,
    LIMIT,
    PORT_UUID,
    sample_spec,
)

MICROVERSION = 'placement 1.36'
CN1 = CN_UUID
CN2 = str(uuid.uuid5(uuid.NAMESPACE_URL, 'cn2'))
BM1 = str(uuid.uuid5(uuid.NAMESPACE_URL, 'bm1'))
CN3 = str(uuid.uuid5(uuid.NAMESPACE_URL, 'cn3'))
CN3_SEV = str(uuid.uuid5(uuid.NAMESPACE_URL, 'cn3_amd_sev'))
GPU_ONLY_AGG = str(uuid.uuid5(uuid.NAMESPACE_URL, 'gpu-only'))
CUSTOM_TRAITS = ('CUSTOM_NVIDIA_A16', 'CUSTOM_PHYSNET_PUBLIC', 'CUSTOM_MAINTENANCE', 'CUSTOM_GPU')
PMEM_CLASSES = ('CUSTOM_PMEM_NAMESPACE_4GB', 'CUSTOM_PMEM_NAMESPACE_SMALL')
# What cn3 can do: the derived translations' traits and the request filters' traits.
CN3_TRAITS = (
    'OWNER_NOVA', 'COMPUTE_SECURITY_TPM_1_2', 'COMPUTE_SECURITY_TPM_2_0',
    'COMPUTE_SECURITY_TPM_TIS', 'COMPUTE_SECURITY_TPM_CRB', 'COMPUTE_SECURITY_UEFI_SECURE_BOOT',
    'COMPUTE_SECURITY_STATELESS_FIRMWARE', 'COMPUTE_ADDRESS_SPACE_PASSTHROUGH',
    'COMPUTE_ADDRESS_SPACE_EMULATED', 'COMPUTE_SOCKET_PCI_NUMA_AFFINITY',
    'HW_CPU_HYPERTHREADING', 'COMPUTE_ACCELERATORS', 'COMPUTE_NET_VIRTIO_PACKED',
    'COMPUTE_REMOTE_MANAGED_PORTS', 'COMPUTE_EPHEMERAL_ENCRYPTION',
    'COMPUTE_EPHEMERAL_ENCRYPTION_LUKS', 'COMPUTE_SOUND_MODEL_VIRTIO',
    'COMPUTE_SECURITY_TPM_SECRET_SECURITY_USER', 'COMPUTE_IMAGE_TYPE_QCOW2',
    'COMPUTE_STORAGE_BUS_VIRTIO', 'COMPUTE_GRAPHICS_MODEL_VIRTIO', 'COMPUTE_NET_VIF_MODEL_VIRTIO',
    'HW_ARCH_X86_64', 'COMPUTE_VIOMMU_MODEL_INTEL')
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
    for resource_class in ('CUSTOM_BAREMETAL_GOLD', *PMEM_CLASSES):
        api.call('PUT', f'/resource_classes/{resource_class}')
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
    api.provider('cn3', CN3, inventories={'VCPU': 16, 'PCPU': 8, 'MEMORY_MB': 32768,
                                          'CUSTOM_PMEM_NAMESPACE_4GB': 4,
                                          'CUSTOM_PMEM_NAMESPACE_SMALL': 2},
                 traits=CN3_TRAITS)
    api.provider('cn3_amd_sev', CN3_SEV, parent=CN3, inventories={'MEM_ENCRYPTION_CONTEXT': 15},
                 traits=('OWNER_NOVA', 'HW_CPU_X86_AMD_SEV'))
    yield api
    embedded_placement.wipe()


@dataclass
class Case:
    spec: RequestSpec
    in_tree: str | None = None
    limit: int | None = LIMIT
    roots: frozenset[str] | None = None   # the root providers the candidates must come from


def scheduler_conf(**options: Any) -> cfg.ConfigOpts:
    conf = parse_args([], default_config_files=[])
    for name, value in options.items():
        conf.set_override(name, value, group='scheduler')
    return conf


def roots_of(response: requests.Response) -> frozenset[str]:
    body = response.json()
    summaries = body['provider_summaries']
    return frozenset(summaries[rp]['root_provider_uuid']
                     for request in body['allocation_requests'] for rp in request['allocations'])


CASES = {
    'plain': Case(nova_spec(), roots=frozenset({CN1, CN2})),
    'swap and ephemeral': Case(nova_spec(swap=1025, ephemeral_gb=10)),
    'boot from volume': Case(nova_spec(is_bfv=True)),
    'dedicated': Case(nova_spec(extra_specs={'hw:cpu_policy': 'dedicated'})),
    'dedicated, emulator isolate, thread require': Case(
        nova_spec(extra_specs={'hw:cpu_policy': 'dedicated',
                               'hw:emulator_threads_policy': 'isolate',
                               'hw:cpu_thread_policy': 'require'}),
        roots=frozenset({CN1})),
    'mixed with a dedicated mask': Case(
        nova_spec(extra_specs={'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '^0-1'})),
    'baremetal: standard classes zeroed, one custom class': Case(
        nova_spec(extra_specs={'resources:VCPU': '0', 'resources:MEMORY_MB': '0',
                               'resources:DISK_GB': '0', 'resources:CUSTOM_BAREMETAL_GOLD': '1'}),
        roots=frozenset({BM1})),
    'granular groups with isolate': Case(
        nova_spec(extra_specs={'resources1:VGPU': '1', 'trait1:CUSTOM_NVIDIA_A16': 'required',
                               'resources_NET:SRIOV_NET_VF': '1',
                               'trait_NET:CUSTOM_PHYSNET_PUBLIC': 'required',
                               'group_policy': 'isolate'}),
        roots=frozenset({CN1, CN2})),
    'availability zone': Case(nova_spec(destination=Destination(aggregates=[AZ1_AGG])),
                              roots=frozenset({CN1})),
    'in_tree': Case(nova_spec(), in_tree=CN2, roots=frozenset({CN2})),
    'no limit (group hint)': Case(nova_spec(hints={'group': [str(uuid.uuid4())]})),
    'QoS port group with same_subtree': Case(
        nova_spec(requested_resources=[RequestGroup(
            requester_id=PORT_UUID, resources={'NET_BW_EGR_KILOBIT_PER_SEC': 1000},
            required_traits={'CUSTOM_PHYSNET_PUBLIC'})], same_subtree=[[PORT_UUID]]),
        roots=frozenset({CN1, CN2})),
    'the sample spec of the wire samples': Case(sample_spec(), in_tree=CN1,
                                                roots=frozenset({CN1})),
    # Groups without resources (Nova: resources= / resources1= -> 400).
    'AZ with every resource in numbered groups': Case(
        nova_spec(extra_specs=ALL_GRANULAR, destination=Destination(aggregates=[AZ1_AGG])),
        roots=frozenset({CN1})),
    'unsuffixed traits with every resource in numbered groups': Case(
        nova_spec(extra_specs={**ALL_GRANULAR, 'trait:HW_CPU_X86_AVX2': 'required'}),
        roots=frozenset({CN1})),
    'unsuffixed forbidden trait with every resource in numbered groups': Case(
        nova_spec(extra_specs={**ALL_GRANULAR, 'trait:HW_CPU_X86_AVX2': 'forbidden'}),
        roots=frozenset({CN2})),
    'in_tree with every resource in numbered groups': Case(
        nova_spec(extra_specs={**ALL_GRANULAR, 'resources2:SRIOV_NET_VF': '1',
                               'group_policy': 'none'}),
        in_tree=CN2, roots=frozenset({CN2})),
    'in_tree and AZ with every resource in numbered groups (contradictory: no candidates)': Case(
        nova_spec(extra_specs=ALL_GRANULAR, destination=Destination(aggregates=[AZ1_AGG])),
        in_tree=CN2, roots=frozenset()),
    'a numbered group with traits only': Case(
        nova_spec(extra_specs={'trait1:CUSTOM_NVIDIA_A16': 'required'}),
        roots=frozenset({CN1, CN2})),
    'a numbered group with a trait no provider has (no candidates)': Case(
        nova_spec(extra_specs={'trait1:CUSTOM_MAINTENANCE': 'required'}), roots=frozenset()),
    # Requirements derived from hw:* extra specs and image properties (Nova's
    # ResourceRequest._translate_*_request, nova/scheduler/utils.py).
    # Boot from volume: no DISK_GB, so cn3 can be a candidate; only its traits make it one.
    'memory encryption: a context from the SEV child, its trait there too': Case(
        nova_spec(is_bfv=True, extra_specs={'hw:mem_encryption': 'true'},
                  image_props={'hw_firmware_type': 'uefi', 'hw_machine_type': 'q35'}),
        roots=frozenset({CN3})),
    'memory encryption asked by the image': Case(
        nova_spec(is_bfv=True, image_props={'hw_firmware_type': 'uefi',
                                            'hw_mem_encryption': True}),
        roots=frozenset({CN3})),
    'persistent memory namespaces': Case(
        nova_spec(is_bfv=True, extra_specs={'hw:pmem': '4GB,4GB,SMALL'}), roots=frozenset({CN3})),
    'vTPM 2.0 CRB': Case(
        nova_spec(is_bfv=True, extra_specs={'hw:tpm_version': '2.0', 'hw:tpm_model': 'tpm-crb'}),
        roots=frozenset({CN3})),
    'vTPM 1.2 from the image': Case(
        nova_spec(is_bfv=True, image_props={'hw_tpm_version': '1.2'}), roots=frozenset({CN3})),
    'PCI NUMA affinity socket': Case(
        nova_spec(is_bfv=True, extra_specs={'hw:pci_numa_affinity_policy': 'socket'}),
        roots=frozenset({CN3})),
    'secure boot required': Case(
        nova_spec(is_bfv=True, image_props={'os_secure_boot': 'required'}),
        roots=frozenset({CN3})),
    'maxphysaddr passthrough': Case(
        nova_spec(is_bfv=True, extra_specs={'hw:maxphysaddr_mode': 'passthrough'}),
        roots=frozenset({CN3})),
    'maxphysaddr emulate': Case(
        nova_spec(is_bfv=True, image_props={'hw_maxphysaddr_mode': 'emulate'}),
        roots=frozenset({CN3})),
    'stateless firmware': Case(
        nova_spec(is_bfv=True, image_props={'hw_firmware_type': 'uefi',
                                            'hw_firmware_stateless': True}),
        roots=frozenset({CN3})),
    'every hardware request at once, with pinned CPUs and a thread policy': Case(
        nova_spec(is_bfv=True,
                  extra_specs={'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'require',
                               'hw:emulator_threads_policy': 'isolate',
                               'hw:mem_encryption': 'true', 'hw:pmem': 'SMALL',
                               'hw:tpm_version': '2.0', 'hw:pci_numa_affinity_policy': 'socket',
                               'os:secure_boot': 'required', 'hw:maxphysaddr_mode': 'emulate'},
                  image_props={'hw_firmware_type': 'uefi', 'hw_firmware_stateless': True}),
        roots=frozenset({CN3})),
    'hardware traits with every resource in numbered groups go to root_required': Case(
        nova_spec(extra_specs={'resources:VCPU': '0', 'resources:MEMORY_MB': '0',
                               'resources:DISK_GB': '0', 'resources1:PCPU': '1',
                               'hw:tpm_version': '2.0', 'os:secure_boot': 'required'}),
        roots=frozenset({CN3})),
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
    spec = nova_spec(extra_specs=ALL_GRANULAR, destination=Destination(aggregates=[AZ1_AGG]))
    query = build_query(spec, limit=LIMIT).query
    candidate = api.candidates(query.to_querystring()).json()['allocation_requests'][0]
    consumer = str(uuid.uuid4())

    api.call('PUT', f'/allocations/{consumer}',
             dict(candidate, project_id=str(uuid.uuid4()), user_id=str(uuid.uuid4()),
                  consumer_generation=None), expect=(204,))

    allocations = api.call('GET', f'/allocations/{consumer}').json()['allocations']
    assert [a['resources'] for a in allocations.values()] == [{'VGPU': 1}]
    api.call('DELETE', f'/allocations/{consumer}', expect=(204,))


def test_placement_accepts_the_query_after_every_request_filter_and_it_finds_the_capable_host(
        api: Api) -> None:
    # Every Nova request filter with every option on (but routed networks: the spec names
    # none), on a spec asking for everything a trait filter reacts to.
    catalog = HostCatalog(default_cell_uuid=str(uuid.uuid4()))
    catalog.update_aggregates([Aggregate(id=1, uuid=GPU_ONLY_AGG, name='gpu-only', hosts=['cn1'],
                                         metadata={'trait:CUSTOM_GPU': 'required'})])
    conf = scheduler_conf(query_placement_for_image_type_support=True,
                          enable_isolated_aggregate_filtering=True, image_metadata_prefilter=True)
    spec = nova_spec(
        is_bfv=False, root_gb=0, root_required=(), root_forbidden=(),
        extra_specs={'accel:device_profile': 'fpga', 'hw:virtio_packed_ring': 'true',
                     'hw:ephemeral_encryption': 'true', 'hw:ephemeral_encryption_format': 'luks',
                     'hw:sound_model': 'virtio', 'hw:tpm_version': '2.0'},
        image_props={'hw_disk_bus': 'virtio', 'hw_video_model': 'virtio',
                     'hw_vif_model': 'virtio', 'hw_architecture': 'x86_64',
                     'hw_viommu_model': 'intel'})
    spec.image.disk_format = 'qcow2'
    spec.project_id = str(uuid.uuid4())
    spec.pci_requests = {'nova_object.data': {'requests': [{'nova_object.data': {
        'count': 1, 'alias_name': None, 'request_id': str(uuid.uuid4()),
        'spec': [{'remote_managed': 'True'}]}}]}}
    filters = load_request_filters([*conf.scheduler.request_filters, 'owner_nova_filter'])
    run_request_filters(filters, spec, catalog, conf)
    query = build_query(spec, limit=LIMIT).query

    response = api.candidates(query.to_querystring())

    assert response.status_code == 200, (query.describe(), response.text)
    assert ('member_of', f'!in:{GPU_ONLY_AGG}') in query.to_params()
    assert roots_of(response) == frozenset({CN3}), query.describe()
