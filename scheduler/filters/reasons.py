"""Quoting request-supplied text in user-facing filter reasons.

Reasons travel back to the user in NoValidHost (bounded to 512 characters in
all) and group identical failures in the explain output, so they quote what the
request asked for, shortened, and never host names or host-side values.
"""
from __future__ import annotations

_DEFAULT_LIMIT = 60


def brief(text: object, limit: int = _DEFAULT_LIMIT) -> str:
    """``text`` as a string of at most ``limit`` characters (an ellipsis marks a cut)."""
    value = str(text)
    return value if len(value) <= limit else value[:limit - 3] + '...'
