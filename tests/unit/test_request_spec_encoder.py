"""encode_request_spec builds the RequestSpec 1.15 primitive nova-conductor sends."""
from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from scheduler.objects.codec import IMAGE_META_PROPS_FIELDS, encode_request_spec
from scheduler.objects.spec import (
    CellMapping,
    Destination,
    Flavor,
    ImageMeta,
    ImageMetaProps,
    InstanceGroup,
    RequestGroup,
    RequestLevelParams,
    RequestSpec,
)
from tests.fixtures import wire_samples

TIMESTAMPS = {'created_at', 'updated_at', 'deleted_at'}


def _sample_spec_primitive() -> dict[str, Any]:
    return wire_samples.spec_obj()


def _normalise(value: Any) -> Any:
    """Drop what consumers ignore (``nova_object.changes``) and blank timestamp values:
    our dataclasses carry no timestamps, so the encoder sends them as ``null``."""
    if isinstance(value, dict):
        return {k: (None if k in TIMESTAMPS else _normalise(v))
                for k, v in value.items() if k != 'nova_object.changes'}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def _spec_with_sample_values(sample: dict[str, Any]) -> RequestSpec:
    """The sample's boot request, expressed in our dataclasses."""
    data = sample['nova_object.data']
    flavor = data['flavor']['nova_object.data']
    image = data['image']['nova_object.data']
    group = data['instance_group']['nova_object.data']
    dest = data['requested_destination']['nova_object.data']
    return RequestSpec(
        flavor=Flavor(
            id=flavor['id'], flavorid=flavor['flavorid'], name=flavor['name'],
            memory_mb=flavor['memory_mb'], vcpus=flavor['vcpus'], root_gb=flavor['root_gb'],
            ephemeral_gb=flavor['ephemeral_gb'], swap=flavor['swap'],
            rxtx_factor=flavor['rxtx_factor'], vcpu_weight=flavor['vcpu_weight'],
            disabled=flavor['disabled'], is_public=flavor['is_public'],
            description=flavor['description'], extra_specs=dict(flavor['extra_specs'])),
        image=ImageMeta(
            id=image['id'], name=image['name'], status=image['status'],
            visibility=image['visibility'], disk_format=image['disk_format'],
            container_format=image['container_format'], min_ram=image['min_ram'],
            min_disk=image['min_disk'], size=image['size'],
            virtual_size=image['virtual_size'], owner=image['owner'],
            properties=ImageMetaProps(image['properties']['nova_object.data'])),
        instance_uuid=data['instance_uuid'],
        num_instances=data['num_instances'],
        project_id=data['project_id'],
        user_id=data['user_id'],
        availability_zone=data['availability_zone'],
        requested_destination=Destination(host=dest['host'], node=dest['node']),
        instance_group=InstanceGroup(
            uuid=group['uuid'], id=group['id'], name=group['name'],
            user_id=group['user_id'], project_id=group['project_id'], policy=group['policy'],
            policies=list(group['policies']), rules=dict(group['_rules']),
            members=list(group['members']), hosts=list(group['hosts'])),
        scheduler_hints=copy.deepcopy(data['scheduler_hints']),
        is_bfv=data['is_bfv'],
        numa_topology=copy.deepcopy(data['numa_topology']),
        pci_requests=copy.deepcopy(data['pci_requests']),
        network_metadata=dict(data['network_metadata']['nova_object.data']),
        requested_networks=[
            dict(o['nova_object.data'])
            for o in data['requested_networks']['nova_object.data']['objects']],
    )


def _objects(value: Any, path: str = '') -> dict[str, tuple[str, str]]:
    """Every nested nova object: path -> (name, version)."""
    found: dict[str, tuple[str, str]] = {}
    if isinstance(value, dict):
        if 'nova_object.name' in value:
            found[path] = (value['nova_object.name'], value['nova_object.version'])
        for k, v in value.items():
            found.update(_objects(v, f'{path}/{k}'))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found.update(_objects(v, f'{path}[{i}]'))
    return found


# Structure against the real sample --------------------------------------------------


