"""IoOpsFilter, NumInstancesFilter and their per-aggregate variants: a host's
workload count must stay below the configured (or aggregate) limit."""
from __future__ import annotations

import logging

import pytest

from placement_client.models import AllocationRequest, Candidates, ProviderSummary, ResourceUsage
from scheduler.catalog import HostCatalog
from scheduler.filters.handler import apply_filters
from scheduler.filters.workload import (
    AggregateIoOpsFilter,
    AggregateNumInstancesFilter,
    IoOpsFilter,
    NumInstancesFilter,
)
from tests.builders import configured, host_states, make_aggregate, make_host, make_spec, uuid_for

LOGGER = 'scheduler.filters.workload'


def aggregates(*limits: tuple[str, str]):
    return [make_aggregate(f'agg{i}', metadata={key: value}, id=i)
            for i, (key, value) in enumerate(limits)]


# (filter, options, host stats, aggregates, instances on host) -> reason or None (passes)
IO = 'max_io_ops_per_host'
NUM = 'max_instances_per_host'
WORKLOAD_CASES = [
    pytest.param(IoOpsFilter, {IO: 8}, {'io_workload': '7'}, [], 0, None,
                 id='io: below the configured limit passes'),
    pytest.param(IoOpsFilter, {IO: 8}, {'io_workload': '8'}, [], 0,
                 'host has 8 I/O-heavy operations in progress (max_io_ops_per_host 8)',
                 id='io: at the limit fails'),
    pytest.param(IoOpsFilter, {IO: 0}, {'io_workload': '0'}, [], 0,
                 'host has 0 I/O-heavy operations in progress (max_io_ops_per_host 0)',
                 id='io: a limit of 0 fails every host'),
    pytest.param(IoOpsFilter, {IO: 8}, {'io_workload': '1'}, aggregates((IO, '1')), 0, None,
                 id='io: the plain filter ignores aggregate limits'),
    pytest.param(AggregateIoOpsFilter, {IO: 8}, {'io_workload': '1'}, aggregates((IO, '1')),
                 0, 'host has 1 I/O-heavy operation in progress (aggregate max_io_ops_per_host 1)',
                 id='io: an aggregate lowers the limit'),
    pytest.param(AggregateIoOpsFilter, {IO: 2}, {'io_workload': '5'}, aggregates((IO, '10')),
                 0, None, id='io: an aggregate raises the limit'),
    pytest.param(AggregateIoOpsFilter, {IO: 8}, {'io_workload': '3'},
                 aggregates((IO, '5'), (IO, '3')), 0,
                 'host has 3 I/O-heavy operations in progress (aggregate max_io_ops_per_host 3)',
                 id='io: the smallest aggregate value wins'),
    pytest.param(AggregateIoOpsFilter, {IO: 8}, {'io_workload': '3'}, aggregates((IO, 'many')),
                 0, None, id='io: an unparsable aggregate value falls back to the option'),
    pytest.param(AggregateIoOpsFilter, {IO: 8}, {'io_workload': '3'},
                 aggregates((IO, 'many'), (IO, '2')), 0,
                 'host has 3 I/O-heavy operations in progress (aggregate max_io_ops_per_host 2)',
                 id='io: a valid aggregate value still counts next to an unparsable one'),
    pytest.param(NumInstancesFilter, {NUM: 3}, {}, [], 2, None,
                 id='instances: below the limit passes'),
    pytest.param(NumInstancesFilter, {NUM: 3}, {}, [], 3,
                 'host has 3 instances (max_instances_per_host 3)',
                 id='instances: at the limit fails'),
    pytest.param(NumInstancesFilter, {NUM: 3}, {'num_instances': '4'}, [], 1,
                 'host has 4 instances (max_instances_per_host 3)',
                 id='instances: the stat counts when it says more than the casts'),
    pytest.param(NumInstancesFilter, {NUM: 3}, {'num_instances': '0'}, [], 3,
                 'host has 3 instances (max_instances_per_host 3)',
                 id='instances: the casts count when they say more than the stat'),
    pytest.param(AggregateNumInstancesFilter, {NUM: 50}, {}, aggregates((NUM, '2')), 2,
                 'host has 2 instances (aggregate max_instances_per_host 2)',
                 id='instances: an aggregate lowers the limit'),
    pytest.param(AggregateNumInstancesFilter, {NUM: 50}, {}, aggregates((NUM, ' 2 ')), 1, None,
                 id='instances: aggregate values may carry spaces'),
    pytest.param(AggregateNumInstancesFilter, {NUM: 1}, {}, aggregates((NUM, '2.5')), 1,
                 'host has 1 instance (max_instances_per_host 1)',
                 id='instances: a non-integer aggregate value falls back to the option'),
]


@pytest.mark.parametrize('filter_cls,options,stats,aggs,instances,reason', WORKLOAD_CASES)
def test_workload_filters(filter_cls, options, stats, aggs, instances, reason):
    host = make_host('cn1', stats=stats, aggregates=aggs,
                     instances=[uuid_for(f'vm{i}') for i in range(instances)])

    result = configured(filter_cls, **options).filter_result(host, make_spec())

    assert (result.passed, result.reason) == (reason is None, reason)


