"""generate_cloud: a deterministic synthetic cloud of compute hosts and aggregates."""
from __future__ import annotations

import uuid

import pytest

from scheduler.simulate.cloud import (
    HOST_SIZES,
    TRAIT_AVX2,
    TRAIT_DISABLED,
    TRAIT_SSD,
    CloudSpec,
    Inventory,
    generate_cloud,
    simulation_uuid,
)


def test_same_spec_gives_the_same_cloud():
    assert generate_cloud(CloudSpec(hosts=50, seed=7)) == generate_cloud(CloudSpec(50, 7))


def test_hosts_are_named_in_sequence_with_uuid5_of_the_name():
    cloud = generate_cloud(CloudSpec(hosts=12, seed=1))
    assert [h.name for h in cloud.hosts] == [f'cn-{i:05d}' for i in range(1, 13)]
    for h in cloud.hosts:
        assert uuid.UUID(h.uuid).version == 5
        assert h.uuid == simulation_uuid(h.name)
    assert len({h.uuid for h in cloud.hosts}) == 12


def test_host_uuids_do_not_depend_on_the_seed():
    a = generate_cloud(CloudSpec(hosts=5, seed=1))
    b = generate_cloud(CloudSpec(hosts=5, seed=2))
    assert [h.uuid for h in a.hosts] == [h.uuid for h in b.hosts]


def test_every_second_host_has_avx2_and_every_third_ssd():
    cloud = generate_cloud(CloudSpec(hosts=30, seed=3))
    for h in cloud.hosts:
        assert (TRAIT_AVX2 in h.traits) == (h.index % 2 == 0)
        assert (TRAIT_SSD in h.traits) == (h.index % 3 == 0)


def test_about_two_percent_of_hosts_are_disabled():
    assert sum(h.disabled for h in generate_cloud(CloudSpec(500, 4)).hosts) == 10
    assert sum(h.disabled for h in generate_cloud(CloudSpec(20, 4)).hosts) == 1
    assert sum(h.disabled for h in generate_cloud(CloudSpec(5, 4)).hosts) == 0


def test_all_three_sizes_appear_with_their_own_ratios():
    cloud = generate_cloud(CloudSpec(hosts=100, seed=5))
    assert {h.size for h in cloud.hosts} == {s.name for s in HOST_SIZES}
    ratios = {s.inventories['VCPU'].allocation_ratio for s in HOST_SIZES}
    assert len(ratios) > 1


def test_capacity_is_placements_formula():
    inv = Inventory(total=1000, reserved=200, allocation_ratio=1.5)
    assert inv.capacity == 1200
    assert inv.to_placement() == {'total': 1000, 'reserved': 200, 'min_unit': 1,
                                  'max_unit': 1000, 'step_size': 1, 'allocation_ratio': 1.5}


def test_every_host_is_in_exactly_one_availability_zone():
    cloud = generate_cloud(CloudSpec(hosts=100, seed=6))
    assert cloud.availability_zones == ('az1', 'az2', 'az3')
    zones = {a.uuid: a for a in cloud.aggregates if a.availability_zone}
    for h in cloud.hosts:
        in_zones = [zones[u].availability_zone for u in h.aggregates if u in zones]
        assert in_zones == [h.availability_zone]


def test_each_zone_holds_hosts_with_and_without_every_trait():
    cloud = generate_cloud(CloudSpec(hosts=30, seed=6))
    for zone in cloud.availability_zones:
        hosts = [h for h in cloud.hosts if h.availability_zone == zone]
        assert any(TRAIT_AVX2 in h.traits for h in hosts)
        assert any(TRAIT_AVX2 not in h.traits for h in hosts)
        assert any(TRAIT_SSD in h.traits for h in hosts)


def test_aggregates_list_the_host_names_placement_has_them_on():
    cloud = generate_cloud(CloudSpec(hosts=40, seed=8))
    for agg in cloud.aggregates:
        members = [h.name for h in cloud.hosts if agg.uuid in h.aggregates]
        assert agg.hosts == members
    assert any(not a.availability_zone for a in cloud.aggregates)
    assert [a.metadata['availability_zone'] for a in cloud.aggregates
            if a.availability_zone] == list(cloud.availability_zones)


def test_small_clouds_have_one_zone():
    cloud = generate_cloud(CloudSpec(hosts=3, seed=0))
    assert cloud.availability_zones == ('az1',)


def test_custom_traits_are_the_ones_placement_must_create():
    assert generate_cloud(CloudSpec(hosts=10, seed=0)).custom_traits == (TRAIT_SSD,)


def test_disabled_trait_is_a_standard_trait():
    assert not TRAIT_DISABLED.startswith('CUSTOM_')


def test_a_cloud_needs_a_host():
    with pytest.raises(ValueError):
        CloudSpec(hosts=0, seed=0)
