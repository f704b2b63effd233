"""host_rows resolves a provider's record once and reuses it until a source changes.

Every request asks the catalog for the same few thousand providers; each
source a record is resolved from (the hosts file, the compute API snapshot,
the cell databases, names learned from Placement) must still be seen by the
next request the moment it changes.
"""
from __future__ import annotations

import datetime
import random
import textwrap
import types

from scheduler.catalog import HostCatalog
from scheduler.catalog.cell_db import ComputeNodeData
from scheduler.catalog.hosts_file import parse_hosts
from scheduler.catalog.nova_api import HypervisorInfo, NovaSnapshot, ServiceState, ServiceStates
from scheduler.host_state import HostState

CELL = '00000000-0000-0000-0000-000000000001'
RP1 = '0d5e1b6a-3c21-4f0e-8a55-2b7d9c4e1f01'
RP_UNKNOWN = '99999999-0000-4000-8000-000000000099'


def file_catalog(tmp_path, *, disabled: bool = False) -> HostCatalog:
    path = tmp_path / 'hosts.yaml'
    path.write_text(textwrap.dedent(f"""
        hosts:
          - nodename: compute-01
            provider_uuid: {RP1}
            disabled: {str(disabled).lower()}
        """))
    return HostCatalog.from_file(str(path), default_cell_uuid=CELL)


def record(catalog: HostCatalog, uuid: str = RP1):
    [(found, _, _, _)] = catalog.host_rows([uuid])
    return found


def test_the_same_record_serves_every_request_while_nothing_changes(tmp_path):
    catalog = file_catalog(tmp_path)
    assert record(catalog) is record(catalog)
    unknown = record(catalog, RP_UNKNOWN)
    assert unknown is record(catalog, RP_UNKNOWN)
    assert unknown.service_host == RP_UNKNOWN


def test_a_reloaded_hosts_file_is_seen_by_the_next_request(tmp_path):
    catalog = file_catalog(tmp_path)
    assert record(catalog).disabled is False
    catalog.load_content(parse_hosts({'hosts': [
        {'nodename': 'compute-01', 'provider_uuid': RP1, 'disabled': True}]},
        source='reload', default_cell_uuid=CELL), 'reload')
    assert record(catalog).disabled is True


def test_a_compute_api_snapshot_is_seen_by_the_next_request(tmp_path):
    catalog = file_catalog(tmp_path)
    assert record(catalog).service_host == 'compute-01'
    catalog.apply_nova_snapshot(NovaSnapshot(
        aggregates=(), services={'svc-a': ServiceState(host='svc-a', up=True, disabled=True)},
        hypervisors=(HypervisorInfo(provider_uuid=RP1, nodename='compute-01',
                                    service_host='svc-a'),)), cast_mark=catalog.cast_mark())
    assert (record(catalog).service_host, record(catalog).disabled) == ('svc-a', True)


def test_a_cell_database_read_is_seen_by_the_next_request(tmp_path):
    catalog = HostCatalog(default_cell_uuid=CELL)
    assert record(catalog).nodename == RP1   # nothing knows it yet: named by its uuid
    catalog.apply_cell_db_nodes([ComputeNodeData(provider_uuid=RP1, nodename='node-db',
                                                 service_host='svc-db')])
    assert record(catalog).nodename == 'node-db'


def test_a_name_learned_from_placement_is_seen_by_the_next_request():
    catalog = HostCatalog(default_cell_uuid=CELL)
    before = record(catalog, RP_UNKNOWN)
    catalog.remember_provider_names({RP_UNKNOWN: 'node-7'})
    assert record(catalog, RP_UNKNOWN).service_host == 'node-7'
    # Hearing the same name again changes nothing, and keeps the cache.
    learned = record(catalog, RP_UNKNOWN)
    catalog.remember_provider_names({RP_UNKNOWN: 'node-7'})
    assert record(catalog, RP_UNKNOWN) is learned is not before


RP2 = '0d5e1b6a-3c21-4f0e-8a55-2b7d9c4e1f02'


