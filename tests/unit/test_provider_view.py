"""The provider view's freshness, the worker's own claims, and when Placement answers.

What the view answers is held to Placement's own answers on a real Placement in
tests/functional/test_provider_view.py; these tests pin how one snapshot is
shared and kept recent, with a clock and a reader the test controls.
"""
from __future__ import annotations

import math
import random
import threading
import time

import numpy as np
import pytest

from placement_client.query import AllocationCandidatesQuery, RequestGroupQuery
from scheduler import metrics
from scheduler.catalog import HostCatalog
from scheduler.catalog.cell_db import ComputeNodeData
from scheduler.catalog.nova_api import ServiceState
from scheduler.conf.scheduler import provider_view_on
from scheduler.host_table import COLUMNS
from scheduler.objects.spec import Aggregate
from scheduler.provider_view import answer, trees
from scheduler.provider_view.hosts import ViewTables
from scheduler.provider_view.snapshot import ProviderSnapshot
from scheduler.provider_view.view import (
    NONE_FIT,
    UNREADABLE,
    ProviderView,
    ProviderViewError,
)
from tests.builders import (
    SERVICE_CELL,
    make_conf,
    override,
    select,
    user_spec,
    uuid_for,
    uuids,
)

MICROVERSION = '1.36'


def snapshot(*hosts: tuple[str, int, int], parent_of: dict[str, str] | None = None,
             traits: dict[str, set[str]] | None = None) -> ProviderSnapshot:
    """Hosts (name, VCPU total, VCPU used), with room to spare in MEMORY_MB and
    DISK_GB; ratios 1.0, ids in the order given."""
    ids = {name: i + 1 for i, (name, _, _) in enumerate(hosts)}
    return ProviderSnapshot.from_rows(
        [(ids[name], uuid_for(name), 1, ids.get((parent_of or {}).get(name, ''), None))
         for name, _, _ in hosts],
        [(ids[name], rc, total, 0, 1, total, 1, 1.0) for name, vcpus_total, _ in hosts
         for rc, total in (('VCPU', vcpus_total), ('MEMORY_MB', 65536), ('DISK_GB', 1000))],
        [(ids[name], 'VCPU', used) for name, _, used in hosts if used],
        [(ids[name], trait) for name, names in (traits or {}).items() for trait in names],
        [])


def test_each_provider_keeps_its_own_traits_however_many_the_cloud_has():
    rng = random.Random(5)
    names = [f'h{i}' for i in range(40)]
    traits = {n: {f'CUSTOM_T{t}' for t in rng.sample(range(150), rng.randint(0, 8))}
              for n in names}

    view_snapshot = snapshot(*((n, 8, 0) for n in names), traits=traits)

    assert {n: set(view_snapshot.traits.of(i)) for i, n in enumerate(names)} == traits
    assert view_snapshot.with_trait('CUSTOM_T149').tolist() == [
        'CUSTOM_T149' in traits[n] for n in names]


def vcpus(amount: int, *, limit: int | None = None) -> AllocationCandidatesQuery:
    return AllocationCandidatesQuery(groups=[RequestGroupQuery(resources={'VCPU': amount})],
                                     limit=limit)


class Reads:
    """A reader returning the snapshots given, one per read, counting the reads; a
    snapshot of the same providers as the previous one shares its provider list, as
    the database reader's does (tests/functional/test_provider_view.py)."""

    def __init__(self, *snapshots: ProviderSnapshot | Exception):
        self.snapshots = list(snapshots)
        self.count = 0

    def __call__(self, previous: ProviderSnapshot | None = None, *,
                 whole: bool = False) -> ProviderSnapshot:
        self.count += 1
        item = self.snapshots[min(self.count, len(self.snapshots)) - 1]
        if isinstance(item, Exception):
            raise item
        return item.sharing_providers_of(previous) if previous is not None else item


def hosts_of(found) -> set[str]:
    """The hosts of a view's match, or of an answer in Placement's shape."""
    if hasattr(found, 'rows'):
        return {found.snapshot.uuids[row] for row in found.rows}
    return found.root_provider_uuids()


def used(match, name: str, rc: str = 'VCPU') -> int:
    """What the view says ``name`` uses of ``rc``, this worker's claims included."""
    snapshot = match.snapshot
    summary = answer.provider_summary(snapshot, snapshot.index[uuid_for(name)], match.overlay)
    return summary['resources'][rc]['used']


def test_requests_within_the_max_age_share_one_read():
    now = [0.0]
    reads = Reads(snapshot(('a', 8, 0)))
    view = ProviderView(reads, max_age=1.0, clock=lambda: now[0], read_behind=False)

    for moment in (0.0, 0.5, 1.0):
        now[0] = moment
        found, why = view.match(vcpus(1))
        assert why is None and hosts_of(found) == {uuid_for('a')}
    assert reads.count == 1
    now[0] = 1.01
    view.match(vcpus(1))
    assert reads.count == 2


def test_a_worker_reads_its_view_and_builds_its_hosts_before_it_takes_calls():
    # Read on the first request, a whole read of 50,000 providers kept the first
    # callers of every starting worker waiting for seconds.
    now = [0.0]
    reads = Reads(snapshot(('a', 8, 0)), snapshot(('a', 8, 4)))
    view = ProviderView(reads, max_age=1.0, clock=lambda: now[0], read_behind=False)
    catalog = HostCatalog(default_cell_uuid=SERVICE_CELL)

    view.warm(catalog)

    assert reads.count == 1 and view._tables.built == 1
    now[0] = 0.5
    found, _ = view.match(vcpus(1))
    found.hosts(catalog)
    assert reads.count == 1 and view._tables.built == 1, 'the first request read again'


def test_a_first_read_that_fails_is_left_to_the_first_request():
    reads = Reads(ProviderViewError('database unreachable'), snapshot(('a', 8, 0)))
    view = ProviderView(reads, max_age=1.0, read_behind=False)

    with pytest.raises(ProviderViewError):
        view.warm(HostCatalog(default_cell_uuid=SERVICE_CELL))

    found, why = view.match(vcpus(1))
    assert why is None and hosts_of(found) == {uuid_for('a')}


