"""With ``[cell_database]`` beside ``[nova]``, the cell databases answer what the compute
API would answer from the same rows: the hypervisors' fields, and the services' state
before a request (unless the heartbeats are not kept there)."""
from __future__ import annotations

import logging
import os
import shutil

import pytest
from keystoneauth1 import exceptions as ks_exc

from scheduler.catalog import HostCatalog
from scheduler.catalog.cell_db import ComputeNodeData, parse_rows
from scheduler.catalog.nova_api import HypervisorInfo, NovaApiError, NovaSnapshot, ServiceState
from scheduler.catalog.nova_sync import (
    HYPERVISOR_CHECK_EVERY,
    MAX_SINGLE_LOOKUPS,
    CheckedCellServices,
    NovaSync,
    silent_majority,
)

CELL = '00000000-0000-0000-0000-000000000001'
RP1 = '0d5e1b6a-3c21-4f0e-8a55-2b7d9c4e1f01'
RP2 = '1a2b3c4d-0000-4000-8000-000000000002'


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ------------------------------------------------------------------- the hypervisors' fields

def row(uuid, name, host, *, host_ip='10.0.0.1', hv_type='QEMU', hv_version=8002000,
        cpu_info='{"arch": "x86_64", "features": ["avx2"]}'):
    return (uuid, name, host, None, None, 4.0, 1.0, None, host_ip, hv_type, hv_version,
            cpu_info)


def test_a_row_gives_the_fields_the_hypervisor_list_shows_of_it():
    [node], problems = parse_rows([row(RP1, 'node-a', 'svc-a')])
    assert problems == []
    assert (node.host_ip, node.hypervisor_type, node.hypervisor_version) == (
        '10.0.0.1', 'QEMU', 8002000)
    assert node.cpu_info == {'arch': 'x86_64', 'features': ['avx2']}


def test_a_row_whose_cpu_info_is_not_json_loses_only_that_field():
    [node], problems = parse_rows([row(RP1, 'node-a', 'svc-a', cpu_info='{nope')])
    assert node.cpu_info == {} and node.hypervisor_type == 'QEMU'
    assert problems == ['node-a cpu_info: not JSON (Expecting property name enclosed in '
                        'double quotes)']


def test_rows_without_those_columns_leave_them_unreported():
    [node], _ = parse_rows([row(RP1, 'node-a', 'svc-a')[:8]])
    assert (node.host_ip, node.hypervisor_type, node.hypervisor_version, node.cpu_info) == (
        None, None, None, {})


def test_a_record_takes_the_cell_database_s_fields_when_the_compute_api_lists_no_hypervisor():
    catalog = HostCatalog(default_cell_uuid=CELL)
    catalog.apply_cell_db_nodes(parse_rows([row(RP1, 'node-a', 'svc-a')])[0])
    record = catalog.record_for_provider(RP1, None)
    assert (record.service_host, record.host_ip, record.hypervisor_type,
            record.hypervisor_version, record.cpu_info['features']) == (
        'svc-a', '10.0.0.1', 'QEMU', 8002000, ['avx2'])

    # A hypervisor the compute API listed keeps its word, as before.
    catalog.apply_nova_snapshot(NovaSnapshot(hypervisors=(HypervisorInfo(
        provider_uuid=RP1, nodename='node-a', service_host='svc-a', host_ip='10.9.9.9',
        hypervisor_type='QEMU', hypervisor_version=9000000),)), cast_mark=catalog.cast_mark())
    record = catalog.record_for_provider(RP1, None)
    assert (record.host_ip, record.hypervisor_version) == ('10.9.9.9', 9000000)


class ListingApi:
    """The compute API's reads, counting the hypervisor lists."""

    def __init__(self, hypervisors):
        self.hypervisors = list(hypervisors)
        self.lists = 0
        self.services_reads = 0

    def read(self, *, hypervisors=True, services=True):
        if not services:
            return NovaSnapshot()
        self.services_reads += 1
        return NovaSnapshot(services={h.service_host: ServiceState(host=h.service_host, up=True)
                                      for h in self.hypervisors},
                            hypervisors=self.read_hypervisors() if hypervisors else ())

    def read_hypervisors(self):
        self.lists += 1
        return tuple(self.hypervisors)

    def read_service_hosts(self):
        self.services_reads += 1
        return {h.service_host for h in self.hypervisors}


