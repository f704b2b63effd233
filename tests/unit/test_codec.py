"""The nova-object codec: real Nova 34 messages in, Nova-exact Selections out,
and every malformed input rejected with InvalidInput naming the field."""
from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.exceptions import ConfigurationError, InvalidInput
from scheduler.objects import codec
from scheduler.objects.codec import DecodeLimits
from scheduler.objects.selection import SchedulerLimits, Selection
from scheduler.objects.spec import Aggregate, CellMapping, Destination, InstanceGroup
from tests.fixtures import wire_samples as wire

GROUP_UUID = 'f538ff7e-f4b6-54ce-ad7b-103192301d5e'
NEW_INSTANCES = ['512da3ec-8966-583a-b60c-fb098da337f6', 'f65be08a-1759-50a6-a1ce-a120a8ec48da']
OBJ_KEYS = {'nova_object.name', 'nova_object.namespace', 'nova_object.version',
            'nova_object.data'}


def _data(primitive: dict[str, Any]) -> dict[str, Any]:
    return primitive['nova_object.data']


def _rejected(call: Callable[[], Any]) -> str:
    with pytest.raises(InvalidInput) as info:
        call()
    return info.value.reason


def _obj(name: str, version: str, data: dict[str, Any]) -> dict[str, Any]:
    return {'nova_object.name': name, 'nova_object.namespace': 'nova',
            'nova_object.version': version, 'nova_object.data': data}


def _cell(**data: Any) -> dict[str, Any]:
    base = {'uuid': '980d6873-f22f-578d-a91b-7fed7b6b634c', 'name': 'cell1',
            'transport_url': 'rabbit://nova:s3cr3t-rabbit@mq.example.org:5672/',
            'database_connection': 'mysql+pymysql://nova:s3cr3t-db@db.example.org/nova',
            'disabled': False}
    base.update(data)
    return _obj('CellMapping', '1.1', base)


# The 4.5 call ----------------------------------------------------------------------------


def test_the_real_4_5_spec_obj_decodes_to_the_boot_request_it_describes():
    spec = codec.decode_request_spec(wire.spec_obj())

    assert (spec.flavor.name, spec.flavor.vcpus, spec.flavor.memory_mb, spec.flavor.root_gb,
            spec.flavor.ephemeral_gb, spec.flavor.swap) == ('g1.medium', 2, 4096, 40, 0, 512)
    assert spec.flavor.id == 42 and spec.flavor.flavorid == '7d2b4f0e-gpu-medium'
    assert spec.flavor.extra_specs['resourcesGPU:VGPU'] == '1'
    assert len(spec.flavor.extra_specs) == 7
    assert spec.image.id == 'a59ee3c6-ad97-5ede-a031-6e92c2f803ec'
    assert spec.image.size == 2361393152  # bytes: above max_amount, still accepted
    assert spec.image.properties.hw_architecture == 'x86_64'
    assert spec.image.properties.traits_required == ['COMPUTE_NET_VIRTIO_PACKED']
    assert spec.image.properties.hw_cpu_policy is None  # unset reads as None
    assert spec.num_instances == 2
    assert spec.instance_uuid == NEW_INSTANCES[0]
    assert (spec.project_id, spec.availability_zone) == ('a4f1c0de5b6e4a8fa1b2c3d4e5f60718',
                                                         'az1')
    assert spec.requested_destination == Destination(host='compute-02',
                                                     node='compute-02.example.org')
    assert spec.scheduler_hints == {'group': [GROUP_UUID]}
    assert spec.get_scheduler_hint('group') == GROUP_UUID
    assert spec.is_bfv is False
    assert spec.requested_resources == []
    assert spec.network_metadata == {'physnets': [], 'tunneled': True}
    assert spec.requested_networks == [{'network_id': '3d55ea00-fab7-5160-80c1-2f91f5c2ac08'}]
    assert spec.ignore_hosts is None and spec.force_hosts is None


def test_the_real_server_group_keeps_policy_policies_and_rules():
    group = codec.decode_request_spec(wire.spec_obj()).instance_group

    assert group.uuid == GROUP_UUID and group.id == 7 and group.name == 'web-anti-affinity'
    assert group.policy == 'anti-affinity'
    assert group.policies == ['anti-affinity']
    assert group.rules == {'max_server_per_host': '1'}
    assert group.hosts == ['compute-03']
    assert set(NEW_INSTANCES) < set(group.members)


def test_numa_topology_and_pci_requests_are_kept_as_the_primitives_nova_sent():
    sample = _data(wire.spec_obj())
    spec = codec.decode_request_spec(wire.spec_obj())

    assert spec.numa_topology == sample['numa_topology']
    assert spec.pci_requests == sample['pci_requests']
    assert spec.numa_topology is not sample['numa_topology']
    assert codec.unwrap(spec.numa_topology)['cells'][0]['cpuset'] == [0, 1]


def test_the_kwargs_sample_and_the_amqp_body_decode_to_the_same_spec():
    from_body = codec.decode_request_spec(wire.spec_obj())
    from_kwargs = codec.decode_request_spec(
        wire.load('select_destinations_kwargs.json')['spec_obj'])
    assert from_body == from_kwargs


def test_the_real_instance_uuids_validate():
    args = wire.call_message()['args']
    assert codec.validate_instance_uuids(args['instance_uuids']) == NEW_INSTANCES


# The 4.0 legacy form ---------------------------------------------------------------------


