"""A capped answer with no host that can be chosen is asked again without the limit.

Placement stops at ``max_placement_results`` candidates; what it cannot express (a
disabled compute service, an aggregate's tenancy, a plugin's rule) may reject every
host it returned while hosts beyond the limit fit. Nova answers NoValidHost then;
with ``[scheduler] retry_without_limit`` (the default) the request is decided once
more on the whole answer. tests/functional/test_retry_without_limit.py shows it
on a real Placement with 5,000 hosts.
"""
from __future__ import annotations

import pytest

from scheduler import exceptions as exc
from scheduler import metrics
from scheduler.filters.base import BaseHostFilter
from scheduler.objects.spec import InstanceGroup, RequestGroup
from scheduler.pipeline.claim import Placed, consume, spec_checkpoint
from tests.builders import make_host, select, user_spec, uuid_for, uuids
from tests.unit.fake_placement import FakePlacement


class OnlyHosts(BaseHostFilter):
    """A rule Placement cannot express: only the named hosts will do."""

    def __init__(self, *names: str):
        self.names = set(names)

    def host_passes(self, host_state, spec_obj):
        return host_state.host in self.names


class NotOnTheGroupsHosts(BaseHostFilter):
    """Anti-affinity as the filter reads it, without the claim check after it (which
    reads the consumers back from Placement)."""

    def host_passes(self, host_state, spec_obj):
        return host_state.host not in spec_obj.instance_group.hosts


def candidate_queries(fake: FakePlacement) -> list:
    return [call.kwargs['query'].limit for call in fake.calls_to('get_allocation_candidates')]


@pytest.fixture
def six_hosts(fake):
    # Placement's order is the order they were added: h0 .. h5.
    for i in range(6):
        fake.add_compute(f'h{i}')
    return fake


def test_hosts_beyond_the_limit_are_found_when_the_filters_reject_every_host_before_it(
        six_hosts, make_manager):
    manager = make_manager(filters=[OnlyHosts('h4')], scheduler={'max_placement_results': 3})
    placed_before = metrics.RETRIES_WITHOUT_LIMIT.value(outcome='placed')

    [selections] = select(manager, user_spec(), uuids(1), return_alternates=False)

    assert selections[0].service_host == 'h4'
    assert candidate_queries(six_hosts) == [3, None]
    assert metrics.RETRIES_WITHOUT_LIMIT.value(outcome='placed') == placed_before + 1


def test_with_the_retry_off_the_request_fails_as_in_nova(six_hosts, make_manager):
    manager = make_manager(filters=[OnlyHosts('h4')],
                           scheduler={'max_placement_results': 3, 'retry_without_limit': False})

    with pytest.raises(exc.NoValidHost, match='limit 3: other hosts were not considered'):
        select(manager, user_spec(), uuids(1), return_alternates=False)
    assert candidate_queries(six_hosts) == [3]


def test_an_answer_the_limit_did_not_cut_is_not_asked_again(six_hosts, make_manager):
    manager = make_manager(filters=[OnlyHosts()], scheduler={'max_placement_results': 10})

    with pytest.raises(exc.NoValidHost):
        select(manager, user_spec(), uuids(1), return_alternates=False)
    assert candidate_queries(six_hosts) == [10]


def test_when_no_host_fits_beyond_the_limit_either_the_reason_counts_every_host(
        six_hosts, make_manager):
    manager = make_manager(filters=[OnlyHosts()], scheduler={'max_placement_results': 3})
    failed_before = metrics.RETRIES_WITHOUT_LIMIT.value(outcome='novalidhost')

    with pytest.raises(exc.NoValidHost) as failure:
        select(manager, user_spec(), uuids(1), return_alternates=False)

    assert failure.value.reason.startswith('0/6 hosts available: OnlyHosts removed 6')
    assert 'limit' not in failure.value.reason
    assert metrics.RETRIES_WITHOUT_LIMIT.value(outcome='novalidhost') == failed_before + 1


def test_instances_placed_from_the_capped_answer_are_undone_before_deciding_again(
        six_hosts, make_manager):
    # From the capped answer (h0..h2) the first instance of an anti-affinity group
    # takes h0 and no other host passes for the second: that claim is undone and
    # both are decided anew on the whole answer, from the spec as it was (the
    # group does not still count h0 as taken).
    manager = make_manager(filters=[OnlyHosts('h0', 'h5'), NotOnTheGroupsHosts()],
                           scheduler={'max_placement_results': 3})
    first, second = uuids(2)
    group = InstanceGroup(uuid=uuid_for('group'), policy='soft-anti-affinity',
                          members=[first, second], hosts=[])

    result = select(manager, user_spec(num_instances=2, group=group), [first, second],
                    return_alternates=False)

    assert sorted(s[0].service_host for s in result) == ['h0', 'h5']
    assert set(six_hosts.consumers) == {first, second}
    assert candidate_queries(six_hosts) == [3, None]


def test_a_spec_checkpoint_takes_back_what_placing_an_instance_changed():
    port = RequestGroup(requester_id='port-1', resources={'VCPU': 1})
    group = InstanceGroup(uuid=uuid_for('group'), policy='anti-affinity', members=[],
                          hosts=[])
    spec = user_spec(requested_resources=[port], group=group)
    restore = spec_checkpoint(spec)
    host = make_host('h1')
    alloc = host.allocation_candidates[0]
    alloc.mappings['port-1'] = (host.uuid,)
    spec.instance_uuid = 'placed-instance'

    consume(spec, Placed('placed-instance', host, alloc))
    assert group.hosts == ['h1'] and port.provider_uuids == [host.uuid]
    restore()

    assert spec.instance_uuid is None
    assert group.hosts == []
    assert port.provider_uuids == []
