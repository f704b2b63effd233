"""The compute services' state read once for all the workers of a service.

With ``[nova] service_state_max_age`` at its default (0), each request wants a
``GET /os-services`` begun after it arrived. Read by every worker on its own,
that is one read of every compute service per request per worker, and at
10,000 services those reads (decoding, parsing, comparing) cost two thirds of
the service's throughput (doc/performance.md, *What the host-data sources
cost*). A :class:`SharedReads`
lets the workers of one service take turns instead: the worker whose turn it
is reads (one at a time, under an ``flock`` the kernel gives back if the worker
dies), and a worker that waited for the turn and finds a read begun after its
request arrived takes that read, at the cost of a look at a 16-byte header and,
only when some service's state changed, of the read's keys
(:meth:`scheduler.catalog.nova_api.ServicesParser.parse_with_keys`). Keys that
cannot be taken, or a read that cannot be handed over, leave the worker to read
the compute API itself.

The files live in a private directory the supervisor makes before it forks its
workers (:meth:`SharedReads.create`): ``turn`` holds the header (the number of
the last change, and when the last read began on ``time.monotonic()``, a clock
the processes of one machine share) and ``keys`` the last changed read, written
whole and renamed into place before the header names it.

With several workers the supervisor also starts a reader of its own
(scheduler/catalog/services_reader.py), so that the reads leave the workers'
processes: a read in a worker waited for the threads that filter and weigh (its
GIL), and took several times its own CPU in wall time (doc/performance.md). A
worker whose request needs a read asks the reader (:meth:`SharedReads.ask`, a
datagram on the socket ``reader``) and waits for its answer; the reader reads
whenever it is asked, once for every request that asked before its read began,
and publishes as a worker would. A reader that does not answer (gone, which the
``flock`` it holds on ``reader.lock`` for its life tells, or slower than the worker
waits) leaves the worker to its turn, as before.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

LOG = logging.getLogger(__name__)

_HEADER = struct.Struct('<qd')
#: The last check of whether the cell databases hold every compute node: whether they
#: did, and when that check began (``time.monotonic()``); the file is empty until one.
_CHECK = struct.Struct('<?dI')
#: A worker's question to the reader: a read begun at or after this time.
_ASK = struct.Struct('<d')
#: The reader's answer: when the read it made for the question began (NaN: it failed).
_ANSWER = struct.Struct('<d')
#: Seconds between two looks, while a worker waits for an answer, at whether the reader lives.
_ALIVE_CHECK = 0.5


@dataclass(frozen=True)
class Checked:
    """What the last worker to check found: whether the cell databases held every compute
    node the compute API knows, and when that check began; ``failures``: how many checks
    in a row could not be made (then ``held`` is what the last check that was made found,
    and ``at`` when the last one that failed began)."""

    held: bool
    at: float
    failures: int = 0


@dataclass(frozen=True)
class Published:
    """What the last read of any worker left: ``change`` counts the reads that found
    a state different from the one before; ``read_at`` is when the last read began
    (None: no read yet)."""

    change: int
    read_at: float | None


class SharedReads:
    """The turn and the last read of the workers of one service (one per worker)."""

    def __init__(self, directory: str, *, reader: str = 'the compute services reader',
                 without: str = 'reads in its turn'):
        self.directory = directory
        # For the log: who the reader is, and what a worker does when it does not answer.
        self._reader_name, self._without = reader, without
        self._turn_path = os.path.join(directory, 'turn')
        self._keys_path = os.path.join(directory, 'keys')
        self.reader_path = os.path.join(directory, 'reader')
        self._reader_lock_path = os.path.join(directory, 'reader.lock')
        self._check_path = os.path.join(directory, 'cells-checked')
        self._fd: int | None = None
        self._check_fd: int | None = None
        self._socket: socket.socket | None = None   # this worker's, to ask the reader
        self._socket_pid = 0

    @classmethod
    def create(cls, prefix: str = 'scheduler-nova-services-', **kwargs: str) -> SharedReads:
        """A fresh directory (mode 0700), made before the workers are forked
        (``kwargs``: the reader's name and what a worker does without it, for the log)."""
        directory = tempfile.mkdtemp(prefix=prefix)
        with open(os.path.join(directory, 'turn'), 'wb') as f:
            f.write(_HEADER.pack(0, float('nan')))
        return cls(directory, **kwargs)

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """This worker's turn: no other worker reads, publishes or looks meanwhile."""
        if self._fd is None:  # opened in the worker: a descriptor of its own to lock
            self._fd = os.open(self._turn_path, os.O_RDWR)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def check_turn(self) -> Iterator[None]:
        """This worker's turn to check whether the cell databases hold every compute
        node (a lock of its own: a check reads every compute service through the
        compute API, seconds at tens of thousands, and the reads before requests must
        not wait for it)."""
        if self._check_fd is None:  # opened in the worker, as the turn's
            self._check_fd = os.open(self._check_path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._check_fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._check_fd, fcntl.LOCK_UN)

    def checked(self) -> Checked | None:
        """The last check a worker published (in :meth:`check_turn` only); None: none."""
        assert self._check_fd is not None
        data = os.pread(self._check_fd, _CHECK.size, 0)
        if len(data) != _CHECK.size:
            return None
        held, at, failures = _CHECK.unpack(data)
        return None if at != at else Checked(held, at, failures)

    def publish_check(self, checked: Checked) -> None:
        """A check this worker made (in :meth:`check_turn` only)."""
        assert self._check_fd is not None
        os.pwrite(self._check_fd, _CHECK.pack(checked.held, checked.at, checked.failures), 0)

    def published(self) -> Published:
        """The header (in :meth:`turn` only)."""
        assert self._fd is not None
        change, read_at = _HEADER.unpack(os.pread(self._fd, _HEADER.size, 0))
        return Published(change, None if read_at != read_at else read_at)

    def keys(self) -> Any:
        """The keys of the last change (in :meth:`turn` only); the caller checks them."""
        with open(self._keys_path, encoding='utf-8') as f:
            return json.load(f)

    def advance(self, read_at: float) -> Published:
        """A change, begun at ``read_at``, that the caller wrote to files of its own in
        the directory (in :meth:`turn` only)."""
        assert self._fd is not None
        published = Published(self.published().change + 1, read_at)
        os.pwrite(self._fd, _HEADER.pack(published.change, read_at), 0)
        return published

    def publish(self, read_at: float, keys: list | None = None) -> Published:
        """A read begun at ``read_at`` (in :meth:`turn` only); ``keys`` when it changed
        some service's state (or the caller cannot tell it did not)."""
        assert self._fd is not None
        change = self.published().change
        if keys is not None:
            staged = self._keys_path + '.new'
            with open(staged, 'w', encoding='utf-8') as f:
                json.dump(keys, f, separators=(',', ':'))
            os.replace(staged, self._keys_path)
            change += 1
        os.pwrite(self._fd, _HEADER.pack(change, read_at), 0)
        return Published(change, read_at)

    def publish_read(self, read_at: float, keys: list, held_change: int | None,
                     same_keys: bool) -> Published:
        """A read begun at ``read_at`` whose keys are ``keys``, by a reader that holds
        change ``held_change`` (in :meth:`turn` only), ``same_keys`` when they are those
        of that change: other keys are a change, and so may be any when another
        reader's change came since; the keys are written only then."""
        changed = self.published().change != held_change or not same_keys
        return self.publish(read_at, keys if changed else None)

    # ---------------------------------------------------------- the service's reader

    def ask(self, wanted_after: float, wait: float) -> bool:
        """Ask the reader for a read begun at or after ``wanted_after`` and wait up
        to ``wait`` seconds for it; True when it answered with a read (published
        by then), False when there is no reader, it failed, or it did not answer
        in time (the caller then takes its turn as without one). One question at
        a time per worker (the caller's lock)."""
        if not self._reader_alive():
            return False
        try:
            sock = self._own_socket()
            sock.sendto(_ASK.pack(wanted_after), self.reader_path)
            deadline = time.monotonic() + wait
            while (left := deadline - time.monotonic()) > 0:
                # In slices: a reader killed while it reads never answers, and
                # its lock, given back by the kernel, says so.
                sock.settimeout(min(left, _ALIVE_CHECK))
                try:
                    data = sock.recv(_ANSWER.size)
                except TimeoutError:
                    if not self._reader_alive():
                        return False
                    continue
                if len(data) != _ANSWER.size:
                    continue
                (read_at,) = _ANSWER.unpack(data)
                if read_at != read_at:      # NaN: that read failed
                    return False
                if read_at >= wanted_after:  # not an answer to an earlier question
                    return True
            LOG.warning('%s did not answer in %.0fs; this worker %s', self._reader_name,
                        wait, self._without)
        except OSError as e:
            if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                LOG.warning('%s could not be asked (%s); this worker %s', self._reader_name,
                            e, self._without)
        return False

    def _reader_alive(self) -> bool:
        """Whether a reader holds its lock (it does from before it binds its socket
        until it dies)."""
        try:
            fd = os.open(self._reader_lock_path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)   # closing gives back a lock this look may have taken
        return False

    def _own_socket(self) -> socket.socket:
        # Bound in the worker (a path of its own, for the reader's answers); a
        # worker forked again gets a new one.
        if self._socket is None or self._socket_pid != os.getpid():
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            path = os.path.join(self.directory, f'worker-{os.getpid()}-{id(self):x}')
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            sock.bind(path)
            self._socket, self._socket_pid = sock, os.getpid()
        return self._socket

    def serve(self, read: Callable[[], float | None], stop: threading.Event) -> None:
        """The reader's loop until ``stop``: wait for questions, take every one
        that came, and unless the last read already began late enough for all of
        them, ``read()`` (it reads and publishes, and returns when the read began,
        None when it failed); then answer each asker."""
        lock = os.open(self._reader_lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)   # held until this process ends
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.reader_path)
        sock.bind(self.reader_path)
        sock.settimeout(0.5)
        last: float | None = None
        try:
            while not stop.is_set():
                try:
                    asked = [sock.recvfrom(_ASK.size)]
                except TimeoutError:
                    continue
                sock.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    while True:
                        asked.append(sock.recvfrom(_ASK.size))
                sock.settimeout(0.5)
                times = [_ASK.unpack(data)[0] for data, _ in asked if len(data) == _ASK.size]
                if not times:
                    continue
                wanted = max(times)
                if last is None or last < wanted:
                    last = read()
                answer = _ANSWER.pack(float('nan') if last is None else last)
                for _, address in asked:
                    with contextlib.suppress(OSError):   # that worker is gone
                        sock.sendto(answer, address)
        finally:
            sock.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.reader_path)
            os.close(lock)
