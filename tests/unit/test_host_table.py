"""The host table: column-wise hooks decide exactly as plugins judging host by host.

Every request below runs twice over the same Placement answer and catalog, each
time over a table of its hosts: once with every plugin judging host by host
(Nova's way, ``[scheduler] columnar_host_states = False``), once with the
built-in filters and weighers judging all rows at once through their hooks. For
random clouds and requests, both must remove the same hosts for the same
reasons, give every host the same weight to the last bit, order them the same
way, and place every instance of a multi-instance request on the same host.
"""
from __future__ import annotations

import copy
import dataclasses
import datetime
import random
from typing import Any

import numpy as np
import pytest

from placement_client.models import AllocationRequest, Candidates, ProviderSummary, ResourceUsage
from scheduler import plugins
from scheduler.catalog import HostCatalog
from scheduler.catalog.hosts_file import HostsFileContent
from scheduler.filters.base import BaseHostFilter
from scheduler.filters.compute import ComputeFilter
from scheduler.filters.handler import apply_filters
from scheduler.host_columns import SparseColumn
from scheduler.host_state import SHARING_TRAIT, HostRecord
from scheduler.host_table import COLUMNS, HostTable, HostView, count_near_best, top_positions
from scheduler.objects.spec import Aggregate, Flavor, ImageMeta, ImageMetaProps, InstanceGroup
from scheduler.pipeline.ordering import first_fitting, order_hosts
from scheduler.weights.base import BaseHostWeigher, weigh_hosts
from tests.builders import CELL, make_conf, make_spec, uuid_for

OTHER_CELL = '00000000-0000-4000-8000-0000000000c2'
NOW = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.timezone.utc)
ALL_FILTERS = [
    'ComputeFilter', 'ComputeCapabilitiesFilter', 'ImagePropertiesFilter',
    'ServerGroupAntiAffinityFilter', 'ServerGroupAffinityFilter', 'SameHostFilter',
    'DifferentHostFilter', 'IoOpsFilter', 'NumInstancesFilter', 'AggregateIoOpsFilter',
    'AvailabilityZoneFilter', 'MetricsFilter', 'NUMATopologyFilter', 'PciPassthroughFilter']
MULTIPLIER_OPTIONS = ('ram_weight_multiplier', 'cpu_weight_multiplier',
                      'disk_weight_multiplier', 'io_ops_weight_multiplier',
                      'soft_affinity_weight_multiplier', 'soft_anti_affinity_weight_multiplier',
                      'build_failure_weight_multiplier', 'num_instances_weight_multiplier',
                      'hypervisor_version_weight_multiplier')


