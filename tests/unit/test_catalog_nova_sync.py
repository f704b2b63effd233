"""Compute API snapshots in the HostCatalog, and the sync that reads and applies them."""
from __future__ import annotations

import json
import textwrap

import pytest
from keystoneauth1 import exceptions as ks_exc

from scheduler import conf as scheduler_conf
from scheduler.catalog import HostCatalog, nova_api
from scheduler.catalog.nova_api import HypervisorInfo, NovaApiError, NovaSnapshot, ServiceState
from scheduler.catalog.nova_sync import (
    NovaComputeReader,
    NovaSync,
    check_microversion,
    nova_sync_from_conf,
)
from scheduler.catalog.shared_services import SharedReads
from scheduler.exceptions import ConfigurationError
from scheduler.objects.spec import Aggregate
from tests.fixtures import nova_api_samples as samples

CELL = '00000000-0000-0000-0000-000000000001'
CELL2 = '6f1f2c5e-7c57-4d0a-9b0e-3f5b1e2a4c10'
RP1 = '0d5e1b6a-3c21-4f0e-8a55-2b7d9c4e1f01'
RP2 = '1a2b3c4d-0000-4000-8000-000000000002'
AGG = '445fd4b4-80eb-55fe-bf3c-0520043da8af'
AGG2 = '0c8e9d3a-51f4-4b0f-a7a1-0a4a2b1c9d77'


def agg(uuid: str, hosts: list[str], zone: str | None = None, id: int = 1) -> Aggregate:
    return Aggregate(id=id, uuid=uuid, name=f'agg-{uuid[:4]}', hosts=hosts,
                     metadata={'availability_zone': zone} if zone else {})


def snapshot(*, aggregates=(), services=(), hypervisors=()) -> NovaSnapshot:
    return NovaSnapshot(aggregates=tuple(aggregates),
                        services={s.host: s for s in services},
                        hypervisors=tuple(hypervisors))


def apply(catalog: HostCatalog, snap: NovaSnapshot) -> None:
    catalog.apply_nova_snapshot(snap, cast_mark=catalog.cast_mark())


@pytest.fixture
def catalog() -> HostCatalog:
    return HostCatalog(default_cell_uuid=CELL)


@pytest.fixture
def file_catalog(tmp_path) -> HostCatalog:
    path = tmp_path / 'hosts.yaml'
    path.write_text(textwrap.dedent(f"""
        cells: [{{uuid: {CELL2}, name: cell2}}]
        aggregates:
          - {{name: file-az, uuid: {AGG}, hosts: [compute-01], metadata: {{availability_zone: f}}}}
        hosts:
          - nodename: compute-01
            cell: cell2
            hypervisor_type: Xen
            host_ip: 192.0.2.1
            disabled: true
            stats: {{failed_builds: 2}}
        """))
    return HostCatalog.from_file(str(path), default_cell_uuid=CELL)


# ----------------------------------------------------------------- catalog merging

def test_a_snapshot_names_unknown_providers_and_gives_their_host_facts(catalog):
    apply(catalog, snapshot(
        services=[ServiceState(host='svc-a', up=True, disabled=True, disabled_reason='repair')],
        hypervisors=[HypervisorInfo(provider_uuid=RP1, nodename='node-a', service_host='svc-a',
                                    host_ip='10.0.0.1', hypervisor_type='QEMU',
                                    hypervisor_version=8002000, cpu_info={'arch': 'x86_64'})]))
    record = catalog.record_for_provider(RP1, None)
    assert (record.nodename, record.service_host, record.cell_uuid) == ('node-a', 'svc-a', CELL)
    assert (record.host_ip, record.hypervisor_type, record.hypervisor_version) == (
        '10.0.0.1', 'QEMU', 8002000)
    assert (record.disabled, record.disabled_reason) == (True, 'repair')
    assert catalog.unknown_provider_uuids([RP1, RP2]) == {RP2}
    assert catalog.provider_name(RP1) == 'node-a'
    assert [r.provider_uuid for r in catalog.find_nodes('SVC-A', None)] == [RP1]


