"""Handing the C heap's free memory back to the system.

Objects CPython frees go back to its allocators, which keep the memory for
reuse: glibc's malloc returns only the free space at the very top of its heap,
so the megabytes a worker frees at start-up (reading the hosts file, building
the catalog's indexes) stay resident behind a few blocks that live on. glibc's
``malloc_trim(0)`` gives back every whole free page wherever it is (the blocks
stay where they are; the pages are simply released and faulted in again if
used). A worker calls :func:`release_free_memory` once its start-up is over
(doc/performance.md); elsewhere than glibc (musl, macOS) it does nothing.
"""
from __future__ import annotations

import ctypes


def release_free_memory() -> bool:
    """Give the C heap's free pages back to the system; False where that is not
    possible (a C library without ``malloc_trim``)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the C library the process runs on
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
    return True
