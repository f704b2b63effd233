"""Property tests: whatever arrives, the codec answers with a decoded object or
InvalidInput (with a bounded reason naming the argument), never anything else."""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scheduler.exceptions import InvalidInput
from scheduler.objects import codec
from scheduler.objects.spec import Aggregate, RequestSpec
from tests.fixtures import wire_samples as wire

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SPEC = wire.spec_obj()
LEGACY = wire.legacy_args()
AGGREGATES = wire.cast_args('update_aggregates')['aggregates']
INSTANCE_LIST = wire.cast_args('update_instance_info')['instance_info']

scalars = (st.none() | st.booleans() | st.integers() | st.floats()
           | st.text(max_size=12)
           | st.sampled_from(['nova', 'RequestSpec', 'Flavor', '1.15', '2.0', 'x' * 5000,
                              '512da3ec-8966-583a-b60c-fb098da337f6', 'true']))
json_values = st.recursive(
    scalars,
    lambda children: (st.lists(children, max_size=5)
                      | st.dictionaries(st.text(max_size=8) | st.sampled_from(
                          ['nova_object.name', 'nova_object.data', 'nova_object.version',
                           'nova_object.namespace', 'flavor', 'image', 'cells']),
                          children, max_size=5)),
    max_leaves=25)


def _decodes_or_rejects(decode: Callable[[], Any], root: str | tuple[str, ...]) -> Any:
    try:
        result = decode()
    except InvalidInput as error:
        assert error.reason.startswith(root), error.reason
        assert len(error.reason) <= 300
        event('rejected')
        return None
    event('decoded')
    return result


# Mutations of a real sample ------------------------------------------------------------


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a node of a JSON value, the root's children first."""
    found = []
    items = (value.items() if isinstance(value, dict)
             else enumerate(value) if isinstance(value, list) else ())
    for key, child in items:
        found.append(prefix + (key,))
        found.extend(_paths(child, prefix + (key,)))
    return found


def _nest(value: Any, levels: int) -> Any:
    for _ in range(levels):
        value = [value] if levels % 2 else {'k': value}
    return value


def _wrong_type(value: Any) -> Any:
    if isinstance(value, bool):
        return 'true'
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return {'0': value}
    if isinstance(value, dict):
        return list(value.values())
    return 0


@st.composite
def mutated(draw: st.DrawFn, sample: Any) -> Any:
    """The sample with one to four random fields deleted, replaced, retyped or nested."""
    value = copy.deepcopy(sample)
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(value)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = value
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        action = draw(st.sampled_from(['delete', 'replace', 'retype', 'nest', 'null']))
        if action == 'delete':
            if isinstance(parent, dict):
                del parent[key]
            else:
                parent.pop(key)
        elif action == 'replace':
            parent[key] = draw(json_values)
        elif action == 'retype':
            parent[key] = _wrong_type(parent[key])
        elif action == 'nest':
            parent[key] = _nest(parent[key], draw(st.integers(1, 60)))
        else:
            parent[key] = None
    return value


# RequestSpec ---------------------------------------------------------------------------


@FUZZ
@given(json_values)
def test_any_json_value_as_spec_obj_decodes_or_is_rejected(value):
    result = _decodes_or_rejects(lambda: codec.decode_request_spec(value), 'spec_obj')
    assert result is None or isinstance(result, RequestSpec)


def _assert_within_bounds(spec: RequestSpec) -> None:
    """What the scheduler relies on after a successful decode."""
    limits = codec.DecodeLimits()
    flavor = spec.flavor
    for amount in (flavor.memory_mb, flavor.vcpus, flavor.root_gb, flavor.ephemeral_gb,
                   flavor.swap):
        assert type(amount) is int and 0 <= amount <= limits.max_amount
    assert len(flavor.extra_specs) <= limits.max_extra_specs
    assert all(type(v) is str for v in flavor.extra_specs.values())
    assert 1 <= spec.num_instances <= limits.max_instances
    assert len(spec.scheduler_hints) <= limits.max_hints
    assert all(type(v) is list and all(type(x) is str for x in v)
               for v in spec.scheduler_hints.values())
    group = spec.instance_group
    if group is not None:
        assert group.policies == ([group.policy] if group.policy and not group.policies
                                  else group.policies)
    for request_group in spec.requested_resources:
        assert all(0 <= n <= limits.max_amount for n in request_group.resources.values())


# Override some of the real spec's fields with arbitrary values.
@FUZZ
@given(st.dictionaries(st.sampled_from(sorted(SPEC['nova_object.data'])) | st.text(max_size=8),
                       json_values, max_size=4))
def test_arbitrary_fields_in_a_real_request_spec_decode_or_are_rejected(fields):
    value = {**SPEC, 'nova_object.data': {**SPEC['nova_object.data'], **fields}}
    result = _decodes_or_rejects(lambda: codec.decode_request_spec(value), 'spec_obj')
    if result is not None:
        _assert_within_bounds(result)


@FUZZ
@given(mutated(SPEC))
def test_a_mutated_real_spec_obj_decodes_or_is_rejected(value):
    result = _decodes_or_rejects(lambda: codec.decode_request_spec(value), 'spec_obj')
    if result is not None:
        _assert_within_bounds(result)


@FUZZ
@given(st.data())
def test_a_real_spec_obj_with_one_field_nested_too_deep_is_always_rejected(data):
    value = copy.deepcopy(SPEC)
    path = data.draw(st.sampled_from(_paths(value['nova_object.data'])))
    parent = value['nova_object.data']
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = _nest(parent[path[-1]], 40)
    with pytest.raises(InvalidInput, match='nested deeper than 32 levels'):
        codec.decode_request_spec(value)


@FUZZ
@given(mutated(LEGACY['request_spec']), mutated(LEGACY['filter_properties']) | json_values)
def test_a_mutated_real_legacy_request_decodes_or_is_rejected(request_spec, filter_properties):
    result = _decodes_or_rejects(
        lambda: codec.decode_legacy_request(request_spec, filter_properties),
        ('request_spec', 'filter_properties'))
    if result is not None:
        _assert_within_bounds(result)


# Casts and instance uuids --------------------------------------------------------------


@FUZZ
@given(mutated(AGGREGATES) | json_values)
def test_mutated_aggregates_decode_or_are_rejected(value):
    result = _decodes_or_rejects(lambda: codec.decode_aggregates(value), 'aggregates')
    assert result is None or all(isinstance(a, Aggregate) for a in result)


@FUZZ
@given(mutated(INSTANCE_LIST) | json_values)
def test_mutated_instance_lists_decode_or_are_rejected(value):
    result = _decodes_or_rejects(
        lambda: codec.decode_instance_uuids_from_instance_list(value), 'instance_info')
    assert result is None or all(isinstance(u, str) for u in result)


@FUZZ
@given(st.lists(st.uuids().map(str) | st.text(max_size=40), max_size=8) | json_values)
def test_any_instance_uuids_value_validates_or_is_rejected(value):
    result = _decodes_or_rejects(lambda: codec.validate_instance_uuids(value), 'instance_uuids')
    if result is not None:
        assert result == value and len({u.lower() for u in result}) == len(result)


@FUZZ
@given(st.lists(st.uuids().map(str), min_size=1, max_size=20, unique=True))
def test_distinct_uuids_always_validate_in_order(uuids):
    assert codec.validate_instance_uuids(uuids) == uuids
