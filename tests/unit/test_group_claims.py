"""Pure parts of the after-claim anti-affinity check (scheduler/pipeline/group_check.py)."""
from __future__ import annotations

import pytest

from scheduler.objects.spec import InstanceGroup, RequestSpec
from scheduler.pipeline.group_check import enforced_group, may_wait, siblings_on_host


def test_siblings_are_other_members_found_on_any_provider_of_the_host():
    consumers = {'root': {'m1', 'stranger'}, 'child': {'m2', 'me'}}

    assert siblings_on_host(consumers, ['me', 'm1', 'm2', 'm3'], 'me') == {'m1', 'm2'}


def test_the_instance_itself_is_never_its_own_sibling():
    assert siblings_on_host({'root': {'me'}}, ['me'], 'me') == set()


@pytest.mark.parametrize('me, siblings, limit, expected', [
    ('a', {'b'}, 1, True),            # smallest of those seen waits
    ('b', {'a'}, 1, False),           # the others give back at once
    ('b', {'a', 'c'}, 2, True),       # with k per host the k smallest wait
    ('c', {'a', 'b'}, 2, False),
])
def test_only_the_smallest_uuids_among_those_seen_may_wait(me, siblings, limit, expected):
    assert may_wait(me, siblings, limit) is expected


def test_exactly_limit_members_of_a_crowd_that_saw_each_other_wait():
    crowd = {'e', 'a', 'd', 'b', 'c'}

    waiting = {m for m in crowd if may_wait(m, crowd - {m}, 2)}

    assert waiting == {'a', 'b'}


@pytest.mark.parametrize('group, enforced', [
    (None, False),
    (InstanceGroup(policy='anti-affinity'), True),
    (InstanceGroup(policies=['anti-affinity']), True),   # older primitives
    (InstanceGroup(policy='soft-anti-affinity'), False),
    (InstanceGroup(policy='affinity'), False),
])
def test_only_hard_anti_affinity_groups_are_enforced(group, enforced):
    assert (enforced_group(RequestSpec(instance_group=group)) is not None) is enforced
