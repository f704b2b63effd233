"""A requested host or node no source knows yet, looked up before it is refused.

An admin may send a server to a compute that registered seconds ago: a boot
with API 2.74's ``host``/``hypervisor_hostname`` (``requested_destination``),
forced hosts and nodes, the named target of an evacuation or a live migration.
nova-scheduler reads its cell database per request and finds the new node; the
periodic syncs here see it up to ``sync_interval`` seconds later. So before such
a request is refused with "No such host", the names are looked up once in the
sources that can say (:meth:`DestinationSource.look_up_names`): the cell
databases' ``compute_nodes`` by ``host``/``hypervisor_hostname``, then the
compute API's hypervisors by name. What they find is kept until the next sync
replaces it, as for the unknown providers of :mod:`scheduler.catalog.resolver`,
and with the same bounds:

* at most one look-up per request (the caller asks once);
* names no source knew are asked about again only ``retry_after`` seconds
  later: a mistyped host would otherwise cost database reads on every request;
  at most :data:`MAX_REMEMBERED` such names are remembered (the oldest go first);
* requests naming the same compute while it is being looked up wait for that
  look-up instead of repeating it;
* a source that fails logs it and leaves the catalog as it was: the request
  gets the answer it would have had without the look-up.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

LOG = logging.getLogger(__name__)

#: Names that no source knew, remembered for ``retry_after`` at most this many.
MAX_REMEMBERED = 1000

#: (service host in lower case, as Nova matches forced hosts; node name).
_Key = tuple[str | None, str | None]


class DestinationSource(Protocol):
    """A host source that can look compute nodes up by service host and node name."""

    def look_up_names(self, host: str | None, node: str | None) -> None:
        """Apply what the source knows of the nodes on ``host`` named ``node`` (None:
        any) to the catalog; never raises for a source that cannot answer (it logs)."""


class DestinationLookup:
    def __init__(self, known: Callable[[str | None, str | None], bool],
                 sources: Sequence[DestinationSource], *, retry_after: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self._known = known
        self._sources = list(sources)
        self._retry_after = retry_after
        self._clock = clock
        self._lock = threading.Lock()
        # key -> when a look-up last found nothing (oldest first)
        self._missed: dict[_Key, float] = {}
        # key -> set when the look-up under way for it is over
        self._in_flight: dict[_Key, threading.Event] = {}

    def look_up(self, host: str | None, node: str | None) -> bool:
        """Whether the catalog knows a compute node on ``host`` named ``node`` once
        the sources were asked; False at once without sources, and while these
        names are within ``retry_after`` of a look-up that found nothing."""
        if not self._sources or not (host or node):
            return False
        key = (host.lower() if host else None, node)
        with self._lock:
            flight = self._in_flight.get(key)
            mine = flight is None
            if flight is None:
                missed_at = self._missed.get(key)
                if missed_at is not None and self._clock() - missed_at < self._retry_after:
                    return False
                flight = self._in_flight[key] = threading.Event()
        if not mine:
            # Another request is asking about the same names: its answer is ours.
            flight.wait()
            return self._known(host, node)
        found = False
        try:
            found = self._ask(host, node)
        finally:
            with self._lock:
                self._missed.pop(key, None)
                if not found:
                    self._missed[key] = self._clock()
                    while len(self._missed) > MAX_REMEMBERED:
                        del self._missed[next(iter(self._missed))]
                del self._in_flight[key]
            flight.set()
        return found

    def _ask(self, host: str | None, node: str | None) -> bool:
        """Each source in turn until the catalog knows the names (the cell databases
        first: they also say which cell a node is in)."""
        for source in self._sources:
            try:
                source.look_up_names(host, node)
            except Exception:  # noqa: BLE001 - a look-up must never fail the request
                LOG.exception('look-up of the requested host %s node %s in %s failed',
                              host, node, type(source).__name__)
                continue
            if self._known(host, node):
                LOG.info('requested host %s node %s found by %s since the last sync', host,
                         node, type(source).__name__)
                return True
        # Logged when looked up, not on every request that names them.
        LOG.info('requested host %s node %s: no host source knows it (asked again after '
                 '%ss)', host, node, self._retry_after)
        return False
