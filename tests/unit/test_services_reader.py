"""The service's compute services reader: asked by the workers, it reads once for
every question that came before its read began, publishes the read as a worker's
turn would, and a worker without an answer reads in its turn as before."""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from scheduler.catalog.nova_api import NovaApiError
from scheduler.catalog.services_reader import Publisher
from scheduler.catalog.shared_services import SharedReads


@pytest.fixture
def reads():
    shared = SharedReads.create()
    yield shared
    shared.remove()


class Source:
    """A services source whose reads are counted, and may be held or fail."""

    def __init__(self):
        self.reads = 0
        self.keys = [('compute1', 'enabled', 'up', None, False, None)]
        self.release = threading.Event()
        self.release.set()
        self.entered = threading.Event()
        self.fail = False

    def read_service_keys(self):
        self.entered.set()
        self.release.wait(10)
        self.reads += 1
        if self.fail:
            raise NovaApiError('HTTP 503')
        return {}, [], list(self.keys)


@pytest.fixture
def reader(reads):
    source = Source()
    stop = threading.Event()
    thread = threading.Thread(target=reads.serve, args=(Publisher(source, reads).read, stop))
    thread.start()
    deadline = time.monotonic() + 10
    while not os.path.exists(reads.reader_path) and time.monotonic() < deadline:
        time.sleep(0.01)
    yield source
    stop.set()
    thread.join(10)


def test_a_question_is_answered_by_a_read_begun_after_it_and_published(reads, reader):
    asked_at = time.monotonic()

    assert SharedReads(reads.directory).ask(asked_at, wait=10)

    with reads.turn():
        published = reads.published()
    assert reader.reads == 1 and published.read_at >= asked_at and published.change == 1
    assert [tuple(k) for k in reads.keys()] == reader.keys


def test_a_question_the_last_read_already_answers_sends_no_read(reads, reader):
    asked_at = time.monotonic()
    assert SharedReads(reads.directory).ask(asked_at, wait=10)

    assert SharedReads(reads.directory).ask(asked_at, wait=10)
    assert reader.reads == 1


def test_questions_that_came_during_a_read_share_the_next_one(reads, reader):
    reader.release.clear()
    first = threading.Thread(target=SharedReads(reads.directory).ask,
                             args=(time.monotonic(), 10))
    first.start()
    assert reader.entered.wait(10)      # the first read is under way, held
    asked = time.monotonic()
    askers = [threading.Thread(target=SharedReads(reads.directory).ask, args=(asked, 10))
              for _ in range(3)]
    for t in askers:
        t.start()
    time.sleep(0.2)                     # the three questions wait in the socket
    reader.release.set()
    for t in [first, *askers]:
        t.join(10)

    assert reader.reads == 2


def test_a_read_that_did_not_change_a_state_publishes_no_keys(reads, reader):
    worker = SharedReads(reads.directory)
    assert worker.ask(time.monotonic(), wait=10)
    assert worker.ask(time.monotonic(), wait=10)
    with reads.turn():
        assert reads.published().change == 1
    reader.keys = [('compute1', 'disabled', 'up', 'maintenance', False, None)]
    assert worker.ask(time.monotonic(), wait=10)
    with reads.turn():
        assert reads.published().change == 2
    assert [tuple(k) for k in reads.keys()] == reader.keys


def test_a_failed_read_is_no_answer_and_the_worker_reads_in_its_turn(reads, reader):
    reader.fail = True

    assert not SharedReads(reads.directory).ask(time.monotonic(), wait=10)
    with reads.turn():
        assert reads.published().read_at is None


def test_a_reader_that_is_gone_is_no_answer_at_once(reads):
    # Its socket left behind, no process bound to it.
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(reads.reader_path)
    sock.close()
    started = time.monotonic()

    assert not SharedReads(reads.directory).ask(started, wait=30)
    assert time.monotonic() - started < 5


def test_without_a_reader_the_worker_is_not_kept_waiting(reads):
    assert not SharedReads(reads.directory).ask(time.monotonic(), wait=30)


def test_the_reader_does_not_publish_over_a_newer_read_of_a_worker(reads):
    source = Source()
    publisher = Publisher(source, reads, clock=lambda: 100.0)
    with reads.turn():
        reads.publish(200.0, [['compute1', 'enabled', 'up', None, False, None]])

    assert publisher.read() == 200.0
    with reads.turn():
        assert reads.published().read_at == 200.0 and reads.published().change == 1


def test_a_reader_that_dies_while_a_worker_waits_sends_the_worker_to_its_turn_at_once(reads):
    """A reader killed in the middle of a read never answers; its lock, which the
    kernel gives back, tells the waiting worker so well before ``wait`` is over."""
    import fcntl

    lock = os.open(os.path.join(reads.directory, 'reader.lock'), os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    hung = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    hung.bind(reads.reader_path)        # asked, it never answers
    answered = []
    worker = threading.Thread(
        target=lambda: answered.append(SharedReads(reads.directory).ask(time.monotonic(), 60)))
    started = time.monotonic()
    worker.start()
    time.sleep(0.3)
    assert worker.is_alive()            # waiting for the answer
    os.close(lock)                      # the reader dies
    worker.join(10)
    hung.close()

    assert answered == [False] and time.monotonic() - started < 10
