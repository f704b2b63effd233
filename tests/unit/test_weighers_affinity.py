"""Soft (anti-)affinity weighers: server-group members on a host, as Nova 34 weighs them,
including the instances placed earlier in the same request."""
from __future__ import annotations

import random
import uuid as uuidlib

import pytest

from scheduler.catalog import HostCatalog
from scheduler.context import RequestContext
from scheduler.manager import SchedulerManager
from scheduler.objects.spec import InstanceGroup
from scheduler.pipeline.claimer import PendingCleanups
from scheduler.weights.affinity import (
    ServerGroupSoftAffinityWeigher,
    ServerGroupSoftAntiAffinityWeigher,
)
from scheduler.weights.base import weigh_hosts
from scheduler.weights.ram import RAMWeigher
from tests.builders import (
    CELL,
    PROJECT,
    USER,
    configured,
    make_aggregate,
    make_conf,
    make_host,
    make_spec,
)
from tests.unit.fake_placement import FakePlacement

M1, M2, M3, M4 = (f'6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e000{i}' for i in range(1, 5))
STRANGER = '6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e0f00'


def group(policy, members=(M1, M2, M3, M4), *, legacy=False):
    if legacy:  # decoded from an old primitive: only the deprecated list
        return InstanceGroup(policy=None, policies=[policy], members=list(members))
    return InstanceGroup(policy=policy, members=list(members))


def weights(weighed):
    return {w.host.host: w.weight for w in weighed}


def order(weighed):
    return [w.host.host for w in weighed]


def three_hosts():
    return [make_host('none', instances=[STRANGER]),
            make_host('one', instances=[M1]),
            make_host('three', instances=[M2, M3, M4, STRANGER])]


# Soft affinity --------------------------------------------------------------------------

def test_soft_affinity_prefers_the_host_with_the_most_group_members():
    weighed = weigh_hosts([configured(ServerGroupSoftAffinityWeigher)], three_hosts(),
                          make_spec(group=group('soft-affinity')))
    assert order(weighed) == ['three', 'one', 'none']
    # 0, 1 and 3 members normalise over [0, 3]; instances outside the group do not count.
    assert weights(weighed) == pytest.approx({'three': 1.0, 'one': 1 / 3, 'none': 0.0})


def test_soft_affinity_multiplier_scales_and_an_aggregate_overrides_it():
    heavy = make_aggregate('heavy', metadata={'soft_affinity_weight_multiplier': '10'})
    hosts = [make_host('a', instances=[M1]), make_host('b', instances=[M1, M2],
                                                       aggregates=[heavy])]
    weighed = weigh_hosts(
        [configured(ServerGroupSoftAffinityWeigher, soft_affinity_weight_multiplier=2.0)],
        hosts, make_spec(group=group('soft-affinity')))
    # raw 1 and 2 over [1, 2]: a -> 0 * 2.0; b -> 1 * 10 (its aggregate's value)
    assert weights(weighed) == pytest.approx({'a': 0.0, 'b': 10.0})


# Soft anti-affinity ---------------------------------------------------------------------

def test_soft_anti_affinity_prefers_the_host_with_the_fewest_group_members():
    weighed = weigh_hosts([configured(ServerGroupSoftAntiAffinityWeigher)], three_hosts(),
                          make_spec(group=group('soft-anti-affinity')))
    assert order(weighed) == ['none', 'one', 'three']
    # raw 0, -1, -3 normalise over [-3, 0]
    assert weights(weighed) == pytest.approx({'none': 1.0, 'one': 2 / 3, 'three': 0.0})


def test_soft_anti_affinity_multiplier_comes_from_an_aggregate_of_the_host():
    mild = make_aggregate('mild', metadata={'soft_anti_affinity_weight_multiplier': '0.5'})
    hosts = [make_host('empty', aggregates=[mild]), make_host('taken', instances=[M1])]
    weigher = configured(ServerGroupSoftAntiAffinityWeigher,
                         soft_anti_affinity_weight_multiplier=4.0)
    weighed = weigh_hosts([weigher], hosts, make_spec(group=group('soft-anti-affinity')))
    assert weights(weighed) == pytest.approx({'empty': 0.5, 'taken': 0.0})