def test_hosts_say_whether_they_show_claims_the_other_workers_views_do_not_yet():
    # What the spread reaches further for the worker's own lane on (pipeline/spread.py).
    now = [0.0]
    view = ProviderView(Reads(snapshot(('a', 8, 0), ('b', 8, 0)), snapshot(('a', 8, 2))),
                        max_age=10.0, clock=lambda: now[0], read_behind=False)
    catalog = HostCatalog(default_cell_uuid=SERVICE_CELL)

    def ahead() -> bool:
        found, _ = view.match(vcpus(1))
        return found.hosts(catalog).table.concurrent

    assert not ahead()
    view.claimed({uuid_for('a'): {'VCPU': 2}})
    assert ahead()
    now[0] = 11.0                                # the next read has the claim
    assert not ahead()


def test_hosts_say_the_request_is_decided_concurrently_while_the_worker_is_busy():
    # Under load every worker's view is behind the others' claims, even one just
    # read (pipeline/spread.py); an idle worker's fresh view is not.
    now = [0.0]
    view = ProviderView(Reads(snapshot(('a', 8, 0))), max_age=1.0, clock=lambda: now[0],
                        read_behind=False)
    catalog = HostCatalog(default_cell_uuid=SERVICE_CELL)

    def concurrent() -> bool:
        found, _ = view.match(vcpus(1))
        return found.hosts(catalog).table.concurrent

    assert not concurrent()
    now[0] = 0.5
    assert concurrent()                          # the last request came within max_age
    now[0] = 5.0
    assert not concurrent()


def test_hosts_know_what_the_request_asks_of_each_and_how_many_more_fit():
    view = ProviderView(Reads(snapshot(('a', 8, 2), ('b', 8, 7))), max_age=10.0,
                        clock=lambda: 0.0, read_behind=False)
    view.match(vcpus(1))
    view.claimed({uuid_for('a'): {'VCPU': 2}})

    found, _ = view.match(vcpus(2))
    hosts = found.hosts(HostCatalog(default_cell_uuid=SERVICE_CELL))

    assert hosts.table.request_resources == {'VCPU': 2}
    assert hosts.table.room(hosts.rows).tolist() == [2]           # b does not fit
    assert hosts_of(found) == {uuid_for('a')}


def test_the_worker_s_own_claims_count_until_the_next_read():
    now = [0.0]
    view = ProviderView(Reads(snapshot(('a', 8, 0), ('b', 8, 4)), snapshot(('a', 8, 6))),
                        max_age=10.0, clock=lambda: now[0], read_behind=False)
    view.match(vcpus(1))

    view.claimed({uuid_for('a'): {'VCPU': 6}})
    found, _ = view.match(vcpus(4))
    assert hosts_of(found) == {uuid_for('b')}
    # The hosts the request weighs: the claim on a counted, b as read.
    [host] = found.hosts(HostCatalog(default_cell_uuid=SERVICE_CELL))
    assert (host.capacity['VCPU'], host.used['VCPU']) == (8, 4)
    assert (host.capacity['MEMORY_MB'], host.used['MEMORY_MB']) == (65536, 0)
    assert used(found, 'a') == 6

    # The next read has the claim itself: it is not counted twice.
    now[0] = 11.0
    found, _ = view.match(vcpus(2))
    assert hosts_of(found) == {uuid_for('a')}
    assert used(found, 'a') == 6


def second_read_held(*snapshots: ProviderSnapshot):
    """A reader of ``snapshots`` whose second read waits until the event returned is
    set."""
    may_end = threading.Event()
    reads = Reads(*snapshots)

    def read(previous: ProviderSnapshot | None = None, *,
             whole: bool = False) -> ProviderSnapshot:
        if reads.count == 1:
            assert may_end.wait(10)
        return reads()
    return read, may_end


def wait_for_reads(view: ProviderView, count: int) -> None:
    for _ in range(200):
        if view.reads == count:
            return
        time.sleep(0.01)


def test_an_old_snapshot_is_read_again_behind_the_requests_which_do_not_wait():
    now = [0.0]
    read, second_read_may_end = second_read_held(snapshot(('a', 8, 0)),
                                                 snapshot(('a', 8, 4), ('b', 8, 0)))
    view = ProviderView(read, max_age=1.0, clock=lambda: now[0])
    view.match(vcpus(1))
    now[0] = 0.6
    view.match(vcpus(1))              # the worker is busy: a request every 0.6 s

    now[0] = 1.2
    found, _ = view.match(vcpus(1))   # does not wait
    assert hosts_of(found) == {uuid_for('a')}
    view.claimed({uuid_for('b'): {'VCPU': 8}})      # kept while the read is under way
    second_read_may_end.set()
    wait_for_reads(view, 2)

    found, _ = view.match(vcpus(1))
    # The new snapshot, with the claim made during its read still counted.
    assert view.reads == 2 and hosts_of(found) == {uuid_for('a')}
    assert used(found, 'a') == 4


def test_a_read_the_service_s_reader_began_before_the_worker_asked_keeps_the_claims_since_then():
    # With shared reads, the snapshot a worker takes may come from a read begun
    # before it asked (up to half of max_age): its claims made after that read
    # began are not in it, whenever the worker asked, and stay counted; those
    # made before it are in it and leave the overlay.
    now = [0.0]
    began = [0.0]
    reads = Reads(snapshot(('a', 8, 0), ('b', 8, 0)), snapshot(('a', 8, 2), ('b', 8, 0)))
    view = ProviderView(reads, max_age=1.0, clock=lambda: now[0], read_behind=False,
                        began=lambda: began[0])
    view.match(vcpus(1))
    now[0] = 0.2
    view.claimed({uuid_for('a'): {'VCPU': 2}})     # in the reader's next read
    now[0] = 0.6
    view.claimed({uuid_for('b'): {'VCPU': 3}})     # after that read began

    now[0], began[0] = 1.5, 0.4
    found, _ = view.match(vcpus(1))

    assert reads.count == 2
    assert (used(found, 'a'), used(found, 'b')) == (2, 3)


