"""selection: Nova's host ordering, the pre-filter restrictions, and alternates."""
from __future__ import annotations

import random

import pytest

from placement_client.models import AllocationRequest, Candidates, ProviderSummary, ResourceUsage
from scheduler.catalog import HostCatalog
from scheduler.catalog.hosts_file import HostsFileContent
from scheduler.conf.scheduler import near_best_tolerance
from scheduler.host_state import HostRecord
from scheduler.host_table import HostTable, WeighedHost
from scheduler.objects.spec import CellMapping, Destination
from scheduler.pipeline.ordering import first_fitting, order_hosts, pick_alternates, prefilter_hosts
from tests.builders import CELL_UUID, make_conf, make_host, make_spec, override, uuid_for

OTHER_CELL = '00000000-0000-4000-8000-0000000000c2'


def weighed(*weights: float) -> list[WeighedHost]:
    """Hosts h0, h1, ... with these weights, already sorted as weigh_hosts sorts."""
    return [WeighedHost(make_host(f'h{i}'), w) for i, w in enumerate(weights)]


def host_names(hosts) -> list[str]:
    return [h.host for h in hosts]


# ---------------------------------------------------------------------- order_hosts


def test_order_of_no_hosts_is_empty():
    assert order_hosts([], host_subset_size=3, shuffle_best_same_weighed_hosts=True,
                       rng=random.Random(0)) == []


def test_with_the_defaults_the_weighed_order_is_kept_and_no_randomness_is_used():
    rng = random.Random(0)
    state = rng.getstate()

    ordered = order_hosts(weighed(3, 2, 2, 1), host_subset_size=1,
                          shuffle_best_same_weighed_hosts=False, rng=rng)

    assert host_names(ordered) == ['h0', 'h1', 'h2', 'h3']
    assert rng.getstate() == state


@pytest.mark.parametrize('seed', range(10))
def test_host_subset_size_moves_one_of_the_best_n_to_the_front_and_keeps_the_rest(seed):
    expected_front = random.Random(seed).randrange(3)

    ordered = order_hosts(weighed(5, 4, 3, 2, 1), host_subset_size=3,
                          shuffle_best_same_weighed_hosts=False, rng=random.Random(seed))

    names = ['h0', 'h1', 'h2', 'h3', 'h4']
    front = names.pop(expected_front)
    assert host_names(ordered) == [front, *names]


def test_host_subset_size_reaches_each_of_the_best_n_and_nothing_beyond():
    fronts = {order_hosts(weighed(5, 4, 3, 2, 1), host_subset_size=3,
                          shuffle_best_same_weighed_hosts=False,
                          rng=random.Random(seed))[0].host for seed in range(50)}

    assert fronts == {'h0', 'h1', 'h2'}


def test_a_near_best_tolerance_reaches_each_host_within_it_and_nothing_beyond():
    fronts = {order_hosts(weighed(1.0, 0.995, 0.99, 0.98, 0.5), host_subset_size=1,
                          shuffle_best_same_weighed_hosts=False, near_best_tolerance=0.01,
                          rng=random.Random(seed))[0].host for seed in range(60)}

    assert fronts == {'h0', 'h1', 'h2'}


def test_the_tolerance_is_a_fraction_of_the_best_weight_s_size_when_weights_are_negative():
    fronts = {order_hosts(weighed(-1.0, -1.05, -1.2), host_subset_size=1,
                          shuffle_best_same_weighed_hosts=False, near_best_tolerance=0.1,
                          rng=random.Random(seed))[0].host for seed in range(40)}

    assert fronts == {'h0', 'h1'}


def test_a_subset_larger_than_the_list_uses_the_whole_list():
    fronts = {order_hosts(weighed(2, 1), host_subset_size=10,
                          shuffle_best_same_weighed_hosts=False,
                          rng=random.Random(seed))[0].host for seed in range(30)}

    assert fronts == {'h0', 'h1'}


