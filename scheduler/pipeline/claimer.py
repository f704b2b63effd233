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
from typing import Any

from placement_client import exceptions as pexc
from placement_client.api import PlacementAPI
from placement_client.models import AllocationRequest, ConsumerAllocations
from scheduler import metrics
from scheduler.journal.log import JournalError
from scheduler.journal.requests import RequestJournal
from scheduler.pipeline import recovery
from scheduler.pipeline.claim_state import (
    BadRecord,
    Claim,
    Recorded,
    claim_from_record,
    claim_record,
    same_allocations,
)

LOG = logging.getLogger(__name__)

#: ClaimFailed's reason when Placement refused the claim for capacity.
CAPACITY_EXCEEDED = 'capacity exceeded'

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
    #: Told of each claim just before its ``PUT`` (the claims journal): a claim
    #: whose request is never answered is undone from what it was told.
    write_ahead: Callable[[Claim, str | None], None] | None = None

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
            # What the consumer holds once this PUT lands, and what undoing it takes.
            landed = Claim(instance_uuid, sent.allocations, (generation or 0) + 1,
                           owner_project, owner_user, previous=held)
            if self.write_ahead is not None:
                self.write_ahead(landed, request_id)
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
                # Full jitter so that competing schedulers spread out. The request
                # keeps its turn (scheduler/memory/turns.py): its claim is in flight
                # on the host, and this worker's next claim there would wait for it.
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
            return landed
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


class NotLandedYet(Exception):
    """Placement shows the consumer as it was before the claim: its PUT may still
    land (``recovery.LANDING_WINDOW``), so whether there is anything to give back
    is not known yet."""


def undo_claim(client: PlacementAPI, claim: Claim, *, request_id: str | None, verify: bool) -> None:
    """Give back what ``claim`` took.

    A consumer the claim created is deleted (``DELETE`` with a microversion);
    with ``verify`` (a later retry, or a claim whose answer was lost) only if it
    still holds exactly what the claim wrote, and :class:`NotLandedYet` when it
    holds nothing. A moved consumer gets its previous allocations back with a
    ``PUT`` at the generation the claim left, so a consumer someone changed
    since is left alone. Raises ``PlacementError`` when Placement could not be
    told (the caller retries later); a restore Placement refuses for good is
    logged and dropped.
    """
    if claim.previous is None:
        if verify:
            current = client.get_allocations(claim.consumer_uuid, request_id=request_id)
            if not any(current.allocations.values()):
                raise NotLandedYet(claim.consumer_uuid)
            if not same_allocations(current.allocations, claim.allocations):
                LOG.warning('allocations of %s changed since this service claimed them; '
                            'leaving them as they are', claim.consumer_uuid)
                return
        client.delete_allocations(claim.consumer_uuid, request_id=request_id)
        return
    previous = claim.previous
    restore, project_id, user_id = claim.given_back()
    # What the next PUT is made at: None when a re-read finds no consumer generation.
    generation: int | None = claim.generation
    for _ in range(2):
        try:
            client.put_allocations(
                claim.consumer_uuid, restore, project_id=project_id, user_id=user_id,
                consumer_generation=generation, request_id=request_id)
            LOG.info('restored the previous allocations of %s', claim.consumer_uuid)
            return
        except pexc.ConsumerGenerationConflict:
            current = client.get_allocations(claim.consumer_uuid, request_id=request_id)
            if same_allocations(current.allocations, previous.allocations):
                return  # restored already (an earlier answer was lost)
            if not same_allocations(current.allocations, claim.allocations):
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


