"""After Placement refuses a claim for capacity, the hosts are ordered again from the
provider view as it is now, rather than walked on in an order from the same moment
as the refused one (scheduler/pipeline/decide.py).

The view is behind Placement here the way it is under load: another scheduler
filled hosts since the view was read. Placement (the fake) holds the truth.
"""
from __future__ import annotations

from scheduler import metrics
from scheduler.filters.base import BaseHostFilter
from scheduler.pipeline.decide import REORDERS
from scheduler.provider_view.siblings import ClaimsBoard
from scheduler.provider_view.snapshot import ProviderSnapshot
from scheduler.provider_view.view import ProviderView
from tests.builders import select, user_spec, uuid_for, uuids
from tests.unit.test_provider_view import Reads


def snapshot(*hosts: tuple[str, int, int]) -> ProviderSnapshot:
    """Hosts (name, VCPU used of 8, MEMORY_MB used of 65536): the RAM weigher puts the
    host with the least memory used first."""
    ids = {name: i + 1 for i, (name, _, _) in enumerate(hosts)}
    return ProviderSnapshot.from_rows(
        [(ids[name], uuid_for(name), 1, None) for name, _, _ in hosts],
        [(ids[name], rc, total, 0, 1, total, 1, 1.0) for name, _, _ in hosts
         for rc, total in (('VCPU', 8), ('MEMORY_MB', 65536), ('DISK_GB', 1000))],
        [(ids[name], rc, amount) for name, vcpus, ram in hosts
         for rc, amount in (('VCPU', vcpus), ('MEMORY_MB', ram)) if amount],
        [], [])


def filled_by_another_scheduler(fake, *names: str) -> None:
    for name in names:
        fake.allocate(f'other-{name}', {uuid_for(name): {'VCPU': 8}})


def hosts_claimed(fake) -> list[str]:
    names = {uuid_for(n): n for n in 'abcde'}
    return [names[next(iter(request.allocations))] for _, request in fake.claims()]


def test_after_a_refusal_the_rest_is_ordered_from_the_view_as_it_is_now(fake, make_manager):
    for name in 'abc':
        fake.add_compute(name, vcpus=8)
    filled_by_another_scheduler(fake, 'a', 'b')
    # The view read before the other scheduler's claims; the next read shows them.
    view = ProviderView(Reads(snapshot(('a', 0, 0), ('b', 0, 1000), ('c', 0, 2000)),
                              snapshot(('a', 8, 0), ('b', 8, 1000), ('c', 0, 2000))),
                        max_age=300.0, read_behind=False)
    manager = make_manager(provider_view=view)
    reorders = metrics.PROVIDER_VIEW_REORDERS.value()

    [selections] = select(manager, user_spec(vcpus=1), uuids(1), return_alternates=False)

    # b came next in the first order, and was full too: never tried.
    assert hosts_claimed(fake) == ['a', 'c']
    assert selections[0].service_host == 'c'
    assert fake.calls_to('get_allocation_candidates') == []
    assert metrics.PROVIDER_VIEW_REORDERS.value() == reorders + 1


def test_a_host_refused_is_not_tried_again_and_the_walk_goes_on_past_the_reorders(
        fake, make_manager):
    names = 'abcde'
    for name in names:
        fake.add_compute(name, vcpus=8)
    filled_by_another_scheduler(fake, 'a', 'b', 'c', 'd')
    # A view that never catches up: each refusal counts only what was asked.
    view = ProviderView(Reads(snapshot(*((n, 0, 1000 * i) for i, n in enumerate(names)))),
                        max_age=300.0, read_behind=False)
    manager = make_manager(provider_view=view)

    [selections] = select(manager, user_spec(vcpus=1), uuids(1), return_alternates=False)

    assert REORDERS < 4
    assert hosts_claimed(fake) == ['a', 'b', 'c', 'd', 'e']
    assert selections[0].service_host == 'e'


def test_an_order_worked_out_again_that_yields_nothing_hands_back_to_the_one_before(
        fake, make_manager):
    # The view read after the refusal shows b and c full (it may count a claim twice,
    # never miss one) and only a, just refused, with room: the new order has nothing
    # to try. A NoValidHost is only ever Placement's word: the first order goes on.
    for name in 'abc':
        fake.add_compute(name, vcpus=8)
    filled_by_another_scheduler(fake, 'a')
    view = ProviderView(Reads(snapshot(('a', 0, 0), ('b', 0, 1000), ('c', 0, 2000)),
                              snapshot(('a', 0, 0), ('b', 8, 1000), ('c', 8, 2000))),
                        max_age=300.0, read_behind=False)
    manager = make_manager(provider_view=view)

    [selections] = select(manager, user_spec(vcpus=1), uuids(1), return_alternates=False)

    assert hosts_claimed(fake) == ['a', 'b']
    assert selections[0].service_host == 'b'


class NotC(BaseHostFilter):
    """Rejects host c; like Nova's AvailabilityZoneFilter, runs for the first instance
    of a request only."""

    run_filter_once_per_request = True

    def host_passes(self, host_state, spec_obj) -> bool:
        return host_state.host != 'c'