@pytest.mark.parametrize('seed', range(10))
def test_shuffle_permutes_only_the_hosts_tied_at_the_top_weight(seed):
    tied = ['h0', 'h1', 'h2']
    random.Random(seed).shuffle(tied)

    ordered = order_hosts(weighed(7, 7, 7, 5, 5), host_subset_size=1,
                          shuffle_best_same_weighed_hosts=True, rng=random.Random(seed))

    assert host_names(ordered) == [*tied, 'h3', 'h4']


def test_shuffle_brings_every_tied_host_to_the_front_over_many_requests():
    fronts = {order_hosts(weighed(7, 7, 7, 5), host_subset_size=1,
                          shuffle_best_same_weighed_hosts=True,
                          rng=random.Random(seed))[0].host for seed in range(50)}

    assert fronts == {'h0', 'h1', 'h2'}


def test_shuffle_without_a_tie_keeps_the_order():
    ordered = order_hosts(weighed(3, 2, 1), host_subset_size=1,
                          shuffle_best_same_weighed_hosts=True, rng=random.Random(1))

    assert host_names(ordered) == ['h0', 'h1', 'h2']


# ---------------------------------------------------------------------- prefilter_hosts


@pytest.fixture
def hosts():
    """Two nodes on service host 'cn1', one each on 'cn2' and 'CN3'."""
    return [make_host('cn1', nodename='cn1-a'), make_host('cn1', nodename='cn1-b'),
            make_host('cn2'), make_host('CN3')]


def nodes(hosts) -> list[str]:
    return [h.nodename for h in hosts]


def test_no_restriction_keeps_every_host(hosts):
    assert prefilter_hosts(hosts, make_spec()) == (hosts, {})


def test_a_requested_destination_keeps_only_that_host(hosts):
    kept, removed = prefilter_hosts(hosts, make_spec(
        requested_destination=Destination(host='cn1')))

    assert nodes(kept) == ['cn1-a', 'cn1-b']
    assert removed == {'not the requested destination': 2}


def test_a_requested_destination_with_a_node_keeps_only_that_node(hosts):
    kept, removed = prefilter_hosts(hosts, make_spec(
        requested_destination=Destination(host='cn1', node='cn1-b')))

    assert nodes(kept) == ['cn1-b']
    assert removed == {'not the requested destination': 3}


OTHER_CELL = '5c8e2f4a-1b3d-4e6f-9a0b-1c2d3e4f5a6b'


def in_cells(cells: dict[str, str], *, columns: bool):
    """Hosts named after ``cells``' keys in their cells, as objects or as a host table."""
    if not columns:
        return [make_host(name, cell_uuid=cell) for name, cell in cells.items()]
    summaries = {uuid_for(n): ProviderSummary(uuid_for(n), uuid_for(n), None,
                                              {'VCPU': ResourceUsage(8, 0)}, frozenset())
                 for n in cells}
    requests = tuple(AllocationRequest({uuid_for(n): {'VCPU': 1}}) for n in cells)
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    catalog.load_content(HostsFileContent(hosts=tuple(
        HostRecord(nodename=n, service_host=n, cell_uuid=c, provider_uuid=uuid_for(n))
        for n, c in cells.items())), 'test')
    return HostTable(Candidates(requests, summaries, '1.36'), catalog).view()


@pytest.mark.parametrize('columns', [False, True], ids=['per-host', 'host-table'])
def test_a_destination_in_a_cell_keeps_that_cell_unless_a_cross_cell_move_is_allowed(columns):
    hosts = in_cells({'cn1': CELL_UUID, 'cn2': OTHER_CELL, 'cn3': CELL_UUID}, columns=columns)
    cell = CellMapping(uuid=OTHER_CELL, name='cell2')

    kept, removed = prefilter_hosts(hosts, make_spec(
        requested_destination=Destination(cell=cell)))
    anywhere, nothing = prefilter_hosts(hosts, make_spec(
        requested_destination=Destination(cell=cell, allow_cross_cell_move=True)))

    assert [h.host for h in kept] == ['cn2']
    assert removed == {'not in the requested cell': 2}
    assert [h.host for h in anywhere] == ['cn1', 'cn2', 'cn3'] and nothing == {}


