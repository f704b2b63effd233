"""Concurrent decisions kept apart among the near-best hosts (scheduler/pipeline/spread.py).

Workers deciding from the same state agree on the best hosts; two claims on one
provider at once make Placement refuse one. Within the near-best tolerance, and
only there, a worker tries its own lane of hosts first and the hosts its own
claims are in flight on last.
"""
from __future__ import annotations

import collections
import random
import threading

import numpy as np
import pytest

from placement_client.models import ConsumerAllocations
from scheduler.host_table import HostTable, WeighedHost, WeighedView, as_weighed_view
from scheduler.pipeline import claimer as claims_mod
from scheduler.pipeline.claim import Claiming
from scheduler.pipeline.group_check import GroupClaimCheck
from scheduler.pipeline.ordering import order_hosts
from scheduler.pipeline.spread import (
    FAR_REACH,
    IN_FLIGHT,
    LAST_ROOM,
    NEARLY_FULL,
    OTHER_LANE,
    OWN_LANE,
    REACH,
    Spread,
    arrange,
    lane_of,
    reach,
)
from tests.builders import make_conf, make_host, make_spec, uuid_for
from tests.unit.test_ordering import weighed


def test_a_host_s_lane_is_the_same_in_every_worker_and_lanes_share_the_hosts():
    uuids = [uuid_for(f'host-{i}') for i in range(400)]
    lanes = [lane_of(u, 4) for u in uuids]

    assert lanes == [lane_of(u, 4) for u in uuids]
    assert all(70 <= lanes.count(lane) <= 130 for lane in range(4))


def test_a_worker_tries_its_own_lane_then_the_others_then_its_claims_in_flight():
    spread = Spread(lane=1, lanes=2)
    uuids = [uuid_for(f'host-{i}') for i in range(20)]
    busy = next(u for u in uuids if lane_of(u, 2) == 1)

    with spread.claiming(busy):
        during = spread.precedence(uuids).tolist()
    after = spread.precedence(uuids).tolist()

    assert during[uuids.index(busy)] == IN_FLIGHT
    assert after == [OWN_LANE if lane_of(u, 2) == 1 else OTHER_LANE for u in uuids]


def near_best_fronts(spread: Spread | None, weights: list[float], tolerance: float,
                     seeds: int = 60) -> list[str]:
    """The host each of ``seeds`` decisions tries first."""
    return [order_hosts(weighed(*weights), host_subset_size=1,
                        shuffle_best_same_weighed_hosts=False, near_best_tolerance=tolerance,
                        rng=random.Random(seed),
                        precedence=spread.precedence if spread else None)[0].host
            for seed in range(seeds)]


def test_two_workers_front_hosts_of_their_own_lanes_among_the_near_best():
    weights = [1.0, 0.999, 0.998, 0.997, 0.996, 0.995, 0.994, 0.993, 0.5]
    hosts = weighed(*weights)
    lane = {h.host.host: lane_of(h.host.uuid, 2) for h in hosts}
    assert set(list(lane.values())[:8]) == {0, 1}     # both lanes are near the best

    first = set(near_best_fronts(Spread(0, 2), weights, 0.01))
    second = set(near_best_fronts(Spread(1, 2), weights, 0.01))

    assert first and second and not first & second
    assert all(lane[h] == 0 for h in first) and all(lane[h] == 1 for h in second)
    assert 'h8' not in first | second      # nothing beyond the tolerance comes forward


