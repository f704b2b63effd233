"""A worker's requests take turns to compute, and give their turn up while they wait.

Deciding holds the interpreter's lock, so two requests computing at once in one
worker are no faster than one after the other, and each holds its columns over
every matching host meanwhile: at most ``[scheduler] concurrent_decisions``
requests compute at once. Waiting on a peer (Placement, the services' state, a
cell database) is not computing: the turn is given up for it.

Nothing here asserts timing: a thread that must not get in is given a bounded
wait, and one that must get in gets a generous one.
"""
from __future__ import annotations

import contextlib
import threading

import pytest

from scheduler.filters.base import BaseHostFilter
from scheduler.memory.turns import BoundedWaits, Turns, resume, waiting
from scheduler.pipeline.spread import Spread
from scheduler.provider_view.view import ProviderView
from tests.builders import boot_spec, new_uuids, select, user_spec, uuid_for, uuids
from tests.unit.fake_placement import provider_conflict
from tests.unit.test_provider_view import Reads, second_read_held
from tests.unit.test_provider_view_reorder import snapshot

#: What a thread that must get in is given; one that must not is given a tenth.
LONG = 10.0
SHORT = 0.3


def in_thread(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_second_request_waits_until_the_first_has_finished_computing():
    turns = Turns(1)
    first_in, first_may_leave, second_in = (threading.Event() for _ in range(3))

    def first():
        with turns.turn():
            first_in.set()
            assert first_may_leave.wait(LONG)

    def second():
        with turns.turn():
            second_in.set()

    a = in_thread(first)
    assert first_in.wait(LONG)
    b = in_thread(second)
    assert not second_in.wait(SHORT), 'two requests computed at once'
    first_may_leave.set()
    assert second_in.wait(LONG)
    a.join(LONG)
    b.join(LONG)


def test_a_request_waiting_on_a_peer_lets_another_compute_and_takes_its_turn_back_after():
    turns = Turns(1)
    waiting_now, second_done, first_back = (threading.Event() for _ in range(3))
    order: list[str] = []

    def first():
        with turns.turn():
            with waiting():
                waiting_now.set()
                assert second_done.wait(LONG), 'the other request never got a turn'
            order.append('first computes again')
            first_back.set()

    a = in_thread(first)
    assert waiting_now.wait(LONG)
    with turns.turn():
        order.append('second computes')
    second_done.set()
    assert first_back.wait(LONG)
    a.join(LONG)
    assert order == ['second computes', 'first computes again']


def queued(turns: Turns, count: int) -> None:
    """Returns once ``count`` threads wait for a turn."""
    for _ in range(int(LONG / 0.01)):
        if len(turns._waiting) >= count:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f'{count} threads never queued for a turn')


def test_a_freed_turn_goes_to_a_request_back_from_its_wait_then_in_order_of_arrival():
    waits: list[bool] = []
    turns = Turns(1, waited=lambda seconds, resuming: waits.append(resuming))
    order: list[str] = []
    back_from_placement, in_its_wait = threading.Event(), threading.Event()

    def part_way():
        with turns.turn():
            with waiting():
                in_its_wait.set()
                assert back_from_placement.wait(LONG)
            order.append('back from its wait')

    def arrives(name):
        def request():
            with turns.turn():
                order.append(name)
        return request

    threads = [in_thread(part_way)]
    assert in_its_wait.wait(LONG)
    with turns.turn():
        threads.append(in_thread(arrives('first to arrive')))
        queued(turns, 1)
        threads.append(in_thread(arrives('second to arrive')))
        queued(turns, 2)
        back_from_placement.set()
        queued(turns, 3)
    for thread in threads:
        thread.join(LONG)
    assert order == ['back from its wait', 'first to arrive', 'second to arrive']
    # Each of the three waited (the metric's observations); the first turns, taken
    # at once, were no wait.
    assert sorted(waits) == [False, False, True]


