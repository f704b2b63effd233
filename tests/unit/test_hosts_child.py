"""A large hosts file is parsed by a child process; the worker receives its records."""
from __future__ import annotations

import dataclasses
import datetime
import sys
import textwrap
from pathlib import Path

import pytest

from scheduler.catalog import hosts_child
from scheduler.catalog.hosts_child import read_in_child
from scheduler.catalog.hosts_file import read_hosts_in_process
from scheduler.exceptions import CatalogError
from scheduler.host_state import HostRecord

DEFAULT_CELL = '00000000-0000-0000-0000-000000000001'
RP1 = '0d5e1b6a-3c21-4f0e-8a55-2b7d9c4e1f01'
RP2 = '1a2b3c4d-0000-4000-8000-000000000002'
AGG = '445fd4b4-80eb-55fe-bf3c-0520043da8af'

HOSTS = f"""
cells:
  - {{uuid: {DEFAULT_CELL}, name: cell1}}
aggregates:
  - name: az1
    uuid: {AGG}
    hosts: [compute-01, compute-02]
    metadata: {{availability_zone: az1}}
hosts:
  - nodename: compute-01
    provider_uuid: {RP1}
    host_ip: 192.0.2.11
    hypervisor_type: QEMU
    hypervisor_version: 8002000
    last_seen_up: 2026-01-15T10:30:00Z
    cpu_info: {{arch: x86_64, topology: {{cores: 24}}}}
    supported_instances: [[x86_64, kvm, hvm]]
    stats: {{num_instances: 3}}
    metrics: {{cpu.percent: 1}}
  - nodename: compute-02
    provider_uuid: {RP2}
    host_ip: 192.0.2.12
    hypervisor_type: QEMU
    hypervisor_version: 8002000
    last_seen_up: 2026-01-15T10:30:00Z
    cpu_info: {{arch: x86_64, topology: {{cores: 24}}}}
    supported_instances: [[x86_64, kvm, hvm]]
    stats: {{num_instances: 3}}
    disabled: true
    disabled_reason: maintenance
  - nodename: compute-03
    last_seen_up: 2026-01-15T11:30:00+01:00
    numa_topology: {{cells: [{{id: 0, cpuset: "0-3", memory: 4096}}]}}
"""


def write(tmp_path: Path, text: str = HOSTS) -> str:
    path = tmp_path / 'hosts.yaml'
    path.write_text(textwrap.dedent(text), encoding='utf-8')
    return str(path)


def test_the_child_reads_what_this_process_would_read(tmp_path):
    path = write(tmp_path)

    assert read_in_child(path, DEFAULT_CELL) == read_hosts_in_process(
        path, default_cell_uuid=DEFAULT_CELL)


def test_values_hosts_share_in_the_file_stay_shared_after_the_child(tmp_path):
    content = read_in_child(write(tmp_path), DEFAULT_CELL)
    a, b, _ = content.hosts

    assert a.cpu_info is b.cpu_info
    assert a.supported_instances is b.supported_instances
    assert a.stats is b.stats
    assert a.last_seen_up is b.last_seen_up
    assert a.hypervisor_version is b.hypervisor_version
    assert a.cell_uuid is b.cell_uuid
    # An aggregate names its hosts with the records' own strings.
    assert content.aggregates[0].hosts[0] is a.service_host


def test_the_names_arrive_as_the_strings_every_other_source_of_the_catalog_uses(tmp_path):
    a, *_ = read_in_child(write(tmp_path), DEFAULT_CELL).hosts

    # The cell databases' nodes and services intern the names they read: 50,000 hosts
    # then hold one string each per name, whichever sources name them.
    assert a.nodename is sys.intern(''.join(['compute-', '01']))
    assert a.service_host is a.nodename
    assert a.provider_uuid is sys.intern(RP1.upper().lower())


def test_an_equal_heartbeat_in_another_time_zone_keeps_its_zone(tmp_path):
    a, _, c = read_in_child(write(tmp_path), DEFAULT_CELL).hosts

    assert c.last_seen_up == a.last_seen_up
    assert c.last_seen_up.utcoffset() == datetime.timedelta(hours=1)


def test_an_error_in_the_file_is_the_childs_message_naming_the_file_and_entry(tmp_path):
    path = write(tmp_path, 'hosts: [{nodename: a, stats: {x: [1]}}]')

    with pytest.raises(CatalogError) as info:
        read_in_child(path, DEFAULT_CELL)

    assert str(info.value).startswith(f'{path}: ')
    assert 'hosts[0] (a): stats.x must be a string' in str(info.value)


def test_a_child_that_fails_is_an_error_naming_the_file_and_its_last_words(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setattr(hosts_child, '_CHILD_MODULE', 'scheduler.catalog.no_such_module')
    path = write(tmp_path)

    with pytest.raises(CatalogError) as info:
        read_in_child(path, DEFAULT_CELL)

    assert str(info.value).startswith(
        f'{path}: the process reading the hosts file failed (exit status 1): ')
    assert 'No module named scheduler.catalog.no_such_module' in str(info.value)


def test_a_child_running_other_code_is_refused(tmp_path, monkeypatch):
    # The code on disk was upgraded under a running worker: its records have
    # other fields than this process's.
    monkeypatch.setattr(hosts_child, '_FIELDS', (*hosts_child._FIELDS, 'added_later'))
    path = write(tmp_path)

    with pytest.raises(CatalogError, match='runs other code .*restart the service'):
        read_in_child(path, DEFAULT_CELL)


def test_a_record_travels_as_its_fields_and_arrives_equal(tmp_path):
    # Nothing a host table derives is stored on a record (HostTable.record_values
    # keeps it), so the fields are the whole record.
    path = write(tmp_path)
    assert hosts_child._FIELDS == tuple(f.name for f in dataclasses.fields(HostRecord))
    assert (read_in_child(path, DEFAULT_CELL).hosts
            == read_hosts_in_process(path, default_cell_uuid=DEFAULT_CELL).hosts)