def hypervisor(uuid, name, service_host='svc-a'):
    return HypervisorInfo(provider_uuid=uuid, nodename=name, service_host=service_host,
                          hypervisor_type='QEMU', hypervisor_version=1)


def cell_nodes(*uuids):
    return [ComputeNodeData(provider_uuid=u, nodename=f'n-{u[:4]}', service_host='svc-a',
                            hypervisor_type='QEMU', hypervisor_version=2) for u in uuids]


def test_while_the_cell_databases_hold_every_node_the_hypervisors_are_listed_once_an_hour():
    clock = Clock()
    catalog = HostCatalog(default_cell_uuid=CELL)
    api = ListingApi([hypervisor(RP1, 'n-0d5e')])
    sync = NovaSync(catalog, api, interval=60,  # type: ignore[arg-type]
                    cell_databases_have=catalog.cell_databases_have, clock=clock)

    # Before the cell databases are read, the list is what there is.
    assert sync.sync_once() and api.lists == 1
    assert catalog.record_for_provider(RP1, None).hypervisor_version == 1

    catalog.apply_cell_db_nodes(cell_nodes(RP1))
    clock.now += 60
    assert sync.sync_once() and api.lists == 2 and sync.cells_hold_every_node
    # The cell database's row speaks for the node; no stale list stands over it.
    assert catalog.record_for_provider(RP1, None).hypervisor_version == 2

    for _ in range(int(HYPERVISOR_CHECK_EVERY // 60) - 1):
        clock.now += 60
        assert sync.sync_once()
    assert api.lists == 2
    clock.now += 60
    assert sync.sync_once() and api.lists == 3


def held_by_the_cells(**kw):
    """A sync whose cell databases hold the one node its compute API lists."""
    clock = Clock()
    catalog = HostCatalog(default_cell_uuid=CELL)
    catalog.apply_cell_db_nodes(cell_nodes(RP1))
    api = ListingApi([hypervisor(RP1, 'n-0d5e')])
    sync = NovaSync(catalog, api, interval=60,  # type: ignore[arg-type]
                    cell_databases_have=catalog.cell_databases_have, clock=clock, **kw)
    return clock, catalog, api, sync


def test_a_node_the_cell_databases_lack_brings_the_list_back_at_every_sync(caplog):
    clock, catalog, api, sync = held_by_the_cells()
    assert sync.sync_once() and sync.cells_hold_every_node

    # A cell no [cell_database] connection names, seen at the hourly check.
    api.hypervisors.append(hypervisor(RP2, 'node-b'))
    clock.now += HYPERVISOR_CHECK_EVERY
    with caplog.at_level(logging.INFO):
        assert sync.sync_once()
    assert not sync.cells_hold_every_node
    assert 'no longer hold every compute node' in caplog.text
    assert catalog.record_for_provider(RP2, None).nodename == 'node-b'
    lists = api.lists
    clock.now += 60
    assert sync.sync_once() and api.lists == lists + 1


def test_between_two_checks_the_services_come_from_the_cell_databases_when_requests_read_there():
    cells = Source({'svc-a': ServiceState(host='svc-a', up=True, disabled=True)})
    clock, catalog, api, sync = held_by_the_cells(services=cells, service_state_max_age=0.0)
    # The check reads the API's service hosts once, and the cells' services for their
    # hosts, then for the states the snapshot takes, as between two checks.
    assert sync.sync_once() and (api.services_reads, cells.reads) == (1, 2)
    assert catalog.record_for_provider(RP1, None).disabled
    clock.now += 60
    assert sync.sync_once() and (api.services_reads, cells.reads) == (1, 3)
    assert catalog.record_for_provider(RP1, None).disabled


def test_more_unknown_nodes_than_single_look_ups_list_the_hypervisors_again():
    clock, catalog, api, sync = held_by_the_cells()
    assert sync.sync_once() and api.lists == 1
    sync.look_up([f'00000000-0000-4000-8000-{i:012d}' for i in range(MAX_SINGLE_LOOKUPS + 1)])
    assert api.lists == 2


def test_without_cell_databases_every_sync_lists_the_hypervisors():
    catalog = HostCatalog(default_cell_uuid=CELL)
    api = ListingApi([hypervisor(RP1, 'n-0d5e')])
    sync = NovaSync(catalog, api, interval=60)  # type: ignore[arg-type]
    for _ in range(3):
        assert sync.sync_once()
    assert api.lists == 3


# ---------------------------------------------------------- the services' state, checked

def states(**up: bool) -> dict[str, ServiceState]:
    return {host: ServiceState(host=host, up=value) for host, value in up.items()}


class Source:
    """A services source answering ``answers`` in turn (an exception is raised)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.reads = 0

    def read_service_keys(self):
        self.reads += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer, [], [(h,) for h in answer]

    def read_services(self):
        services, unknown, _ = self.read_service_keys()
        return services, unknown

    def service_hosts(self, *, read=False):
        if not self.reads:
            if not read:
                return None
            self.reads += 1     # the hosts alone, read now
        return set(self.answers[0])

    def states_of_keys(self, keys):
        # Another worker's read of the same answers.
        return {key[0]: self.answers[0][key[0]] for key in keys}, []


def test_a_silent_majority_is_more_than_half_of_the_services_not_forced_down():
    assert silent_majority(states(a=False, b=False, c=True)) == ['a', 'b']
    assert silent_majority(states(a=False, b=True)) == []
    forced = {'f': ServiceState(host='f', up=False, forced_down=True)}
    assert silent_majority({**states(a=False, b=True), **forced}) == []


def test_rows_with_their_heartbeats_are_read_without_asking_the_compute_api():
    cells, api = Source(states(a=True, b=True, c=False)), Source(states(a=True))
    checked = CheckedCellServices(cells, api)  # type: ignore[arg-type]
    for _ in range(3):
        checked.read_services()
    assert (cells.reads, api.reads, checked.from_api) == (3, 0, False)


def test_rows_that_say_down_where_the_compute_api_says_up_send_every_read_to_the_api(caplog):
    cells = Source(states(a=False, b=False, c=False))
    api = Source(states(a=True, b=True, c=True))
    checked = CheckedCellServices(cells, api)  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR):
        services, _ = checked.read_services()
    assert all(s.up for s in services.values())
    assert checked.from_api
    assert 'servicegroup driver' in caplog.text and 'service_states = false' in caplog.text
    checked.read_services()
    assert (cells.reads, api.reads) == (1, 2)


def test_computes_really_down_are_confirmed_at_most_once_a_minute():
    clock = Clock()
    cells = Source(states(a=False, b=False, c=True))
    api = Source(states(a=False, b=False, c=True))
    checked = CheckedCellServices(cells, api, recheck=60, clock=clock)  # type: ignore[arg-type]
    services, _ = checked.read_services()
    assert not services['a'].up and api.reads == 1
    clock.now += 30
    checked.read_services()
    assert api.reads == 1
    clock.now += 31
    checked.read_services()
    assert (api.reads, checked.from_api) == (2, False)


def test_a_compute_api_that_cannot_confirm_leaves_the_rows_their_word(caplog):
    cells = Source(states(a=False, b=False))
    api = Source(NovaApiError('HTTP 503'))
    checked = CheckedCellServices(cells, api)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        services, _ = checked.read_services()
    assert not services['a'].up and not checked.from_api
    assert 'could not confirm it (HTTP 503)' in caplog.text


def test_cell_databases_that_cannot_be_read_leave_the_read_to_the_compute_api(caplog):
    cells = Source(NovaApiError('cell database c1: services: permission denied'))
    api = Source(states(a=True, b=False))
    checked = CheckedCellServices(cells, api)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            services, _ = checked.read_services()
    assert services['a'].up and not services['b'].up and api.reads == 3
    assert caplog.text.count('Grant SELECT on services') == 1
    assert not checked.from_api     # the next read tries the cell databases again


def test_equal_cpu_info_texts_give_one_shared_object():
    shared: dict = {}
    nodes, _ = parse_rows([row(RP1, 'node-a', 'svc-a'), row(RP2, 'node-b', 'svc-b')],
                          shared=shared)
    assert nodes[0].cpu_info is nodes[1].cpu_info
    [again], _ = parse_rows([row(RP1, 'node-a', 'svc-a')], shared=shared)
    assert again.cpu_info is nodes[0].cpu_info


def test_cells_whose_services_tables_name_every_compute_service_need_no_list_at_all(caplog):
    cells = Source({'svc-a': ServiceState(host='svc-a', up=True)})
    with caplog.at_level(logging.INFO):
        clock, catalog, api, sync = held_by_the_cells(services=cells, service_state_max_age=0.0)
        assert sync.sync_once()
    assert api.lists == 0 and sync.cells_hold_every_node
    assert 'the cell databases hold every compute node' in caplog.text
    assert catalog.record_for_provider(RP1, None).hypervisor_version == 2   # the cells'

    # A compute service of a cell no connection names, at the hourly check: the list.
    api.hypervisors.append(hypervisor(RP2, 'node-b', service_host='svc-b'))
    clock.now += HYPERVISOR_CHECK_EVERY
    assert sync.sync_once()
    assert api.lists == 1 and not sync.cells_hold_every_node
    assert catalog.record_for_provider(RP2, None).service_host == 'svc-b'


def test_a_read_that_hands_back_the_same_states_is_not_judged_again(monkeypatch):
    from scheduler.catalog import nova_sync

    same = states(a=True, b=True, c=False)
    cells, api = Source(same), Source(states(a=True))
    judged = []
    monkeypatch.setattr(nova_sync, 'silent_majority',
                        lambda services: judged.append(services) or [])
    checked = CheckedCellServices(cells, api)  # type: ignore[arg-type]
    for _ in range(3):
        checked.read_services()
    assert judged == [same] and cells.reads == 3


# ------------------------------------------------- one check for the workers of a service

def workers_held_by_the_cells(tmp_path, count=3, *, disabled=False):
    """``count`` workers' syncs of one service (one SharedReads directory, one compute
    API, one clock), whose cell databases hold the one node the compute API lists."""
    from scheduler.catalog.shared_services import SharedReads

    # The directory as the supervisor makes it, its turn's header included.
    made = SharedReads.create()
    shutil.copy(os.path.join(made.directory, 'turn'), tmp_path / 'turn')
    made.remove()
    clock, api = Clock(), ListingApi([hypervisor(RP1, 'n-0d5e')])
    syncs = []
    for _ in range(count):
        catalog = HostCatalog(default_cell_uuid=CELL)
        catalog.apply_cell_db_nodes(cell_nodes(RP1))
        state = ServiceState(host='svc-a', up=True, disabled=disabled)
        syncs.append(NovaSync(catalog, api, interval=60,  # type: ignore[arg-type]
                              services=Source({'svc-a': state}),
                              shared=SharedReads(str(tmp_path)), service_state_max_age=0.0,
                              cell_databases_have=catalog.cell_databases_have, clock=clock))
    return clock, api, syncs


def test_one_worker_checks_the_compute_api_for_the_others_once_an_hour(tmp_path):
    clock, api, syncs = workers_held_by_the_cells(tmp_path)

    assert all(sync.sync_once() for sync in syncs)
    # The first worker read every compute service; the others took its word.
    assert (api.services_reads, api.lists) == (1, 0)
    assert all(sync.cells_hold_every_node for sync in syncs)

    for _ in range(int(HYPERVISOR_CHECK_EVERY // 60) - 1):
        clock.now += 60
        assert all(sync.sync_once() for sync in syncs)
    assert api.services_reads == 1

    clock.now += 60     # an hour after the check: one worker checks again, for all
    assert all(sync.sync_once() for sync in syncs)
    assert api.services_reads == 2


def test_between_checks_the_workers_of_a_service_take_one_read_of_the_services_state(
        tmp_path):
    """A whole read of its own in every worker at every sync held that read in each (8 MB
    at 50,000 computes); they take the read the requests' reads share instead."""
    clock, api, syncs = workers_held_by_the_cells(tmp_path, disabled=True)
    assert all(sync.sync_once() for sync in syncs)
    first = [sync._services.reads for sync in syncs]

    clock.now += 60
    assert all(sync.sync_once() for sync in syncs)
    # One worker read every row (in its turn: no reader process here); the others took it.
    assert sum(sync._services.reads for sync in syncs) - sum(first) == 1
    # Each catalog holds the state that read found (the sync's snapshot has none).
    assert all(sync._catalog.record_for_provider(RP1, None).disabled for sync in syncs)


def test_a_check_that_found_a_node_missing_is_not_taken_every_worker_lists_for_itself(
        tmp_path):
    clock, api, syncs = workers_held_by_the_cells(tmp_path)
    api.hypervisors.append(hypervisor(RP2, 'node-b', service_host='svc-b'))

    assert all(sync.sync_once() for sync in syncs)
    assert not any(sync.cells_hold_every_node for sync in syncs)
    # Each read the service hosts, then the services and hypervisors for itself.
    assert (api.services_reads, api.lists) == (6, 3)
    assert all(sync._catalog.record_for_provider(RP2, None).service_host == 'svc-b'
               for sync in syncs)


class TimingOut:
    """The compute API's check read giving up (a ReadTimeout) while ``failing``."""

    def __init__(self, api: ListingApi):
        self.api, self.failing, self.attempts = api, True, 0
        self._read = api.read_service_hosts
        api.read_service_hosts = self      # type: ignore[method-assign]

    def __call__(self):
        self.attempts += 1
        if self.failing:
            raise NovaApiError('GET /os-services: ReadTimeout')
        return self._read()


def test_a_check_the_compute_api_cannot_answer_is_not_sent_again_at_every_sync(tmp_path):
    clock, api, syncs = workers_held_by_the_cells(tmp_path, count=2)
    check = TimingOut(api)
    # The sync goes on with what the cell databases hold (its aggregates applied).
    assert syncs[0].sync_once() and not syncs[0].cells_hold_every_node
    assert check.attempts == 1

    # Neither worker sends it again at its next syncs: nova-api would still be
    # serialising the read given up, and each new one would outlast the timeout too.
    clock.now += 60
    assert all(sync.sync_once() for sync in syncs)
    assert check.attempts == 1

    clock.now += 60     # two intervals after the failure: one worker tries, for both
    assert all(sync.sync_once() for sync in syncs)
    assert check.attempts == 2

    # Failing again, it waits twice as long, up to the hour.
    clock.now += 3 * 60
    assert all(sync.sync_once() for sync in syncs)
    assert check.attempts == 2
    clock.now += 60
    check.failing = False
    assert all(sync.sync_once() for sync in syncs)
    assert check.attempts == 3
    assert all(sync.cells_hold_every_node for sync in syncs)


def test_a_lone_worker_backs_off_from_a_check_that_cannot_be_answered_too():
    clock = Clock()
    catalog = HostCatalog(default_cell_uuid=CELL)
    catalog.apply_cell_db_nodes(cell_nodes(RP1))
    api = ListingApi([hypervisor(RP1, 'n-0d5e')])
    sync = NovaSync(catalog, api, interval=60,  # type: ignore[arg-type]
                    services=Source({'svc-a': ServiceState(host='svc-a', up=True)}),
                    service_state_max_age=0.0,
                    cell_databases_have=catalog.cell_databases_have, clock=clock)
    check = TimingOut(api)
    assert sync.sync_once() and check.attempts == 1
    clock.now += 60
    assert sync.sync_once() and check.attempts == 1
    check.failing = False
    clock.now += 60
    assert sync.sync_once() and check.attempts == 2 and sync.cells_hold_every_node


def test_the_check_s_read_may_take_longer_than_read_timeout():
    from scheduler.catalog.nova_sync import CHECK_READ_TIMEOUT, NovaComputeReader

    class Adapter:
        def get(self, url, **kw):
            self.timeout = kw['timeout']
            raise ks_exc.ConnectFailure('down')

    adapter = Adapter()
    reader = NovaComputeReader(adapter, microversion='2.87', connect_timeout=5.0,
                               read_timeout=30.0, page_size=1000)
    with pytest.raises(NovaApiError):
        reader.read_service_hosts()
    assert adapter.timeout == (5.0, CHECK_READ_TIMEOUT)
    with pytest.raises(NovaApiError):
        reader.read_service_keys()      # a read before requests keeps read_timeout
    assert adapter.timeout == (5.0, 30.0)