def test_the_hosts_ordered_again_are_among_those_the_instance_was_given(fake, make_manager):
    # Nova: a host the filters removed for one instance of a request is not
    # reconsidered for the next, and a filter that runs once per request does not
    # run again. The view shows every host: the new order keeps to those given.
    for name in 'abcd':
        fake.add_compute(name, vcpus=8)
    fake.allocate('other-a', {uuid_for('a'): {'VCPU': 7}})
    filled_by_another_scheduler(fake, 'b')
    view = ProviderView(Reads(snapshot(('a', 7, 0), ('b', 0, 1000), ('c', 0, 2000),
                                       ('d', 0, 3000)),
                              snapshot(('a', 8, 0), ('b', 8, 1000), ('c', 0, 2000),
                                       ('d', 0, 3000))),
                        max_age=300.0, read_behind=False)
    manager = make_manager(provider_view=view, filters=[NotC()])

    [first, second] = select(manager, user_spec(vcpus=1), uuids(2), return_alternates=False)

    # The first instance takes a's last VCPU; the second is refused on b, and of the
    # hosts the view then shows with room, c (the better) was filtered out.
    assert [first[0].service_host, second[0].service_host] == ['a', 'd']
    assert hosts_claimed(fake) == ['a', 'b', 'd']


class SiblingClaimsWhileFiltering(BaseHostFilter):
    """Stands for another worker of the service whose claims Placement accepts while
    this worker filters and weighs: they reach the board after this worker's match."""

    run_filter_once_per_request = True

    def __init__(self, fake, sibling, claims: dict[str, int]):
        self.fake, self.sibling, self.claims, self.done = fake, sibling, claims, False

    def host_passes(self, host_state, spec_obj) -> bool:
        if not self.done:
            self.done = True
            for name, vcpus in self.claims.items():
                allocations = {uuid_for(name): {'VCPU': vcpus}}
                if self.fake is not None:
                    self.fake.allocate(f'sibling-{name}', allocations)
                self.sibling.publish(allocations)
        return True


def with_a_sibling_claiming(fake, make_manager, names: str, claims: dict[str, int], *,
                            in_placement: bool = True):
    """A manager whose view, read with ``names`` empty (the first the RAM weigher's
    best), takes in a sibling worker's ``claims`` (VCPU by host) after its match;
    ``in_placement``: Placement holds them too (else they were undone since)."""
    for name in names:
        fake.add_compute(name, vcpus=8)
    board = ClaimsBoard(2)
    view = ProviderView(Reads(snapshot(*((n, 0, 1000 * i) for i, n in enumerate(names)))),
                        max_age=300.0, read_behind=False, siblings=board.of_worker(0))
    return make_manager(provider_view=view, filters=[SiblingClaimsWhileFiltering(
        fake if in_placement else None, board.of_worker(1), claims)])


def test_a_host_a_sibling_filled_since_the_hosts_were_ordered_is_not_claimed(
        fake, make_manager):
    # Placement would refuse the claim for capacity: the view, with the sibling's
    # claim, already says so, and the hosts are ordered again without the round trip.
    manager = with_a_sibling_claiming(fake, make_manager, 'abc', {'a': 8})
    withheld = metrics.PROVIDER_VIEW_CLAIMS_WITHHELD.value()
    reorders = metrics.PROVIDER_VIEW_REORDERS.value()

    [selections] = select(manager, user_spec(vcpus=1), uuids(1), return_alternates=False)

    assert selections[0].service_host == 'b'
    assert hosts_claimed(fake) == ['b']
    assert metrics.PROVIDER_VIEW_CLAIMS_WITHHELD.value() == withheld + 1
    assert metrics.PROVIDER_VIEW_REORDERS.value() == reorders + 1


def test_a_host_with_room_left_after_a_sibling_s_claim_is_claimed_as_chosen(
        fake, make_manager):
    manager = with_a_sibling_claiming(fake, make_manager, 'ab', {'a': 7})
    withheld = metrics.PROVIDER_VIEW_CLAIMS_WITHHELD.value()

    [selections] = select(manager, user_spec(vcpus=1), uuids(1), return_alternates=False)

    assert selections[0].service_host == 'a'
    assert hosts_claimed(fake) == ['a']
    assert metrics.PROVIDER_VIEW_CLAIMS_WITHHELD.value() == withheld


def test_once_the_orders_are_spent_a_claim_goes_to_placement_whatever_the_view_says(
        fake, make_manager):
    # The sibling's claims were undone since (its request failed later): the view
    # counts them until its next read, Placement does not. Only Placement's refusal
    # may end in NoValidHost, never the view's count.
    manager = with_a_sibling_claiming(fake, make_manager, 'ab', {'a': 8, 'b': 8},
                                      in_placement=False)
    withheld = metrics.PROVIDER_VIEW_CLAIMS_WITHHELD.value()

    [selections] = select(manager, user_spec(vcpus=1), uuids(1), return_alternates=False)

    assert selections[0].service_host == 'a'
    assert hosts_claimed(fake) == ['a']
    assert metrics.PROVIDER_VIEW_CLAIMS_WITHHELD.value() == withheld + REORDERS
