"""``name=ratio`` list options, read the way Nova reads them.

``[metrics] weight_setting`` and ``[filter_scheduler] image_props_weight_setting``
are lists of ``name=ratio``. Nova ignores malformed entries with a warning
instead of refusing to start; an existing nova.conf must keep working, so this
does the same.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable

from scheduler.conf.weight_setting import split_weight_setting

LOG = logging.getLogger(__name__)


def parse_weight_setting(entries: Iterable[str], option: str) -> list[tuple[str, float]]:
    """``(name, ratio)`` pairs in the configured order; malformed entries are
    skipped with one warning naming ``option`` (:func:`split_weight_setting` says
    which are).
    """
    good, bad = split_weight_setting(entries)
    if bad:
        LOG.warning('Ignoring the invalid elements of the option %s: %s', option, ', '.join(bad))
    return good
