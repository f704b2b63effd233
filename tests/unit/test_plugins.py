"""Loading filters and weighers from ``[filter_scheduler]`` the way Nova names them."""
from __future__ import annotations

import logging

import pytest

from scheduler import plugins
from scheduler.exceptions import ConfigurationError, PluginNotFound
from scheduler.filters.affinity import ServerGroupAffinityFilter, ServerGroupAntiAffinityFilter
from scheduler.filters.aggregate_isolation import (
    AggregateMultiTenancyIsolation,
    AggregateTypeAffinityFilter,
    AvailabilityZoneFilter,
)
from scheduler.filters.cidr_affinity import SimpleCIDRAffinityFilter
from scheduler.filters.compute import ComputeFilter
from scheduler.filters.compute_capabilities import ComputeCapabilitiesFilter
from scheduler.filters.handler import apply_filters
from scheduler.filters.image_props import ImagePropertiesFilter
from scheduler.filters.isolated_hosts import IsolatedHostsFilter
from scheduler.filters.metrics import MetricsFilter
from scheduler.filters.numa_topology import NUMATopologyFilter
from scheduler.filters.pci_passthrough import PciPassthroughFilter
from scheduler.filters.workload import (
    AggregateIoOpsFilter,
    AggregateNumInstancesFilter,
    IoOpsFilter,
    NumInstancesFilter,
)
from scheduler.weights.cpu import CPUWeigher
from scheduler.weights.disk import DiskWeigher
from scheduler.weights.ram import RAMWeigher
from tests.builders import make_aggregate, make_conf, make_host, make_spec
from tests.unit.out_of_tree_plugins import FewestInstancesWeigher, RackFilter

OOT = 'tests.unit.out_of_tree_plugins'


def filters_for(*names, **options):
    return plugins.load_filters(make_conf(filter_scheduler={'enabled_filters': list(names),
                                                            **options}))


def weighers_for(*names):
    return plugins.load_weighers(make_conf(filter_scheduler={'weight_classes': list(names)}))


def types(loaded):
    return [type(p) for p in loaded]


def warnings_from(caplog):
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.name == 'scheduler.plugins']


# Filters ------------------------------------------------------------------------------

def test_novas_default_enabled_filters_all_load_without_a_warning(caplog):
    loaded = plugins.load_filters(make_conf())
    assert types(loaded) == [ComputeFilter, ComputeCapabilitiesFilter, ImagePropertiesFilter,
                             ServerGroupAntiAffinityFilter, ServerGroupAffinityFilter]
    assert warnings_from(caplog) == []


@pytest.fixture
def future_nova_filter(monkeypatch):
    """Every Nova 34 filter ships; the "not shipped yet" path is shown with a made-up one."""
    monkeypatch.setattr(plugins, 'NOVA_FILTERS_NOT_SHIPPED',
                        {'FutureFilter': 'future host checks'})


def test_a_nova_filter_not_shipped_yet_is_skipped_with_a_warning_saying_what_goes_unchecked(
        caplog, future_nova_filter):
    loaded = filters_for('ComputeFilter', 'FutureFilter')
    assert types(loaded) == [ComputeFilter]
    [warning] = warnings_from(caplog)
    assert '[filter_scheduler] enabled_filters' in warning
    assert 'not implemented yet; hosts are not checked for' in warning
    assert 'FutureFilter (future host checks)' in warning


@pytest.mark.parametrize('name,cls', [
    ('NUMATopologyFilter', NUMATopologyFilter),
    ('nova.scheduler.filters.numa_topology_filter.NUMATopologyFilter', NUMATopologyFilter),
    ('PciPassthroughFilter', PciPassthroughFilter),
    ('nova.scheduler.filters.pci_passthrough_filter.PciPassthroughFilter',
     PciPassthroughFilter),
])
def test_novas_candidate_filters_load_by_name_and_path_without_a_warning(name, cls, caplog):
    assert types(filters_for(name)) == [cls]
    assert warnings_from(caplog) == []
    assert not plugins.NOVA_FILTERS_NOT_SHIPPED


def test_every_loaded_filter_carries_the_configuration():
    conf = make_conf(filter_scheduler={'enabled_filters': ['ComputeFilter', 'SameHostFilter']})
    assert all(f.conf is conf for f in plugins.load_filters(conf))


def test_filters_load_in_the_configured_order():
    loaded = filters_for('ServerGroupAffinityFilter', 'ComputeFilter')
    assert types(loaded) == [ServerGroupAffinityFilter, ComputeFilter]


def test_a_nova_dotted_path_loads_our_filter_of_that_name():
    loaded = filters_for('nova.scheduler.filters.compute_filter.ComputeFilter')
    assert types(loaded) == [ComputeFilter]


def test_a_nova_dotted_path_to_a_filter_not_shipped_yet_is_skipped_with_a_warning(
        caplog, future_nova_filter):
    loaded = filters_for('nova.scheduler.filters.future_filter.FutureFilter', 'ComputeFilter')
    assert types(loaded) == [ComputeFilter]
    assert 'FutureFilter (future host checks)' in warnings_from(caplog)[0]