def test_the_turn_is_taken_back_when_the_wait_fails():
    turns = Turns(1)
    other_in = threading.Event()

    def other():
        with turns.turn():
            other_in.set()

    with turns.turn():
        with pytest.raises(ConnectionError):
            with waiting():
                raise ConnectionError('Placement went away')
        b = in_thread(other)
        assert not other_in.wait(SHORT), 'the turn was not taken back after the wait'
    assert other_in.wait(LONG)
    b.join(LONG)


def test_a_stage_that_takes_a_turn_inside_its_own_threads_turn_goes_on():
    turns = Turns(1)
    with turns.turn():
        with turns.turn():      # the provider view matched again while deciding
            pass
        with waiting():
            pass


def test_waiting_without_a_turn_changes_nothing():
    turns = Turns(1)
    with waiting():
        with turns.turn():
            pass
    with turns.turn():
        pass


def test_no_limit_lets_every_request_compute_at_once():
    turns = Turns(None)
    both_in = threading.Barrier(2, timeout=LONG)

    def enter():
        with turns.turn():
            both_in.wait()

    threads = [in_thread(enter) for _ in range(2)]
    for thread in threads:
        thread.join(LONG)
        assert not thread.is_alive()
    assert not both_in.broken


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError):
        Turns(0)


def test_only_so_many_bounded_waits_give_their_turn_up_the_next_keeps_it():
    # A claim on the provider view's hosts keeps its request's columns: each one
    # that waits off its turn is a request's memory beside the one deciding.
    turns, bounded = Turns(1), BoundedWaits(1)
    first_off, second_waits, third_in, may_return = (threading.Event() for _ in range(4))
    gave_up: dict[str, bool] = {}

    def claim(name, in_wait):
        def request():
            with turns.turn(), bounded.waiting() as off:
                gave_up[name] = off
                in_wait.set()
                assert may_return.wait(LONG)
        return request

    def third():
        with turns.turn():
            third_in.set()

    threads = [in_thread(claim('first', first_off))]
    assert first_off.wait(LONG)
    threads.append(in_thread(claim('second', second_waits)))
    assert second_waits.wait(LONG), 'the first wait did not give its turn up'
    threads.append(in_thread(third))
    assert not third_in.wait(SHORT), 'the wait beyond the bound gave its turn up'
    may_return.set()
    assert third_in.wait(LONG)
    for thread in threads:
        thread.join(LONG)
    assert gave_up == {'first': True, 'second': False}
    with turns.turn(), bounded.waiting() as off_again:
        assert off_again, 'a wait that ended did not make room for the next'


def test_no_bounded_wait_gives_its_turn_up_at_zero_and_every_one_without_a_bound():
    turns = Turns(1)
    with turns.turn():
        with BoundedWaits(0).waiting() as off:
            assert off is False
        unbounded = BoundedWaits(None)
        with unbounded.waiting() as one, unbounded.waiting() as two:
            assert one and two
    with pytest.raises(ValueError):
        BoundedWaits(-1)


def test_a_request_back_from_a_bounded_wait_finishes_without_its_turn_while_another_holds_it():
    # After its last claim a request only builds its answer: waiting for the turn
    # for that waited out the whole of the next request's decision.
    turns, bounded = Turns(1), BoundedWaits(1)
    in_wait, claim_landed, other_in, release_other = (threading.Event() for _ in range(4))
    finished = threading.Event()

    def request():
        with turns.turn():
            with bounded.waiting() as off:
                assert off
                in_wait.set()
                assert claim_landed.wait(LONG)
            finished.set()      # its answer

    def other():
        with turns.turn():
            other_in.set()
            assert release_other.wait(LONG)

    first = in_thread(request)
    assert in_wait.wait(LONG)
    second = in_thread(other)
    assert other_in.wait(LONG), 'the bounded wait did not give its turn up'
    claim_landed.set()
    assert finished.wait(LONG), 'the request waited for a turn to build its answer'
    release_other.set()
    for thread in (first, second):
        thread.join(LONG)


