"""HostCatalog: the hosts file, unknown providers, the fanout casts, thread safety."""
from __future__ import annotations

import datetime
import textwrap
import threading
from pathlib import Path

import pytest

from scheduler.catalog import HostCatalog
from scheduler.exceptions import CatalogError
from scheduler.host_state import HostRecord
from scheduler.objects.spec import Aggregate

SAMPLE = Path(__file__).resolve().parents[2] / 'etc' / 'scheduler' / 'hosts.yaml.sample'

DEFAULT_CELL = '00000000-0000-0000-0000-000000000001'
CELL2 = '6f1f2c5e-7c57-4d0a-9b0e-3f5b1e2a4c10'
RP1 = '0d5e1b6a-3c21-4f0e-8a55-2b7d9c4e1f01'
RP2 = '1a2b3c4d-0000-4000-8000-000000000002'
RP_UNKNOWN = '99999999-0000-4000-8000-000000000099'
AGG_AZ1 = '445fd4b4-80eb-55fe-bf3c-0520043da8af'
AGG_AZ2 = '0c8e9d3a-51f4-4b0f-a7a1-0a4a2b1c9d77'
INST = [f'4f4b28fb-0d17-5271-aad4-6966e9e7f0{i:02d}' for i in range(10)]

HOSTS_YAML = f"""
cells:
  - uuid: {DEFAULT_CELL}
    name: cell1
  - uuid: {CELL2}
    name: cell2
aggregates:
  - name: az1-hosts
    uuid: {AGG_AZ1}
    id: 3
    hosts: [compute-01, compute-02]
    metadata: {{availability_zone: az1, ram_weight_multiplier: 2.0, flag: true}}
  - name: az2-hosts
    uuid: {AGG_AZ2.upper()}
    hosts: [compute-03]
    metadata: {{availability_zone: az2}}
hosts:
  - nodename: compute-01.example.org
    service_host: compute-01
    provider_uuid: {RP1}
    cell: cell2
    host_ip: 192.0.2.11
    hypervisor_type: QEMU
    hypervisor_version: 8002000
    cpu_info: {{arch: x86_64}}
    supported_instances: [[x86_64, kvm, hvm]]
    stats: {{failed_builds: 2}}
    metrics: {{cpu.percent: 1}}
    last_seen_up: 2026-01-15T10:30:00
  - nodename: compute-02
    disabled: true
    disabled_reason: maintenance
    forced_down: true
  - nodename: compute-03
    cell: {CELL2}
"""


def write(tmp_path: Path, text: str, name: str = 'hosts.yaml') -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding='utf-8')
    return str(path)


def make_catalog(tmp_path: Path, text: str = HOSTS_YAML) -> HostCatalog:
    return HostCatalog.from_file(write(tmp_path, text), default_cell_uuid=DEFAULT_CELL,
                                 default_availability_zone='nova')


def empty_catalog() -> HostCatalog:
    return HostCatalog(default_cell_uuid=DEFAULT_CELL, default_availability_zone='nova')


def agg(uuid: str, hosts: list[str], metadata: dict[str, str] | None = None, *,
        id: int = 7, name: str = 'agg') -> Aggregate:
    return Aggregate(id=id, uuid=uuid, name=name, hosts=hosts, metadata=metadata or {})


# Loading -----------------------------------------------------------------------------------

def test_the_shipped_sample_file_loads():
    catalog = HostCatalog.from_file(str(SAMPLE), default_cell_uuid=DEFAULT_CELL)
    stats = catalog.snapshot_stats()
    assert stats['file_hosts'] == 3 and stats['file_aggregates'] == 2
    assert catalog.availability_zone('compute-01') == 'az1'


def test_a_host_entry_becomes_a_record_with_every_field(tmp_path):
    record = make_catalog(tmp_path).record_for_provider(RP1, 'compute-01.example.org')
    assert record == HostRecord(
        nodename='compute-01.example.org', service_host='compute-01', cell_uuid=CELL2,
        provider_uuid=RP1, host_ip='192.0.2.11', hypervisor_type='QEMU',
        hypervisor_version=8002000, cpu_info={'arch': 'x86_64'},
        supported_instances=[('x86_64', 'kvm', 'hvm')], supported_instances_reported=True,
        stats={'failed_builds': '2'},
        metrics={'cpu.percent': 100.0},  # stored as a fraction, read as Nova reads it
        last_seen_up=datetime.datetime(2026, 1, 15, 10, 30, tzinfo=datetime.timezone.utc))


