"""No reason a caller can read names a host, node, provider, aggregate or another project.

A NoValidHost reason ends up in the instance fault, which the server's non-admin owner
reads. This walks every reason that every registered filter and weigher gives for every
host of random clouds and requests, and the one-line reason of every stage built from
them, with host data that is easy to recognise, and finds none of it.
"""
from __future__ import annotations

import random
import re

import pytest

from scheduler import explain, plugins
from scheduler.explain import InstanceAttempt, RequestTrace
from scheduler.filters.compute import ComputeFilter
from scheduler.objects.spec import Aggregate
from tests.builders import host_states, make_conf, uuid_for
from tests.unit.test_host_table import NOW, random_cloud, random_spec

OTHER_PROJECT = 'another-project-7f3c'
HOST_DATA = re.compile(r'host-\d+|\bagg\d+\b|tenant-only-agg|' + OTHER_PROJECT)

# Options under which each filter has something to say no to.
FILTER_OPTIONS = {
    'IsolatedHostsFilter': {'isolated_hosts': ['host-0', 'host-1', 'host-2'],
                            'isolated_images': ['not-this-image']},
    'IoOpsFilter': {'max_io_ops_per_host': 2},
    'NumInstancesFilter': {'max_instances_per_host': 5},
}
METRICS_OPTIONS = {'MetricsFilter': {'weight_setting': ['cpu.percent=1.0', 'mem.used=1.0']}}
ALL_FILTERS = sorted(plugins._entry_point_names(plugins.FILTERS_NAMESPACE))
ALL_WEIGHERS = sorted(plugins._entry_point_names(plugins.WEIGHERS_NAMESPACE))
#: Filters that judge by what a request asks and random requests never ask for it.
NEVER_FAILS_HERE = {'AllHostsFilter', 'PciPassthroughFilter'}


def cloud(seed):
    rng = random.Random(seed)
    candidates, catalog, instances = random_cloud(rng, rng.randint(3, 30))
    hosts = [f'host-{i}' for i in range(rng.randint(1, 3))]
    catalog.update_aggregates([Aggregate(
        id=99, uuid=uuid_for('tenant-only-agg'), name='tenant-only-agg', hosts=hosts,
        metadata={'filter_tenant_id': OTHER_PROJECT, 'availability_zone': 'az0',
                  'instance_type': f'{OTHER_PROJECT}-flavor', 'max_instances_per_host': '0',
                  'hw_architecture': f'{OTHER_PROJECT}-arch', 'ssd': 'true'})])
    spec, uuids = random_spec(rng, instances, 1)
    spec.instance_uuid = uuids[0]
    spec.project_id = 'the-callers-project'
    ask_what_filters_judge(rng, spec)
    return candidates, catalog, spec


def ask_what_filters_judge(rng, spec):
    """Requests that ask for what the filters random_spec leaves alone judge."""
    if spec.instance_group is not None and spec.instance_group.policy == 'affinity':
        spec.instance_group.hosts = ['host-0']
    extra = spec.flavor.extra_specs
    if rng.random() < 0.5:
        extra['capabilities:hypervisor_version'] = '>= 9000000'
    if rng.random() < 0.5:
        extra['aggregate_instance_extra_specs:ssd'] = 'false'
    if rng.random() < 0.5:
        spec.image.properties['hw_architecture'] = 'x86_64'
    if rng.random() < 0.5:
        spec.scheduler_hints['query'] = ['[">=", "$free_ram_mb", 12000]']
    if rng.random() < 0.5:
        spec.scheduler_hints['cidr'] = ['/24']
        spec.scheduler_hints['build_near_host_ip'] = ['192.0.2.1']


def identifying(text, catalog, candidates):
    """The host data ``text`` gives away."""
    found = set(HOST_DATA.findall(text))
    found.update(u for u in candidates.raw_summaries() if u in text)
    found.update(a.uuid for a in catalog.all_aggregates() if a.uuid in text)
    return found


def load(kind, name):
    if kind == 'filter':
        conf = make_conf(filter_scheduler={'enabled_filters': [name],
                                           **FILTER_OPTIONS.get(name, {})},
                         metrics=METRICS_OPTIONS.get(name))
        [plugin] = plugins.load_filters(conf)
        if isinstance(plugin, ComputeFilter):
            plugin.clock = lambda: NOW
        return plugin
    [plugin] = plugins.load_weighers(make_conf(filter_scheduler={'weight_classes': [name]}))
    return plugin


@pytest.mark.parametrize('name', ALL_FILTERS)
def test_no_filter_reason_names_host_data(name):
    failed = 0
    for seed in range(40):
        candidates, catalog, spec = cloud(seed)
        plugin = load('filter', name)
        for host in host_states(candidates, catalog):
            result = plugin.filter_result(host, spec)
            if result.passed:
                continue
            failed += 1
            assert not identifying(result.reason, catalog, candidates), result.reason
    # The walk reached this filter's failures (or it judges what random requests never ask).
    assert failed or name in NEVER_FAILS_HERE


@pytest.mark.parametrize('name', ALL_WEIGHERS)
def test_no_weigher_reason_names_host_data(name):
    for seed in range(40):
        candidates, catalog, spec = cloud(seed)
        plugin = load('weigher', name)
        for host in host_states(candidates, catalog):
            reason = plugin.unweighable_reason(host, spec)
            if reason is not None:
                assert not identifying(reason, catalog, candidates), reason


def test_no_stage_reason_names_host_data():
    """Each stage's one-line reason, built from every filter's removals at once."""
    filters = [load('filter', name) for name in ALL_FILTERS]
    for seed in range(40):
        candidates, catalog, spec = cloud(seed)
        hosts = host_states(candidates, catalog)
        steps, left = [], len(hosts)
        for plugin in filters:
            removed: dict[str, int] = {}
            for host in hosts:
                result = plugin.filter_result(host, spec)
                if not result.passed:
                    removed[result.reason] = removed.get(result.reason, 0) + 1
            steps.append((plugin.name, left, removed))
        attempt = InstanceAttempt(index=0, hosts_in=len(hosts), hosts_after_filters=0,
                                  filter_steps=steps)
        traces = [
            RequestTrace(num_instances=1, query='q', query_for_users='q',
                         candidates=len(hosts), hosts=len(hosts),
                         prefilter_removed={'in ignore_hosts': 1}),
        ]
        traces[0].attempts.append(attempt)
        for trace in traces:
            for reason in (explain.failure_reason(trace), explain.nova_failure_reason(trace)):
                assert not identifying(reason, catalog, candidates), reason