# ------------------------------------------------------------------ random clouds
def random_cloud(rng: random.Random, n_hosts: int):
    """(Candidates, HostCatalog, instance uuids per host name) of a random cloud."""
    summaries: dict[str, ProviderSummary] = {}
    requests: list[AllocationRequest] = []
    records: list[HostRecord] = []
    instances: dict[str, list[str]] = {}
    nfs = uuid_for('nfs')
    summaries[nfs] = ProviderSummary(nfs, nfs, None, {'DISK_GB': ResourceUsage(10000, 10)},
                                     frozenset({SHARING_TRAIT}))
    for i in range(n_hosts):
        name = f'host-{i}'
        root = uuid_for(name)
        # Coarse values so that equal weights (ties) are common.
        resources = {'VCPU': ResourceUsage(rng.choice((8, 16, 32)), rng.choice((0, 2, 4, 8))),
                     'MEMORY_MB': ResourceUsage(rng.choice((8192, 16384)),
                                                rng.choice((0, 1024, 4096))),
                     'DISK_GB': ResourceUsage(rng.choice((100, 200)), rng.choice((0, 50)))}
        if rng.random() < 0.2:
            resources['PCPU'] = ResourceUsage(rng.choice((4, 8)), rng.choice((0, 2)))
        summaries[root] = ProviderSummary(root, root, None, resources,
                                          frozenset(rng.sample(['HW_CPU_X86_AVX2', 'CUSTOM_A'],
                                                               rng.randint(0, 2))))
        candidates = [AllocationRequest({root: {'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 10}},
                                        {'': (root,)})]
        if rng.random() < 0.3:  # a NUMA child and a second candidate using it and shared disk
            child = uuid_for(f'{name}-numa1')
            summaries[child] = ProviderSummary(child, root, root,
                                               {'VCPU': ResourceUsage(8, rng.choice((0, 7)))},
                                               frozenset())
            candidates.append(AllocationRequest({root: {'MEMORY_MB': 2048},
                                                 child: {'VCPU': 2}, nfs: {'DISK_GB': 10}}))
        rng.shuffle(candidates)
        requests.extend(candidates)
        on_host = [uuid_for(f'{name}-vm{k}') for k in range(rng.choice((0, 0, 1, 3)))]
        instances[name] = on_host
        ms = rng.choice((1, 999_999, rng.randrange(10**6)))
        records.append(HostRecord(
            nodename=name, service_host=name, provider_uuid=root,
            cell_uuid=rng.choice((CELL, CELL, OTHER_CELL)),
            disabled=rng.random() < 0.1, forced_down=rng.random() < 0.05,
            last_seen_up=rng.choice((None, NOW, NOW - datetime.timedelta(seconds=30),
                                     NOW - datetime.timedelta(seconds=59.5),
                                     NOW - datetime.timedelta(seconds=60),
                                     NOW - datetime.timedelta(seconds=61),
                                     NOW + datetime.timedelta(seconds=600),
                                     NOW - datetime.timedelta(hours=2),
                                     # whole seconds in a reason, from a fraction's both sides
                                     NOW + datetime.timedelta(seconds=61, microseconds=ms),
                                     NOW - datetime.timedelta(seconds=7261, microseconds=ms))),
            hypervisor_type='QEMU', hypervisor_version=rng.choice((None, 8002000, 9000000)),
            supported_instances=rng.choice(([], [('x86_64', 'kvm', 'hvm')],
                                            [('aarch64', 'kvm', 'hvm')],
                                            [('x86_64', 'qemu', 'hvm'), ('i686', 'kvm', 'hvm')])),
            stats={'io_workload': str(rng.randint(0, 10)),
                   'num_instances': str(rng.choice((0, 5, 60))),
                   'failed_builds': str(rng.choice((0, 0, 0, 2))),
                   # A stats key a flavor may name without a scope (no rng drawn:
                   # every seed's cloud is otherwise the one it always was).
                   **({'gpu_model': 'a10'} if len(records) % 3 == 0 else {})},
            metrics=rng.choice(({}, {'cpu.percent': rng.choice((0.1, 0.5))}))))
    rng.shuffle(requests)  # Placement's order is not the hosts' order
    aggregates = []
    names = [r.service_host for r in records]
    for k in range(rng.randint(0, 4)):
        metadata: dict[str, str] = {}
        if rng.random() < 0.5:
            metadata['availability_zone'] = f'az{k % 2}'
        for option in rng.sample(MULTIPLIER_OPTIONS, rng.randint(0, 3)):
            metadata[option] = rng.choice(('2.0', '-1.5', '0', 'not-a-number'))
        if rng.random() < 0.3:
            metadata['max_io_ops_per_host'] = str(rng.randint(1, 10))
        aggregates.append(Aggregate(id=k + 1, uuid=uuid_for(f'agg{k}'), name=f'agg{k}',
                                    hosts=rng.sample(names, rng.randint(0, len(names))),
                                    metadata=metadata))
    catalog = HostCatalog(default_cell_uuid=CELL)
    catalog.load_content(HostsFileContent(aggregates=tuple(aggregates), hosts=tuple(records)),
                         'random')
    for name, uuids in instances.items():
        if uuids or rng.random() < 0.5:
            catalog.update_instance_info(name, uuids)
    return (Candidates(tuple(requests), summaries, '1.36'), catalog, instances)


def random_spec(rng: random.Random, instances: dict[str, list[str]], n_instances: int):
    uuids = [uuid_for(f'new-{rng.random()}') for _ in range(n_instances)]
    existing = [u for on_host in instances.values() for u in on_host]
    group = None
    policy = rng.choice((None, 'anti-affinity', 'affinity', 'soft-affinity',
                         'soft-anti-affinity'))
    if policy is not None:
        members = uuids + rng.sample(existing, min(len(existing), rng.randint(0, 4)))
        group = InstanceGroup(uuid=uuid_for('group'), policy=policy, members=members,
                              hosts=[], rules=rng.choice(({}, {'max_server_per_host': '2'})))
    extra_specs = rng.choice(({}, {'hw:cpu_policy': 'shared'},
                              {'capabilities:hypervisor_type': 'QEMU'}, {'hw:numa_nodes': '1'},
                              {'group_policy': 'isolate', 'resources1:VGPU': '1'},
                              {'gpu_model': 'a10'}, {'gpu_model': 't4'}))
    image = ImageMeta(properties=ImageMetaProps(rng.choice(
        ({}, {'hw_architecture': 'x86_64'}, {'hw_architecture': 'aarch64'},
         {'img_hv_type': 'kvm', 'hw_vm_mode': 'hvm'}))))
    hints: dict[str, Any] = {}
    if existing and rng.random() < 0.2:
        hints[rng.choice(('same_host', 'different_host'))] = rng.sample(existing, 1)
    spec = make_spec(group=group, hints=hints, image=image,
                     flavor=Flavor(vcpus=2, memory_mb=2048, root_gb=10,
                                   extra_specs=extra_specs),
                     availability_zone=rng.choice((None, 'az0')))
    return spec, uuids


def random_conf(rng: random.Random):
    fs: dict[str, Any] = {option: rng.choice((1.0, -1.0, 0.0, 2.5))
                          for option in MULTIPLIER_OPTIONS}
    for option in ('soft_affinity_weight_multiplier', 'soft_anti_affinity_weight_multiplier'):
        fs[option] = abs(fs[option])  # Nova's minimum is 0
    fs.update(enabled_filters=rng.sample(ALL_FILTERS, rng.randint(3, len(ALL_FILTERS))),
              weight_classes=['nova.scheduler.weights.all_weighers'],
              host_subset_size=rng.choice((1, 1, 3)),
              shuffle_best_same_weighed_hosts=rng.random() < 0.3,
              max_io_ops_per_host=rng.choice((4, 8)),
              max_instances_per_host=rng.choice((10, 50)))
    metrics = rng.choice(({}, {'weight_setting': ['cpu.percent=1.0'], 'required': False}))
    return make_conf(filter_scheduler=fs, metrics=metrics)


# ------------------------------------------------------------------ both paths
def decide(hosts, filters, weighers, spec, uuids, conf, seed, *, vectorised):
    """Every instance's filter steps, weights, order and placement."""
    rng = random.Random(seed)
    fs = conf.filter_scheduler
    trail = []
    for index, instance_uuid in enumerate(uuids):
        spec.instance_uuid = instance_uuid
        run = apply_filters(filters, hosts, spec, instance_index=index, vectorised=vectorised)
        excluded: list = []
        weighed = weigh_hosts(weighers, run.hosts, spec, excluded=excluded,
                              vectorised=vectorised)
        ordered = order_hosts(weighed, host_subset_size=fs.host_subset_size,
                              shuffle_best_same_weighed_hosts=fs.shuffle_best_same_weighed_hosts,
                              rng=rng)
        placed = next(((h, first_fitting(h)) for h in ordered if first_fitting(h)), None)
        trail.append({
            'steps': [(s.name, s.hosts_in, s.removed, s.skipped) for s in run.steps],
            'weights': [(w.host.host, w.weight, w.contributions) for w in weighed],
            'excluded': [(e.weigher, e.host.host, e.reason) for e in excluded],
            'order': [h.host for h in ordered],
            'placed': placed and (placed[0].host, placed[1].to_json()),
        })
        hosts = ordered
        if placed is None:
            break
        placed[0].consume(placed[1], instance_uuid)
        if spec.instance_group is not None:
            spec.instance_group.hosts.append(placed[0].host)
    return trail


def with_sparse_columns(table: HostTable) -> HostTable:
    """The same table with every capacity and usage column held sparse (as a provider
    view holds a class few hosts have): only its rows that are not zero."""
    def sparse(column: Any) -> SparseColumn:
        rows = np.flatnonzero(column)
        return SparseColumn(rows.astype(np.int32), column[rows], len(column))
    return table.with_usage({rc: sparse(c) for rc, c in table.capacity.items()},
                            {rc: sparse(c) for rc, c in table.used.items()})


def load_plugins(conf):
    filters = plugins.load_filters(conf)
    for f in filters:
        if isinstance(f, ComputeFilter):
            f.clock = lambda: NOW
    return filters, plugins.load_weighers(conf)


@pytest.mark.parametrize('seed', range(120))
def test_column_hooks_and_host_by_host_plugins_make_the_same_decisions(seed):
    rng = random.Random(seed)
    candidates, catalog, instances = random_cloud(rng, rng.randint(1, 40))
    conf = random_conf(rng)
    spec, uuids = random_spec(rng, instances, rng.choice((1, 1, 3, 10)))
    spec_b, spec_c = copy.deepcopy(spec), copy.deepcopy(spec)

    filters, weighers = load_plugins(conf)
    per_host = decide(HostTable(candidates, catalog).view(), filters, weighers, spec, uuids,
                      conf, seed, vectorised=False)
    filters, weighers = load_plugins(conf)
    columnar = decide(HostTable(candidates, catalog).view(), filters, weighers, spec_b, uuids,
                      conf, seed, vectorised=True)
    filters, weighers = load_plugins(conf)
    sparse = decide(with_sparse_columns(HostTable(candidates, catalog)).view(), filters,
                    weighers, spec_c, uuids, conf, seed, vectorised=True)

    assert columnar == per_host
    assert sparse == per_host


def test_a_table_builds_host_states_only_for_the_hosts_it_is_asked_for():
    rng = random.Random(7)
    candidates, catalog, instances = random_cloud(rng, 200)
    conf = make_conf(filter_scheduler={'weight_classes': ['nova.scheduler.weights.all_weighers']})
    filters, weighers = load_plugins(conf)
    table = HostTable(candidates, catalog)
    spec = make_spec(flavor=Flavor(vcpus=2, memory_mb=2048, root_gb=10))

    run = apply_filters(filters, table.view(), spec, instance_index=0)
    ordered = order_hosts(weigh_hosts(weighers, run.hosts, spec), host_subset_size=1,
                          shuffle_best_same_weighed_hosts=False, rng=random.Random(0))
    assert isinstance(ordered, HostView)
    first = ordered[0]

    built = list(table._hosts.values())
    # Only the best host; the ComputeFilter judged the down hosts from the columns.
    assert built == [first]


def test_a_view_names_the_service_hosts_of_its_items_without_building_their_states():
    candidates, catalog, _ = random_cloud(random.Random(8), 50)
    conf = make_conf(filter_scheduler={'weight_classes': ['nova.scheduler.weights.all_weighers']})
    _, weighers = load_plugins(conf)
    table = HostTable(candidates, catalog)
    spec = make_spec(flavor=Flavor(vcpus=2, memory_mb=2048, root_gb=10))
    # A view's rows, and an order read lazily (only the positions asked are sorted).
    views = [table.view()[::-1], order_hosts(
        weigh_hosts(weighers, table.view(), spec), host_subset_size=3,
        shuffle_best_same_weighed_hosts=True, rng=random.Random(0))]
    bounds = ((0, 8), (1, 9), (45, 60), (50, 58))

    names = [view.host_names(start, stop) for view in views for start, stop in bounds]

    assert table._hosts == {}
    assert names == [[views[v][i].host for i in range(start, min(stop, 50))]
                     for v in range(2) for start, stop in bounds]


class PerHostOnly(BaseHostFilter):
    """An operator's filter written the simple way, with no column hook."""

    def host_passes(self, host_state, spec_obj):
        return host_state.free_ram_mb >= 12000


class StricterComputeFilter(ComputeFilter):
    """An operator's subclass that changes the per-host rule: the parent's
    column hook must not stand in for it."""

    def filter_result(self, host_state, spec_obj):
        if host_state.host.endswith('-1'):
            return type(super().filter_result(host_state, spec_obj)).fail('odd one out')
        return super().filter_result(host_state, spec_obj)


class PerHostWeigher(BaseHostWeigher):
    def _weigh_object(self, host_state, weight_properties):
        return -len(host_state.host)


def test_plugins_written_per_host_keep_working_on_columns():
    rng = random.Random(3)
    candidates, catalog, instances = random_cloud(rng, 30)
    conf = make_conf()
    filters = [StricterComputeFilter(), PerHostOnly()]
    for f in filters:
        f.conf = conf
        f.clock = lambda: NOW
    weighers = [PerHostWeigher()]
    spec = make_spec(flavor=Flavor(vcpus=2, memory_mb=2048, root_gb=10))

    per_host = decide(HostTable(candidates, catalog).view(), filters, weighers, spec,
                      [None], conf, 0, vectorised=False)
    columnar = decide(HostTable(candidates, catalog).view(), filters, weighers, spec,
                      [None], conf, 0, vectorised=True)

    assert columnar == per_host
    removed = dict(per_host[0]['steps'][0][2])
    assert removed.get('odd one out') == ['host-1']


def test_consuming_a_host_updates_the_columns_the_next_instance_reads():
    rng = random.Random(11)
    candidates, catalog, _ = random_cloud(rng, 5)
    table = HostTable(candidates, catalog)
    host = table.host(0)
    before = int(table.used['MEMORY_MB'][0])

    host.consume(first_fitting(host), 'new-instance')

    assert table.used_at('MEMORY_MB', [0])[0] == host.used['MEMORY_MB'] > before
    assert table.column('MEMORY_MB', 'used')[0] == host.used['MEMORY_MB']
    assert table.num_instances[0] == host.num_instances
    assert table.members_on_rows(['new-instance']).tolist() == [1, 0, 0, 0, 0]
    assert np.array_equal(table.free('MEMORY_MB')[[0]], [host.free_ram_mb])


@pytest.mark.parametrize('seed', range(30))
def test_the_best_few_are_the_head_of_a_full_stable_sort(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    weights = rng.choice([0.0, 0.5, 1.0, 1.5, -2.0], size=n) + rng.choice([0, 1e-9], size=n)
    full = np.argsort(-weights, kind='stable')
    for k in (1, 2, 5, n):
        assert top_positions(weights, min(k, n)).tolist() == full[:k].tolist()


def test_a_request_s_hosts_are_freed_without_the_garbage_collector():
    import gc
    import weakref
    rng = random.Random(5)
    candidates, catalog, _ = random_cloud(rng, 10)
    table = HostTable(candidates, catalog)
    host = table.host(0)
    host.consume(first_fitting(host), 'x')
    table_ref, host_ref = weakref.ref(table), weakref.ref(host)
    gc.disable()
    try:
        del table, host
        # Reference counting alone frees them: no cycle between table and hosts.
        assert table_ref() is None and host_ref() is None
    finally:
        gc.enable()


def test_a_record_s_columns_are_derived_once_and_kept_outside_its_value():
    rng = random.Random(11)
    candidates, catalog, _ = random_cloud(rng, 6)
    first = HostTable(candidates, catalog)
    record = first.records[0]
    derived = HostTable.record_values(record)
    # The next request reads the same values, not a new derivation.
    assert HostTable.record_values(HostTable(candidates, catalog).records[0]) is derived
    # A record's value is its fields: nothing derived is stored on it.
    assert dataclasses.replace(record) == record
    assert not hasattr(record, '__dict__')


def test_a_record_the_catalog_dropped_leaves_the_cache_with_it():
    record = HostRecord(nodename='gone', service_host='gone', cell_uuid=CELL,
                        stats={'io_workload': '3'})
    cached = len(HostTable.record_values)
    values = HostTable.record_values(record)
    assert values[[c.name for c in COLUMNS].index('num_io_ops')] == 3
    assert len(HostTable.record_values) == cached + 1

    del record

    assert len(HostTable.record_values) == cached


@pytest.mark.parametrize('seed', range(20))
def test_columns_read_from_records_equal_those_read_from_their_host_states(seed):
    """The two sources of a table's columns (a Placement answer's records, or
    HostStates handed over) agree on every column of the schema."""
    rng = random.Random(seed)
    candidates, catalog, _ = random_cloud(rng, rng.randint(1, 30))
    from_answer = HostTable(candidates, catalog)
    from_hosts = HostTable.from_hosts(list(HostTable(candidates, catalog).view()))

    for column in COLUMNS:
        a, b = getattr(from_answer, column.name), getattr(from_hosts, column.name)
        if column.dtype is None:
            assert a == b, column.name
        else:
            assert np.array_equal(a, b, equal_nan=column.dtype is np.float64), column.name
    for rc in from_answer.capacity:
        assert np.array_equal(from_answer.capacity[rc], from_hosts.capacity[rc])
        assert np.array_equal(from_answer.used[rc], from_hosts.used[rc])
    assert from_answer.supported_codes.tolist() == from_hosts.supported_codes.tolist()
    assert from_answer.instances == from_hosts.instances


def test_every_column_of_the_schema_is_declared_on_the_table():
    declared = HostTable.__annotations__
    assert {c.name for c in COLUMNS} <= set(declared)


def test_consuming_a_handed_over_host_updates_every_table_it_is_in():
    rng = random.Random(2)
    candidates, catalog, _ = random_cloud(rng, 3)
    hosts = list(HostTable(candidates, catalog).view())
    first, second = HostTable.from_hosts(hosts), HostTable.from_hosts(hosts)

    hosts[1].consume(first_fitting(hosts[1]), 'new-instance')

    for table in (first, second):
        assert table.column('MEMORY_MB', 'used')[1] == hosts[1].used['MEMORY_MB']
        assert table.num_io_ops[1] == hosts[1].num_io_ops
        assert table.members_on_rows(['new-instance']).tolist() == [0, 1, 0]


@pytest.mark.parametrize('weights, tolerance, count', [
    ([1.0, 0.995, 0.98], 0.0, 1),
    ([1.0, 0.995, 0.98], 0.01, 2),
    ([1.0, 1.0, 0.5], 0.0, 2),
    # A negative best weight: the tolerance is a fraction of its size, still below it.
    ([-1.0, -1.005, -1.02], 0.01, 2),
    ([], 0.01, 0),
], ids=['exact best', 'within 1%', 'a tie', 'negative weights', 'no host'])
def test_the_near_best_hosts_are_those_within_the_tolerance_of_the_best(weights, tolerance,
                                                                        count):
    assert count_near_best(np.array(weights, dtype=float), tolerance) == count


@pytest.mark.parametrize('sparse', (False, True))
@pytest.mark.parametrize('seed', range(20))
def test_usage_added_beside_a_column_reads_as_the_column_with_it_added(seed, sparse):
    rng = random.Random(seed)
    candidates, catalog, _ = random_cloud(rng, rng.randint(1, 12))
    table = HostTable(candidates, catalog)
    expected = table.column('VCPU', 'used').copy()
    capacity = table.column('VCPU', 'capacity').copy()
    if sparse:
        # A provider view's table: each request forks it, and what a fork adds or
        # makes whole is the fork's own.
        shared = with_sparse_columns(table)
        table = shared.fork(requests=[], summaries={})
    n = len(table)
    for _ in range(rng.randint(0, 3 * n)):
        row, amount = rng.randrange(n), rng.randint(-2, 5)
        table.add_used('VCPU', row, amount)
        expected[row] += amount
        picked = [rng.randrange(n) for _ in range(rng.randint(0, 2 * n))]
        # Rows in any order, some twice; and ascending, each once (the filters' answer).
        for rows in (np.array(picked, dtype=np.intp),
                     np.array(sorted(set(picked)), dtype=np.intp)):
            assert table.used_at('VCPU', rows).tolist() == expected[rows].tolist()
            assert table.free_at('VCPU', rows).tolist() == (
                capacity[rows] - expected[rows]).tolist()
            assert table.capacity_at('VCPU', rows).tolist() == capacity[rows].tolist()
    assert table.column('VCPU', 'used').tolist() == expected.tolist()
    assert table.column('VCPU', 'capacity').tolist() == capacity.tolist()
    if sparse:
        assert isinstance(shared.used['VCPU'], SparseColumn)
        assert isinstance(shared.capacity['VCPU'], SparseColumn)
