"""Stage ``claim``: the host an instance gets, claimed in Placement.

The ordered hosts are walked in turn; a host none of whose candidates still
fits (earlier instances of the request used it) is skipped; up to
``[scheduler] max_claim_candidates_per_host`` of its candidates are tried with a
``PUT /allocations`` each (:mod:`scheduler.pipeline.claimer`: retries, moves, lost answers).
A claim that makes an anti-affinity group share a host is undone and the next
host tried (:mod:`scheduler.pipeline.group_check`). Without instance uuids nothing is
claimed: the first fitting candidate is the answer.

An order worked out from the provider view may end at a refusal for capacity
(:class:`Walk`): the view was behind on that host, and likely on the hosts the
order goes on to, so the caller orders them again from the view as it is now
(:func:`scheduler.pipeline.decide.decide`). It ends the same way, without the
round trip, when the view itself no longer shows room on the host at the moment
of the claim: the service's other workers claimed it since the hosts were
ordered (:attr:`Claiming.still_fits`).

Undoing is here too (:meth:`Claiming.rollback`); when to undo is the manager's
all-or-nothing rule (doc/design.md#claims-all-or-nothing).
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from oslo_config import cfg

from placement_client import exceptions as pexc
from placement_client.client import ALLOCATION_CANDIDATES_MICROVERSION
from placement_client.models import AllocationRequest, ConsumerAllocations
from scheduler import exceptions as exc
from scheduler import metrics
from scheduler.context import RequestContext
from scheduler.explain import InstanceAttempt
from scheduler.host_state import HostState
from scheduler.host_table import HostView
from scheduler.objects.spec import RequestSpec
from scheduler.pipeline import claimer as claims_mod
from scheduler.pipeline.failures import log_placement_failure, placement_failure, short
from scheduler.pipeline.group_check import (
    CHECK_FAILED_REASON,
    GroupCheckFailed,
    GroupClaimCheck,
    GroupRaceLost,
)
from scheduler.pipeline.spread import Spread

LOG = logging.getLogger(__name__)

#: (service hosts) -> those whose compute service is disabled or down now.
UnusableHosts = Callable[[Sequence[str]], Collection[str]]
#: Why a host that passed the filters was passed over just before it was chosen.
SERVICE_GONE = 'compute service disabled or down since the services were read'
#: Hosts after the one about to be claimed whose compute services are read with it:
#: the answer's alternates come from them (and a failed claim moves on to them), so
#: that the answer needs no read of its own, one round trip fewer in a worker's turn.
SERVICES_AHEAD = 8
#: Why a host was passed over at the moment of its claim: the provider view, with the
#: claims the service's other workers made since the hosts were ordered, shows it
#: without room for the request any more (:attr:`Claiming.still_fits`).
TAKEN_MEANWHILE = 'taken by other claims since the hosts were ordered'


@dataclass
class Placed:
    instance_uuid: str | None
    host: HostState
    alloc_req: AllocationRequest | None
    #: the claim made for the instance; None when nothing was claimed
    claim: claims_mod.Claim | None = None
    #: Service hosts whose compute services were read for this instance, during the
    #: request, and whether each was disabled or down (:attr:`Walk.services`).
    services: Mapping[str, bool] = field(default_factory=dict)


class OrderStale(Exception):
    """A claim was refused for capacity, by Placement or by the view before it was
    sent, and the walk was to stop there (:attr:`Walk.stop_when_refused`): the hosts
    may be ordered afresh."""


@dataclass
class Walk:
    """One instance's walk of the hosts, across the orders it is given."""

    #: The hosts its claims failed on: a new order does not offer them again.
    tried: set[str] = field(default_factory=set)
    #: What the claims learnt about the consumer (e.g. that it holds allocations:
    #: a move), so that the next candidate starts from it.
    known: ConsumerAllocations | None = None
    #: Whether a refusal for capacity ends this order's walk (:class:`OrderStale`).
    stop_when_refused: bool = False
    #: Service hosts whose compute services were read during the walk
    #: (:attr:`Claiming.unusable_hosts`), and whether each was disabled or down.
    services: dict[str, bool] = field(default_factory=dict)


