"""Bounded readers of Nova-object primitives, and what every codec module shares.

Every reader takes a value and its field path and returns the decoded value or
raises :class:`~scheduler.exceptions.InvalidInput` whose reason starts with that
path. Reasons never quote field values (an image property or a cell's
``transport_url`` may carry secrets): only object names, versions, malformed
UUIDs and the keys of free-form dicts, truncated, at most 300 characters.
Nesting is checked iteratively (:func:`check_depth`) before any reader recurses.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from scheduler.exceptions import ConfigurationError, InvalidInput, SchedulerError

NAME_KEY = 'nova_object.name'
NAMESPACE_KEY = 'nova_object.namespace'
VERSION_KEY = 'nova_object.version'
DATA_KEY = 'nova_object.data'
CHANGES_KEY = 'nova_object.changes'
NAMESPACE = 'nova'

SELECTION_VERSION = '1.1'
SCHEDULER_LIMITS_VERSION = '1.0'

# Every object we read is at major version 1 except these (object_schemas.json).
MAJOR_VERSIONS = {'Instance': 2, 'InstanceList': 2}
#: nova.virt.hardware.MEMPAGES_ANY: the smallest of Nova's symbolic page sizes (-1..-3).
PAGES_ANY = -3
MAX_DEPTH_CEILING = 256  # keeps the decoders' recursion far below Python's limit
MAX_INT64 = 2**63 - 1
MAX_REASON = 300
PREVIEW = 40

UUID_RE = re.compile(r'[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\Z')
VERSION_RE = re.compile(r'([0-9]{1,6})\.([0-9]{1,6})(?:\.[0-9]{1,6})?\Z')
DECIMAL_RE = re.compile(r'\s*[0-9]{1,18}\s*\Z')
IDENTIFIER_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_]{0,63}\Z')

# Nova's strutils.bool_from_string vocabulary (FlexibleBooleanField).
TRUE_STRINGS = frozenset({'1', 't', 'true', 'on', 'y', 'yes'})
FALSE_STRINGS = frozenset({'0', 'f', 'false', 'off', 'n', 'no'})


@dataclass(frozen=True)
class DecodeLimits:
    """Bounds on what a caller may send; the defaults are safe for any real cloud."""

    max_instances: int = 1000
    max_string_length: int = 4096
    max_extra_specs: int = 256
    max_list_length: int = 1000
    max_depth: int = 32
    max_hints: int = 64
    max_amount: int = 2**31 - 1
    # Casts describe whole hosts and aggregates, which can legitimately be larger.
    max_aggregate_hosts: int = 100_000
    max_host_instances: int = 10_000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            # Zero hints or extra specs is a policy; zero of anything else rejects everything.
            least = 0 if f.name in ('max_hints', 'max_extra_specs') else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigurationError(f'DecodeLimits.{f.name} must be an integer >= {least}')
        if self.max_depth > MAX_DEPTH_CEILING:
            raise ConfigurationError(
                f'DecodeLimits.max_depth must be at most {MAX_DEPTH_CEILING}')


class EncodeError(SchedulerError, ValueError):
    """A Selection we built cannot be sent: a bug on our side, never the caller's."""



def unwrap(value: Any) -> Any:
    """A kept primitive (e.g. ``RequestSpec.numa_topology``) with every nova-object
    envelope replaced by its data, for code that reads fields rather than forwards."""
    if isinstance(value, dict):
        if NAME_KEY in value and isinstance(value.get(DATA_KEY), dict):
            value = value[DATA_KEY]
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value



# Errors and paths ------------------------------------------------------------------------


def invalid(path: str, message: str) -> InvalidInput:
    reason = f'{path}: {message}'
    if len(reason) > MAX_REASON:
        reason = reason[:MAX_REASON - 3] + '...'
    return InvalidInput(reason=reason)


def preview(value: Any) -> str:
    """A short quote of a value that is safe to show (names, versions, UUIDs)."""
    if not isinstance(value, str):
        return f'<{kind_of(value)}>'
    text = value if len(value) <= PREVIEW else value[:PREVIEW] + '...'
    return repr(text)


def article(name: str) -> str:
    return f'an {name}' if name[:1] in 'AEIOU' else f'a {name}'


def kind_of(value: Any) -> str:
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'boolean'
    if isinstance(value, int):
        return 'integer'
    if isinstance(value, float):
        return 'number'
    if isinstance(value, str):
        return 'string'
    if isinstance(value, list):
        return 'list'
    if isinstance(value, dict):
        return 'object'
    return type(value).__name__


