"""SimpleCIDRAffinityFilter: with the build_near_host_ip hint the host's address must
be in the hinted network."""
from __future__ import annotations

import ipaddress
import logging

import pytest

from scheduler.filters.cidr_affinity import (
    HOST_IP_UNKNOWN,
    InvalidHint,
    SimpleCIDRAffinityFilter,
    near_network,
)
from tests.builders import make_host, make_spec

LOGGER = 'scheduler.filters.cidr_affinity'


def verdict(host_ip, **hints):
    result = SimpleCIDRAffinityFilter().filter_result(make_host('cn1', host_ip=host_ip),
                                                      make_spec(hints=hints))
    return result.passed, result.reason


# (host ip, hints) -> (passed, reason)
CASES = [
    pytest.param('10.0.0.9', {}, (True, None), id='no hint: every host passes'),
    pytest.param('10.0.0.9', {'cidr': '/8'}, (True, None),
                 id='cidr alone is no hint'),
    pytest.param('10.0.0.200', {'build_near_host_ip': '10.0.0.5'}, (True, None),
                 id='the default network is the /24 around the address'),
    pytest.param('10.0.1.1', {'build_near_host_ip': '10.0.0.5'},
                 (False, 'host IP address is not in 10.0.0.0/24 (build_near_host_ip hint)'),
                 id='outside the /24 fails'),
    pytest.param('10.0.1.1', {'build_near_host_ip': '10.0.0.5', 'cidr': '/16'}, (True, None),
                 id='cidr widens the network'),
    pytest.param('10.0.0.6', {'build_near_host_ip': '10.0.0.5', 'cidr': '/32'},
                 (False, 'host IP address is not in 10.0.0.5/32 (build_near_host_ip hint)'),
                 id='cidr narrows the network'),
    pytest.param('10.0.1.1', {'build_near_host_ip': '10.0.0.5', 'cidr': '16'}, (True, None),
                 id='cidr without its slash is accepted'),
    pytest.param('2001:db8::42', {'build_near_host_ip': '2001:db8::1', 'cidr': '/64'},
                 (True, None), id='IPv6'),
    pytest.param('2001:db8::42', {'build_near_host_ip': '10.0.0.5'},
                 (False, 'host IP address is not in 10.0.0.0/24 (build_near_host_ip hint)'),
                 id='an IPv6 host is not near an IPv4 address'),
    pytest.param(None, {'build_near_host_ip': '10.0.0.5'}, (False, HOST_IP_UNKNOWN),
                 id='a host without a known address fails'),
    pytest.param('10.0.0.9', {'build_near_host_ip': 'near-the-db'},
                 (False, "invalid build_near_host_ip/cidr hint: 'near-the-db/24' is not an "
                         "IP network"), id='an address that is none fails every host'),
    pytest.param('10.0.0.9', {'build_near_host_ip': '10.0.0.5', 'cidr': '/99'},
                 (False, "invalid build_near_host_ip/cidr hint: '10.0.0.5/99' is not an "
                         "IP network"), id='a prefix too long fails every host'),
    pytest.param('10.0.0.9', {'build_near_host_ip': ['10.0.0.5', '10.0.1.5']},
                 (False, 'invalid build_near_host_ip/cidr hint: build_near_host_ip and cidr '
                         'must each be one string'), id='several addresses fail every host'),
]


@pytest.mark.parametrize('host_ip,hints,expected', CASES)
def test_simple_cidr_affinity(host_ip, hints, expected):
    assert verdict(host_ip, **hints) == expected


def test_a_long_invalid_hint_is_quoted_only_in_part():
    passed, reason = verdict('10.0.0.9', build_near_host_ip='x' * 500)

    assert not passed
    assert 'x' * 50 in reason
    assert 'x' * 60 not in reason
    assert reason.endswith("...' is not an IP network")


def test_hosts_without_a_known_address_are_reported_once_each(caplog):
    f = SimpleCIDRAffinityFilter()
    hosts = [make_host('cn1'), make_host('cn2'), make_host('cn3', host_ip='10.0.0.7')]
    spec = make_spec(hints={'build_near_host_ip': '10.0.0.5'})

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _request in range(3):
            [f.filter_result(h, spec) for h in hosts]

    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2
    assert 'no valid host_ip for host cn1' in warnings[0]
    assert 'no valid host_ip for host cn2' in warnings[1]


def test_near_network_is_the_hinted_address_plus_prefix():
    assert near_network('192.0.2.77', '/28') == ipaddress.ip_network('192.0.2.64/28')
    with pytest.raises(InvalidHint):
        near_network('192.0.2.77', 28)


def test_cidr_affinity_runs_once_per_request_and_not_on_rebuild():
    assert SimpleCIDRAffinityFilter.run_filter_once_per_request
    assert not SimpleCIDRAffinityFilter.RUN_ON_REBUILD
