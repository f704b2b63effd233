"""Weighers over what the host catalog says about a host: I/O operations, instance
count, recent build failures and hypervisor version (Nova 34 semantics)."""
from __future__ import annotations

import pytest

from placement_client.models import AllocationRequest
from scheduler.weights.base import weigh_hosts
from scheduler.weights.compute import BuildFailureWeigher
from scheduler.weights.hypervisor_version import HypervisorVersionWeigher
from scheduler.weights.io_ops import IoOpsWeigher
from scheduler.weights.num_instances import NumInstancesWeigher
from tests.builders import configured, make_aggregate, make_host, make_spec


def order(weighed):
    return [w.host.host for w in weighed]


def weights(weighed):
    return {w.host.host: w.weight for w in weighed}


def place_one(host, instance_uuid='6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e0001'):
    host.consume(AllocationRequest(allocations={host.uuid: {'VCPU': 1}}), instance_uuid)


# IoOpsWeigher ---------------------------------------------------------------------------

def test_io_ops_weigher_prefers_the_host_with_fewer_io_operations_by_default():
    hosts = [make_host('busy', stats={'io_workload': '6'}),
             make_host('calm', stats={'io_workload': '2'})]
    weighed = weigh_hosts([configured(IoOpsWeigher)], hosts, make_spec())
    assert order(weighed) == ['calm', 'busy']
    # minval 0: 2 and 6 over [0, 6] -> 1/3 and 1.0, times -1.0
    assert weights(weighed) == pytest.approx({'calm': -1 / 3, 'busy': -1.0})


def test_io_ops_weigher_with_a_positive_multiplier_prefers_busy_hosts():
    hosts = [make_host('calm', stats={'io_workload': '1'}),
             make_host('busy', stats={'io_workload': '4'})]
    weighed = weigh_hosts([configured(IoOpsWeigher, io_ops_weight_multiplier=2.0)], hosts,
                          make_spec())
    assert order(weighed) == ['busy', 'calm']
    assert weighed[0].weight == pytest.approx(2.0)


def test_io_ops_weigher_counts_the_instances_this_request_placed_earlier():
    first, second = make_host('first'), make_host('second')
    place_one(first)
    assert order(weigh_hosts([configured(IoOpsWeigher)], [first, second],
                             make_spec())) == ['second', 'first']


def test_io_ops_weigher_reads_its_multiplier_from_an_aggregate_of_the_host():
    stacking = make_aggregate('stack', metadata={'io_ops_weight_multiplier': '1.0'})
    hosts = [make_host('calm', stats={'io_workload': '1'}),
             make_host('busy', stats={'io_workload': '4'}, aggregates=[stacking])]
    weighed = weigh_hosts([configured(IoOpsWeigher)], hosts, make_spec())
    assert weights(weighed) == pytest.approx({'calm': -0.25, 'busy': 1.0})


# NumInstancesWeigher --------------------------------------------------------------------

def test_num_instances_weigher_is_off_by_default():
    hosts = [make_host('empty'), make_host('full', stats={'num_instances': '40'})]
    weighed = weigh_hosts([configured(NumInstancesWeigher)], hosts, make_spec())
    assert weights(weighed) == {'empty': 0.0, 'full': 0.0}
    assert order(weighed) == ['empty', 'full']


@pytest.mark.parametrize(('multiplier', 'first'), [(-1.0, 'few'), (1.0, 'many')])
def test_num_instances_weigher_spreads_or_packs_by_the_sign_of_its_multiplier(multiplier, first):
    hosts = [make_host('many', stats={'num_instances': '9'}),
             make_host('few', instances=['6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e00aa'])]
    weighed = weigh_hosts(
        [configured(NumInstancesWeigher, num_instances_weight_multiplier=multiplier)], hosts,
        make_spec())
    assert order(weighed)[0] == first