def test_an_out_of_tree_filter_written_the_nova_way_loads_by_dotted_path_and_filters():
    [rack] = filters_for(f'{OOT}.RackFilter')
    assert isinstance(rack, RackFilter)
    hosts = [make_host('r1-a'), make_host('r2-a'), make_host('r1-b')]
    run = apply_filters([rack], hosts, make_spec(), instance_index=0)
    assert [h.host for h in run.hosts] == ['r1-a', 'r1-b']
    assert run.steps[0].removed == {'rejected by RackFilter': ['r2-a']}


def test_an_out_of_tree_filter_loads_the_nova_way_through_available_filters():
    loaded = filters_for('ComputeFilter', 'RackFilter',
                         available_filters=['nova.scheduler.filters.all_filters',
                                            f'{OOT}.RackFilter'])
    assert types(loaded) == [ComputeFilter, RackFilter]


def test_an_unimportable_available_filters_entry_fails_naming_that_option():
    with pytest.raises(PluginNotFound, match=r'\[filter_scheduler\] available_filters'):
        filters_for('ComputeFilter', available_filters=[f'{OOT}.Missing'])


def test_an_unknown_filter_name_fails_naming_the_option():
    with pytest.raises(PluginNotFound) as caught:
        filters_for('ComputeFilter', 'NoSuchFilter')
    assert caught.value.option == '[filter_scheduler] enabled_filters'
    assert caught.value.name == 'NoSuchFilter'
    assert 'ComputeFilter' in str(caught.value)  # lists what is available


def test_an_unknown_nova_filter_path_fails():
    with pytest.raises(PluginNotFound):
        filters_for('nova.scheduler.filters.bogus.BogusFilter')


def test_an_unimportable_dotted_path_fails_with_the_import_error_as_cause():
    with pytest.raises(PluginNotFound) as caught:
        filters_for('no_such_package.filters.RackFilter')
    assert isinstance(caught.value.__cause__, ImportError)


def test_a_class_that_is_not_a_host_filter_is_refused():
    with pytest.raises(ConfigurationError, match='not a subclass of'):
        filters_for(f'{OOT}.NotAPlugin')


def test_a_filter_listed_twice_is_loaded_once(caplog):
    assert types(filters_for('ComputeFilter', 'ComputeFilter')) == [ComputeFilter]
    assert 'more than once' in warnings_from(caplog)[0]


def test_an_empty_filter_list_loads_nothing():
    assert filters_for() == []


def test_a_shipped_filter_is_never_skipped_even_if_listed_as_missing(monkeypatch):
    monkeypatch.setattr(plugins, 'NOVA_FILTERS_NOT_SHIPPED',
                        {**plugins.NOVA_FILTERS_NOT_SHIPPED, 'ComputeFilter': 'liveness'})
    assert types(filters_for('ComputeFilter')) == [ComputeFilter]


# Filters loaded by their Nova names: aggregate, workload, isolation, CIDR, metrics --------
# They load by Nova's class name or dotted path and judge hosts through the filter handler.

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


# Weighers -----------------------------------------------------------------------------

NOVA_34_WEIGHERS = {
    'RAMWeigher', 'CPUWeigher', 'DiskWeigher', 'IoOpsWeigher', 'PCIWeigher',
    'ServerGroupSoftAffinityWeigher', 'ServerGroupSoftAntiAffinityWeigher',
    'BuildFailureWeigher', 'CrossCellWeigher', 'HypervisorVersionWeigher',
    'NumInstancesWeigher', 'ImagePropertiesWeigher', 'MetricsWeigher',
}


def test_novas_default_weight_classes_load_all_13_nova_weighers_without_warning(caplog):
    loaded = plugins.load_weighers(make_conf())
    assert {w.name for w in loaded} == NOVA_34_WEIGHERS
    assert {RAMWeigher, CPUWeigher, DiskWeigher} <= set(types(loaded))
    assert warnings_from(caplog) == []


def test_all_is_an_alias_of_novas_all_weighers():
    assert types(weighers_for('all')) == types(
        weighers_for('nova.scheduler.weights.all_weighers'))


def test_weighers_can_be_listed_by_name_or_nova_path_and_carry_the_configuration():
    conf = make_conf(filter_scheduler={
        'weight_classes': ['nova.scheduler.weights.ram.RAMWeigher', 'DiskWeigher']})
    loaded = plugins.load_weighers(conf)
    assert types(loaded) == [RAMWeigher, DiskWeigher]
    assert all(w.conf is conf for w in loaded)


def test_an_out_of_tree_weigher_loads_by_dotted_path():
    assert types(weighers_for(f'{OOT}.FewestInstancesWeigher')) == [FewestInstancesWeigher]


def test_an_unknown_weigher_fails_naming_the_option():
    with pytest.raises(PluginNotFound, match=r'\[filter_scheduler\] weight_classes'):
        weighers_for('HeaviestWeigher')


def test_a_filter_class_is_not_accepted_as_a_weigher():
    with pytest.raises(ConfigurationError, match='BaseHostWeigher'):
        weighers_for(f'{OOT}.RackFilter')
