"""A window measured in slices between slices of its ceiling, so that the machine's
drift cancels out.

One machine here measured Placement's PUT-only ceiling at 33.1 and then 47.0 req/s,
eight minutes apart, with the same code and the same claims (doc/performance.md, runs
32-35): a window held to one ceiling before it and one after read anywhere from 0.68x
to 0.97x. Cut into short slices, each between two slices of the ceiling, every view
slice is held to the ceilings measured on either side of it, seconds away: a drift
that is steady over a slice cancels out exactly, and one that is not shows as the
spread of the slices' shares.
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from bench.e2e import _Phase


@dataclass(frozen=True)
class Interleaved:
    """The window's share of its ceiling, from ``n`` window slices and the ``n + 1``
    ceiling slices around them."""

    #: Each window slice's rate over the mean of the two ceiling slices beside it.
    shares: tuple[float, ...]
    #: The mean of the two ceiling slices beside each window slice.
    beside: tuple[float, ...]
    #: The whole window's share: its decisions over those the ceilings beside each
    #: slice would have made in the same time (the slices are equally long).
    share: float

    @property
    def ceiling(self) -> float:
        """The ceiling the window was held to, in req/s: the mean of :attr:`beside`."""
        return statistics.fmean(self.beside) if self.beside else 0.0


def held_to_neighbours(window: Sequence[float], ceilings: Sequence[float]) -> Interleaved:
    """``window`` slices' rates (req/s), each measured between two of ``ceilings``
    (one more, in the order measured): the window's share of the ceiling beside it.
    ValueError when the counts do not interleave."""
    if not window or len(ceilings) != len(window) + 1:
        raise ValueError(f'{len(window)} window slices need {len(window) + 1} ceiling '
                         f'slices around them, not {len(ceilings)}')
    beside = tuple((before + after) / 2 for before, after in pairwise(ceilings))
    shares = tuple(rate / ceiling if ceiling else 0.0
                   for rate, ceiling in zip(window, beside, strict=True))
    total = sum(beside)
    return Interleaved(shares, beside, sum(window) / total if total else 0.0)


def merged(slices: Sequence[_Phase]) -> _Phase:
    """One phase of several slices' windows: their answers, work, errors, latencies and
    consumers together, over their seconds together."""
    phase = _Phase()
    for part in slices:
        phase.completed += part.completed
        phase.work += part.work
        phase.errors.update(part.errors)
        phase.latencies.extend(part.latencies)
        phase.consumers.extend(part.consumers)
        phase.seconds += part.seconds
    return phase
