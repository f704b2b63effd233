"""The provider view answers as Placement does, on the same state.

Random flat clouds are built through a real Placement's API (inventories with
reserved amounts, allocation ratios, min/max units and step sizes; traits;
aggregates; allocations that fill some providers partly), and the view reads
them from that Placement's own database, read-only. For random queries (resource
amounts, required and forbidden traits, ``member_of`` sets, forbidden aggregates,
``in_tree``, ``root_required``), the hosts the view yields, and what it says of
each (capacity, usage, traits), equal Placement's own answer. Shapes the view
cannot answer exactly are detected and left to Placement.
"""
from __future__ import annotations

import datetime
import json
import random
import time
import uuid

import pytest

from placement_client import exceptions as pexc
from placement_client.client import PlacementClient
from placement_client.models import AllocationRequest
from placement_client.query import AllocationCandidatesQuery, RequestGroupQuery
from scheduler import exceptions as exc
from scheduler import metrics
from scheduler.catalog import HostCatalog, placement_db
from scheduler.catalog.placement_db import PlacementDatabaseReader
from scheduler.host_table import HostTable
from scheduler.provider_view import answer, trees
from scheduler.provider_view.snapshot import ProviderSnapshot
from scheduler.provider_view.view import NONE_FIT, ProviderView
from scheduler.simulate import seed
from tests.builders import PROJECT, SERVICE_CELL, USER, boot_spec, new_uuids, select
from tests.fixtures.placement import make_placement_conf
from tests.fixtures.postgres_placement import POSTGRES_URL
from tests.functional.cloud import add_host, consumers_with_allocations

TRAITS = ('HW_CPU_X86_AVX2', 'CUSTOM_SSD', 'CUSTOM_GPU', 'COMPUTE_STATUS_DISABLED')
AGGREGATES = tuple(str(uuid.uuid5(uuid.NAMESPACE_DNS, f'agg{i}')) for i in range(4))
CLASSES = ('VCPU', 'MEMORY_MB', 'DISK_GB')


