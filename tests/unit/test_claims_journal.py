"""The claims journal on disk: what survives the process, what is skipped, what is bounded.

Real files in a temporary directory, real ``flock``s and, where a process must
die, a real forked process that exits without closing anything.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
import time
from unittest import mock

import pytest

from placement_client.models import AllocationRequest, ConsumerAllocations
from scheduler import exceptions as exc
from scheduler import metrics
from scheduler.journal import log as journal_log
from scheduler.journal.log import JournalError, JournalFile, journal_name, take_over
from scheduler.journal.requests import NotServing, RequestJournal
from scheduler.journal.worker import open_worker_journal
from scheduler.pipeline.claim_state import (
    BadRecord,
    Claim,
    Recorded,
    claim_from_record,
    claim_record,
)
from scheduler.pipeline.claimer import Claimer, PendingCleanups
from scheduler.pipeline.recovery import LANDING_WINDOW, write_ahead
from scheduler.rpc.server import SchedulerRPCServer
from tests.unit.fake_placement import FakePlacement, unavailable

RP = '4a7c4bb4-4c5e-4d29-9d3e-8f3b5f6d2a10'
INSTANCE = '6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e8b01'


def record(n: int) -> dict:
    return {'consumer': f'consumer-{n}', 'allocations': {RP: {'VCPU': n}}}


@pytest.fixture
def journal(tmp_path):
    opened = JournalFile(tmp_path, 'claims-test-0')
    assert opened.open() == {}
    yield opened
    opened.close()


def reopen(tmp_path, name='claims-test-0') -> dict:
    again = JournalFile(tmp_path, name)
    try:
        return again.open()
    finally:
        again.close()


def test_records_appended_outlive_the_journal_and_dropped_ones_do_not(tmp_path, journal):
    first, second, third = (journal.append(record(n)) for n in (1, 2, 3))
    journal.drop([second])
    journal.close()

    assert reopen(tmp_path) == {first: record(1), third: record(3)}


def test_ids_keep_growing_across_holders_so_an_old_drop_never_ends_a_new_record(tmp_path,
                                                                                 journal):
    gone = journal.append(record(1))
    journal.drop([gone])
    journal.close()
    again = JournalFile(tmp_path, 'claims-test-0')
    again.open()
    assert again.append(record(2)) > gone
    again.close()


def test_a_torn_last_line_and_a_damaged_line_are_skipped_with_a_warning(tmp_path, journal,
                                                                        caplog):
    kept = journal.append(record(1))
    damaged = journal.append(record(2))
    journal.close()
    path = tmp_path / 'claims-test-0.journal'
    lines = path.read_bytes().splitlines(keepends=True)
    # A flipped byte in the second record, and a third record cut off mid-line (the
    # process died while writing it).
    lines[1] = lines[1].replace(b'"VCPU":2', b'"VCPU":7')
    torn = journal_log.encode_line({'id': damaged + 1, 'put': record(3)})[:-9]
    path.write_bytes(b''.join(lines) + torn)

    with caplog.at_level(logging.WARNING, logger='scheduler.journal.log'):
        live = reopen(tmp_path)

    assert live == {kept: record(1)}
    assert 'skipped 2 damaged line(s) (line 2, 3)' in caplog.text


@pytest.mark.parametrize('line', [
    b'not a journal line\n',
    b'00000000 {"id": 1, "put": {}}\n',                                # checksum wrong
    journal_log.encode_line({'id': -1, 'put': {}}),                    # negative id
    journal_log.encode_line({'id': 1, 'put': [], 'extra': 1}),         # unknown shape
    journal_log.encode_line({'drop': ['1']}),                          # ids are numbers
    journal_log.encode_line({'id': True, 'put': {}}),                  # a bool is no id
])
def test_lines_that_are_not_records_are_skipped(line):
    live, highest = journal_log.replay(line)
    assert live == {} and highest == -1


def test_a_second_live_holder_is_refused_until_the_first_lets_go(tmp_path, journal):
    with pytest.raises(JournalError, match='held by another live process'):
        JournalFile(tmp_path, 'claims-test-0').open(wait=0.2)
    journal.close()
    assert reopen(tmp_path) == {}


def test_a_killed_holders_records_are_there_and_its_lock_is_gone(tmp_path):
    pid = os.fork()
    if pid == 0:   # the worker: writes ahead, then dies without closing anything
        child = JournalFile(tmp_path, 'claims-test-0')
        child.open()
        child.append(record(1))
        os.kill(os.getpid(), 9)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9

    assert list(reopen(tmp_path).values()) == [record(1)]


def test_the_file_is_compacted_once_mostly_dropped_and_live_records_survive(tmp_path):
    journal = JournalFile(tmp_path, 'claims-test-0', fsync=False, compact_bytes=4096)
    journal.open()
    survivor = journal.append(record(0))
    for n in range(1, 500):
        journal.drop([journal.append(record(n))])
    size = journal.size()
    journal.close()

    assert size <= 4096 + 2 * len(journal_log.encode_line({'id': 500, 'put': record(500)}))
    assert reopen(tmp_path) == {survivor: record(0)}


def test_concurrent_appenders_share_syncs_and_none_returns_before_its_line_is_synced(
        tmp_path, monkeypatch):
    journal = JournalFile(tmp_path, 'claims-test-0', fsync=True)
    journal.open()
    synced_bytes: list[int] = []
    real = os.fdatasync

    def slow_sync(fd: int) -> None:
        time.sleep(0.02)      # a disk that takes its time: appenders pile up meanwhile
        synced_bytes.append(os.fstat(fd).st_size)
        real(fd)
    monkeypatch.setattr(journal_log.os, 'fdatasync', slow_sync)
    late: list[int] = []     # appenders that returned before their line was synced
    lock = threading.Lock()

    def appender(n: int) -> None:
        ident = journal.append(record(n))
        line = journal_log.encode_line({'id': ident, 'put': record(n)})
        end = (tmp_path / 'claims-test-0.journal').read_bytes().index(line) + len(line)
        with lock:
            if not synced_bytes or max(synced_bytes) < end:
                late.append(n)

    threads = [threading.Thread(target=appender, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    journal.close()

    assert late == []
    assert len(synced_bytes) < 16, 'each append paid for its own sync'


def test_a_request_drops_what_it_wrote_ahead_when_it_ends_and_keeps_what_it_kept(tmp_path,
                                                                               journal):
    requests = RequestJournal(journal)
    with requests.serving():
        requests.write_ahead(record(1))
        kept = requests.keep(record(2))
        assert journal.live() == {0, kept}
    assert journal.live() == {kept}


def test_a_request_that_fails_still_drops_its_records(journal):
    requests = RequestJournal(journal)
    with pytest.raises(RuntimeError), requests.serving():
        requests.write_ahead(record(1))
        raise RuntimeError('the request failed')
    assert journal.live() == set()


def test_writing_ahead_outside_a_request_is_refused(journal):
    with pytest.raises(NotServing):
        RequestJournal(journal).write_ahead(record(1))


def test_each_thread_serves_its_own_request(journal):
    requests = RequestJournal(journal)
    inside, leave = threading.Event(), threading.Event()
    theirs: list[int] = []

    def other() -> None:
        with requests.serving():
            theirs.append(requests.write_ahead(record(2)))
            inside.set()
            leave.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(5)
    with requests.serving():
        requests.write_ahead(record(1))
    # Ending this thread's request ended its own record, not the other's.
    assert journal.live() == set(theirs)
    leave.set()
    thread.join()
    assert journal.live() == set()


def test_worker_zero_takes_over_the_journals_of_workers_the_service_no_longer_runs(tmp_path):
    # A service of three workers stopped with records in workers 1 and 2's journals,
    # restarted with two.
    for index in (1, 2):
        old = JournalFile(tmp_path, journal_name('sched-a', index))
        old.open()
        old.append(record(index))
        old.close()
    other_service = JournalFile(tmp_path, journal_name('sched-b', 5))
    other_service.open()
    other_service.append(record(9))
    other_service.close()

    zero, records = open_worker_journal(str(tmp_path), host='sched-a', index=0, workers=2,
                                        fsync=True, compact_bytes=1 << 20, lock_wait=0)
    try:
        assert sorted(r['consumer'] for r in records.values()) == ['consumer-2']
        assert set(records) == zero.log.live()
    finally:
        zero.close()
    names = sorted(p.name for p in tmp_path.glob('*.journal'))
    assert names == [journal_name('sched-a', 0) + '.journal',
                     journal_name('sched-a', 1) + '.journal',
                     journal_name('sched-b', 5) + '.journal']


def test_a_journal_a_live_process_holds_is_not_taken_over(tmp_path):
    held = JournalFile(tmp_path, journal_name('sched-a', 3))
    held.open()
    held.append(record(3))
    try:
        assert take_over(held.path, lambda live: pytest.fail('taken')) is False
    finally:
        held.close()


def test_a_directory_that_cannot_be_made_is_a_clear_error(tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('')
    with pytest.raises(JournalError, match='cannot use the claims journal in'):
        JournalFile(blocker / 'journal', 'claims-test-0').open()


@pytest.mark.parametrize('previous', [None, ConsumerAllocations(
    INSTANCE, {RP: {'VCPU': 2}}, consumer_generation=4, project_id='p', user_id='u')])
def test_a_claim_reads_back_from_its_record_as_it_was_written(previous):
    claim = Claim(INSTANCE, {RP: {'VCPU': 2, 'MEMORY_MB': 512}}, 5, 'p', 'u',
                  previous=previous)
    assert claim_from_record(claim_record(claim, 'req-1', at=5.0)) == Recorded(claim, 'req-1',
                                                                                5.0)


GOOD = {'at': 1.0, 'consumer': INSTANCE, 'allocations': {RP: {'VCPU': 2}}, 'generation': 1,
        'project_id': None, 'user_id': None}


@pytest.mark.parametrize('bad', [
    {},
    {**GOOD, 'allocations': {RP: {'VCPU': '2'}}},
    {**GOOD, 'allocations': []},
    {**GOOD, 'allocations': {RP: 3}},
    {**GOOD, 'generation': None},
    {**GOOD, 'at': 'yesterday'},
    {key: value for key, value in GOOD.items() if key != 'at'},
])
def test_a_record_that_is_not_a_claim_is_refused(bad):
    assert claim_from_record(GOOD).claim.consumer_uuid == INSTANCE
    with pytest.raises(BadRecord):
        claim_from_record(bad)


def test_recovered_claims_older_than_max_age_are_dropped_not_given_back(tmp_path, journal):
    fake = FakePlacement()
    cn = fake.add_compute('cn1', vcpus=4, ram_mb=4096, disk_gb=40)
    fresh, stale = INSTANCE, '6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e8b02'
    requests = RequestJournal(journal)
    records = {}
    for instance, at in ((fresh, 1000.0), (stale, 100.0)):
        fake.allocate(instance, {cn: {'VCPU': 1}})
        made = Claim(instance, {cn: {'VCPU': 1}}, fake.consumers[instance].generation, 'p', 'u')
        record = claim_record(made, 'req-dead', at=at)
        records[requests.keep(record)] = record
    expired = metrics.RECOVERED_CLAIMS.value(outcome='expired')

    cleanups = PendingCleanups(fake, interval=3600, journal=requests, now=lambda: 1001.0)
    cleanups.recover(records, max_age=600.0)
    assert cleanups.pending() == {fresh}      # the stale one is dropped at once
    cleanups.retry_once()
    cleanups.stop()

    assert set(fake.holdings()) == {stale}
    assert journal.live() == set()
    assert metrics.RECOVERED_CLAIMS.value(outcome='expired') == expired + 1


class Incoming:
    """An incoming call as oslo.messaging's server sees it; ``on_reply`` is told each reply."""

    message = {'method': 'select_destinations'}
    msg_id = 'm-1'

    def __init__(self, on_reply):
        self.on_reply = on_reply

    def acknowledge(self) -> None:
        pass

    def reply(self, reply=None, failure=None) -> None:
        self.on_reply(reply)


