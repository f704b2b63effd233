"""Compute nodes Placement names before a periodic sync has seen them.

A compute registers its provider in Placement the moment it starts; the
compute API and cell database syncs see it at their next round (60 s by
default). A request that lands in between must still be answered with the
node's real service host and cell: nova-conductor looks the service host up in
its host mappings and fails the boot for a name it does not know (libvirt's
node name is the FQDN, the service host the short name). So, before hosts are
built, every root provider no host source knows is looked up at once in the
sources that can say (:meth:`HostLookup.look_up`): one query per cell database,
one ``GET /os-hypervisors/{uuid}`` per node (a hypervisor's id is its compute
node's uuid, which is the root provider's uuid, from microversion 2.53).

A provider still unknown after that is not answered under a guessed name when
a host source is configured (``[scheduler] unresolved_hosts``): the request
goes on without it, and the next request asks again once ``retry_after``
seconds have passed (a provider left behind by a deleted compute would
otherwise cost a look-up per request).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

LOG = logging.getLogger(__name__)

#: Reason recorded for the providers left out (user-facing: names nothing).
UNRESOLVED_REASON = 'compute node not yet known to the scheduler'


class HostLookup(Protocol):
    """A host source that can look compute nodes up by root provider uuid."""

    def look_up(self, provider_uuids: Sequence[str]) -> None:
        """Apply what the source knows of these nodes to the catalog; never raises
        for a source that cannot answer (it logs)."""


class HostResolver:
    def __init__(self, unresolved: Callable[[Iterable[str]], set[str]],
                 lookups: Sequence[HostLookup], *, exclude_unresolved: bool,
                 retry_after: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self._unresolved = unresolved
        self._lookups = list(lookups)
        self.exclude_unresolved = exclude_unresolved
        self._retry_after = retry_after
        self._clock = clock
        self._lock = threading.Lock()
        # uuid -> when a look-up last failed to find it
        self._missed: dict[str, float] = {}

    def resolve(self, provider_uuids: Iterable[str]) -> set[str]:
        """Look up the unknown ones; returns the uuids still unresolved that must be
        left out of this request (empty when guessing names is allowed)."""
        if not self._lookups and not self.exclude_unresolved:
            # Nothing to ask and nothing to set aside: provider names stand for hosts.
            return set()
        unknown = self._unresolved(provider_uuids)
        if not unknown:
            return unknown
        now = self._clock()
        with self._lock:
            due = [u for u in unknown
                   if u not in self._missed or now - self._missed[u] >= self._retry_after]
        still = unknown
        if due:
            asked = due
            for lookup in self._lookups:
                lookup.look_up(asked)
                asked = sorted(self._unresolved(asked))
                if not asked:
                    break
            still = self._unresolved(unknown)
            missed = still.intersection(due)
            with self._lock:
                for uuid in missed:
                    self._missed[uuid] = now
                for uuid in unknown - still:
                    self._missed.pop(uuid, None)
            if missed:
                # Logged when looked up, not on every request that meets them.
                LOG.info('%d root provider(s) unknown to every host source, e.g. %s%s',
                         len(missed), ', '.join(sorted(missed)[:5] if len(missed) <= 1000
                                                else list(missed)[:5]),
                         '; left out of requests' if self.exclude_unresolved
                         else '; scheduled under their provider names')
        return still if self.exclude_unresolved else set()
