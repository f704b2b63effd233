"""Typed field readers for host data written by Nova or by an operator.

The NUMA topology and PCI pools of a compute node arrive as Nova's object
primitives (JSON in the cell database, ``{"nova_object.data": {...}}``
envelopes) or as the same fields written by hand in the hosts file. One reader
serves both: it unwraps envelopes, checks types (an int is never a bool),
and names the field in every error (:class:`HostDataError`). ``strict`` refuses
keys it does not know (the hosts file, where a typo silently changes
scheduling); Nova's own rows are read leniently, since a newer Nova may add
fields.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.exceptions import HostDataError, RequestTranslationError
from scheduler.request.cpu_policy import parse_cpu_spec

DATA_KEY = 'nova_object.data'
_ENVELOPE_KEYS = frozenset({'nova_object.name', 'nova_object.namespace', 'nova_object.version',
                            'nova_object.changes', DATA_KEY})


def load_json(value: Any, where: str) -> Any:
    """``value`` decoded when it is a JSON string (Nova's text columns), else as is."""
    if isinstance(value, (str, bytes)):
        try:
            return json.loads(value)
        except ValueError as e:
            raise HostDataError(f'{where}: not JSON ({e})') from None
    return value


class Fields:
    """The fields of one mapping at ``where``; accessors raise HostDataError."""

    def __init__(self, value: Any, where: str, *, allowed: Iterable[str], strict: bool,
                 kind: str):
        if isinstance(value, Mapping) and DATA_KEY in value:
            name = value.get('nova_object.name')
            if name is not None and name != kind:
                raise HostDataError(f'{where}: expected a {kind} object, got {name!r}')
            value = value[DATA_KEY]
        if not isinstance(value, Mapping):
            raise HostDataError(f'{where}: expected a mapping ({kind}), got {kind_of(value)}')
        self.data = value
        self.where = where
        if strict:
            unknown = sorted(str(k) for k in value if k not in allowed and k not in _ENVELOPE_KEYS)
            if unknown:
                raise HostDataError(f'{where}: unknown key(s) {", ".join(unknown)}; allowed: '
                                    f'{", ".join(sorted(allowed))}')

    def error(self, key: str, message: str) -> HostDataError:
        return HostDataError(f'{self.where}.{key}: {message}')

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def integer(self, key: str, *, default: int | None = None, minimum: int = 0) -> int:
        value = self.data.get(key)
        if value is None:
            if default is None:
                raise self.error(key, 'is required')
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f'must be an integer, got {kind_of(value)}')
        if value < minimum:
            raise self.error(key, f'must be at least {minimum}, got {value}')
        return value

    def optional_integer(self, key: str) -> int | None:
        if self.data.get(key) is None:
            return None
        return self.integer(key)

    def number(self, key: str) -> float | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise self.error(key, f'must be a positive number, got {kind_of(value)}')
        return float(value)

    def string(self, key: str, *, required: bool = False) -> str | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.error(key, 'is required')
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f'must be a non-empty string, got {kind_of(value)}')
        return value

    def cpus(self, key: str) -> frozenset[int]:
        """A set of CPU ids: a list of integers, or (hand-written) ``"0-3,^2,8"``."""
        return cpu_set(self.data.get(key), f'{self.where}.{key}')

    def items(self, key: str) -> list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if isinstance(value, Mapping) and DATA_KEY in value:  # an object list
            value = value[DATA_KEY].get('objects')
        if not isinstance(value, list):
            raise self.error(key, f'must be a list, got {kind_of(value)}')
        return value

    def string_map(self, key: str) -> dict[str, str]:
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(key, f'must be a mapping, got {kind_of(value)}')
        result = {}
        for k, v in value.items():
            if not isinstance(k, str) or not k:
                raise self.error(key, f'keys must be non-empty strings, got {k!r}')
            if isinstance(v, bool):
                v = 'true' if v else 'false'
            if v is not None and not isinstance(v, (str, int, float)):
                raise self.error(f'{key}.{k}', f'must be a string, got {kind_of(v)}')
            if v is not None:
                result[k] = str(v)
        return result


def cpu_set(value: Any, where: str) -> frozenset[int]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        try:
            return frozenset(parse_cpu_spec(value))
        except RequestTranslationError as e:
            raise HostDataError(f'{where}: {e}') from None
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise HostDataError(f'{where}: must be a list of CPU ids, got {kind_of(value)}')
    for cpu in value:
        if isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 0:
            raise HostDataError(f'{where}: CPU ids must be integers >= 0, got {cpu!r}')
    return frozenset(value)


def kind_of(value: Any) -> str:
    """How a wrong value is named in errors."""
    if value is None:
        return 'nothing'
    if isinstance(value, bool):
        return f'a boolean ({value})'
    if isinstance(value, (int, float, str)):
        return f'{type(value).__name__} {str(value)[:40]!r}'
    kinds: dict[type, str] = {dict: 'a mapping', list: 'a list'}
    return kinds.get(type(value), type(value).__name__)