def test_after_an_idle_spell_the_request_waits_for_a_read_instead_of_deciding_on_an_old_view():
    # Nothing else asked since: no request queues behind the read, and what other
    # schedulers claimed meanwhile counts (a decision on the old view would weigh
    # their latest hosts as if they were empty).
    now = [0.0]
    reads = Reads(snapshot(('a', 8, 0), ('b', 8, 0)), snapshot(('a', 8, 8), ('b', 8, 0)))
    view = ProviderView(reads, max_age=1.0, clock=lambda: now[0])
    view.match(vcpus(1))
    now[0] = 1.5                      # no request for max_age

    found, _ = view.match(vcpus(1))

    assert reads.count == 2 and hosts_of(found) == {uuid_for('b')}


def test_a_worker_with_a_request_waiting_or_just_answered_is_busy_however_long_ago_one_matched():
    # At 50,000 providers a request's turn can outlast max_age: the gap between two
    # matches is then no idle spell, and reading before the request would hold the
    # turn of every request queued behind it.
    now = [0.0]
    read, second_read_may_end = second_read_held(
        snapshot(('a', 8, 0)), snapshot(('a', 8, 4)), snapshot(('a', 8, 6)),
        snapshot(('a', 8, 7)))
    view = ProviderView(read, max_age=1.0, clock=lambda: now[0])
    view.match(vcpus(1))
    now[0] = 1.5                      # no match for longer than max_age

    with view.serving(), view.serving():     # this request, and one waiting its turn
        found, _ = view.match(vcpus(1))      # does not wait: the read goes behind
    assert view.reads == 1 and used(found, 'a') == 0
    second_read_may_end.set()
    wait_for_reads(view, 2)
    assert view.reads == 2

    now[0] = 5.0                      # alone in the worker, the last request left at 1.5
    with view.serving():
        found, _ = view.match(vcpus(1))
        now[0] = 6.2
    assert view.reads == 3 and used(found, 'a') == 6

    now[0] = 7.0                      # alone, but a request left within max_age
    with view.serving():
        found, _ = view.match(vcpus(1))
    assert used(found, 'a') == 6      # the read went behind
    wait_for_reads(view, 4)
    assert view.reads == 4


def slow_read_of_changes(now: list[float], takes: float = 1.5):
    """A reader whose second read (the first of changes) takes ``takes`` seconds of the
    clock ``now``, and whose reads behind the requests wait until the event returned
    is set."""
    reads_behind_may_end = threading.Event()
    reads = Reads(snapshot(('a', 8, 0)), snapshot(('a', 8, 0)), snapshot(('a', 8, 4)))

    def slow_read(previous: ProviderSnapshot | None = None, *,
                  whole: bool = False) -> ProviderSnapshot:
        if reads.count == 1:
            now[0] += takes
        elif threading.current_thread() is not threading.main_thread():
            assert reads_behind_may_end.wait(10)
        return reads()
    return slow_read, reads_behind_may_end


def a_view_whose_read_of_changes_took(now: list[float], max_age: float):
    """A view read first at 0 s, then again by an idle worker's request at 10 s, a read
    of changes that takes until 11.5 s; and the event that lets reads behind end."""
    slow_read, reads_behind_may_end = slow_read_of_changes(now)
    view = ProviderView(slow_read, max_age=max_age, clock=lambda: now[0])
    view.match(vcpus(1))
    now[0] = 10.0
    view.match(vcpus(1))                # idle: reads before deciding, until 11.5 s
    assert now[0] == 11.5
    return view, reads_behind_may_end


@pytest.mark.parametrize('max_age, gap, waits', [
    (1.0, 0.1, False),
    # 50,000 providers: a read outlasts max_age, and a worker whose requests come
    # further apart than max_age is still busy while they come faster than it reads.
    (0.25, 0.5, False),
    (0.25, 2.0, True),
], ids=['within max_age', 'longer than max_age, shorter than a read', 'longer than a read'])
def test_a_worker_whose_read_outlasts_max_age_waits_for_the_next_only_when_idle_as_long(
        max_age, gap, waits):
    now = [0.0]
    view, reads_behind_may_end = a_view_whose_read_of_changes_took(now, max_age)
    now[0] = 11.5 + gap

    found, _ = view.match(vcpus(1))

    reads_behind_may_end.set()
    assert used(found, 'a') == (4 if waits else 0)


def test_a_worker_reads_for_at_most_a_quarter_of_its_time():
    # 50,000 providers under a max_age of a quarter of a second: back-to-back reads
    # would take the interpreter from the requests. A read that took 1.5 s serves
    # for 6 s from when it began.
    now = [0.0]
    view, reads_behind_may_end = a_view_whose_read_of_changes_took(now, 0.25)
    started = []
    for at in (12.0, 13.0, 14.0, 15.0, 15.9, 16.1):     # a busy worker
        now[0] = at
        view.match(vcpus(1))
        started.append(view._reading)
    reads_behind_may_end.set()

    assert view.fresh_for() == 6.0
    assert started == [False] * 5 + [True]


def test_the_first_whole_read_does_not_space_a_busy_worker_s_reads():
    # The first read of 50,000 providers reads every one of them, and reads of
    # changes take a fraction of it: spaced by the first, every worker decided from
    # its first snapshot for several seconds under load.
    now = [0.0]
    reads_behind_may_end = threading.Event()
    reads = Reads(snapshot(('a', 8, 0)), snapshot(('a', 8, 4)))

    def slow_first(previous: ProviderSnapshot | None = None, *,
                   whole: bool = False) -> ProviderSnapshot:
        if previous is None:
            now[0] += 3.0
        else:
            assert reads_behind_may_end.wait(10)
        return reads()
    view = ProviderView(slow_first, max_age=0.25, clock=lambda: now[0])
    view.match(vcpus(1))                # reads from 0 to 3 s
    now[0] = 3.2                        # busy, and the snapshot is older than max_age

    view.match(vcpus(1))

    assert view.fresh_for() == 0.25 and view._reading
    reads_behind_may_end.set()