def test_a_services_read_keeps_every_record_whose_service_state_did_not_change():
    """The services are read before every request; a heartbeat must not cost a
    re-resolution of every record, a disable must be seen at once."""
    now = datetime.datetime(2026, 11, 24, tzinfo=datetime.timezone.utc)
    catalog = HostCatalog(default_cell_uuid=CELL)
    catalog.apply_nova_snapshot(NovaSnapshot(
        hypervisors=(HypervisorInfo(RP1, 'compute-01', 'compute-01'),
                     HypervisorInfo(RP2, 'compute-02', 'compute-02')),
        services={h: ServiceState(h, up=True, updated_at=now)
                  for h in ('compute-01', 'compute-02')}), cast_mark=0)
    first, second = record(catalog, RP1), record(catalog, RP2)

    # A heartbeat of each: nothing a record holds moved.
    later = now + datetime.timedelta(seconds=10)
    catalog.apply_service_states({h: ServiceState(h, up=True, updated_at=later)
                                  for h in ('compute-01', 'compute-02')})
    assert record(catalog, RP1) is first and record(catalog, RP2) is second

    # compute-02 disabled through the API: its record is new, the other one stays.
    catalog.apply_service_states({
        'compute-01': ServiceState('compute-01', up=True, updated_at=later),
        'compute-02': ServiceState('compute-02', up=True, updated_at=later, disabled=True,
                                   disabled_reason='maintenance')})
    assert record(catalog, RP1) is first
    assert record(catalog, RP2).disabled and record(catalog, RP2).disabled_reason == 'maintenance'

    # Down: its last heartbeat is what ComputeFilter ages, so that is a change too.
    catalog.apply_service_states({
        'compute-01': ServiceState('compute-01', up=False, updated_at=later),
        'compute-02': ServiceState('compute-02', up=True, updated_at=later, disabled=True,
                                   disabled_reason='maintenance')})
    assert record(catalog, RP1).last_seen_up == later


def test_a_services_read_is_held_as_given_not_copied():
    """At 50,000 services a copy of the read was 2.2 MB of every worker; a mapping
    of another type is taken as states of the catalog's own, equal to it."""
    catalog = HostCatalog(default_cell_uuid=CELL)
    read = ServiceStates({'compute-02'},
                         {'compute-01': ServiceState('compute-01', up=True, disabled=True)})
    catalog.apply_service_states(read)
    assert catalog.service_states() is read

    proxy = types.MappingProxyType({'compute-01': ServiceState('compute-01', up=True)})
    catalog.apply_service_states(proxy)
    assert type(catalog.service_states()) is ServiceStates
    assert catalog.service_states() == proxy
    assert catalog.service_states().usual == {'compute-01'}


def test_a_services_read_moves_exactly_the_hosts_whose_state_a_record_shows_moved():
    """Up and enabled services are held by host alone: comparing two reads held so
    must name the same hosts as comparing them state by state."""
    rng = random.Random(3)
    now = datetime.datetime(2026, 11, 24, tzinfo=datetime.timezone.utc)
    hosts = [f'compute-{i:02}' for i in range(8)]

    def state_of(host):
        return rng.choice([
            ServiceState(host, up=True), ServiceState(host, up=True, updated_at=now),
            ServiceState(host, up=True, disabled=True),
            ServiceState(host, up=True, disabled=True, disabled_reason='maintenance'),
            ServiceState(host, up=False, updated_at=now), ServiceState(host, up=False),
            ServiceState(host, up=False, forced_down=True, updated_at=now)])

    def fields(state):
        return None if state is None else (state.disabled, state.disabled_reason,
                                           state.forced_down, state.last_seen_up)

    catalog = HostCatalog(default_cell_uuid=CELL)
    held: dict[str, ServiceState] = {}
    for _ in range(300):
        read = {h: state_of(h) for h in hosts if rng.random() < 0.85}
        version = catalog.versions()
        catalog.apply_service_states(ServiceStates.of(read) if rng.random() < 0.7 else read)
        moved = catalog.changed_hosts_since(version)
        assert (moved or set()) == {h for h in held.keys() | read.keys()
                                    if fields(held.get(h)) != fields(read.get(h))}
        assert dict(catalog.service_states().items()) == read
        held = read


def test_the_same_services_read_applied_again_after_a_sync_is_the_state_again():
    """A parser hands back the very mapping of its last read when no key moved;
    a periodic sync applied in between must not make the catalog keep the sync's
    states for it."""
    catalog = HostCatalog(default_cell_uuid=CELL)
    hypervisors = (HypervisorInfo(RP1, 'compute-01', 'compute-01'),)
    read = {'compute-01': ServiceState('compute-01', up=True, disabled=True)}
    catalog.apply_nova_snapshot(NovaSnapshot(hypervisors=hypervisors), cast_mark=0)
    catalog.apply_service_states(read)
    assert record(catalog).disabled

    catalog.apply_nova_snapshot(NovaSnapshot(
        hypervisors=hypervisors,
        services={'compute-01': ServiceState('compute-01', up=True)}), cast_mark=0)
    assert not record(catalog).disabled
    catalog.apply_service_states(read)
    assert record(catalog).disabled


def two_computes(now, *, disabled_2=False, version_2=1, name_2='compute-02', aggregates=()):
    return NovaSnapshot(
        aggregates=tuple(aggregates),
        hypervisors=(HypervisorInfo(RP1, 'compute-01', 'compute-01', hypervisor_version=1),
                     HypervisorInfo(RP2, name_2, 'compute-02',
                                    hypervisor_version=version_2)),
        services={'compute-01': ServiceState('compute-01', up=True, updated_at=now),
                  'compute-02': ServiceState('compute-02', up=True, updated_at=now,
                                             disabled=disabled_2)})


