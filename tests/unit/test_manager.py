"""SchedulerManager.select_destinations against the in-memory Placement.

tests/functional/test_select_destinations.py shows the behaviour on a real
Placement; these tests cover what a real Placement cannot be made to do on
demand (outages in the middle of a request, generation conflict storms) and
pin the claim loop's order, the all-or-nothing rule and the alternates. The
fake's own state is what every test reads back.
"""
from __future__ import annotations

import json
import random

import pytest

from placement_client import exceptions as pexc
from scheduler import exceptions as exc
from scheduler import explain
from scheduler.catalog import HostCatalog
from scheduler.context import RequestContext
from scheduler.filters.base import BaseHostFilter
from scheduler.manager import SchedulerManager
from scheduler.objects.spec import Destination, Flavor, RequestGroup
from scheduler.weights.ram import RAMWeigher
from tests.builders import (
    CELL,
    CELL2,
    PROJECT,
    TOKEN,
    USER,
    make_conf,
    select,
    user_spec,
    uuids,
)
from tests.unit.fake_placement import FakePlacement, provider_conflict, unavailable

THIEF = 'f0000000-0000-4000-8000-00000000f001'
ASK = {'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}   # make_spec's flavor


class RejectEverything(BaseHostFilter):
    def host_passes(self, host_state, spec_obj):
        return False


class Recorder(BaseHostFilter):
    """Passes every host; remembers what it saw of the spec for each instance."""

    def __init__(self):
        self.seen: list[tuple[str | None, list[list[str]]]] = []

    def host_passes(self, host_state, spec_obj):
        return True

    def filter_all(self, hosts, spec_obj):
        self.seen.append((spec_obj.instance_uuid,
                          [list(rg.provider_uuids) for rg in spec_obj.requested_resources]))
        return list(hosts)


class FailsOnRun(BaseHostFilter):
    """Raises on its n-th run (1-based), passes every host otherwise."""

    def __init__(self, n: int):
        self.n = n
        self.runs = 0

    def filter_all(self, hosts, spec_obj):
        self.runs += 1
        if self.runs == self.n:
            raise RuntimeError('plugin bug')
        return list(hosts)


def names(fake, rps) -> list[str]:
    return [fake.providers[rp].name for rp in rps]


def claimed_vcpu_providers(fake) -> list[str]:
    """The provider each PUT took VCPU from, by name, in order."""
    return [fake.providers[next(rp for rp, r in req.allocations.items() if 'VCPU' in r)].name
            for _, req in fake.claims()]


def add_numa_host(fake, name: str, *, ram_mb: int, numa_nodes: int = 4) -> str:
    """VCPU in NUMA children, memory and disk on the root: one candidate per NUMA node."""
    root = fake.add_provider(name, {'MEMORY_MB': ram_mb, 'DISK_GB': 1000})
    for i in range(numa_nodes):
        fake.add_provider(f'{name}-numa{i}', {'VCPU': 4}, parent=root)
    return root


def catalog_with_cells(tmp_path, cells: dict[str, str]) -> HostCatalog:
    """A catalog whose hosts file puts each named node in a cell."""
    hosts = ''.join(f'  - nodename: {node}\n    cell: {cell}\n' for node, cell in cells.items())
    path = tmp_path / 'hosts.yaml'
    path.write_text(f'cells:\n  - uuid: {CELL}\n  - uuid: {CELL2}\nhosts:\n{hosts}')
    return HostCatalog.from_file(str(path), default_cell_uuid=CELL)


# ---------------------------------------------------------------------- the claim loop


@pytest.mark.parametrize('per_host', [1, 3, 4])
def test_claims_walk_the_weighed_hosts_and_each_hosts_candidates_in_order_up_to_the_bound(
        fake, make_manager, per_host):
    big = add_numa_host(fake, 'big', ram_mb=65536)
    add_numa_host(fake, 'small', ram_mb=16384)
    # Between our GET and our first PUT another scheduler takes every vCPU of
    # the host RAMWeigher prefers: Placement refuses each of its candidates.
    fake.script('put_allocations', lambda call: fake.allocate(THIEF, {
        rp: {'VCPU': 4} for rp, p in fake.providers.items() if p.parent == big}))
    manager = make_manager(scheduler={'max_claim_candidates_per_host': per_host})
    [instance] = uuids(1)

    [selections] = select(manager, user_spec(), [instance])

    tried_on_big = [f'big-numa{i}' for i in range(min(per_host, 4))]
    assert claimed_vcpu_providers(fake) == [*tried_on_big, 'small-numa0']
    assert selections[0].service_host == 'small'
    assert set(fake.holdings()) == {THIEF, instance}


def test_a_provider_generation_storm_on_the_best_host_moves_on_after_the_bounded_retries(
        fake, make_manager):
    big = fake.add_compute('big', ram_mb=65536)
    small = fake.add_compute('small', ram_mb=16384)
    fake.script('put_allocations', provider_conflict(), times=None,
                when=lambda call: big in call.kwargs['allocation_request'].allocations)
    manager = make_manager(scheduler={'claim_max_retries': 4, 'claim_retry_delay': 0.2,
                                      'max_claim_candidates_per_host': 3})
    [instance] = uuids(1)

    [selections] = select(manager, user_spec(), [instance])

    assert [next(iter(req.allocations)) for _, req in fake.claims()] == [big] * 4 + [small]
    assert len(manager.sleeps) == 3
    assert all(0 <= s <= 0.2 * 2 ** 3 for s in manager.sleeps)
    assert selections[0].compute_node_uuid == small
    assert fake.holdings() == {instance: {small: ASK}}


def test_a_host_the_first_instance_filled_is_not_claimed_for_the_second(fake, make_manager):
    roomy = fake.add_compute('roomy', vcpus=1, ram_mb=65536)   # weighs best, fits one
    other = fake.add_compute('other', vcpus=8, ram_mb=8192)
    manager = make_manager()
    first, second = uuids(2)

    result = select(manager, user_spec(num_instances=2), [first, second])

    assert [r[0].compute_node_uuid for r in result] == [roomy, other]
    # fits() kept the second instance from a PUT Placement would have refused.
    assert [consumer for consumer, _ in fake.claims()] == [first, second]
    assert fake.holdings() == {first: {roomy: ASK}, second: {other: ASK}}


def test_a_consumer_that_already_holds_allocations_is_claimed_alongside_them(
        fake, make_manager):
    # Evacuate (doc/design.md#claims-all-or-nothing): the instance keeps its source
    # allocations and gets the destination's too. tests/unit/test_manager_moves.py has the rest.
    source = fake.add_compute('source', ram_mb=65536)
    dest = fake.add_compute('dest')
    [instance] = uuids(1)
    fake.allocate(instance, {source: ASK}, project_id=PROJECT, user_id=USER)
    manager = make_manager()

    [selections] = select(manager, user_spec(ignore_hosts=['source']), [instance])

    assert selections[0].compute_node_uuid == dest
    assert fake.holdings() == {instance: {source: ASK, dest: ASK}}


def test_a_placement_error_on_one_claim_moves_on_to_the_next_host(fake, make_manager):
    big = fake.add_compute('big', ram_mb=65536)
    small = fake.add_compute('small')
    fake.script('put_allocations', pexc.PlacementError('conflict', status=409),
                when=lambda call: big in call.kwargs['allocation_request'].allocations)
    manager = make_manager(scheduler={'max_claim_candidates_per_host': 1})
    [instance] = uuids(1)

    [selections] = select(manager, user_spec(), [instance])

    assert selections[0].compute_node_uuid == small
    assert fake.holdings() == {instance: {small: ASK}}


# ---------------------------------------------------------------------- all or nothing


def test_placement_outage_while_claiming_instance_2_is_named_and_instance_1_is_rolled_back(
        fake, make_manager):
    fake.add_compute('cn0')
    fake.add_compute('cn1')
    first, second = uuids(2)
    fake.script('put_allocations', unavailable('PUT /allocations'),
                when=lambda call: call.kwargs['consumer_uuid'] == second)
    manager = make_manager()

    with pytest.raises(exc.NoValidHost) as failure:
        select(manager, user_spec(num_instances=2), [first, second])

    assert failure.value.reason.startswith(
        'Placement unreachable after 3 attempts while claiming')
    assert [c for c, _ in fake.claims()] == [first, second]   # no other host tried
    assert [c.kwargs['consumer_uuid'] for c in fake.calls_to('delete_allocations')] == [first]
    assert fake.holdings() == {}
    # The second claim's PUT may yet land in Placement: it is watched until it
    # does (and is given back) or cannot any more (test_claims.py).
    assert manager.cleanups.pending() == {second}


def test_a_rollback_that_fails_too_is_retried_until_placement_is_back(fake, make_manager):
    cn0 = fake.add_compute('cn0', ram_mb=65536)
    fake.add_compute('cn1')
    first, second = uuids(2)
    fake.script('put_allocations', unavailable('PUT /allocations'),
                when=lambda call: call.kwargs['consumer_uuid'] == second)
    fake.script('delete_allocations', unavailable('DELETE /allocations'))
    manager = make_manager()

    with pytest.raises(exc.NoValidHost):
        select(manager, user_spec(num_instances=2), [first, second])

    assert fake.holdings() == {first: {cn0: ASK}}
    # second: its PUT may yet land, so it is watched too (test_claims.py)
    assert manager.cleanups.pending() == {first, second}

    manager.cleanups.retry_once()

    assert fake.holdings() == {}
    assert manager.cleanups.pending() == {second}


def test_capacity_running_out_mid_request_rolls_back_every_claim(fake, make_manager):
    fake.add_compute('cn0', vcpus=1)
    fake.add_compute('cn1', vcpus=1)
    manager = make_manager()

    with pytest.raises(exc.NoValidHost) as failure:
        select(manager, user_spec(num_instances=3), uuids(3))

    assert failure.value.reason == (
        'instance 3 of 3: claims failed on all 2 hosts that passed the filters '
        '(full after earlier instances of this request: 2)')
    assert len(fake.claims()) == 2
    assert fake.holdings() == {}


def test_an_unexpected_error_after_a_claim_rolls_the_claim_back(fake, make_manager):
    fake.add_compute('cn0')
    fake.add_compute('cn1')
    manager = make_manager(filters=[FailsOnRun(2)])   # raises for instance 2

    with pytest.raises(exc.NoValidHost) as failure:
        select(manager, user_spec(num_instances=2), uuids(2))

    # Which plugin, not its text: a plugin's message may quote host data.
    assert failure.value.reason.startswith('filter FailsOnRun failed (a scheduler plugin failed')

    assert len(fake.claims()) == 1
    assert fake.holdings() == {}


def test_an_error_while_choosing_alternates_rolls_every_claim_back(fake, make_manager):
    for i in range(3):
        fake.add_compute(f'cn{i}')
    # Runs 1 and 2 place the instances; run 3 is the re-sort for the alternates.
    manager = make_manager(filters=[FailsOnRun(3)])

    with pytest.raises(exc.NoValidHost, match='a scheduler plugin failed'):
        select(manager, user_spec(num_instances=2), uuids(2))

    assert len(fake.claims()) == 2
    assert fake.holdings() == {}


# ---------------------------------------------------------------------- alternates


def test_alternates_come_from_the_chosen_hosts_cell_and_carry_an_unclaimed_request(
        fake, make_manager, tmp_path):
    sizes = {'c1a': 65536, 'c2a': 49152, 'c2b': 40960, 'c1b': 32768, 'c1c': 16384,
             'c1d': 8192}
    roots = {name: fake.add_compute(name, ram_mb=ram) for name, ram in sizes.items()}
    catalog = catalog_with_cells(tmp_path, {'c2a': CELL2, 'c2b': CELL2})
    manager = make_manager(catalog=catalog)   # max_attempts 3 -> at most 2 alternates
    [instance] = uuids(1)

    [selections] = select(manager, user_spec(), [instance])

    chosen, *alternates = selections
    assert chosen.service_host == 'c1a'
    assert [a.service_host for a in alternates] == ['c1b', 'c1c']
    assert {s.cell_uuid for s in selections} == {CELL}
    for alt in alternates:
        assert json.loads(alt.allocation_request) == {
            'allocations': {roots[alt.service_host]: {'resources': ASK}},
            'mappings': {'': [roots[alt.service_host]]}}
        assert alt.allocation_request_version == '1.36'
    assert fake.holdings() == {instance: {roots['c1a']: ASK}}


def test_alternates_are_never_a_host_selected_for_any_instance_of_the_request(
        fake, make_manager):
    for name, ram in (('a', 16384), ('b', 16000), ('c', 8000), ('d', 4000)):
        fake.add_compute(name, ram_mb=ram)
    manager = make_manager()

    result = select(manager, user_spec(num_instances=2), uuids(2))

    assert [r[0].service_host for r in result] == ['a', 'b']
    assert [[s.service_host for s in r[1:]] for r in result] == [['c', 'd'], ['c', 'd']]


@pytest.mark.parametrize('max_attempts', [1, 2, 4])
def test_there_are_at_most_max_attempts_minus_one_alternates(fake, make_manager, max_attempts):
    for i in range(6):
        fake.add_compute(f'cn{i}', ram_mb=8192 * (6 - i))
    manager = make_manager(scheduler={'max_attempts': max_attempts})

    [selections] = select(manager, user_spec(), uuids(1))

    assert len(selections) == max_attempts


@pytest.mark.parametrize('flags', [{'return_alternates': False},
                                   {'return_alternates': True, 'return_objects': False}])
def test_no_alternates_unless_asked_for_with_objects(fake, make_manager, flags):
    for i in range(3):
        fake.add_compute(f'cn{i}')
    manager = make_manager()

    result = select(manager, user_spec(num_instances=2), uuids(2), **flags)

    assert [len(r) for r in result] == [1, 1]


def test_without_instance_uuids_nothing_is_claimed_and_no_selection_carries_a_request(
        fake, make_manager):
    small = fake.add_compute('small', vcpus=1, ram_mb=65536)
    fake.add_compute('cn1', ram_mb=16384)
    fake.add_compute('cn2', ram_mb=8192)
    manager = make_manager()

    result = select(manager, user_spec(num_instances=2), None)

    assert fake.claims() == []
    assert fake.holdings() == {}
    # The first instance still consumed 'small' for the second one.
    assert [r[0].service_host for r in result] == ['small', 'cn1']
    assert result[0][0].compute_node_uuid == small
    for selection in (s for r in result for s in r):
        assert selection.allocation_request == 'null'
        assert selection.allocation_request_version is None
    assert [len(r) for r in result] == [2, 2]


# ---------------------------------------------------------------------- ordering


def test_host_subset_size_picks_among_the_best_hosts_with_the_managers_rng():
    chosen = set()
    for seed in range(20):
        placement = FakePlacement()
        for i in range(5):
            placement.add_compute(f'h{i}', ram_mb=8192 * (5 - i))
        expected = ['h0', 'h1', 'h2'][random.Random(seed).randrange(3)]
        manager = SchedulerManager(
            make_conf(filter_scheduler={'host_subset_size': 3}), placement=placement,
            catalog=HostCatalog(default_cell_uuid=CELL), filters=[],
            weighers=[_ram_weigher()], request_filters=[], rng=random.Random(seed))

        [selections] = select(manager, user_spec(), uuids(1), return_alternates=False)

        assert selections[0].service_host == expected
        chosen.add(expected)
    assert chosen == {'h0', 'h1', 'h2'}


@pytest.mark.parametrize('shuffle', [True, False])
def test_shuffle_best_same_weighed_hosts_shuffles_only_the_hosts_tied_at_the_top(shuffle):
    chosen = []
    for seed in range(20):
        placement = FakePlacement()
        for name in ('t0', 't1', 't2'):
            placement.add_compute(name, ram_mb=32768)
        placement.add_compute('low', ram_mb=8192)
        manager = SchedulerManager(
            make_conf(filter_scheduler={'shuffle_best_same_weighed_hosts': shuffle}),
            placement=placement, catalog=HostCatalog(default_cell_uuid=CELL), filters=[],
            weighers=[_ram_weigher()], request_filters=[], rng=random.Random(seed))

        [selections] = select(manager, user_spec(), uuids(1), return_alternates=False)

        chosen.append(selections[0].service_host)
        if shuffle:
            tied = ['t0', 't1', 't2']
            random.Random(seed).shuffle(tied)
            assert chosen[-1] == tied[0]
    assert set(chosen) == ({'t0', 't1', 't2'} if shuffle else {'t0'})


def _ram_weigher() -> RAMWeigher:
    weigher = RAMWeigher()
    weigher.conf = make_conf()
    return weigher


# ---------------------------------------------------------------------- spec updates


def test_requested_resources_groups_get_their_providers_from_the_claimed_mappings(
        fake, make_manager):
    root = fake.add_compute('cn0')
    nic = fake.add_provider('cn0-nic', {'NET_BW_EGR_KILOBIT_PER_SEC': 10000}, parent=root)
    recorder = Recorder()
    manager = make_manager(filters=[recorder])
    port = RequestGroup(requester_id='port-1', resources={'NET_BW_EGR_KILOBIT_PER_SEC': 1000})
    request_spec = user_spec(num_instances=2, requested_resources=[port])
    first, second = uuids(2)

    result = select(manager, request_spec, [first, second], return_alternates=False)

    assert json.loads(result[0][0].allocation_request)['mappings'] == {
        '': [root], 'port-1': [nic]}
    # The second instance is filtered knowing where the first one's port landed.
    assert recorder.seen == [(first, [[]]), (second, [[nic]])]
    assert port.provider_uuids == []   # the caller's spec is left as it was
    assert fake.holdings()[second] == {root: ASK, nic: {'NET_BW_EGR_KILOBIT_PER_SEC': 1000}}


def test_a_provider_name_lookup_failure_does_not_fail_the_request(fake, make_manager):
    cn0 = fake.add_compute('cn0')
    fake.script('get_resource_providers', unavailable('GET /resource_providers'), times=None)
    manager = make_manager()

    [selections] = select(manager, user_spec(), uuids(1))

    assert selections[0].service_host == cn0   # names default to the provider uuid


def test_a_requested_host_placement_does_not_know_is_no_valid_host(fake, make_manager):
    fake.add_compute('cn0')
    manager = make_manager()

    with pytest.raises(exc.NoValidHost, match='No such host - host: nowhere'):
        select(manager, user_spec(requested_destination=Destination(host='nowhere')), uuids(1))

    assert fake.claims() == []


def test_a_rebuild_check_that_names_no_host_is_invalid_input(fake, make_manager):
    # Nova's conductor always forces the instance's host for a rebuild check.
    manager = make_manager()

    with pytest.raises(exc.InvalidInput, match='rebuild check must name'):
        select(manager, user_spec(rebuild=True), uuids(1))

    assert fake.calls == []


# ------------------------------------------------------- fresh NUMA and PCI host data

TWO_NODES = Flavor(vcpus=2, memory_mb=512, root_gb=1, extra_specs={'hw:numa_nodes': '2'})


@pytest.mark.parametrize('asks,fields', [
    ('nothing', {}),
    ('a NUMA topology', {'flavor': TWO_NODES}),
    ('a PCI alias', {'flavor': Flavor(vcpus=1, memory_mb=512, root_gb=1,
                                      extra_specs={'pci_passthrough:alias': 'nic:1'})}),
])
def test_a_request_that_uses_numa_or_pci_data_reads_its_candidates_first(fake, asks, fields):
    # Nova reads its candidates' compute nodes per request; what nova-compute
    # claimed a moment ago (pinned CPUs, devices) must not be fitted again.
    roots = {fake.add_compute(name) for name in ('h1', 'h2')}
    read: list[set[str]] = []
    manager = SchedulerManager(make_conf(), placement=fake,
                               catalog=HostCatalog(default_cell_uuid=CELL), filters=[],
                               weighers=[_ram_weigher()], request_filters=[],
                               refresh_compute_nodes=lambda uuids: read.append(set(uuids)))

    select(manager, user_spec(**fields), uuids(1))

    assert read == ([] if asks == 'nothing' else [roots])


def test_a_rebuild_check_with_a_numa_topology_reads_its_host_first(fake):
    root = fake.add_compute('h1')
    read: list[set[str]] = []
    manager = SchedulerManager(make_conf(), placement=fake,
                               catalog=HostCatalog(default_cell_uuid=CELL), filters=[],
                               weighers=[_ram_weigher()], request_filters=[],
                               refresh_compute_nodes=lambda uuids: read.append(set(uuids)))

    select(manager, user_spec(rebuild=True, force_hosts=['h1'], flavor=TWO_NODES),
           uuids(1))

    assert read == [{root}]


# ---------------------------------------------------------------------- failure reasons

LONG = 'x' * 3000
HOSTS = ('hostname-alpha', 'hostname-bravo')


def no_candidates(fake):
    return {'flavor': Flavor(vcpus=64, memory_mb=512, root_gb=1)}, []


def filter_emptied(fake):
    class LongWinded(RejectEverything):
        failure_reason = 'rejected: ' + LONG
    return {}, [LongWinded()]


def claims_failed(fake):
    fake.script('put_allocations', lambda call: fake.allocate(THIEF, {
        rp: {'VCPU': 16} for rp in fake.providers}))
    return {}, []


def placement_unreachable(fake):
    fake.script('get_allocation_candidates', unavailable(LONG))
    return {}, []


def placement_400(fake):
    fake.script('get_allocation_candidates', pexc.BadRequest(
        'bad', status=400, detail='Invalid query string parameters: ' + LONG))
    return {}, []


def placement_auth(fake):
    fake.script('get_allocation_candidates', pexc.PlacementAuthError('denied', status=401))
    return {}, []


@pytest.mark.parametrize('arrange, expected', [
    (no_candidates, 'Placement returned no allocation candidates for limit=1000&'
                    'resources=DISK_GB:1,MEMORY_MB:512,VCPU:64'),
    (filter_emptied, '0/2 hosts available: LongWinded removed 2 (rejected: xxx'),
    (claims_failed, 'claims failed on all 2 hosts that passed the filters '
                    '(capacity exceeded: 2)'),
    # Placement's own text stays in the log: it can quote URLs and uuids.
    (placement_unreachable, 'Placement unreachable after 3 attempts (no answer)'),
    (placement_400, 'Placement rejected the query (HTTP 400): Invalid query string '
                    'parameters: '),
    (placement_auth, "Placement refused the scheduler's credentials (401)"),
])
def test_the_failure_reason_names_the_stage_is_bounded_and_carries_no_secrets(
        fake, make_manager, arrange, expected):
    for name in HOSTS:
        fake.add_compute(name)
    fields, filters = arrange(fake)
    manager = make_manager(filters=filters)

    with pytest.raises(exc.NoValidHost) as failure:
        select(manager, user_spec(**fields), uuids(1))

    reason = failure.value.reason
    assert reason.startswith(expected)
    assert len(reason) <= explain.MAX_REASON_LENGTH
    assert not any(name in reason for name in HOSTS)
    assert TOKEN not in reason and TOKEN not in str(failure.value)
    assert instance_free(fake)


def test_uuids_in_placements_words_on_a_rejected_query_are_masked(fake, make_manager):
    for name in HOSTS:
        fake.add_compute(name)
    aggregate = '6a8f0b1e-3c2d-4e5f-8a9b-0c1d2e3f4a5b'
    fake.script('get_allocation_candidates', pexc.BadRequest(
        'bad', status=400, detail=f'Invalid member_of: aggregate {aggregate} is unknown'))

    with pytest.raises(exc.NoValidHost) as failure:
        select(make_manager(), user_spec(), uuids(1))

    assert failure.value.reason == ('Placement rejected the query (HTTP 400): Invalid '
                                    'member_of: aggregate <uuid> is unknown')


def instance_free(fake) -> bool:
    """No consumer but the other scheduler's holds anything."""
    return set(fake.holdings()) <= {THIEF}


def test_an_answer_that_cannot_be_encoded_rolls_every_claim_back(fake, make_manager):
    fake.add_compute('cn0')
    manager = make_manager()

    def broken_encoder(selections):
        raise ValueError('cannot encode')

    with pytest.raises(ValueError):
        manager.select_destinations(RequestContext(), user_spec(num_instances=1), uuids(1),
                                    finish=broken_encoder)

    assert len(fake.claims()) == 1
    assert fake.holdings() == {}


def test_a_claim_whose_answer_placement_never_sent_is_removed_if_it_landed(fake, make_manager):
    cn0 = fake.add_compute('cn0')
    manager = make_manager()
    [instance] = uuids(1)

    def lands_then_outage(call):
        # The PUT reaches Placement, then the connection dies before the answer.
        fake.allocate(instance, {cn0: {'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}},
                      project_id=PROJECT, user_id=USER)
        raise unavailable('PUT /allocations')

    fake.script('put_allocations', lands_then_outage)

    with pytest.raises(exc.NoValidHost, match='Placement unreachable'):
        select(manager, user_spec(), [instance])

    assert fake.holdings() == {}


def test_pinned_cpus_fall_back_to_vcpu_candidates_like_nova(fake, make_manager):
    # A compute that still reports its CPUs as VCPU (no PCPU inventory).
    legacy = fake.add_compute('legacy')
    manager = make_manager()
    pinned = user_spec(flavor=Flavor(vcpus=2, memory_mb=512, root_gb=1,
                                     extra_specs={'hw:cpu_policy': 'dedicated'}))
    [instance] = uuids(1)

    [[chosen, *_]] = select(manager, pinned, [instance])

    assert chosen.compute_node_uuid == legacy
    queries = [c.kwargs['query'].describe() for c in fake.calls_to('get_allocation_candidates')]
    assert ['PCPU:2' in q for q in queries] == [True, False]
    assert 'VCPU:2' in queries[1]


# ---------------------------------------------------------------- answer reuse (option)
def test_with_answer_reuse_the_next_request_claims_from_the_previous_answer(
        fake, make_manager):
    roomy = fake.add_compute('roomy', vcpus=1, ram_mb=65536)   # weighs best, fits one
    other = fake.add_compute('other', vcpus=8, ram_mb=8192)
    manager = make_manager(scheduler={'candidates_reuse_window': 30.0})
    first, second = uuids(2)

    select(manager, user_spec(), [first])
    select(manager, user_spec(), [second])

    # One question to Placement; the second request saw the first one's claim
    # on the reused answer and did not send a PUT Placement would refuse.
    assert len(fake.calls_to('get_allocation_candidates')) == 1
    assert [consumer for consumer, _ in fake.claims()] == [first, second]
    assert fake.holdings() == {first: {roomy: ASK}, second: {other: ASK}}


def test_without_the_option_every_request_asks_placement(fake, make_manager):
    fake.add_compute('cn1')
    manager = make_manager()

    for instance in uuids(2):
        select(manager, user_spec(), [instance])

    assert len(fake.calls_to('get_allocation_candidates')) == 2