def serve(requests: RequestJournal, dispatch, on_reply) -> None:
    """One call through the journaled server's _process_incoming, and nothing else of
    it: no transport, no executor."""
    class Dispatcher:
        def dispatch(self, incoming):
            return dispatch(incoming)

    server = SchedulerRPCServer.__new__(SchedulerRPCServer)
    server._journal, server.dispatcher, server.conf = requests, Dispatcher(), None
    with mock.patch('oslo_messaging.rpc.server.tracing.trace_receive'):
        server._process_incoming([Incoming(on_reply)])


def test_the_rpc_server_drops_a_requests_records_before_it_hands_over_the_reply(journal):
    requests = RequestJournal(journal)
    live_at_reply: list[set[int]] = []

    def dispatch(incoming):
        assert incoming.message == Incoming.message   # the message itself, behind the hook
        requests.write_ahead(record(1))
        return ['answer']

    serve(requests, dispatch, lambda reply: live_at_reply.append(journal.live()))

    assert live_at_reply == [set()]   # gone before the reply left
    assert journal.live() == set()


def test_the_reply_names_the_consumers_whose_claims_become_the_callers(journal, caplog):
    # What tells a caller's timeout on a reply a kill lost from a leak (the chaos drill).
    requests = RequestJournal(journal)
    logged_at_reply: list[str] = []

    def dispatch(incoming):
        requests.write_ahead(record(1))
        requests.write_ahead(record(2))
        requests.write_ahead(record(1))     # a second try for the same consumer
        return ['answer']

    with caplog.at_level(logging.DEBUG, logger='scheduler.rpc.server'):
        serve(requests, dispatch, lambda reply: logged_at_reply.append(caplog.text))

    assert ("replying: the claims of consumer-1, consumer-2 are the caller's from now on"
            in logged_at_reply[0])