def test_num_instances_weigher_normalises_without_a_lower_bound_of_zero():
    # No minval (unlike IoOps): 3 and 5 instances spread over [3, 5] -> 0 and 1.
    hosts = [make_host('a', stats={'num_instances': '3'}),
             make_host('b', stats={'num_instances': '5'})]
    weighed = weigh_hosts(
        [configured(NumInstancesWeigher, num_instances_weight_multiplier=1.0)], hosts,
        make_spec())
    assert weights(weighed) == pytest.approx({'a': 0.0, 'b': 1.0})


def test_num_instances_weigher_follows_an_aggregate_override_even_when_off_in_config():
    spreading = make_aggregate('spread', metadata={'num_instances_weight_multiplier': '-5'})
    hosts = [make_host('many', stats={'num_instances': '9'}, aggregates=[spreading]),
             make_host('few', stats={'num_instances': '1'}, aggregates=[spreading])]
    weighed = weigh_hosts([configured(NumInstancesWeigher)], hosts, make_spec())
    assert order(weighed) == ['few', 'many']
    assert weighed[1].weight == pytest.approx(-5.0)


# BuildFailureWeigher --------------------------------------------------------------------

def test_a_recent_build_failure_outweighs_everything_with_the_default_multiplier():
    hosts = [make_host('flaky', stats={'failed_builds': '1'}), make_host('sound')]
    weighed = weigh_hosts([configured(BuildFailureWeigher)], hosts, make_spec())
    assert order(weighed) == ['sound', 'flaky']
    assert weights(weighed) == pytest.approx({'sound': 0.0, 'flaky': -1_000_000.0})


def test_build_failures_rank_hosts_by_their_count():
    hosts = [make_host(f'h{n}', stats={'failed_builds': str(n)}) for n in (3, 0, 1)]
    weighed = weigh_hosts([configured(BuildFailureWeigher)], hosts, make_spec())
    assert order(weighed) == ['h0', 'h1', 'h3']


def test_build_failure_aggregate_override_is_negated_like_the_configured_value():
    lenient = make_aggregate('lenient', metadata={'build_failure_weight_multiplier': '10'})
    hosts = [make_host('flaky', stats={'failed_builds': '2'}, aggregates=[lenient]),
             make_host('sound')]
    weighed = weigh_hosts([configured(BuildFailureWeigher)], hosts, make_spec())
    assert weights(weighed) == pytest.approx({'sound': 0.0, 'flaky': -10.0})


def test_build_failures_do_not_count_with_a_zero_multiplier():
    hosts = [make_host('flaky', stats={'failed_builds': '5'}), make_host('sound')]
    weighed = weigh_hosts([configured(BuildFailureWeigher, build_failure_weight_multiplier=0.0)],
                          hosts, make_spec())
    assert order(weighed) == ['flaky', 'sound']   # input order: nothing was weighed in


# HypervisorVersionWeigher ---------------------------------------------------------------

def test_newer_hypervisors_win_by_default_and_a_host_without_a_version_counts_zero():
    hosts = [make_host('old', hypervisor_version=6_000_000),
             make_host('unknown'),
             make_host('new', hypervisor_version=8_002_000)]
    weighed = weigh_hosts([configured(HypervisorVersionWeigher)], hosts, make_spec())
    assert order(weighed) == ['new', 'old', 'unknown']
    assert weights(weighed) == pytest.approx({'new': 1.0, 'old': 6 / 8.002, 'unknown': 0.0})


def test_a_negative_hypervisor_version_multiplier_prefers_older_hypervisors():
    hosts = [make_host('new', hypervisor_version=9_000_000),
             make_host('old', hypervisor_version=7_000_000)]
    weighed = weigh_hosts(
        [configured(HypervisorVersionWeigher, hypervisor_version_weight_multiplier=-1.0)],
        hosts, make_spec())
    assert order(weighed) == ['old', 'new']


def test_hypervisor_version_multiplier_comes_from_the_hosts_aggregate_when_set():
    pinned = make_aggregate('legacy', metadata={'hypervisor_version_weight_multiplier': '-3'})
    host = make_host('h', hypervisor_version=1, aggregates=[pinned])
    weigher = configured(HypervisorVersionWeigher)
    assert weigher.weight_multiplier(host) == -3.0
    assert weigher.weight_multiplier(make_host('other')) == 1.0

