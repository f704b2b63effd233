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
and the write is refused by Placement rather than overwritten. A consumer
nova-conductor has since claimed again, or one the user deleted, is left alone.

A consumer Placement still shows as it was *before* the claim is not settled
yet: the dead process's ``PUT`` may still be inside Placement, which finishes a
request whose client has gone. A worker replaced after a kill reads its journal
within a fraction of a second, sooner than a loaded Placement answers a
``PUT``; so such a claim is looked at again until :data:`LANDING_WINDOW` has
passed since it was journaled, and only then left alone as never landed.
"""
from __future__ import annotations

import enum
import logging

from placement_client import exceptions as pexc
from placement_client.api import PlacementAPI
from placement_client.client import ALLOCATION_CANDIDATES_MICROVERSION
from placement_client.models import ConsumerAllocations
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
    #: Placement shows the consumer as it was before the claim: its PUT never
    #: landed, or has not yet (look again until LANDING_WINDOW has passed)
    NOT_LANDED = 'not_landed'
    #: Placement refused the give-back for good (a move's previous allocations no
    #: longer fit); logged, not retried
    REFUSED = 'refused'


#: How long after a claim was journaled its PUT may still land, in seconds. A
#: request still running in Placement a minute after it was sent is past every
#: WSGI server's usual request timeout (Apache's ``Timeout`` 60 s, uWSGI's
#: ``harakiri`` as deployment tools set it, gunicorn's 30 s).
LANDING_WINDOW = 60.0

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
    if _as_before(claim, current):
        return Outcome.NOT_LANDED
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


def _as_before(claim: Claim, current: ConsumerAllocations) -> bool:
    """Whether Placement shows the consumer as it was before ``claim``'s PUT."""
    previous = claim.previous
    if previous is None:
        return not any(current.allocations.values())
    return (current.consumer_generation == previous.consumer_generation
            and same_allocations(current.allocations, previous.allocations))
