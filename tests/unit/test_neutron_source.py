"""The read-only Neutron source: the GETs Nova's network API sends, read as Nova reads them."""
from __future__ import annotations

import pytest

from scheduler.catalog.neutron import NeutronError, NeutronNetworks, PortSegments

NETWORK, PORT, SUBNET, SEGMENT = 'net-1', 'port-1', 'subnet-1', 'segment-1'
SEGMENT_EXTENSION = {'extensions': [{'alias': 'segment', 'name': 'Segment'}]}


class Answer:
    def __init__(self, status: int, body):
        self.status_code, self._body = status, body

    def json(self):
        return self._body


class Neutron:
    """A keystoneauth Adapter's get(), answering from ``routes`` (path -> body)."""

    def __init__(self, routes):
        self.routes = routes
        self.asked = []

    def get(self, url, params=None, **_):
        self.asked.append((url, params))
        if url not in self.routes:
            return Answer(404, {'NeutronError': {'message': 'not found'}})
        return Answer(200, self.routes[url])


def source(routes, clock=lambda: 0.0):
    return NeutronNetworks(Neutron(routes), connect_timeout=1, read_timeout=1,
                           extensions_cache_time=600, clock=clock)


def test_a_network_s_segments_are_its_subnets_segment_ids():
    networks = source({'/v2.0/extensions': SEGMENT_EXTENSION,
                       '/v2.0/subnets': {'subnets': [{'segment_id': 'a'}, {'segment_id': None},
                                                     {'segment_id': 'b'}]}})

    assert networks.network_segments(NETWORK) == ['a', 'b']
    assert networks._adapter.asked[-1] == ('/v2.0/subnets', {'network_id': NETWORK,
                                                            'fields': 'segment_id'})


def test_without_the_segment_extension_no_network_is_routed():
    assert source({'/v2.0/extensions': {'extensions': []}}).network_segments(NETWORK) == []


def test_a_port_with_a_fixed_ip_is_on_its_subnet_s_segment():
    networks = source({
        '/v2.0/extensions': SEGMENT_EXTENSION,
        f'/v2.0/ports/{PORT}': {'port': {'network_id': NETWORK,
                                         'fixed_ips': [{'subnet_id': SUBNET}]}},
        f'/v2.0/subnets/{SUBNET}': {'subnet': {'segment_id': SEGMENT}}})

    assert networks.port_segments(PORT) == PortSegments(NETWORK, SUBNET, (SEGMENT,))


def test_a_port_without_a_fixed_ip_stands_for_its_network():
    networks = source({
        '/v2.0/extensions': SEGMENT_EXTENSION,
        f'/v2.0/ports/{PORT}': {'port': {'network_id': NETWORK, 'fixed_ips': []}},
        '/v2.0/subnets': {'subnets': [{'segment_id': 'a'}, {'segment_id': 'b'}]}})

    assert networks.port_segments(PORT) == PortSegments(NETWORK, None, ('a', 'b'))


def test_the_extension_list_is_asked_for_once_per_cache_time():
    now = [0.0]
    networks = source({'/v2.0/extensions': SEGMENT_EXTENSION, '/v2.0/subnets': {'subnets': []}},
                      clock=lambda: now[0])
    for _ in range(3):
        networks.network_segments(NETWORK)
    now[0] = 601.0
    networks.network_segments(NETWORK)

    asked = [url for url, _ in networks._adapter.asked]
    assert asked.count('/v2.0/extensions') == 2


def test_an_unknown_port_is_an_error_not_an_empty_answer():
    with pytest.raises(NeutronError, match=f'GET /v2.0/ports/{PORT}: HTTP 404'):
        source({'/v2.0/extensions': SEGMENT_EXTENSION}).port_segments(PORT)