def test_the_real_4_0_legacy_form_decodes_to_the_same_request_as_the_4_5_form():
    args = wire.legacy_args()
    legacy = codec.decode_legacy_request(args['request_spec'], args['filter_properties'])
    modern = codec.decode_request_spec(wire.spec_obj())

    assert legacy.flavor == modern.flavor
    assert legacy.image == modern.image
    assert legacy.numa_topology == modern.numa_topology
    assert legacy.pci_requests == modern.pci_requests
    assert legacy.requested_destination == modern.requested_destination
    assert legacy.scheduler_hints == modern.scheduler_hints
    for name in ('instance_uuid', 'num_instances', 'project_id', 'user_id',
                 'availability_zone', 'ignore_hosts', 'force_hosts', 'force_nodes'):
        assert getattr(legacy, name) == getattr(modern, name), name


def test_a_legacy_server_group_keeps_policies_unlike_novas_legacy_path():
    args = wire.legacy_args()
    group = codec.decode_legacy_request(args['request_spec'],
                                        args['filter_properties']).instance_group

    assert group.uuid == GROUP_UUID
    assert group.policy == 'anti-affinity'
    assert group.policies == ['anti-affinity']
    assert group.hosts == ['compute-03']
    assert sorted(group.members) == sorted(
        ['c7abaa90-3d88-52a6-ae68-4da001359564', *NEW_INSTANCES])


def test_legacy_group_keys_are_ignored_unless_group_updated_is_true():
    args = wire.legacy_args()
    args['filter_properties']['group_updated'] = False
    spec = codec.decode_legacy_request(args['request_spec'], args['filter_properties'])
    assert spec.instance_group is None


def test_a_legacy_instance_group_object_wins_over_the_group_keys():
    args = wire.legacy_args()
    args['filter_properties']['instance_group'] = _data(wire.spec_obj())['instance_group']
    group = codec.decode_legacy_request(args['request_spec'],
                                        args['filter_properties']).instance_group
    assert group.rules == {'max_server_per_host': '1'}


def test_legacy_collapsed_scalar_hints_become_lists():
    args = wire.legacy_args()
    assert args['filter_properties']['scheduler_hints'] == {'group': GROUP_UUID}
    args['filter_properties']['scheduler_hints']['different_host'] = ['a', 'b']
    args['filter_properties']['scheduler_hints']['n'] = 3
    spec = codec.decode_legacy_request(args['request_spec'], args['filter_properties'])
    assert spec.scheduler_hints == {'group': [GROUP_UUID], 'different_host': ['a', 'b'],
                                    'n': ['3']}


def test_a_legacy_plain_image_folds_glance_trait_properties_and_coerces_strings():
    args = wire.legacy_args()
    props = args['request_spec']['image']['properties']
    props.update({'trait:HW_CPU_X86_AVX512F': 'required', 'trait:CUSTOM_X': 'forbidden',
                  'hw_numa_nodes': '2', 'hw_boot_menu': 'yes', 'glance_only': 'dropped'})
    image = codec.decode_legacy_request(args['request_spec'], args['filter_properties']).image

    assert image.properties.traits_required == ['COMPUTE_NET_VIRTIO_PACKED',
                                                'HW_CPU_X86_AVX512F']
    assert image.properties.hw_numa_nodes == 2
    assert image.properties.hw_boot_menu is True
    assert 'glance_only' not in image.properties


def test_a_legacy_request_without_image_or_filter_properties_decodes():
    args = wire.legacy_args()
    del args['request_spec']['image']
    spec = codec.decode_legacy_request(args['request_spec'], None)
    assert spec.image is None
    assert spec.instance_group is None and spec.scheduler_hints == {}
    assert spec.network_metadata == {'physnets': [], 'tunneled': False}


def test_a_legacy_flavor_may_be_a_plain_dict():
    args = wire.legacy_args()
    args['request_spec']['instance_type'] = _data(args['request_spec']['instance_type'])
    spec = codec.decode_legacy_request(args['request_spec'], args['filter_properties'])
    assert spec.flavor.vcpus == 2


# Version leniency ------------------------------------------------------------------------


def test_newer_minor_versions_unknown_fields_and_changes_are_tolerated():
    sample = wire.spec_obj()
    sample['nova_object.version'] = '1.99'
    sample['nova_object.changes'] = ['anything', 42]
    _data(sample)['field_from_nova_40'] = {'whatever': [1, 2]}
    _data(sample)['flavor']['nova_object.version'] = '1.7.3'
    _data(_data(sample)['flavor'])['new_flavor_field'] = 'x'
    assert codec.decode_request_spec(sample) == codec.decode_request_spec(wire.spec_obj())


def test_an_old_request_spec_without_later_fields_takes_novas_defaults():
    old = _data(wire.spec_obj())
    minimal = _obj('RequestSpec', '1.5', {'flavor': old['flavor']})
    spec = codec.decode_request_spec(minimal)

    assert spec.flavor.vcpus == 2
    assert spec.image is None and spec.instance_group is None
    assert spec.num_instances == 1
    assert spec.scheduler_hints == {} and spec.requested_resources == []
    assert spec.network_metadata == {'physnets': [], 'tunneled': False}
    assert spec.requested_networks == [] and spec.is_bfv is False


@pytest.mark.parametrize('how', ['null', 'absent'])
def test_an_image_that_is_null_or_absent_reads_as_none(how):
    sample = wire.spec_obj()
    if how == 'null':
        _data(sample)['image'] = None
    else:
        del _data(sample)['image']
    assert codec.decode_request_spec(sample).image is None


def test_nullable_collections_read_as_empty_when_null():
    sample = wire.spec_obj()
    for key in ('scheduler_hints', 'requested_resources'):
        _data(sample)[key] = None
    _data(_data(sample)['instance_group'])['members'] = None
    spec = codec.decode_request_spec(sample)
    assert spec.scheduler_hints == {} and spec.requested_resources == []
    assert spec.instance_group.members == []