def test_a_zero_multiplier_turns_soft_anti_affinity_off():
    weighed = weigh_hosts(
        [configured(ServerGroupSoftAntiAffinityWeigher,
                    soft_anti_affinity_weight_multiplier=0.0)],
        three_hosts(), make_spec(group=group('soft-anti-affinity')))
    assert set(weights(weighed).values()) == {0.0}


# Which requests they weigh -------------------------------------------------------------

@pytest.mark.parametrize('weigher_cls', [ServerGroupSoftAffinityWeigher,
                                         ServerGroupSoftAntiAffinityWeigher])
@pytest.mark.parametrize('request_group', [
    None, group('affinity'), group('anti-affinity')], ids=['no group', 'affinity',
                                                          'anti-affinity'])
def test_requests_without_a_soft_policy_weigh_zero_everywhere(weigher_cls, request_group):
    weigher = configured(weigher_cls)
    spec = make_spec(group=request_group)
    assert [weigher._weigh_object(h, spec) for h in three_hosts()] == [0, 0, 0]


def test_each_soft_weigher_weighs_only_its_own_policy():
    host = make_host('h', instances=[M1, M2])
    affinity = configured(ServerGroupSoftAffinityWeigher)
    anti = configured(ServerGroupSoftAntiAffinityWeigher)
    assert affinity._weigh_object(host, make_spec(group=group('soft-affinity'))) == 2
    assert affinity._weigh_object(host, make_spec(group=group('soft-anti-affinity'))) == 0
    assert anti._weigh_object(host, make_spec(group=group('soft-anti-affinity'))) == -2
    assert anti._weigh_object(host, make_spec(group=group('soft-affinity'))) == 0


def test_a_group_that_carries_only_the_deprecated_policies_list_is_weighed_too():
    host = make_host('h', instances=[M1])
    spec = make_spec(group=group('soft-anti-affinity', legacy=True))
    assert configured(ServerGroupSoftAntiAffinityWeigher)._weigh_object(host, spec) == -1


# Within one multi-instance request (through the manager) --------------------------------

def manager_with(fake, *weighers, **filter_scheduler):
    conf = make_conf(filter_scheduler=filter_scheduler)
    for weigher in weighers:
        weigher.conf = conf
    return SchedulerManager(conf, placement=fake, catalog=HostCatalog(default_cell_uuid=CELL),
                            filters=[], weighers=list(weighers), request_filters=[],
                            cleanups=PendingCleanups(fake, interval=3600),
                            rng=random.Random(0))


def hosts_chosen(manager, policy):
    uuids = [str(uuidlib.uuid4()) for _ in range(3)]
    spec = make_spec(group=InstanceGroup(policy=policy, members=uuids), num_instances=3,
                     project_id=PROJECT, user_id=USER)
    context = RequestContext(request_id='req-unit', user_id=USER, project_id=PROJECT)
    try:
        result = manager.select_destinations(context, spec, uuids)
    finally:
        manager.cleanups.stop()
    return [selections[0].service_host for selections in result]


@pytest.fixture
def fake():
    placement = FakePlacement()
    for name in ('cn0', 'cn1', 'cn2'):
        placement.add_compute(name)
    return placement


def test_soft_anti_affinity_spreads_one_request_although_ram_weighing_stacks(fake):
    stacking = {'ram_weight_multiplier': -1.0}
    assert len(set(hosts_chosen(manager_with(fake, RAMWeigher(), **stacking),
                                'soft-anti-affinity'))) == 1
    assert len(set(hosts_chosen(
        manager_with(fake, RAMWeigher(), ServerGroupSoftAntiAffinityWeigher(), **stacking),
        'soft-anti-affinity'))) == 3


def test_soft_affinity_packs_one_request_although_ram_weighing_spreads(fake):
    assert len(set(hosts_chosen(manager_with(fake, RAMWeigher()), 'soft-affinity'))) == 3
    assert len(set(hosts_chosen(
        manager_with(fake, RAMWeigher(), ServerGroupSoftAffinityWeigher()),
        'soft-affinity'))) == 1
