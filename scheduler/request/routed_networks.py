"""The routed networks request filter: hosts on a segment of each requested network.

Nova (``[scheduler] query_placement_for_routed_network_aggregates``) asks
Neutron for the segments of each requested network (or for the segment of the
subnet of a requested port's fixed IP) and Placement for the aggregates of each
segment's resource provider (Neutron registers segment ``S`` as provider ``S``
in an aggregate of the hosts it reaches), then requires one of them per network.

This filter does the same through what the request filters are given:

* segments, from a source that offers :class:`NetworkSegmentSource` (the
  ``[neutron]`` source, :class:`RoutedNetworkSources`); without one, a request
  naming a network or port cannot be honoured, and with the option on it fails
  with a reason that says so, rather than pass hosts the filter cannot judge;
* a segment's aggregates, from Placement when the source offers
  :class:`SegmentAggregateSource`; otherwise from the Nova host aggregate named
  ``Neutron segment id S`` that Neutron creates and Nova casts to schedulers.

Requests without networks, or with Nova's ``auto`` / ``none`` network
requests, are unconstrained, as in Nova.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from placement_client.api import PlacementAPI
from placement_client.exceptions import PlacementError
from scheduler.catalog.neutron import NeutronError, PortSegments
from scheduler.exceptions import RequestFilterFailed
from scheduler.objects.spec import Aggregate, RequestSpec
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

    def port_segments(self, port_id: str) -> PortSegments:
        """The segment its fixed IP's subnet is on, else its network's segments."""


@runtime_checkable
class SegmentAggregateSource(Protocol):
    def segment_aggregates(self, segments: Sequence[str]) -> list[str]:
        """The aggregate uuids of the segments' providers; RequestFilterFailed naming a
        segment that has none."""


class RoutedNetworkSources:
    """What the request filters read: the HostCatalog's aggregates, Neutron's segments
    (:class:`~scheduler.catalog.neutron.NeutronNetworks`) and Placement's aggregates of
    segment providers."""

    def __init__(self, catalog: AggregateSource, neutron: NetworkSegmentSource,
                 placement: PlacementAPI):
        self._catalog = catalog
        self._neutron = neutron
        self._placement = placement

    def aggregates_with_metadata(self, key: str, value: str | None = None) -> list[Aggregate]:
        return self._catalog.aggregates_with_metadata(key, value)

    def all_aggregates(self) -> list[Aggregate]:
        return self._catalog.all_aggregates()

    def network_segments(self, network_id: str) -> Sequence[str]:
        try:
            return self._neutron.network_segments(network_id)
        except NeutronError as e:
            raise RequestFilterFailed(f'Failed to get segment IDs for network '
                                      f'{network_id} ({e})') from e

    def port_segments(self, port_id: str) -> PortSegments:
        try:
            return self._neutron.port_segments(port_id)
        except NeutronError as e:
            raise RequestFilterFailed(f'Failed to get the segment of port {port_id} '
                                      f'({e})') from e

    def segment_aggregates(self, segments: Sequence[str]) -> list[str]:
        uuids: list[str] = []
        for segment in segments:
            try:
                found = self._placement.get_provider_aggregates(segment)
            except PlacementError as e:
                raise RequestFilterFailed(f'Failed to find aggregate related to segment '
                                          f'{segment} (Placement: HTTP {e.status})') from e
            if not found:
                raise RequestFilterFailed(f'Failed to find aggregate related to segment '
                                          f'{segment}')
            uuids.extend(found)
        return sorted(set(uuids))


def routed_networks_filter(spec: RequestSpec, catalog: AggregateSource, conf: Any) -> bool:
    """One OR-set of segment aggregates per requested network, ANDed.

    Raises RequestFilterFailed when a network's segments, or a segment's
    aggregate, cannot be found.
    """
    if not option(conf, OPTION):
        return False
    acted = False
    source = catalog if isinstance(catalog, NetworkSegmentSource) else None
    for request in spec.requested_networks:
        port_id, network_id = request.get('port_id'), request.get('network_id')
        if not port_id and (not network_id or network_id in _NOT_A_NETWORK):
            continue
        if source is None:
            what = (f'segment of requested port {port_id} is' if port_id else
                    f'segments of requested network {network_id} are')
            raise RequestFilterFailed(
                f'[scheduler] {OPTION} is on, but the {what} known only to Neutron, which '
                f'this scheduler does not query ([neutron] is not configured); turn the '
                f'option off or configure [neutron]')
        if port_id:
            port = source.port_segments(port_id)
            segments, network_id = list(port.segments), port.network_id
            # Nova's words: a port with a fixed IP stays on its subnet's segment.
            where = f'subnet {port.subnet_id}' if port.subnet_id else f'network {network_id}'
        else:
            # Without a port the request names a network (it was skipped otherwise).
            assert network_id is not None
            segments, where = list(source.network_segments(network_id)), f'network {network_id}'
        if not segments:
            continue  # not a routed network
        try:
            aggregates = (catalog.segment_aggregates(segments)
                          if isinstance(catalog, SegmentAggregateSource)
                          else segment_aggregates(catalog, segments))
        except RequestFilterFailed as e:
            raise RequestFilterFailed(f'Aggregates not found for the {where} ({e})') from e
        require_aggregates(spec, aggregates)
        LOG.debug('routed_networks_filter: %s -> aggregates %s',
                  f'port {port_id}' if port_id else f'network {network_id}',
                  ', '.join(sorted(aggregates)))
        acted = True
    return acted


def segment_aggregates(catalog: AggregateSource, segments: Sequence[str]) -> list[str]:
    """The aggregate uuids of ``segments``; RequestFilterFailed naming a segment that has
    none (Nova: "Aggregates not found for the network")."""
    by_name: dict[str, list[str]] = {}
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
