"""The checks the race tests rely on (tests/fixtures/invariants.py) find what they must."""
from __future__ import annotations

import json

import pytest

from tests.fixtures.invariants import (
    audit_allocations,
    capacity,
    expected_allocations,
    group_violations,
    over_capacity,
)

INVENTORY = {'VCPU': {'total': 4, 'reserved': 0, 'allocation_ratio': 2.0},
             'MEMORY_MB': {'total': 8704, 'reserved': 512, 'allocation_ratio': 1.0}}


def test_capacity_is_total_minus_reserved_times_the_allocation_ratio():
    assert capacity(INVENTORY['VCPU']) == 8
    assert capacity(INVENTORY['MEMORY_MB']) == 8192


def test_usage_at_capacity_is_fine_and_one_more_is_reported():
    inventories = {'rp1': INVENTORY}

    assert over_capacity(inventories, {'rp1': {'VCPU': 8, 'MEMORY_MB': 8192}}) == []
    assert over_capacity(inventories, {'rp1': {'VCPU': 9, 'MEMORY_MB': 8192}}) == [
        'rp1 VCPU: used 9 > capacity 8']


def test_usage_of_a_class_without_inventory_is_reported():
    assert over_capacity({'rp1': INVENTORY}, {'rp1': {'DISK_GB': 1}}) == [
        'rp1 DISK_GB: used 1 > capacity 0']


def test_expected_allocations_read_a_selections_allocation_request():
    text = json.dumps({'allocations': {'rp1': {'resources': {'VCPU': 1}}}, 'mappings': {}})

    assert expected_allocations(text) == {'rp1': {'VCPU': 1}}


@pytest.mark.parametrize('held, placed, field', [
    ({'i1': {'rp1': {'VCPU': 1}}, 'x': {'rp1': {'VCPU': 1}}}, {'i1': {'rp1': {'VCPU': 1}}},
     'leaked'),
    ({}, {'i1': {'rp1': {'VCPU': 1}}}, 'missing'),
    ({'i1': {'rp2': {'VCPU': 1}}}, {'i1': {'rp1': {'VCPU': 1}}}, 'different'),
])
def test_the_audit_names_leaked_missing_and_different_allocations(held, placed, field):
    audit = audit_allocations(held, placed)

    assert not audit.clean
    assert getattr(audit, field)


def test_the_audit_is_clean_when_placement_holds_exactly_what_was_announced():
    held = {'i1': {'rp1': {'VCPU': 1, 'MEMORY_MB': 512}}}

    assert audit_allocations(held, {'i1': {'rp1': {'MEMORY_MB': 512, 'VCPU': 1}}}).clean


def test_group_violations_name_the_crowded_hosts_of_each_group():
    held = {'a': {'rp1': {'VCPU': 1}}, 'b': {'rp1': {'VCPU': 1}}, 'c': {'rp2': {'VCPU': 1}}}
    groups = {'g1': ['a', 'b', 'c'], 'g2': ['c']}

    assert group_violations(held, groups, {'rp1': 'cn1', 'rp2': 'cn2'}) == {
        'g1': {'cn1': ['a', 'b']}}
    assert group_violations(held, groups, {'rp1': 'cn1'}, max_per_host=2) == {}
