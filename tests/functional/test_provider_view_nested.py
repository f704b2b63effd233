"""The provider view answers granular queries on nested trees as Placement does.

Random nested clouds are built through a real Placement's API: NUMA-node
children with VCPU, PCPU and MEMORY_MB; PCI children (PFs and VF pools) of
custom classes with physnet traits; vGPU children of several types; a NIC
under the root with bandwidth providers below it; sometimes a sharing disk
pool. Random queries are shaped as Nova's ResourceRequest shapes them: an
unsuffixed group and numbered or named groups, ``group_policy``,
``same_subtree`` with resourceless groups, traits and aggregates per group,
``root_required``. Most clouds have sharing pools (MISC_SHARES_VIA_AGGREGATE):
DISK_GB for the hosts without local disk (some have both), IPV4_ADDRESS or a
custom class in a second pool, in one aggregate or another, the same as the
first's or not; queries ask for those classes in the unsuffixed group and in
granular groups of their own. For each, compared with Placement's own answer on
the same state (tests/functional/test_provider_view.py does the same for flat
clouds):

* the trees the answer covers (hosts, and the sharing pools some answer takes
  from) are exactly Placement's;
* each allocation request the view gives is one Placement gives (the same
  providers and amounts, the same mappings), at least one per host and at most
  :data:`trees.REQUESTS_PER_ROOT`;
* the provider summaries are Placement's;
* the hosts a request decides over are those of a host table of Placement's
  answer, and each one's requests are among those that table gives it.

Shapes the view leaves to Placement are detected, and a query the view calls
one Placement refuses is refused.
"""
from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field

import pytest

from placement_client import exceptions as pexc
from placement_client.query import AllocationCandidatesQuery, RequestGroupQuery
from scheduler.catalog import HostCatalog
from scheduler.host_table import HostTable
from scheduler.provider_view import answer, trees
from scheduler.provider_view.view import NONE_FIT, ProviderView
from scheduler.simulate import seed
from tests.builders import PROJECT, SERVICE_CELL, USER
from tests.functional import test_provider_view as flat
from tests.functional.test_provider_view import request_key, summaries_of

MICROVERSION = '1.36'
AGGREGATES = tuple(str(uuid.uuid5(uuid.NAMESPACE_DNS, f'nested-agg{i}')) for i in range(3))
ROOT_TRAITS = ('HW_CPU_X86_AVX2', 'COMPUTE_STATUS_DISABLED', 'CUSTOM_ROOT_GOLD')
VGPU_TYPES = ('CUSTOM_VGPU_NVIDIA_11', 'CUSTOM_VGPU_NVIDIA_12')
PHYSNETS = ('CUSTOM_PHYSNET_A', 'CUSTOM_PHYSNET_B')
PF, VF = 'CUSTOM_PCI_8086_1572', 'CUSTOM_PCI_8086_154C'
EGRESS, INGRESS = 'NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC'
NORMAL = 'CUSTOM_VNIC_TYPE_NORMAL'
SHARING = 'MISC_SHARES_VIA_AGGREGATE'
IPV4, LICENSE = 'IPV4_ADDRESS', 'CUSTOM_SHARED_LICENSE'
POOL_TRAIT = 'CUSTOM_POOL_FAST'


@dataclass
class NestedCloud:
    roots: list[str] = field(default_factory=list)
    providers: list[str] = field(default_factory=list)
    #: the classes sharing pools hold
    shared: set[str] = field(default_factory=set)


