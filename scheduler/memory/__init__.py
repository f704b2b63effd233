"""The process's memory policy, in one place: how a request's objects are made,
kept and freed.

A request decodes a Placement answer of thousands of candidates, tables it and
decides; at 1,000 candidates that is tens of thousands of small objects, at
50,000 millions. Three measures keep that cheap (measured in doc/performance.md):

* :func:`paused_gc` — the cyclic collector is paused while a request is served
  (:mod:`.gc_pause`); the request path makes no reference cycles, so reference
  counting frees everything. The manager enters it once per request.
* :class:`DeferredRelease` — the request's large objects are dropped after the
  reply has left, not between decision and answer: by the call's own thread once
  the RPC server has sent it, else by a background thread (:mod:`.release`); the
  collector stays paused until they are gone.
* :func:`release_free_memory` — once start-up is over, and after requests' objects
  were dropped (at most once a second by default: ``[scheduler]
  heap_trim_interval``; sooner when the worker has grown by more than a tenth since
  the last time), the C heap's free pages go back to the system;
  :func:`limit_arenas` — a worker's threads share one malloc arena instead of
  taking one each (:mod:`.heap`).
"""
from scheduler.memory.gc_pause import pause, paused_gc, resume
from scheduler.memory.heap import limit_arenas, release_free_memory
from scheduler.memory.release import DeferredRelease

__all__ = ['DeferredRelease', 'limit_arenas', 'pause', 'paused_gc', 'release_free_memory',
           'resume']
