"""bench.view's PUT-only ceiling claims as an arbiter that knows its own claims: a host
only while the kind still fits beside them, never two claims on one host at once. So
Placement refuses none of its claims, and the ceiling is Placement's rate of accepted
claims, not a guessing scheduler's."""
from __future__ import annotations

import datetime
import random
from types import SimpleNamespace

import pytest

from bench.synthetic import SyntheticHost, SyntheticProvider
from bench.view import KINDS, OwnClaims, _claim

SMALL = next(kind for kind, _ in KINDS if kind.name == 'm1.small')     # 1 VCPU, 512 MB


def host(index: int, *, vcpus_free: int) -> SyntheticHost:
    root = SyntheticProvider(
        uuid=f'rp-{index}', name=f'cn{index}', root_uuid=f'rp-{index}', parent_uuid=None,
        inventory={'VCPU': (16, 0, 1.0, 16 - vcpus_free), 'MEMORY_MB': (65536, 0, 1.0, 0),
                   'DISK_GB': (1000, 0, 1.0, 0)},
        traits=[])
    return SyntheticHost(index=index, name=f'cn{index}', root=root, children=[], disabled=False,
                         forced_down=False, last_seen_up=datetime.datetime(2026, 12, 5),
                         host_ip='10.0.0.1', hypervisor_version=1, cpu_info={},
                         num_instances=0, io_workload=0, failed_builds=0)


def test_a_host_is_drawn_only_while_the_kind_fits_beside_the_phase_s_claims():
    claims = OwnClaims([host(0, vcpus_free=2), host(1, vcpus_free=1)], [SMALL],
                       random.Random(1))

    drawn = []
    for _ in range(3):
        h, allocation = claims.draw(SMALL)
        claims.landed(h, allocation, accepted=True)
        drawn.append(h.index)

    assert sorted(drawn) == [0, 0, 1]
    with pytest.raises(RuntimeError, match='no host has room for m1.small'):
        claims.draw(SMALL)


def test_a_refused_claim_gives_its_room_back():
    claims = OwnClaims([host(0, vcpus_free=1)], [SMALL], random.Random(1))
    h, allocation = claims.draw(SMALL)
    claims.landed(h, allocation, accepted=False)

    assert claims.draw(SMALL)[0] is h


def test_a_host_with_a_claim_in_flight_is_not_drawn_again():
    claims = OwnClaims([host(0, vcpus_free=8), host(1, vcpus_free=8)], [SMALL],
                       random.Random(1))
    first, _ = claims.draw(SMALL)
    second, allocation = claims.draw(SMALL)

    assert {first.index, second.index} == {0, 1}
    with pytest.raises(RuntimeError, match='has a claim in flight'):
        claims.draw(SMALL)
    claims.landed(second, allocation, accepted=True)
    assert claims.draw(SMALL)[0] is second


def test_hosts_the_kind_never_fitted_are_never_drawn():
    claims = OwnClaims([host(0, vcpus_free=0), host(1, vcpus_free=4)], [SMALL],
                       random.Random(1))

    for _ in range(4):
        h, allocation = claims.draw(SMALL)
        assert h.index == 1
        claims.landed(h, allocation, accepted=True)


class RefusesFirst:
    """A Placement session that answers 409 to the first ``refusals`` PUTs."""

    def __init__(self, refusals: int):
        self.refusals, self.claimed = refusals, []

    def put(self, url: str, json: dict) -> SimpleNamespace:
        self.claimed.append(next(iter(json['allocations'])))
        if len(self.claimed) <= self.refusals:
            return SimpleNamespace(status_code=409, text='conflict')
        return SimpleNamespace(status_code=204, text='')


def test_a_refused_claim_is_tried_again_and_only_the_accepted_one_counts():
    claims = OwnClaims([host(0, vcpus_free=1)], [SMALL], random.Random(1))

    _claim(RefusesFirst(refusals=2), SimpleNamespace(url='http://placement'), claims, SMALL)

    # Three PUTs on the one host: the two refused gave its room back, the third took it.
    with pytest.raises(RuntimeError, match='no host has room'):
        claims.draw(SMALL)


def test_three_refusals_in_a_row_fail_the_decision():
    claims = OwnClaims([host(0, vcpus_free=4)], [SMALL], random.Random(1))

    with pytest.raises(RuntimeError, match='3 claims in a row were refused'):
        _claim(RefusesFirst(refusals=3), SimpleNamespace(url='http://placement'), claims,
               SMALL)
    assert claims.draw(SMALL)[0].index == 0