class PendingCleanups:
    """Claims this service must undo, retried until Placement agrees.

    An undo that fails (Placement down mid-request) is not forgotten: it stays
    here and a background thread retries it every ``interval`` seconds. With a
    journal, each such claim is kept in it too, and so are the claims a dead
    process left there (:meth:`recover`): whatever is killed, the claims of a
    request nobody answered are undone once a worker runs again.
    """

    def __init__(self, client: PlacementAPI, *, interval: float = 5.0,
                 journal: RequestJournal | None = None, now: Callable[[], float] = time.time):
        self._client = client
        self._interval = interval
        self._journal = journal
        self._now = now
        # consumer -> the claim to undo, or None for a plain delete
        self._pending: dict[str, Claim | None] = {}
        # consumer -> when its undo was first left for later
        self._since: dict[str, float] = {}
        # consumer -> the journal record of its pending undo
        self._kept: dict[str, int] = {}
        # journal record -> a claim a dead process left, as the record holds it
        self._recovered: dict[int, Recorded] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
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
        """Delete each consumer's allocations; returns those left for later. Not
        journaled: the request flow gives claims back with :meth:`undo_now_or_later`."""
        return self._now_or_later([(c, None) for c in consumer_uuids], request_id)

    def recover(self, records: Mapping[int, Mapping[str, Any]], *,
                max_age: float | None = None) -> None:
        """Undo, in the background and starting now, the claims of journal ``records``
        that a dead process left (each only if Placement still shows it unchanged;
        one it shows as before the claim is looked at again until
        ``recovery.LANDING_WINDOW`` has passed). Records older than ``max_age``
        seconds are dropped instead (doc/reliability.md says why)."""
        now = self._now
        claims: dict[int, Recorded] = {}
        dropped: list[int] = []
        for ident, record in sorted(records.items()):
            try:
                recorded = claim_from_record(record)
            except BadRecord as e:
                LOG.warning('claims journal record %d skipped: %s', ident, e)
                dropped.append(ident)
                continue
            if max_age is not None and now() - recorded.at > max_age:
                LOG.warning('request %s: not giving back the claim of %s: it was made %.0f s '
                            'ago, beyond [claims_journal] max_age; if nobody answered for it, '
                            '`nova-manage placement audit` finds it', recorded.request_id,
                            recorded.claim.consumer_uuid, now() - recorded.at)
                metrics.RECOVERED_CLAIMS.inc(outcome='expired')
                dropped.append(ident)
                continue
            claims[ident] = recorded
        if dropped and self._journal is not None:
            self._journal.drop(dropped)
        if not claims:
            return
        LOG.info('%d claim(s) of requests that were never answered are to be given back',
                 len(claims))
        with self._lock:
            self._recovered.update(claims)
        self._ensure_thread()
        self._wake.set()

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
            except NotLandedYet:
                LOG.info('the claim of %s is not in Placement (yet); looking again until '
                         'it lands or cannot any more', consumer)
                left[consumer] = claim
        if left:
            kept = self._keep(left, request_id)
            now = self._now()
            with self._lock:
                self._pending.update(left)
                for consumer in left:
                    self._since.setdefault(consumer, now)
                replaced = [self._kept[c] for c in kept if c in self._kept]
                self._kept.update(kept)
            if replaced and self._journal is not None:
                self._journal.drop(replaced)
            self._ensure_thread()
        return list(left)

    def _keep(self, left: Mapping[str, Claim | None], request_id: str | None
              ) -> dict[str, int]:
        """Journal the undos left for later; consumer -> record."""
        kept: dict[str, int] = {}
        if self._journal is None:
            return kept
        for consumer, claim in left.items():
            if claim is None:
                continue
            try:
                kept[consumer] = self._journal.keep(claim_record(claim, request_id))
            except JournalError as e:
                # Still retried while this process lives; only a restart forgets it.
                LOG.error('request %s: the undo of %s left for later is not journaled: %s',
                          request_id, consumer, e)
        return kept

    def _undo(self, consumer: str, claim: Claim | None, *, request_id: str | None,
              verify: bool) -> None:
        if claim is None:
            self._client.delete_allocations(consumer, request_id=request_id)
        else:
            undo_claim(self._client, claim, request_id=request_id, verify=verify)

    def pending(self) -> set[str]:
        """The consumers whose undo is waiting for Placement (recovered ones included)."""
        with self._lock:
            return set(self._pending) | {r.claim.consumer_uuid for r in self._recovered.values()}

    def retry_once(self) -> None:
        with self._lock:
            items = sorted(self._pending.items())
            recovered = sorted(self._recovered.items())
        for ident, recorded in recovered:
            claim, request_id = recorded.claim, recorded.request_id
            try:
                outcome = recovery.undo_if_unchanged(self._client, claim,
                                                     request_id=request_id)
            except pexc.PlacementError as exc:
                LOG.warning('could not give back the claim of %s of request %s yet (%s); '
                            'will retry', claim.consumer_uuid, request_id,
                            type(exc).__name__)
                return
            if outcome is recovery.Outcome.NOT_LANDED:
                if self._now() - recorded.at < recovery.LANDING_WINDOW:
                    continue    # its PUT may still land: look again next round
                outcome = recovery.Outcome.LEFT
            with self._lock:
                self._recovered.pop(ident, None)
            if self._journal is not None:
                self._journal.drop([ident])
            metrics.RECOVERED_CLAIMS.inc(outcome=outcome.value)
            LOG.info('request %s: %s', request_id, _RECOVERED[outcome] % claim.consumer_uuid)
        for consumer, pending in items:
            try:
                # Time has passed: a created consumer is deleted only if it still
                # holds what this service wrote.
                self._undo(consumer, pending, request_id=None, verify=True)
                done = 'gave back the allocations of %s left by an earlier rollback'
            except pexc.PlacementError:
                return  # Placement still unhappy: try again next round
            except NotLandedYet:
                with self._lock:
                    since = self._since.get(consumer, self._now())
                if self._now() - since < recovery.LANDING_WINDOW:
                    continue    # it may still land: look again next round
                done = ('Placement shows nothing of the claim of %s (it never landed, or an '
                        'earlier give-back whose answer was lost took it): nothing to give back')
            with self._lock:
                if self._pending.get(consumer) is pending:
                    del self._pending[consumer]
                    self._since.pop(consumer, None)
                kept = self._kept.pop(consumer, None)
            if kept is not None and self._journal is not None:
                self._journal.drop([kept])
            LOG.info(done, consumer)

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
        while not self._stop.is_set():
            # Recovered claims are tried at once; roll-backs that just failed
            # after an interval.
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.retry_once()
            with self._lock:
                if not self._pending and not self._recovered:
                    self._thread = None
                    return

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()


_RECOVERED = {
    recovery.Outcome.UNDONE: 'gave back the claim of %s, made by a process that died '
                             'before answering',
    recovery.Outcome.LEFT: 'left the allocations of %s alone: Placement no longer shows them '
                           'as the unanswered claim left them',
    recovery.Outcome.REFUSED: 'could not give back the claim of %s: Placement refused the '
                              'previous allocations',
}
