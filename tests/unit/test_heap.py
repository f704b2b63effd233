"""The C heap: free memory given back after start-up, and the arenas a worker's threads share."""
from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.memory import heap

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='glibc only')
def test_on_glibc_free_memory_is_given_back():
    if not hasattr(ctypes.CDLL(None), 'malloc_trim'):
        pytest.skip('not glibc')

    assert heap.release_free_memory() is True


def test_without_malloc_trim_nothing_happens(monkeypatch):
    class NoTrim:  # musl, macOS: a C library without malloc_trim
        def __init__(self, name):
            pass

    monkeypatch.setattr(heap.ctypes, 'CDLL', NoTrim)
    heap._libc_function.cache_clear()     # looked up once per process
    try:
        assert heap.release_free_memory() is False
    finally:
        heap._libc_function.cache_clear()


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='glibc only')
def test_giving_memory_back_after_each_request_leaves_nothing_for_the_collector():
    # The collector is paused while requests overlap (gc_pause): what a request's
    # path leaves in cycles waits for it. Each CDLL made a class of its own.
    heap.release_free_memory()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(5):
            heap.release_free_memory()
        assert gc.collect() == 0
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


_ARENAS_OF_FOUR_THREADS = r'''
import ctypes, sys, threading
from scheduler.memory import heap
if sys.argv[1] == 'limit':
    assert heap.limit_arenas(1)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
started = threading.Barrier(4)
def allocate():
    started.wait()
    libc.free(libc.malloc(4096))
    started.wait()      # every thread holds its arena until all have allocated
threads = [threading.Thread(target=allocate) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc.malloc_stats()     # glibc: one "Arena N:" paragraph per arena, on stderr
'''


def _arenas_after_four_threads(*args: str, env: dict[str, str] | None = None) -> int:
    done = subprocess.run([sys.executable, '-c', _ARENAS_OF_FOUR_THREADS, *args],
                          capture_output=True, text=True, check=True, cwd=REPO,
                          env={**(env or os.environ), 'PYTHONPATH': str(REPO)})
    return sum(1 for line in done.stderr.splitlines() if line.startswith('Arena '))


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='glibc only')
def test_with_the_arena_limit_threads_share_the_arenas_instead_of_taking_one_each():
    if not hasattr(ctypes.CDLL(None), 'malloc_stats'):
        pytest.skip('not glibc')
    env = {k: v for k, v in os.environ.items() if k != 'MALLOC_ARENA_MAX'}

    assert _arenas_after_four_threads('no limit', env=env) >= 4
    assert _arenas_after_four_threads('limit', env=env) == 1


def test_an_operators_own_arena_setting_stands(monkeypatch):
    monkeypatch.setenv('MALLOC_ARENA_MAX', '8')

    assert heap.limit_arenas() is False