def test_nova_owns_the_fields_it_reports_and_the_file_keeps_the_rest(file_catalog):
    apply(file_catalog, snapshot(
        services=[ServiceState(host='compute-01', up=True, disabled=False)],
        hypervisors=[HypervisorInfo(provider_uuid=RP1, nodename='compute-01',
                                    service_host='compute-01', hypervisor_type='QEMU')]))
    record = file_catalog.record_for_provider(RP1, 'compute-01')
    assert record.disabled is False          # Nova's service status beats the file's
    assert record.hypervisor_type == 'QEMU'  # reported by Nova
    assert record.host_ip == '192.0.2.1'     # null/absent in Nova: the file's stays
    assert record.cell_uuid == CELL2         # the compute API has no cells
    assert record.stats == {'failed_builds': '2'}
    [found] = file_catalog.find_nodes('compute-01', None)
    assert (found.provider_uuid, found.disabled) == (RP1, False)


def test_a_service_state_applies_to_file_hosts_nova_lists_no_hypervisor_for(file_catalog):
    apply(file_catalog, snapshot(services=[
        ServiceState(host='compute-01', up=False, updated_at=nova_api.NEVER)]))
    record = file_catalog.record_for_provider(RP2, 'compute-01')
    assert record.last_seen_up == nova_api.NEVER and record.disabled is False


def test_nova_aggregates_replace_the_file_s_by_uuid_and_add_their_own(file_catalog):
    apply(file_catalog, snapshot(aggregates=[agg(AGG, ['compute-02'], 'nova-az'),
                                             agg(AGG2, ['compute-01'], 'other', id=2)]))
    assert file_catalog.availability_zone('compute-02') == 'nova-az'
    assert [a.uuid for a in file_catalog.aggregates_for_host('compute-01')] == [AGG2]


def test_a_snapshot_of_the_same_aggregates_keeps_the_objects_the_catalog_holds(catalog):
    apply(catalog, snapshot(aggregates=[agg(AGG, ['h1', 'h2'], 'az1'),
                                        agg(AGG2, ['h2'], id=2)]))
    held = catalog.aggregates_for_host('h2')
    # The next minute's sync: new objects, equal to the last.
    apply(catalog, snapshot(aggregates=[agg(AGG, ['h1', 'h2'], 'az1'),
                                        agg(AGG2, ['h2'], id=2)]))
    assert all(now is before for now, before in
               zip(catalog.aggregates_for_host('h2'), held, strict=True))


@pytest.mark.parametrize('moved', [
    pytest.param([agg(AGG, ['h1'], 'az1'), agg(AGG2, ['h2', 'h3'], id=2)], id='member'),
    pytest.param([agg(AGG, ['h1', 'h2'], 'az2'), agg(AGG2, ['h3'], id=2)], id='metadata'),
    pytest.param([agg(AGG, ['h1', 'h2'], 'az1')], id='aggregate-gone'),
])
def test_a_snapshot_that_moves_anything_of_an_aggregate_is_taken(catalog, moved):
    apply(catalog, snapshot(aggregates=[agg(AGG, ['h1', 'h2'], 'az1'),
                                        agg(AGG2, ['h3'], id=2)]))
    apply(catalog, snapshot(aggregates=moved))
    for host in ('h1', 'h2', 'h3'):
        assert catalog.aggregates_for_host(host) == [
            a for a in moved if host in a.hosts]


def test_casts_before_the_read_began_are_superseded_by_the_snapshot(catalog):
    catalog.update_aggregates([agg(AGG, ['h1'], 'old-cast')])
    mark = catalog.cast_mark()
    catalog.apply_nova_snapshot(snapshot(aggregates=[agg(AGG, ['h2'], 'from-nova')]),
                                cast_mark=mark)
    assert catalog.availability_zone('h2') == 'from-nova'
    assert catalog.aggregates_for_host('h1') == []