class Claiming:
    def __init__(self, conf: cfg.ConfigOpts, claimer: claims_mod.Claimer,
                 cleanups: claims_mod.PendingCleanups,
                 group_check: GroupClaimCheck,
                 on_capacity_refused: Callable[[Mapping[str, Mapping[str, int]]], None]
                 | None = None,
                 spread: Spread | None = None,
                 on_claimed: Callable[[Mapping[str, Mapping[str, int]]], None] | None = None,
                 unusable_hosts: UnusableHosts | None = None,
                 still_fits: Callable[[Mapping[str, Mapping[str, int]]], bool] | None = None):
        self.conf = conf
        self.claimer = claimer
        self.cleanups = cleanups
        self.group_check = group_check
        #: Told what Placement refused to claim for capacity (the provider view counts
        #: it as used and reads again).
        self.on_capacity_refused = on_capacity_refused
        #: Told which hosts this worker's claims are in flight on (pipeline/spread.py).
        self.spread = spread
        #: Told of each new claim Placement accepted (not a move's), before the host
        #: stops counting as in flight: the provider view shows it from then on, so
        #: that no request of this worker sees the host as it was before the claim.
        self.on_claimed = on_claimed
        #: Which of some hosts' compute services are disabled or down now, when the
        #: state the hosts were judged on may be older than the request
        #: (NovaSync.unusable_hosts); a host about to be chosen is checked first.
        self.unusable_hosts = unusable_hosts
        #: Whether an allocation request still fits the provider view as it is now,
        #: the service's other workers' claims since it was read included
        #: (ProviderView.still_fits). Asked only while a refusal would end the walk,
        #: where the answer no is such a refusal without its round trip to Placement.
        self.still_fits = still_fits

    def claim_first(self, context: RequestContext, spec: RequestSpec,
                    ordered: Sequence[HostState], instance_uuid: str | None,
                    attempt: InstanceAttempt, walk: Walk | None = None, *,
                    claim: bool,
                    in_flight: Callable[[], contextlib.AbstractContextManager[object]]
                    = contextlib.nullcontext) -> Placed | None:
        """The first host, in order and not tried before on ``walk``, that can be had;
        None when none can. Raises :class:`OrderStale` at a refusal for capacity,
        Placement's or the view's (:attr:`still_fits`), when the walk says to stop
        there. ``in_flight``: what a claim is made in,
        e.g. whether it gives the request's turn to decide up meanwhile
        (scheduler/memory/turns.py); by default it keeps it."""
        per_host = self.conf.scheduler.max_claim_candidates_per_host
        project_id = spec.project_id or context.project_id
        user_id = spec.user_id or context.user_id
        walk = walk if walk is not None else Walk()
        for index, host in enumerate(ordered):
            if host.uuid in walk.tried:
                continue
            fitting = [a for a in host.allocation_candidates if host.fits(a)]
            if not fitting:
                attempt.claim_failures['full after earlier instances of this request'] += 1
                continue
            if self._service_gone(ordered, index, walk):
                attempt.claim_failures[SERVICE_GONE] += 1
                walk.tried.add(host.uuid)
                continue
            if not claim:
                attempt.claimed_host = host.host
                return Placed(instance_uuid, host, fitting[0], services=walk.services)
            # Claims are made only for the instance uuids the caller gave.
            assert instance_uuid is not None
            refusals = attempt.claim_failures[claims_mod.CAPACITY_EXCEEDED]
            with in_flight(), \
                    (self.spread.claiming(host.uuid) if self.spread is not None
                     else contextlib.nullcontext()):
                candidates = fitting[:per_host]
                if walk.stop_when_refused and self.still_fits is not None:
                    candidates = [a for a in candidates if self.still_fits(a.allocations)]
                    if not candidates:
                        # The host is not tried: once the orders are spent, a claim
                        # goes to Placement whatever the view says, and only a
                        # refusal of Placement's ends in NoValidHost.
                        attempt.claim_failures[TAKEN_MEANWHILE] += 1
                        metrics.PROVIDER_VIEW_CLAIMS_WITHHELD.inc()
                        raise OrderStale(host.host)
                placed, walk.known = self._claim_on(
                    context, spec, host, candidates, instance_uuid, attempt,
                    project_id=project_id, user_id=user_id, known=walk.known)
                made = placed.claim if placed is not None else None
                if made is not None and not made.is_move and self.on_claimed is not None:
                    self.on_claimed(made.allocations)
            if placed is not None:
                placed.services = walk.services
                return placed
            walk.tried.add(host.uuid)
            if (walk.stop_when_refused
                    and attempt.claim_failures[claims_mod.CAPACITY_EXCEEDED] > refusals):
                raise OrderStale(host.host)
        return None

    def _service_gone(self, ordered: Sequence[HostState], index: int, walk: Walk) -> bool:
        """Whether the compute service of ``ordered[index]``'s host is disabled or down
        now; read with those of the next :data:`SERVICES_AHEAD` hosts in ``ordered``
        that were not read on ``walk`` yet, unless it was read on it (during this
        request) already."""
        if self.unusable_hosts is None:
            return False
        known, host = walk.services, ordered[index].host
        if host not in known:
            # Their names, not their HostStates: a state built only for this was a
            # fifth of the look-ahead's time in a worker's turn at 50,000 hosts.
            stop = index + 1 + SERVICES_AHEAD
            ahead = (ordered.host_names(index + 1, stop) if isinstance(ordered, HostView)
                     else [later.host for later in ordered[index + 1:stop]])
            wanted = list(dict.fromkeys(name for name in (host, *ahead) if name not in known))
            gone = self.unusable_hosts(wanted)
            known.update((name, name in gone) for name in wanted)
        return known[host]

    def _claim_on(self, context: RequestContext, spec: RequestSpec, host: HostState,
                  candidates: Sequence[AllocationRequest], instance_uuid: str,
                  attempt: InstanceAttempt, *, project_id: str | None, user_id: str | None,
                  known: ConsumerAllocations | None
                  ) -> tuple[Placed | None, ConsumerAllocations | None]:
        """The instance placed on ``host`` with the first of ``candidates`` Placement
        accepts, or None; and what the claims learnt about the consumer."""
        for alloc_req in candidates:
            try:
                made = self.claimer.claim(instance_uuid, alloc_req, project_id=project_id,
                                          user_id=user_id,
                                          microversion=ALLOCATION_CANDIDATES_MICROVERSION,
                                          request_id=context.global_id, known=known)
            except claims_mod.ClaimFailed as e:
                known = e.known
                attempt.claim_failures[e.reason] += 1
                if e.reason == claims_mod.CAPACITY_EXCEEDED and self.on_capacity_refused:
                    self.on_capacity_refused(alloc_req.allocations)
                LOG.debug('claim of %s on %s failed: %s', instance_uuid, host.host, e)
                continue
            except pexc.PlacementUnavailable as e:
                self._forget_lost_claim(context, instance_uuid, alloc_req, known,
                                        project_id=project_id, user_id=user_id)
                log_placement_failure(context, 'claim', e)
                raise exc.NoValidHost(reason=f'Placement unreachable after {e.attempts} '
                                             f'attempts while claiming '
                                             f'({placement_failure(e)})') from e
            except pexc.PlacementError as e:
                attempt.claim_failures[f'Placement error {e.status}'] += 1
                LOG.warning('claim of %s on %s: %s', instance_uuid, host.host, short(e))
                continue
            try:
                self.group_check.after_claim(spec, made, host=host.host,
                                             providers=host.tree_providers,
                                             request_id=context.global_id)
            except GroupRaceLost as e:
                attempt.claim_failures[e.reason] += 1
                # The undo changed the consumer; the next claim re-learns it. A sibling
                # of the group holds this host: try the next host.
                return None, None
            except GroupCheckFailed as e:
                LOG.warning('request %s: %s', context.request_id, e)
                raise exc.NoValidHost(reason=CHECK_FAILED_REASON) from e
            attempt.claimed_host = host.host
            return Placed(instance_uuid, host, alloc_req, made), known
        return None, known

    def rollback(self, context: RequestContext, placed: Sequence[Placed]) -> None:
        """Undo every claim in ``placed`` (now, or later if Placement is away)."""
        made = [p.claim for p in placed if p.claim is not None]
        if not made:
            return
        left = self.cleanups.undo_now_or_later(made, request_id=context.global_id)
        moves = sum(1 for c in made if c.is_move)
        LOG.info('request %s: rolled back %d claim(s)%s%s', context.request_id, len(made),
                 f' ({moves} restored to their previous allocations)' if moves else '',
                 f'; {len(left)} left for retry' if left else '')

    def _forget_lost_claim(self, context: RequestContext, instance_uuid: str,
                           alloc_req: AllocationRequest, known: ConsumerAllocations | None, *,
                           project_id: str | None, user_id: str | None) -> None:
        """Placement went away during a claim: the PUT may have landed anyway.

        For a consumer this request would have created, queue a cleanup that
        deletes it only if it holds exactly what we sent (so nothing someone
        else wrote is touched). A move's claim cannot be told from the
        consumer's own allocations this way; it is logged for the operator.
        """
        if known is not None and known.allocations:
            LOG.warning('Placement went away while claiming the move of %s; if that claim '
                        'landed, the instance holds source and destination allocations',
                        instance_uuid)
            return
        # The generation the claim would have given the consumer (the journal's
        # record of it is undone only at that generation).
        before = known.consumer_generation if known is not None else None
        maybe = claims_mod.Claim(consumer_uuid=instance_uuid,
                                 allocations={rp: dict(r) for rp, r in
                                              alloc_req.allocations.items()},
                                 generation=(before or 0) + 1, project_id=project_id,
                                 user_id=user_id)
        self.cleanups.undo_now_or_later([maybe], request_id=context.global_id, verify=True)