def seg(key: Any) -> str:
    """One path segment; the ``nova_object.data`` level is left out for readability."""
    if key == DATA_KEY:
        return ''
    if isinstance(key, int) and not isinstance(key, bool):
        return f'[{key}]'
    if isinstance(key, str) and IDENTIFIER_RE.match(key):
        return f'.{key}'
    return f'[{preview(key)}]'


def check_depth(value: Any, root: str, max_depth: int) -> None:
    """Reject nesting deeper than ``max_depth`` without recursing.

    Each container is remembered with the deepest level it was reached at, so
    shared sub-structures are walked at most ``max_depth`` times and a cycle
    (impossible in JSON, possible from Python callers) is reported as too deep.
    """
    if not isinstance(value, (dict, list)):
        return
    deepest: dict[int, int] = {}
    # Entries: (container, depth, path node); a path node is (parent node, key).
    stack: list[tuple[Any, int, Any]] = [(value, 1, None)]
    while stack:
        container, depth, node = stack.pop()
        if depth > max_depth:
            raise invalid(node_path(root, node), f'nested deeper than {max_depth} levels')
        if deepest.get(id(container), 0) >= depth:
            continue
        deepest[id(container)] = depth
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, child in items:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1, (node, key)))


def node_path(root: str, node: Any) -> str:
    keys = []
    while node is not None:
        node, key = node
        keys.append(key)
    return root + ''.join(seg(k) for k in reversed(keys))


def add_unique(uuid: str, seen: set[str], path: str) -> None:
    folded = uuid.lower()
    if folded in seen:
        raise invalid(path, f'duplicate instance uuid {preview(uuid)}')
    seen.add(folded)


REQUIRED: Any = object()
ABSENT: Any = object()
Conv = Callable[[Any, str], Any]


def make(factory: Any) -> Any:
    # A class or function builds a fresh (mutable) default; anything else is the value.
    return factory() if callable(factory) else factory