@pytest.mark.parametrize('filter_cls,option', [(IoOpsFilter, IO), (NumInstancesFilter, NUM)])
def test_every_instance_placed_by_the_request_counts_for_the_next_one(filter_cls, option):
    host = make_host('cn1', stats={'io_workload': '0', 'num_instances': '0'})
    f = configured(filter_cls, **{option: 2})
    spec = make_spec()
    verdicts = []
    for index in range(3):
        verdicts.append(apply_filters([f], [host], spec, instance_index=index).hosts == [host])
        host.consume(host.allocation_candidates[0], uuid_for(f'new{index}'))

    assert verdicts == [True, True, False]


def test_the_workload_filters_run_for_every_instance_and_not_on_rebuild():
    for cls in (IoOpsFilter, AggregateIoOpsFilter, NumInstancesFilter,
                AggregateNumInstancesFilter):
        assert (cls.run_filter_once_per_request, cls.RUN_ON_REBUILD) == (False, False)


# ---------------------------------------------------------------- data the catalog lacks

def test_a_host_without_io_statistics_passes_with_one_warning_per_host(caplog):
    f = configured(IoOpsFilter, max_io_ops_per_host=8)
    hosts = [make_host('cn1'), make_host('cn2'), make_host('cn3', stats={'io_workload': '0'})]

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _request in range(3):
            assert apply_filters([f], hosts, make_spec(), instance_index=0).hosts == hosts

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert 'no io_workload stat for host cn1' in warnings[0]
    assert 'no io_workload stat for host cn2' in warnings[1]


def test_a_host_without_io_statistics_still_fails_once_the_request_reaches_the_limit():
    host = make_host('cn1')
    f = configured(IoOpsFilter, max_io_ops_per_host=1)
    host.consume(host.allocation_candidates[0], uuid_for('new'))

    assert f.filter_result(host, make_spec()).reason == (
        'host has 1 I/O-heavy operation in progress (max_io_ops_per_host 1)')


def test_a_host_nothing_counts_instances_for_passes_with_one_warning(caplog):
    host = make_host('cn1')
    host.instance_info_known = False
    f = configured(NumInstancesFilter, max_instances_per_host=5)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert f.filter_result(host, make_spec()).passed
        assert f.filter_result(host, make_spec()).passed

    [warning] = [r.getMessage() for r in caplog.records]
    assert 'no num_instances stat and no instance info from casts for host cn1' in warning


@pytest.mark.parametrize('stats,known', [({'num_instances': '0'}, False), ({}, True)],
                         ids=['the stat alone', 'the casts alone'])
def test_either_source_of_the_instance_count_is_enough_to_judge_without_warning(
        caplog, stats, known):
    host = make_host('cn1', stats=stats)
    host.instance_info_known = known

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        configured(NumInstancesFilter).filter_result(host, make_spec())

    assert caplog.records == []


def test_an_unparsable_aggregate_limit_is_reported_once_not_per_host(caplog):
    agg = make_aggregate('bad', metadata={NUM: 'lots'})
    hosts = [make_host(f'cn{i}', aggregates=[agg], stats={'num_instances': '0'})
             for i in range(3)]
    f = configured(AggregateNumInstancesFilter)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        apply_filters([f], hosts, make_spec(), instance_index=0)
        apply_filters([f], hosts, make_spec(), instance_index=0)

    [warning] = [r.getMessage() for r in caplog.records]
    assert 'max_instances_per_host=lots is not an integer' in warning


# ------------------------------------------------- instance info known: catalog -> host state

def _candidates_for(*names: str) -> Candidates:
    summaries = {}
    requests = []
    for name in names:
        rp = uuid_for(name)
        summaries[rp] = ProviderSummary(uuid=rp, root_provider_uuid=rp, parent_provider_uuid=None,
                                        resources={'VCPU': ResourceUsage(8, 0)},
                                        traits=frozenset())
        requests.append(AllocationRequest({rp: {'VCPU': 1}}))
    return Candidates(allocation_requests=tuple(requests), provider_summaries=summaries,
                      microversion='1.36')


def test_host_states_know_whether_any_cast_reported_the_hosts_instances():
    catalog = HostCatalog(default_cell_uuid='00000000-0000-4000-8000-0000000000c1')
    catalog.remember_provider_names({uuid_for(n): n for n in ('told', 'empty', 'silent')})
    catalog.update_instance_info('told', [uuid_for('vm')])
    catalog.sync_instance_info('empty', [])

    hosts = {h.host: h for h in host_states(_candidates_for('told', 'empty', 'silent'),
                                                  catalog)}

    assert {name: h.instance_info_known for name, h in hosts.items()} == {
        'told': True, 'empty': True, 'silent': False}
    assert hosts['told'].num_instances == 1