def test_when_a_read_behind_fails_the_next_request_reads_itself_and_asks_placement_meanwhile():
    now = [0.0]
    reads = Reads(snapshot(('a', 8, 0)), ProviderViewError('OperationalError: gone'),
                  ProviderViewError('OperationalError: gone'), snapshot(('b', 8, 0)))
    view = ProviderView(reads, max_age=1.0, clock=lambda: now[0])
    view.match(vcpus(1))
    now[0] = 0.6
    view.match(vcpus(1))
    now[0] = 1.2
    view.match(vcpus(1))     # starts the read behind (the worker is busy)
    for _ in range(200):
        if reads.count == 2 and view._stale:
            break
        time.sleep(0.01)

    assert view.match(vcpus(1)) == (None, UNREADABLE)
    found, why = view.match(vcpus(1))
    assert why is None and hosts_of(found) == {uuid_for('b')}


def test_a_claim_refused_for_capacity_makes_the_view_read_again_at_once():
    reads = Reads(snapshot(('a', 8, 0)), snapshot(('a', 8, 8)))
    view = ProviderView(reads, max_age=300.0, clock=lambda: 0.0)
    view.match(vcpus(1))

    view.refused({uuid_for('a'): {'VCPU': 1}})      # starts the read, does not wait
    wait_for_reads(view, 2)
    found, why = view.match(vcpus(1))

    # No host left in the view: Placement, which knows what was freed since, is asked.
    assert reads.count == 2 and (found, why) == (None, NONE_FIT)


def test_until_that_read_the_refused_amounts_count_as_used_on_the_host():
    # The worker's next request, and the request's own retry, look elsewhere
    # instead of meeting the same refusal on a host another scheduler filled.
    read, read_may_end = second_read_held(snapshot(('a', 8, 4), ('b', 8, 0)),
                                          snapshot(('a', 8, 8), ('b', 8, 0)))
    view = ProviderView(read, max_age=300.0, clock=lambda: 0.0)
    found, _ = view.match(vcpus(3))
    assert hosts_of(found) == {uuid_for('a'), uuid_for('b')}

    view.refused({uuid_for('a'): {'VCPU': 3}})
    found, _ = view.match(vcpus(2))
    assert view.reads == 1 and hosts_of(found) == {uuid_for('b')}
    assert used(found, 'a') == 7

    read_may_end.set()
    wait_for_reads(view, 2)
    # The read began after the refusal: it has what filled the host, counted once.
    found, _ = view.match(vcpus(1))
    assert hosts_of(found) == {uuid_for('b')} and used(found, 'a') == 8


def test_a_refusal_during_a_read_begun_before_it_still_counts_after_that_read():
    # That read may predate the other scheduler's claim that filled the host.
    now = [0.0]
    read, read_may_end = second_read_held(snapshot(('a', 8, 4)), snapshot(('a', 8, 4)))
    view = ProviderView(read, max_age=1.0, clock=lambda: now[0])
    view.match(vcpus(1))
    now[0] = 0.6
    view.match(vcpus(1))
    now[0] = 1.2
    view.match(vcpus(1))                 # the read behind begins

    view.refused({uuid_for('a'): {'VCPU': 3}})
    read_may_end.set()
    wait_for_reads(view, 2)

    found, _ = view.match(vcpus(1))
    assert view.reads == 2 and used(found, 'a') == 7


def test_a_view_that_cannot_be_read_sends_the_request_to_placement_and_is_tried_again():
    now = [0.0]
    reads = Reads(ProviderViewError('OperationalError: connection refused'),
                  snapshot(('a', 8, 0)))
    view = ProviderView(reads, max_age=1.0, clock=lambda: now[0], read_behind=False)

    assert view.match(vcpus(1)) == (None, UNREADABLE)
    found, why = view.match(vcpus(1))
    assert why is None and hosts_of(found) == {uuid_for('a')}


def test_a_class_held_by_a_sharing_provider_is_searched_tree_by_tree():
    nested = snapshot(('a', 8, 0), ('a-numa0', 4, 0), parent_of={'a-numa0': 'a'})
    disk_pool = ProviderSnapshot.from_rows(
        [(1, uuid_for('a'), 1, None), (2, uuid_for('nfs'), 1, None)],
        [(1, 'VCPU', 8, 0, 1, 8, 1, 1.0), (2, 'DISK_GB', 100, 0, 1, 100, 1, 1.0)],
        [], [(2, 'MISC_SHARES_VIA_AGGREGATE')], [])
    pool_of_all = snapshot(('a', 8, 0), ('nfs', 8, 0),
                           traits={'nfs': {'MISC_SHARES_VIA_AGGREGATE'}})
    pool_below_a_root = snapshot(('a', 8, 0), ('a-nfs', 8, 0), parent_of={'a-nfs': 'a'},
                                 traits={'a-nfs': {'MISC_SHARES_VIA_AGGREGATE'}})
    with_disk = AllocationCandidatesQuery(groups=[RequestGroupQuery(
        resources={'VCPU': 1, 'DISK_GB': 10})])

    assert answer.why_not_exact(with_disk, disk_pool) is None
    assert not answer.is_flat(with_disk, disk_pool)
    # A class no sharing provider has is one root's alone.
    assert answer.is_flat(vcpus(1), disk_pool)
    # Every class of the unsuffixed group in a pool, or a pool below a root: Placement's.
    assert answer.why_not_exact(vcpus(1), pool_of_all) == answer.SHARED_ALONE
    assert answer.why_not_exact(vcpus(1), pool_below_a_root) == answer.SHARING
    # A class held below a root is searched tree by tree; one only roots hold is
    # answered root by root.
    assert answer.why_not_exact(vcpus(1), nested) is None
    assert not answer.is_flat(vcpus(1), nested)
    assert answer.why_not_exact(vcpus(1), snapshot(('a', 8, 0))) is None
    assert answer.is_flat(vcpus(1), snapshot(('a', 8, 0)))


