"""The journal's records, by the request that wrote them.

A request's records are written ahead of its claims, while it is served
(:meth:`RequestJournal.serving`, entered by the RPC server around the dispatch
*and* the reply), and dropped together as the reply is handed to the transport
(just before: ``scheduler/rpc/server.py`` says why): from then on the claims are
the caller's. A record that must outlive its request (a roll-back Placement
refused, retried in the background) is kept on its own
(:meth:`RequestJournal.keep`) and dropped by whoever finishes it.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator

from scheduler.journal.log import JournalFile, Record


class NotServing(RuntimeError):
    """A record was written ahead outside a request: nothing would ever drop it."""


class Request:
    """The records one request wrote ahead."""

    def __init__(self, log: JournalFile):
        self._log = log
        self.idents: list[int] = []
        #: the consumers of the records, in the order written
        self.consumers: list[str] = []
        self.ended = False

    def end(self) -> None:
        """Drop the request's records (once; it writes no more after this)."""
        if self.ended:
            return
        self.ended = True
        if self.idents:
            self._log.drop(self.idents)


class RequestJournal:
    def __init__(self, log: JournalFile):
        self.log = log
        self._local = threading.local()

    @contextlib.contextmanager
    def serving(self) -> Iterator[Request]:
        """One request, served by this thread: its records are dropped when it ends
        (:meth:`Request.end`, or at the latest when the block exits)."""
        request = Request(self.log)
        self._local.ticket = request
        try:
            yield request
        finally:
            self._local.ticket = None
            request.end()

    def write_ahead(self, record: Record) -> int:
        """Record what the request is about to do; returns once it is in the journal."""
        request: Request | None = getattr(self._local, 'ticket', None)
        if request is None or request.ended:
            raise NotServing('a claim was about to be made outside a request')
        ident = self.log.append(record)
        request.idents.append(ident)
        consumer = record.get('consumer')
        if isinstance(consumer, str) and consumer not in request.consumers:
            request.consumers.append(consumer)
        return ident

    def keep(self, record: Record) -> int:
        """Record something that outlives the request; :meth:`drop` ends it."""
        return self.log.append(record)

    def drop(self, idents: Iterable[int]) -> None:
        self.log.drop(idents)

    def close(self) -> None:
        self.log.close()