def test_casts_during_the_read_stay_on_top_of_the_snapshot(catalog):
    mark = catalog.cast_mark()
    catalog.update_aggregates([agg(AGG, ['h1'], 'newer-cast')])  # while the read runs
    catalog.apply_nova_snapshot(snapshot(aggregates=[agg(AGG, ['h2'], 'read-earlier')]),
                                cast_mark=mark)
    assert catalog.availability_zone('h1') == 'newer-cast'
    assert catalog.aggregates_for_host('h2') == []
    # The next snapshot, read after that cast, is the truth again.
    apply(catalog, snapshot(aggregates=[agg(AGG, ['h3'], 'latest')]))
    assert catalog.availability_zone('h3') == 'latest'


def test_an_aggregate_deleted_by_cast_does_not_come_back_from_a_stale_snapshot(file_catalog):
    deleted = agg(AGG, ['compute-01'], 'f')
    mark = file_catalog.cast_mark()
    file_catalog.delete_aggregate(deleted)
    file_catalog.apply_nova_snapshot(snapshot(aggregates=[deleted]), cast_mark=mark)
    assert file_catalog.all_aggregates() == []
    apply(file_catalog, snapshot())  # and not from the file either
    assert file_catalog.all_aggregates() == []


def test_a_snapshot_replaces_the_previous_one_whole(catalog):
    apply(catalog, snapshot(aggregates=[agg(AGG, ['h1'], 'z')],
                            hypervisors=[HypervisorInfo(RP1, 'n1', 'h1')]))
    apply(catalog, snapshot())
    assert catalog.all_aggregates() == []
    assert catalog.unknown_provider_uuids([RP1]) == {RP1}
    assert catalog.snapshot_stats()['nova_snapshots_applied'] == 2


# --------------------------------------------------------------------- the reader

class _Response:
    def __init__(self, status: int, body):
        self.status_code = status
        self._body = body
        self.text = str(body)

    @property
    def content(self) -> bytes:
        if isinstance(self._body, Exception):
            return b'<html>not json</html>'
        return json.dumps(self._body).encode()


class StubAdapter:
    """Answers GETs from a table; records what was asked (path, params, microversion)."""

    def __init__(self, answers):
        self.answers = answers
        self.asked: list[tuple] = []

    def get(self, url, *, params=None, microversion=None, timeout=None, **kw):
        self.asked.append((url, dict(params or {}), microversion, timeout))
        answer = self.answers[(url, (params or {}).get('marker'))]
        if isinstance(answer, Exception):
            raise answer
        return answer


def reader_for(answers, page_size=1) -> tuple[NovaComputeReader, StubAdapter]:
    adapter = StubAdapter(answers)
    return NovaComputeReader(adapter, microversion='2.87', connect_timeout=1.5,
                             read_timeout=7.0, page_size=page_size), adapter


def cloud_answers():
    second = samples.hypervisor(samples.NODE2, 'compute2', 'compute2')
    answers = {
        ('/os-aggregates', None): _Response(200, samples.AGGREGATES),
        ('/os-services', None): _Response(200, samples.SERVICES),
        ('/os-hypervisors/detail', None): _Response(200, samples.hypervisors_page(
            [samples.HYPERVISOR_TEMPLATE], next_marker=samples.NODE1)),
        ('/os-hypervisors/detail', samples.NODE1): _Response(
            200, samples.hypervisors_page([second])),
    }
    return answers


def test_the_reader_pages_through_hypervisors_at_the_configured_microversion():
    reader, adapter = reader_for(cloud_answers())
    snap = reader.read()
    assert [h.nodename for h in snap.hypervisors] == ['compute1', 'compute2']
    assert set(snap.services) == {'compute1', 'compute2'} and len(snap.aggregates) == 2
    assert {a[2] for a in adapter.asked} == {'2.87'}
    assert {a[3] for a in adapter.asked} == {(1.5, 7.0)}
    assert ('/os-services', {'binary': 'nova-compute'}, '2.87', (1.5, 7.0)) in adapter.asked
    assert adapter.asked[-1][1] == {'limit': 1, 'marker': samples.NODE1}