def test_a_tree_whose_children_hold_other_classes_is_answered_whole():
    tree = ProviderSnapshot.from_rows(
        [(1, uuid_for('a'), 1, None), (2, uuid_for('a-gpu'), 1, 1), (3, uuid_for('b'), 1, None)],
        [(1, 'VCPU', 8, 0, 1, 8, 1, 1.0), (2, 'VGPU', 4, 0, 1, 4, 1, 1.0),
         (3, 'VCPU', 2, 0, 1, 2, 1, 1.0)],
        [], [(2, 'CUSTOM_GPU')], [])

    assert answer.why_not_exact(vcpus(4), tree) is None
    found = answer.candidates(tree, vcpus(4), overlay={}, microversion=MICROVERSION)
    # One request from the root; the summaries describe the whole tree.
    assert [r['allocations'] for r in found.raw_requests()] == [
        {uuid_for('a'): {'resources': {'VCPU': 4}}}]
    assert found.raw_summaries()[uuid_for('a-gpu')] == {
        'resources': {'VGPU': {'capacity': 4, 'used': 0}}, 'traits': ['CUSTOM_GPU'],
        'parent_provider_uuid': uuid_for('a'), 'root_provider_uuid': uuid_for('a')}
    asked_in_tree = AllocationCandidatesQuery(groups=[RequestGroupQuery(
        resources={'VCPU': 1}, in_tree=uuid_for('a-gpu'))])
    assert answer.candidates(tree, asked_in_tree, overlay={},
                             microversion=MICROVERSION).root_provider_uuids() == {uuid_for('a')}


def test_flavors_on_a_cloud_with_numa_nodes_in_placement_search_few_trees(monkeypatch):
    # Host a reports two NUMA nodes holding its MEMORY_MB, b is a plain root: the
    # unsuffixed group's classes are then held below roots, and each tree is
    # Placement's to combine. Without required traits any choice of a provider
    # with room per class is a combination Placement accepts: no search, for any
    # host; the requests of the hosts a request looks at are still searched.
    tree = ProviderSnapshot.from_rows(
        [(1, uuid_for('a'), 1, None), (2, uuid_for('a-numa0'), 1, 1),
         (3, uuid_for('a-numa1'), 1, 1), (4, uuid_for('b'), 1, None)],
        [(1, 'VCPU', 8, 0, 1, 8, 1, 1.0), (2, 'MEMORY_MB', 4096, 0, 1, 4096, 1, 1.0),
         (3, 'MEMORY_MB', 4096, 0, 1, 4096, 1, 1.0), (4, 'VCPU', 8, 0, 1, 8, 1, 1.0),
         (4, 'MEMORY_MB', 8192, 0, 1, 8192, 1, 1.0)],
        [(2, 'MEMORY_MB', 3072)], [(2, 'HW_NUMA_ROOT'), (3, 'HW_NUMA_ROOT')], [])
    flavor = AllocationCandidatesQuery(groups=[RequestGroupQuery(
        resources={'VCPU': 2, 'MEMORY_MB': 2048})])
    searched: list[tuple] = []
    search = trees.assignments
    monkeypatch.setattr(trees, 'assignments',
                        lambda rules, cloud, rows, **kw: searched.append(rows)
                        or search(rules, cloud, rows, **kw))

    found = trees.answer(tree, flavor, {})

    assert [tree.uuids[r] for r in found.roots] == [uuid_for('a'), uuid_for('b')]
    assert searched == []
    assert [r['allocations'] for r in found.requests(0)] == [
        {uuid_for('a'): {'resources': {'VCPU': 2}},
         uuid_for('a-numa1'): {'resources': {'MEMORY_MB': 2048}}}]
    # The group's required traits must be held together: the root alone holds
    # none, so a's tree is searched (b, without them, is not answered).
    numa = AllocationCandidatesQuery(groups=[RequestGroupQuery(
        resources={'VCPU': 2, 'MEMORY_MB': 2048}, required_traits={'HW_NUMA_ROOT'})])
    searched.clear()
    assert [tree.uuids[r] for r in trees.answer(tree, numa, {}).roots] == [uuid_for('a')]
    assert len(searched) == 1
    # A NUMA cell in a group of its own, the rest unsuffixed: no class asked twice,
    # no rule across groups, so no search either; nor for two cells alike under
    # isolate (a tree with two that fit); two that differ are searched.
    cell = RequestGroupQuery(suffix='1', resources={'MEMORY_MB': 1024},
                             required_traits={'HW_NUMA_ROOT'})
    one_cell = AllocationCandidatesQuery(
        groups=[RequestGroupQuery(resources={'VCPU': 2}), cell])
    two_cells = AllocationCandidatesQuery(
        groups=[RequestGroupQuery(resources={'VCPU': 2}), cell,
                RequestGroupQuery(suffix='2', resources={'MEMORY_MB': 1024},
                                  required_traits={'HW_NUMA_ROOT'})], group_policy='isolate')
    searched.clear()
    assert [tree.uuids[r] for r in trees.answer(tree, one_cell, {}).roots] == [uuid_for('a')]
    assert searched == []
    assert [tree.uuids[r] for r in trees.answer(tree, two_cells, {}).roots] == [uuid_for('a')]
    assert searched == []
    two_cells.groups[2].resources['MEMORY_MB'] = 512
    assert [tree.uuids[r] for r in trees.answer(tree, two_cells, {}).roots] == [uuid_for('a')]
    assert len(searched) == 1


def test_over_the_limit_a_random_sample_of_the_matching_hosts_is_answered():
    names = [f'h{i}' for i in range(20)]
    view_of = snapshot(*((name, 8, 0) for name in names))

    first = answer.candidates(view_of, vcpus(1, limit=5), overlay={},
                              microversion=MICROVERSION, rng=random.Random(1))
    second = answer.candidates(view_of, vcpus(1, limit=5), overlay={},
                               microversion=MICROVERSION, rng=random.Random(2))

    assert len(first) == len(second) == 5
    assert hosts_of(first) != hosts_of(second)
    assert hosts_of(first) <= {uuid_for(n) for n in names}
    assert set(first.raw_summaries()) == hosts_of(first)