def test_lanes_are_those_of_the_weighed_hosts_when_they_are_a_part_of_the_table():
    # The provider view weighs the matching rows of a table of every host: a
    # weighed host's position is not its row in the table. Here the table's first
    # rows, removed by the filters, lie in the other lane from the kept host at
    # the same position.
    hosts = [make_host(f'h{i}') for i in range(200)]
    by_lane = [[h for h in hosts if lane_of(h.uuid, 2) == lane] for lane in (0, 1)]
    kept = [by_lane[i % 2][i] for i in range(8)]               # lanes 0, 1, 0, 1, ...
    removed = [by_lane[1 - i % 2][-1 - i] for i in range(8)]   # lanes 1, 0, 1, 0, ...
    table = HostTable.from_hosts(removed + kept)
    rows = np.arange(len(removed), len(removed) + len(kept), dtype=np.intp)
    view = WeighedView(table, rows, np.linspace(1.0, 0.995, len(kept)), {})

    fronts = {order_hosts(view, host_subset_size=1, shuffle_best_same_weighed_hosts=False,
                          near_best_tolerance=0.01, rng=random.Random(seed),
                          precedence=Spread(1, 2).precedence)[0].host
              for seed in range(40)}

    assert fronts == {h.host for h in kept if lane_of(h.uuid, 2) == 1}


def test_a_worker_whose_lane_has_no_near_best_host_takes_the_others():
    weights = [1.0, 0.5, 0.4]
    lane_of_best = lane_of(weighed(*weights)[0].host.uuid, 2)

    fronts = set(near_best_fronts(Spread(1 - lane_of_best, 2), weights, 0.01))

    assert fronts == {'h0'}


def in_lanes(*hosts: tuple[int, float]) -> list[WeighedHost]:
    """Hosts of these (lane of 2, weight), best first, named as they come."""
    names = (f'host-{i}' for i in range(10_000))
    return [WeighedHost(make_host(next(n for n in names if lane_of(uuid_for(n), 2) == lane)),
                        weight) for lane, weight in hosts]


def fronts_of(spread: Spread, hosts: list[WeighedHost], tolerance: float = 0.01, *,
              concurrent: bool = False) -> set[str]:
    view = as_weighed_view(hosts)
    view.table.concurrent = concurrent
    return {order_hosts(view, host_subset_size=1, shuffle_best_same_weighed_hosts=False,
                        near_best_tolerance=tolerance, rng=random.Random(seed),
                        precedence=spread.precedence)[0].host for seed in range(60)}


def test_a_worker_whose_view_is_ahead_reaches_for_its_own_lane_up_to_the_reach():
    # Lane 0 holds the only host within 1% of the best; lane 1's are 1.5% and 3% behind.
    # Worker 1's view shows claims of its own the other's does not: its lane's hosts
    # look fuller than the other lane's only because it knows of its own claims.
    hosts = in_lanes((0, 1.0), (1, 0.985), (1, 0.984), (1, 0.97))

    assert fronts_of(Spread(1, 2), hosts, concurrent=True) == {
        hosts[1].host.host, hosts[2].host.host}
    assert fronts_of(Spread(0, 2), hosts, concurrent=True) == {hosts[0].host.host}


def test_a_worker_whose_view_holds_no_claim_of_its_own_keeps_to_the_tolerance():
    hosts = in_lanes((0, 1.0), (1, 0.985), (1, 0.984))

    assert fronts_of(Spread(1, 2), hosts) == {hosts[0].host.host}


def test_a_worker_takes_another_lane_s_host_when_its_own_are_beyond_the_reach():
    hosts = in_lanes((0, 1.0), (0, 0.999), (1, 0.95), (1, 0.94))

    assert fronts_of(Spread(1, 2), hosts, concurrent=True) == {
        hosts[0].host.host, hosts[1].host.host}


def test_with_its_claim_in_flight_on_the_only_near_best_host_a_worker_reaches_past_it():
    hosts = weighed(1.0, 0.985, 0.95)
    spread = Spread(0, 1)                       # one worker: every host in its lane

    with spread.claiming(hosts[0].host.uuid):
        during = fronts_of(spread, hosts)
    after = fronts_of(spread, hosts)

    assert during == {'h1'}                     # within twice the tolerance
    assert after == {'h0'}                      # one worker never reaches otherwise


def test_with_its_claim_in_flight_and_nothing_within_the_reach_a_worker_tries_it():
    hosts = weighed(1.0, 0.95)
    spread = Spread(0, 1)

    with spread.claiming(hosts[0].host.uuid):
        fronts = fronts_of(spread, hosts)

    assert fronts == {'h0'}


