"""``name=ratio`` list options, read the way Nova reads them.

``[metrics] weight_setting`` and ``[filter_scheduler] image_props_weight_setting``
are lists of ``name=ratio``. Nova ignores malformed entries with a warning
instead of refusing to start; an existing nova.conf must keep working, so this
does the same.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Iterable

LOG = logging.getLogger(__name__)


def parse_weight_setting(entries: Iterable[str], option: str) -> list[tuple[str, float]]:
    """``(name, ratio)`` pairs in the configured order; malformed entries are
    skipped with one warning naming ``option``.

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
    if bad:
        LOG.warning('Ignoring the invalid elements of the option %s: %s', option, ', '.join(bad))
    return good