@pytest.mark.parametrize('data, policy, policies', [
    ({'policy': 'affinity'}, 'affinity', ['affinity']),
    ({'policies': ['soft-anti-affinity']}, 'soft-anti-affinity', ['soft-anti-affinity']),
    ({'policy': None, 'policies': None}, None, []),
    ({}, None, []),
])
def test_group_policy_and_policies_are_derived_from_each_other(data, policy, policies):
    sample = wire.spec_obj()
    _data(sample)['instance_group'] = _obj('InstanceGroup', '1.11', {'uuid': GROUP_UUID, **data})
    group = codec.decode_request_spec(sample).instance_group
    assert (group.policy, group.policies) == (policy, policies)
    assert group == InstanceGroup(uuid=GROUP_UUID, policy=policy, policies=policies)


def test_request_groups_and_request_level_params_decode():
    sample = wire.spec_obj()
    _data(sample)['requested_resources'] = [_obj('RequestGroup', '1.3', {
        'requester_id': 'port-1', 'resources': {'NET_BW_EGR_KILOBIT_PER_SEC': 1000},
        'required_traits': ['CUSTOM_PHYSNET_A'], 'forbidden_traits': [],
        'aggregates': [['a1', 'a2']], 'forbidden_aggregates': ['f1'],
        'in_tree': None, 'provider_uuids': [], 'use_same_provider': True})]
    _data(sample)['request_level_params'] = _obj('RequestLevelParams', '1.1', {
        'root_required': ['COMPUTE_STATUS_ENABLED'], 'same_subtree': [['_A', '_B']]})
    spec = codec.decode_request_spec(sample)

    group = spec.requested_resources[0]
    assert group.requester_id == 'port-1'
    assert group.resources == {'NET_BW_EGR_KILOBIT_PER_SEC': 1000}
    assert group.required_traits == {'CUSTOM_PHYSNET_A'}
    assert group.aggregates == [['a1', 'a2']] and group.forbidden_aggregates == {'f1'}
    assert spec.root_required == {'COMPUTE_STATUS_ENABLED'}
    assert spec.request_level_params.same_subtree == [['_A', '_B']]


_VALID_BY_FIELD_TYPE = {
    'IntegerField': 1, 'FlexibleBooleanField': True, 'ListOfStringsField': ['A'],
    'ListOfIntegersField': [1024], 'ListOfSetsOfIntegersField': [[0, 1]],
    'ListOfDictOfNullableStringsField': [{'device_name': '/dev/vda', 'volume_id': None}],
}


def test_every_image_property_nova_knows_is_kept_and_unknown_ones_are_dropped():
    fields = wire.schemas()['ImageMetaProps']['fields']
    props = {name: _VALID_BY_FIELD_TYPE.get(f['type'], 'value') for name, f in fields.items()}
    sample = wire.spec_obj()
    _data(_data(_data(sample)['image'])['properties']).clear()
    _data(_data(_data(sample)['image'])['properties']).update(props, hw_from_nova_40='x')
    decoded = codec.decode_request_spec(sample).image.properties
    assert dict(decoded) == props


# Secrets ---------------------------------------------------------------------------------


def test_a_destination_cell_decodes_without_showing_its_credentials():
    sample = wire.spec_obj()
    _data(_data(sample)['requested_destination'])['cell'] = _cell()
    spec = codec.decode_request_spec(sample)

    cell = spec.requested_destination.cell
    assert cell.transport_url.startswith('rabbit://nova:s3cr3t-rabbit@')
    assert cell == CellMapping(uuid='980d6873-f22f-578d-a91b-7fed7b6b634c', name='cell1',
                               transport_url=cell.transport_url,
                               database_connection=cell.database_connection)
    assert 's3cr3t' not in repr(spec) and 's3cr3t' not in str(spec)


@pytest.mark.parametrize('bad', [
    {'transport_url': 'rabbit://nova:s3cr3t@mq/' + 'x' * 5000},
    {'database_connection': ['mysql://nova:s3cr3t@db/nova']},
    {'disabled': 'mysql://nova:s3cr3t@db/nova'},
])
def test_a_malformed_cell_is_rejected_without_quoting_its_values(bad):
    sample = wire.spec_obj()
    _data(_data(sample)['requested_destination'])['cell'] = _cell(**bad)
    reason = _rejected(lambda: codec.decode_request_spec(sample))
    assert reason.startswith('spec_obj.requested_destination.cell.')
    assert 's3cr3t' not in reason


def test_reasons_are_bounded_even_for_huge_keys_and_values():
    sample = wire.spec_obj()
    _data(_data(sample)['flavor'])['extra_specs'] = {'k' * 100_000: 'v' * 100_000}
    reason = _rejected(lambda: codec.decode_request_spec(sample))
    assert reason.startswith('spec_obj.flavor.extra_specs[')
    assert len(reason) <= 300


# Malformed input table -------------------------------------------------------------------


