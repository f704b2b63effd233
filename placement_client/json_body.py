"""Decoding Placement's JSON bodies.

An ``allocation_candidates`` answer is the largest thing a request reads:
about 650 KB at 1,000 candidates, tens of MB at tens of thousands. orjson
decodes it in less than half the stdlib's time (1.3 against 2.8 ms at 1,000
candidates, doc/performance.md), and every scheduling request pays it.

What the stdlib accepts stays accepted: a body orjson refuses (JSON may be
UTF-16 or UTF-32 for ``json.loads``; ``NaN`` and ``Infinity`` literals are
stdlib extensions) is handed to ``json.loads``, which decodes it or raises its
own ``ValueError``. Without orjson installed the stdlib does it all.

One difference is accepted rather than paid for on every answer: an integer
beyond 64 bits comes out as the nearest float, where the stdlib keeps it
exact. Placement cannot send one (its schemas cap amounts and totals at
2**31 - 1; capacities are far below 2**64), and spotting one in the raw bytes
first would cost a third of what orjson saves.
"""
from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - exercised by tests that hide the module
    orjson = None  # type: ignore[assignment]


def loads(content: bytes | str) -> Any:
    """``content`` as Python values; raises ``ValueError`` when it is not JSON."""
    if orjson is not None:
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError:
            pass
    return json.loads(content)
