"""RequestSpec -> GET /allocation_candidates query: the translation, as a specification.

Rows of the querystrings Nova 34 sends first (ResourceRequest.to_querystring,
nova/scheduler/utils.py), then Nova's rules (ResourceRequest.from_request_spec),
then where this scheduler deliberately differs from Nova
(groups without resources, refusals instead of a Placement 400).

Queries are compared decoded, as (parameter, value) pairs.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

import pytest

from scheduler.exceptions import RequestTranslationError
from scheduler.objects.spec import Destination, RequestGroup, RequestSpec
from scheduler.request.cpu_policy import parse_cpu_spec
from scheduler.request.translate import ROOT_CONSTRAINTS_SUFFIX, build_query
from tests.builders import nova_spec
from tests.fixtures import wire_samples
from tests.fixtures.request_specs import (
    AZ1_AGG,
    AZ1_AGG_B,
    BASE,
    CN_UUID,
    LIMIT,
    OTHER_AGG,
    PORT_UUID,
    ROOT,
    sample_spec,
)


def params(*pairs: str) -> list[tuple[str, str]]:
    """``'name=value'`` strings -> the sorted (name, value) pairs of a decoded query."""
    return sorted(tuple(p.split('=', 1)) for p in pairs)  # type: ignore[misc]


@dataclass
class Row:
    spec: RequestSpec
    expected: list[str]
    limit: int | None = LIMIT
    in_tree: str | None = None
    pinning_translate: bool = True
    cpu_pinning_requested: bool = False
    warnings: list[str] = field(default_factory=list)


def check(row: Row) -> None:
    before = copy.deepcopy(row.spec)
    translated = build_query(row.spec, limit=row.limit, in_tree=row.in_tree,
                             pinning_translate=row.pinning_translate)
    assert translated.query.to_params() == params(*row.expected)
    assert translated.cpu_pinning_requested is row.cpu_pinning_requested
    for fragment in row.warnings:
        assert any(fragment in w for w in translated.warnings), translated.warnings
    if not row.warnings:
        assert translated.warnings == []
    assert row.spec == before, 'the translation must not modify the spec'


# ---------------------------------------------------------------------------------------------
# The querystrings Nova 34 sends (ResourceRequest.to_querystring; same request filters applied)
# ---------------------------------------------------------------------------------------------
NOVA_REFERENCE_TABLE = {
    'plain 4 vCPU / 4 GB / 40 GB':
        Row(nova_spec(), ['limit=1000', BASE, ROOT]),
    'swap 1025 MB is rounded up to 2 GB and added with ephemeral 10 GB to the root disk':
        Row(nova_spec(swap=1025, ephemeral_gb=10),
            ['limit=1000', 'resources=DISK_GB:52,MEMORY_MB:4096,VCPU:4', ROOT]),
    'boot from volume requests no root disk':
        Row(nova_spec(is_bfv=True), ['limit=1000', 'resources=MEMORY_MB:4096,VCPU:4', ROOT]),
    'hw:cpu_policy=dedicated asks PCPU instead of VCPU':
        Row(nova_spec(extra_specs={'hw:cpu_policy': 'dedicated'}),
            ['limit=1000', 'resources=DISK_GB:40,MEMORY_MB:4096,PCPU:4', ROOT],
            cpu_pinning_requested=True),
    'the fallback query of a dedicated request asks VCPU (pinning translation off)':
        Row(nova_spec(extra_specs={'hw:cpu_policy': 'dedicated'}),
            ['limit=1000', BASE, ROOT], pinning_translate=False),
    'dedicated + emulator threads isolate + thread policy require':
        Row(nova_spec(extra_specs={'hw:cpu_policy': 'dedicated',
                                   'hw:emulator_threads_policy': 'isolate',
                                   'hw:cpu_thread_policy': 'require'}),
            ['limit=1000', 'required=HW_CPU_HYPERTHREADING',
             'resources=DISK_GB:40,MEMORY_MB:4096,PCPU:5', ROOT],
            cpu_pinning_requested=True),
    'hw:cpu_policy=mixed with dedicated mask ^0-1 pins vCPUs 2 and 3':
        Row(nova_spec(extra_specs={'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '^0-1'}),
            ['limit=1000', 'resources=DISK_GB:40,MEMORY_MB:4096,PCPU:2,VCPU:2', ROOT]),
    'baremetal: standard classes zeroed, one custom class':
        Row(nova_spec(extra_specs={'resources:VCPU': '0', 'resources:MEMORY_MB': '0',
                                   'resources:DISK_GB': '0',
                                   'resources:CUSTOM_BAREMETAL_GOLD': '1'}),
            ['limit=1000', 'resources=CUSTOM_BAREMETAL_GOLD:1', ROOT]),
    'granular groups resources1 and resources_NET with group_policy=isolate':
        Row(nova_spec(extra_specs={'resources1:VGPU': '1', 'trait1:CUSTOM_NVIDIA_A16': 'required',
                                   'resources_NET:SRIOV_NET_VF': '1',
                                   'trait_NET:CUSTOM_PHYSNET_PUBLIC': 'required',
                                   'group_policy': 'isolate'}),
            ['group_policy=isolate', 'limit=1000', 'required1=CUSTOM_NVIDIA_A16',
             'required_NET=CUSTOM_PHYSNET_PUBLIC', BASE, 'resources1=VGPU:1',
             'resources_NET=SRIOV_NET_VF:1', ROOT]),
    'availability zone az1 (aggregates set by the AZ request filter)':
        Row(nova_spec(destination=Destination(aggregates=[AZ1_AGG])),
            ['limit=1000', f'member_of=in:{AZ1_AGG}', BASE, ROOT]),
    'requested host resolved to one compute node':
        Row(nova_spec(), [f'in_tree={CN_UUID}', 'limit=1000', BASE, ROOT], in_tree=CN_UUID),
    'requested host with two nodes: the caller passes no limit':
        Row(nova_spec(), [BASE, ROOT], limit=None),
    'server group hint removes the limit':
        Row(nova_spec(hints={'group': ['f538ff7e-f4b6-54ce-ad7b-103192301d5e']}), [BASE, ROOT]),
    'same_host hint removes the limit':
        Row(nova_spec(hints={'same_host': [CN_UUID]}), [BASE, ROOT]),
    'different_host hint removes the limit':
        Row(nova_spec(hints={'different_host': [CN_UUID]}), [BASE, ROOT]),
    'neutron QoS port group with same_subtree':
        Row(nova_spec(requested_resources=[RequestGroup(
                requester_id=PORT_UUID, resources={'NET_BW_EGR_KILOBIT_PER_SEC': 1000},
                required_traits={'CUSTOM_PHYSNET_PHYSNET0', 'CUSTOM_VNIC_TYPE_NORMAL'})],
                same_subtree=[[PORT_UUID]]),
            ['limit=1000', f'required{PORT_UUID}=CUSTOM_PHYSNET_PHYSNET0,CUSTOM_VNIC_TYPE_NORMAL',
             BASE, f'resources{PORT_UUID}=NET_BW_EGR_KILOBIT_PER_SEC:1000', ROOT,
             f'same_subtree={PORT_UUID}']),
    'isolated aggregates: forbidden aggregates':
        Row(nova_spec(destination=Destination(forbidden_aggregates={OTHER_AGG})),
            ['limit=1000', f'member_of=!in:{OTHER_AGG}', BASE, ROOT]),
}


@pytest.mark.parametrize('row', NOVA_REFERENCE_TABLE.values(), ids=NOVA_REFERENCE_TABLE.keys())
def test_reproduces_the_querystrings_of_nova(row: Row) -> None:
    check(row)


def test_reproduces_the_querystring_nova_sends_for_thesample_spec() -> None:
    sample = wire_samples.load('placement_query_from_sample_spec.json')
    in_tree = sample['groups'][0]['nova_object.data']['in_tree']

    translated = build_query(sample_spec(), limit=LIMIT, in_tree=in_tree)

    assert translated.query.to_querystring() == sample['querystring']
    assert translated.query.to_params() == sorted(parse_qsl(sample['querystring']))


# ---------------------------------------------------------------------------------------------
# Nova's rules (ResourceRequest.from_request_spec, nova/scheduler/utils.py)
# ---------------------------------------------------------------------------------------------
NOVA_RULES = {
    'resources:RC overrides the flavor amount of that class':
        Row(nova_spec(extra_specs={'resources:DISK_GB': '10'}),
            ['limit=1000', 'resources=DISK_GB:10,MEMORY_MB:4096,VCPU:4', ROOT]),
    'a flavor class requested in any group is not added again to the unsuffixed group':
        Row(nova_spec(extra_specs={'resources1:VCPU': '2', 'resources2:MEMORY_MB': '512',
                                   'group_policy': 'none'}),
            ['group_policy=none', 'limit=1000', 'resources=DISK_GB:40', 'resources1=VCPU:2',
             'resources2=MEMORY_MB:512', ROOT]),
    'PCPU anywhere replaces the flavor VCPU':
        Row(nova_spec(extra_specs={'resources:PCPU': '4'}),
            ['limit=1000', 'resources=DISK_GB:40,MEMORY_MB:4096,PCPU:4', ROOT]),
    'a zero amount removes the class; a group left empty is dropped':
        Row(nova_spec(extra_specs={'resources1:VGPU': '0', 'resources:DISK_GB': '0'}),
            ['limit=1000', 'resources=MEMORY_MB:4096,VCPU:4', ROOT]),
    'a flavor with no disk at all requests no DISK_GB':
        Row(nova_spec(root_gb=0), ['limit=1000', 'resources=MEMORY_MB:4096,VCPU:4', ROOT]),
    'trait:T=forbidden is a !T in required':
        Row(nova_spec(extra_specs={'trait:CUSTOM_MAINTENANCE': 'forbidden',
                                   'trait:HW_CPU_X86_AVX2': 'required'}),
            ['limit=1000', 'required=HW_CPU_X86_AVX2,!CUSTOM_MAINTENANCE', BASE, ROOT]),
    'image traits_required go to the unsuffixed group':
        Row(nova_spec(image_props={'traits_required': ['COMPUTE_NET_VIRTIO_PACKED']}),
            ['limit=1000', 'required=COMPUTE_NET_VIRTIO_PACKED', BASE, ROOT]),
    'the prefixes are exactly "resources" and "trait": "resource:" is not a Placement key':
        Row(nova_spec(extra_specs={'resource:VCPU': '9', 'traits:CUSTOM_X': 'required'}),
            ['limit=1000', BASE, 'requireds=CUSTOM_X', ROOT, 'same_subtree=s']),
    'the suffix follows the prefix directly, so "traits1:" is trait group "s1", not "1"':
        Row(nova_spec(extra_specs={'traits1:CUSTOM_X': 'required', 'resources1:VGPU': '1',
                                   'group_policy': 'none'}),
            ['group_policy=none', 'limit=1000', BASE, 'requireds1=CUSTOM_X', 'resources1=VGPU:1',
             ROOT,
             'same_subtree=s1']),
    'other extra specs (hw:*, capabilities:*, aggregate_instance_extra_specs:*) are not inputs':
        Row(nova_spec(extra_specs={'hw:numa_nodes': '1', 'capabilities:cpu_arch': 'x86_64',
                                   'aggregate_instance_extra_specs:ssd': 'true'}),
            ['limit=1000', BASE, ROOT]),
    'suffixes may be any 1-64 of [a-zA-Z0-9_-]':
        Row(nova_spec(extra_specs={'resources_a-B9:VGPU': '1'}),
            ['limit=1000', BASE, 'resources_a-B9=VGPU:1', ROOT]),
    'a trait value other than required/forbidden is ignored with a warning, as Nova does':
        Row(nova_spec(extra_specs={'trait:CUSTOM_X': 'preferred'}),
            ['limit=1000', BASE, ROOT],
            warnings=["Only (required, forbidden) traits are supported. Received 'preferred'"]),
    'an invalid group_policy is ignored with a warning, as Nova does':
        Row(nova_spec(extra_specs={'group_policy': 'spread', 'resources1:VGPU': '1'}),
            ['limit=1000', BASE, 'resources1=VGPU:1', ROOT],
            warnings=["Invalid group_policy 'spread'"]),
    'one flavor group plus a port group without group_policy: defaults to none with a warning':
        Row(nova_spec(extra_specs={'resources1:VGPU': '1'}, requested_resources=[RequestGroup(
                requester_id=PORT_UUID, resources={'NET_BW_EGR_KILOBIT_PER_SEC': 1000})]),
            ['group_policy=none', 'limit=1000', BASE, 'resources1=VGPU:1',
             f'resources{PORT_UUID}=NET_BW_EGR_KILOBIT_PER_SEC:1000', ROOT],
            warnings=["the group policy defaults to 'none'"]),
    'the image hw_cpu_policy asks for pinning when the flavor says nothing':
        Row(nova_spec(image_props={'hw_cpu_policy': 'dedicated'}),
            ['limit=1000', 'resources=DISK_GB:40,MEMORY_MB:4096,PCPU:4', ROOT],
            cpu_pinning_requested=True),
    'mixed policy with a realtime mask pins the realtime vCPUs':
        Row(nova_spec(extra_specs={'hw:cpu_policy': 'mixed', 'hw:cpu_realtime': 'yes',
                                   'hw:cpu_realtime_mask': '^0'}),
            ['limit=1000', 'resources=DISK_GB:40,MEMORY_MB:4096,PCPU:3,VCPU:1', ROOT]),
    'mixed policy with emulator threads isolate adds one PCPU':
        Row(nova_spec(extra_specs={'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '3',
                                   'hw:emulator_threads_policy': 'isolate'}),
            ['limit=1000', 'resources=DISK_GB:40,MEMORY_MB:4096,PCPU:2,VCPU:3', ROOT]),
    'thread policy isolate forbids hyperthreading, even without pinning (Nova does so)':
        Row(nova_spec(extra_specs={'hw:cpu_thread_policy': 'isolate'}),
            ['limit=1000', 'required=!HW_CPU_HYPERTHREADING', BASE, ROOT]),
    'the fallback query drops the hyperthreading trait with the rest of the translation':
        Row(nova_spec(extra_specs={'hw:cpu_policy': 'dedicated',
                                   'hw:cpu_thread_policy': 'require'}),
            ['limit=1000', BASE, ROOT], pinning_translate=False),
    'a requested_resources group brings its aggregates and forbidden aggregates':
        Row(nova_spec(requested_resources=[RequestGroup(
                requester_id='port-group-1', resources={'SRIOV_NET_VF': 1},
                aggregates=[[AZ1_AGG_B, AZ1_AGG]], forbidden_aggregates={OTHER_AGG})]),
            ['limit=1000', f'member_ofport-group-1=in:{AZ1_AGG_B},{AZ1_AGG}',
             f'member_ofport-group-1=!in:{OTHER_AGG}', BASE,
             'resourcesport-group-1=SRIOV_NET_VF:1', ROOT]),
    'each requested aggregate OR-set becomes one member_of; several are ANDed':
        Row(nova_spec(destination=Destination(aggregates=[f'{AZ1_AGG},{AZ1_AGG_B}', OTHER_AGG])),
            ['limit=1000', f'member_of=in:{AZ1_AGG_B},{AZ1_AGG}', f'member_of=in:{OTHER_AGG}',
             BASE, ROOT]),
    'a spec without an image translates the flavor alone':
        Row(nova_spec(image=False), ['limit=1000', BASE, ROOT]),
    'a spec before any request filter has no root_required':
        Row(nova_spec(root_required=(), root_forbidden=()), ['limit=1000', BASE]),
}


@pytest.mark.parametrize('row', NOVA_RULES.values(), ids=NOVA_RULES.keys())
def test_follows_nova_rules(row: Row) -> None:
    check(row)


# ---------------------------------------------------------------------------------------------
# Nova defect (RequestGroup.to_queryparams, nova/objects/request_spec.py): groups with
# constraints but no resources.
# Nova sends resources{S}= with an empty value and Placement answers 400. Here the query is
# the valid equivalent the real Placement 16 accepts (tests/functional/test_query_acceptance.py).
# ---------------------------------------------------------------------------------------------
ALL_GRANULAR = {'resources:VCPU': '0', 'resources:MEMORY_MB': '0', 'resources:DISK_GB': '0',
                'resources1:VGPU': '1'}
G = ROOT_CONSTRAINTS_SUFFIX

RESOURCELESS_GROUPS = {
    'an availability zone with every resource in numbered groups gets a resourceless group':
        Row(nova_spec(extra_specs=ALL_GRANULAR, destination=Destination(aggregates=[AZ1_AGG])),
            ['group_policy=none', 'limit=1000', f'member_of{G}=in:{AZ1_AGG}',
             'resources1=VGPU:1', ROOT, f'same_subtree={G}'],
            warnings=["the group policy defaults to 'none'"]),
    'unsuffixed traits without unsuffixed resources are required of the root provider':
        Row(nova_spec(extra_specs={**ALL_GRANULAR, 'trait:HW_CPU_X86_AVX2': 'required',
                                   'trait:CUSTOM_MAINTENANCE': 'forbidden'},
                      image_props={'traits_required': ['COMPUTE_NET_VIRTIO_PACKED']}),
            ['limit=1000', 'resources1=VGPU:1',
             'root_required=COMPUTE_NET_VIRTIO_PACKED,HW_CPU_X86_AVX2,OWNER_NOVA,'
             '!COMPUTE_STATUS_DISABLED,!CUSTOM_MAINTENANCE']),
    'in_tree without unsuffixed resources applies to every group':
        Row(nova_spec(extra_specs={**ALL_GRANULAR, 'resources2:SRIOV_NET_VF': '1',
                                   'group_policy': 'isolate'}),
            ['group_policy=isolate', f'in_tree1={CN_UUID}', f'in_tree2={CN_UUID}', 'limit=1000',
             'resources1=VGPU:1', 'resources2=SRIOV_NET_VF:1', ROOT], in_tree=CN_UUID),
    'in_tree and an availability zone together: the resourceless group is in the tree too':
        Row(nova_spec(extra_specs={**ALL_GRANULAR, 'group_policy': 'none'},
                      destination=Destination(aggregates=[AZ1_AGG])),
            ['group_policy=none', f'in_tree1={CN_UUID}', f'in_tree{G}={CN_UUID}', 'limit=1000',
             f'member_of{G}=in:{AZ1_AGG}', 'resources1=VGPU:1', ROOT, f'same_subtree={G}'],
            in_tree=CN_UUID),
    'a numbered group with only traits is named in a same_subtree of its own':
        Row(nova_spec(extra_specs={'trait1:CUSTOM_PHYSNET_PUBLIC': 'required'}),
            ['limit=1000', BASE, 'required1=CUSTOM_PHYSNET_PUBLIC', ROOT, 'same_subtree=1']),
    'a resourceless numbered group already in a same_subtree is left as it is':
        Row(nova_spec(extra_specs={'resources1:VGPU': '1', 'trait2:CUSTOM_PHYSNET_PUBLIC':
                                   'required', 'group_policy': 'none'},
                      same_subtree=[['1', '2']]),
            ['group_policy=none', 'limit=1000', BASE, 'required2=CUSTOM_PHYSNET_PUBLIC',
             'resources1=VGPU:1', ROOT, 'same_subtree=1,2']),
    'the unsuffixed group with resources keeps its constraints (no rewrite)':
        Row(nova_spec(extra_specs={'resources1:VGPU': '1'},
                      destination=Destination(aggregates=[AZ1_AGG])),
            ['limit=1000', f'member_of=in:{AZ1_AGG}', BASE, 'resources1=VGPU:1', ROOT]),
}


@pytest.mark.parametrize('row', RESOURCELESS_GROUPS.values(), ids=RESOURCELESS_GROUPS.keys())
def test_groups_without_resources_become_a_valid_equivalent_query(row: Row) -> None:
    check(row)


def test_the_resourceless_group_suffix_never_clashes_with_a_flavor_suffix() -> None:
    spec = nova_spec(extra_specs={**ALL_GRANULAR, f'resources{G}:SRIOV_NET_VF': '1',
                                  'group_policy': 'none'},
                     destination=Destination(aggregates=[AZ1_AGG]))

    query = build_query(spec, limit=LIMIT).query

    assert (f'member_of{G}2', f'in:{AZ1_AGG}') in query.to_params()
    assert ('same_subtree', f'{G}2') in query.to_params()


def test_rewrites_are_reported_as_notes_not_warnings() -> None:
    spec = nova_spec(extra_specs=ALL_GRANULAR, destination=Destination(aggregates=[AZ1_AGG]))

    translated = build_query(spec, limit=LIMIT)

    assert any('aggregate constraints' in note for note in translated.notes)
    assert build_query(nova_spec(), limit=LIMIT).notes == []


# ---------------------------------------------------------------------------------------------
# Requests that cannot be a valid query: refused before Placement, with a readable reason
# ---------------------------------------------------------------------------------------------
REFUSED = {
    'two numbered flavor groups without group_policy (Placement would answer 400)':
        (nova_spec(extra_specs={'resources1:VGPU': '1', 'resources2:SRIOV_NET_VF': '1'}),
         'no group_policy'),
    'an unknown standard resource class (Nova would drop it with a warning)':
        (nova_spec(extra_specs={'resources:VGPUS': '1'}), "'VGPUS' is neither"),
    'a custom resource class outside CUSTOM_[A-Z0-9_]+':
        (nova_spec(extra_specs={'resources:CUSTOM_gold': '1'}), "'CUSTOM_gold'"),
    'a negative amount (Nova would drop it with a warning)':
        (nova_spec(extra_specs={'resources:VGPU': '-1'}), 'negative'),
    'an amount that is not an integer (Nova would drop it with a warning)':
        (nova_spec(extra_specs={'resources:VGPU': '1.5'}), 'not an integer'),
    'an unknown standard trait in the flavor':
        (nova_spec(extra_specs={'trait:HW_CPU_X86_AVX9': 'required'}), "'HW_CPU_X86_AVX9'"),
    'a lower-case custom trait':
        (nova_spec(extra_specs={'trait:CUSTOM_fast': 'required'}), "'CUSTOM_fast'"),
    'an invalid trait in the image':
        (nova_spec(image_props={'traits_required': ['NOT_A_TRAIT']}), 'traits_required'),
    'an invalid trait in root_required':
        (nova_spec(root_required=('BOGUS',)), 'root_required'),
    'an invalid group_policy with two numbered flavor groups':
        (nova_spec(extra_specs={'resources1:VGPU': '1', 'resources2:SRIOV_NET_VF': '1',
                                'group_policy': 'spread'}),
         "no group_policy (the value 'spread' is not one of none, isolate)"),
    'a trait both required and forbidden in one group':
        (nova_spec(extra_specs={'trait:HW_CPU_HYPERTHREADING': 'forbidden',
                                'hw:cpu_thread_policy': 'require'}),
         'both required and forbidden: HW_CPU_HYPERTHREADING'),
    'a trait both required and forbidden on the root':
        (nova_spec(root_required=('COMPUTE_STATUS_DISABLED',)), 'both required and forbidden'),
    'a request for no resources at all':
        (nova_spec(extra_specs={'resources:VCPU': '0', 'resources:MEMORY_MB': '0'}, root_gb=0),
         'no resources at all'),
    'forbidden aggregates without unsuffixed resources (cannot be expressed)':
        (nova_spec(extra_specs=ALL_GRANULAR,
                   destination=Destination(forbidden_aggregates={OTHER_AGG})),
         'forbidden aggregates'),
    'isolate with an availability zone and no unsuffixed resources (cannot be expressed)':
        (nova_spec(extra_specs={**ALL_GRANULAR, 'group_policy': 'isolate'},
                   destination=Destination(aggregates=[AZ1_AGG])),
         'group_policy=isolate'),
    'a requested_resources group without requester_id':
        (nova_spec(requested_resources=[RequestGroup(resources={'VGPU': 1})]),
         'no requester_id'),
    'a requested_resources group that asks for nothing':
        (nova_spec(requested_resources=[RequestGroup(requester_id=PORT_UUID)]),
         'asks for nothing'),
    'a requested_resources group whose suffix a flavor group already uses':
        (nova_spec(extra_specs={'resources1:VGPU': '1', 'group_policy': 'none'},
                   requested_resources=[RequestGroup(requester_id='1', resources={'VGPU': 1})]),
         'already used'),
    'a requester_id that cannot be a suffix':
        (nova_spec(requested_resources=[RequestGroup(requester_id='port/1',
                                                     resources={'VGPU': 1})]),
         "'port/1' cannot be a Placement request group suffix"),
    'same_subtree naming a group that does not exist':
        (nova_spec(same_subtree=[['nope']]), 'do not exist'),
    'an aggregate that is not a uuid':
        (nova_spec(destination=Destination(aggregates=['az1'])), "'az1' is not a UUID"),
    'hw:cpu_policy=mixed without a mask':
        (nova_spec(extra_specs={'hw:cpu_policy': 'mixed'}), 'hw:cpu_dedicated_mask'),
    'a dedicated mask naming every vCPU':
        (nova_spec(extra_specs={'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '0-3'}),
         'some but not all'),
    'an unknown CPU policy':
        (nova_spec(extra_specs={'hw:cpu_policy': 'pinned'}), "hw:cpu_policy='pinned'"),
    'an image asking pinning against a shared flavor':
        (nova_spec(extra_specs={'hw:cpu_policy': 'shared'},
                   image_props={'hw_cpu_policy': 'dedicated'}), 'the flavor sets'),
    'an unknown emulator threads policy':
        (nova_spec(extra_specs={'hw:cpu_policy': 'dedicated',
                                'hw:emulator_threads_policy': 'own'}),
         'hw:emulator_threads_policy'),
}


@pytest.mark.parametrize('spec, reason', REFUSED.values(), ids=REFUSED.keys())
def test_refuses_requests_that_cannot_be_a_valid_query(spec: RequestSpec, reason: str) -> None:
    with pytest.raises(RequestTranslationError, match=None) as info:
        build_query(spec, limit=LIMIT)
    assert reason in str(info.value)


@pytest.mark.parametrize('in_tree', ['compute-02', ''])
def test_refuses_an_in_tree_that_is_not_a_uuid(in_tree: str) -> None:
    with pytest.raises(RequestTranslationError, match='in_tree'):
        build_query(nova_spec(), limit=LIMIT, in_tree=in_tree)


def test_refuses_a_limit_below_one() -> None:
    with pytest.raises(RequestTranslationError, match='limit'):
        build_query(nova_spec(), limit=0)


@pytest.mark.parametrize('spec, expected', [
    ('0-3', {0, 1, 2, 3}),
    ('0-3,^1', {0, 2, 3}),
    ('^0-1,0-3', {2, 3}),
    ('1, 5 ,7', {1, 5, 7}),
])
def test_cpu_specs_are_read_as_nova_reads_them(spec: str, expected: set[int]) -> None:
    assert parse_cpu_spec(spec) == expected


@pytest.mark.parametrize('spec', ['a-b', '3-1', '1-'])
def test_malformed_cpu_specs_are_refused(spec: str) -> None:
    with pytest.raises(RequestTranslationError):
        parse_cpu_spec(spec)
