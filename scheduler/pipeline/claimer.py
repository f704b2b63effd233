"""Claiming resources in Placement, and giving them back.

A claim is ``PUT /allocations/{instance}`` with an allocation request
Placement itself proposed. Placement's generations arbitrate races between
schedulers (doc/design.md, D6): a provider-generation conflict is worth a
bounded number of retries of the same claim; a capacity conflict means the
candidate is gone, so the caller moves on.

A consumer that already holds allocations is being moved without a migration
consumer (evacuate; Nova's ``SchedulerReportClient.claim_resources`` meets it
too): the claim keeps what it holds and adds the
destination's allocations, at the consumer generation Placement reported.
Undoing a claim gives back exactly what the claim took: a consumer this
service created is deleted, a moved consumer gets its previous allocations
back. Allocations this service did not write are never deleted.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from placement_client import exceptions as pexc
from placement_client.api import PlacementAPI
from placement_client.models import AllocationRequest, ConsumerAllocations
from scheduler import metrics

LOG = logging.getLogger(__name__)

#: ClaimFailed's reason when Placement refused the claim for capacity.
CAPACITY_EXCEEDED = 'capacity exceeded'

Allocations = Mapping[str, Mapping[str, int]]


class ClaimFailed(Exception):
    """This candidate cannot be claimed; ``reason`` is a short, countable phrase.

    ``known`` is what the claim learnt about the consumer (its allocations and
    generation), so that the next candidate's claim need not learn it again.
    """

    def __init__(self, reason: str, detail: str = '', *,
                 known: ConsumerAllocations | None = None):
        super().__init__(f'{reason}: {detail}' if detail else reason)
        self.reason = reason
        self.detail = detail
        self.known = known


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


def alongside(held: ConsumerAllocations, alloc_req: AllocationRequest) -> AllocationRequest:
    """The allocations of a move claim: what the consumer holds plus ``alloc_req``.

    A provider in both (the sharing provider that source and destination use)
    gets, per resource class, the larger amount: one copy of shared disk, not
    two, and a class only the new request asks for is claimed too (Nova keeps
    the held entry as it is and drops such a class). ``mappings`` stay: they
    name providers of the new request, which are all in the result, and
    Placement (1.34+) accepts them as sent.
    """
    merged = {rp: dict(resources) for rp, resources in held.allocations.items()}
    for rp, resources in alloc_req.allocations.items():
        entry = merged.setdefault(rp, {})
        for rc, amount in resources.items():
            entry[rc] = max(entry.get(rc, 0), amount)
    return AllocationRequest(allocations=merged, mappings=alloc_req.mappings)


@dataclass
class Claimer:
    client: PlacementAPI
    max_attempts: int = 4       # Nova's number of tries on a generation conflict
    retry_delay: float = 0.2
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    @metrics.stage('claim')
    def claim(self, instance_uuid: str, alloc_req: AllocationRequest, *,
              project_id: str | None, user_id: str | None, microversion: str,
              request_id: str | None,
              known: ConsumerAllocations | None = None) -> Claim:
        """Claim ``alloc_req`` for the instance, or raise.

        ``known`` is the consumer as an earlier claim of the same request found
        it; without it the consumer is assumed new (the common case: one PUT)
        and read only when Placement says it is not. Raises
        :class:`ClaimFailed`, or ``PlacementUnavailable``/``PlacementError``
        (the caller decides whether those are fatal).
        """
        last: Exception | None = None
        tries = 0   # PUTs that count against max_attempts
        # Finding out that the consumer exists costs one PUT that is not a try.
        discovered = known is not None
        while True:
            # What the consumer holds, when it holds anything (a move).
            held = known if known is not None and known.allocations else None
            sent = alongside(held, alloc_req) if held is not None else alloc_req
            generation = known.consumer_generation if known is not None else None
            # A moved consumer keeps its owner: re-owning it is not the scheduler's call.
            owner_project = (held.project_id if held is not None and held.project_id
                             else project_id)
            owner_user = (held.user_id if held is not None and held.user_id else user_id)
            try:
                self.client.put_allocations(
                    instance_uuid, sent, project_id=owner_project, user_id=owner_user,
                    consumer_generation=generation, microversion=microversion,
                    request_id=request_id)
            except pexc.CapacityExceeded as exc:
                metrics.claim_conflict('capacity')
                raise ClaimFailed(CAPACITY_EXCEEDED, exc.detail or '', known=known) from exc
            except pexc.ProviderGenerationConflict as exc:
                metrics.claim_conflict('provider_generation')
                # Without its traceback: kept in this frame, the traceback (which
                # holds this frame, and through it the whole request) would be a
                # reference cycle that only the paused collector could free.
                last, tries = exc.with_traceback(None), tries + 1
                LOG.debug('provider generation conflict claiming %s (attempt %d/%d)',
                          instance_uuid, tries, self.max_attempts)
                if tries >= self.max_attempts:
                    break
                # Full jitter so that competing schedulers spread out.
                self.sleep(self.rng.uniform(0, self.retry_delay * 2 ** tries))
                continue
            except pexc.ConsumerGenerationConflict as exc:
                metrics.claim_conflict('consumer')
                last = exc.with_traceback(None)   # see above
                if discovered:
                    tries += 1
                    if tries >= self.max_attempts:
                        break
                discovered = True
                # Placement's answer is the fresh state to build the next PUT on.
                known = self._read_consumer(instance_uuid, exc, request_id)
                if known.allocations:
                    LOG.info('instance %s already holds allocations on %d provider(s): '
                             'claiming alongside them (a move)', instance_uuid,
                             len(known.allocations))
                continue
            return Claim(instance_uuid, sent.allocations, (generation or 0) + 1, owner_project,
                         owner_user, previous=held)
        raise ClaimFailed('concurrent updates', str(last), known=known) from last

    def _read_consumer(self, instance_uuid: str, conflict: pexc.ConsumerGenerationConflict,
                       request_id: str | None) -> ConsumerAllocations:
        current = self.client.get_allocations(instance_uuid, request_id=request_id)
        if current.allocations or current.consumer_generation is not None:
            return current
        # Placement's orphan-consumer trap (placement/handlers/allocation.py,
        # _set_allocations_for_consumer): a PUT refused with 400 leaves an empty
        # consumer behind whose generation GET does not show; the conflict's
        # text names it.
        return ConsumerAllocations(instance_uuid, {}, conflict.expected)


def undo_claim(client: PlacementAPI, claim: Claim, *, request_id: str | None, verify: bool) -> None:
    """Give back what ``claim`` took.

    A consumer the claim created is deleted (``DELETE`` with a microversion);
    with ``verify`` (a later retry) only if it still holds exactly what the
    claim wrote. A moved consumer gets its previous allocations back with a
    ``PUT`` at the generation the claim left, so a consumer someone changed
    since is left alone. Raises ``PlacementError`` when Placement could not be
    told (the caller retries later); a restore Placement refuses for good is
    logged and dropped.
    """
    if claim.previous is None:
        if verify:
            current = client.get_allocations(claim.consumer_uuid, request_id=request_id)
            if not _same(current.allocations, claim.allocations):
                LOG.warning('allocations of %s changed since this service claimed them; '
                            'leaving them as they are', claim.consumer_uuid)
                return
        client.delete_allocations(claim.consumer_uuid, request_id=request_id)
        return
    previous = claim.previous
    restore = AllocationRequest(allocations={rp: dict(r) for rp, r in
                                             previous.allocations.items()})
    # What the next PUT is made at: None when a re-read finds no consumer generation.
    generation: int | None = claim.generation
    for _ in range(2):
        try:
            client.put_allocations(
                claim.consumer_uuid, restore, project_id=previous.project_id or claim.project_id,
                user_id=previous.user_id or claim.user_id, consumer_generation=generation,
                request_id=request_id)
            LOG.info('restored the previous allocations of %s', claim.consumer_uuid)
            return
        except pexc.ConsumerGenerationConflict:
            current = client.get_allocations(claim.consumer_uuid, request_id=request_id)
            if _same(current.allocations, previous.allocations):
                return  # restored already (an earlier answer was lost)
            if not _same(current.allocations, claim.allocations):
                LOG.warning('allocations of %s changed since this service claimed them; '
                            'not restoring its previous allocations over them',
                            claim.consumer_uuid)
                return
            generation = current.consumer_generation
        except (pexc.CapacityExceeded, pexc.BadRequest) as exc:
            LOG.error('could not restore the previous allocations of %s: %s; it keeps the '
                      'allocations of the failed move', claim.consumer_uuid, exc)
            return
    LOG.error('could not restore the previous allocations of %s: its generation keeps '
              'changing', claim.consumer_uuid)


def _same(a: Allocations, b: Allocations) -> bool:
    return ({rp: dict(r) for rp, r in a.items() if r}
            == {rp: dict(r) for rp, r in b.items() if r})


class PendingCleanups:
    """Claims this service must undo, retried until Placement agrees.

    An undo that fails (Placement down mid-request) is not forgotten: it stays
    here and a background thread retries it every ``interval`` seconds. The
    set lives in memory only: a restart loses it, which ``doc/`` lists among
    what is out of scope for this release.
    """

    def __init__(self, client: PlacementAPI, *, interval: float = 5.0):
        self._client = client
        self._interval = interval
        # consumer -> the claim to undo, or None for a plain delete
        self._pending: dict[str, Claim | None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def undo_now_or_later(self, claims: list[Claim], *, request_id: str | None,
                          verify: bool = False) -> list[str]:
        """Undo each claim; returns the consumers left for later. With ``verify``
        a created consumer is deleted only if it holds exactly what the claim wrote
        (for a claim whose answer was lost: it may never have landed)."""
        return self._now_or_later([(c.consumer_uuid, c) for c in claims], request_id,
                                  verify=verify)

    def delete_now_or_later(self, consumer_uuids: list[str], *,
                            request_id: str | None) -> list[str]:
        """Delete each consumer's allocations; returns those left for later."""
        return self._now_or_later([(c, None) for c in consumer_uuids], request_id)

    def _now_or_later(self, items: list[tuple[str, Claim | None]],
                      request_id: str | None, *, verify: bool = False) -> list[str]:
        left: dict[str, Claim | None] = {}
        for consumer, claim in items:
            try:
                self._undo(consumer, claim, request_id=request_id, verify=verify)
            except pexc.PlacementError as exc:
                LOG.warning('could not give back the allocations of %s now (%s); will retry',
                            consumer, type(exc).__name__)
                left[consumer] = claim
        if left:
            with self._lock:
                self._pending.update(left)
            self._ensure_thread()
        return list(left)

    def _undo(self, consumer: str, claim: Claim | None, *, request_id: str | None,
              verify: bool) -> None:
        if claim is None:
            self._client.delete_allocations(consumer, request_id=request_id)
        else:
            undo_claim(self._client, claim, request_id=request_id, verify=verify)

    def pending(self) -> set[str]:
        with self._lock:
            return set(self._pending)

    def retry_once(self) -> None:
        with self._lock:
            items = sorted(self._pending.items())
        for consumer, claim in items:
            try:
                # Time has passed: a created consumer is deleted only if it still
                # holds what this service wrote.
                self._undo(consumer, claim, request_id=None, verify=True)
            except pexc.PlacementError:
                return  # Placement still unhappy: try again next round
            with self._lock:
                self._pending.pop(consumer, None)
            LOG.info('gave back the allocations of %s left by an earlier rollback', consumer)

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
