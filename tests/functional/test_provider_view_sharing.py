"""The provider view answers queries with sharing providers as Placement 16 does.

Each test builds a small cloud in a real Placement, one rule at a time, and
holds the view's answer to Placement's (the contract of
test_provider_view_nested.py: the same trees, each request one of Placement's,
the same summaries) and to the answer the rule gives, written out. A pool is a
root provider with MISC_SHARES_VIA_AGGREGATE; it serves the roots of every
provider in one of its aggregates (its own tree too), never as a host.
"""
from __future__ import annotations

import uuid

import pytest

from placement_client.query import AllocationCandidatesQuery, RequestGroupQuery
from scheduler.catalog import HostCatalog
from scheduler.host_table import HostTable
from scheduler.provider_view import answer, trees
from scheduler.simulate import seed
from tests.builders import SERVICE_CELL
from tests.functional import test_provider_view as flat
from tests.functional.test_provider_view_nested import MICROVERSION, assert_same_answer

reader = flat.reader
AGG_A, AGG_B = (str(uuid.uuid5(uuid.NAMESPACE_DNS, f'sharing-{n}')) for n in 'ab')
SHARING = 'MISC_SHARES_VIA_AGGREGATE'
FAST = 'CUSTOM_POOL_FAST'


def rp(client, name: str, inventories: dict, *, parent: str | None = None, traits=(),
       aggregates=()) -> str:
    return seed.create_provider(client, name=name, uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                                parent_uuid=parent, inventories=inventories, traits=traits,
                                aggregates=aggregates)


def compute(client, name: str, *, disk: int = 0, aggregates=(), traits=()) -> str:
    inventories = {'VCPU': 8, 'MEMORY_MB': 8192} | ({'DISK_GB': disk} if disk else {})
    return rp(client, name, inventories, aggregates=aggregates, traits=traits)


def pool(client, name: str, inventories: dict, *, aggregates=(), traits=()) -> str:
    return rp(client, name, inventories, traits=[SHARING, *traits], aggregates=aggregates)


def query(*groups: RequestGroupQuery, **wide) -> AllocationCandidatesQuery:
    return AllocationCandidatesQuery(groups=list(groups), **wide)


def group(suffix: str = '', **resources) -> RequestGroupQuery:
    return RequestGroupQuery(suffix=suffix, resources=resources)


def hosts_and_trees(client, reader, asked: AllocationCandidatesQuery):
    """(Placement's hosts, the trees its summaries cover), once the view's answer
    is held to Placement's."""
    snapshot = reader.read()
    assert answer.why_not_exact(asked, snapshot) is None
    theirs = client.get_allocation_candidates(asked)
    ours = trees.candidates(snapshot, asked, overlay={}, microversion=MICROVERSION)
    assert_same_answer(ours, theirs, asked)
    hosts = set(HostTable(theirs, HostCatalog(default_cell_uuid=SERVICE_CELL)).roots)
    return hosts, theirs.root_provider_uuids(), ours


def test_a_pool_serves_the_roots_of_its_aggregate_and_a_root_whose_child_is_in_it(
        placement_client, reader):
    near = compute(placement_client, 'near', aggregates=[AGG_A])
    parent = compute(placement_client, 'parent')
    rp(placement_client, 'parent-gpu', {'VGPU': 1}, parent=parent, aggregates=[AGG_A])
    compute(placement_client, 'far', aggregates=[AGG_B])
    local = compute(placement_client, 'local', disk=100)
    nfs = pool(placement_client, 'nfs', {'DISK_GB': 1000}, aggregates=[AGG_A])

    hosts, covered, ours = hosts_and_trees(placement_client, reader,
                                           query(group(VCPU=1, DISK_GB=10)))

    assert hosts == {near, parent, local}
    assert covered == hosts | {nfs}
    assert {near: {'VCPU': 1}, nfs: {'DISK_GB': 10}} in [
        {p: a['resources'] for p, a in r['allocations'].items()} for r in ours.raw_requests()]


def test_the_unsuffixed_group_takes_a_pool_in_its_member_of_itself(placement_client, reader):
    # member_of: a tree's provider passes by its root; a pool only by itself.
    in_a = compute(placement_client, 'in-a', aggregates=[AGG_A, AGG_B])
    nfs_b = pool(placement_client, 'nfs-b', {'DISK_GB': 1000}, aggregates=[AGG_B])
    nfs_ab = pool(placement_client, 'nfs-ab', {'DISK_GB': 30}, aggregates=[AGG_A, AGG_B])
    disk = group(VCPU=1, DISK_GB=10)

    assert hosts_and_trees(placement_client, reader, query(disk))[1] == {in_a, nfs_b, nfs_ab}
    disk.member_of = [frozenset({AGG_A})]
    assert hosts_and_trees(placement_client, reader, query(disk))[1] == {in_a, nfs_ab}