def test_service_host_defaults_to_the_nodename_and_cell_to_the_default_cell(tmp_path):
    record = make_catalog(tmp_path).record_for_provider(RP2, 'compute-02')
    assert (record.service_host, record.cell_uuid) == ('compute-02', DEFAULT_CELL)
    assert (record.disabled, record.disabled_reason, record.forced_down) == (
        True, 'maintenance', True)


def test_a_node_without_provider_uuid_is_matched_by_provider_name_and_gets_the_uuid(tmp_path):
    record = make_catalog(tmp_path).record_for_provider(RP2, 'compute-02')
    assert record.nodename == 'compute-02' and record.provider_uuid == RP2


def test_a_node_with_a_provider_uuid_does_not_match_another_provider_by_name(tmp_path):
    # The file pins compute-01.example.org to RP1; a provider RP2 with the same
    # name is a different node (say, re-created) and must not inherit RP1's cell.
    record = make_catalog(tmp_path).record_for_provider(RP2, 'compute-01.example.org')
    assert record.cell_uuid == DEFAULT_CELL and record.provider_uuid == RP2


def test_metadata_and_stats_values_are_kept_as_strings_like_nova(tmp_path):
    aggregate = make_catalog(tmp_path).aggregates_for_host('compute-01')[0]
    assert aggregate.metadata == {'availability_zone': 'az1', 'ram_weight_multiplier': '2.0',
                                  'flag': 'true'}


def test_aggregate_uuids_are_normalized_and_ids_default_to_the_position(tmp_path):
    aggregate = make_catalog(tmp_path).aggregates_for_host('compute-03')[0]
    assert (aggregate.uuid, aggregate.id) == (AGG_AZ2, 2)


def test_an_empty_file_is_an_empty_catalog(tmp_path):
    catalog = make_catalog(tmp_path, '')
    assert catalog.find_nodes(None, None) == [] and catalog.cells() == {DEFAULT_CELL}


def test_load_file_replaces_what_the_previous_file_said(tmp_path):
    catalog = make_catalog(tmp_path)
    catalog.load_file(write(tmp_path, f"""
        aggregates:
          - {{name: new, uuid: {AGG_AZ1}, hosts: [compute-09], metadata: {{availability_zone: z9}}}}
        hosts:
          - {{nodename: compute-09}}
        """, 'second.yaml'))
    assert [r.nodename for r in catalog.find_nodes(None, None)] == ['compute-09']
    assert catalog.aggregates_for_host('compute-01') == []
    assert catalog.availability_zone('compute-09') == 'z9'
    assert catalog.cells() == {DEFAULT_CELL}


def test_a_bad_reload_leaves_the_previous_content_in_place(tmp_path):
    catalog = make_catalog(tmp_path)
    with pytest.raises(CatalogError):
        catalog.load_file(write(tmp_path, 'hosts: [{nodename: x, bogus: 1}]', 'bad.yaml'))
    assert catalog.availability_zone('compute-01') == 'az1'
    assert catalog.snapshot_stats()['hosts_file'].endswith('hosts.yaml')


# Bad files -------------------------------------------------------------------------------

