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
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_HEADER = struct.Struct('<qd')


@dataclass(frozen=True)
class Published:
    """What the last read of any worker left: ``change`` counts the reads that found
    a state different from the one before; ``read_at`` is when the last read began
    (None: no read yet)."""

    change: int
    read_at: float | None


class SharedReads:
    """The turn and the last read of the workers of one service (one per worker)."""

    def __init__(self, directory: str):
        self.directory = directory
        self._turn_path = os.path.join(directory, 'turn')
        self._keys_path = os.path.join(directory, 'keys')
        self._fd: int | None = None

    @classmethod
    def create(cls) -> SharedReads:
        """A fresh directory (mode 0700), made before the workers are forked."""
        directory = tempfile.mkdtemp(prefix='scheduler-nova-services-')
        with open(os.path.join(directory, 'turn'), 'wb') as f:
            f.write(_HEADER.pack(0, float('nan')))
        return cls(directory)

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

    def published(self) -> Published:
        """The header (in :meth:`turn` only)."""
        assert self._fd is not None
        change, read_at = _HEADER.unpack(os.pread(self._fd, _HEADER.size, 0))
        return Published(change, None if read_at != read_at else read_at)

    def keys(self) -> Any:
        """The keys of the last change (in :meth:`turn` only); the caller checks them."""
        with open(self._keys_path, encoding='utf-8') as f:
            return json.load(f)

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