def inventory(rng: random.Random, total: int) -> dict:
    """An inventory with Placement's rules drawn at random (reserved, ratio, units)."""
    max_unit = rng.choice((total, max(1, total // 2)))
    return {'total': total, 'reserved': rng.choice((0, 0, 0, 1)) if total > 2 else 0,
            'allocation_ratio': rng.choice((1.0, 1.0, 1.5, 2.0)),
            # Now and then units that refuse some amounts (most flavors ask even ones).
            'min_unit': min(2, max_unit) if rng.random() < 0.1 else 1, 'max_unit': max_unit,
            'step_size': 2 if rng.random() < 0.1 else 1}


def random_nested_cloud(client, rng: random.Random, hosts: int) -> NestedCloud:
    cloud = NestedCloud()

    def provider(name: str, parent: str | None, inventories: dict, traits=(),
                 aggregates=()) -> str:
        rp = seed.create_provider(client, name=name, parent_uuid=parent,
                                  uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                                  inventories=inventories, traits=traits,
                                  aggregates=aggregates)
        cloud.providers.append(rp)
        return rp

    # Placement refuses a query naming a trait it does not know (400), which the
    # view, reading providers only, cannot tell: every trait asked for exists.
    for trait in (*ROOT_TRAITS, *VGPU_TYPES, *PHYSNETS, NORMAL, POOL_TRAIT):
        seed.ensure_trait(client, trait)
    seed.ensure_resource_class(client, LICENSE)
    disk_pool = rng.random() < 0.7
    # The pool's aggregates (maybe none: it then serves its own tree only).
    pool_aggregates = rng.sample(AGGREGATES[:2], rng.choice((0, 1, 1, 2)))
    for i in range(hosts):
        numa = rng.random() < 0.6
        root_inventory = {}
        aggregates = rng.sample(AGGREGATES, rng.randint(0, 2))
        if not disk_pool or rng.random() < 0.4:
            root_inventory['DISK_GB'] = inventory(rng, rng.choice((40, 100)))
        elif pool_aggregates and rng.random() < 0.8:     # a host of the pool's aggregate
            aggregates = sorted({*aggregates, rng.choice(pool_aggregates)})
        if not numa:
            root_inventory |= {'VCPU': inventory(rng, rng.choice((4, 8))),
                               'MEMORY_MB': inventory(rng, rng.choice((4096, 8192)))}
        root = provider(f'cn{i}', None, root_inventory,
                        traits=rng.sample(ROOT_TRAITS, rng.randint(0, 2)),
                        aggregates=aggregates)
        cloud.roots.append(root)
        pci_parents = [root]
        if numa:
            pci_parents = [provider(
                f'cn{i}-numa{n}', root,
                {'VCPU': inventory(rng, rng.choice((2, 4))),
                 'PCPU': inventory(rng, rng.choice((2, 4))),
                 'MEMORY_MB': inventory(rng, rng.choice((2048, 4096)))},
                traits=['HW_NUMA_ROOT']) for n in range(2)]
        for g in range(rng.choice((0, 1, 2, 3, 4))):
            provider(f'cn{i}-pgpu{g}', root, {'VGPU': inventory(rng, rng.choice((1, 2, 4)))},
                     traits=[rng.choice(VGPU_TYPES)],
                     aggregates=rng.sample(AGGREGATES, rng.random() < 0.2))
        for p in range(rng.randint(0, 2)):
            provider(f'cn{i}-pf{p}', rng.choice(pci_parents), {PF: 1},
                     traits=[rng.choice(PHYSNETS)])
        if rng.random() < 0.5:
            provider(f'cn{i}-vfs', rng.choice(pci_parents),
                     {VF: inventory(rng, rng.choice((2, 4, 8)))}, traits=[rng.choice(PHYSNETS)])
        if rng.random() < 0.6:
            nic = provider(f'cn{i}-nic', root, {}, traits=[NORMAL])
            for b in range(rng.randint(1, 2)):
                provider(f'cn{i}-nic-bw{b}', nic,
                         {EGRESS: inventory(rng, 10000), INGRESS: inventory(rng, 10000)},
                         traits=[rng.choice(PHYSNETS), NORMAL])
    pools = []
    if disk_pool:                # a shared disk pool for the hosts of its aggregate
        pools.append(provider('nested-nfs', None,
                              {'DISK_GB': inventory(rng, rng.choice((30, 1000)))},
                              traits=[SHARING, *rng.sample([POOL_TRAIT], rng.random() < 0.3)],
                              aggregates=pool_aggregates))
    if rng.random() < 0.5:       # a second pool, of addresses or licences
        rc = rng.choice((IPV4, LICENSE))
        pools.append(provider('nested-pool', None, {rc: inventory(rng, rng.choice((2, 16)))},
                              traits=[SHARING, *rng.sample([POOL_TRAIT], rng.random() < 0.3)],
                              aggregates=rng.sample(AGGREGATES, rng.randint(1, 2))))
        if rng.random() < 0.2:   # which may share disk as well
            seed.set_inventories(client, pools[-1], {
                rc: inventory(rng, 16), 'DISK_GB': inventory(rng, 100)})
    for pool in pools:
        cloud.shared |= set(client.request(
            'GET', f'/resource_providers/{pool}/inventories',
            microversion=MICROVERSION).json()['inventories'])
    for rp in rng.sample(cloud.providers, len(cloud.providers) // 3):
        fill(client, rng, rp)
    return cloud


def fill(client, rng: random.Random, rp: str) -> None:
    """An allocation against ``rp`` that fits whatever its inventory's rules, up to
    all there is."""
    inventories = client.request('GET', f'/resource_providers/{rp}/inventories',
                                 microversion=MICROVERSION).json()['inventories']
    wanted = {}
    for rc, inv in inventories.items():
        free = int((inv['total'] - inv['reserved']) * inv['allocation_ratio'])
        amount = min(inv['max_unit'], rng.choice((1, free // 2, free)))
        amount -= amount % inv['step_size']
        if amount >= inv['min_unit']:
            wanted[rc] = amount
    if wanted:
        seed.allocate(client, str(uuid.uuid4()), {rp: wanted}, PROJECT, USER)


def random_granular_query(rng: random.Random, cloud: NestedCloud) -> AllocationCandidatesQuery:
    """A query as Nova's ResourceRequest shapes one: the flavor's resources
    unsuffixed (or its NUMA cells numbered), devices and ports in groups of
    their own."""
    query = AllocationCandidatesQuery()
    unsuffixed = query.group('')
    numbered = iter(range(1, 20))
    if rng.random() < 0.25:         # a guest's NUMA cells, one group each
        for _ in range(rng.randint(1, 2)):
            query.group(str(next(numbered))).resources = {
                rng.choice(('VCPU', 'PCPU')): rng.choice((1, 2)),
                'MEMORY_MB': rng.choice((512, 1024))}
        if rng.random() < 0.6:
            unsuffixed.resources = {'DISK_GB': rng.choice((10, 20))}
    elif rng.random() < 0.06:       # only what pools share: their own trees answer too
        unsuffixed.resources = {rc: 1 if rc != 'DISK_GB' else 10
                                for rc in rng.sample(sorted(cloud.shared | {'DISK_GB'}), 1)}
    else:
        unsuffixed.resources = {rng.choice(('VCPU', 'VCPU', 'PCPU')): rng.choice((1, 2, 4)),
                                'MEMORY_MB': rng.choice((512, 1024, 2048))}
        if rng.random() < 0.6:
            unsuffixed.resources['DISK_GB'] = rng.choice((10, 20))
    others = sorted(cloud.shared - {'DISK_GB'})
    if unsuffixed.resources and others and rng.random() < 0.3:
        unsuffixed.resources[rng.choice(others)] = rng.choice((1, 2))
    if unsuffixed.resources and rng.random() < 0.15:
        unsuffixed.required_traits = {rng.choice(ROOT_TRAITS[:1] + ('HW_NUMA_ROOT', POOL_TRAIT))}
    if unsuffixed.resources and rng.random() < 0.15:
        unsuffixed.forbidden_traits = {rng.choice(('COMPUTE_STATUS_DISABLED', POOL_TRAIT))}
    if unsuffixed.resources and rng.random() < 0.2:
        unsuffixed.member_of = [frozenset(rng.sample(AGGREGATES, rng.randint(1, 2)))]
    if unsuffixed.resources and rng.random() < 0.1:
        unsuffixed.forbidden_aggregates = {rng.choice(AGGREGATES)}
    if unsuffixed.resources and rng.random() < 0.05:
        unsuffixed.in_tree = rng.choice(cloud.providers)
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):      # vGPUs
        group = query.group(str(next(numbered)))
        group.resources = {'VGPU': rng.choice((1, 1, 1, 2))}
        if rng.random() < 0.4:
            group.required_traits = {rng.choice(VGPU_TYPES)}
        if rng.random() < 0.1:
            group.member_of = [frozenset(rng.sample(AGGREGATES, 1))]
    for _ in range(rng.choice((0, 0, 0, 1, 2))):         # PCI devices
        group = query.group(str(next(numbered)))
        group.resources = {rng.choice((PF, VF)): 1}
        if rng.random() < 0.5:
            group.required_traits = {rng.choice(PHYSNETS)}
        elif rng.random() < 0.2:
            group.forbidden_traits = {rng.choice(PHYSNETS)}
    for rc in ['DISK_GB', *others]:                     # a volume, an address: shared
        if rng.random() < 0.15:
            group = query.group(str(next(numbered)))
            group.resources = {rc: 5 if rc == 'DISK_GB' else 1}
            if rng.random() < 0.3:
                group.required_traits = {POOL_TRAIT}
            elif rng.random() < 0.2:
                group.forbidden_traits = {POOL_TRAIT}
            if rng.random() < 0.2:
                group.member_of = [frozenset(rng.sample(AGGREGATES, 1))]
            if rng.random() < 0.1:
                group.in_tree = rng.choice(cloud.providers)
    if rng.random() < 0.35:                             # a port with a bandwidth policy
        port = f'port-{rng.randint(0, 99)}'
        group = query.group(port)
        group.resources = {EGRESS: rng.choice((1000, 6000)), INGRESS: 1000}
        group.required_traits = {rng.choice(PHYSNETS), NORMAL}
        if rng.random() < 0.5:      # and the NIC it hangs below, a resourceless group
            nic = query.group(f'{port}-nic')
            nic.required_traits = {NORMAL}
            query.same_subtree.append([port, nic.suffix])
    granular = [g for g in query.groups if g.suffix]
    numa_cells = [g.suffix for g in granular if 'MEMORY_MB' in g.resources]
    devices = [g.suffix for g in granular if set(g.resources) & {PF, VF, 'VGPU'}]
    if numa_cells and devices and rng.random() < 0.5:    # a device on the guest's NUMA cell
        query.same_subtree.append([rng.choice(numa_cells), rng.choice(devices)])
    if len(granular) > 1 or rng.random() < 0.5:
        query.group_policy = rng.choice(('none', 'isolate'))
    if rng.random() < 0.1:
        query.root_required = {rng.choice(ROOT_TRAITS[:1])}
    if rng.random() < 0.2:
        query.root_forbidden = {'COMPUTE_STATUS_DISABLED'}
    if rng.random() < 0.03:     # a shape Placement refuses: a resourceless group alone
        query.group('lonely').required_traits = {NORMAL}
    return query


def hosts_in(candidates) -> set[str]:
    """The roots of an answer that are hosts (sharing pools are not)."""
    summaries = candidates.raw_summaries()
    return {root for root in candidates.root_provider_uuids()
            if SHARING not in summaries[root]['traits']}


def root_of(request: dict, summaries: dict) -> str:
    """The host an allocation request is for: the one root, besides pools', it
    takes from."""
    [root] = {summaries[rp]['root_provider_uuid'] for rp in request['allocations']} - {
        rp for rp, s in summaries.items() if SHARING in s['traits']}
    return root


def view_answer(snapshot, query):
    if answer.is_flat(query, snapshot):
        return answer.candidates(snapshot, query, overlay={}, microversion=MICROVERSION)
    return trees.candidates(snapshot, query, overlay={}, microversion=MICROVERSION)


def assert_same_answer(ours, theirs, query) -> None:
    """The contract: Placement's hosts, each request one of Placement's, a few per
    host at most, Placement's summaries."""
    what = query.describe()
    assert ours.root_provider_uuids() == theirs.root_provider_uuids(), what
    their_requests = {request_key(r) for r in theirs.raw_requests()}
    for request in ours.raw_requests():
        assert request_key(request) in their_requests, (what, request)
    our_summaries = ours.raw_summaries()
    per_root = Counter(root_of(r, our_summaries) for r in ours.raw_requests())
    assert set(per_root) == hosts_in(ours), what
    assert max(per_root.values(), default=1) <= trees.REQUESTS_PER_ROOT, what
    assert len({request_key(r) for r in ours.raw_requests()}) == len(ours), what
    assert summaries_of(ours) == summaries_of(theirs), what


def assert_same_hosts(view: ProviderView, catalog: HostCatalog, theirs, query) -> None:
    """What a request decides over when the view answers: Placement's hosts, each
    with a few of Placement's requests (read when its HostState is built)."""
    match, why = view.match(query)
    table = HostTable(theirs, catalog)
    if not table.roots:
        assert why == NONE_FIT, query.describe()
        return
    hosts = match.hosts(catalog)
    # A host table of Placement's answer has a row for each tree, not a pool's, that
    # an answer takes from.
    assert set(table.roots) == hosts_in(theirs), query.describe()
    assert {hosts.table.roots[row] for row in hosts.rows.tolist()} == set(table.roots), (
        query.describe())
    for row in hosts.rows.tolist():
        offered = {request_key(r.to_json()) for r in hosts.table.host(row).allocation_candidates}
        their_host = table.host(table.roots.index(hosts.table.roots[row]))
        assert 1 <= len(offered) <= trees.REQUESTS_PER_ROOT, query.describe()
        assert offered <= {request_key(r.to_json()) for r in their_host.allocation_candidates}, (
            query.describe())


reader = flat.reader     # the view's reader of the embedded Placement's database


@pytest.mark.parametrize('seed_value', range(12))
def test_the_view_answers_granular_queries_on_nested_trees_as_placement_does(
        placement_client, reader, seed_value):
    rng = random.Random(2700 + seed_value)
    cloud = random_nested_cloud(placement_client, rng, rng.randint(4, 7))
    snapshot = reader.read()
    view = ProviderView(lambda _: snapshot, max_age=300.0)
    catalog = HostCatalog(default_cell_uuid=SERVICE_CELL)
    shapes: Counter[str] = Counter()
    for _ in range(40):
        query = random_granular_query(rng, cloud)
        why = answer.why_not_exact(query, snapshot)
        if why == answer.INVALID:
            with pytest.raises(pexc.BadRequest):
                placement_client.get_allocation_candidates(query)
            shapes['refused'] += 1
            continue
        theirs = placement_client.get_allocation_candidates(query)
        if why == answer.SUMMED_IN_PLACE:
            shapes['summed in place'] += 1
            continue
        if why == answer.SHARED_ALONE:
            # Every class of the unsuffixed group is in a pool: Placement answers
            # such a combination for one of the roots the pools serve.
            assert set(next(g for g in query.groups if not g.suffix).resources) <= cloud.shared
            shapes['shared alone'] += 1
            continue
        # Every pool is a root: nothing else valid is left to Placement.
        assert why is None, query.describe()
        assert_same_answer(view_answer(snapshot, query), theirs, query)
        assert_same_hosts(view, catalog, theirs, query)
        shapes['answered' if hosts_in(theirs) else 'empty'] += 1
        pools_used = {rp for request in theirs.raw_requests() for rp in request['allocations']
                      if SHARING in theirs.raw_summaries()[rp]['traits']}
        shapes['from a pool'] += bool(pools_used)
        shapes['pool only'] += len(theirs) > 0 and not hosts_in(theirs)
        shapes['shared class granular'] += any(
            g.suffix and set(g.resources) & cloud.shared for g in query.groups)

        shapes['same_subtree'] += bool(query.same_subtree)
        shapes['isolate'] += query.group_policy == 'isolate'
    # The walk met hosts and no hosts, both policies and subtrees.
    assert shapes['answered'] > 3 and shapes['empty'] > 0, shapes
    assert shapes['same_subtree'] > 0 and shapes['isolate'] > 0, shapes
    print(f'seed {seed_value}: {dict(shapes)}')     # what the walk met (pytest -s)


def test_a_host_of_eight_devices_is_answered_with_a_few_requests_where_placement_builds_thousands(
        placement_client, reader):
    # Placement builds the product of every group's candidates on a tree (bug
    # 2126751): 8 vGPUs asked for by 4 groups are 8**4 = 4,096 combinations for
    # one host, 8*7*6*5*4 = 6,720 under isolate with 5 groups (fewer where a
    # vGPU would be given three times, or where some are full).
    roots = []
    for i in range(2):
        roots.append(seed.create_provider(
            placement_client, name=f'wide-{i}', uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, f'w{i}')),
            inventories={'VCPU': 16, 'MEMORY_MB': 32768}))
        for g in range(8):
            seed.create_provider(placement_client, name=f'wide-{i}-pgpu{g}', parent_uuid=roots[-1],
                                 uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, f'wide-{i}-pgpu{g}')),
                                 inventories={'VGPU': 2}, traits=[VGPU_TYPES[0]])
    # wide-1 has three vGPUs left with room: five groups under isolate do not fit.
    for g in range(5):
        fill_all(placement_client, str(uuid.uuid5(uuid.NAMESPACE_DNS, f'wide-1-pgpu{g}')))
    snapshot = reader.read()

    for policy, groups, hosts in (('none', 4, {roots[0], roots[1]}),
                                  ('isolate', 5, {roots[0]})):
        query = AllocationCandidatesQuery(
            groups=[RequestGroupQuery(resources={'VCPU': 2, 'MEMORY_MB': 2048})]
            + [RequestGroupQuery(suffix=str(n), resources={'VGPU': 1},
                                 required_traits={VGPU_TYPES[0]}) for n in range(1, groups + 1)],
            group_policy=policy)
        theirs = placement_client.get_allocation_candidates(query)
        ours = trees.candidates(snapshot, query, overlay={}, microversion=MICROVERSION)

        assert len(theirs) > 3000
        assert ours.root_provider_uuids() == theirs.root_provider_uuids() == hosts
        assert len(ours) == trees.REQUESTS_PER_ROOT * len(hosts)
        assert_same_answer(ours, theirs, query)
        # The alternatives spread over the host's devices, not one device apart.
        wide0 = [r for r in ours.raw_requests() if roots[1] not in json.dumps(r)]
        assert len({rp for r in wide0 for rp in r['allocations']}) > groups + 1


def fill_all(client, rp: str) -> None:
    inventories = client.request('GET', f'/resource_providers/{rp}/inventories',
                                 microversion=MICROVERSION).json()['inventories']
    seed.allocate(client, str(uuid.uuid4()), {rp: {rc: inv['total']
                                                   for rc, inv in inventories.items()}},
                  PROJECT, USER)
