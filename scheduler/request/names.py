"""Validation of the names and values that end up in a Placement query.

Every check raises :class:`RequestTranslationError` naming where the bad value
came from, so that a malformed query never reaches Placement (which would
answer 400 and leave the caller with an unexplained NoValidHost).
"""
from __future__ import annotations

import re

import os_resource_classes
import os_traits
from oslo_utils import uuidutils

from scheduler.exceptions import RequestTranslationError

# Placement's own patterns (placement/schemas/common.py) and length limit.
_CUSTOM_NAME = re.compile(r'^CUSTOM_[A-Z0-9_]+$')
_MAX_NAME_LENGTH = 255
# Request group suffixes from microversion 1.33 on.
SUFFIX_PATTERN = r'[a-zA-Z0-9_-]{1,64}'
_SUFFIX = re.compile(rf'^{SUFFIX_PATTERN}$')

# Placement's largest inventory total or allocation (its db.MAX_INT).
MAX_AMOUNT = 2**31 - 1

_STANDARD_TRAITS = frozenset(os_traits.get_traits())
_STANDARD_RESOURCE_CLASSES = frozenset(os_resource_classes.STANDARDS)


def _is_custom(name: str) -> bool:
    return len(name) <= _MAX_NAME_LENGTH and bool(_CUSTOM_NAME.match(name))


def resource_class(name: str, where: str) -> str:
    if name in _STANDARD_RESOURCE_CLASSES or _is_custom(name):
        return name
    raise RequestTranslationError(
        f'{where}: {name!r} is neither a standard resource class nor a custom one '
        f'(CUSTOM_[A-Z0-9_]+)')


def trait(name: str, where: str) -> str:
    if name in _STANDARD_TRAITS or _is_custom(name):
        return name
    raise RequestTranslationError(
        f'{where}: {name!r} is neither a standard trait nor a custom one (CUSTOM_[A-Z0-9_]+)')


def amount(value: object, where: str) -> int:
    """A resource amount: a non-negative integer (an int or its decimal string)."""
    if isinstance(value, bool):
        raise RequestTranslationError(f'{where}: amount {value!r} is not an integer')
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and re.fullmatch(r'\s*[+-]?\d+\s*', value):
        number = int(value)
    else:
        raise RequestTranslationError(f'{where}: amount {value!r} is not an integer')
    if number < 0:
        raise RequestTranslationError(f'{where}: amount {number} is negative')
    if number > MAX_AMOUNT:
        # Placement stores amounts as 32-bit integers; a larger one can never be
        # satisfied, and one beyond 64 bits makes Placement fail with a 500.
        raise RequestTranslationError(
            f'{where}: amount {str(number)[:20]}{"..." if len(str(number)) > 20 else ""} is '
            f'larger than Placement can hold ({MAX_AMOUNT})')
    return number


def suffix(value: str, where: str) -> str:
    if _SUFFIX.match(value):
        return value
    raise RequestTranslationError(
        f'{where}: {value!r} cannot be a Placement request group suffix '
        f'(1 to 64 of [a-zA-Z0-9_-])')


def uuid(value: str, where: str) -> str:
    if isinstance(value, str) and uuidutils.is_uuid_like(value):
        return value
    raise RequestTranslationError(f'{where}: {value!r} is not a UUID')
