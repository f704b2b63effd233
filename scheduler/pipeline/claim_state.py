"""A claim this service made, and the record the journal keeps of it."""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placement_client.models import AllocationRequest, ConsumerAllocations

Allocations = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class Claim:
    """A claim this service made, and what undoing it takes."""

    consumer_uuid: str
    #: what the consumer holds because of the claim (provider -> class -> amount)
    allocations: Allocations
    #: the consumer generation right after the claim
    generation: int
    #: the consumer's owner as the claim sent it (None: the request named none)
    project_id: str | None
    user_id: str | None
    #: what the consumer held before; None when the claim created it
    previous: ConsumerAllocations | None = None

    @property
    def is_move(self) -> bool:
        return self.previous is not None

    def given_back(self) -> tuple[AllocationRequest, str | None, str | None]:
        """What undoing the claim writes: the consumer's allocations before it (none
        for a consumer it created), and the owner to write them for."""
        previous = self.previous
        if previous is None:
            return AllocationRequest(allocations={}), self.project_id, self.user_id
        return (AllocationRequest(allocations={rp: dict(r) for rp, r in
                                               previous.allocations.items()}),
                previous.project_id or self.project_id, previous.user_id or self.user_id)


def same_allocations(a: Allocations, b: Allocations) -> bool:
    return ({rp: dict(r) for rp, r in a.items() if r}
            == {rp: dict(r) for rp, r in b.items() if r})


@dataclass(frozen=True)
class Recorded:
    """A claim as a journal record holds it."""

    claim: Claim
    request_id: str | None
    #: when the record was written (seconds since the epoch: it outlives reboots)
    at: float


def claim_record(claim: Claim, request_id: str | None, *, at: float | None = None
                 ) -> dict[str, Any]:
    """A claim as the journal keeps it (JSON), written ``at`` (now by default)."""
    record: dict[str, Any] = {
        'at': time.time() if at is None else at,
        'consumer': claim.consumer_uuid,
        'allocations': {rp: dict(r) for rp, r in claim.allocations.items()},
        'generation': claim.generation,
        'project_id': claim.project_id, 'user_id': claim.user_id,
        'request_id': request_id,
    }
    if claim.previous is not None:
        previous = claim.previous
        record['previous'] = {
            'allocations': {rp: dict(r) for rp, r in previous.allocations.items()},
            'generation': previous.consumer_generation,
            'project_id': previous.project_id, 'user_id': previous.user_id,
        }
    return record


class BadRecord(ValueError):
    """A journal record that is not a claim this service wrote."""


def claim_from_record(record: Mapping[str, Any]) -> Recorded:
    """The claim a record holds, the request that made it and when."""
    try:
        previous = None
        if record.get('previous') is not None:
            p = record['previous']
            previous = ConsumerAllocations(
                consumer_uuid=_text(record['consumer']),
                allocations=_allocations(p['allocations']),
                consumer_generation=_optional_int(p['generation']),
                project_id=_optional_text(p['project_id']),
                user_id=_optional_text(p['user_id']))
        claim = Claim(consumer_uuid=_text(record['consumer']),
                      allocations=_allocations(record['allocations']),
                      generation=_int(record['generation']),
                      project_id=_optional_text(record['project_id']),
                      user_id=_optional_text(record['user_id']),
                      previous=previous)
        at = record['at']
        if not isinstance(at, (int, float)) or isinstance(at, bool):
            raise TypeError('expected a time')
        return Recorded(claim, _optional_text(record.get('request_id')), float(at))
    except (KeyError, TypeError) as e:
        raise BadRecord(f'not a claim: {type(e).__name__} {e}') from e


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError('expected a string')
    return value


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _int(value: Any) -> int:
    if type(value) is not int:
        raise TypeError('expected an integer')
    return value


def _optional_int(value: Any) -> int | None:
    return None if value is None else _int(value)


def _allocations(value: Any) -> dict[str, dict[str, int]]:
    if not isinstance(value, dict):
        raise TypeError('expected allocations')
    return {_text(rp): {_text(rc): _int(n) for rc, n in _mapping(resources).items()}
            for rp, resources in value.items()}


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError('expected a mapping')
    return value
