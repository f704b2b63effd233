"""Filters and weighers written for nova-scheduler load unchanged and behave as in Nova.

``tests/unit/nova_shaped`` stands in for the ``nova`` package (its README says
what it holds); with the real Nova the same is proven by Nova's own functional
tests (``tox -e nova-functional``), whose HostNameWeigher is such a plugin.
"""
from __future__ import annotations

import pathlib
import sys

import pytest

from scheduler import plugins
from scheduler.exceptions import ConfigurationError
from scheduler.filters.handler import apply_filters
from scheduler.nova_plugins import NovaFilterAdapter, NovaWeigherAdapter
from scheduler.weights.base import weigh_hosts
from tests.builders import make_conf, make_host, make_spec

NOVA_SHAPED = pathlib.Path(__file__).parent / 'nova_shaped'
PLUGINS = 'operator_plugins'


@pytest.fixture(autouse=True)
def nova_importable(monkeypatch):
    for name in [m for m in sys.modules if m == 'nova' or m.startswith('nova.')
                 or m == PLUGINS]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(NOVA_SHAPED))
    yield
    for name in [m for m in sys.modules if m == 'nova' or m.startswith('nova.')
                 or m == PLUGINS]:
        del sys.modules[name]


def weighers_for(*names):
    return plugins.load_weighers(make_conf(filter_scheduler={'weight_classes': list(names)}))


def filters_for(*names, **options):
    return plugins.load_filters(make_conf(filter_scheduler={'enabled_filters': list(names),
                                                            **options}))


def test_a_nova_weigher_by_dotted_path_weighs_as_in_nova():
    [weigher] = weighers_for(f'{PLUGINS}.HostNameWeigher')
    hosts = [make_host('host3'), make_host('host1'), make_host('other'), make_host('host2')]

    weighed = weigh_hosts([weigher], hosts, make_spec())

    assert isinstance(weigher, NovaWeigherAdapter)
    assert weigher.name == 'HostNameWeigher'
    # Raw 10/100/0/50, normalised over the list as Nova's handler does.
    assert [(w.host.host, w.weight) for w in weighed] == [
        ('host1', 1.0), ('host2', 0.5), ('host3', 0.1), ('other', 0.0)]


def test_a_nova_weigher_gets_a_nova_request_spec_its_bounds_and_its_multiplier():
    [weigher] = weighers_for(f'{PLUGINS}.CappedProjectWeigher')
    hosts = [make_host('h'), make_host('host-long')]

    weighed = weigh_hosts([weigher], hosts, make_spec(project_id='p1'))

    # 'p1' + 'h' -> 3; 'p1' + 'host-long' -> 11, clamped to maxval 5; normalised
    # against maxval 5 (min 3), times the plugin's multiplier 2.
    assert [(w.host.host, w.weight) for w in weighed] == [('host-long', 2.0), ('h', 0.0)]


def test_a_nova_filter_in_enabled_filters_by_path_filters_with_the_request_hints():
    [rack] = filters_for(f'{PLUGINS}.RackHintFilter')
    hosts = [make_host('r1-a'), make_host('r2-a'), make_host('r2-b')]

    run = apply_filters([rack], hosts, make_spec(hints={'rack': 'r2-'}), instance_index=0)

    assert isinstance(rack, NovaFilterAdapter)
    assert [h.host for h in run.hosts] == ['r2-a', 'r2-b']
    assert run.steps[0].removed == {'rejected by RackHintFilter': ['r1-a']}
    # The plugin's own per-request rule: judged for the first instance only.
    assert rack.run_filter_for_index(0) and not rack.run_filter_for_index(1)


def test_a_nova_filter_loads_the_nova_way_through_available_filters():
    [rack] = filters_for('RackHintFilter',
                         available_filters=['nova.scheduler.filters.all_filters',
                                            f'{PLUGINS}.RackHintFilter'])
    assert rack.name == 'RackHintFilter'


def test_a_nova_weigher_listed_as_a_filter_is_refused():
    with pytest.raises(ConfigurationError, match='is a Nova weigher, not a filter'):
        filters_for(f'{PLUGINS}.HostNameWeigher')