def test_a_destination_without_a_host_restricts_nothing(hosts):
    kept, removed = prefilter_hosts(hosts, make_spec(
        requested_destination=Destination(aggregates=['a'])))

    assert kept == hosts and removed == {}


def test_ignore_hosts_removes_every_node_of_the_host_case_insensitively(hosts):
    kept, removed = prefilter_hosts(hosts, make_spec(ignore_hosts=['CN1', 'cn3']))

    assert nodes(kept) == ['cn2']
    assert removed == {'in ignore_hosts': 3}


def test_force_hosts_keeps_the_named_hosts_case_insensitively(hosts):
    kept, removed = prefilter_hosts(hosts, make_spec(force_hosts=['cn3', 'CN2']))

    assert nodes(kept) == ['cn2', 'CN3']
    assert removed == {'not in force_hosts': 2}


def test_force_nodes_match_exactly(hosts):
    kept, removed = prefilter_hosts(hosts, make_spec(force_nodes=['cn1-b', 'CN2']))

    assert nodes(kept) == ['cn1-b']
    assert removed == {'not in force_nodes': 3}


def test_restrictions_combine_and_each_counts_what_it_removed(hosts):
    kept, removed = prefilter_hosts(hosts, make_spec(ignore_hosts=['cn2'],
                                                     force_hosts=['cn1'], force_nodes=['cn1-a']))

    assert nodes(kept) == ['cn1-a']
    assert removed == {'in ignore_hosts': 1, 'not in force_hosts': 1, 'not in force_nodes': 1}


# ---------------------------------------------------------------------- alternates


def full_host(name: str):
    """A host whose only candidate no longer fits (an earlier instance took the room)."""
    host = make_host(name, vcpu=(1, 0))
    host.consume(host.allocation_candidates[0], 'earlier')
    return host


def test_alternates_are_same_cell_unselected_hosts_with_room_in_order():
    chosen = make_host('chosen')
    other_selected = make_host('selected')
    ordered = [chosen, make_host('far', cell_uuid=OTHER_CELL), other_selected,
               full_host('full'), make_host('a1'), make_host('a2'), make_host('a3')]

    alternates = pick_alternates(ordered, chosen=chosen,
                                 selected={chosen.uuid, other_selected.uuid}, num_alternates=2)

    assert host_names(alternates) == ['a1', 'a2']


def test_no_alternates_are_picked_when_none_are_wanted():
    chosen = make_host('chosen')

    assert pick_alternates([chosen, make_host('a1')], chosen=chosen, selected={chosen.uuid},
                           num_alternates=0) == []


def test_fewer_alternates_than_wanted_is_fine():
    chosen = make_host('chosen')

    alternates = pick_alternates([chosen, make_host('a1')], chosen=chosen,
                                 selected={chosen.uuid}, num_alternates=5)

    assert host_names(alternates) == ['a1']


def test_first_fitting_skips_candidates_that_no_longer_fit():
    root = uuid_for('cn')
    big = AllocationRequest({root: {'VCPU': 4}})
    small = AllocationRequest({root: {'VCPU': 1}})
    host = make_host('cn', vcpu=(5, 0), allocation_candidates=[big, small])
    host.consume(big, 'earlier')

    assert first_fitting(host) is small
    host.consume(small, 'another')
    assert first_fitting(host) is None


def test_nova_s_ordering_is_the_default_without_the_provider_view():
    assert near_best_tolerance(make_conf()) == 0.0


def test_with_the_provider_view_on_the_near_best_tolerance_defaults_to_one_percent():
    viewed = override(make_conf(), **{'placement_database.connection': 'postgresql://p/db'})
    assert near_best_tolerance(viewed) == 0.01
    # An operator's own value stands, 0 included.
    assert near_best_tolerance(override(
        viewed, **{'scheduler.near_best_weight_tolerance': 0.0})) == 0.0
    assert near_best_tolerance(override(
        make_conf(), **{'scheduler.near_best_weight_tolerance': 0.05})) == 0.05
