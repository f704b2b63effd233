"""Anti-affinity between concurrent requests: a check after each claim.

Placement arbitrates capacity (generations, inventory constraints) but knows
nothing of server groups, so two schedulers placing two members of one
anti-affinity group at the same moment can both pick the same host and both
claims succeed. The ServerGroupAntiAffinityFilter cannot see the other
member either: neither has been reported by a compute host yet.

The check: after a successful ``PUT /allocations/{instance}``, read the
consumers on the chosen host's providers (``GET
/resource_providers/{rp}/allocations``) and count the group's other members
among them. A claim stands only if its last read shows the host within the
group's ``max_server_per_host`` (default 1); otherwise it is given back
(undone as a rollback would) and the caller tries the next host.

Why that is safe, with no lock: take two members that both keep a claim on
one host. Each one's last read came after its own PUT; the later of the two
last reads came after both PUTs, so it saw the other, and that member would
have given its claim back. (For ``max_server_per_host = k``: the last reader
of any k+1 survivors saw all of them.)

Liveness is what the rest is for. Members that PUT before any of them reads
all see each other; if all gave back, all would move to the next host and
collide again. So among the members a read shows, only the ``k`` with the
smallest instance uuids wait and read again (the others give back at once),
and they keep the claim if a later read shows the others gone. A member that
keeps waiting for a sibling that itself kept its claim gives back after
``rereads`` reads. The tie-break changes who waits, never the rule above.
"""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Collection, Iterable, Mapping

from placement_client import exceptions as pexc
from placement_client.api import PlacementAPI
from placement_client.client import MIN_MICROVERSION, error_from_response
from scheduler.filters.affinity import max_server_per_host
from scheduler.objects.spec import InstanceGroup, RequestSpec
from scheduler.pipeline.claimer import Claim, PendingCleanups

LOG = logging.getLogger(__name__)

ANTI_AFFINITY = 'anti-affinity'


class GroupRaceLost(Exception):
    """Another member of the group claimed the same host at the same time; this
    claim was given back. ``reason`` is a short, countable phrase for explain."""

    reason = 'anti-affinity: another member of the group claimed the host concurrently'

    def __init__(self, host: str, siblings: Collection[str]):
        super().__init__(f'{self.reason} (host {host}, members {sorted(siblings)})')
        self.host = host
        self.siblings = frozenset(siblings)


#: What the caller reads when the check could not be made (the log has the detail).
CHECK_FAILED_REASON = ('anti-affinity could not be checked after the claim; the claim was '
                       'given back or will be')


class GroupCheckFailed(Exception):
    """The check could not be made (Placement unreachable while reading), or the
    claim could not be given back at once and is left to the pending cleanups.
    The request must fail now: a later claim for this instance could be undone
    by that cleanup."""


def enforced_group(spec: RequestSpec) -> InstanceGroup | None:
    """The spec's group when it is a hard anti-affinity group; soft policies are weighers."""
    group = spec.instance_group
    if group is None:
        return None
    if group.policy == ANTI_AFFINITY or ANTI_AFFINITY in (group.policies or ()):
        return group
    return None


def siblings_on_host(consumers_by_provider: Mapping[str, Iterable[str]],
                     members: Iterable[str], instance_uuid: str) -> set[str]:
    """The group's other members holding allocations on any of the host's providers."""
    others = set(members) - {instance_uuid}
    found: set[str] = set()
    for consumers in consumers_by_provider.values():
        found.update(others.intersection(consumers))
    return found


def may_wait(instance_uuid: str, siblings: Collection[str], limit: int) -> bool:
    """Whether this member is among the ``limit`` smallest uuids of those seen on the host.

    Every member applies the same order, so in a crowd that saw each other
    exactly ``limit`` wait for the rest to give back.
    """
    return sorted({instance_uuid, *siblings}).index(instance_uuid) < limit


class GroupClaimCheck:
    def __init__(self, client: PlacementAPI, cleanups: PendingCleanups, *, rereads: int = 3,
                 settle_delay: float = 0.1, sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None):
        self._client = client
        self._cleanups = cleanups
        self._rereads = rereads
        # About one Placement round trip: the time a sibling needs to give back.
        self._settle_delay = settle_delay
        self._sleep = sleep
        self._rng = rng or random.Random()

    def after_claim(self, spec: RequestSpec, claim: Claim, *, host: str,
                    providers: Collection[str], request_id: str | None) -> None:
        """Return if ``claim``, just made on ``host`` (whose tree is ``providers``), may stand.

        Raises :class:`GroupRaceLost` after giving the claim back when the host
        holds too many members of the spec's anti-affinity group, and
        :class:`GroupCheckFailed` when the check cannot be made or the claim
        cannot be given back now.
        """
        instance_uuid = claim.consumer_uuid
        group = enforced_group(spec)
        if group is None or not set(group.members) - {instance_uuid}:
            return
        limit = max_server_per_host(group)
        reads = 0
        while True:
            siblings = self._siblings(claim, group, host, providers, request_id)
            reads += 1
            if len(siblings) < limit:
                if reads > 1:
                    LOG.info('instance %s: the other members of group %s left host %s; '
                             'keeping the claim', instance_uuid, group.uuid, host)
                return
            if reads > self._rereads or not may_wait(instance_uuid, siblings, limit):
                break
            # Jittered, growing pauses so that waiting members do not read in step.
            self._sleep(self._settle_delay * (2 ** (reads - 1)) * self._rng.uniform(0.5, 1.0))
        LOG.info('instance %s: group %s already has %s on host %s; giving the claim back',
                 instance_uuid, group.uuid, sorted(siblings), host)
        if not self._give_back(claim, request_id):
            raise GroupCheckFailed(
                f'another member of group {group.uuid} claimed host {host} concurrently and '
                f'the claim could not be given back yet')
        raise GroupRaceLost(host, siblings)

    def _siblings(self, claim: Claim, group: InstanceGroup, host: str,
                  providers: Collection[str], request_id: str | None) -> set[str]:
        try:
            consumers = {rp: self._consumers(rp, request_id) for rp in sorted(providers)}
        except pexc.PlacementError as e:
            outcome = ('was given back' if self._give_back(claim, request_id)
                       else 'is left to the cleanup thread')
            raise GroupCheckFailed(
                f'could not check anti-affinity of group {group.uuid} on host {host} '
                f'({type(e).__name__}); the claim {outcome}') from e
        return siblings_on_host(consumers, group.members, claim.consumer_uuid)

    def _consumers(self, provider_uuid: str, request_id: str | None) -> set[str]:
        url = f'/resource_providers/{provider_uuid}/allocations'
        response = self._client.request('GET', url, microversion=MIN_MICROVERSION,
                                        request_id=request_id)
        if response.status_code != 200:
            raise error_from_response(response, method='GET', url=url)
        try:
            return set(response.json()['allocations'])
        except (ValueError, KeyError, TypeError) as e:
            raise pexc.PlacementError(f'GET {url} answered an unexpected body',
                                      status=response.status_code) from e

    def _give_back(self, claim: Claim, request_id: str | None) -> bool:
        """True once the claim is undone; False when it is left to the pending cleanups."""
        return not self._cleanups.undo_now_or_later([claim], request_id=request_id)