def test_sample_values_encode_to_the_samples_primitive_except_fields_we_do_not_carry():
    sample = _sample_spec_primitive()
    encoded = encode_request_spec(_spec_with_sample_values(sample))

    expected = _normalise(sample)
    data = expected['nova_object.data']
    # Not held by our dataclasses; Nova sends a spec without them before it is persisted
    # (id) or with its lazy defaults (security groups), and tolerates unset image fields.
    del data['id']
    for key in ('protected', 'checksum', 'tags'):
        del data['image']['nova_object.data'][key]
    data['security_groups']['nova_object.data']['objects'] = []

    assert _normalise(encoded) == expected


def test_every_nested_object_has_the_name_and_version_nova_34_sends():
    sample = _sample_spec_primitive()
    encoded = encode_request_spec(_spec_with_sample_values(sample))
    sample_objects = _objects(sample)
    del sample_objects['/nova_object.data/security_groups/nova_object.data/objects[0]']
    assert _objects(encoded) == sample_objects


def test_encoded_versions_match_the_object_schemas():
    schemas = wire_samples.schemas()
    spec = RequestSpec(
        requested_destination=Destination(host='h', cell=CellMapping(uuid='c')),
        requested_resources=[RequestGroup(requester_id='port')],
        instance_group=InstanceGroup(uuid='g', policy='affinity'),
        image=ImageMeta(id='i'))
    for name, version in _objects(encode_request_spec(spec)).values():
        assert schemas[name]['version'] == version, name


def test_encoded_fields_are_known_to_their_object_schema():
    schemas = wire_samples.schemas()
    spec = RequestSpec(
        flavor=Flavor(id=1, flavorid='f', name='m1'),
        image=ImageMeta(id='i', properties=ImageMetaProps(hw_disk_bus='virtio')),
        requested_destination=Destination(
            host='h', node='n', cell=CellMapping(uuid='c', name='cell1'),
            aggregates=['a,b'], forbidden_aggregates={'x'}, allow_cross_cell_move=True),
        requested_resources=[RequestGroup(requester_id='port', resources={'VGPU': 1})],
        request_level_params=RequestLevelParams(root_required={'A'}, root_forbidden={'B'},
                                                same_subtree=[['x', 'y']]),
        instance_group=InstanceGroup(uuid='g', id=3, policy='anti-affinity'),
        requested_networks=[{'network_id': 'net'}],
        network_metadata={'physnets': {'p1'}, 'tunneled': False})

    def check(value: Any) -> None:
        if isinstance(value, dict):
            if 'nova_object.name' in value:
                fields = schemas[value['nova_object.name']]['fields']
                unknown = set(value['nova_object.data']) - set(fields)
                assert not unknown, (value['nova_object.name'], unknown)
                nulls = {k for k, v in value['nova_object.data'].items()
                         if v is None and not fields[k]['nullable']}
                assert not nulls, (value['nova_object.name'], nulls)
            for v in value.values():
                check(v)
        elif isinstance(value, list):
            for v in value:
                check(v)

    check(encode_request_spec(spec))


def test_the_primitive_is_plain_json():
    sample = _sample_spec_primitive()
    encoded = encode_request_spec(_spec_with_sample_values(sample))
    assert json.loads(json.dumps(encoded)) == encoded


# Field rules -------------------------------------------------------------------------


def test_unknown_non_nullable_fields_are_left_unset_not_sent_as_null():
    data = encode_request_spec(RequestSpec())['nova_object.data']
    assert 'instance_uuid' not in data
    assert 'id' not in data
    flavor = data['flavor']['nova_object.data']
    assert 'id' not in flavor and 'flavorid' not in flavor


def test_unknown_nullable_fields_are_sent_as_null():
    data = encode_request_spec(RequestSpec())['nova_object.data']
    for key in ('image', 'numa_topology', 'pci_requests', 'availability_zone',
                'ignore_hosts', 'force_hosts', 'force_nodes', 'requested_destination',
                'instance_group', 'retry', 'project_id', 'user_id'):
        assert key in data and data[key] is None, key


def test_absent_network_metadata_is_novas_lazy_default():
    data = encode_request_spec(RequestSpec())['nova_object.data']
    assert data['network_metadata']['nova_object.data'] == {'physnets': [], 'tunneled': False}