@pytest.mark.parametrize('near_groups, concurrent, factor', [
    ([OWN_LANE, OTHER_LANE], True, 0.0),
    ([OTHER_LANE, OTHER_LANE], True, REACH),
    ([OTHER_LANE], False, 0.0),
    ([NEARLY_FULL, IN_FLIGHT], True, FAR_REACH),
    ([NEARLY_FULL, OTHER_LANE], True, REACH),
    ([NEARLY_FULL], False, 0.0),
    ([LAST_ROOM, IN_FLIGHT], True, FAR_REACH),
    ([IN_FLIGHT], False, REACH),
], ids=['own lane near', 'another lane near', 'another lane near, not concurrent',
        'nearly full near', 'another lane with room near', 'nearly full, not concurrent',
        'last room near', 'all in flight'])
def test_how_far_beyond_the_near_best_hosts_a_worker_reaches(near_groups, concurrent, factor):
    assert reach(np.array(near_groups, dtype=np.int8), concurrent=concurrent) == factor


@pytest.mark.parametrize('near, near_groups, beyond, beyond_groups, possible', [
    ('ab', [OWN_LANE, OTHER_LANE], '', [], [['a', 'b']]),
    ('ab', [OTHER_LANE, OTHER_LANE], 'cd', [OTHER_LANE, OWN_LANE],
     [['d', 'a', 'b', 'c'], ['d', 'b', 'a', 'c']]),
    ('a', [IN_FLIGHT], 'bcd', [OTHER_LANE, OWN_LANE, IN_FLIGHT], [['c', 'b', 'a', 'd']]),
    ('a', [IN_FLIGHT], 'bc', [IN_FLIGHT, IN_FLIGHT], [['a', 'b', 'c']]),
    ('ab', [NEARLY_FULL, NEARLY_FULL], 'cde', [NEARLY_FULL, OTHER_LANE, OWN_LANE],
     [['e', 'd', 'a', 'b', 'c'], ['e', 'd', 'b', 'a', 'c']]),
    ('ab', [LAST_ROOM, NEARLY_FULL], 'cd', [LAST_ROOM, NEARLY_FULL],
     [['b', 'a', 'c', 'd']]),
], ids=['own lane near', 'own lane beyond', 'all near in flight', 'all in flight',
        'nearly full near', 'last room near'])
def test_the_hosts_within_the_reach_in_the_order_a_worker_tries_them(
        near, near_groups, beyond, beyond_groups, possible):
    seen = {tuple(arrange(list(near), np.array(near_groups, dtype=np.int8), list(beyond),
                          np.array(beyond_groups, dtype=np.int8), random.Random(seed)))
            for seed in range(20)}

    assert seen == {tuple(order) for order in possible}


def test_a_host_of_another_lane_is_nearly_full_when_the_request_fits_it_twice_or_less():
    # Once: its last room, which comes after the hosts with room for two.
    spread = Spread(lane=1, lanes=2)
    names = [f'host-{i}' for i in range(40)]
    other = [uuid_for(n) for n in names if lane_of(uuid_for(n), 2) == 0][:3]
    own = [uuid_for(n) for n in names if lane_of(uuid_for(n), 2) == 1][:2]

    groups = spread.precedence(other + own, np.array([1, 2, 3, 1, 0]))

    assert groups.tolist() == [LAST_ROOM, NEARLY_FULL, OTHER_LANE, OWN_LANE, OWN_LANE]
    assert spread.precedence(other).tolist() == [OTHER_LANE] * 3      # room not known