def test_a_request_off_its_turn_keeps_its_place_among_the_bounded_waits_until_it_ends():
    # The bound is on requests holding their columns beside the one deciding:
    # one back from its claim holds them until it ends or takes its turn back.
    turns, bounded = Turns(1), BoundedWaits(1)
    back, may_end, tried = (threading.Event() for _ in range(3))
    second_off: list[bool] = []

    def request():
        with turns.turn():
            with bounded.waiting():
                pass
            back.set()
            assert may_end.wait(LONG)

    def second():
        with turns.turn(), bounded.waiting() as off:
            second_off.append(off)
            tried.set()

    first = in_thread(request)
    assert back.wait(LONG)
    other = in_thread(second)
    assert tried.wait(LONG)
    assert second_off == [False], 'a request off its turn left its place before it ended'
    may_end.set()
    for thread in (first, other):
        thread.join(LONG)
    with turns.turn(), bounded.waiting() as off:
        assert off, 'a request that ended kept its place'


@pytest.mark.parametrize('take_back', ['resume', 'turn'])
def test_a_request_off_its_turn_takes_it_back_to_compute_first_in_line(take_back):
    # Another instance's hosts, or hosts ordered again after a refusal, are
    # computing: the turn comes back first, ahead of requests that arrived meanwhile,
    # and with it the request's place among the bounded waits is free again.
    turns, bounded = Turns(1), BoundedWaits(1)
    order: list[str] = []
    back, computing = threading.Event(), threading.Event()

    def request():
        with turns.turn():
            with bounded.waiting():
                back.set()
                assert computing.wait(LONG)
            if take_back == 'resume':
                resume()
            with turns.turn() if take_back == 'turn' else contextlib.nullcontext():
                order.append('back from its claim')
                with bounded.waiting() as off:
                    assert off, 'its place was not freed when it took its turn back'

    def arrives():
        with turns.turn():
            order.append('arrived')

    first = in_thread(request)
    assert back.wait(LONG)
    with turns.turn():
        later = in_thread(arrives)
        queued(turns, 1)
        computing.set()
        queued(turns, 2)
    for thread in (first, later):
        thread.join(LONG)
    assert order == ['back from its claim', 'arrived']


def test_a_request_that_fails_off_its_turn_gives_its_place_up_and_no_turn():
    turns, bounded = Turns(1), BoundedWaits(1)
    with pytest.raises(ConnectionError):
        with turns.turn():
            with bounded.waiting():
                pass
            raise ConnectionError('the answer could not be sent')
    assert turns._free == 1, 'a turn the request did not hold was given back'
    with turns.turn(), bounded.waiting() as off:
        assert off