def _spec_with(mutate: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    sample = wire.spec_obj()
    mutate(sample)
    return sample


def _set(*path_and_value: Any) -> Callable[[dict[str, Any]], None]:
    """Set a value at a path of field names inside the spec's data (object envelopes
    are stepped through unless the next key is an envelope key); ``'-'`` deletes."""
    *path, value = path_and_value

    def mutate(sample: dict[str, Any]) -> None:
        node: Any = _data(sample)
        for key, next_key in zip(path[:-1], path[1:], strict=True):
            node = node[key]
            if (isinstance(node, dict) and 'nova_object.data' in node
                    and not str(next_key).startswith('nova_object.')):
                node = _data(node)
        if value == '-':
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return mutate


def _top(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(sample: dict[str, Any]) -> None:
        sample[key] = value
    return mutate


def _nested(levels: int) -> Any:
    value: Any = 'leaf'
    for _ in range(levels):
        value = [value]
    return value


_NUMA_CELL = ('numa_topology', 'cells', 0)

MALFORMED_SPECS = [
    ('wrong namespace', _top('nova_object.namespace', 'cinder'),
     "spec_obj: object namespace 'cinder' is not 'nova'"),
    ('another object', _top('nova_object.name', 'Instance'),
     "spec_obj: expected a RequestSpec object, got 'Instance'"),
    ('unknown major version', _top('nova_object.version', '2.0'),
     'spec_obj: unsupported RequestSpec version 2.0'),
    ('malformed version', _top('nova_object.version', 'latest'),
     "spec_obj: malformed RequestSpec version 'latest'"),
    ('data not an object', _top('nova_object.data', []),
     'spec_obj: nova_object.data must be an object, got list'),
    ('flavor missing', _set('flavor', '-'), 'spec_obj.flavor: required field is missing'),
    ('flavor null', _set('flavor', None), 'spec_obj.flavor: must not be null'),
    ('flavor another object', _set('flavor', 'nova_object.name', 'ImageMeta'),
     "spec_obj.flavor: expected a Flavor object, got 'ImageMeta'"),
    ('flavor a string', _set('flavor', 'g1.medium'),
     'spec_obj.flavor: expected a Flavor object, got string'),
    ('negative memory', _set('flavor', 'memory_mb', -1),
     'spec_obj.flavor.memory_mb: must be between 0 and 2147483647'),
    ('absurd vcpus', _set('flavor', 'vcpus', 2**40),
     'spec_obj.flavor.vcpus: must be between 0 and 2147483647'),
    ('root_gb a string', _set('flavor', 'root_gb', '40'),
     'spec_obj.flavor.root_gb: expected an integer, got string'),
    ('vcpus a boolean', _set('flavor', 'vcpus', True),
     'spec_obj.flavor.vcpus: expected an integer, got boolean'),
    ('swap a float', _set('flavor', 'swap', 512.0),
     'spec_obj.flavor.swap: expected an integer, got number'),
    ('memory missing', _set('flavor', 'memory_mb', '-'),
     'spec_obj.flavor.memory_mb: required field is missing'),
    ('too many extra specs', _set('flavor', 'extra_specs',
                                  {f'k{i}': 'v' for i in range(257)}),
     'spec_obj.flavor.extra_specs: more than 256 entries'),
    ('extra spec value not a string', _set('flavor', 'extra_specs', 'hw:numa_nodes', 1),
     "spec_obj.flavor.extra_specs['hw:numa_nodes']: expected a string, got integer"),
    ('extra specs a list', _set('flavor', 'extra_specs', ['a']),
     'spec_obj.flavor.extra_specs: expected an object, got list'),
    ('rxtx_factor not finite', _set('flavor', 'rxtx_factor', float('nan')),
     'spec_obj.flavor.rxtx_factor: expected a finite number'),
    ('oversized string', _set('availability_zone', 'a' * 4097),
     'spec_obj.availability_zone: string longer than 4096 characters'),
    ('too many instances', _set('num_instances', 1001),
     'spec_obj.num_instances: more than 1000 instances'),
    ('zero instances', _set('num_instances', 0),
     'spec_obj.num_instances: must be between 1 and'),
    ('instance uuid not a uuid', _set('instance_uuid', 'not-a-uuid'),
     "spec_obj.instance_uuid: not a UUID: 'not-a-uuid'"),
    ('too many hints', _set('scheduler_hints', {f'h{i}': ['x'] for i in range(65)}),
     'spec_obj.scheduler_hints: more than 64 hints'),
    ('hint value an object', _set('scheduler_hints', 'group', [{'a': 1}]),
     'spec_obj.scheduler_hints.group[0]: expected a string, got object'),
    ('hint value null', _set('scheduler_hints', 'group', None),
     'spec_obj.scheduler_hints.group[0]: expected a string, got null'),
    ('is_bfv a string', _set('is_bfv', 'no'), 'spec_obj.is_bfv: expected a boolean, got string'),
    ('too many ignore_hosts', _set('ignore_hosts', ['h'] * 1001),
     'spec_obj.ignore_hosts: more than 1000 items'),
    ('force_hosts of numbers', _set('force_hosts', [1]),
     'spec_obj.force_hosts[0]: expected a string, got integer'),
    ('image props a plain dict', _set('image', 'properties', {'hw_architecture': 'x86_64'}),
     'spec_obj.image.properties: expected an ImageMetaProps object, got object'),
    ('image int prop not a number', _set('image', 'properties', 'hw_numa_nodes', 'two'),
     'spec_obj.image.properties.hw_numa_nodes: expected an integer, got string'),
    ('image traits not strings', _set('image', 'properties', 'traits_required', [7]),
     'spec_obj.image.properties.traits_required[0]: expected a string, got integer'),
    ('negative image min_ram', _set('image', 'min_ram', -512),
     'spec_obj.image.min_ram: must be between 0 and'),
    ('group members not a list', _set('instance_group', 'members', 'abc'),
     'spec_obj.instance_group.members: expected a list, got string'),
    ('group rules not strings', _set('instance_group', '_rules', 'max_server_per_host', 1),
     "spec_obj.instance_group._rules.max_server_per_host: expected a string, got integer"),
    ('destination another object', _set('requested_destination', 'nova_object.name',
                                        'Selection'),
     "spec_obj.requested_destination: expected a Destination object, got 'Selection'"),
    ('destination host a number', _set('requested_destination', 'host', 2),
     'spec_obj.requested_destination.host: expected a string, got integer'),
    ('request group negative amount', _set('requested_resources', [
        _obj('RequestGroup', '1.3', {'resources': {'VGPU': -1}})]),
     "spec_obj.requested_resources[0].resources.VGPU: must be between 0 and"),
    ('request group traits a string', _set('requested_resources', [
        _obj('RequestGroup', '1.3', {'required_traits': 'CUSTOM_A'})]),
     'spec_obj.requested_resources[0].required_traits: expected a list, got string'),
    ('request groups not a list', _set('requested_resources', {}),
     'spec_obj.requested_resources: expected a list, got object'),
    ('request level params null field', _set('request_level_params', 'root_required', 5),
     'spec_obj.request_level_params.root_required: expected a list, got integer'),
    ('numa cpuset of strings', _set(*_NUMA_CELL, 'cpuset', ['0']),
     'spec_obj.numa_topology.cells[0].cpuset[0]: expected an integer, got string'),
    ('numa cell memory absurd', _set(*_NUMA_CELL, 'memory', 2**31),
     'spec_obj.numa_topology.cells[0].memory: must be between 0 and 2147483647'),
    ('numa cell another object', _set(*_NUMA_CELL[:-1], [{'id': 0}]),
     'spec_obj.numa_topology.cells[0]: expected an InstanceNUMACell object, got object'),
    ('pci requests another object', _set('pci_requests', 'nova_object.name', 'PciDevice'),
     "spec_obj.pci_requests: expected an InstancePCIRequests object, got 'PciDevice'"),
    ('network request another object', _set('requested_networks', 'objects', 0,
                                            'nova_object.name', 'Network'),
     "spec_obj.requested_networks[0]: expected a NetworkRequest object, got 'Network'"),
    ('network metadata tunneled a string', _set('network_metadata', 'tunneled', 'yes'),
     'spec_obj.network_metadata.tunneled: expected a boolean, got string'),
    ('deep nesting in an ignored field', _set('security_groups', _nested(40)),
     'spec_obj.security_groups[0][0]'),
    ('nesting far beyond the stack', _set('retry', _nested(200_000)),
     'nested deeper than 32 levels'),
]


@pytest.mark.parametrize('mutate, expected', [(m, e) for _, m, e in MALFORMED_SPECS],
                         ids=[name for name, _, _ in MALFORMED_SPECS])
def test_a_malformed_spec_obj_is_rejected_with_a_reason_naming_the_field(mutate, expected):
    reason = _rejected(lambda: codec.decode_request_spec(_spec_with(mutate)))
    if expected.startswith('spec_obj'):
        assert reason.startswith(expected), reason
    else:
        assert expected in reason, reason
    assert len(reason) <= 300


def test_a_spec_obj_that_is_not_an_object_is_rejected():
    assert _rejected(lambda: codec.decode_request_spec(None)) == (
        'spec_obj: expected a RequestSpec object, got null')
    assert _rejected(lambda: codec.decode_request_spec('{"nova_object.name": 1}')) == (
        'spec_obj: expected a RequestSpec object, got string')


def test_a_cycle_from_a_python_caller_is_rejected_as_too_deep():
    sample = wire.spec_obj()
    loop: list[Any] = []
    loop.append(loop)
    _data(sample)['retry'] = loop
    assert 'nested deeper than 32 levels' in _rejected(
        lambda: codec.decode_request_spec(sample))


def test_shared_substructures_are_not_mistaken_for_deep_ones():
    sample = wire.spec_obj()
    shared = ['compute-01']
    _data(sample)['ignore_hosts'] = shared
    _data(sample)['force_hosts'] = shared
    spec = codec.decode_request_spec(sample)
    assert spec.ignore_hosts == spec.force_hosts == ['compute-01']


def test_the_error_is_novas_invalid_input_with_its_message_format():
    error = pytest.raises(InvalidInput, codec.decode_request_spec, {}).value
    assert type(error).__module__ == 'nova.exception'
    assert str(error) == 'Invalid input received: ' + error.reason
    assert error.kwargs['code'] == 400


MALFORMED_LEGACY = [
    ('request_spec not a dict', lambda rs, fp: ([], fp),
     'request_spec: expected an object, got list'),
    ('filter_properties not a dict', lambda rs, fp: (rs, 'x'),
     'filter_properties: expected an object, got string'),
    ('no flavor', lambda rs, fp: ({k: v for k, v in rs.items() if k != 'instance_type'}, fp),
     'request_spec.instance_type: required field is missing'),
    ('flavor amount a string', lambda rs, fp: (
        {**rs, 'instance_type': {**_data(rs['instance_type']), 'vcpus': 'two'}}, fp),
     'request_spec.instance_type.vcpus: expected an integer, got string'),
    ('image a list', lambda rs, fp: ({**rs, 'image': ['x']}, fp),
     'request_spec.image: expected an ImageMeta object, got list'),
    ('instance uuid not a uuid', lambda rs, fp: (
        {**rs, 'instance_properties': {**rs['instance_properties'], 'uuid': 'x'}}, fp),
     "request_spec.instance_properties.uuid: not a UUID: 'x'"),
    ('hints a list', lambda rs, fp: (rs, {**fp, 'scheduler_hints': ['group']}),
     'filter_properties.scheduler_hints: expected an object, got list'),
    ('group policies a string', lambda rs, fp: (rs, {**fp, 'group_policies': 'affinity'}),
     'filter_properties.group_policies: expected a list, got string'),
    ('too many instances', lambda rs, fp: ({**rs, 'num_instances': 5000}, fp),
     'request_spec.num_instances: more than 1000 instances'),
    ('too deep', lambda rs, fp: (rs, {**fp, 'retry': _nested(50)}),
     'filter_properties.retry[0]'),
]


@pytest.mark.parametrize('mutate, expected', [(m, e) for _, m, e in MALFORMED_LEGACY],
                         ids=[name for name, _, _ in MALFORMED_LEGACY])
def test_a_malformed_legacy_request_is_rejected_with_a_reason_naming_the_field(mutate,
                                                                               expected):
    args = wire.legacy_args()
    request_spec, filter_properties = mutate(args['request_spec'], args['filter_properties'])
    reason = _rejected(lambda: codec.decode_legacy_request(request_spec, filter_properties))
    assert reason.startswith(expected), reason


# Limits ----------------------------------------------------------------------------------


@pytest.mark.parametrize('limit, expected', [
    ({'max_extra_specs': 6}, 'spec_obj.flavor.extra_specs: more than 6 entries'),
    ({'max_hints': 0}, 'spec_obj.scheduler_hints: more than 0 hints'),
    ({'max_instances': 1}, 'spec_obj.num_instances: more than 1 instances'),
    ({'max_string_length': 35}, 'spec_obj.image.id: string longer than 35 characters'),
    ({'max_list_length': 2}, 'spec_obj.instance_group.members: more than 2 items'),
    ({'max_depth': 7}, 'nested deeper than 7 levels'),
    ({'max_amount': 4095}, 'spec_obj.flavor.memory_mb: must be between 0 and 4095'),
])
def test_configured_limits_apply_to_the_real_sample(limit, expected):
    # Each limit sits just below what the real boot request needs.
    reason = _rejected(lambda: codec.decode_request_spec(wire.spec_obj(),
                                                         limits=DecodeLimits(**limit)))
    if expected.startswith('spec_obj'):
        assert reason.startswith(expected), reason
    else:
        assert reason.startswith('spec_obj.') and expected in reason, reason


def test_the_real_sample_fits_the_default_limits_with_room_to_spare():
    # A NUMA cell's data has 9 entries: max_list_length also bounds kept objects.
    tight = DecodeLimits(max_extra_specs=7, max_hints=1, max_instances=2, max_list_length=9,
                         max_depth=8, max_amount=4096, max_string_length=36)
    assert codec.decode_request_spec(wire.spec_obj(), limits=tight).num_instances == 2


@pytest.mark.parametrize('bad', [{'max_depth': 0}, {'max_depth': 10_000},
                                 {'max_instances': -1}, {'max_amount': True}])
def test_decode_limits_refuse_unsafe_values(bad):
    with pytest.raises(ConfigurationError):
        DecodeLimits(**bad)


# Instance UUIDs --------------------------------------------------------------------------


@pytest.mark.parametrize('value, kwargs, expected', [
    (None, {}, 'instance_uuids: expected a list of UUIDs, got null'),
    ('512da3ec-8966-583a-b60c-fb098da337f6', {}, 'instance_uuids: expected a list of UUIDs'),
    ([], {}, 'instance_uuids: must not be empty'),
    (['512da3ec-8966-583a-b60c-fb098da337f6x'], {}, 'instance_uuids[0]: not a UUID'),
    (['512da3ec8966583ab60cfb098da337f6'], {}, 'instance_uuids[0]: not a UUID'),
    ([7], {}, 'instance_uuids[0]: expected a UUID string, got integer'),
    ([NEW_INSTANCES[0], NEW_INSTANCES[0].upper()], {},
     "instance_uuids[1]: duplicate instance uuid '512DA3EC"),
    ([NEW_INSTANCES[0]] * 1001, {}, 'instance_uuids: more than 1000 instances'),
    (NEW_INSTANCES, {'max_count': 1}, 'instance_uuids: more than 1 instances'),
])
def test_malformed_instance_uuids_are_rejected(value, kwargs, expected):
    reason = _rejected(lambda: codec.validate_instance_uuids(value, **kwargs))
    assert reason.startswith(expected), reason


def test_an_empty_uuid_list_is_accepted_when_allowed():
    assert codec.validate_instance_uuids([], allow_empty=True) == []


def test_the_real_instance_info_casts_decode():
    sync = wire.cast_args('sync_instance_info')
    delete = wire.cast_args('delete_instance_info')
    update = wire.cast_args('update_instance_info')

    assert codec.validate_instance_uuids(sync['instance_uuids'], allow_empty=True) == [
        '4f4b28fb-0d17-5271-aad4-6966e9e7f016', 'c9af0653-27a1-505f-a586-e6fcc5722afe']
    assert codec.validate_instance_uuids([delete['instance_uuid']]) == [
        'ddc9ebcf-a3ce-5679-9761-3752b030aa88']
    assert codec.decode_instance_uuids_from_instance_list(update['instance_info']) == [
        '4f4b28fb-0d17-5271-aad4-6966e9e7f016']


def _instance_list(*instances: dict[str, Any]) -> dict[str, Any]:
    return _obj('InstanceList', '2.6', {'objects': list(instances)})


def _instance(uuid: Any) -> dict[str, Any]:
    return _obj('Instance', '2.8', {'uuid': uuid, 'user_data': 'x' * 100_000})


def test_an_instance_list_reads_only_uuids_so_large_user_data_is_fine():
    assert codec.decode_instance_uuids_from_instance_list(
        _instance_list(_instance(NEW_INSTANCES[0]), _instance(NEW_INSTANCES[1]))) == (
        NEW_INSTANCES)


@pytest.mark.parametrize('value, expected', [
    (_obj('AggregateList', '1.3', {'objects': []}),
     "instance_info: expected an InstanceList object, got 'AggregateList'"),
    (_obj('InstanceList', '1.0', {'objects': []}),
     'instance_info: unsupported InstanceList version 1.0 (only 2.x is understood)'),
    (_instance_list(_instance(NEW_INSTANCES[0]), _instance(NEW_INSTANCES[0])),
     "instance_info[1].uuid: duplicate instance uuid '512da3ec"),
    (_instance_list(_obj('Instance', '2.8', {'host': 'compute-01'})),
     'instance_info[0].uuid: required field is missing'),
    (_instance_list(_instance('../../etc/passwd')),
     "instance_info[0].uuid: not a UUID: '../../etc/passwd'"),
    (_instance_list(*[_instance(NEW_INSTANCES[0])] * 10_001),
     'instance_info.objects: more than 10000 items'),
])
def test_a_malformed_instance_list_is_rejected(value, expected):
    reason = _rejected(lambda: codec.decode_instance_uuids_from_instance_list(value))
    assert reason.startswith(expected), reason


# Aggregates ------------------------------------------------------------------------------

AZ1 = Aggregate(id=3, uuid='445fd4b4-80eb-55fe-bf3c-0520043da8af', name='az1-hosts',
                hosts=['compute-01', 'compute-02', 'compute-03'],
                metadata={'availability_zone': 'az1'})


def test_the_real_update_aggregates_cast_decodes():
    aggregates = codec.decode_aggregates(wire.cast_args('update_aggregates')['aggregates'])
    assert aggregates == [AZ1]
    assert aggregates[0].availability_zone == 'az1'


def test_the_real_delete_aggregate_cast_decodes():
    aggregate = codec.decode_aggregate(wire.cast_args('delete_aggregate')['aggregate'])
    assert aggregate == Aggregate(id=5, uuid='d48c6f95-ad39-5f4e-b7ad-336d41f270f8',
                                  name='old', hosts=[], metadata={})


def test_update_aggregates_also_accepts_one_primitive_or_an_aggregate_list():
    primitive = wire.cast_args('update_aggregates')['aggregates'][0]
    assert codec.decode_aggregates(primitive) == [AZ1]
    assert codec.decode_aggregates(_obj('AggregateList', '1.3', {'objects': [primitive]})) == [
        AZ1]


def test_aggregate_hosts_and_metadata_may_be_null():
    primitive = wire.cast_args('delete_aggregate')['aggregate']
    _data(primitive).update(hosts=None, metadata=None)
    aggregate = codec.decode_aggregate(primitive)
    assert (aggregate.hosts, aggregate.metadata) == ([], {})


def _aggregate_with(**changes: Any) -> dict[str, Any]:
    primitive = wire.cast_args('update_aggregates')['aggregates'][0]
    for key, value in changes.items():
        if value == '-':
            del _data(primitive)[key]
        else:
            _data(primitive)[key] = value
    return primitive


@pytest.mark.parametrize('value, expected', [
    (_aggregate_with(uuid='-'), 'aggregates.uuid: required field is missing'),
    (_aggregate_with(uuid='az1'), "aggregates.uuid: not a UUID: 'az1'"),
    (_aggregate_with(id='3'), 'aggregates.id: expected an integer, got string'),
    (_aggregate_with(metadata={'availability_zone': None}),
     'aggregates.metadata.availability_zone: expected a string, got null'),
    (_aggregate_with(hosts='compute-01'), 'aggregates.hosts: expected a list, got string'),
    ([_aggregate_with(), 'x'], 'aggregates[1]: expected an Aggregate object, got string'),
    (_obj('AggregateList', '1.3', {'objects': {}}),
     'aggregates.objects: expected a list, got object'),
    (_obj('InstanceList', '2.6', {'objects': []}),
     "aggregates: expected an Aggregate object, got 'InstanceList'"),
])
def test_a_malformed_aggregate_is_rejected(value, expected):
    reason = _rejected(lambda: codec.decode_aggregates(value))
    assert reason.startswith(expected), reason


# Selection encoding ----------------------------------------------------------------------


def _without_changes(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_changes(v) for k, v in value.items() if k != 'nova_object.changes'}
    if isinstance(value, list):
        return [_without_changes(v) for v in value]
    return value


def _changes(value: Any, found: dict[str, set[str]], path: str = '') -> dict[str, set[str]]:
    if isinstance(value, dict):
        if 'nova_object.changes' in value:
            found[path] = set(value['nova_object.changes'])
        for k, v in value.items():
            _changes(v, found, f'{path}/{k}')
    return found


def _sample_selection_objects() -> list[Selection]:
    numa_limits = _data(wire.reply_selections()[0][0])['limits']
    numa_limits = _data(numa_limits)['numa_topology']
    common = dict(cell_uuid='980d6873-f22f-578d-a91b-7fed7b6b634c',
                  allocation_request_version='1.36', availability_zone='az1')
    return [
        Selection(compute_node_uuid='b0e25e65-6f66-5d46-a538-d4bb0ff89847',
                  service_host='compute-02', nodename='compute-02.example.org',
                  allocation_request=json.dumps({
                      'allocations': {
                          'b0e25e65-6f66-5d46-a538-d4bb0ff89847': {
                              'resources': {'VCPU': 2, 'MEMORY_MB': 4096, 'DISK_GB': 10}},
                          '0842759a-3a47-5231-907b-99ab0aad9183': {
                              'resources': {'VGPU': 1}}},
                      'mappings': {'': ['b0e25e65-6f66-5d46-a538-d4bb0ff89847'],
                                   'GPU': ['0842759a-3a47-5231-907b-99ab0aad9183']}}),
                  limits=SchedulerLimits(numa_topology=numa_limits), **common),
        Selection(compute_node_uuid='a67e300c-c355-505f-8231-0ccae0418097',
                  service_host='compute-04', nodename='compute-04.example.org',
                  allocation_request=_data(wire.reply_selections()[0][1])['allocation_request'],
                  **common),
    ]


def test_encoded_selections_match_novas_reply_field_for_field_and_in_order():
    sample = wire.reply_selections()[0]
    encoded = [codec.encode_selection(s) for s in _sample_selection_objects()]

    assert _without_changes(encoded) == _without_changes(sample)
    # Same key order as nova's serializer, so even the JSON text matches.
    assert json.dumps(_without_changes(encoded)) == json.dumps(_without_changes(sample))
    for ours, theirs in zip(encoded, sample, strict=True):
        assert _changes(ours, {}) == _changes(theirs, {})


def test_encoded_selection_fields_and_types_are_those_of_novas_schemas():
    schemas = wire.schemas()
    encoded = codec.encode_selection(_sample_selection_objects()[1])

    assert set(encoded) == OBJ_KEYS | {'nova_object.changes'}
    assert (encoded['nova_object.name'], encoded['nova_object.version']) == (
        'Selection', schemas['Selection']['version'])
    assert set(_data(encoded)) == set(schemas['Selection']['fields'])
    limits = _data(encoded)['limits']
    assert limits['nova_object.version'] == schemas['SchedulerLimits']['version']
    assert set(_data(limits)) == set(schemas['SchedulerLimits']['fields'])
    for name, field in schemas['Selection']['fields'].items():
        value = _data(encoded)[name]
        if field['type'] in ('StringField', 'UUIDField'):
            assert isinstance(value, str) or (value is None and field['nullable']), name


def test_every_sample_selection_round_trips_through_decode_and_encode():
    for per_instance in wire.reply_selections():
        for primitive in per_instance:
            encoded = codec.encode_selection(codec.decode_selection(primitive))
            assert _without_changes(encoded) == _without_changes(primitive)
            assert _changes(encoded, {}) == _changes(primitive, {})


def test_a_selection_without_limits_or_claim_encodes_as_nova_would():
    sel = Selection(compute_node_uuid=NEW_INSTANCES[0], service_host='h', nodename='n',
                    cell_uuid=NEW_INSTANCES[1], allocation_request='null',
                    allocation_request_version=None, availability_zone=None, limits=None)
    data = _data(codec.encode_selection(sel))
    assert data['limits'] is None
    assert data['allocation_request'] == 'null'
    assert data['allocation_request_version'] is None


def test_encoding_copies_the_numa_limits_primitive():
    sel = _sample_selection_objects()[0]
    encoded = codec.encode_selection(sel)
    _data(_data(encoded)['limits'])['numa_topology']['nova_object.version'] = '9.9'
    assert sel.limits.numa_topology['nova_object.version'] == '1.1'


@pytest.mark.parametrize('change, message', [
    ({'compute_node_uuid': 'compute-02'}, 'Selection.compute_node_uuid is not a UUID'),
    ({'cell_uuid': None}, 'Selection.cell_uuid must not be None'),
    ({'service_host': 7}, 'Selection.service_host must be a string'),
    ({'allocation_request': {'allocations': {}}}, 'Selection.allocation_request must be'),
    ({'limits': SchedulerLimits(vcpu='4')}, 'SchedulerLimits.vcpu must be an integer'),
    ({'limits': SchedulerLimits(numa_topology={'cpu_allocation_ratio': 4.0})},
     'SchedulerLimits.numa_topology must be a NUMATopologyLimits primitive'),
])
def test_a_selection_nova_could_not_deserialize_is_refused_as_our_bug(change, message):
    sel = copy.deepcopy(_sample_selection_objects()[1])
    for key, value in change.items():
        setattr(sel, key, value)
    with pytest.raises(codec.EncodeError, match=message):
        codec.encode_selection(sel)


def test_legacy_destinations_match_novas_legacy_reply():
    sample = wire.legacy_reply()
    numa_limits = sample[0]['limits']['numa_topology']
    selections = [
        Selection(compute_node_uuid=NEW_INSTANCES[0], service_host='compute-02',
                  nodename='compute-02.example.org', cell_uuid=NEW_INSTANCES[1],
                  allocation_request='null', allocation_request_version=None,
                  availability_zone='az1', limits=SchedulerLimits(numa_topology=numa_limits)),
        Selection(compute_node_uuid=NEW_INSTANCES[1], service_host='compute-01',
                  nodename='compute-01.example.org', cell_uuid=NEW_INSTANCES[1],
                  allocation_request='null', allocation_request_version=None,
                  availability_zone='az1'),
    ]
    assert [codec.encode_legacy_destination(s) for s in selections] == sample


def test_legacy_destination_limits_hold_only_the_limits_that_are_set():
    sel = _sample_selection_objects()[1]
    sel.limits = SchedulerLimits(vcpu=8, memory_mb=None, disk_gb=0)
    assert codec.encode_legacy_destination(sel)['limits'] == {'vcpu': 8, 'disk_gb': 0}
    sel.limits = None
    assert codec.encode_legacy_destination(sel)['limits'] == {}


def test_a_selection_1_0_without_availability_zone_decodes():
    primitive = wire.reply_selections()[0][1]
    primitive['nova_object.version'] = '1.0'
    del _data(primitive)['availability_zone']
    assert codec.decode_selection(primitive).availability_zone is None


def test_decoded_specs_hold_no_references_into_the_message():
    sample = wire.spec_obj()
    spec = codec.decode_request_spec(sample)
    spec.flavor.extra_specs['new'] = 'x'
    spec.instance_group.hosts.append('compute-09')
    spec.numa_topology['nova_object.data']['cells'].clear()
    assert sample == wire.spec_obj()



@pytest.mark.parametrize('pagesize, accepted', [
    (-1, True), (-2, True), (-3, True), (2048, True), (None, True), (-4, False)])
def test_a_numa_cell_s_page_size_may_be_one_of_novas_symbolic_sizes(pagesize, accepted):
    """hw:mem_page_size=small/large/any reach the scheduler as -1/-2/-3."""
    primitive = wire.spec_obj()
    cell = _data(_data(primitive)['numa_topology'])['cells'][0]
    _data(cell)['pagesize'] = pagesize

    if accepted:
        spec = codec.decode_request_spec(primitive)
        assert _data(_data(spec.numa_topology)['cells'][0])['pagesize'] == pagesize
    else:
        with pytest.raises(InvalidInput, match=r'cells\[0\]\.pagesize'):
            codec.decode_request_spec(primitive)