def test_limits_are_the_all_null_scheduler_limits_of_from_components():
    data = encode_request_spec(RequestSpec())['nova_object.data']
    assert data['limits']['nova_object.data'] == {
        'numa_topology': None, 'vcpu': None, 'disk_gb': None, 'memory_mb': None}


def test_destination_carries_only_what_was_requested():
    spec = RequestSpec(requested_destination=Destination(aggregates=['a,b', 'c']))
    dest = encode_request_spec(spec)['nova_object.data']['requested_destination']
    assert dest['nova_object.data'] == {'aggregates': ['a,b', 'c']}


def test_destination_cell_is_a_cell_mapping_with_its_credentials_when_given():
    cell = CellMapping(uuid='c1', name='cell1', transport_url='rabbit://u:p@h/',
                       database_connection='mysql://u:p@h/nova')
    spec = RequestSpec(requested_destination=Destination(host='h', cell=cell,
                                                         forbidden_aggregates={'z', 'y'},
                                                         allow_cross_cell_move=True))
    dest = encode_request_spec(spec)['nova_object.data']['requested_destination']
    assert dest['nova_object.data']['forbidden_aggregates'] == ['y', 'z']
    assert dest['nova_object.data']['allow_cross_cell_move'] is True
    assert dest['nova_object.data']['cell']['nova_object.data'] == {
        'uuid': 'c1', 'name': 'cell1', 'transport_url': 'rabbit://u:p@h/',
        'database_connection': 'mysql://u:p@h/nova', 'disabled': False}


def test_request_groups_carry_every_field_with_sets_as_sorted_lists():
    group = RequestGroup(requester_id='port-1', use_same_provider=True,
                         resources={'NET_BW_EGR_KILOBIT_PER_SEC': 1000},
                         required_traits={'CUSTOM_B', 'CUSTOM_A'}, forbidden_traits={'X'},
                         aggregates=[['a1', 'a2']], forbidden_aggregates={'f'})
    data = encode_request_spec(RequestSpec(requested_resources=[group]))['nova_object.data']
    assert data['requested_resources'] == [{
        'nova_object.name': 'RequestGroup', 'nova_object.namespace': 'nova',
        'nova_object.version': '1.3',
        'nova_object.data': {
            'use_same_provider': True, 'resources': {'NET_BW_EGR_KILOBIT_PER_SEC': 1000},
            'required_traits': ['CUSTOM_A', 'CUSTOM_B'], 'forbidden_traits': ['X'],
            'aggregates': [['a1', 'a2']], 'forbidden_aggregates': ['f'],
            'requester_id': 'port-1', 'provider_uuids': [], 'in_tree': None}}]


def test_empty_request_level_params_have_empty_data_as_in_the_sample():
    data = encode_request_spec(RequestSpec())['nova_object.data']
    assert data['request_level_params']['nova_object.data'] == {}


def test_request_level_params_carry_what_is_set():
    params = RequestLevelParams(root_required={'B', 'A'}, root_forbidden={'C'})
    data = encode_request_spec(RequestSpec(request_level_params=params))['nova_object.data']
    assert data['request_level_params']['nova_object.data'] == {
        'root_required': ['A', 'B'], 'root_forbidden': ['C']}


def test_group_without_the_deprecated_policies_list_gets_it_from_the_policy():
    spec = RequestSpec(instance_group=InstanceGroup(uuid='g', policy='affinity'))
    group = encode_request_spec(spec)['nova_object.data']['instance_group']['nova_object.data']
    assert group['policies'] == ['affinity']
    assert group['policy'] == 'affinity'


def test_image_trait_properties_fold_into_traits_required_and_unknown_ones_are_dropped():
    props = ImageMetaProps({'trait:HW_CPU_X86_AVX2': 'required',
                            'trait:CUSTOM_IGNORED': 'forbidden',
                            'traits_required': ['COMPUTE_NET_VIRTIO_PACKED'],
                            'hw_disk_bus': 'virtio', 'glance_private_note': 'x'})
    spec = RequestSpec(image=ImageMeta(id='i', properties=props))
    image = encode_request_spec(spec)['nova_object.data']['image']['nova_object.data']
    assert image['properties']['nova_object.data'] == {
        'hw_disk_bus': 'virtio',
        'traits_required': ['COMPUTE_NET_VIRTIO_PACKED', 'HW_CPU_X86_AVX2']}