def test_an_aggregates_answer_like_the_last_gives_the_last_aggregates_a_changed_one_is_read():
    answers = cloud_answers()
    reader, _ = reader_for(answers)
    first = reader.read(services=False).aggregates
    assert reader.read(services=False).aggregates is first     # not decoded again

    changed = json.loads(json.dumps(samples.AGGREGATES))
    changed['aggregates'][0]['hosts'].append('compute9')
    answers[('/os-aggregates', None)] = _Response(200, changed)
    again = reader.read(services=False).aggregates
    assert again is not first and again[0].hosts == [*first[0].hosts, 'compute9']
    answers[('/os-aggregates', None)] = _Response(200, ValueError('not json'))
    with pytest.raises(NovaApiError, match='not JSON'):
        reader.read(services=False)


@pytest.mark.parametrize('answer, complaint', [
    (_Response(503, 'Service Unavailable'), 'HTTP 503'),
    (_Response(406, 'Version 2.87 is not supported'), 'does not offer this microversion'),
    (_Response(200, ValueError('not json')), 'not JSON'),
    (ks_exc.ConnectFailure('Unable to establish connection to http://u:p@nova:8774'),
     r'ConnectFailure: Unable to establish connection to http://\*\*\*@nova'),
])
def test_reader_failures_are_typed_and_redacted(answer, complaint):
    reader, _ = reader_for(cloud_answers() | {('/os-services', None): answer})
    with pytest.raises(NovaApiError, match=complaint):
        reader.read()


@pytest.mark.parametrize('version', ['2.88', '2.52', '3', 'latest'])
def test_microversions_outside_2_53_to_2_87_are_refused(version):
    with pytest.raises(ConfigurationError, match=r'\[nova\] microversion'):
        check_microversion(version)


# ----------------------------------------------------------------------- the sync

class ScriptedReader:
    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)

    def read(self) -> NovaSnapshot:
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def test_a_failed_sync_keeps_the_last_good_data_and_the_next_one_recovers(catalog, caplog):
    good = snapshot(aggregates=[agg(AGG, ['h1'], 'az1')])
    sync = NovaSync(catalog, ScriptedReader(good, NovaApiError('HTTP 503'),
                                            snapshot(aggregates=[agg(AGG, ['h1'], 'az2')])),
                    interval=60)
    assert sync.sync_once() is True
    assert sync.sync_once() is False
    assert catalog.availability_zone('h1') == 'az1'
    assert sync.failures_in_a_row == 1
    assert 'keeping the last good data' in caplog.text and 'HTTP 503' in caplog.text
    assert sync.sync_once() is True
    assert catalog.availability_zone('h1') == 'az2' and sync.failures_in_a_row == 0


def test_the_loop_syncs_at_once_on_start_and_stops(catalog):
    sync = NovaSync(catalog, ScriptedReader(snapshot(aggregates=[agg(AGG, ['h1'], 'z')])),
                    interval=3600)
    sync.start()
    try:
        assert sync.wait_for_first_attempt(30)
    finally:
        sync.stop(timeout=30)
    assert catalog.availability_zone('h1') == 'z'


def test_the_loop_survives_an_unexpected_error_in_one_round(catalog):
    sync = NovaSync(catalog, ScriptedReader(RuntimeError('bug')), interval=3600)
    sync.start()
    try:
        assert sync.wait_for_first_attempt(30)
    finally:
        sync.stop(timeout=30)
    assert sync.last_success is None


# ---------------------------------------------------------------------- the switch

def conf_with(**nova):
    conf = scheduler_conf.parse_args([], default_config_files=[])
    for name, value in nova.items():
        conf.set_override(name, value, group='nova')
    return conf


def test_the_sync_is_off_without_auth_type_whatever_the_interval(catalog):
    assert nova_sync_from_conf(conf_with(sync_interval=5), catalog) is None


def test_the_sync_is_off_with_interval_zero(catalog):
    assert nova_sync_from_conf(conf_with(auth_type='password', sync_interval=0),
                               catalog) is None


def test_a_bad_microversion_stops_the_service_from_starting(catalog):
    with pytest.raises(ConfigurationError, match='2.88 dropped cpu_info'):
        nova_sync_from_conf(conf_with(auth_type='password', microversion='2.90'), catalog)