class CountsWhoIsInside(BaseHostFilter):
    """Records how many requests filter at the same moment: each one that gets in
    gives another a moment to join it."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.inside = 0
        self.most = 0
        self.joined = threading.Event()

    def filter_all(self, hosts, spec_obj):
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
            if self.inside > 1:
                self.joined.set()
        self.joined.wait(SHORT)
        with self.lock:
            self.inside -= 1
        return super().filter_all(hosts, spec_obj)

    def host_passes(self, host_state, spec_obj):
        return True


@pytest.mark.parametrize('at_once', [1, 0])
def test_a_worker_filters_for_one_request_at_a_time_unless_told_otherwise(fake, make_manager,
                                                                          at_once):
    fake.add_compute('cn0')
    fake.add_compute('cn1')
    counter = CountsWhoIsInside()
    manager = make_manager(filters=[counter], scheduler={'concurrent_decisions': at_once})
    errors: list[BaseException] = []

    def request():
        try:
            select(manager, boot_spec(), new_uuids(1))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [in_thread(request) for _ in range(2)]
    for thread in threads:
        thread.join(LONG)
    assert not errors
    if at_once == 1:
        assert counter.most == 1
    else:
        assert counter.most == 2, 'without a limit both requests filter at once'


@pytest.mark.parametrize('call', ['get_allocation_candidates', 'put_allocations'])
def test_a_request_waiting_for_placement_does_not_hold_up_another(fake, make_manager, call):
    # Its candidates, or its claim on hosts Placement answered: a claim's PUT waits
    # on a Placement busy with other schedulers' queries, and holding the turn a
    # worker would make one claim at a time.
    fake.add_compute('cn0')
    fake.add_compute('cn1')
    manager = make_manager()
    second_placed = threading.Event()

    def answer_after_the_second_is_placed(_):
        assert second_placed.wait(LONG), 'the first request held its turn while it waited'

    fake.script(call, answer_after_the_second_is_placed, times=1)
    results: list[object] = []

    def first():
        results.append(select(manager, boot_spec(), new_uuids(1)))

    a = in_thread(first)
    # The first call reaches Placement first (the script answers it); the second
    # can only be placed meanwhile if the first gave its turn up.
    while not fake.calls_to(call):
        second_placed.wait(0.01)
    select(manager, boot_spec(), new_uuids(1))
    second_placed.set()
    a.join(LONG)
    assert len(results) == 1
    assert len(fake.holdings()) == 2


@pytest.mark.parametrize('without_turn', [0, 1])
def test_a_claim_on_the_provider_views_hosts_gives_its_turn_up_only_within_the_bound(
        fake, make_manager, without_turn):
    # The request holds its columns over every matching host while it claims: the
    # next one builds its own beside them, so only view_claims_without_turn of a
    # worker's claims let another request in (the back-off is part of the claim).
    fake.add_compute('a', vcpus=8)
    fake.script('put_allocations', provider_conflict(), times=1)
    view = ProviderView(Reads(snapshot(('a', 0, 0))), max_age=300.0, read_behind=False)
    manager = make_manager(provider_view=view,
                           scheduler={'view_claims_without_turn': without_turn})
    others_got_in: list[bool] = []
    threads: list[threading.Thread] = []

    def back_off(seconds):
        got_in = threading.Event()

        def other():
            with manager.turns.turn():
                got_in.set()

        threads.append(in_thread(other))
        others_got_in.append(got_in.wait(SHORT))

    manager.claimer.sleep = back_off
    [selections] = select(manager, user_spec(vcpus=1), uuids(1), return_alternates=False)
    for thread in threads:
        thread.join(LONG)
    assert fake.calls_to('get_allocation_candidates') == []
    assert selections[0].service_host == 'a'
    assert others_got_in == [bool(without_turn)]


def test_a_request_answers_after_its_claim_on_the_views_hosts_while_the_next_one_decides(
        fake, make_manager):
    # Its claim gave the turn up and the next request took it: the answer (the
    # chosen host and its alternates) does not wait for that decision to end.
    for name in ('a', 'b', 'c'):
        fake.add_compute(name, vcpus=8)
    fake.script('put_allocations', provider_conflict(), times=1)
    view = ProviderView(Reads(snapshot(('a', 0, 0), ('b', 0, 0), ('c', 0, 0))),
                        max_age=300.0, read_behind=False)
    manager = make_manager(provider_view=view)
    deciding, decided = threading.Event(), threading.Event()
    threads: list[threading.Thread] = []

    def next_request():
        with manager.turns.turn():
            deciding.set()
            assert decided.wait(LONG)

    def back_off(seconds):      # the claim is in flight, off its turn
        threads.append(in_thread(next_request))
        assert deciding.wait(LONG)

    manager.claimer.sleep = back_off
    answered: list[object] = []
    first = in_thread(lambda: answered.append(select(manager, user_spec(vcpus=1), uuids(1))))
    first.join(LONG)
    still_deciding = not decided.is_set()
    decided.set()
    for thread in threads:
        thread.join(LONG)
    assert answered and still_deciding, 'the answer waited for the next decision'
    [selections] = answered[0]
    assert len(selections) == 3     # the chosen host and two alternates


class SaysWhenSomeoneWaits(threading.Condition):
    """A spread's condition that tells when a claim starts waiting for another to land."""

    def __init__(self, lock) -> None:
        super().__init__(lock)
        self.someone_waits = threading.Event()

    def wait_for(self, predicate, timeout=None):
        if not predicate():
            self.someone_waits.set()
        return super().wait_for(predicate, timeout)