def test_image_props_field_list_is_the_schemas():
    schemas = wire_samples.schemas()
    assert set(schemas['ImageMetaProps']['fields']) == IMAGE_META_PROPS_FIELDS


def test_scheduler_hints_become_lists_of_strings():
    spec = RequestSpec(scheduler_hints={'group': 'g1', 'same_host': ['a', 'b'], 'n': [3]})
    hints = encode_request_spec(spec)['nova_object.data']['scheduler_hints']
    assert hints == {'group': ['g1'], 'same_host': ['a', 'b'], 'n': ['3']}


def test_extra_spec_values_become_strings():
    spec = RequestSpec(flavor=Flavor(extra_specs={'resources:VGPU': 1}))  # type: ignore[dict-item]
    flavor = encode_request_spec(spec)['nova_object.data']['flavor']['nova_object.data']
    assert flavor['extra_specs'] == {'resources:VGPU': '1'}


def test_kept_primitives_are_sent_back_unchanged_and_bare_data_is_wrapped():
    numa = {'nova_object.name': 'InstanceNUMATopology', 'nova_object.namespace': 'nova',
            'nova_object.version': '1.3', 'nova_object.data': {'cells': []}}
    spec = RequestSpec(numa_topology=numa, pci_requests={'requests': []})
    data = encode_request_spec(spec)['nova_object.data']
    assert data['numa_topology'] == numa
    assert data['pci_requests'] == {
        'nova_object.name': 'InstancePCIRequests', 'nova_object.namespace': 'nova',
        'nova_object.version': '1.1', 'nova_object.data': {'requests': []}}


# Round trip through our own decoder ----------------------------------------------


def test_sample_spec_round_trips_through_the_codec():
    codec = pytest.importorskip('scheduler.objects.codec')
    spec = _spec_with_sample_values(_sample_spec_primitive())
    decoded = codec.decode_request_spec(encode_request_spec(spec))
    assert encode_request_spec(decoded) == encode_request_spec(spec)
    assert decoded.flavor == spec.flavor
    assert decoded.instance_group == spec.instance_group
    assert decoded.requested_destination == spec.requested_destination
    assert dict(decoded.image.properties) == dict(spec.image.properties)


def test_full_featured_spec_round_trips_through_the_codec():
    codec = pytest.importorskip('scheduler.objects.codec')
    spec = RequestSpec(
        flavor=Flavor(id=1, flavorid='f1', name='m1.small', memory_mb=2048, vcpus=1,
                      root_gb=20, extra_specs={'trait:CUSTOM_SSD': 'required'}),
        image=ImageMeta(id='3c1a7e4e-5a1b-4b7e-8e4d-1a2b3c4d5e6f', name='cirros',
                        properties=ImageMetaProps(hw_architecture='x86_64')),
        instance_uuid='0f0e0d0c-0b0a-4909-8807-060504030201',
        num_instances=3, project_id='p', user_id='u', availability_zone='az2',
        ignore_hosts=['cn-00001'],
        requested_destination=Destination(aggregates=['a1,a2'], forbidden_aggregates={'f1'}),
        instance_group=InstanceGroup(uuid='5c3e1c52-49b6-4f7e-9a57-8f1f0d6c2b11', id=2,
                                     policy='anti-affinity', policies=['anti-affinity'],
                                     rules={'max_server_per_host': '1'}, members=['m1']),
        scheduler_hints={'group': ['5c3e1c52-49b6-4f7e-9a57-8f1f0d6c2b11']},
        requested_resources=[RequestGroup(requester_id='port-1', resources={'VGPU': 1},
                                          required_traits={'CUSTOM_A'})],
        request_level_params=RequestLevelParams(root_required={'CUSTOM_R'}),
    )
    decoded = codec.decode_request_spec(encode_request_spec(spec))
    assert encode_request_spec(decoded) == encode_request_spec(spec)
