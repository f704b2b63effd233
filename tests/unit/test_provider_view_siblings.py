"""The service's workers show each other their claims (scheduler/provider_view/siblings.py).

A worker's provider view shows its own claims at once and the other workers'
only at its next read; through the board mapped before the workers are forked,
each worker's view also shows its siblings' claims since the read, and its
spread puts the hosts their claims are in flight on last.
"""
from __future__ import annotations

import logging
import os
import threading
import time

import numpy as np
import pytest

from scheduler.catalog.placement_db import provider_view_from_conf
from scheduler.pipeline.spread import IN_FLIGHT, OWN_LANE, Spread
from scheduler.provider_view import siblings as siblings_mod
from scheduler.provider_view.siblings import MARGIN, ClaimsBoard
from scheduler.provider_view.view import ProviderView
from tests.builders import service_conf, uuid_for
from tests.unit.test_provider_view import (
    Reads,
    hosts_of,
    second_read_held,
    snapshot,
    used,
    vcpus,
    wait_for_reads,
)


def test_a_worker_reads_each_sibling_s_claims_once_and_never_its_own():
    board = ClaimsBoard(3)
    first, second, third = (board.of_worker(i, clock=lambda: 5.0) for i in range(3))

    second.publish({uuid_for('a'): {'VCPU': 2, 'MEMORY_MB': 512}})
    third.publish({uuid_for('b'): {'VCPU': 1}})
    first.publish({uuid_for('c'): {'VCPU': 4}})

    assert sorted(first.new()) == sorted([(5.0, uuid_for('a'), 'VCPU', 2),
                                          (5.0, uuid_for('a'), 'MEMORY_MB', 512),
                                          (5.0, uuid_for('b'), 'VCPU', 1)])
    assert first.new() == []
    assert {rp for _, rp, _, _ in second.new()} == {uuid_for('b'), uuid_for('c')}


def test_a_class_named_longer_than_a_record_holds_is_left_for_the_next_read():
    board = ClaimsBoard(2)
    writer, reader = board.of_worker(0), board.of_worker(1)

    writer.publish({uuid_for('a'): {'VCPU': 1, 'CUSTOM_' + 'X' * 60: 1}})

    assert [(rc, amount) for _, _, rc, amount in reader.new()] == [('VCPU', 1)]


def test_a_worker_that_fell_a_ring_behind_reads_the_newest_records_it_can_trust():
    board = ClaimsBoard(2, ring=MARGIN + 16)
    reader, writer = board.of_worker(0), board.of_worker(1)

    for i in range(MARGIN + 40):
        writer.publish({uuid_for('a'): {'VCPU': i}})

    amounts = [amount for _, _, _, amount in reader.new()]
    assert amounts == list(range(MARGIN + 24, MARGIN + 40))


def test_a_worker_forked_after_the_board_was_mapped_sees_its_siblings_and_they_it():
    board = ClaimsBoard(2)
    parent = board.of_worker(0)
    to_parent, to_child = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; never back into pytest
        try:
            child = board.of_worker(1)
            child.publish({uuid_for('a'): {'VCPU': 3}})
            child.take_off(uuid_for('b'))
            os.write(to_parent[1], b'x')
            os.read(to_child[0], 1)            # until the parent has looked
        finally:
            os._exit(0)
    try:
        assert os.read(to_parent[0], 1) == b'x'
        assert [(rp, rc, amount) for _, rp, rc, amount in parent.new()] == [
            (uuid_for('a'), 'VCPU', 3)]
        assert parent.flying() == {uuid_for('b')}
    finally:
        os.write(to_child[1], b'x')
        os.waitpid(pid, 0)
        for fd in (*to_parent, *to_child):
            os.close(fd)


def test_a_view_shows_the_siblings_claims_made_since_its_read_not_before():
    now = [0.0]
    board = ClaimsBoard(2)
    sibling = board.of_worker(1, clock=lambda: now[0])
    sibling.publish({uuid_for('a'): {'VCPU': 5}})          # before the read: in it
    now[0] = 1.0
    view = ProviderView(Reads(snapshot(('a', 8, 5), ('b', 8, 0))), max_age=10.0,
                        clock=lambda: now[0], read_behind=False,
                        siblings=board.of_worker(0, clock=lambda: now[0]))
    found, _ = view.match(vcpus(3))
    assert hosts_of(found) == {uuid_for('a'), uuid_for('b')} and used(found, 'a') == 5

    now[0] = 2.0
    sibling.publish({uuid_for('a'): {'VCPU': 2}})

    found, _ = view.match(vcpus(3))
    assert hosts_of(found) == {uuid_for('b')} and used(found, 'a') == 7