def test_with_the_view_on_a_query_it_cannot_answer_goes_to_placement(fake, make_manager):
    fake.add_compute('cn0')
    manager = make_manager()
    manager.query.view = ProviderView(
        Reads(snapshot(('cn0', 16, 0), ('nfs', 4, 0), parent_of={'nfs': 'cn0'},
                       traits={'nfs': {'MISC_SHARES_VIA_AGGREGATE'}})),
        max_age=1.0)
    sent_before = metrics.PROVIDER_VIEW_QUERIES.value(answer='placement',
                                                      why=answer.SHARING)

    [selections] = select(manager, user_spec(), uuids(1), return_alternates=False)

    assert selections[0].service_host == 'cn0'
    assert len(fake.calls_to('get_allocation_candidates')) == 1
    assert metrics.PROVIDER_VIEW_QUERIES.value(answer='placement',
                                               why=answer.SHARING) == sent_before + 1


def test_with_the_view_on_a_query_it_answers_asks_placement_only_to_claim(fake, make_manager):
    fake.add_compute('cn0')
    manager = make_manager()
    manager.query.view = ProviderView(Reads(snapshot(('cn0', 16, 0))), max_age=1.0)

    [selections] = select(manager, user_spec(vcpus=1), uuids(1), return_alternates=False)

    assert selections[0].compute_node_uuid == uuid_for('cn0')
    assert fake.calls_to('get_allocation_candidates') == []
    assert len(fake.claims()) == 1


def test_the_view_is_on_exactly_when_placement_s_database_is_known_unless_set():
    connected = {'placement_database.connection': 'postgresql://placement@db/placement'}
    assert provider_view_on(make_conf()) is False
    assert provider_view_on(override(make_conf(), **connected)) is True
    assert provider_view_on(override(make_conf(), **connected,
                                     **{'scheduler.provider_view': False})) is False
    assert provider_view_on(override(make_conf(), **{'scheduler.provider_view': True})) is True


def catalog_of(*names: str) -> HostCatalog:
    from scheduler.catalog.hosts_file import HostsFileContent
    from scheduler.host_state import HostRecord

    catalog = HostCatalog(default_cell_uuid=SERVICE_CELL)
    catalog.load_content(HostsFileContent(hosts=tuple(
        HostRecord(nodename=n, service_host=n, cell_uuid=SERVICE_CELL,
                   provider_uuid=uuid_for(n)) for n in names)), 'test')
    return catalog


def test_a_request_decides_over_every_matching_host_whatever_the_limit():
    names = [f'h{i}' for i in range(30)]
    view = ProviderView(Reads(snapshot(*((n, 8, 0) for n in names))), max_age=300.0)

    match, _ = view.match(vcpus(1, limit=5))

    assert hosts_of(match) == {uuid_for(n) for n in names}
    assert len(match.hosts(catalog_of(*names))) == 30


def test_what_a_request_consumes_stays_in_its_own_fork_of_the_shared_table():
    catalog = catalog_of('a', 'b')
    view = ProviderView(Reads(snapshot(('a', 8, 0), ('b', 8, 2))), max_age=300.0)
    match, _ = view.match(vcpus(1))
    first = match.hosts(catalog)
    [request] = first[0].allocation_candidates
    first[0].consume(request, 'instance-1')

    second = view.match(vcpus(1))[0].hosts(catalog)

    assert first.table.column('VCPU', 'used').tolist() == [1, 2]
    assert second.table.column('VCPU', 'used').tolist() == [0, 2]
    assert first.table.num_instances.tolist() == [1, 0]
    assert second.table.num_instances.tolist() == [0, 0]
    assert first.table.instances[0] == ('instance-1',) and second.table.instances[0] == ()
    # What the request did not change is still the shared table's, not a copy.
    assert first.table.column('MEMORY_MB', 'used') is second.table.column('MEMORY_MB', 'used')
    assert first.table.failed_builds is second.table.failed_builds


def test_a_request_s_table_counts_the_claims_since_the_read_beside_the_shared_columns():
    catalog = catalog_of('a', 'b')
    view = ProviderView(Reads(snapshot(('a', 8, 0), ('b', 8, 2))), max_age=300.0)
    before = view.match(vcpus(1))[0].hosts(catalog)
    view.claimed({uuid_for('b'): {'VCPU': 3}})

    after = view.match(vcpus(1))[0].hosts(catalog)

    rows = np.arange(2)
    assert after.table.used_at('VCPU', rows).tolist() == [0, 5]
    assert after.table.free_at('VCPU', rows).tolist() == [8, 3]
    assert after.table.room(rows).tolist() == [8, 3]
    assert after.table.used['VCPU'] is before.table.used['VCPU']      # not a copy
    # A plugin that reads the whole column sees the claim too, in the request's own copy.
    assert after.table.column('VCPU', 'used').tolist() == [0, 5]
    assert before.table.column('VCPU', 'used').tolist() == [0, 2]


def _view_whose_second_read_changes_a(vcpu_total: int, usages: list) -> tuple[ProviderView,
                                                                             list[float]]:
    """A view of hosts a and b (8 VCPUs each, b using 2) whose second read, of what
    changed, finds a with ``vcpu_total`` VCPUs and the usage rows ``usages`` (its
    generation moved); and the view's clock, to move past max_age."""
    now = [0.0]
    first = snapshot(('a', 8, 0), ('b', 8, 2))
    second = first.with_changes(
        first.generations + [1, 0], [1],
        inventories=[(1, rc, total, 0, 1, total, 1, 1.0) for rc, total in (
            ('VCPU', vcpu_total), ('MEMORY_MB', 65536), ('DISK_GB', 1000))],
        usages=usages, traits=[], aggregates=[], marks=None)
    return ProviderView(Reads(first, second), max_age=1.0, clock=lambda: now[0],
                        read_behind=False), now


