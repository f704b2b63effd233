"""The journal's records, by the request that wrote them.

A request's records are written ahead of its claims, while it is served
(:meth:`RequestJournal.serving`, entered by the RPC server around the dispatch
*and* the reply), and dropped together once the reply is handed to the
transport: from then on the claims are the caller's. A record that must outlive
its request (a roll-back Placement refused, retried in the background) is kept
on its own (:meth:`RequestJournal.keep`) and dropped by whoever finishes it.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from scheduler.journal.log import JournalFile, Record


class NotServing(RuntimeError):
    """A record was written ahead outside a request: nothing would ever drop it."""


class RequestJournal:
    def __init__(self, log: JournalFile):
        self.log = log
        self._local = threading.local()

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """One request, served by this thread: its records are dropped when it ends."""
        ticket: list[int] = []
        self._local.ticket = ticket
        try:
            yield
        finally:
            self._local.ticket = None
            if ticket:
                self.log.drop(ticket)

    def write_ahead(self, record: Record) -> int:
        """Record what the request is about to do; returns once it is in the journal."""
        ticket: list[int] | None = getattr(self._local, 'ticket', None)
        if ticket is None:
            raise NotServing('a claim was about to be made outside a request')
        ident = self.log.append(record)
        ticket.append(ident)
        return ident

    def keep(self, record: Record) -> int:
        """Record something that outlives the request; :meth:`drop` ends it."""
        return self.log.append(record)

    def drop(self, idents: Iterable[int]) -> None:
        self.log.drop(idents)

    def close(self) -> None:
        self.log.close()


def live_records(journal: RequestJournal | None) -> int:
    """How many records the journal holds (0 without one), for the metrics."""
    return len(journal.log.live()) if journal is not None else 0


Records = dict[int, dict[str, Any]]
