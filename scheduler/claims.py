"""Claiming resources in Placement, and giving them back.

A claim is ``PUT /allocations/{instance}`` with an allocation request
Placement itself proposed. Placement's generations arbitrate races between
schedulers (design principle 6): a provider-generation conflict is worth a
bounded number of retries of the same claim; a capacity conflict means the
candidate is gone, so the caller moves on.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from placement_client import exceptions as pexc
from placement_client.models import AllocationRequest

LOG = logging.getLogger(__name__)


class ClaimFailed(Exception):
    """This candidate cannot be claimed; ``reason`` is a short, countable phrase."""

    def __init__(self, reason: str, detail: str = ''):
        super().__init__(f'{reason}: {detail}' if detail else reason)
        self.reason = reason
        self.detail = detail


class ConsumerInUse(Exception):
    """The instance already holds allocations that this request did not make.

    Moves that keep allocations (evacuate without a migration consumer) need
    Nova's doubled-allocation claim, which this release does not make; no
    other candidate would succeed, so the instance fails at once.
    """


@dataclass
class Claimer:
    client: object              # placement_client.client.PlacementClient
    max_attempts: int = 4       # Nova's number of tries on a generation conflict
    retry_delay: float = 0.2
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def claim(self, instance_uuid: str, alloc_req: AllocationRequest, *, project_id: str,
              user_id: str, microversion: str, request_id: str | None) -> None:
        """Claim or raise :class:`ClaimFailed`, :class:`ConsumerInUse`, or
        ``PlacementUnavailable`` (which the caller must treat as fatal for the request)."""
        generation: int | None = None
        for attempt in range(1, self.max_attempts + 1):
            try:
                self.client.put_allocations(
                    instance_uuid, alloc_req, project_id=project_id, user_id=user_id,
                    consumer_generation=generation, microversion=microversion,
                    request_id=request_id)
                return
            except pexc.CapacityExceeded as exc:
                raise ClaimFailed('capacity exceeded', exc.detail or '') from exc
            except pexc.ProviderGenerationConflict as exc:
                LOG.debug('provider generation conflict claiming %s (attempt %d/%d)',
                          instance_uuid, attempt, self.max_attempts)
                last: Exception = exc
                if attempt < self.max_attempts:
                    # Full jitter so that competing schedulers spread out.
                    self.sleep(self.rng.uniform(0, self.retry_delay * 2 ** attempt))
            except pexc.ConsumerGenerationConflict as exc:
                last = exc
                current = self.client.get_allocations(instance_uuid, request_id=request_id)
                if current.allocations:
                    raise ConsumerInUse(
                        f'instance {instance_uuid} already holds allocations in Placement') from exc
                # Placement's orphan-consumer trap (reference/placement.md §7): a failed
                # PUT can leave an empty consumer behind; claim it at its generation.
                generation = current.consumer_generation
                if generation is None and exc.expected is not None:
                    generation = exc.expected
        raise ClaimFailed('concurrent updates', str(last)) from last


class PendingCleanups:
    """Allocations this service made and must remove, retried until Placement agrees.

    A rollback that fails (Placement down mid-request) is not forgotten: the
    consumer stays here and a background thread retries the DELETE every
    ``interval`` seconds. The set lives in memory only: a restart loses it,
    which ``doc/`` lists among what is out of scope for this release.
    """

    def __init__(self, client, *, interval: float = 5.0):
        self._client = client
        self._interval = interval
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def delete_now_or_later(self, consumer_uuids: list[str], *,
                            request_id: str | None) -> list[str]:
        """Delete each consumer's allocations; returns those left for later."""
        left: list[str] = []
        for consumer in consumer_uuids:
            try:
                self._client.delete_allocations(consumer, request_id=request_id)
            except pexc.PlacementError as exc:
                LOG.warning('could not remove allocations of %s now (%s); will retry',
                            consumer, type(exc).__name__)
                left.append(consumer)
        if left:
            with self._lock:
                self._pending.update(left)
            self._ensure_thread()
        return left

    def pending(self) -> set[str]:
        with self._lock:
            return set(self._pending)

    def retry_once(self) -> None:
        for consumer in sorted(self.pending()):
            try:
                self._client.delete_allocations(consumer)
            except pexc.PlacementError:
                return  # Placement still unhappy: try again next round
            with self._lock:
                self._pending.discard(consumer)
            LOG.info('removed allocations of %s left by an earlier rollback', consumer)

    def _ensure_thread(self) -> None:
        with self._lock:
            # The thread clears _thread under the lock before it exits, so a
            # consumer added concurrently is never left without a retrier.
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name='allocation-cleanup',
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.retry_once()
            with self._lock:
                if not self._pending:
                    self._thread = None
                    return

    def stop(self) -> None:
        self._stop.set()
