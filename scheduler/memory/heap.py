"""The C heap: how many arenas a worker's threads share, and handing free memory
back to the system.

Objects CPython frees go back to its allocators, which keep the memory for
reuse: glibc's malloc returns only the free space at the very top of its heap,
so the megabytes a worker frees at start-up (reading the hosts file, building
the catalog's indexes) stay resident behind a few blocks that live on. glibc's
``malloc_trim(0)`` gives back every whole free page wherever it is (the blocks
stay where they are; the pages are simply released and faulted in again if
used). A worker calls :func:`release_free_memory` once its start-up is over
(doc/performance.md).

glibc also gives each thread that allocates its own arena (up to eight per
core), and memory freed in one arena is reused only by the threads of that
arena. oslo.messaging serves calls on a pool of threads, so every thread that
ever served a request kept a heap as large as the largest request it served:
measured on a worker deciding from the provider view at 50,000 providers, its
resident size grew by about 4 MB a call, from 216 MB to 456 MB after 60
sequential calls, where one arena stays at 231 MB. A worker therefore limits
its threads to one arena (:func:`limit_arenas`) before it starts any; they mostly
wait for each other on the GIL anyway. Elsewhere than glibc (musl, macOS) both
do nothing.
"""
from __future__ import annotations

import ctypes
import functools
import mmap
import os
from typing import Any

#: glibc's mallopt parameter for the most arenas it creates (malloc.h: M_ARENA_MAX).
_M_ARENA_MAX = -8
#: Arenas a worker's threads share. Two let the provider view's reader thread keep
#: a heap of its own: 20 MB more at 50,000 providers (251 MB against 231 MB after
#: 40 calls).
WORKER_ARENAS = 1


@functools.cache
def _libc_function(name: str, argtypes: tuple[Any, ...], restype: Any) -> Any:
    """``name`` of the C library the process runs on, typed; None without it. Looked
    up once: each ``CDLL`` makes a class of its own, a cycle only the collector
    frees, and a worker gives its free memory back after its requests, while the
    collector is paused for the next ones (:mod:`.gc_pause`)."""
    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = list(argtypes)
    function.restype = restype
    return function


def limit_arenas(arenas: int = WORKER_ARENAS) -> bool:
    """At most ``arenas`` malloc arenas for this process's threads from now on; False
    where that is not possible, or when the operator set ``MALLOC_ARENA_MAX``
    (their setting stands)."""
    if 'MALLOC_ARENA_MAX' in os.environ:
        return False
    mallopt = _libc_function('mallopt', (ctypes.c_int, ctypes.c_int), ctypes.c_int)
    if mallopt is None:
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))


def release_free_memory() -> bool:
    """Give the C heap's free pages back to the system; False where that is not
    possible (a C library without ``malloc_trim``)."""
    trim = _libc_function('malloc_trim', (ctypes.c_size_t,), ctypes.c_int)
    if trim is None:
        return False
    trim(0)
    return True


def resident_bytes() -> int | None:
    """This process's resident size in bytes; None where the system does not say
    (Linux's ``/proc/self/statm``: about 20 µs a read)."""
    try:
        with open('/proc/self/statm', 'rb') as statm:
            pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * mmap.PAGESIZE