class BoundedReader:
    """Field readers bound to one set of limits. Every method takes the value and
    its path and returns the decoded value or raises InvalidInput."""

    def __init__(self, limits: DecodeLimits):
        self.lim = limits

    # -- access -----------------------------------------------------------------------
    def take(self, data: dict, key: str, path: str, conv: Conv, *, default: Any = REQUIRED,
             nullable: bool = False, null: Any = None) -> Any:
        """``data[key]`` converted; ``default`` when absent, ``null`` when explicitly null."""
        field_path = path + seg(key)
        if key not in data:
            if default is REQUIRED:
                raise invalid(field_path, 'required field is missing')
            return make(default)
        value = data[key]
        if value is None:
            if not nullable:
                raise invalid(field_path, 'must not be null')
            return make(null)
        return conv(value, field_path)

    def obj(self, value: Any, path: str, name: str) -> dict:
        """The data of a nova-object primitive that must be a ``name``."""
        if not isinstance(value, dict) or NAME_KEY not in value:
            raise invalid(path, f'expected {article(name)} object, got {kind_of(value)}')
        namespace = value.get(NAMESPACE_KEY)
        if namespace != NAMESPACE:
            raise invalid(path, f'object namespace {preview(namespace)} is not {NAMESPACE!r}')
        got = value[NAME_KEY]
        if got != name:
            raise invalid(path, f'expected {article(name)} object, got {preview(got)}')
        version = value.get(VERSION_KEY)
        match = VERSION_RE.match(version) if isinstance(version, str) else None
        if match is None:
            raise invalid(path, f'malformed {name} version {preview(version)}')
        major = MAJOR_VERSIONS.get(name, 1)
        if int(match.group(1)) != major:
            raise invalid(path, f'unsupported {name} version {version} '
                                 f'(only {major}.x is understood)')
        data = value.get(DATA_KEY)
        if not isinstance(data, dict):
            raise invalid(path, f'{DATA_KEY} must be an object, got {kind_of(data)}')
        return data

    # -- scalars ----------------------------------------------------------------------
    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise invalid(path, f'expected a string, got {kind_of(value)}')
        if len(value) > self.lim.max_string_length:
            raise invalid(path, f'string longer than {self.lim.max_string_length} characters')
        return value

    def nova_string(self, value: Any, path: str) -> str:
        """Nova's StringField coercion: numbers become strings (legacy Glance values)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        return self.string(value, path)

    def integer(self, value: Any, path: str, low: int = 0, high: int = MAX_INT64) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid(path, f'expected an integer, got {kind_of(value)}')
        if not low <= value <= high:
            raise invalid(path, f'must be between {low} and {high}')
        return value

    def amount(self, value: Any, path: str) -> int:
        return self.integer(value, path, 0, self.lim.max_amount)

    def int_like(self, value: Any, path: str) -> int:
        """Nova's IntegerField coercion accepts decimal strings (legacy Glance values)."""
        if isinstance(value, str) and DECIMAL_RE.match(value):
            value = int(value)
        return self.amount(value, path)

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise invalid(path, f'expected a boolean, got {kind_of(value)}')
        return value

    def flexible_bool(self, value: Any, path: str) -> bool:
        if isinstance(value, str):
            folded = value.strip().lower()
            if folded in TRUE_STRINGS:
                return True
            if folded in FALSE_STRINGS:
                return False
            raise invalid(path, 'expected a boolean or a boolean string')
        return self.boolean(value, path)

    def number(self, value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise invalid(path, f'expected a number, got {kind_of(value)}')
        try:
            result = float(value)
        except OverflowError:  # an integer beyond any float
            result = math.inf
        if not math.isfinite(result):
            raise invalid(path, 'expected a finite number')
        return result

    def uuid(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise invalid(path, f'expected a UUID string, got {kind_of(value)}')
        if not UUID_RE.match(value):
            raise invalid(path, f'not a UUID: {preview(value)}')
        return value

    # -- containers -------------------------------------------------------------------
    def list_(self, value: Any, path: str, max_len: int | None = None) -> list:
        limit = self.lim.max_list_length if max_len is None else max_len
        if not isinstance(value, list):
            raise invalid(path, f'expected a list, got {kind_of(value)}')
        if len(value) > limit:
            raise invalid(path, f'more than {limit} items')
        return value

    def dict_(self, value: Any, path: str, max_len: int | None = None,
              what: str = 'entries') -> dict:
        limit = self.lim.max_list_length if max_len is None else max_len
        if not isinstance(value, dict):
            raise invalid(path, f'expected an object, got {kind_of(value)}')
        if len(value) > limit:
            raise invalid(path, f'more than {limit} {what}')
        return value

    def list_of(self, value: Any, path: str, item: Conv, max_len: int | None = None) -> list:
        items = self.list_(value, path, max_len)
        return [item(v, f'{path}[{i}]') for i, v in enumerate(items)]

    def str_list(self, value: Any, path: str, max_len: int | None = None) -> list[str]:
        return self.list_of(value, path, self.string, max_len)

    def str_set(self, value: Any, path: str) -> set[str]:
        return set(self.str_list(value, path))

    def dict_of(self, value: Any, path: str, item: Conv,
                max_len: int | None = None) -> dict[str, Any]:
        entries = self.dict_(value, path, max_len)
        out = {}
        for key, v in entries.items():
            key_path = path + seg(key)
            out[self.string(key, key_path)] = item(v, key_path)
        return out

    def str_dict(self, value: Any, path: str, max_len: int | None = None) -> dict[str, str]:
        return self.dict_of(value, path, self.string, max_len)

    def json(self, value: Any, path: str) -> Any:
        """A bounded copy of a JSON value whose inner structure we keep but do not read.
        Recursion is safe: :func:`check_depth` ran on the whole input first."""
        if value is None or isinstance(value, (bool, int)):
            return value
        if isinstance(value, float):
            return self.number(value, path)
        if isinstance(value, str):
            return self.string(value, path)
        if isinstance(value, list):
            return self.list_of(value, path, self.json)
        if isinstance(value, dict):
            return self.dict_of(value, path, self.json)
        raise invalid(path, f'unsupported value of type {kind_of(value)}')

    def kept_object(self, value: Any, path: str, name: str, check: Conv) -> dict[str, Any]:
        """An object we keep as its primitive: its envelope and the fields we rely on are
        checked (``check`` gets the data), the rest is copied within bounds."""
        check(self.obj(value, path, name), path)
        return self.json(value, path)

    # -- RequestSpec ------------------------------------------------------------------

# Encoding ------------------------------------------------------------------------------


def envelope(name: str, version: str, data: dict[str, Any]) -> dict[str, Any]:
    # Objects Nova builds with every field passed to the constructor report all of
    # them as changed; the reply sample shows exactly that.
    return {NAME_KEY: name, NAMESPACE_KEY: NAMESPACE, VERSION_KEY: version, DATA_KEY: data,
            CHANGES_KEY: list(data)}


def encode_str(value: Any, field: str, *, nullable: bool = False, uuid: bool = False) -> Any:
    if value is None:
        if nullable:
            return None
        raise EncodeError(f'Selection.{field} must not be None')
    if not isinstance(value, str):
        raise EncodeError(f'Selection.{field} must be a string, not {type(value).__name__}')
    if uuid and not UUID_RE.match(value):
        raise EncodeError(f'Selection.{field} is not a UUID')
    return value