def test_a_claim_that_gave_its_turn_up_lands_before_it_takes_one_back(fake, make_manager):
    # A claim of this worker on the same host waits for it to land
    # (pipeline/spread.py), and may hold its turn meanwhile (one on the provider
    # view's hosts): a claim that needed a turn back to land would wait for it for
    # the whole wait limit.
    fake.add_compute('cn0', vcpus=8)
    fake.script('put_allocations', provider_conflict(), times=1)
    spread = Spread(0, 1, wait_limit=10 * LONG)
    landed = spread._landed = SaysWhenSomeoneWaits(spread._lock)
    manager = make_manager(spread=spread)
    view_claim_landed = threading.Event()
    threads: list[threading.Thread] = []

    def claim_on_the_views_host():
        with manager.turns.turn(), spread.claiming(uuid_for('cn0')):
            view_claim_landed.set()

    def back_off(seconds):
        threads.append(in_thread(claim_on_the_views_host))
        assert landed.someone_waits.wait(LONG)

    manager.claimer.sleep = back_off
    placed: list[object] = []
    first = in_thread(lambda: placed.append(select(manager, boot_spec(), new_uuids(1))))
    first.join(LONG)
    assert placed, 'the claim in flight never got its turn back'
    assert view_claim_landed.wait(LONG)


class HoldsTheFirstRequest(BaseHostFilter):
    """Holds the first request it filters until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.holding, self.release = threading.Event(), threading.Event()

    def filter_all(self, hosts, spec_obj):
        if not self.holding.is_set():
            self.holding.set()
            assert self.release.wait(LONG)
        return super().filter_all(hosts, spec_obj)

    def host_passes(self, host_state, spec_obj):
        return True


def test_a_request_that_matches_while_others_wait_for_their_turn_does_not_read_first(
        fake, make_manager):
    # A turn can outlast max_age (50,000 providers under load): the gap between
    # two matches is then no idle spell, and a read before the match would hold up
    # every request queued behind it. The view is read behind them instead.
    fake.add_compute('a', vcpus=8)
    now = [0.0]
    read, read_behind_may_end = second_read_held(snapshot(('a', 0, 0)), snapshot(('a', 0, 0)))
    view = ProviderView(read, max_age=1.0, clock=lambda: now[0])
    holder = HoldsTheFirstRequest()
    manager = make_manager(provider_view=view, filters=[holder])
    reads_at_match: list[int] = []
    match = view.match

    def counting_match(query):
        found = match(query)
        reads_at_match.append(view.reads)
        return found
    view.match = counting_match

    threads = [in_thread(lambda: select(manager, user_spec(vcpus=1), uuids(1)))]
    assert holder.holding.wait(LONG)
    threads += [in_thread(lambda: select(manager, user_spec(vcpus=1), new_uuids(1)))
                for _ in range(2)]
    queued(manager.turns, 2)
    now[0] = 5.0                      # the first request's turn outlasted max_age
    holder.release.set()
    for _ in range(int(LONG / 0.01)):
        if len(reads_at_match) == 3:
            break
        threading.Event().wait(0.01)
    read_behind_may_end.set()
    for thread in threads:
        thread.join(LONG)
    # The others matched on the first read; the read the second started went behind.
    assert reads_at_match == [1, 1, 1]
    assert len(fake.holdings()) == 3