def full_disk(monkeypatch) -> None:
    def refuse(fd: int, data: bytes) -> int:
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(journal_log.os, 'write', refuse)


def test_a_record_that_cannot_be_written_is_a_journal_error_and_not_live(journal,
                                                                        monkeypatch):
    full_disk(monkeypatch)
    with pytest.raises(JournalError, match='No space left on device'):
        journal.append(record(1))
    assert journal.live() == set()


def test_records_whose_drop_cannot_be_written_stay_live(journal, monkeypatch):
    kept = journal.append(record(1))
    full_disk(monkeypatch)
    with pytest.raises(JournalError):
        journal.drop([kept])
    assert journal.live() == {kept}


def test_a_claim_that_cannot_be_journaled_is_not_made_and_says_so_without_the_path(
        tmp_path, journal, monkeypatch):
    fake = FakePlacement()
    cn = fake.add_compute('cn1', vcpus=4, ram_mb=4096, disk_gb=40)
    requests = RequestJournal(journal)
    claimer = Claimer(fake, write_ahead=functools.partial(write_ahead, requests))
    full_disk(monkeypatch)

    with requests.serving(), pytest.raises(exc.NoValidHost) as refused:
        claimer.claim(INSTANCE, AllocationRequest(allocations={cn: {'VCPU': 1}}),
                      project_id='p', user_id='u', microversion='1.36', request_id='req-1')

    assert fake.calls_to('put_allocations') == []
    assert 'claims journal' in refused.value.reason
    assert str(tmp_path) not in refused.value.reason    # the log has the path, not the user