def test_the_shared_table_takes_new_usage_from_a_read_and_the_catalog_only_when_it_changed():
    view, now = _view_whose_second_read_changes_a(8, [(1, 'VCPU', 6)])
    catalog = catalog_of('a', 'b')
    before = view.match(vcpus(1))[0].hosts(catalog).table
    now[0] = 2.0

    hosts = view.match(vcpus(1))[0].hosts(catalog)

    assert [h.used['VCPU'] for h in hosts] == [6, 2]
    assert (view._tables.built, view._tables.updated) == (1, 1)
    # Only the columns of what moved are new.
    after = hosts.table
    assert after.column('VCPU', 'used') is not before.column('VCPU', 'used')
    assert after.column('VCPU', 'capacity') is before.column('VCPU', 'capacity')
    assert after.column('MEMORY_MB', 'used') is before.column('MEMORY_MB', 'used')
    # Instances on one host: that host's row is read again, the table kept.
    catalog.update_instance_info('a', ['i-1'])
    hosts = view.match(vcpus(1))[0].hosts(catalog)
    assert hosts[0].instances == {'i-1': {'uuid': 'i-1'}} and hosts[0].num_instances == 1
    assert (view._tables.built, view._tables.updated) == (1, 2)
    # Aggregates may move any host: the table is built again.
    catalog.update_aggregates(Aggregate(id=1, uuid=uuid_for('agg'), name='agg', hosts=['b'],
                                        metadata={'availability_zone': 'az1'}))
    hosts = view.match(vcpus(1))[0].hosts(catalog)
    assert hosts[1].aggregates[0].name == 'agg'
    assert view._tables.built == 2


def _rows_of(table) -> list[tuple]:
    """Everything a table says of each host, as plain values."""
    return [(table.roots[row], table.records[row],
             tuple(a.uuid for a in table.aggregates[row]), table.instances[row],
             table.instance_info_known[row],
             table.supported_values[table.supported_codes[row]],
             *(_plain(getattr(table, column.name)[row]) for column in COLUMNS))
            for row in range(len(table))]


def _plain(value):
    """NaN (never seen up) as None, so that two of them compare equal."""
    return None if isinstance(value, float) and math.isnan(value) else value


def test_a_table_kept_across_catalog_changes_to_named_hosts_equals_one_built_afresh():
    # Nova's computes cast their instance lists every two minutes each, and service
    # states are read before requests: the view's table takes those hosts' rows again
    # instead of being built again for every change.
    rng = random.Random(20261126)
    names = [f'h{i}' for i in range(30)]
    view_snapshot = snapshot(*((n, 8, 0) for n in names))
    catalog = catalog_of(*names)
    kept = ViewTables()
    services: dict[str, ServiceState] = {}

    def node(host: str) -> ComputeNodeData:
        # A request that asks for NUMA or PCI reads its candidates' rows again.
        return ComputeNodeData(provider_uuid=uuid_for(host), nodename=host, service_host=host,
                               cell_uuid=SERVICE_CELL, hypervisor_version=rng.randrange(3),
                               host_ip=f'192.0.2.{rng.randrange(3)}')

    catalog.apply_cell_db_nodes([node(n) for n in names])
    for _ in range(80):
        host = rng.choice(names)
        change = rng.choice(('update', 'update', 'delete', 'sync', 'service', 'service',
                             'node'))
        if change == 'update':
            catalog.update_instance_info(host, [f'{host}-i{rng.randrange(5)}'])
        elif change == 'delete':
            catalog.delete_instance_info(host, f'{host}-i{rng.randrange(5)}')
        elif change == 'sync':
            catalog.sync_instance_info(host, [f'{host}-i{i}' for i in range(rng.randrange(4))])
        elif change == 'node':
            catalog.add_cell_db_nodes([node(h) for h in rng.sample(names, 3)])
        else:
            services[host] = ServiceState(host=host, up=rng.random() < 0.8,
                                          disabled=rng.random() < 0.3,
                                          forced_down=rng.random() < 0.1)
            catalog.apply_service_states(dict(services))
        if rng.random() < 0.5:
            continue        # several changes between two requests
        table = kept.hosts(view_snapshot, catalog, default_availability_zone='nova').table
        fresh = ViewTables().hosts(view_snapshot, catalog, default_availability_zone='nova')

        assert _rows_of(table) == _rows_of(fresh.table)
    assert kept.built == 1 and kept.updated > 20


def test_the_catalog_names_the_hosts_it_changed_and_says_when_it_cannot():
    catalog = catalog_of('a', 'b')
    start = catalog.versions()

    catalog.update_instance_info('a', ['i-1'])
    catalog.sync_instance_info('b', [])
    assert catalog.changed_hosts_since(start) == {'a', 'b'}
    middle = catalog.versions()
    catalog.delete_instance_info('a', 'i-1')
    assert catalog.changed_hosts_since(middle) == {'a'}
    assert catalog.changed_hosts_since(catalog.versions()) == set()
    # The same service states again change nothing, not even the version.
    catalog.apply_service_states({'a': ServiceState(host='a', up=True)})
    version = catalog.versions()
    catalog.apply_service_states({'a': ServiceState(host='a', up=True)})
    assert catalog.versions() == version
    # What may change any host is not named.
    catalog.update_aggregates(Aggregate(id=1, uuid=uuid_for('agg'), name='agg', hosts=['a']))
    assert catalog.changed_hosts_since(version) is None
    assert catalog.changed_hosts_since(catalog.versions()) == set()


def test_a_change_older_than_what_the_catalog_remembers_is_not_named(monkeypatch):
    from scheduler.catalog import catalog as catalog_module

    monkeypatch.setattr(catalog_module, 'CHANGE_LOG', 3)
    catalog = catalog_of('a', 'b')
    start = catalog.versions()
    for host in ('a', 'b', 'a'):
        catalog.update_instance_info(host, ['i'])
    assert catalog.changed_hosts_since(start) == {'a', 'b'}

    catalog.update_instance_info('b', ['j'])     # the first change is forgotten

    assert catalog.changed_hosts_since(start) is None
    assert catalog.changed_hosts_since(start + 1) == {'a', 'b'}


def test_a_change_of_more_hosts_than_the_catalog_remembers_is_a_change_of_everything(
        monkeypatch):
    from scheduler.catalog import catalog as catalog_module

    monkeypatch.setattr(catalog_module, 'CHANGE_LOG', 3)
    catalog = catalog_of('a', 'b', 'c', 'd')
    start = catalog.versions()

    catalog.apply_service_states({h: ServiceState(host=h, up=False) for h in 'abcd'})

    assert catalog.changed_hosts_since(start) is None
    after = catalog.versions()
    catalog.update_instance_info('a', ['i'])
    assert catalog.changed_hosts_since(after) == {'a'}