def consume(spec: RequestSpec, placed: Placed) -> None:
    """What the next instance of the request sees: the host's resources used, the
    group's hosts and the request groups' providers updated (as Nova does)."""
    if placed.alloc_req is not None:
        placed.host.consume(placed.alloc_req, placed.instance_uuid)
    group = spec.instance_group
    if group is not None and placed.host.host not in group.hosts:
        group.hosts.append(placed.host.host)
    mappings = placed.alloc_req.mappings if placed.alloc_req is not None else {}
    for rg in spec.requested_resources:
        if rg.requester_id is not None and rg.requester_id in mappings:
            rg.provider_uuids = list(mappings[rg.requester_id])


def spec_checkpoint(spec: RequestSpec) -> Callable[[], None]:
    """A way back to the spec as it was before deciding: what :func:`consume` and
    :func:`~scheduler.pipeline.decide.decide` change of it (the instance uuid, the
    group's hosts, the request groups' providers), for deciding once more."""
    instance_uuid = spec.instance_uuid
    group = spec.instance_group
    group_hosts = list(group.hosts) if group is not None else []
    providers = [list(rg.provider_uuids) for rg in spec.requested_resources]

    def restore() -> None:
        spec.instance_uuid = instance_uuid
        if group is not None:
            group.hosts[:] = group_hosts
        for rg, uuids in zip(spec.requested_resources, providers, strict=True):
            rg.provider_uuids = uuids
    return restore
