"""Giving the C heap's free memory back to the system after start-up."""
from __future__ import annotations

import ctypes
import sys

import pytest

from scheduler.memory import heap


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

    assert heap.release_free_memory() is False