def test_a_busy_worker_reaches_past_another_lane_s_nearly_full_hosts_to_one_with_room():
    # Lane 0 holds the best hosts, with room for one more of the request each: lane
    # 0's worker has likely filled them since worker 1's view was read. The first
    # host with room is 8% behind: beyond REACH, within FAR_REACH.
    hosts = in_lanes((0, 1.0), (0, 0.995), (1, 0.97), (0, 0.92), (1, 0.5))
    for h, free in zip(hosts, (1, 1, 1, 16, 16), strict=True):
        h.host.used['VCPU'] = h.host.capacity['VCPU'] - free
    view = as_weighed_view(hosts)
    view.table.request_resources = {'VCPU': 1}

    def fronts(concurrent: bool) -> set[str]:
        view.table.concurrent = concurrent
        return {order_hosts(view, host_subset_size=1, shuffle_best_same_weighed_hosts=False,
                            near_best_tolerance=0.01, rng=random.Random(seed),
                            precedence=Spread(1, 2).precedence)[0].host for seed in range(60)}

    # Its own lane's nearly full host at 3% comes first; then the one with room.
    assert fronts(True) == {hosts[2].host.host}
    hosts[2].host.used['VCPU'] = hosts[2].host.capacity['VCPU']     # its own is full
    view = as_weighed_view([h for i, h in enumerate(hosts) if i != 2])
    view.table.request_resources = {'VCPU': 1}
    assert fronts(True) == {hosts[3].host.host}
    # An idle worker's view is fresh: it keeps to the near-best hosts.
    assert fronts(False) == {hosts[0].host.host, hosts[1].host.host}


def test_without_a_tolerance_the_order_is_nova_s_whatever_the_lanes():
    weights = [1.0, 0.999, 0.998]

    assert set(near_best_fronts(Spread(1, 2), weights, 0.0)) == {'h0'}


class _ClaimerWatchingTheSpread:
    """A claimer that notes what the spread says of the host while its claim is made."""

    def __init__(self, spread: Spread, fail_first: int):
        self.spread, self.fail_first, self.seen = spread, fail_first, []
        self.previous = None

    def claim(self, instance_uuid, alloc_req, **kwargs):
        [root] = alloc_req.allocations
        self.seen.append(int(self.spread.precedence([root])[0]))
        if len(self.seen) <= self.fail_first:
            raise claims_mod.ClaimFailed('concurrent updates', 'refused')
        return claims_mod.Claim(instance_uuid, alloc_req.allocations, 1, 'p', 'u',
                                previous=self.previous)


@pytest.mark.parametrize('fail_first', [0, 1])
def test_a_claim_is_in_flight_while_it_is_made_and_not_after(fail_first):
    spread = Spread(lane=0, lanes=1)
    hosts = [make_host(f'h{i}') for i in range(2)]      # one candidate each, on its root
    claimer = _ClaimerWatchingTheSpread(spread, fail_first)
    conf = make_conf()
    claiming = Claiming(conf, claimer, cleanups=None,
                        group_check=GroupClaimCheck(None, None),   # no group: never asks
                        spread=spread)

    placed = claiming.claim_first(_Context(), make_spec(vcpus=1), hosts, 'instance-1',
                                  _Attempt(), claim=True)

    assert placed.host is hosts[fail_first]
    assert claimer.seen == [IN_FLIGHT] * (fail_first + 1)
    assert spread.precedence([h.uuid for h in hosts]).tolist() == [OWN_LANE, OWN_LANE]


@pytest.mark.parametrize('fail_first', [0, 1])
def test_a_claim_is_told_the_view_before_its_host_stops_counting_as_in_flight(fail_first):
    # No request of the worker may see the host both out of flight and without
    # the claim (it would look as empty as before it, and be claimed again at once).
    spread = Spread(lane=0, lanes=1)
    hosts = [make_host(f'h{i}') for i in range(2)]
    told = []
    claiming = Claiming(make_conf(), _ClaimerWatchingTheSpread(spread, fail_first),
                        cleanups=None, group_check=GroupClaimCheck(None, None), spread=spread,
                        on_claimed=lambda allocations: told.append(
                            (allocations, spread.precedence(list(allocations)).tolist())))

    claiming.claim_first(_Context(), make_spec(vcpus=1), hosts, 'instance-1', _Attempt(),
                         claim=True)

    [(allocations, precedence)] = told
    assert list(allocations) == [hosts[fail_first].uuid]
    assert precedence == [IN_FLIGHT]


