"""One worker's journal file: records appended ahead of the act, synced in groups.

The file is a sequence of lines, each ``<crc32 in hex> <JSON>\\n``: ``{"id": N,
"put": {...}}`` adds record N, ``{"drop": [N, ...]}`` says those records are
over. Replaying it yields the records still live. A line that is torn (the
process died in the middle of writing it), whose checksum does not match or
that is not one of those two shapes is skipped with a WARNING: a damaged
journal costs the records on its damaged lines, never the start of the service.

:meth:`JournalFile.append` returns once the line is written and, with ``fsync``,
on disk: a killed process loses nothing written (the kernel holds it); a
crashed machine loses nothing synced. Concurrent appenders share one
``fdatasync`` (group commit): a thread that finds a sync in flight waits for
the next one that covers its line instead of issuing its own.

Bounded: once the file has grown past ``compact_bytes`` and most of it is
dropped records, the live records are rewritten into a fresh file that
replaces it atomically (written, synced, renamed, directory synced).

One process at a time: a lock file beside the journal is held (``flock``) for
as long as the journal is open, and released by the kernel when its holder
dies, which is what lets the worker that replaces a killed one take over its
journal at once.
"""
from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import pathlib
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

LOG = logging.getLogger(__name__)

Record = Mapping[str, Any]

SUFFIX = '.journal'
_LOCK_SUFFIX = '.lock'
_LINE = re.compile(rb'([0-9a-f]{8}) (.*)\n', re.DOTALL)


class JournalError(Exception):
    """The journal cannot be used (the directory cannot be made or written, or
    another live process holds it)."""


def journal_name(host: str, index: int) -> str:
    """The file name (without suffix) of worker ``index`` of the service ``host``."""
    safe = re.sub(r'[^A-Za-z0-9._-]', '_', host)[:128] or 'scheduler'
    return f'claims-{safe}-{index}'


def worker_index_of(path: pathlib.Path, host: str) -> int | None:
    """The worker index of a journal file of service ``host``; None for any other file."""
    prefix = journal_name(host, 0)[:-1]
    name = path.name
    if not (name.startswith(prefix) and name.endswith(SUFFIX)):
        return None
    index = name[len(prefix):-len(SUFFIX)]
    return int(index) if index.isdigit() else None


def encode_line(entry: Record) -> bytes:
    payload = json.dumps(entry, separators=(',', ':'), sort_keys=True).encode()
    if b'\n' in payload:    # json.dumps escapes newlines in strings; belt and braces
        raise ValueError('a journal line holds no newline')
    return b'%08x %s\n' % (zlib.crc32(payload), payload)


def replay(data: bytes, *, source: str = 'journal') -> tuple[dict[int, dict[str, Any]], int]:
    """The live records in ``data``, and the highest id it mentions (-1: none)."""
    live: dict[int, dict[str, Any]] = {}
    highest = -1
    skipped: list[int] = []
    for number, line in enumerate(data.splitlines(keepends=True), start=1):
        entry = _decode_line(line)
        if entry is None:
            skipped.append(number)
            continue
        if 'put' in entry:
            live[entry['id']] = entry['put']
            highest = max(highest, entry['id'])
        else:
            for gone in entry['drop']:
                live.pop(gone, None)
                highest = max(highest, gone)
    if skipped:
        LOG.warning('%s: skipped %d damaged line(s) (line %s); the records on them are lost',
                    source, len(skipped), ', '.join(map(str, skipped[:10])))
    return live, highest


def _decode_line(line: bytes) -> dict[str, Any] | None:
    match = _LINE.fullmatch(line)
    if match is None:
        return None
    crc, payload = match.groups()
    if int(crc, 16) != zlib.crc32(payload):
        return None
    try:
        entry = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(entry, dict):
        return None
    if set(entry) == {'id', 'put'}:
        if type(entry['id']) is int and entry['id'] >= 0 and isinstance(entry['put'], dict):
            return entry
    elif set(entry) == {'drop'} and isinstance(entry['drop'], list):
        if all(type(i) is int and i >= 0 for i in entry['drop']):
            return entry
    return None