def test_a_reply_whose_records_cannot_be_dropped_is_not_sent(journal, monkeypatch):
    requests = RequestJournal(journal)
    replies: list[object] = []

    def dispatch(incoming):
        requests.write_ahead(record(1))
        full_disk(monkeypatch)
        return ['answer']

    serve(requests, dispatch, replies.append)

    # The caller is not told of claims the next worker to read the journal gives back.
    assert replies == []
    assert len(journal.live()) == 1


def test_an_undo_left_for_later_is_retried_even_when_it_cannot_be_journaled(journal,
                                                                          monkeypatch):
    fake = FakePlacement()
    cn = fake.add_compute('cn1', vcpus=4, ram_mb=4096, disk_gb=40)
    fake.allocate(INSTANCE, {cn: {'VCPU': 1}})
    made = Claim(INSTANCE, {cn: {'VCPU': 1}}, fake.consumers[INSTANCE].generation, 'p', 'u')
    fake.script('delete_allocations', unavailable('DELETE /allocations'))
    cleanups = PendingCleanups(fake, interval=3600, journal=RequestJournal(journal))
    full_disk(monkeypatch)

    assert cleanups.undo_now_or_later([made], request_id='req-1') == [INSTANCE]
    assert cleanups.pending() == {INSTANCE}       # in memory, retried by this process

    cleanups.retry_once()
    cleanups.stop()
    assert fake.holdings() == {}


def recovering_a_claim_journaled_at_1000(journal, now: list[float]
                                        ) -> tuple[FakePlacement, str, PendingCleanups]:
    """A worker's journal holds a claim made at t=1000 that Placement does not show
    (yet); its replacement has just started recovering it, at ``now[0]``."""
    fake = FakePlacement()
    cn = fake.add_compute('cn1', vcpus=4, ram_mb=4096, disk_gb=40)
    requests = RequestJournal(journal)
    record = claim_record(Claim(INSTANCE, {cn: {'VCPU': 1}}, 1, 'p', 'u'), 'req-dead',
                          at=1000.0)
    records = {requests.keep(record): record}
    cleanups = PendingCleanups(fake, interval=3600, journal=requests, now=lambda: now[0])
    cleanups.recover(records)
    return fake, cn, cleanups


def test_a_recovered_claim_whose_put_lands_after_the_first_look_is_given_back(journal):
    # The worker was killed with its PUT inside Placement; its replacement looks
    # before Placement has finished it.
    now = [1000.5]
    fake, cn, cleanups = recovering_a_claim_journaled_at_1000(journal, now)

    cleanups.retry_once()
    assert cleanups.pending() == {INSTANCE}     # nothing to see yet: look again
    fake.allocate(INSTANCE, {cn: {'VCPU': 1}})
    now[0] = 1005.0
    cleanups.retry_once()
    cleanups.stop()

    assert fake.holdings() == {}
    assert journal.live() == set()


def test_a_recovered_claim_that_never_lands_is_left_once_the_landing_window_has_passed(
        journal):
    now = [1000.0]
    _, _, cleanups = recovering_a_claim_journaled_at_1000(journal, now)
    left = metrics.RECOVERED_CLAIMS.value(outcome='left')

    now[0] = 1000.0 + LANDING_WINDOW - 1
    cleanups.retry_once()
    assert cleanups.pending() == {INSTANCE} and journal.live() != set()

    now[0] = 1000.0 + LANDING_WINDOW
    cleanups.retry_once()
    cleanups.stop()

    assert cleanups.pending() == set()
    assert journal.live() == set()
    assert metrics.RECOVERED_CLAIMS.value(outcome='left') == left + 1