def test_a_compute_api_snapshot_like_the_last_keeps_every_record_it_does_not_move():
    """The periodic sync applies a snapshot every minute, mostly the same as the last:
    only the hosts it moves are resolved again, and the next request sees those."""
    from scheduler.objects.spec import Aggregate

    now = datetime.datetime(2026, 11, 30, tzinfo=datetime.timezone.utc)
    catalog = HostCatalog(default_cell_uuid=CELL)
    catalog.apply_nova_snapshot(two_computes(now), cast_mark=0)
    first, second = record(catalog, RP1), record(catalog, RP2)
    version = catalog.versions()

    catalog.apply_nova_snapshot(two_computes(now + datetime.timedelta(seconds=10)),
                                cast_mark=0)
    assert record(catalog, RP1) is first and record(catalog, RP2) is second
    assert catalog.changed_hosts_since(version) == set()

    version = catalog.versions()
    catalog.apply_nova_snapshot(two_computes(now, disabled_2=True), cast_mark=0)
    assert record(catalog, RP1) is first and record(catalog, RP2).disabled
    assert catalog.changed_hosts_since(version) == {'compute-02'}

    version = catalog.versions()
    catalog.apply_nova_snapshot(two_computes(now, disabled_2=True, version_2=2), cast_mark=0)
    assert record(catalog, RP1) is first and record(catalog, RP2).hypervisor_version == 2
    assert catalog.changed_hosts_since(version) == {'compute-02'}

    # An aggregate moves every host's row, though no record: the table reads them all.
    version = catalog.versions()
    catalog.apply_nova_snapshot(two_computes(now, disabled_2=True, version_2=2, aggregates=[
        Aggregate(id=1, uuid=RP_UNKNOWN, name='az1', hosts=['compute-01'])]), cast_mark=0)
    assert record(catalog, RP1) is first
    assert catalog.changed_hosts_since(version) is None

    # A renamed node may move what names resolve to: every record is resolved again.
    catalog.apply_nova_snapshot(two_computes(now, name_2='compute-02b', aggregates=[
        Aggregate(id=1, uuid=RP_UNKNOWN, name='az1', hosts=['compute-01'])]), cast_mark=0)
    assert record(catalog, RP1) is not first and record(catalog, RP1) == first
    assert record(catalog, RP2).nodename == 'compute-02b'


def test_records_of_nodes_supporting_the_same_instances_share_one_read_only_list():
    catalog = HostCatalog(default_cell_uuid=CELL)
    supported = (('x86_64', 'kvm', 'hvm'),)
    uuids = [f'0d5e1b6a-3c21-4f0e-8a55-2b7d9c4e1f{i:02d}' for i in range(3)]
    catalog.apply_cell_db_nodes([
        ComputeNodeData(provider_uuid=uuid, nodename=f'cn{i}', service_host=f'cn{i}',
                        supported_instances=supported if i < 2 else (('aarch64', 'kvm', 'hvm'),))
        for i, uuid in enumerate(uuids)])
    first, second, other = (row[0] for row in catalog.host_rows(uuids))
    assert first.supported_instances == [('x86_64', 'kvm', 'hvm')]
    assert first.supported_instances is second.supported_instances
    assert other.supported_instances == [('aarch64', 'kvm', 'hvm')]
    assert first.supported_instances_reported and other.supported_instances_reported


def test_records_of_nodes_only_a_cell_database_describes_share_their_empty_stats_and_metrics():
    catalog = HostCatalog(default_cell_uuid=CELL)
    uuids = [f'0d5e1b6a-3c21-4f0e-8a55-2b7d9c4e1f{i:02d}' for i in range(2)]
    catalog.apply_cell_db_nodes([
        ComputeNodeData(provider_uuid=uuid, nodename=f'cn{i}', service_host=f'cn{i}',
                        cpu_info={'model': 'Haswell'} if i else {})
        for i, uuid in enumerate(uuids)])
    first, second = (row[0] for row in catalog.host_rows(uuids))
    assert (first.stats, first.metrics, first.cpu_info) == ({}, {}, {})
    assert first.stats is second.stats and first.metrics is second.metrics
    assert second.cpu_info == {'model': 'Haswell'}


def test_a_host_state_writes_into_a_container_of_its_own_not_into_a_shared_empty_one():
    catalog = HostCatalog(default_cell_uuid=CELL)
    uuids = [f'0d5e1b6a-3c21-4f0e-8a55-2b7d9c4e1f{i:02d}' for i in range(2)]
    catalog.apply_cell_db_nodes([
        ComputeNodeData(provider_uuid=uuid, nodename=f'cn{i}', service_host=f'cn{i}')
        for i, uuid in enumerate(uuids)])
    first, second = (HostState(uuid=row[0].provider_uuid, record=row[0], summaries=[],
                               allocation_candidates=[])
                     for row in catalog.host_rows(uuids))

    first.stats['gpus_taken'] = '2'
    first.metrics['cpu.percent'] = 0.5

    assert (second.stats, second.metrics) == ({}, {})
    assert (record(catalog, uuids[0]).stats, record(catalog, uuids[1]).metrics) == ({}, {})
