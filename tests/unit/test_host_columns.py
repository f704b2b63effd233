"""A class few hosts hold is kept as a sparse column, which reads as the dense column
of the same values would (scheduler/host_columns.py)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler.host_columns import SPARSE_SHARE, SparseColumn, summed


def dense_sum(length: int, rows: list[int], values: list[int]) -> np.ndarray:
    column = np.zeros(length, dtype=np.int64)
    for row, value in zip(rows, values, strict=True):
        column[row] += value
    return column


@pytest.mark.parametrize('seed', range(100))
def test_summed_rows_read_as_the_dense_sum_of_the_same_values(seed):
    rng = random.Random(seed)
    length = rng.randint(0, 800)
    # Few held (a PCI class), or any share of the rows.
    count = rng.choice((rng.randint(0, length // 40), rng.randint(0, length)))
    held = rng.sample(range(length), count)
    once = rng.random() < 0.4
    # A tree's providers add to its row (nested), or each row once (flat); values up
    # to Placement's largest capacities, and sums past 32 bits.
    rows = held if once else [rng.choice(held) for _ in range(rng.randint(0, 3 * len(held)))]
    rng.shuffle(rows)
    values = [rng.choice((0, 1, 7, 2**31 - 1, rng.randrange(2**31))) for _ in rows]
    expected = dense_sum(length, rows, values)

    column = summed(length, np.array(rows, dtype=np.intp), np.array(values, dtype=np.int64),
                    once=once)

    sparse = len(set(rows)) <= SPARSE_SHARE * length
    assert isinstance(column, SparseColumn) == sparse
    assert len(column) == length
    dense = column.dense() if sparse else column
    assert dense.dtype == np.int64 and dense.tolist() == expected.tolist()
    if sparse:
        # A few rows (a host's claims), or many (every host a weigher reads); in any
        # order with repeats, and ascending, each once (what the filters let through).
        for count in (rng.randint(0, max(0, length // 16 - 1)), rng.randint(0, 2 * length)):
            picked = [rng.randrange(length) for _ in range(count)] if length else []
            for rows in (picked, sorted(set(picked))):
                at = np.array(rows, dtype=np.intp)
                assert column.take(at).tolist() == expected[at].tolist()
        assert [column.at(row) for row in range(length)] == expected.tolist()


def test_what_a_sparse_column_hands_out_is_a_copy():
    column = SparseColumn(np.array([1, 3], dtype=np.int32), np.array([5, 6], dtype=np.int64), 4)

    column.take(np.array([1, 3]))[:] = 0
    column.dense()[:] = 0

    assert column.dense().tolist() == [0, 5, 0, 6]


def test_an_empty_column_holds_zeros_everywhere():
    column = summed(3, np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.int64))

    assert isinstance(column, SparseColumn)

    assert column.take(np.array([2, 0, 2])).tolist() == [0, 0, 0]
    assert column.at(1) == 0
    assert column.dense().tolist() == [0, 0, 0]