def test_a_read_that_moves_an_inventory_gives_the_shared_table_its_new_capacity():
    view, now = _view_whose_second_read_changes_a(16, [])
    catalog = catalog_of('a', 'b')
    view.match(vcpus(1))[0].hosts(catalog)
    now[0] = 2.0

    hosts = view.match(vcpus(1))[0].hosts(catalog)

    # The columns filters and weighers read, and the hosts built from the snapshot.
    assert hosts.table.column('VCPU', 'capacity').tolist() == [16, 8]
    assert hosts.table.column('VCPU', 'used').tolist() == [0, 2]
    assert [h.capacity['VCPU'] for h in hosts] == [16, 8]
    assert (view._tables.built, view._tables.updated) == (1, 1)


def _hosts_after_a_second_read(first: ProviderSnapshot, second: ProviderSnapshot,
                               catalog: HostCatalog):
    """The hosts a request gets after the view read ``second`` (new snapshots, as a
    whole read makes), having read ``first``; and the view's tables."""
    now = [0.0]
    view = ProviderView(Reads(first, second), max_age=1.0, clock=lambda: now[0],
                        read_behind=False)
    view.match(vcpus(1))[0].hosts(catalog)
    now[0] = 2.0
    return view.match(vcpus(1))[0].hosts(catalog), view._tables


def test_a_read_of_the_same_providers_updates_the_shared_table_instead_of_building_it():
    hosts, tables = _hosts_after_a_second_read(
        snapshot(('a', 8, 0), ('b', 8, 2)), snapshot(('a', 8, 5), ('b', 8, 2)),
        catalog_of('a', 'b'))

    assert [h.used['VCPU'] for h in hosts] == [5, 2]
    assert (tables.built, tables.updated) == (1, 1)


def test_a_read_that_finds_other_providers_builds_the_table_again():
    hosts, tables = _hosts_after_a_second_read(
        snapshot(('a', 8, 0), ('b', 8, 2)), snapshot(('a', 8, 0), ('c', 8, 1)),
        catalog_of('a', 'b', 'c'))

    assert {h.uuid for h in hosts} == {uuid_for('a'), uuid_for('c')}
    assert (tables.built, tables.updated) == (2, 0)


class _ComputeApi:
    """A host source that knows some compute nodes the hosts file does not yet."""

    def __init__(self, catalog: HostCatalog, known: set[str]):
        self.catalog, self.known, self.asked = catalog, known, []

    def look_up(self, provider_uuids):
        from scheduler.catalog.nova_api import HypervisorInfo

        self.asked.append(sorted(provider_uuids))
        self.catalog.add_hypervisors(
            HypervisorInfo(provider_uuid=u, nodename=name, service_host=name)
            for name in self.known for u in provider_uuids if u == uuid_for(name))


def test_the_view_s_hosts_no_source_knows_are_looked_up_once_and_left_out_until_known(
        fake, make_manager):
    from scheduler.catalog.resolver import HostResolver

    for name in ('known', 'fresh', 'orphan'):
        fake.add_compute(name, vcpus=8)
    catalog = catalog_of('known')
    api = _ComputeApi(catalog, {'fresh'})
    manager = make_manager(catalog=catalog)
    manager.hosts.resolver = HostResolver(catalog.unresolved_providers, [api],
                                          exclude_unresolved=True, retry_after=3600)
    # known is full; fresh (a compute the sync has not seen yet) and orphan (a provider
    # no source knows) both fit, and orphan comes first of two equal hosts.
    manager.query.view = ProviderView(
        Reads(snapshot(('known', 8, 8), ('orphan', 8, 0), ('fresh', 8, 0))), max_age=300.0)

    for instance in uuids(2):
        [selections] = select(manager, user_spec(vcpus=1), [instance], return_alternates=True)
        assert [s.service_host for s in selections] == ['fresh']

    # Asked once about both; fresh became known, orphan is asked again only after
    # retry_after, and is never chosen meanwhile.
    assert api.asked == [sorted([uuid_for('fresh'), uuid_for('orphan')])]


def test_a_granular_query_on_a_tree_counts_the_worker_s_claims_since_the_read():
    # Host a has two vGPUs, b one; a claim since the read took b's and one of a's.
    tree = ProviderSnapshot.from_rows(
        [(1, uuid_for('a'), 1, None), (2, uuid_for('a-gpu0'), 1, 1), (3, uuid_for('a-gpu1'), 1, 1),
         (4, uuid_for('b'), 1, None), (5, uuid_for('b-gpu0'), 1, 4)],
        [(row, 'VCPU', 8, 0, 1, 8, 1, 1.0) for row in (1, 4)]
        + [(row, 'VGPU', 1, 0, 1, 1, 1, 1.0) for row in (2, 3, 5)],
        [], [], [])
    query = AllocationCandidatesQuery(groups=[
        RequestGroupQuery(resources={'VCPU': 1}),
        RequestGroupQuery(suffix='1', resources={'VGPU': 1})])
    view = ProviderView(Reads(tree), max_age=60.0)

    found, why = view.match(query)
    assert why is None and hosts_of(found) == {uuid_for('a'), uuid_for('b')}
    view.claimed({uuid_for('b-gpu0'): {'VGPU': 1}, uuid_for('a-gpu0'): {'VGPU': 1}})

    found, why = view.match(query)
    assert why is None and hosts_of(found) == {uuid_for('a')}
    hosts = found.hosts(catalog_of('a', 'b'))
    [row] = hosts.rows.tolist()
    host = hosts.table.host(row)
    assert [dict(r.allocations) for r in host.allocation_candidates] == [
        {uuid_for('a'): {'VCPU': 1}, uuid_for('a-gpu1'): {'VGPU': 1}}]
    assert [dict(r.mappings) for r in host.allocation_candidates] == [
        {'': (uuid_for('a'),), '1': (uuid_for('a-gpu1'),)}]
    view.claimed({uuid_for('a-gpu1'): {'VGPU': 1}})
    assert view.match(query) == (None, NONE_FIT)
