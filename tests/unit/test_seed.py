"""The pure part of the seeding helpers: inventory shorthand."""
from __future__ import annotations

import pytest

from scheduler.simulate.seed import normalize_inventories


def test_an_int_is_the_total():
    assert normalize_inventories({'VCPU': 8}) == {'VCPU': {'total': 8}}


def test_a_dict_is_passed_through_with_all_its_fields():
    spec = {'total': 10, 'reserved': 1, 'allocation_ratio': 2.0, 'min_unit': 1, 'max_unit': 4,
            'step_size': 1}
    assert normalize_inventories({'DISK_GB': spec}) == {'DISK_GB': spec}


def test_an_unknown_field_is_refused_before_placement_sees_it():
    with pytest.raises(ValueError, match='totl'):
        normalize_inventories({'VCPU': {'totl': 8}})


def test_a_dict_without_total_is_refused():
    with pytest.raises(ValueError, match='total'):
        normalize_inventories({'VCPU': {'reserved': 1}})


def test_a_bool_is_not_taken_for_an_int():
    with pytest.raises(ValueError):
        normalize_inventories({'VCPU': True})
