"""Workload files (flavors, requests, fill) and the capacity answer built from outcomes."""
from __future__ import annotations

import json

import pytest

from scheduler.exceptions import ConfigurationError
from scheduler.simulate.capacity import CapacityReport, render, run_entries, to_json
from scheduler.simulate.report import Outcome, PlacedInstance
from scheduler.simulate.workload_file import (
    BUILTIN_FLAVORS,
    DEFAULT_FILL_MAX,
    FillEntry,
    RequestEntry,
    WorkloadFileError,
    boot_request,
    load_workload,
    parse_workload,
)

YAML = """
flavors:
  gpu.large: {vcpus: 8, memory_mb: 32768, disk_gb: 100,
              extra_specs: {"trait:CUSTOM_GPU": required}}
requests:
  - {flavor: m1.small, count: 100}
  - {flavor: gpu.large, count: 2, instances: 3, anti_affinity: true, az: az1}
fill: m1.large
"""


def test_a_yaml_workload_gives_flavors_requests_and_fill(tmp_path):
    path = tmp_path / 'w.yaml'
    path.write_text(YAML)
    w = load_workload(str(path))
    assert w.flavors['gpu.large'].resources() == {'VCPU': 8, 'MEMORY_MB': 32768,
                                                  'DISK_GB': 100}
    assert w.flavors['m1.small'] == BUILTIN_FLAVORS['m1.small']
    assert w.requests == (RequestEntry('m1.small', count=100),
                          RequestEntry('gpu.large', count=2, instances=3, anti_affinity=True,
                                       az='az1'))
    assert w.fills == (FillEntry('m1.large', max=DEFAULT_FILL_MAX),)


def test_a_json_workload_is_read_the_same_way(tmp_path):
    path = tmp_path / 'w.json'
    path.write_text(json.dumps({'fill': [{'flavor': 'm1.small', 'az': 'az2', 'max': 5}]}))
    assert load_workload(str(path)).fills == (FillEntry('m1.small', az='az2', max=5),)


@pytest.mark.parametrize('data, message', [
    ({'fill': 'm9.huge'}, "unknown flavor 'm9.huge'"),
    ({'requests': [{'flavor': 'm1.small', 'cnt': 3}]}, r"unknown key\(s\) \['cnt'\]"),
    ({'requests': [{'flavor': 'm1.small', 'count': -1}]}, 'count must be an integer'),
    ({'requests': [{'flavor': 'm1.small', 'anti_affinity': 'yes'}]}, 'true or false'),
    ({'flavors': {'x': {'vcpus': 1}}, 'fill': 'x'}, 'memory_mb must be an integer'),
    ({'flavors': {'x': {'vcpus': 1, 'memory_mb': 1, 'disk_gb': 1, 'root_gb': 1}}},
     'not both'),
    ({'fill': [{'flavor': 'm1.small', 'max': 0}]}, 'max must be an integer of at least 1'),
    ({'flavors': {}}, 'neither requests nor fill'),
    (['m1.small'], 'must be a mapping'),
])
def test_an_impossible_workload_is_refused_with_the_reason(data, message):
    with pytest.raises(WorkloadFileError, match=message):
        parse_workload(data)


def test_an_unreadable_workload_file_is_a_configuration_error(tmp_path):
    path = tmp_path / 'w.yaml'
    path.write_text('fill: [m1.small\n')
    with pytest.raises(ConfigurationError, match='neither YAML nor JSON'):
        load_workload(str(path))


def test_a_boot_request_carries_the_flavor_extra_specs_and_the_group():
    w = parse_workload({'flavors': {'gpu': {'vcpus': 2, 'memory_mb': 1024, 'extra_specs': {
        'trait:CUSTOM_GPU': 'required'}}}, 'fill': 'gpu'})
    request = boot_request(w, index=4, flavor='gpu', instances=2, anti_affinity=True, az='az1')
    spec = request.request_spec()
    assert spec.flavor.extra_specs == {'trait:CUSTOM_GPU': 'required'}
    assert (spec.flavor.vcpus, spec.flavor.memory_mb, spec.flavor.root_gb) == (2, 1024, 0)
    assert spec.num_instances == 2 and spec.availability_zone == 'az1'
    assert spec.instance_group.policy == 'anti-affinity'
    assert boot_request(w, index=4, flavor='gpu') .instance_uuids[0] == request.instance_uuids[0]


class _Cloud:
    """Sends: place on hosts in turn until ``free`` instances are used, then NoValidHost."""

    def __init__(self, free: int, hosts: tuple[str, ...] = ('cn-1', 'cn-2', 'cn-3')):
        self.free = free
        self.hosts = hosts
        self.sent = 0

    def send(self, request) -> Outcome:
        self.sent += 1
        n = request.num_instances
        if n > self.free:
            return Outcome(request.index, request.kind, n, 0.0, error='NoValidHost',
                           reason='Placement returned no allocation candidates')
        self.free -= n
        placed = tuple(PlacedInstance(u, self.hosts[(request.index + i) % len(self.hosts)], 'x')
                       for i, u in enumerate(request.instance_uuids))
        return Outcome(request.index, request.kind, n, 0.0, placed=placed)


def _az(host: str) -> str:
    return 'az1' if host == 'cn-1' else 'az2'


def test_a_fill_stops_at_the_first_no_valid_host_and_says_where_instances_landed():
    cloud = _Cloud(free=5)
    report = run_entries(parse_workload({'fill': 'm1.large'}), cloud.send, _az)
    (fill,) = report.entries
    assert (fill.placed_before_first_failure, fill.boots_sent, cloud.sent) == (5, 6, 6)
    assert fill.first_failure == 'NoValidHost: Placement returned no allocation candidates'
    assert fill.per_host == {'cn-1': 2, 'cn-2': 2, 'cn-3': 1}
    assert fill.per_az == {'az1': 2, 'az2': 3}
    assert not fill.stopped_at_max
    assert report.by_flavor() == {'m1.large': 5}
    assert 'fill m1.large: 5 more fit' in render(report)


def test_a_fill_that_reaches_its_max_says_the_cloud_is_not_full():
    cloud = _Cloud(free=100)
    report = run_entries(parse_workload({'fill': [{'flavor': 'm1.small', 'max': 3}]}),
                         cloud.send, _az)
    assert report.entries[0].stopped_at_max
    assert report.entries[0].placed_before_first_failure == 3
    assert 'stopped at max 3, not full' in render(report)


def test_requests_are_all_sent_and_count_what_fit_before_the_first_failure():
    cloud = _Cloud(free=4)
    w = parse_workload({'requests': [{'flavor': 'm1.small', 'count': 3, 'instances': 2}]})
    (entry,) = run_entries(w, cloud.send, _az).entries
    # 2 + 2 fit, the third boot of 2 does not.
    assert (entry.boots_sent, entry.instances_requested, entry.instances_placed,
            entry.placed_before_first_failure) == (3, 6, 4, 4)
    assert entry.label == '3 x m1.small (2 instances each)'


def test_the_capacity_json_lists_entries_and_totals_per_flavor():
    body = to_json(run_entries(parse_workload({'fill': ['m1.small', 'm1.small']}),
                               _Cloud(free=3).send, _az))
    assert body['by_flavor'] == {'m1.small': 3}
    assert [e['placed_before_first_failure'] for e in body['entries']] == [3, 0]
    assert json.loads(json.dumps(body)) == body
    assert CapacityReport(entries=()).by_flavor() == {}
