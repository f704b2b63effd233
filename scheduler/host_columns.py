"""A host table's column of a resource class that few of its hosts have.

A provider view's table holds a capacity and a usage column per resource class
for every host of the cloud, and most classes besides VCPU, MEMORY_MB and
DISK_GB sit on a few hosts' children: PCPU on the NUMA hosts, a PCI class on
the hosts with that device, VGPU on the GPU hosts, bandwidth on some NICs. As
dense int64 columns those were zeros for the most part, and the largest part
of a worker's own state that grew with the cloud (doc/performance.md, *Where a
worker's memory goes*); each read of changes made new usage columns of the
classes that moved, every one the size of the cloud. A :class:`SparseColumn`
holds only the hosts that have the class: their rows and values. A read of some
rows (the filters' and weighers' rows) takes their values, through a whole column
made and dropped when they are many; a plugin that asks for the whole column gets
one kept in that request's own table.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

#: A class held by at most this share of the hosts is kept as a SparseColumn: a
#: held host then costs 12 bytes (its row and value) against 8 for every host.
SPARSE_SHARE = 0.25


@dataclass(frozen=True)
class SparseColumn:
    """``length`` values, zero but at ``rows`` (ascending, each once), which hold
    ``values`` (int64): what a dense column would hold, without its zeros."""

    rows: np.ndarray
    values: np.ndarray
    length: int

    def __len__(self) -> int:
        return self.length

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The values at ``rows`` (any order, repeats allowed), as a new int64 array."""
        found = np.zeros(len(rows), dtype=np.int64)
        if not len(self.rows) or not len(rows):
            return found
        if len(rows) >= self.length // 16:
            # Many of the hosts (a weigher reading every host that passed the
            # filters): a whole column made and dropped took a fifth of the time of
            # a search (0.05 against 0.23 ms at 48,000 rows of 50,000, 9,000 held).
            return self.dense()[rows]
        add_at_keys(found, rows, self.rows, self.values)
        return found

    def at(self, row: int) -> int:
        """The value at ``row``."""
        # bisect on the rows' own buffer: numpy's call for one row costs more than the search.
        rows = self.rows.data
        at = bisect.bisect_left(rows, row)
        return int(self.values[at]) if at < len(rows) and rows[at] == row else 0

    def dense(self) -> np.ndarray:
        """Every row's value, as a new int64 array."""
        column = np.zeros(self.length, dtype=np.int64)
        column[self.rows] = self.values
        return column


def add_at_keys(into: np.ndarray, rows: np.ndarray, keys: np.ndarray,
                amounts: np.ndarray) -> None:
    """Add ``amounts`` (aligned with ``keys``: rows ascending, each once) to ``into``
    (aligned with ``rows``) wherever ``rows`` names one of ``keys``."""
    if not len(keys) or not len(rows):
        return
    if len(rows) > len(keys) and bool(np.all(rows[1:] > rows[:-1])):
        # Rows ascending, each once (the hosts that passed the filters, which the
        # weighers read): the few keys looked up among them, not every row among
        # the keys, a tenth of the time at 50,000 rows and 500 keys.
        at = np.searchsorted(rows, keys)
        inside = at < len(rows)
        at, keys, amounts = at[inside], keys[inside], amounts[inside]
        hit = rows[at] == keys
        into[at[hit]] += amounts[hit]
        return
    at = np.minimum(np.searchsorted(keys, rows), len(keys) - 1)
    hit = keys[at] == rows
    into[hit] += amounts[at[hit]]


#: A host table's capacity or usage column of one class.
ClassColumn: TypeAlias = np.ndarray | SparseColumn


def summed(length: int, rows: np.ndarray, values: np.ndarray, *,
           once: bool = False) -> ClassColumn:
    """``values`` summed per row of ``rows`` (table rows, any order) into a column of
    ``length`` rows: a :class:`SparseColumn` when at most :data:`SPARSE_SHARE` of
    the rows are named, else a dense int64 array. ``once``: each row is named once
    at most (nothing to sum)."""
    rows = np.asarray(rows, dtype=np.intp)
    values = np.asarray(values, dtype=np.int64)
    held = np.zeros(length, dtype=bool)
    held[rows] = True
    count = int(np.count_nonzero(held))
    if count > SPARSE_SHARE * length:
        column = np.zeros(length, dtype=np.int64)
        if once:
            column[rows] = values
        else:
            np.add.at(column, rows, values)
        return column
    where = np.flatnonzero(held)
    sums = np.zeros(count, dtype=np.int64)
    at = np.searchsorted(where, rows)
    if once:
        sums[at] = values
    else:
        np.add.at(sums, at, values)
    return SparseColumn(where.astype(np.int32), sums, length)