def test_a_sibling_s_claim_taken_in_during_a_read_begun_after_it_is_not_counted_twice():
    # A sibling's claim is taken into the view at a match, maybe after a read that
    # already holds it began: its time, not when it was taken in, says so.
    now, sibling_now = [0.0], [0.0]
    board = ClaimsBoard(2)
    sibling = board.of_worker(1, clock=lambda: sibling_now[0])
    read, read_may_end = second_read_held(snapshot(('a', 8, 0), ('b', 8, 0)),
                                          snapshot(('a', 8, 5), ('b', 8, 0)))
    view = ProviderView(read, max_age=1.0, clock=lambda: now[0],
                        siblings=board.of_worker(0, clock=lambda: now[0]))
    view.match(vcpus(1))
    now[0] = 0.6
    view.match(vcpus(1))                       # busy: the next read goes behind
    now[0] = 1.2
    view.match(vcpus(1))                       # the read behind begins at 1.2
    sibling_now[0] = 1.0
    sibling.publish({uuid_for('a'): {'VCPU': 5}})   # made before it: in what it reads
    now[0] = 1.3
    found, _ = view.match(vcpus(1))            # taken in now
    assert used(found, 'a') == 5

    read_may_end.set()
    wait_for_reads(view, 2)
    found, _ = view.match(vcpus(1))

    assert used(found, 'a') == 5


def test_a_claim_still_fits_until_the_claims_since_its_choice_take_the_room():
    # Placement's check, the view's numbers: used + asked <= (total - reserved) * ratio.
    board = ClaimsBoard(2)
    sibling = board.of_worker(1, clock=lambda: 1.0)
    view = ProviderView(Reads(snapshot(('a', 8, 3))), max_age=10.0, clock=lambda: 0.0,
                        read_behind=False, siblings=board.of_worker(0, clock=lambda: 0.0))
    view.match(vcpus(1))
    asked = {uuid_for('a'): {'VCPU': 3, 'MEMORY_MB': 1024}}
    assert view.still_fits(asked)

    view.claimed({uuid_for('a'): {'VCPU': 1}})          # this worker's own: 4 used
    assert view.still_fits(asked)
    sibling.publish({uuid_for('a'): {'VCPU': 2}})        # 6 used, 3 more do not fit

    assert not view.still_fits(asked)
    assert view.still_fits({uuid_for('a'): {'VCPU': 2}})


def test_what_the_view_does_not_hold_is_left_for_placement_to_decide():
    view = ProviderView(Reads(snapshot(('a', 8, 8))), max_age=10.0, clock=lambda: 0.0,
                        read_behind=False)
    assert view.still_fits({uuid_for('a'): {'VCPU': 1}}) is True     # not read yet

    view.match(vcpus(1))

    assert not view.still_fits({uuid_for('a'): {'VCPU': 1}})
    assert view.still_fits({uuid_for('unknown'): {'VCPU': 1}})
    assert view.still_fits({uuid_for('a'): {'CUSTOM_NOT_HELD': 1}})


def test_a_view_s_own_claims_reach_its_siblings():
    board = ClaimsBoard(2)
    view = ProviderView(Reads(snapshot(('a', 8, 0))), max_age=10.0, clock=lambda: 0.0,
                        siblings=board.of_worker(0, clock=lambda: 0.0))
    sibling = board.of_worker(1)

    view.claimed({uuid_for('a'): {'VCPU': 2}})

    assert [(rp, amount) for _, rp, _, amount in sibling.new()] == [(uuid_for('a'), 2)]


def test_a_sibling_s_claim_in_flight_puts_its_host_last_until_it_lands():
    board = ClaimsBoard(2)
    mine = Spread(0, 2, board=board.of_worker(0))
    theirs = Spread(1, 2, board=board.of_worker(1))
    host = next(uuid_for(f'h{i}') for i in range(100)
                if mine.precedence([uuid_for(f'h{i}')]).tolist() == [OWN_LANE])

    with theirs.claiming(host):
        during = mine.precedence([host]).tolist()
    after = mine.precedence([host]).tolist()

    assert (during, after) == ([IN_FLIGHT], [OWN_LANE])


def test_a_claim_on_a_host_a_sibling_s_claim_is_in_flight_on_waits_for_it_to_land():
    board = ClaimsBoard(2)
    mine = Spread(0, 2, board=board.of_worker(0), sibling_wait_limit=30.0)
    theirs = board.of_worker(1)
    host, other = uuid_for('a'), uuid_for('b')
    theirs.take_off(host)
    events: list[str] = []

    def claim(on: str) -> None:
        with mine.claiming(on):
            events.append(f'claimed {on}')

    waiting = threading.Thread(target=claim, args=(host,))
    waiting.start()
    claim(other)                            # another host: no wait
    time.sleep(0.1)
    events.append('sibling landed')
    theirs.land(host)
    waiting.join(timeout=5)

    assert events == [f'claimed {other}', 'sibling landed', f'claimed {host}']


def test_a_sibling_s_claim_that_never_lands_holds_a_claim_only_so_long():
    board = ClaimsBoard(2)
    mine = Spread(0, 2, board=board.of_worker(0), sibling_wait_limit=0.05)
    board.of_worker(1).take_off(uuid_for('a'))      # then the sibling died
    started = time.monotonic()

    with mine.claiming(uuid_for('a')):
        waited = time.monotonic() - started

    assert 0.05 <= waited < 5


