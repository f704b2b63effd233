"""The provider view's reads of Placement's database, made once for all the workers
of a service.

Each worker of a service keeps a provider view of its own, and each read its
changes from Placement's database on its own: four workers sent four times the
reads, and every two seconds each looked at everything (scans of Placement's
largest tables: scheduler/catalog/placement_db.py). At 50,000 providers those
reads took PostgreSQL a quarter of the core that also served the service's
claims (doc/performance.md). With several workers the supervisor starts a reader
of the service's own (scheduler/catalog/provider_reader.py); each of its reads of
changes is published here as the providers it read again (:class:`Changes`), and
a worker whose view wants a newer read asks the reader for one (the protocol of
:class:`~scheduler.catalog.shared_services.SharedReads`: a datagram, answered when
a read begun late enough is published), then takes in every read published
since its last, merged, in one pass over its snapshot (:class:`TakenReads`).

A worker still reads on its own when it has no snapshot yet (its first, whole
read, before it takes calls), when the reader does not answer (gone, or slower
than :data:`WAIT`), when a read it has not taken is no longer kept
(:data:`KEEP`), or when the reader read whole (its first read, or providers
created or deleted) after the worker's own read began: the reads of changes that
follow say what changed since that whole read, not since the worker's. A whole
read is published as a mark that says when it began (:class:`WholeRead`).

The files live in a private directory (mode 0700) the supervisor makes before it
forks: ``turn`` holds the header (the number of the last read published, and when
it began, on ``time.monotonic()``), ``changes-N`` read N.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass

from scheduler import metrics
from scheduler.catalog.provider_changes import Changes
from scheduler.catalog.shared_services import SharedReads
from scheduler.provider_view.snapshot import ProviderSnapshot

LOG = logging.getLogger(__name__)

#: Reads kept for the workers that have not taken them yet: under load the reader
#: publishes a few a second, and a worker takes them as often.
KEEP = 256
#: Seconds a worker waits for the reader's answer before it reads on its own.
WAIT = 2.0


@dataclass(frozen=True)
class WholeRead:
    """The reader read every provider: a read begun at ``began`` (on
    ``time.monotonic()``)."""

    began: float


#: What a read published is: what it read again, or a whole read's mark.
Published = Changes | WholeRead


class SharedProviderReads:
    """The reads published by the service's provider reader (one per worker)."""

    def __init__(self, reads: SharedReads):
        self.reads = reads

    @classmethod
    def create(cls) -> SharedProviderReads:
        """A fresh directory (mode 0700), made before the workers are forked."""
        return cls(SharedReads.create(prefix='scheduler-provider-reads-',
                                      reader='the provider view\'s reader',
                                      without='reads its view on its own'))

    @property
    def directory(self) -> str:
        return self.reads.directory

    def remove(self) -> None:
        self.reads.remove()

    def publish(self, read_at: float, changes: Changes | None) -> int:
        """A read begun at ``read_at``: what it read again, or None for a whole read.
        Its number."""
        published: Published = changes if changes is not None else WholeRead(read_at)
        with self.reads.turn():
            number = self.reads.published().change + 1
            path = self._path(number)
            with open(path + '.new', 'wb') as f:
                pickle.dump(published, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(path + '.new', path)
            self.reads.advance(read_at)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(number - KEEP))
        return number

    def latest(self) -> tuple[int, float | None]:
        """The number of the last read published, and when it began."""
        with self.reads.turn():
            published = self.reads.published()
        return published.change, published.read_at

    def since(self, number: int) -> tuple[int, float | None, list[Published]] | None:
        """Every read published after read ``number``: the last one's number, when it
        began, and the reads in order; None when one of them is no longer kept."""
        latest, read_at = self.latest()
        if latest - number > KEEP:
            return None
        found: list[Published] = []
        for n in range(number + 1, latest + 1):
            try:
                with open(self._path(n), 'rb') as f:
                    # Written by the reader this service forked, in a directory only
                    # its user can enter.
                    found.append(pickle.load(f))  # noqa: S301
            except FileNotFoundError:
                return None
        return latest, read_at, found

    def _path(self, number: int) -> str:
        return os.path.join(self.reads.directory, f'changes-{number}')


#: A worker's own read: what changed since the snapshot given, or all of it.
OwnRead = Callable[[ProviderSnapshot | None], ProviderSnapshot]


class TakenReads:
    """A worker's reads of its view: the service's reader's, when it answers; its
    own otherwise. Called as the view's reader (``read(previous)``)."""

    def __init__(self, own: OwnRead, shared: SharedProviderReads, *, newer_than: float,
                 wait: float = WAIT, clock: Callable[[], float] = time.monotonic):
        self._own = own
        self._shared = shared
        # A read the reader began at most this long before a worker asks serves it:
        # the reader then reads at most about twice within that time, whatever the
        # number of workers asking.
        self._newer_than = newer_than
        self._wait = wait
        self._clock = clock
        # The last snapshot returned, and the number of the last read it holds.
        self._last: ProviderSnapshot | None = None
        self._number: int | None = None
        #: When the read of the last snapshot returned began: everything committed
        #: to Placement's database before then is in it.
        self.began: float | None = None
        # When this worker's last own read began.
        self._own_began: float | None = None
        #: Reads taken from the reader, and read on this worker's own.
        self.taken = 0
        self.own = 0

    def __call__(self, previous: ProviderSnapshot | None) -> ProviderSnapshot:
        asked = self._clock()
        if previous is not None and previous is self._last and self._number is not None:
            snapshot = self._take(previous, asked)
            if snapshot is not None:
                return snapshot
        try:
            # Taken before this read: a read published later may have begun earlier
            # and be older for some providers, which Changes.apply leaves as they
            # are; none is missed.
            self._number, _ = self._shared.latest()
        except OSError as e:
            LOG.warning('the provider view\'s shared reads cannot be looked at (%s)', e)
            self._number = None
        snapshot = self._own(previous)
        self._last, self.began, self._own_began = snapshot, asked, asked
        self.own += 1
        metrics.PROVIDER_VIEW_READS.inc(source='own')
        return snapshot

    def _take(self, previous: ProviderSnapshot, asked: float) -> ProviderSnapshot | None:
        assert self._number is not None
        if not self._shared.reads.ask(asked - self._newer_than, self._wait):
            return None
        try:
            found = self._shared.since(self._number)
        except (OSError, pickle.UnpicklingError, EOFError) as e:
            LOG.warning('the provider view\'s shared reads cannot be taken (%s)', e)
            return None
        if found is None:
            return None
        number, read_at, reads = found
        if any(isinstance(read, WholeRead) and (self._own_began is None
                                                or read.began > self._own_began)
               for read in reads):
            return None
        changes = [read for read in reads if isinstance(read, Changes) and len(read.ids)]
        # Nothing moved: the snapshot stays the same object, and so does what the
        # worker keeps per snapshot (its table of hosts, the search's columns).
        snapshot = (functools.reduce(Changes.then, changes).apply(previous) if changes
                    else previous)
        if snapshot is None:
            return None
        self._last, self._number = snapshot, number
        if read_at is not None:
            # What this worker read on its own may be the later of the two.
            self.began = read_at if self.began is None else max(self.began, read_at)
        self.taken += 1
        metrics.PROVIDER_VIEW_READS.inc(source='shared')
        return snapshot
