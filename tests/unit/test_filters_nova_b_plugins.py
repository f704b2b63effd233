"""The aggregate, workload, isolation, CIDR and metrics filters load by their Nova names
(bare or Nova's dotted path) and judge hosts through the filter handler."""
from __future__ import annotations

import logging

import pytest

from scheduler import plugins
from scheduler.filters.aggregate_isolation import (
    AggregateMultiTenancyIsolation,
    AggregateTypeAffinityFilter,
    AvailabilityZoneFilter,
)
from scheduler.filters.cidr_affinity import SimpleCIDRAffinityFilter
from scheduler.filters.handler import apply_filters
from scheduler.filters.isolated_hosts import IsolatedHostsFilter
from scheduler.filters.metrics import MetricsFilter
from scheduler.filters.workload import (
    AggregateIoOpsFilter,
    AggregateNumInstancesFilter,
    IoOpsFilter,
    NumInstancesFilter,
)
from tests.builders import make_aggregate, make_conf, make_host, make_spec

SHIPPED = {
    'AggregateMultiTenancyIsolation': AggregateMultiTenancyIsolation,
    'AggregateTypeAffinityFilter': AggregateTypeAffinityFilter,
    'AvailabilityZoneFilter': AvailabilityZoneFilter,
    'IoOpsFilter': IoOpsFilter,
    'AggregateIoOpsFilter': AggregateIoOpsFilter,
    'NumInstancesFilter': NumInstancesFilter,
    'AggregateNumInstancesFilter': AggregateNumInstancesFilter,
    'IsolatedHostsFilter': IsolatedHostsFilter,
    'SimpleCIDRAffinityFilter': SimpleCIDRAffinityFilter,
    'MetricsFilter': MetricsFilter,
}
NOVA_MODULES = {
    'AggregateMultiTenancyIsolation': 'aggregate_multitenancy_isolation',
    'AggregateTypeAffinityFilter': 'type_filter',
    'AvailabilityZoneFilter': 'availability_zone_filter',
    'IoOpsFilter': 'io_ops_filter',
    'AggregateIoOpsFilter': 'io_ops_filter',
    'NumInstancesFilter': 'num_instances_filter',
    'AggregateNumInstancesFilter': 'num_instances_filter',
    'IsolatedHostsFilter': 'isolated_hosts_filter',
    'SimpleCIDRAffinityFilter': 'affinity_filter',
    'MetricsFilter': 'metrics_filter',
}


def test_each_filter_loads_by_its_nova_class_name_without_a_not_shipped_warning(caplog):
    conf = make_conf(filter_scheduler={'enabled_filters': list(SHIPPED)})

    with caplog.at_level(logging.WARNING, logger='scheduler.plugins'):
        loaded = plugins.load_filters(conf)

    assert [type(f) for f in loaded] == list(SHIPPED.values())
    assert all(f.conf is conf for f in loaded)
    assert caplog.records == []
    assert not set(SHIPPED) & set(plugins.NOVA_FILTERS_NOT_SHIPPED)


@pytest.mark.parametrize('name', sorted(SHIPPED))
def test_each_filter_loads_by_novas_dotted_path(name):
    path = f'nova.scheduler.filters.{NOVA_MODULES[name]}.{name}'

    [loaded] = plugins.load_filters(make_conf(filter_scheduler={'enabled_filters': [path]}))

    assert type(loaded) is SHIPPED[name]


def test_loaded_filters_remove_hosts_with_their_reasons():
    conf = make_conf(filter_scheduler={
        'enabled_filters': ['AggregateMultiTenancyIsolation', 'NumInstancesFilter'],
        'max_instances_per_host': 1})
    reserved = make_aggregate('reserved', metadata={'filter_tenant_id': 'other'})
    hosts = [make_host('cn1', aggregates=[reserved]), make_host('cn2', instances=['vm-a']),
             make_host('cn3')]

    run = apply_filters(plugins.load_filters(conf), hosts, make_spec(project_id='mine'),
                        instance_index=0)

    assert [h.host for h in run.hosts] == ['cn3']
    assert [(s.name, s.removed) for s in run.steps] == [
        ('AggregateMultiTenancyIsolation',
         {'host is reserved for other projects (aggregate filter_tenant_id)': ['cn1']}),
        ('NumInstancesFilter', {'host has 1 instance (max_instances_per_host 1)': ['cn2']}),
    ]