class JournalFile:
    """The journal of one worker: ``directory/name.journal``."""

    def __init__(self, directory: pathlib.Path | str, name: str, *, fsync: bool = True,
                 compact_bytes: int = 1 << 20):
        self.directory = pathlib.Path(directory)
        self.path = self.directory / f'{name}{SUFFIX}'
        self.fsync = fsync
        self.compact_bytes = compact_bytes
        self._cond = threading.Condition()
        self._fd = -1
        self._lock_fd = -1
        self._live: dict[int, bytes] = {}      # id -> its line, for compaction
        self._size = 0
        self._next_id = 0
        self._written = 0     # lines written
        self._synced = 0      # lines known to be on disk
        self._syncing = False

    # ------------------------------------------------------------------ life
    def open(self, *, wait: float = 0.0) -> dict[int, dict[str, Any]]:
        """Take the journal (waiting up to ``wait`` seconds for a live holder to let
        go) and return the records an earlier holder left live."""
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            lock_fd = os.open(self.path.with_suffix(_LOCK_SUFFIX),
                              os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            raise JournalError(f'cannot use the claims journal in {self.directory}: '
                               f'{e.strerror}') from e
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                    os.close(lock_fd)
                    raise JournalError(f'the claims journal {self.path} is held by another '
                                       f'live process') from e
                time.sleep(0.1)
        self._lock_fd = lock_fd
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b''
        except OSError as e:
            self.close()
            raise JournalError(f'cannot read the claims journal {self.path}: '
                               f'{e.strerror}') from e
        live, highest = replay(data, source=str(self.path))
        with self._cond:
            self._next_id = highest + 1
            self._live = {i: encode_line({'id': i, 'put': r}) for i, r in live.items()}
            try:
                self._rewrite_locked()
            except OSError as e:
                self.close()
                raise JournalError(f'cannot write the claims journal {self.path}: '
                                   f'{e.strerror}') from e
        return live

    def close(self) -> None:
        with self._cond:
            while self._syncing:
                self._cond.wait()
            for fd in (self._fd, self._lock_fd):
                if fd >= 0:
                    os.close(fd)     # closing the lock file's descriptor releases the lock
            self._fd = self._lock_fd = -1

    # ------------------------------------------------------------------ records
    def append(self, record: Record) -> int:
        """Write ``record``; returns its id once it is written (and, with fsync, synced).
        Raises :class:`JournalError` when it cannot be (a full or failing disk)."""
        try:
            with self._cond:
                ident = self._next_id
                self._next_id += 1
                line = encode_line({'id': ident, 'put': record})
                self._write_locked(line)
                self._live[ident] = line
                upto = self._written
            self._sync_to(upto)
        except OSError as e:
            raise JournalError(f'cannot write the claims journal {self.path}: '
                               f'{e.strerror or e}') from e
        return ident

    def drop(self, idents: Iterable[int]) -> None:
        """Mark records over; synced like an append, compacted when it is time. Raises
        :class:`JournalError` when it cannot be; the records then stay live."""
        try:
            with self._cond:
                gone = [i for i in idents if i in self._live]
                if not gone:
                    return
                self._write_locked(encode_line({'drop': gone}))
                for ident in gone:
                    del self._live[ident]
                upto = self._written
                if self._size > self.compact_bytes and self._live_bytes() * 2 < self._size:
                    while self._syncing:
                        self._cond.wait()
                    self._rewrite_locked()
            self._sync_to(upto)
        except OSError as e:
            raise JournalError(f'cannot write the claims journal {self.path}: '
                               f'{e.strerror or e}') from e

    def live(self) -> set[int]:
        with self._cond:
            return set(self._live)

    def size(self) -> int:
        with self._cond:
            return self._size

    # ------------------------------------------------------------------ internals
    def _live_bytes(self) -> int:
        return sum(len(line) for line in self._live.values())

    def _write_locked(self, line: bytes) -> None:
        if self._fd < 0:
            raise JournalError(f'the claims journal {self.path} is not open')
        written = os.write(self._fd, line)
        if written != len(line):   # a full disk: the rest of the line would be torn
            raise OSError(errno.ENOSPC, f'short write to {self.path}')
        self._size += written
        self._written += 1

    def _sync_to(self, upto: int) -> None:
        if not self.fsync:
            return
        with self._cond:
            while self._synced < upto:
                if self._syncing:
                    self._cond.wait()
                    continue
                self._syncing, target, fd = True, self._written, self._fd
                self._cond.release()
                try:
                    os.fdatasync(fd)
                finally:
                    self._cond.acquire()
                    self._syncing = False
                    self._cond.notify_all()
                self._synced = max(self._synced, target)

    def _rewrite_locked(self) -> None:
        """The live records into a fresh file that replaces the journal atomically."""
        tmp = self.path.with_suffix(SUFFIX + '.tmp')
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC,
                     0o600)
        try:
            data = b''.join(self._live[i] for i in sorted(self._live))
            if data:
                os.write(fd, data)
            os.fsync(fd)
            os.replace(tmp, self.path)
            _sync_directory(self.directory)
        except BaseException:
            os.close(fd)
            raise
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._size = fd, len(data)
        self._synced = self._written


def _sync_directory(directory: pathlib.Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def take_over(path: pathlib.Path, adopt: Callable[[dict[int, dict[str, Any]]], None]) -> bool:
    """Hand the live records of a journal no live process holds to ``adopt`` (which
    must have made them its own when it returns), then remove the file. False when
    a live process holds it. For the journals of workers a service no longer runs
    (it was restarted with fewer)."""
    name = path.name[:-len(SUFFIX)]
    journal = JournalFile(path.parent, name, fsync=True)
    try:
        live = journal.open()
    except JournalError:
        return False
    try:
        adopt(live)
        path.unlink(missing_ok=True)
        path.with_suffix(_LOCK_SUFFIX).unlink(missing_ok=True)
        _sync_directory(path.parent)
    finally:
        journal.close()
    return True
