"""Claims journaled by a process that died before answering, and how they are undone.

Every ``PUT /allocations`` a request makes is written to the journal first
(:mod:`scheduler.journal`) as the claim it would be: the consumer, what it will
hold, the consumer generation Placement will give it, and what it held before
(a move). A record still live when a worker starts belongs to a request whose
caller never got an answer (the worker that served it was killed, or the whole
service, or the machine).

Such a claim is undone exactly as a roll-back undoes it (a consumer the claim
created loses its allocations, a moved consumer gets its previous ones back),
but only while Placement shows the consumer exactly as the claim left it: the
same allocations at the generation the claim gave it. The give-back itself is
a ``PUT`` at that generation, so a consumer someone changes between the read
and the write is refused by Placement rather than overwritten. A claim whose
``PUT`` never landed, a consumer nova-conductor has since claimed again, or
one the user deleted, is left alone.
"""
from __future__ import annotations

import enum
import logging

from placement_client import exceptions as pexc
from placement_client.api import PlacementAPI
from placement_client.client import ALLOCATION_CANDIDATES_MICROVERSION
from scheduler import exceptions as exc
from scheduler.journal.log import JournalError
from scheduler.journal.requests import RequestJournal
from scheduler.pipeline.claim_state import Claim, claim_record, same_allocations

LOG = logging.getLogger(__name__)


class Outcome(enum.Enum):
    #: the claim was given back
    UNDONE = 'undone'
    #: Placement does not show the claim as it left it: nothing of ours to undo
    LEFT = 'left'
    #: Placement refused the give-back for good (a move's previous allocations no
    #: longer fit); logged, not retried
    REFUSED = 'refused'


#: NoValidHost's reason when a claim could not be journaled (the log has the path).
NOT_JOURNALED = ('the scheduler could not record the claim in its claims journal, so it made '
                 'none')


def write_ahead(journal: RequestJournal, claim: Claim, request_id: str | None) -> None:
    """Journal ``claim`` for the request being served, before its ``PUT``; a claim
    that cannot be journaled is not made (NoValidHost, and the request's earlier
    claims are rolled back as for any NoValidHost)."""
    try:
        journal.write_ahead(claim_record(claim, request_id))
    except JournalError as e:
        LOG.error('request %s: %s', request_id, e)
        raise exc.NoValidHost(reason=NOT_JOURNALED) from e


def undo_if_unchanged(client: PlacementAPI, claim: Claim, *,
                      request_id: str | None) -> Outcome:
    """Give back ``claim`` if the consumer is still exactly as the claim left it.

    Raises ``PlacementError`` when Placement could not be asked or told (try
    again later).
    """
    current = client.get_allocations(claim.consumer_uuid, request_id=request_id)
    if (current.consumer_generation != claim.generation
            or not same_allocations(current.allocations, claim.allocations)):
        return Outcome.LEFT
    restore, project_id, user_id = claim.given_back()
    try:
        # Empty allocations at the consumer's generation: Placement removes them only
        # if nobody has written the consumer since (DELETE has no such condition).
        client.put_allocations(claim.consumer_uuid, restore, project_id=project_id,
                               user_id=user_id, consumer_generation=claim.generation,
                               microversion=ALLOCATION_CANDIDATES_MICROVERSION,
                               request_id=request_id)
    except pexc.ConsumerGenerationConflict:
        return Outcome.LEFT
    except (pexc.CapacityExceeded, pexc.BadRequest) as e:
        LOG.error('could not restore the previous allocations of %s: %s; it keeps the '
                  'allocations of the move whose caller never got an answer',
                  claim.consumer_uuid, e)
        return Outcome.REFUSED
    return Outcome.UNDONE
