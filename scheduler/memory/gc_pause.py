"""Pause Python's cyclic garbage collector while a request is served.

A request decodes a Placement answer of thousands of candidates (millions of
small dicts and lists at tens of thousands), tables it and decides. With the
collector running, every burst of allocations triggers collections that walk
the young objects again and again, and the first collection after a pause
walks everything the pause deferred: measured with py-spy on a real worker at
1,000 candidates, a quarter of the request's own time. The request path makes
no reference cycles (``tests/unit/test_host_table.py`` checks the one that
existed, ``tests/unit/test_gc_pause.py`` requests answered from the provider
view, refused claims among them), so its objects are freed by reference
counting when it ends, and a collector enabled again at that point finds
nothing to do. An error kept in a local of a frame it was raised through is
such a cycle (its traceback holds the frame), and the frames hold the
request's view of the hosts: a refused claim did that, the likely cause of a
worker's resident size rising by 50 MB for 5 s at 50,000 providers, until the
hand collection below (doc/performance.md).

Reentrant and thread-safe: concurrent requests share one counter, and the
collector is enabled again only by the last one out (and only if it was
enabled when the first came in). If requests keep overlapping, the young
generations are collected by hand every few seconds, so that cycles made by
other code (libraries, logging) cannot pile up.
"""
from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


#: Under continuous overlapping requests the pause might never end; then the
#: young generations are collected by hand at most this often (seconds).
YOUNG_COLLECTION_INTERVAL = 5.0
_paused_since = 0.0


def pause() -> None:
    """Pause the collector until the matching :func:`resume` (reentrant).

    For a pause that outlives one ``with`` block: a request's objects handed to
    a background thread for freeing (scheduler/release.py) keep the collector
    paused until they are gone, or the first allocation after the request would
    start a collection that walks all of them.
    """
    global _depth, _was_enabled, _paused_since
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            _paused_since = time.monotonic()
            gc.disable()
        _depth += 1


def resume() -> None:
    """End one :func:`pause`; the last one out enables the collector again."""
    global _depth, _paused_since
    collect_young = False
    with _lock:
        _depth -= 1
        if _depth == 0 and _was_enabled:
            gc.enable()
        elif _was_enabled and time.monotonic() - _paused_since > YOUNG_COLLECTION_INTERVAL:
            _paused_since = time.monotonic()
            collect_young = True
    if collect_young:
        # Cycles other code made meanwhile must not pile up while requests
        # keep overlapping.
        gc.collect(1)


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    pause()
    try:
        yield
    finally:
        resume()
