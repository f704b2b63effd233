"""``name=ratio`` list option values, split the way Nova reads them (pure).

``[metrics] weight_setting`` and ``[filter_scheduler] image_props_weight_setting``
are lists of ``name=ratio``. Here, below the plugins and the host sources, so that a
host source can agree with the plugins on which names count
(:mod:`scheduler.weights.setting` warns about the rest) without loading them.
"""
from __future__ import annotations

import math
from collections.abc import Iterable


def split_weight_setting(entries: Iterable[str]
                         ) -> tuple[list[tuple[str, float]], list[str]]:
    """``(name, ratio)`` pairs in the configured order, and the malformed entries.

    An entry is malformed without ``=``, with an empty name, or with a ratio
    that is not a finite number.
    """
    good: list[tuple[str, float]] = []
    bad: list[str] = []
    for entry in entries or ():
        name, sep, raw = str(entry).partition('=')
        name = name.strip()
        try:
            ratio = float(raw)
        except ValueError:
            ratio = math.nan
        if name and sep and math.isfinite(ratio):
            good.append((name, ratio))
        else:
            bad.append(str(entry))
    return good, bad
