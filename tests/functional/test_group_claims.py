"""The after-claim anti-affinity check against a REAL Placement.

Interleavings of concurrent schedulers are replayed one step at a time: each
member's claim is a real PUT, each check reads what Placement really holds,
and the "other scheduler" acts while this one waits (the injected sleep).
"""
from __future__ import annotations

import uuid

import pytest

from placement_client.client import ALLOCATION_CANDIDATES_MICROVERSION
from placement_client.models import AllocationRequest
from scheduler.pipeline.claimer import Claim, Claimer, PendingCleanups
from scheduler.pipeline.group_check import GroupCheckFailed, GroupClaimCheck, GroupRaceLost
from tests.builders import PROJECT, USER, boot_spec
from tests.functional.cloud import add_host


class Recorder:
    """A sleep that records each pause and lets 'another scheduler' act during it."""

    def __init__(self, during=None):
        self.pauses: list[float] = []
        self._during = list(during or [])

    def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)
        if self._during:
            self._during.pop(0)()


def ordered_uuids(n: int) -> list[str]:
    """n member uuids in ascending order (the tie-break order)."""
    return sorted(str(uuid.uuid4()) for _ in range(n))


@pytest.fixture
def hosts(placement_client) -> dict[str, str]:
    return {name: add_host(placement_client, name) for name in ('cn1', 'cn2')}


@pytest.fixture
def claim(placement_client):
    claimer = Claimer(placement_client, retry_delay=0)

    def make(instance: str, provider: str) -> Claim:
        return claimer.claim(instance, AllocationRequest(
            allocations={provider: {'VCPU': 1, 'MEMORY_MB': 512}}), project_id=PROJECT,
            user_id=USER, microversion=ALLOCATION_CANDIDATES_MICROVERSION, request_id=None)
    return make


def checker(placement_client, sleep=None, **kw) -> GroupClaimCheck:
    return GroupClaimCheck(placement_client, PendingCleanups(placement_client, interval=0.1),
                           sleep=sleep or Recorder(), settle_delay=0.01, **kw)


def group_spec(members, policy='anti-affinity', **rules):
    spec = boot_spec(group_policy=policy, group_members=members)
    spec.instance_group.rules = {k: str(v) for k, v in rules.items()}
    return spec


def holds(placement_client, instance: str) -> bool:
    return bool(placement_client.get_allocations(instance).allocations)


def test_a_member_alone_on_its_host_keeps_its_claim_after_one_read(placement_client, hosts,
                                                                    claim):
    a, b = ordered_uuids(2)
    claim(b, hosts['cn2'])     # a sibling elsewhere does not count
    sleep = Recorder()

    checker(placement_client, sleep).after_claim(group_spec([a, b]), claim(a, hosts['cn1']),
                                                 host='cn1', providers=[hosts['cn1']],
                                                 request_id=None)

    assert holds(placement_client, a)
    assert sleep.pauses == []


def test_a_member_that_finds_a_settled_sibling_on_its_host_gives_the_claim_back(
        placement_client, hosts, claim):
    a, b = ordered_uuids(2)
    claim(a, hosts['cn1'])                 # the sibling was there first and keeps it
    made = claim(b, hosts['cn1'])          # Placement accepts: it knows no groups

    with pytest.raises(GroupRaceLost) as lost:
        checker(placement_client).after_claim(group_spec([a, b]), made, host='cn1',
                                              providers=[hosts['cn1']], request_id=None)

    assert lost.value.siblings == {a}
    assert not holds(placement_client, b)
    assert holds(placement_client, a)


def test_of_two_members_that_saw_each_other_the_smaller_uuid_keeps_the_host(
        placement_client, hosts, claim):
    a, b = ordered_uuids(2)
    spec = group_spec([a, b])
    made_a, made_b = claim(a, hosts['cn1']), claim(b, hosts['cn1'])
    check_b = checker(placement_client)

    def b_checks_while_a_waits():
        with pytest.raises(GroupRaceLost):
            check_b.after_claim(spec, made_b, host='cn1', providers=[hosts['cn1']],
                                request_id=None)

    sleep = Recorder(during=[b_checks_while_a_waits])
    checker(placement_client, sleep).after_claim(spec, made_a, host='cn1',
                                                 providers=[hosts['cn1']], request_id=None)

    assert holds(placement_client, a) and not holds(placement_client, b)
    assert len(sleep.pauses) == 1


def test_a_waiting_member_gives_back_when_the_sibling_keeps_its_claim(placement_client, hosts,
                                                                      claim):
    a, b = ordered_uuids(2)
    claim(b, hosts['cn1'])    # b checked before a's PUT, saw nobody, and kept the host
    sleep = Recorder()

    with pytest.raises(GroupRaceLost):
        checker(placement_client, sleep, rereads=3).after_claim(
            group_spec([a, b]), claim(a, hosts['cn1']), host='cn1', providers=[hosts['cn1']],
            request_id=None)

    assert len(sleep.pauses) == 3
    assert sleep.pauses == sorted(sleep.pauses)   # growing pauses
    assert holds(placement_client, b) and not holds(placement_client, a)


def test_max_server_per_host_lets_that_many_members_share_a_host(placement_client, hosts,
                                                                 claim):
    a, b, c = ordered_uuids(3)
    spec = group_spec([a, b, c], max_server_per_host=2)
    claim(a, hosts['cn1'])
    check = checker(placement_client)

    check.after_claim(spec, claim(b, hosts['cn1']), host='cn1', providers=[hosts['cn1']],
                      request_id=None)
    with pytest.raises(GroupRaceLost):
        check.after_claim(spec, claim(c, hosts['cn1']), host='cn1', providers=[hosts['cn1']],
                          request_id=None)

    assert holds(placement_client, b) and not holds(placement_client, c)


@pytest.mark.parametrize('policy', ['affinity', 'soft-anti-affinity', None])
def test_only_hard_anti_affinity_groups_are_checked(placement_client, hosts, claim, policy):
    a, b = ordered_uuids(2)
    claim(a, hosts['cn1'])
    spec = group_spec([a, b], policy=policy) if policy else boot_spec()

    checker(placement_client).after_claim(spec, claim(b, hosts['cn1']), host='cn1',
                                          providers=[hosts['cn1']], request_id=None)

    assert holds(placement_client, b)


def test_consumers_outside_the_group_do_not_count(placement_client, hosts, claim):
    a, b = ordered_uuids(2)
    claim(str(uuid.uuid4()), hosts['cn1'])

    checker(placement_client).after_claim(group_spec([a, b]), claim(b, hosts['cn1']),
                                          host='cn1', providers=[hosts['cn1']], request_id=None)

    assert holds(placement_client, b)


def test_placement_unreachable_during_the_check_fails_and_the_claim_is_given_back_later(
        placement, placement_client, hosts, claim):
    a, b = ordered_uuids(2)
    made = claim(b, hosts['cn1'])
    cleanups = PendingCleanups(placement_client, interval=60)
    check = GroupClaimCheck(placement_client, cleanups, sleep=Recorder())
    placement.stop()

    with pytest.raises(GroupCheckFailed, match='could not check anti-affinity'):
        check.after_claim(group_spec([a, b]), made, host='cn1', providers=[hosts['cn1']],
                          request_id=None)

    assert cleanups.pending() == {b}
    placement.start()
    cleanups.retry_once()
    assert cleanups.pending() == set()
    assert not holds(placement_client, b)