def test_an_unsuffixed_forbidden_aggregate_drops_the_pool_in_it_and_the_root_in_it(
        placement_client, reader):
    # The root is in AGG_A, its NUMA node (which has the VCPU) in none: the root's
    # aggregate spans its tree, and an answer for it with any pool.
    host = rp(placement_client, 'host', {}, aggregates=[AGG_A, AGG_B])
    rp(placement_client, 'host-numa0', {'VCPU': 8}, parent=host)
    other = compute(placement_client, 'other', aggregates=[AGG_B])
    pool(placement_client, 'nfs-a', {'DISK_GB': 1000}, aggregates=[AGG_A, AGG_B])
    nfs_b = pool(placement_client, 'nfs-b', {'DISK_GB': 1000}, aggregates=[AGG_B])
    disk = group(VCPU=1, DISK_GB=10)
    disk.forbidden_aggregates = {AGG_A}

    hosts, covered, _ = hosts_and_trees(placement_client, reader, query(disk))
    assert hosts == {other} and covered == {other, nfs_b}


def test_the_unsuffixed_group_s_traits_are_its_providers_together_pools_included(
        placement_client, reader):
    host = compute(placement_client, 'host', disk=100, aggregates=[AGG_A])
    fast = pool(placement_client, 'fast', {'DISK_GB': 1000}, aggregates=[AGG_A], traits=[FAST])
    wants_fast = group(VCPU=1, DISK_GB=10)
    wants_fast.required_traits = {FAST}

    hosts, covered, ours = hosts_and_trees(placement_client, reader, query(wants_fast))
    # The host has no FAST: only with the pool's disk.
    assert hosts == {host} and covered == {host, fast}
    assert all(fast in r['allocations'] for r in ours.raw_requests())

    not_fast = group(VCPU=1, DISK_GB=10)
    not_fast.forbidden_traits = {FAST}
    hosts, covered, ours = hosts_and_trees(placement_client, reader, query(not_fast))
    assert hosts == covered == {host}


def test_an_unsuffixed_in_tree_naming_a_pool_keeps_it_to_its_own_tree(placement_client, reader):
    compute(placement_client, 'host', aggregates=[AGG_A])
    nfs = pool(placement_client, 'nfs', {'DISK_GB': 1000}, aggregates=[AGG_A])
    on_nfs = group(DISK_GB=10)
    on_nfs.in_tree = nfs

    # The disk only for the pool's own tree, the VCPU only for the host's: no root
    # has both.
    assert hosts_and_trees(placement_client, reader,
                           query(on_nfs, group('1', VCPU=1)))[:2] == (set(), set())


def test_a_granular_group_is_checked_on_the_pool_itself_and_root_required_on_the_anchor(
        placement_client, reader):
    gold = compute(placement_client, 'gold', aggregates=[AGG_A], traits=['CUSTOM_ROOT_GOLD'])
    plain = compute(placement_client, 'plain', aggregates=[AGG_A])
    fast = pool(placement_client, 'fast', {'IPV4_ADDRESS': 4}, aggregates=[AGG_A],
                traits=[FAST])
    address = group('1', IPV4_ADDRESS=1)
    address.required_traits = {FAST}
    address.member_of = [frozenset({AGG_A})]

    hosts, covered, _ = hosts_and_trees(
        placement_client, reader, query(group(VCPU=1), address, group_policy='none'))
    assert hosts == {gold, plain} and covered == {gold, plain, fast}

    # The pool is in no AGG_B: member_of on a granular group is the provider's own.
    address.member_of = [frozenset({AGG_B})]
    assert hosts_and_trees(placement_client, reader,
                           query(group(VCPU=1), address, group_policy='none'))[0] == set()

    # in_tree naming the pool: it still serves every root of its aggregate.
    address.member_of, address.in_tree = [], fast
    assert hosts_and_trees(placement_client, reader,
                           query(group(VCPU=1), address, group_policy='none',
                                 root_required={'CUSTOM_ROOT_GOLD'}))[0] == {gold}