def test_a_move_s_claim_is_not_told_the_view():
    # A move's claim holds what the instance held elsewhere too; the view reads it.
    spread = Spread(lane=0, lanes=1)
    claimer = _ClaimerWatchingTheSpread(spread, 0)
    claimer.previous = ConsumerAllocations('instance-1', {uuid_for('src'): {'VCPU': 1}}, 1)
    told = []
    claiming = Claiming(make_conf(), claimer, cleanups=None,
                        group_check=GroupClaimCheck(None, None), spread=spread,
                        on_claimed=told.append)

    placed = claiming.claim_first(_Context(), make_spec(vcpus=1), [make_host('h0')],
                                  'instance-1', _Attempt(), claim=True)

    assert placed.claim.is_move and told == []


def _hold(spread: Spread, uuid: str, events: list[str], name: str,
          release: threading.Event) -> threading.Thread:
    """A thread whose claim on ``uuid`` stays in flight until ``release``."""
    def claim():
        with spread.claiming(uuid):
            events.append(f'{name} in')
            release.wait(5)
            events.append(f'{name} out')
    thread = threading.Thread(target=claim)
    thread.start()
    return thread


def _wait_for(events: list[str], event: str) -> None:
    for _ in range(500):
        if event in events:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f'{event!r} never happened: {events}')


def test_a_claim_waits_for_the_worker_s_claim_in_flight_on_the_same_host():
    spread, uuid, events = Spread(lane=0, lanes=1), uuid_for('h'), []
    release = threading.Event()
    first = _hold(spread, uuid, events, 'first', release)
    _wait_for(events, 'first in')
    second = _hold(spread, uuid, events, 'second', release)
    threading.Event().wait(0.1)                 # time enough to go in if it did not wait
    release.set()
    first.join()
    second.join()

    assert events == ['first in', 'first out', 'second in', 'second out']
    assert spread.precedence([uuid]).tolist() == [OWN_LANE]


def test_claims_on_different_hosts_do_not_wait_for_each_other():
    spread, events, release = Spread(lane=0, lanes=1), [], threading.Event()
    threads = [_hold(spread, uuid_for(name), events, name, release) for name in ('a', 'b')]
    _wait_for(events, 'a in')
    _wait_for(events, 'b in')

    assert spread.precedence([uuid_for('a'), uuid_for('b')]).tolist() == [IN_FLIGHT] * 2
    release.set()
    for t in threads:
        t.join()


def test_a_claim_waits_for_another_in_flight_on_its_host_only_so_long():
    spread, uuid, events = Spread(lane=0, lanes=1, wait_limit=0.05), uuid_for('h'), []
    release = threading.Event()
    first = _hold(spread, uuid, events, 'stuck', release)
    _wait_for(events, 'stuck in')
    second = _hold(spread, uuid, events, 'next', release)
    _wait_for(events, 'next in')
    release.set()
    first.join()
    second.join()

    assert events.index('next in') < events.index('stuck out')


class _Context:
    project_id = user_id = 'p'
    global_id = request_id = 'req-spread'


class _Attempt:
    def __init__(self):
        self.claim_failures = collections.Counter()
        self.claimed_host = None


def test_a_lane_outside_the_lanes_is_refused():
    with pytest.raises(ValueError):
        Spread(lane=2, lanes=2)


@pytest.mark.parametrize('workers, lanes', [(4, 4), (1, 1), (0, 1), (None, 1)],
                         ids=['four', 'one', 'zero means one', "Nova's option unset"])
def test_a_service_has_as_many_lanes_as_workers(workers, lanes):
    # [scheduler] workers is None when the service runs on a configuration Nova
    # registered (Nova's functional tests), and nova.conf allows 0: one worker each.
    spread = Spread.of_worker(0, workers)

    assert spread.lanes == lanes and spread.lane == 0