@pytest.mark.parametrize('text, expected', [
    ('hosts: [{nodename: a, bogus: 1}]', 'hosts[0] (a): unknown key(s) bogus'),
    ('hosts: [{service_host: a}]', 'hosts[0]: nodename is required'),
    ('hosts: [{nodename: a}, {nodename: a}]', "hosts[1] (a): duplicate nodename 'a'"),
    (f'hosts: [{{nodename: a, provider_uuid: {RP1}}}, {{nodename: b, provider_uuid: {RP1}}}]',
     f'hosts[1] (b): duplicate provider_uuid {RP1}'),
    ('hosts: [{nodename: a, provider_uuid: not-a-uuid}]',
     "hosts[0] (a): provider_uuid must be a UUID, got 'not-a-uuid'"),
    ('hosts: [{nodename: a, disabled: "yes"}]', 'hosts[0] (a): disabled must be true or false'),
    ('hosts: [{nodename: a, hypervisor_version: 8.1}]',
     'hosts[0] (a): hypervisor_version must be an integer'),
    ('hosts: [{nodename: a, host_ip: 300.1.1.1}]', 'hosts[0] (a): host_ip must be an IP'),
    ('hosts: [{nodename: a, cell: nowhere}]',
     "hosts[0] (a): cell 'nowhere' is neither a UUID nor the name of a cell"),
    ('hosts: [{nodename: a, last_seen_up: yesterday}]',
     'hosts[0] (a): last_seen_up must be an ISO 8601 timestamp'),
    ('hosts: [{nodename: a, supported_instances: [[x86_64, kvm]]}]',
     'hosts[0] (a): supported_instances items must be'),
    ('hosts: [{nodename: a, metrics: {cpu: high}}]',
     'hosts[0] (a): metrics.cpu must be a finite number'),
    ('hosts: [{nodename: a, stats: {x: [1]}}]', 'hosts[0] (a): stats.x must be a string'),
    ('aggregates: [{name: a}]', 'aggregates[0] (a): uuid is required'),
    (f'aggregates: [{{name: a, uuid: {AGG_AZ1}}}, {{name: b, uuid: {AGG_AZ1}}}]',
     f'aggregates[1] (b): duplicate aggregate uuid {AGG_AZ1}'),
    (f'aggregates: [{{name: a, uuid: {AGG_AZ1}, hosts: host1}}]',
     'aggregates[0] (a): hosts must be a list'),
    (f'aggregates: [{{name: a, uuid: {AGG_AZ1}, metadata: {{availability_zone: ""}}}}]',
     'aggregates[0] (a): metadata.availability_zone must not be empty'),
    ('cells: [{name: c}]', 'cells[0]: uuid is required'),
    ('hosts: {nodename: a}', 'hosts: must be a list, got a mapping'),
    ('- just\n- a list\n', 'top level: must be a mapping, got a list'),
    ('nodes: []', 'top level: unknown key(s) nodes'),
    ('hosts: [unclosed', 'not valid YAML at line'),
])
def test_a_bad_file_raises_catalog_error_naming_the_file_and_the_entry(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(CatalogError) as info:
        HostCatalog.from_file(path, default_cell_uuid=DEFAULT_CELL)
    assert str(info.value).startswith(f'{path}: ')
    assert expected in str(info.value)


def test_a_missing_file_raises_catalog_error_naming_it(tmp_path):
    path = str(tmp_path / 'absent.yaml')
    with pytest.raises(CatalogError, match='absent.yaml: cannot read the hosts file'):
        HostCatalog.from_file(path, default_cell_uuid=DEFAULT_CELL)


def test_a_default_cell_that_is_not_a_uuid_is_refused():
    with pytest.raises(CatalogError, match='default cell uuid'):
        HostCatalog(default_cell_uuid='cell1')


# Unknown providers and names ----------------------------------------------------------------

def test_an_unknown_provider_is_a_host_named_after_the_provider_in_the_default_cell():
    record = empty_catalog().record_for_provider(RP_UNKNOWN, 'node-7')
    assert record == HostRecord(nodename='node-7', service_host='node-7',
                                cell_uuid=DEFAULT_CELL, provider_uuid=RP_UNKNOWN)


def test_an_unknown_provider_without_a_name_is_named_by_its_uuid():
    record = empty_catalog().record_for_provider(RP_UNKNOWN, None)
    assert (record.nodename, record.service_host) == (RP_UNKNOWN, RP_UNKNOWN)


def test_names_learned_from_placement_name_unknown_providers():
    catalog = empty_catalog()
    assert catalog.unknown_provider_uuids([RP_UNKNOWN, RP2]) == {RP_UNKNOWN, RP2}
    catalog.remember_provider_names({RP_UNKNOWN: 'node-7'})
    assert catalog.provider_name(RP_UNKNOWN) == 'node-7'
    assert catalog.unknown_provider_uuids([RP_UNKNOWN, RP2]) == {RP2}
    assert catalog.record_for_provider(RP_UNKNOWN, None).service_host == 'node-7'


def test_a_learned_name_links_a_file_node_without_provider_uuid(tmp_path):
    catalog = make_catalog(tmp_path)
    catalog.remember_provider_names({RP2: 'compute-02'})
    assert catalog.record_for_provider(RP2, None).disabled is True
    assert [r.provider_uuid for r in catalog.find_nodes('compute-02', None)] == [RP2]


def test_file_provider_uuids_count_as_known_names(tmp_path):
    catalog = make_catalog(tmp_path)
    assert catalog.provider_name(RP1) == 'compute-01.example.org'
    assert catalog.unknown_provider_uuids([RP1]) == set()


def test_find_nodes_matches_the_host_case_insensitively_and_the_node_exactly(tmp_path):
    catalog = make_catalog(tmp_path)
    assert [r.nodename for r in catalog.find_nodes('COMPUTE-01', None)] == [
        'compute-01.example.org']
    assert catalog.find_nodes(None, 'COMPUTE-02') == []
    assert [r.nodename for r in catalog.find_nodes('compute-01', 'compute-01.example.org')] == [
        'compute-01.example.org']
    assert catalog.find_nodes('compute-01', 'compute-02') == []


def test_find_nodes_includes_providers_known_only_by_their_placement_name(tmp_path):
    catalog = make_catalog(tmp_path)
    catalog.remember_provider_names({RP_UNKNOWN: 'node-7'})
    [record] = catalog.find_nodes('node-7', None)
    assert (record.provider_uuid, record.cell_uuid) == (RP_UNKNOWN, DEFAULT_CELL)
    assert len(catalog.find_nodes(None, None)) == 4


def test_cells_are_the_declared_the_referenced_and_the_default_cell(tmp_path):
    other = '7a7a7a7a-0000-4000-8000-000000000000'
    catalog = make_catalog(tmp_path, f'hosts: [{{nodename: a, cell: {other}}}]')
    assert catalog.cells() == {DEFAULT_CELL, other}


# Aggregates and availability zones -------------------------------------------------------

def test_a_host_gets_the_availability_zone_of_its_aggregate(tmp_path):
    catalog = make_catalog(tmp_path)
    assert catalog.availability_zone('compute-02') == 'az1'
    assert catalog.availability_zone('compute-03') == 'az2'


def test_a_host_in_no_az_aggregate_is_in_the_default_availability_zone(tmp_path):
    catalog = HostCatalog.from_file(write(tmp_path, HOSTS_YAML), default_cell_uuid=DEFAULT_CELL,
                                    default_availability_zone='zone-x')
    assert catalog.availability_zone('compute-99') == 'zone-x'


def test_aggregates_with_metadata_finds_an_az_by_name(tmp_path):
    catalog = make_catalog(tmp_path)
    assert [a.uuid for a in catalog.aggregates_with_metadata('availability_zone', 'az2')] == [
        AGG_AZ2]
    assert {a.uuid for a in catalog.aggregates_with_metadata('availability_zone')} == {
        AGG_AZ1, AGG_AZ2}
    assert catalog.aggregates_with_metadata('availability_zone', 'az9') == []


def test_aggregate_hosts_are_service_hosts_not_nodenames(tmp_path):
    catalog = make_catalog(tmp_path)
    assert catalog.aggregates_for_host('compute-01.example.org') == []


# Casts: aggregates ---------------------------------------------------------------------------

def test_update_aggregates_adds_a_new_aggregate_to_its_hosts():
    catalog = empty_catalog()
    catalog.update_aggregates([agg(AGG_AZ1, ['h1', 'h2'], {'availability_zone': 'az1'})])
    assert catalog.availability_zone('h1') == 'az1' and catalog.availability_zone('h2') == 'az1'


def test_update_aggregates_removes_the_aggregate_from_hosts_no_longer_listed():
    catalog = empty_catalog()
    catalog.update_aggregates([agg(AGG_AZ1, ['h1', 'h2'])])
    catalog.update_aggregates([agg(AGG_AZ1, ['h2', 'h3'])])
    assert catalog.aggregates_for_host('h1') == []
    assert [a.uuid for a in catalog.aggregates_for_host('h3')] == [AGG_AZ1]


def test_update_aggregates_replaces_metadata():
    catalog = empty_catalog()
    catalog.update_aggregates([agg(AGG_AZ1, ['h1'], {'availability_zone': 'az1'})])
    catalog.update_aggregates([agg(AGG_AZ1, ['h1'], {'availability_zone': 'az2'})])
    assert catalog.availability_zone('h1') == 'az2'
    assert catalog.aggregates_with_metadata('availability_zone', 'az1') == []


def test_update_aggregates_accepts_a_single_aggregate_like_nova():
    catalog = empty_catalog()
    catalog.update_aggregates(agg(AGG_AZ1, ['h1']))
    assert len(catalog.aggregates_for_host('h1')) == 1


def test_update_aggregates_refuses_something_that_is_not_an_aggregate():
    with pytest.raises(CatalogError, match='expected an Aggregate, got dict'):
        empty_catalog().update_aggregates([{'uuid': AGG_AZ1}])


def test_the_catalog_keeps_its_own_copy_of_a_cast_aggregate():
    catalog = empty_catalog()
    sent = agg(AGG_AZ1, ['h1'], {'availability_zone': 'az1'})
    catalog.update_aggregates([sent])
    sent.hosts.append('h2')
    sent.metadata['availability_zone'] = 'changed'
    assert catalog.aggregates_for_host('h2') == []
    assert catalog.availability_zone('h1') == 'az1'


def test_delete_aggregate_removes_it_from_every_host():
    catalog = empty_catalog()
    catalog.update_aggregates([agg(AGG_AZ1, ['h1', 'h2'], {'availability_zone': 'az1'})])
    catalog.delete_aggregate(agg(AGG_AZ1, []))
    assert catalog.aggregates_for_host('h1') == catalog.aggregates_for_host('h2') == []
    assert catalog.aggregates_with_metadata('availability_zone') == []


def test_a_hosts_aggregates_come_once_each_in_id_order():
    catalog = empty_catalog()
    catalog.update_aggregates([agg(AGG_AZ2, ['h1', 'h2', 'h1'], id=2, name='b'),
                               agg(AGG_AZ1, ['h2', 'h1'], id=1, name='a')])

    assert [a.name for a in catalog.aggregates_for_host('h1')] == ['a', 'b']
    assert [a.name for a in catalog.aggregates_for_host('h2')] == ['a', 'b']


def test_hosts_in_the_same_aggregates_share_one_tuple_of_them():
    catalog = empty_catalog()
    catalog.update_aggregates([agg(AGG_AZ1, ['h1', 'h2', 'h3'], id=1, name='a'),
                               agg(AGG_AZ2, ['h1', 'h2'], id=2, name='b')])
    catalog.remember_provider_names({RP1: 'h1', RP2: 'h2', RP_UNKNOWN: 'h3'})

    (_, in_h1, _, _), (_, in_h2, _, _), (_, in_h3, _, _) = catalog.host_rows(
        [RP1, RP2, RP_UNKNOWN])

    assert in_h1 is in_h2 and [a.name for a in in_h1] == ['a', 'b']
    assert [a.name for a in in_h3] == ['a']


def test_casts_override_the_file_and_survive_a_reload(tmp_path):
    catalog = make_catalog(tmp_path)
    catalog.update_aggregates([agg(AGG_AZ1, ['compute-01'], {'availability_zone': 'moved'})])
    catalog.delete_aggregate(agg(AGG_AZ2, []))
    assert catalog.availability_zone('compute-02') == 'nova'  # left the updated aggregate
    assert catalog.aggregates_for_host('compute-03') == []
    catalog.load_file(write(tmp_path, HOSTS_YAML, 'again.yaml'))
    assert catalog.availability_zone('compute-01') == 'moved'
    assert catalog.aggregates_for_host('compute-03') == []


def test_an_aggregate_deleted_then_recreated_by_casts_is_back():
    catalog = empty_catalog()
    catalog.delete_aggregate(agg(AGG_AZ1, []))
    catalog.update_aggregates([agg(AGG_AZ1, ['h1'])])
    assert len(catalog.aggregates_for_host('h1')) == 1


# Casts: instances ------------------------------------------------------------------------

def test_instance_info_of_an_unknown_host_is_taken_as_the_full_list():
    catalog = empty_catalog()
    catalog.update_instance_info('h1', [INST[0]])
    assert catalog.instances_on_host('h1') == {INST[0]: {'uuid': INST[0]}}


def test_update_instance_info_merges_into_a_known_host():
    catalog = empty_catalog()
    catalog.sync_instance_info('h1', [INST[0], INST[1]])
    catalog.update_instance_info('h1', [INST[1], INST[2]])
    assert set(catalog.instances_on_host('h1')) == {INST[0], INST[1], INST[2]}


def test_delete_instance_info_removes_one_instance_from_a_known_host():
    catalog = empty_catalog()
    catalog.update_instance_info('h1', [INST[0], INST[1]])
    catalog.delete_instance_info('h1', INST[0])
    catalog.delete_instance_info('h1', INST[9])  # not there: nothing to do
    assert set(catalog.instances_on_host('h1')) == {INST[1]}


def test_delete_instance_info_of_an_unknown_host_leaves_it_unknown():
    catalog = empty_catalog()
    catalog.delete_instance_info('h1', INST[0])
    assert catalog.instances_on_host('h1') == {}
    assert catalog.snapshot_stats()['hosts_with_instance_info'] == 0
    catalog.update_instance_info('h1', [INST[1]])
    assert set(catalog.instances_on_host('h1')) == {INST[1]}


def test_sync_instance_info_replaces_the_list_whatever_was_known():
    catalog = empty_catalog()
    catalog.update_instance_info('h1', [INST[0], INST[1]])
    catalog.sync_instance_info('h1', [INST[1], INST[2]])
    assert set(catalog.instances_on_host('h1')) == {INST[1], INST[2]}
    catalog.sync_instance_info('h2', [INST[3]])
    assert set(catalog.instances_on_host('h2')) == {INST[3]}


def test_sync_with_an_empty_list_empties_the_host():
    catalog = empty_catalog()
    catalog.update_instance_info('h1', [INST[0]])
    catalog.sync_instance_info('h1', [])
    assert catalog.instances_on_host('h1') == {}


def test_instances_on_host_returns_a_copy():
    catalog = empty_catalog()
    catalog.update_instance_info('h1', [INST[0]])
    catalog.instances_on_host('h1')[INST[5]] = {'uuid': INST[5]}
    assert set(catalog.instances_on_host('h1')) == {INST[0]}


def test_instance_info_survives_a_file_reload(tmp_path):
    catalog = make_catalog(tmp_path)
    catalog.update_instance_info('compute-01', [INST[0]])
    catalog.load_file(write(tmp_path, '', 'empty.yaml'))
    assert set(catalog.instances_on_host('compute-01')) == {INST[0]}


def test_snapshot_stats_counts_what_the_catalog_holds(tmp_path):
    catalog = make_catalog(tmp_path)
    catalog.update_instance_info('compute-01', INST[:3])
    catalog.update_aggregates([agg('5b5b5b5b-0000-4000-8000-000000000000', ['x'])])
    catalog.remember_provider_names({RP_UNKNOWN: 'node-7'})
    stats = catalog.snapshot_stats()
    assert {k: stats[k] for k in ('file_hosts', 'file_aggregates', 'cells', 'aggregates',
                                  'aggregates_from_casts', 'hosts_with_instance_info',
                                  'instances', 'provider_names')} == {
        'file_hosts': 3, 'file_aggregates': 2, 'cells': 2, 'aggregates': 3,
        'aggregates_from_casts': 1, 'hosts_with_instance_info': 1, 'instances': 3,
        'provider_names': 1}


# Thread safety -----------------------------------------------------------------------------

def test_concurrent_casts_reads_and_reloads_lose_nothing_and_tear_nothing(tmp_path):
    catalog = make_catalog(tmp_path)
    other = write(tmp_path, HOSTS_YAML.replace('az1', 'az1b'), 'other.yaml')
    original = str(tmp_path / 'hosts.yaml')
    per_thread, writers = 200, 4
    start = threading.Barrier(writers + 2)
    torn: list[object] = []
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        start.wait()
        host = f'w{n}'
        for i in range(per_thread):
            catalog.update_instance_info(host, [f'{n}-{i}'])
            catalog.update_aggregates([agg(f'00000000-0000-4000-8000-{n:06d}{i:06d}', [host])])
            catalog.remember_provider_names({f'p-{n}-{i}': f'node-{n}-{i}'})

    def reader() -> None:
        start.wait()
        for _ in range(per_thread):
            # Either file's aggregate, whole: never a mix, never missing.
            zone = catalog.availability_zone('compute-01')
            if zone not in ('az1', 'az1b'):
                torn.append(zone)
            catalog.find_nodes(None, None)
            catalog.snapshot_stats()

    def reloader() -> None:
        start.wait()
        for i in range(50):
            catalog.load_file(other if i % 2 == 0 else original)

    def guarded(fn, *args):
        def run():
            try:
                fn(*args)
            except BaseException as e:  # reported below; a thread cannot fail the test
                errors.append(e)
        return threading.Thread(target=run)

    threads = [guarded(writer, n) for n in range(writers)] + [guarded(reader),
                                                                guarded(reloader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and torn == []
    for n in range(writers):
        assert len(catalog.instances_on_host(f'w{n}')) == per_thread
        assert len(catalog.aggregates_for_host(f'w{n}')) == per_thread
    assert catalog.snapshot_stats()['provider_names'] == per_thread * writers


# ---------------------------------------------------------------- large hosts files
def records_of(catalog: HostCatalog) -> list[HostRecord]:
    return sorted(catalog.find_nodes(None, None), key=lambda r: r.nodename)


def test_a_json_hosts_file_reads_like_the_same_content_in_yaml(tmp_path):
    import json

    import yaml
    document = yaml.safe_load(HOSTS_YAML)
    as_json = write(tmp_path, json.dumps(document, default=str), name='hosts.json')

    from_json = HostCatalog.from_file(as_json, default_cell_uuid=DEFAULT_CELL)

    assert records_of(from_json) == records_of(make_catalog(tmp_path))
    assert from_json.all_aggregates() == make_catalog(tmp_path).all_aggregates()


def test_a_large_file_is_parsed_in_a_child_process_with_the_same_result(tmp_path, monkeypatch):
    from scheduler.catalog import hosts_child
    in_process = make_catalog(tmp_path)
    monkeypatch.setattr(hosts_child, 'CHILD_PARSE_BYTES', 0)
    calls = []
    real_popen = hosts_child.subprocess.Popen
    monkeypatch.setattr(hosts_child.subprocess, 'Popen',
                        lambda *a, **kw: calls.append(a) or real_popen(*a, **kw))

    in_child = make_catalog(tmp_path)

    assert calls, 'the child process was not used'
    assert records_of(in_child) == records_of(in_process)
    assert in_child.all_aggregates() == in_process.all_aggregates()


def test_a_child_parse_reports_the_same_error_naming_the_file_and_entry(tmp_path, monkeypatch):
    from scheduler.catalog import hosts_child
    monkeypatch.setattr(hosts_child, 'CHILD_PARSE_BYTES', 0)
    path = write(tmp_path, 'hosts: [{nodename: a, stats: {x: [1]}}]')

    with pytest.raises(CatalogError) as info:
        HostCatalog.from_file(path, default_cell_uuid=DEFAULT_CELL)

    assert str(info.value).startswith(f'{path}: ')
    assert 'hosts[0] (a): stats.x must be a string' in str(info.value)


def test_hosts_with_equal_values_share_one_copy(tmp_path):
    path = write(tmp_path, '''
        hosts:
          - {nodename: a, cpu_info: {model: X}, supported_instances: [[x86_64, kvm, hvm]]}
          - {nodename: b, cpu_info: {model: X}, supported_instances: [[x86_64, kvm, hvm]]}
    ''')
    a, b = records_of(HostCatalog.from_file(path, default_cell_uuid=DEFAULT_CELL))

    assert a.cpu_info == b.cpu_info == {'model': 'X'}
    assert a.cpu_info is b.cpu_info
    assert a.supported_instances is b.supported_instances


def test_hosts_with_equal_heartbeats_and_hypervisor_versions_share_one_copy(tmp_path):
    path = write(tmp_path, '''
        hosts:
          - {nodename: a, last_seen_up: 2026-01-15T10:30:00Z, hypervisor_version: 8002000}
          - {nodename: b, last_seen_up: 2026-01-15T10:30:00Z, hypervisor_version: 8002000}
          - {nodename: c, last_seen_up: 2026-01-15T11:30:00+01:00}
    ''')
    a, b, c = records_of(HostCatalog.from_file(path, default_cell_uuid=DEFAULT_CELL))

    assert a.last_seen_up is b.last_seen_up
    assert a.hypervisor_version is b.hypervisor_version
    # The same instant written in another time zone is another value.
    assert c.last_seen_up == a.last_seen_up and c.last_seen_up is not a.last_seen_up
    assert c.last_seen_up.utcoffset() == datetime.timedelta(hours=1)