def test_isolate_counts_a_pool_once_and_same_subtree_never_joins_a_pool_to_a_tree(
        placement_client, reader):
    host = compute(placement_client, 'host', aggregates=[AGG_A])
    rp(placement_client, 'host-nic', {'NET_BW_EGR_KILOBIT_PER_SEC': 1000}, parent=host)
    pool(placement_client, 'ips', {'IPV4_ADDRESS': 8}, aggregates=[AGG_A])
    two_addresses = (group(VCPU=1), group('1', IPV4_ADDRESS=1), group('2', IPV4_ADDRESS=1))

    assert hosts_and_trees(placement_client, reader,
                           query(*two_addresses, group_policy='none'))[0] == {host}
    assert hosts_and_trees(placement_client, reader,
                           query(*two_addresses, group_policy='isolate'))[0] == set()

    port = (group(VCPU=1), group('port', NET_BW_EGR_KILOBIT_PER_SEC=10),
            group('ip', IPV4_ADDRESS=1))
    assert hosts_and_trees(placement_client, reader,
                           query(*port, group_policy='none'))[0] == {host}
    assert hosts_and_trees(placement_client, reader,
                           query(*port, group_policy='none',
                                 same_subtree=[['port', 'ip']]))[0] == set()


def test_a_host_whose_answer_takes_nothing_of_its_own_tree_is_no_host(placement_client, reader):
    # Granular groups only, each served by a pool: Placement's answer names the
    # pools, no host; a pool in no aggregate still serves its own tree.
    compute(placement_client, 'host', aggregates=[AGG_A])
    ips = pool(placement_client, 'ips', {'IPV4_ADDRESS': 8}, aggregates=[AGG_A])
    alone = pool(placement_client, 'alone', {'IPV4_ADDRESS': 8})

    hosts, covered, ours = hosts_and_trees(placement_client, reader,
                                           query(group('1', IPV4_ADDRESS=1)))
    assert hosts == set() and covered == {ips, alone} and not len(ours)


def test_what_stays_with_placement_is_where_its_answer_is_its_own(placement_client, reader):
    # Every class of the unsuffixed group in a pool: Placement keeps each such
    # combination for one root only (a set whose equality ignores the root), so
    # of two NUMA hosts on one disk pool it answers one.
    hosts = [compute(placement_client, f'numa-{n}', aggregates=[AGG_A]) for n in range(2)]
    pool(placement_client, 'nfs', {'DISK_GB': 1000}, aggregates=[AGG_A])
    numa_guest = query(group(DISK_GB=10), group('1', VCPU=1))
    assert answer.why_not_exact(numa_guest, reader.read()) == answer.SHARED_ALONE
    theirs = placement_client.get_allocation_candidates(numa_guest)
    answered = set(HostTable(theirs, HostCatalog(default_cell_uuid=SERVICE_CELL)).roots)
    assert len(answered) == 1 and answered < set(hosts)

    # A class in the unsuffixed and a granular group without group_policy=none:
    # Placement sums it into an object its other combinations share.
    seed.delete_all(placement_client)
    compute(placement_client, 'local', disk=100, aggregates=[AGG_A])
    pool(placement_client, 'nfs', {'DISK_GB': 1000}, aggregates=[AGG_A])
    twice = query(group(VCPU=1, DISK_GB=20), group('1', DISK_GB=5), group_policy='isolate')
    assert answer.why_not_exact(twice, reader.read()) == answer.SUMMED_IN_PLACE
    given = [sum(a['resources'].get('DISK_GB', 0) for a in r['allocations'].values())
             for r in placement_client.get_allocation_candidates(twice).raw_requests()]
    assert 25 in given and any(total != 25 for total in given)


@pytest.mark.parametrize('policy', ['none', 'isolate'])
def test_pools_serving_pools_are_answered_for_their_own_trees(placement_client, reader, policy):
    # Two pools in one aggregate serve each other: a query for both classes is
    # answered for a host and for either pool's own tree; neither pool is a host.
    host = compute(placement_client, 'host', aggregates=[AGG_A])
    ips = pool(placement_client, 'ips', {'IPV4_ADDRESS': 8}, aggregates=[AGG_A])
    nfs = pool(placement_client, 'nfs', {'DISK_GB': 1000}, aggregates=[AGG_A])

    hosts, covered, _ = hosts_and_trees(
        placement_client, reader,
        query(group(VCPU=1), group('1', IPV4_ADDRESS=1), group('2', DISK_GB=1),
              group_policy=policy))
    assert hosts == {host} and covered == {host, ips, nfs}