def test_the_nova_group_registers_keystoneauth_options_for_the_compute_service():
    conf = conf_with()
    assert conf.nova.service_type == 'compute'
    assert conf.nova.valid_interfaces == ['internal', 'public']
    assert (conf.nova.sync_interval, conf.nova.microversion) == (60, '2.87')
    # Session and auth options exist, unset: no auth plugin means no sync.
    assert (conf.nova.timeout, conf.nova.cafile, conf.nova.auth_type) == (None, None, None)


class ServicesReader:
    """read_services() that blocks until released, counting the reads."""

    def __init__(self):
        import threading
        self.reads = 0
        self.entered = threading.Semaphore(0)
        self.release = threading.Semaphore(0)

    def read_services(self):
        self.reads += 1
        self.entered.release()
        self.release.acquire()
        return {'compute-01': ServiceState('compute-01', up=True)}, []


def test_requests_queued_behind_a_services_read_begun_after_they_arrived_reuse_it(catalog):
    """[nova] service_state_max_age = 0: every request wants a read begun no
    earlier than its arrival; one read serves every request queued behind it."""
    import threading
    now = [0.0]
    reader = ServicesReader()
    sync = NovaSync(catalog, reader, interval=3600, service_state_max_age=0.0,
                    clock=lambda: now[0])

    first = threading.Thread(target=sync.fresh_service_states, daemon=True)
    first.start()
    reader.entered.acquire()        # the first request's read (begun at 0) is in flight
    now[0] = 1.0                    # two more requests arrive: it is too old for them
    queued = [threading.Thread(target=sync.fresh_service_states, daemon=True)
              for _ in range(2)]
    for thread in queued:
        thread.start()
    reader.release.release()        # the first read ends; one queued request reads (at 1)
    reader.entered.acquire()
    reader.release.release()
    for thread in (first, *queued):
        thread.join(5)

    assert reader.reads == 2        # not 3: the last request used the read begun at 1
    assert catalog.snapshot_stats()['nova_services'] == 1


# ------------------------------------------- the workers of a service share their reads

class Worker:
    """One worker of a service: its own catalog, reader and descriptor of the shared
    files; the compute API answers what ``api`` holds at the time."""

    def __init__(self, directory, api, clock):
        self.catalog = HostCatalog(default_cell_uuid=CELL)
        self.catalog.add_hypervisors([HypervisorInfo(RP1, 'compute1', 'compute1'),
                                      HypervisorInfo(RP2, 'compute2', 'compute2')])
        self.reader, self.adapter = reader_for(api)
        self.sync = NovaSync(self.catalog, self.reader, interval=3600,
                             service_state_max_age=0.0, shared=SharedReads(directory),
                             clock=clock)

    def reads(self) -> int:
        return sum(1 for asked in self.adapter.asked if asked[0] == '/os-services')

    def disabled(self, host: str) -> bool:
        return self.catalog.record_for_provider({'compute1': RP1, 'compute2': RP2}[host],
                                                None).disabled


def services_answer(*disabled: str):
    return _Response(200, {'services': [
        samples.compute_service(host, disabled=host in disabled,
                                reason='repair' if host in disabled else None)
        for host in ('compute1', 'compute2')]})


@pytest.fixture
def shared(tmp_path):
    reads = SharedReads.create()
    yield reads
    reads.remove()


def test_a_worker_whose_request_came_before_another_worker_s_read_began_takes_that_read(shared):
    now = [1.0]
    api = {('/os-services', None): services_answer('compute2')}
    a, b = (Worker(shared.directory, api, lambda: now[0]) for _ in range(2))

    a.sync.fresh_service_states()          # a request at 1: a reads
    b.sync.fresh_service_states()          # a request of b's at 1 too: a's read will do

    assert (a.reads(), b.reads()) == (1, 0)
    assert b.disabled('compute2') and not b.disabled('compute1')