def random_cloud(client, rng: random.Random, hosts: int, *,
                 nested: bool = True) -> tuple[list[str], list[str]]:
    """(root providers, providers below them) of a new random cloud: roots with
    VCPU, MEMORY_MB and mostly DISK_GB, some with a vGPU child (with ``nested``);
    maybe a sharing provider of IPV4_ADDRESS."""
    providers: list[str] = []
    children: list[str] = []
    for i in range(hosts):
        inventories = {}
        for rc, total in (('VCPU', rng.choice((4, 8, 16))),
                          ('MEMORY_MB', rng.choice((4096, 8192, 16384))),
                          ('DISK_GB', rng.choice((50, 100)))):
            if rc == 'DISK_GB' and rng.random() < 0.2:
                continue        # a host without local disk
            inventories[rc] = {
                'total': total, 'reserved': rng.choice((0, 0, 1, total // 4)),
                'allocation_ratio': rng.choice((1.0, 1.5, 4.0, 0.9)),
                'min_unit': rng.choice((1, 1, 2)), 'max_unit': rng.choice((total, total // 2)),
                'step_size': rng.choice((1, 1, 2))}
        providers.append(seed.create_provider(
            client, name=f'view-{i}', uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, f'view-{i}')),
            inventories=inventories, traits=rng.sample(TRAITS, rng.randint(0, 2)),
            aggregates=rng.sample(AGGREGATES, rng.randint(0, 2))))
        if nested and rng.random() < 0.3:   # a vGPU below the root, with traits of its own
            children.append(seed.create_provider(
                client, name=f'view-{i}-gpu', parent_uuid=providers[-1],
                inventories={'VGPU': 4}, traits=rng.sample(TRAITS, 1)))
    if rng.random() < 0.5:          # a sharing provider of a class no root has
        seed.create_provider(client, name='view-ips', inventories={'IPV4_ADDRESS': 16},
                             traits=['MISC_SHARES_VIA_AGGREGATE'], aggregates=AGGREGATES[:1])
    for rp in rng.sample(providers, hosts // 2):
        # Partly full: an allocation that fits whatever the inventory's rules.
        usage = client.request('GET', f'/resource_providers/{rp}/inventories',
                               microversion='1.36').json()['inventories']
        wanted = {}
        for rc, inv in usage.items():
            step, low = inv['step_size'], inv['min_unit']
            amount = max(low, step) * rng.randint(1, 2)
            if amount <= inv['max_unit'] and amount <= (
                    inv['total'] - inv['reserved']) * inv['allocation_ratio']:
                wanted[rc] = amount
        if wanted:
            seed.allocate(client, str(uuid.uuid4()), {rp: wanted}, PROJECT, USER)
    return providers, children


def random_query(rng: random.Random, providers: list[str]) -> AllocationCandidatesQuery:
    group = RequestGroupQuery(resources={rc: rng.choice((1, 2, 3, 4, 6, 1024, 2048))
                                         if rc == 'MEMORY_MB' else rng.choice((1, 2, 3, 4, 6))
                                         for rc in rng.sample(CLASSES, rng.randint(1, 3))})
    if rng.random() < 0.1:
        group.resources[rng.choice(('VGPU', 'IPV4_ADDRESS'))] = 1   # left to Placement
    if rng.random() < 0.3:
        group.required_traits = set(rng.sample(TRAITS, 1))
    if rng.random() < 0.3:
        group.forbidden_traits = set(rng.sample(TRAITS, 1)) - group.required_traits
    if rng.random() < 0.3:
        group.member_of = [frozenset(rng.sample(AGGREGATES, rng.randint(1, 2)))]
    if rng.random() < 0.2:
        group.forbidden_aggregates = set(rng.sample(AGGREGATES, 1))
    if rng.random() < 0.1:
        group.in_tree = rng.choice(providers)
    query = AllocationCandidatesQuery(groups=[group])
    if rng.random() < 0.2:
        query.root_required = {rng.choice(TRAITS)} - group.forbidden_traits
    return query


def request_key(request: dict) -> str:
    """An allocation request, its mappings' providers in a set's order (Placement's)."""
    return json.dumps({'allocations': request['allocations'],
                       'mappings': {s: sorted(rps) for s, rps in request['mappings'].items()}},
                      sort_keys=True)


def requests_of(candidates) -> list:
    return sorted(request_key(r) for r in candidates.raw_requests())


def summaries_of(candidates) -> dict:
    return {rp: (s['resources'], sorted(s['traits']), s['parent_provider_uuid'],
                 s['root_provider_uuid']) for rp, s in candidates.raw_summaries().items()}


@pytest.fixture
def reader(placement):
    # Allocations counted at every read: a deletion is seen by the next one.
    reader = PlacementDatabaseReader(f'sqlite:///{placement.db_path}', deletions_every=0)
    yield reader
    reader.close()


@pytest.mark.parametrize('seed_value', range(6))
def test_the_view_yields_the_hosts_placement_yields_on_the_same_state(
        placement_client, reader, seed_value):
    rng = random.Random(seed_value)
    providers, children = random_cloud(placement_client, rng, rng.randint(6, 14))
    snapshot = reader.read()
    asked = answered = 0

    for _ in range(40):
        query = random_query(rng, providers + children)
        theirs = placement_client.get_allocation_candidates(query)
        asked_for = set(query.groups[0].resources)
        why = answer.why_not_exact(query, snapshot)
        assert why is None, query.describe()
        if not answer.is_flat(query, snapshot):
            # VGPU is held below the roots, IPV4_ADDRESS by a sharing provider:
            # answered tree by tree, a few of Placement's requests per host
            # (test_provider_view_nested.py).
            assert ('VGPU' in asked_for and children) or (
                'IPV4_ADDRESS' in asked_for & snapshot.shared_classes)
            ours = trees.candidates(snapshot, query, overlay={}, microversion='1.36')
            assert ours.root_provider_uuids() == theirs.root_provider_uuids(), query.describe()
            assert summaries_of(ours) == summaries_of(theirs), query.describe()
            assert set(requests_of(ours)) <= set(requests_of(theirs)), query.describe()
            continue
        ours = answer.candidates(snapshot, query, overlay={}, microversion='1.36')

        assert ours.root_provider_uuids() == theirs.root_provider_uuids(), query.describe()
        assert summaries_of(ours) == summaries_of(theirs), query.describe()
        assert requests_of(ours) == requests_of(theirs), query.describe()
        asked += 1
        answered += bool(len(theirs))
    # The walk met both answers with hosts and answers without.
    assert 0 < answered < asked


@pytest.mark.parametrize('seed_value', range(3))
def test_the_view_s_host_table_holds_what_a_table_of_placement_s_answer_holds(
        placement_client, reader, seed_value):
    # What a request decides over: every host of Placement's whole answer, with
    # the capacity and usage Placement reports per class, whoever builds the table.
    rng = random.Random(100 + seed_value)
    providers, children = random_cloud(placement_client, rng, rng.randint(8, 14))
    view = ProviderView(reader.read, max_age=300.0)
    catalog = HostCatalog(default_cell_uuid=SERVICE_CELL)
    compared = 0
    for _ in range(30):
        query = random_query(rng, providers)
        match, why = view.match(query)
        if why == NONE_FIT:
            assert not len(placement_client.get_allocation_candidates(query))
            continue
        if why is not None:
            continue
        ours = match.hosts(catalog)
        theirs = HostTable(placement_client.get_allocation_candidates(query), catalog)
        assert sorted(ours.table.roots[r] for r in ours.rows) == sorted(theirs.roots)
        for row in ours.rows.tolist():
            other = theirs.roots.index(ours.table.roots[row])
            for rc in set(ours.table.capacity) | set(theirs.capacity):
                for kind in ('capacity', 'used'):
                    assert (ours.table.column(rc, kind)[row]
                            == theirs.column(rc, kind)[other]), (query.describe(), rc, kind)
            # A host built from the view's rows is the one built from Placement's.
            host, their_host = ours.table.host(row), theirs.host(other)
            assert (host.capacity, host.used) == (their_host.capacity, their_host.used)
            if match.requests is None:
                assert host.allocation_candidates == their_host.allocation_candidates
            else:
                # A vGPU below the root: a few of Placement's requests.
                assert 1 <= len(host.allocation_candidates) <= trees.REQUESTS_PER_ROOT
                assert {request_key(r.to_json()) for r in host.allocation_candidates} <= {
                    request_key(r.to_json()) for r in their_host.allocation_candidates}
        compared += 1
    assert compared > 5


def test_the_shapes_the_view_cannot_answer_are_detected_on_a_real_placement(
        placement_client, reader):
    compute = add_host(placement_client, 'flat-compute')
    simple = AllocationCandidatesQuery(groups=[RequestGroupQuery(resources={'VCPU': 1})])
    granular = AllocationCandidatesQuery(groups=[
        RequestGroupQuery(resources={'VCPU': 1}),
        RequestGroupQuery(suffix='1', resources={'MEMORY_MB': 512})], group_policy='none')
    resourceless = AllocationCandidatesQuery(groups=[
        RequestGroupQuery(required_traits={'HW_CPU_X86_AVX2'}),
        RequestGroupQuery(suffix='1', resources={'VCPU': 1})])
    subtree = AllocationCandidatesQuery(groups=[RequestGroupQuery(resources={'VCPU': 1})],
                                        same_subtree=[['', '_X']])
    assert answer.why_not_exact(simple, reader.read()) is None
    # Granular groups are the view's (test_provider_view_nested.py); a resourceless
    # unsuffixed group, or same_subtree naming it, is a query Placement refuses.
    assert answer.why_not_exact(granular, reader.read()) is None
    assert not answer.is_flat(granular, reader.read())
    for refused in (resourceless, subtree):
        assert answer.why_not_exact(refused, reader.read()) == answer.INVALID
        with pytest.raises(pexc.BadRequest):
            placement_client.get_allocation_candidates(refused)
    unknown_tree = AllocationCandidatesQuery(groups=[RequestGroupQuery(
        resources={'VCPU': 1}, in_tree=str(uuid.uuid4()))])
    assert answer.why_not_exact(unknown_tree, reader.read()) == answer.UNKNOWN_TREE

    # VCPU below a root: a VCPU request may be served from two providers of a
    # tree, which the view searches tree by tree.
    seed.create_provider(placement_client, name='flat-compute-numa0', parent_uuid=compute,
                         inventories={'VCPU': 4})
    assert answer.why_not_exact(simple, reader.read()) is None
    assert not answer.is_flat(simple, reader.read())

    # Shared disk: a request for disk may be served by the compute and the share,
    # which the view searches tree by tree; one for VCPU alone only by a root.
    seed.delete_all(placement_client)
    compute = add_host(placement_client, 'compute-with-shared-disk')
    seed.create_provider(placement_client, name='nfs', inventories={'DISK_GB': 1000},
                         traits=['MISC_SHARES_VIA_AGGREGATE'])
    with_disk = AllocationCandidatesQuery(groups=[RequestGroupQuery(
        resources={'VCPU': 1, 'DISK_GB': 10})])
    assert answer.why_not_exact(with_disk, reader.read()) is None
    assert not answer.is_flat(with_disk, reader.read())
    assert answer.why_not_exact(simple, reader.read()) is None
    assert answer.is_flat(simple, reader.read())
    # Disk alone: Placement answers a combination all from sharing providers for
    # one of the roots they serve (test_provider_view_sharing.py).
    disk_only = AllocationCandidatesQuery(groups=[RequestGroupQuery(resources={'DISK_GB': 10})])
    assert answer.why_not_exact(disk_only, reader.read()) == answer.SHARED_ALONE
    # A sharing provider below a root: its tree would be both a host and a pool.
    seed.create_provider(placement_client, name='local-pool', parent_uuid=compute,
                         inventories={'DISK_GB': 100}, traits=['MISC_SHARES_VIA_AGGREGATE'])
    assert answer.why_not_exact(with_disk, reader.read()) == answer.SHARING
    assert answer.why_not_exact(simple, reader.read()) is None


def test_the_service_places_from_the_view_and_placement_refuses_what_a_stale_view_offers(
        start_scheduler, placement, placement_client):
    # Two hosts with room for one 4-vCPU instance each. The view is read once and
    # kept (max age 300 s); then someone else fills the host it has not used.
    small = add_host(placement_client, 'view-small', vcpus=4, ram_mb=4096)
    big = add_host(placement_client, 'view-big', vcpus=4, ram_mb=16384)
    running = start_scheduler(**{
        'scheduler.provider_view': True, 'scheduler.provider_view_max_age': 300.0,
        'placement_database.connection': f'sqlite:///{placement.db_path}'})
    view = running.service.manager.provider_view
    assert view.reads == 1, 'the service takes calls before its view is read'
    from_view = metrics.PROVIDER_VIEW_QUERIES.value(answer='view', why='')
    first, second, third = new_uuids(3)
    flavor = {'vcpus': 4, 'ram_mb': 1024, 'disk_gb': 1}

    [[chosen, *_]] = select(running, boot_spec(**flavor), [first])
    assert chosen.compute_node_uuid == big                       # the RAM weigher's choice
    seed.allocate(placement_client, str(uuid.uuid4()), {small: {'VCPU': 4}}, PROJECT, USER)

    # The view knows its own claim on view-big, not the other one on view-small:
    # it offers view-small, and Placement refuses the claim.
    with pytest.raises(exc.NoValidHost) as refused:
        select(running, boot_spec(**flavor), [second])
    assert 'capacity exceeded' in refused.value.reason
    assert placement_client.get_allocations(second).allocations == {}
    # The refusal made the view read again (behind the requests): no host is offered.
    deadline = time.monotonic() + 10
    while view.reads < 2:
        assert time.monotonic() < deadline, 'the view was not read again'
        time.sleep(0.05)
    # The view has no host left, so Placement is asked, and it has none either.
    none_fit = metrics.PROVIDER_VIEW_QUERIES.value(answer='placement', why=NONE_FIT)
    with pytest.raises(exc.NoValidHost) as failure:
        select(running, boot_spec(**flavor), [third])
    assert 'capacity exceeded' not in failure.value.reason
    assert metrics.PROVIDER_VIEW_QUERIES.value(answer='view', why='') == from_view + 2
    assert metrics.PROVIDER_VIEW_QUERIES.value(answer='placement', why=NONE_FIT) == none_fit + 1
    # Nothing overcommitted, nothing leaked.
    for rp in (small, big):
        usages = placement_client.request('GET', f'/resource_providers/{rp}/usages',
                                          microversion='1.36').json()['usages']
        assert usages['VCPU'] == 4
    assert set(consumers_with_allocations(placement_client, [big])) == {first}


def state_of(snapshot) -> dict:
    """Everything a snapshot says of each provider, by uuid (to compare two reads)."""
    return {rp: (int(snapshot.generations[row]), snapshot.parent_uuid(row),
                 snapshot.traits.of(row), snapshot.aggregates.of(row),
                 snapshot.inventory_of(row))
            for row, rp in enumerate(snapshot.uuids)}


#: A class random_changes gives to providers and takes away from them.
WIDGET = 'CUSTOM_VIEW_WIDGET'


def _smallest_fit(client, rp: str) -> dict[str, int]:
    """The least of each class ``rp`` has room for."""
    inventories = client.request('GET', f'/resource_providers/{rp}/inventories',
                                 microversion='1.36').json()['inventories']
    usages = client.request('GET', f'/resource_providers/{rp}/usages',
                            microversion='1.36').json()['usages']
    wanted = {}
    for rc, inv in inventories.items():
        amount = max(inv['min_unit'], inv['step_size'])
        room = (inv['total'] - inv['reserved']) * inv['allocation_ratio'] - usages[rc]
        if amount <= min(room, inv['max_unit']):
            wanted[rc] = amount
    return wanted


def random_changes(client, rng: random.Random, providers: list[str],
                   consumers: list[str],
                   kinds: tuple[str, ...] = ('claim', 'claim', 'delete', 'move', 'inventory',
                                             'traits', 'aggregates')) -> str:
    """One write another client of Placement could make (one of ``kinds``); what it was."""
    rp = rng.choice(providers)
    kind = rng.choice(kinds)
    if kind == 'claim':
        wanted = _smallest_fit(client, rp)
        if not wanted:
            return 'nothing (full)'
        consumer = str(uuid.uuid4())
        seed.allocate(client, consumer, {rp: wanted}, PROJECT, USER)
        consumers.append(consumer)
        return f'claim {wanted}'
    if kind == 'move':
        # A consumer's allocations replaced (a migration): the providers that held
        # them move no generation, the consumer does.
        wanted = _smallest_fit(client, rp)
        if not consumers or not wanted:
            return 'nothing (no claim yet, or full)'
        seed.allocate(client, rng.choice(consumers), {rp: wanted}, PROJECT, USER)
        return 'move'
    if kind == 'delete':
        if not consumers:
            return 'nothing (no claim yet)'
        # DELETE /allocations/{consumer} moves no provider's generation.
        client.delete_allocations(consumers.pop(rng.randrange(len(consumers))))
        return 'delete'
    if kind == 'inventory':
        current = client.request('GET', f'/resource_providers/{rp}/inventories',
                                 microversion='1.36').json()['inventories']
        if 'VCPU' not in current:
            return 'nothing (no VCPU)'
        current['VCPU']['reserved'] = rng.choice((0, 1))
        current['VCPU']['allocation_ratio'] = rng.choice((1.0, 2.0, 16.0))
        # A class given or taken away: the providers holding it change.
        widget = ''
        if WIDGET not in current and rng.random() < 0.5:
            current[WIDGET] = {'total': rng.randint(1, 8), 'reserved': 0, 'min_unit': 1,
                               'max_unit': 8, 'step_size': 1, 'allocation_ratio': 1.0}
            widget = ' +widget'
        elif WIDGET in current and rng.random() < 0.5 and not client.request(
                'GET', f'/resource_providers/{rp}/usages',
                microversion='1.36').json()['usages'].get(WIDGET):
            del current[WIDGET]
            widget = ' -widget'
        seed.set_inventories(client, rp, {rc: {k: v for k, v in inv.items()
                                               if k in seed.INVENTORY_FIELDS}
                                          for rc, inv in current.items()})
        return 'inventory' + widget
    if kind == 'traits':
        seed.set_traits(client, rp, rng.sample(TRAITS, rng.randint(0, 2)))
        return 'traits'
    seed.set_aggregates(client, rp, rng.sample(AGGREGATES, rng.randint(0, 2)))
    return 'aggregates'


@pytest.mark.parametrize('backend', ['sqlite', 'postgresql'])
@pytest.mark.parametrize('shortcut', [True, False], ids=['recent-writes', 'every-generation'])
def test_a_read_of_what_changed_equals_a_whole_read_of_the_same_state(
        request, monkeypatch, shortcut, backend):
    # Other clients of Placement write between reads: claims, deletions and moves
    # (which move no generation of the providers left), inventories, traits,
    # aggregates. Each read of the
    # changes since the previous snapshot must say what a whole read says, both
    # when the providers written lately account for every moved generation and
    # when they do not (here: a look-back that ends in the future finds none).
    # On PostgreSQL the providers written lately come with the marks, in one statement.
    if not shortcut:
        monkeypatch.setattr(placement_db, 'WRITE_OVERLAP', datetime.timedelta(hours=-1))
    placement_client, url = _placement_and_database(request, backend)
    request.addfinalizer(lambda: seed.delete_all(placement_client))
    # Allocations counted at every read: a deletion is seen by the next one.
    reader = PlacementDatabaseReader(url, deletions_every=0)
    request.addfinalizer(reader.close)
    rng = random.Random(20261125)
    providers, children = random_cloud(placement_client, rng, 10)
    consumers: list[str] = []
    snapshot = reader.read()
    done = []
    for _ in range(40):
        for _ in range(rng.randint(1, 3)):
            done.append(random_changes(placement_client, rng, providers + children, consumers))
        change_reads = reader.change_reads
        snapshot = reader.read(snapshot)
        assert reader.change_reads == change_reads + 1     # not a whole read in disguise
        assert state_of(snapshot) == state_of(reader.read()), done[-3:]
    assert {'claim', 'delete', 'move', 'inventory', 'traits', 'aggregates'} <= {
        d.split(' ')[0] for d in done}
    assert {'inventory +widget', 'inventory -widget'} <= set(done)
    assert (reader.generation_scans == 0) if shortcut else (reader.generation_scans > 20)

    # A whole read of the same providers takes the previous snapshot's provider list.
    whole = reader.read(snapshot, whole=True)
    assert whole.uuids is snapshot.uuids and state_of(whole) == state_of(snapshot)

    # A new provider changes the rows themselves: that read is a whole one.
    new = seed.create_provider(placement_client, name='view-new', inventories={'VCPU': 8})
    whole_reads = reader.whole_reads
    snapshot = reader.read(snapshot)
    assert reader.whole_reads == whole_reads + 1
    assert state_of(snapshot) == state_of(reader.read())
    assert new in snapshot.index


def test_between_looks_at_everything_a_read_takes_the_providers_of_new_claims(
        placement_client, placement, monkeypatch):
    # Claims are what a busy region mostly writes: a read of changes finds their
    # providers by the allocation rows written since (an index range), and looks at
    # everything else (the providers' marks and generations, the consumers':
    # scans of whole tables) every DELETIONS_EVERY seconds. No slice of
    # every provider here: nothing else could have read what the reads find.
    monkeypatch.setattr(placement_db.PlacementDatabaseReader, '_refresh_slice',
                        lambda self, previous: [])
    # Fifteen providers: four written between two looks would be a quarter of them,
    # which a larger cloud reads as changes, not whole.
    monkeypatch.setattr(placement_db, 'WHOLE_READ_SHARE', 0.5)
    rng = random.Random(20261128)
    providers, children = random_cloud(placement_client, rng, 10)
    url = f'sqlite:///{placement.db_path}'
    now = [0.0]
    reader = PlacementDatabaseReader(url, clock=lambda: now[0])
    whole = PlacementDatabaseReader(url)
    step = placement_db.DELETIONS_EVERY / 8
    try:
        snapshot = reader.read()
        consumers: list[str] = []
        for _ in range(6):
            now[0] += step
            for _ in range(rng.randint(1, 3)):
                random_changes(placement_client, rng, providers + children, consumers,
                               kinds=('claim',))
            snapshot = reader.read(snapshot)
            assert state_of(snapshot) == state_of(whole.read())
        assert reader.allocation_reads == 6 and reader.whole_reads == 1

        # Written without an allocation row: seen at the next look at everything.
        rp = providers[0]
        traits = [t for t in TRAITS if t not in snapshot.traits.of(snapshot.index[rp])][:1]
        seed.set_traits(placement_client, rp, traits)
        now[0] += step
        snapshot = reader.read(snapshot)
        assert state_of(snapshot) != state_of(whole.read())
        now[0] += placement_db.DELETIONS_EVERY
        snapshot = reader.read(snapshot)
        assert reader.allocation_reads == 7 and reader.change_reads == 8
        assert state_of(snapshot) == state_of(whole.read())

        # Every kind of write, reads at both paces: each look at everything is exact.
        looks = 0
        for _ in range(24):
            random_changes(placement_client, rng, providers + children, consumers)
            now[0] += rng.choice((step, placement_db.DELETIONS_EVERY))
            light = reader.allocation_reads
            snapshot = reader.read(snapshot)
            if reader.allocation_reads == light:
                looks += 1
                assert state_of(snapshot) == state_of(whole.read())
        assert 4 <= looks < 24 and reader.whole_reads == 1
    finally:
        reader.close()
        whole.close()


def test_a_whole_read_taken_a_few_rows_at_a_time_equals_one_taken_at_once(
        placement_client, reader, monkeypatch):
    rng = random.Random(20261127)
    providers, children = random_cloud(placement_client, rng, 12)
    for rp in providers[:4]:
        seed.set_traits(placement_client, rp, rng.sample(TRAITS, 2))
        seed.set_aggregates(placement_client, rp, rng.sample(AGGREGATES, 2))
    at_once = reader.read()

    monkeypatch.setattr(placement_db, 'FETCH_CHUNK', 3)
    in_pieces = reader.read()

    assert state_of(in_pieces) == state_of(at_once)
    assert in_pieces.nested_classes == at_once.nested_classes
    assert in_pieces.shared_classes == at_once.shared_classes


def test_what_moves_no_generation_is_read_within_a_round_of_slices(placement_client,
                                                                   placement):
    # Aggregates set below microversion 1.19 move no generation: no read of what
    # changed sees them, but each read also takes a slice of every provider again.
    rng = random.Random(20261126)
    providers, children = random_cloud(placement_client, rng, 10)
    reader = PlacementDatabaseReader(f'sqlite:///{placement.db_path}', refresh_reads=4)
    try:
        snapshot = reader.read()
        rp = snapshot.uuids[-1]         # in the last slice (slices go in row order)
        generation = snapshot.generations[snapshot.index[rp]]
        placement_client.request('PUT', f'/resource_providers/{rp}/aggregates',
                                 microversion='1.18', json=[AGGREGATES[3]])

        seen = []
        for _ in range(4):
            snapshot = reader.read(snapshot)
            seen.append(AGGREGATES[3] in snapshot.aggregates.of(snapshot.index[rp]))
        assert snapshot.generations[snapshot.index[rp]] == generation     # not moved
        assert seen == [False, False, False, True]     # taken in by its slice
        assert reader.change_reads == 4 and reader.whole_reads == 1
        assert state_of(snapshot) == state_of(reader.read())
    finally:
        reader.close()


def test_on_postgresql_the_view_reads_one_moment_and_answers_as_placement_does(
        postgres_placement):
    # Placement's production backend: the five reads run in one repeatable-read
    # transaction of a read-only session. Flat trees: Placement 16 on PostgreSQL
    # answers a forbidden trait with HTTP 500 once any provider has a parent
    # ("invalid input syntax for type integer" in its nested-tree trait query).
    client = PlacementClient.from_conf(make_placement_conf(postgres_placement.url))
    url = POSTGRES_URL.rsplit('/', 1)[0] + f'/{postgres_placement.database}'
    reader = PlacementDatabaseReader(url, deletions_every=0)
    rng = random.Random(20261125)
    try:
        providers, children = random_cloud(client, rng, 10, nested=False)
        snapshot = reader.read()
        assert set(providers + children) <= set(snapshot.uuids)
        for _ in range(30):
            query = random_query(rng, providers)
            if answer.why_not_exact(query, snapshot) is not None:
                continue
            theirs = client.get_allocation_candidates(query)
            ours = answer.candidates(snapshot, query, overlay={}, microversion='1.36')
            assert requests_of(ours) == requests_of(theirs), query.describe()
            assert summaries_of(ours) == summaries_of(theirs), query.describe()
        # Reads of what changed, through the driver's own cursor, as on sqlite.
        consumers: list[str] = []
        for _ in range(15):
            random_changes(client, rng, providers, consumers)
            snapshot = reader.read(snapshot)
            assert state_of(snapshot) == state_of(reader.read())
        assert reader.change_reads == 15
    finally:
        reader.close()
        seed.delete_all(client)


def _placement_and_database(request, backend: str) -> tuple[PlacementClient, str]:
    """A client of the embedded Placement on ``backend`` (sqlite or postgresql), and
    the URL of its database."""
    if backend == 'sqlite':
        placement = request.getfixturevalue('placement')
        url = f'sqlite:///{placement.db_path}'
    else:
        placement = request.getfixturevalue('postgres_placement')
        url = POSTGRES_URL.rsplit('/', 1)[0] + f'/{placement.database}'
    return PlacementClient.from_conf(make_placement_conf(placement.url)), url


def _pending_consumer(url: str) -> str:
    """A consumer as Placement creates one for a claim, before the claim's own
    transaction writes its allocations and moves it to generation 1 (the project and
    user of one already there); its uuid."""
    import sqlalchemy

    consumer = str(uuid.uuid4())
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sqlalchemy.text(
                'INSERT INTO consumers (created_at, uuid, project_id, user_id, generation, '
                'consumer_type_id) SELECT created_at, :uuid, project_id, user_id, 0, '
                'consumer_type_id FROM consumers WHERE generation > 0 LIMIT 1'),
                {'uuid': consumer})
    finally:
        engine.dispose()
    return consumer


@pytest.mark.parametrize('backend', ['sqlite', 'postgresql'])
def test_a_claim_counted_between_its_consumer_and_its_allocations_is_no_loss(
        request, backend):
    # Placement creates a claim's consumer (generation 0) in a transaction of its
    # own, then writes the allocations and moves it to 1. Under load a few claims
    # are between the two at every count of the consumers: taken for a loss, each
    # look at everything would sum every allocation again (the checksums). Such a
    # claim deleted, or moved, before the next count is a loss: a read between took
    # its provider with the claim, and neither moves that provider's generation.
    client, url = _placement_and_database(request, backend)
    now = [0.0]
    reader = PlacementDatabaseReader(url, clock=lambda: now[0])
    whole = PlacementDatabaseReader(url)
    rng = random.Random(20261203)

    def claim(consumer: str, rp: str, generation: int | None = 0) -> None:
        client.put_allocations(consumer, AllocationRequest(
            allocations={rp: _smallest_fit(client, rp)}), project_id=PROJECT, user_id=USER,
            consumer_generation=generation)

    def read(step: float) -> ProviderSnapshot:
        now[0] += step
        return reader.read(snapshot)

    try:
        providers, _ = random_cloud(client, rng, 12, nested=False)
        claim(str(uuid.uuid4()), providers[0], None)
        snapshot = reader.read()
        checks = []
        for loss in ('deleted', 'moved'):
            pending = [_pending_consumer(url) for _ in range(2)]
            snapshot = read(placement_db.DELETIONS_EVERY)    # counts them as pending
            for consumer, rp in zip(pending, providers[1:3], strict=True):
                claim(consumer, rp)
            snapshot = read(placement_db.DELETIONS_EVERY / 4)     # takes the claims
            if loss == 'deleted':
                client.delete_allocations(pending[0])
            else:
                claim(pending[0], providers[3], 1)
            snapshot = read(0.0)
            assert state_of(snapshot) != state_of(whole.read())   # not seen yet
            snapshot = read(placement_db.DELETIONS_EVERY)
            checks.append(reader.usage_checks)
            assert state_of(snapshot) == state_of(whole.read()), loss
        assert checks == [1, 2]
        assert reader.whole_reads == 1 and reader.allocation_reads == 4

        # Claims alone, their consumers pending at the count before: no checksum.
        pending = [_pending_consumer(url) for _ in range(2)]
        snapshot = read(placement_db.DELETIONS_EVERY)
        for consumer, rp in zip(pending, providers[4:6], strict=True):
            claim(consumer, rp)
        snapshot = read(placement_db.DELETIONS_EVERY)
        assert reader.usage_checks == 2
        assert state_of(snapshot) == state_of(whole.read())
    finally:
        reader.close()
        whole.close()
        seed.delete_all(client)


@pytest.mark.parametrize('backend', ['sqlite', 'postgresql'])
def test_a_deletion_or_a_move_is_found_by_checksums_of_usage_and_reads_only_its_providers(
        request, backend, monkeypatch):
    # DELETE /allocations/{consumer} moves no generation, nor does a consumer's
    # allocations replaced elsewhere move the generation of the provider they left.
    # The read that counts the consumers next must find the providers that lost
    # allocations without taking every
    # provider's usage again: the checksums name exactly them (32-bit amounts
    # multiplied in 64 bits on PostgreSQL); the slice that reads every provider
    # again in turn is kept away from them, so nothing else could have.
    client, url = _placement_and_database(request, backend)
    monkeypatch.setattr(placement_db.PlacementDatabaseReader, '_refresh_slice',
                        lambda self, previous: [])
    monkeypatch.setattr(placement_db, 'PROVIDERS_PER_BUCKET', 4)
    found: list[list[int]] = []
    usage_moved = placement_db._usage_moved
    monkeypatch.setattr(placement_db, '_usage_moved',
                        lambda *args: found.append(usage_moved(*args)) or found[-1])
    now = [0.0]
    reader = PlacementDatabaseReader(url, clock=lambda: now[0])
    rng = random.Random(20261127)
    try:
        providers, _ = random_cloud(client, rng, 12, nested=False)
        big = {'VCPU': 2**20, 'MEMORY_MB': 2**30, 'DISK_GB': 2**20}
        for rp in providers:
            client.request('PUT', f'/resource_providers/{rp}/inventories', microversion='1.36',
                           json={'resource_provider_generation': client.request(
                               'GET', f'/resource_providers/{rp}', microversion='1.36'
                           ).json()['generation'],
                               'inventories': {rc: {'total': total, 'allocation_ratio': 16.0}
                                               for rc, total in big.items()}})
        consumers = {}
        for rp in providers:
            consumer = str(uuid.uuid4())
            # Amounts near Placement's 32-bit bound: their weighted sum needs 64 bits.
            seed.allocate(client, consumer, {rp: {'MEMORY_MB': 2**31 - 1 - rng.randrange(99),
                                                  'VCPU': 3}}, PROJECT, USER)
            consumers[rp] = consumer
        snapshot = reader.read()
        gone = rng.sample(providers, 3)
        for rp in gone:
            client.delete_allocations(consumers[rp])
        # The consumers are counted every DELETIONS_EVERY seconds (a scan of a
        # whole table): a read sooner does not see the deletion.
        now[0] += placement_db.DELETIONS_EVERY / 2
        snapshot = reader.read(snapshot)
        assert reader.usage_checks == 0 and not found
        assert state_of(snapshot) != state_of(reader.read())
        now[0] += placement_db.DELETIONS_EVERY
        snapshot = reader.read(snapshot)

        assert reader.usage_checks == 1 and reader.change_reads == 2
        assert sorted(found[-1]) == sorted(snapshot.ids[snapshot.index[rp]] for rp in gone)
        assert state_of(snapshot) == state_of(reader.read())

        # A read with nothing taken away compares no checksum, a new instance's
        # claim meanwhile or not.
        now[0] += placement_db.DELETIONS_EVERY
        snapshot = reader.read(snapshot)
        seed.allocate(client, str(uuid.uuid4()), {gone[0]: {'VCPU': 1}}, PROJECT, USER)
        now[0] += placement_db.DELETIONS_EVERY
        snapshot = reader.read(snapshot)
        assert reader.usage_checks == 1 and len(found) == 1
        assert state_of(snapshot) == state_of(reader.read())

        # A migration: a consumer's allocations replaced on another provider. The
        # provider they left moves no generation (the consumer's does): the
        # checksums name it, and the one they went to (whose generation moved).
        left = next(rp for rp in providers if rp not in gone)
        seed.allocate(client, consumers[left], {gone[1]: {'VCPU': 3}}, PROJECT, USER)
        now[0] += placement_db.DELETIONS_EVERY
        snapshot = reader.read(snapshot)
        assert reader.usage_checks == 2
        assert sorted(found[-1]) == sorted(snapshot.ids[snapshot.index[rp]]
                                           for rp in (left, gone[1]))
        assert state_of(snapshot) == state_of(reader.read())
    finally:
        reader.close()
        seed.delete_all(client)
