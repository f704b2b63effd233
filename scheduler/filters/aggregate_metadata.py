"""Reading a host's aggregate metadata the way Nova's filters do (pure functions).

Nova keeps aggregate metadata as strings. Filters read it in three shapes:

* a set of raw values of one key over the host's aggregates
  (:func:`aggregate_values`, Nova's ``aggregate_values_from_key``);
* comma-separated lists, merged over the host's aggregates
  (:func:`aggregate_list`, Nova's ``aggregate_metadata_get_by_host``);
* a numeric limit: the smallest value any aggregate sets, else the configured
  value (:func:`aggregate_int_limit`, Nova's ``validate_num_values``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.host_state import HostState


def aggregate_values(host_state: HostState, key: str) -> set[str]:
    """The distinct values of metadata ``key`` on the host's aggregates."""
    return {str(agg.metadata[key]) for agg in host_state.aggregates if key in agg.metadata}


@dataclass(frozen=True)
class AggregateList:
    """Entries of comma-separated metadata lists merged over a host's aggregates."""

    #: whether any aggregate of the host sets the key at all
    present: bool
    #: the entries, stripped; blank entries dropped
    values: frozenset[str]


def aggregate_list(host_state: HostState, key: str, *, prefix: bool = False) -> AggregateList:
    """Merge the comma-separated values of ``key`` (every key starting with
    ``key`` when ``prefix``) over the host's aggregates.

    An aggregate that sets the key to an empty string is still ``present``:
    for an isolation key that means "nobody", not "no restriction".
    """
    present = False
    values: set[str] = set()
    for agg in host_state.aggregates:
        for meta_key, raw in agg.metadata.items():
            if meta_key == key or (prefix and meta_key.startswith(key)):
                present = True
                values.update(v.strip() for v in str(raw).split(','))
    values.discard('')
    return AggregateList(present, frozenset(values))


@dataclass(frozen=True)
class AggregateLimit:
    """A per-host numeric limit and where it came from."""

    value: int
    #: True when an aggregate set it, False when it is the configured value
    from_aggregate: bool
    #: aggregate values that are not integers (ignored)
    invalid: tuple[str, ...] = ()

    def describe(self, key: str) -> str:
        """How a reason names the limit: ``max_io_ops_per_host 8`` or
        ``aggregate max_io_ops_per_host 2``."""
        return f'{"aggregate " if self.from_aggregate else ""}{key} {self.value}'


def aggregate_int_limit(host_state: HostState, key: str, default: int) -> AggregateLimit:
    """The smallest integer any of the host's aggregates sets for ``key``;
    ``default`` (the configured value) when none sets a valid one.

    Values that are not integers are ignored and reported in ``invalid``;
    the caller logs them. Nova falls back to the configured value as soon as
    one aggregate value is unparsable, which can loosen a stricter, valid
    limit of another aggregate; here the valid values still count.
    """
    parsed: list[int] = []
    invalid: list[str] = []
    for raw in sorted(aggregate_values(host_state, key)):
        try:
            parsed.append(int(raw))
        except ValueError:
            invalid.append(raw)
    if not parsed:
        return AggregateLimit(default, False, tuple(invalid))
    return AggregateLimit(min(parsed), True, tuple(invalid))


def aggregate_metadata_by_key(host_state: HostState) -> dict[str, frozenset[str]]:
    """Every metadata key of the host's aggregates -> its comma-separated entries,
    stripped and merged over the aggregates (Nova's ``aggregate_metadata_get_by_host``
    without a key). Unlike :func:`aggregate_list`, blank entries are kept, as Nova
    keeps them: a key set to ``""`` has the one value ``""``.
    """
    merged: dict[str, set[str]] = {}
    for agg in host_state.aggregates:
        for key, raw in agg.metadata.items():
            merged.setdefault(key, set()).update(v.strip() for v in str(raw).split(','))
    return {key: frozenset(values) for key, values in merged.items()}