def test_a_request_after_the_last_read_began_reads_again_whichever_worker_read_last(shared):
    now = [1.0]
    api = {('/os-services', None): services_answer()}
    a, b = (Worker(shared.directory, api, lambda: now[0]) for _ in range(2))
    a.sync.fresh_service_states()
    now[0] = 2.0
    api[('/os-services', None)] = services_answer('compute1')   # disabled through the API

    b.sync.fresh_service_states()          # b's request came after a's read began

    assert (a.reads(), b.reads()) == (1, 1)
    assert b.disabled('compute1')
    a.sync.fresh_service_states()          # a's next request at 2 takes b's read: a change
    assert a.reads() == 1 and a.disabled('compute1')


def test_a_read_that_changes_no_service_s_state_hands_nothing_over(shared):
    now = [1.0]
    api = {('/os-services', None): services_answer('compute2')}
    a, b = (Worker(shared.directory, api, lambda: now[0]) for _ in range(2))
    a.sync.fresh_service_states()
    b.sync.fresh_service_states()
    with shared.turn():
        first = shared.published()
    for moment in (2.0, 3.0, 4.0):         # heartbeats only, read by one worker or the other
        now[0] = moment
        body = services_answer('compute2')._body
        for service in body['services']:
            service['updated_at'] = f'2026-01-01T00:00:0{int(moment)}.000000'
        api[('/os-services', None)] = _Response(200, body)
        (a if moment != 3.0 else b).sync.fresh_service_states()
    with shared.turn():
        last = shared.published()

    assert last.change == first.change and last.read_at == 4.0


def test_a_worker_that_dies_in_its_turn_leaves_the_turn_to_the_others(shared):
    import subprocess
    import sys
    holder = subprocess.Popen([sys.executable, '-c', textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({shared.directory + '/turn'!r}, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print('holding', flush=True)
        time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'holding'
        holder.kill()
        holder.wait(10)
        now = [1.0]
        worker = Worker(shared.directory, {('/os-services', None): services_answer()},
                        lambda: now[0])
        worker.sync.fresh_service_states()
        assert worker.reads() == 1
    finally:
        holder.kill()
        holder.wait()


def test_a_failed_read_hands_nothing_over_and_the_next_request_reads_again(shared):
    now = [1.0]
    api = {('/os-services', None): _Response(503, 'Service Unavailable')}
    a, b = (Worker(shared.directory, api, lambda: now[0]) for _ in range(2))
    a.sync.fresh_service_states()
    api[('/os-services', None)] = services_answer('compute1')
    b.sync.fresh_service_states()
    assert (a.reads(), b.reads()) == (1, 1)
    assert b.disabled('compute1')


def test_keys_another_worker_left_that_cannot_be_taken_send_the_worker_to_the_api(shared):
    now = [1.0]
    api = {('/os-services', None): services_answer('compute2')}
    a, b = (Worker(shared.directory, api, lambda: now[0]) for _ in range(2))
    b.sync.fresh_service_states()
    now[0] = 2.0
    api[('/os-services', None)] = services_answer('compute1')
    a.sync.fresh_service_states()
    with open(shared.directory + '/keys', 'w') as f:
        f.write('[["compute1", "paused"')  # torn, as no rename would leave it: refused
    b.sync.fresh_service_states()

    assert b.reads() == 2                               # its own read, fresh as promised
    assert b.disabled('compute1') and not b.disabled('compute2')
    c = Worker(shared.directory, api, lambda: now[0])
    c.sync.fresh_service_states()                       # handed over anew: c takes it
    assert c.reads() == 0 and c.disabled('compute1')


@pytest.mark.parametrize('nova, shared', [
    ({'auth_type': 'password'}, True),
    ({'auth_type': 'password', 'service_state_max_age': 2.5}, True),
    ({'auth_type': 'password', 'service_state_max_age': -1}, False),   # the sync only
    ({'auth_type': 'password', 'sync_interval': 0}, False),
    ({}, False),
])
def test_the_workers_read_by_turns_only_when_requests_read_the_services_state(nova, shared):
    from scheduler.catalog.nova_sync import reads_service_states
    from scheduler.cmd.service import Supervisor

    conf = conf_with(**nova)
    supervisor = Supervisor(conf, workers=2)
    try:
        assert reads_service_states(conf) is shared
        assert (supervisor.service_reads is not None) is shared
    finally:
        if supervisor.service_reads is not None:
            supervisor.service_reads.remove()