def gate_held_by_another_worker(board: ClaimsBoard, *, dies: bool = False):
    """A forked worker holding ``board``'s gate (then dead, with ``dies``); a function
    that lets it go and reaps it."""
    held, let_go = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; never back into pytest
        try:
            with board.of_worker(1).gated():
                os.write(held[1], b'x')
                if not dies:
                    os.read(let_go[0], 1)
        finally:
            os._exit(0)
    assert os.read(held[0], 1) == b'x'
    if dies:
        os.waitpid(pid, 0)

    def release() -> None:
        if not dies:
            os.write(let_go[1], b'x')
            os.waitpid(pid, 0)
        for fd in (*held, *let_go):
            os.close(fd)
    return release


def test_a_worker_looks_and_takes_off_under_the_service_s_gate(monkeypatch):
    # Two workers that looked at the same moment both found the host clear and took
    # off: one look and take-off at a time, across the forked workers.
    monkeypatch.setattr(siblings_mod, 'GATE_WAIT', 30.0)
    board = ClaimsBoard(3)
    worker, sibling = board.of_worker(0), board.of_worker(2)
    release = gate_held_by_another_worker(board)
    try:
        taking_off = threading.Thread(target=worker.take_off_when_clear,
                                      args=(uuid_for('a'),),
                                      kwargs={'limit': 30.0, 'poll': 0.001})
        taking_off.start()
        time.sleep(0.2)
        during = sibling.flying()
    finally:
        release()
    taking_off.join(timeout=5)

    assert (during, sibling.flying()) == (set(), {uuid_for('a')})


def test_a_worker_stopped_holding_the_gate_delays_a_take_off_only_so_long():
    board = ClaimsBoard(2)
    release = gate_held_by_another_worker(board)
    try:
        started = time.monotonic()
        board.of_worker(0).take_off_when_clear(uuid_for('a'), limit=30.0, poll=0.001)
        waited = time.monotonic() - started
    finally:
        release()

    assert siblings_mod.GATE_WAIT <= waited < 5
    assert board.of_worker(1).flying() == {uuid_for('a')}


def test_the_gate_of_a_worker_that_died_holding_it_is_free(monkeypatch):
    monkeypatch.setattr(siblings_mod, 'GATE_WAIT', 30.0)
    board = ClaimsBoard(2)
    release = gate_held_by_another_worker(board, dies=True)
    try:
        with board.of_worker(0).gated() as held:
            assert held
    finally:
        release()


def test_a_worker_does_not_wait_for_its_own_claims_on_the_board():
    board = ClaimsBoard(2)
    worker = board.of_worker(0)
    worker.take_off(uuid_for('a'))

    assert not worker.flying_on(uuid_for('a'))
    assert board.of_worker(1).flying_on(uuid_for('a'))


def test_a_replacement_worker_clears_what_its_predecessor_left_in_flight():
    board = ClaimsBoard(2)
    board.of_worker(1).take_off(uuid_for('a'))          # then the worker died
    assert board.of_worker(0).flying() == {uuid_for('a')}

    board.of_worker(1)

    assert board.of_worker(0).flying() == set()


@pytest.mark.parametrize('workers, index', [(0, 0), (2, 2), (2, -1)])
def test_a_board_or_worker_out_of_range_is_refused(workers, index):
    with pytest.raises(ValueError):
        ClaimsBoard(workers).of_worker(index) if workers else ClaimsBoard(workers)


def test_every_slot_in_flight_taken_leaves_the_next_unseen_not_lost():
    board = ClaimsBoard(2)
    worker = board.of_worker(1)
    hosts = [f'{i:036d}' for i in range(board.flying.shape[1] + 1)]
    for host in hosts:
        worker.take_off(host)

    seen = board.of_worker(0).flying()

    assert seen == set(hosts[:-1])
    worker.land(hosts[0])
    worker.take_off(hosts[-1])
    assert hosts[-1] in board.of_worker(0).flying()
    assert np.count_nonzero(board.flying[1] != b'') == len(hosts) - 1


@pytest.mark.parametrize('workers, tolerance, warned', [
    (2, 0.0, True), (2, 0.01, False), (1, 0.0, False),
], ids=['several workers, no tolerance', 'a tolerance', 'one worker'])
def test_several_workers_on_one_view_without_a_tolerance_are_warned_of(
        tmp_path, caplog, workers, tolerance, warned):
    # Measured: every worker then claims the same best host (doc/performance.md).
    conf = service_conf(**{'scheduler.provider_view': True,
                           'scheduler.near_best_weight_tolerance': tolerance,
                           'placement_database.connection': f'sqlite:///{tmp_path}/p.db'})

    with caplog.at_level(logging.WARNING, logger='scheduler.catalog.placement_db'):
        view = provider_view_from_conf(conf, siblings=ClaimsBoard(workers).of_worker(0))

    assert view is not None
    assert any('near_best_weight_tolerance = 0' in r.getMessage()
               for r in caplog.records) is warned
