"""The routed networks request filter: hosts on a segment of each requested network.

Nova (``[scheduler] query_placement_for_routed_network_aggregates``) asks
Neutron for the segments of each requested network (or of the subnet of a
requested port's fixed IP) and Placement for the aggregates of each segment's
resource provider, then requires one of them per network.

What can be known here without Neutron:

* a segment's aggregate. Neutron registers segment ``S`` in Placement as a
  provider of uuid ``S`` and creates the Nova host aggregate ``Neutron segment
  id S`` for it, which Nova mirrors into the Placement aggregate of the same
  uuid and announces in an ``update_aggregates`` cast. So the HostCatalog maps
  segment -> aggregate exactly as Placement would (:func:`segment_aggregates`).
* not which segments a network has, nor which subnet a port's fixed IP is on:
  only Neutron knows. A catalog may offer it (``network_segments(network_id)``;
  the HostCatalog does not today). Without it, a request naming a network or
  port cannot be honoured, and with the option on it fails with a reason that
  says so, rather than pass hosts the filter cannot judge.

Requests without networks, or with Nova's ``auto`` / ``none`` network
requests, are unconstrained, as in Nova.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from scheduler.exceptions import RequestFilterFailed
from scheduler.objects.spec import RequestSpec
from scheduler.request.filters import AggregateSource, option, require_aggregates

LOG = logging.getLogger(__name__)

OPTION = 'query_placement_for_routed_network_aggregates'
# The name Neutron gives the Nova host aggregate of a segment (neutron.services.segments).
SEGMENT_AGGREGATE_NAME = 'Neutron segment id {segment}'
# NetworkRequest.network_id values that name no network (auto-allocation, no network).
_NOT_A_NETWORK = ('auto', 'none')


@runtime_checkable
class NetworkSegmentSource(Protocol):
    def network_segments(self, network_id: str) -> Sequence[str]:
        """The segment ids of the network's subnets (empty: not a routed network)."""


def routed_networks_filter(spec: RequestSpec, catalog: AggregateSource, conf: Any) -> bool:
    """One OR-set of segment aggregates per requested network, ANDed.

    Raises RequestFilterFailed when a network's segments, or a segment's
    aggregate, cannot be found.
    """
    if not option(conf, OPTION):
        return False
    acted = False
    for request in spec.requested_networks:
        port_id, network_id = request.get('port_id'), request.get('network_id')
        if port_id:
            raise RequestFilterFailed(
                f'[scheduler] {OPTION} is on, but the segment of requested port {port_id} is '
                f'known only to Neutron, which this scheduler does not query; turn the option '
                f'off or let nova-compute pick the segment')
        if not network_id or network_id in _NOT_A_NETWORK:
            continue
        if not isinstance(catalog, NetworkSegmentSource):
            raise RequestFilterFailed(
                f'[scheduler] {OPTION} is on, but the segments of requested network '
                f'{network_id} are known only to Neutron, which this scheduler does not query; '
                f'turn the option off or let nova-compute pick the segment')
        segments = list(catalog.network_segments(network_id))
        if not segments:
            continue  # not a routed network
        aggregates = segment_aggregates(catalog, segments)
        require_aggregates(spec, aggregates)
        LOG.debug('routed_networks_filter: network %s -> aggregates %s', network_id,
                  ', '.join(sorted(aggregates)))
        acted = True
    return acted


def segment_aggregates(catalog: AggregateSource, segments: Sequence[str]) -> list[str]:
    """The aggregate uuids of ``segments``; RequestFilterFailed naming a segment that has
    none (Nova: "Aggregates not found for the network")."""
    by_name = {}
    for aggregate in catalog.all_aggregates():
        by_name.setdefault(aggregate.name, []).append(aggregate.uuid)
    uuids: list[str] = []
    for segment in segments:
        found = by_name.get(SEGMENT_AGGREGATE_NAME.format(segment=segment))
        if not found:
            raise RequestFilterFailed(
                f'Aggregates not found for the segment {segment}: no host aggregate named '
                f'{SEGMENT_AGGREGATE_NAME.format(segment=segment)!r} is known (from the hosts '
                f'file or an update_aggregates cast)')
        uuids.extend(found)
    return sorted(set(uuids))
