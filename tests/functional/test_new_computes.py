"""A compute that registered after the last sync is scheduled under its service host and
cell at once, also when the caller names it; a provider no host source knows is never
answered under a guessed name.

Real Placement, the real service on both transports, a (fake, real-HTTP) compute API
and real cell databases (MariaDB and PostgreSQL). Every periodic sync is an hour apart,
so whatever the service knows of a new compute it learnt by looking it up.
"""
from __future__ import annotations

import pytest

from scheduler.exceptions import NoValidHost
from scheduler.objects.spec import Destination
from scheduler.rpc.client import SchedulerClient
from scheduler.service import SchedulerService
from tests.builders import boot_spec, first_choice
from tests.fixtures import nova_api_samples as samples
from tests.fixtures.cell_databases import ComputeNodeRow
from tests.fixtures.fake_nova import FakeNova
from tests.functional.cloud import add_host, consumers_with_allocations

OTHER_CELL = 'c0ffee00-0000-4000-8000-00000000ce11'


@pytest.fixture
def start(start_scheduler):
    def start_service(*, nova: FakeNova | None = None, cells: list[str] = (),
                      **overrides) -> tuple[SchedulerService, SchedulerClient]:
        if nova is not None:
            overrides.update(nova.options())
        if cells:
            overrides.update({'cell_database.connections': list(cells),
                              'cell_database.sync_interval': 3600})
        running = start_scheduler(**overrides)
        return running.service, running.client

    return start_service


def test_a_compute_registered_after_the_sync_is_answered_under_its_service_host(
        placement_client, fake_nova, start):
    service, client = start(nova=fake_nova)
    assert service.catalog.snapshot_stats()['nova_hypervisors'] == 0

    # libvirt names the node after the FQDN; the service host is the short name.
    node = add_host(placement_client, 'node-7.example.org')
    fake_nova.hypervisors = [samples.hypervisor(node, 'node-7.example.org', 'node-7')]

    chosen = first_choice(client)

    assert (chosen.service_host, chosen.nodename) == ('node-7', 'node-7.example.org')
    assert f'/v2.1/os-hypervisors/{node}' in fake_nova.requests
    assert '/v2.1/os-hypervisors/detail' in fake_nova.requests  # only the start-up sync's
    assert fake_nova.requests.count('/v2.1/os-hypervisors/detail') == 1


def test_a_provider_no_source_knows_is_left_out_and_looked_up_again_only_after_a_while(
        placement_client, fake_nova, start):
    service, client = start(nova=fake_nova, **{'scheduler.unresolved_hosts_retry': 3600})
    known = add_host(placement_client, 'cn-known', ram_mb=8192)
    orphan = add_host(placement_client, 'cn-orphan', ram_mb=65536)  # the weighers' favourite
    fake_nova.hypervisors = [samples.hypervisor(known, 'cn-known', 'cn-known')]

    assert first_choice(client).service_host == 'cn-known'
    assert first_choice(client).service_host == 'cn-known'

    looked_up = fake_nova.requests.count(f'/v2.1/os-hypervisors/{orphan}')
    assert looked_up == 1  # not once per request


def test_with_only_unknown_providers_the_answer_is_no_valid_host_naming_none(
        placement_client, fake_nova, start):
    service, client = start(nova=fake_nova)
    add_host(placement_client, 'cn-nobody-knows')

    with pytest.raises(NoValidHost) as failure:
        first_choice(client)

    assert 'compute node not yet known to the scheduler' in str(failure.value)
    assert 'cn-nobody-knows' not in str(failure.value)


def test_without_host_sources_provider_names_stand_for_service_hosts(placement_client, start):
    service, client = start()
    add_host(placement_client, 'cn-by-name')

    assert first_choice(client).service_host == 'cn-by-name'


def test_a_compute_read_from_its_cell_database_is_scheduled_in_that_cell(
        placement_client, cell_db, start):
    service, client = start(cells=[f'{OTHER_CELL}={cell_db.reader_url}'])
    node = add_host(placement_client, 'node-9.example.org')
    cell_db.insert([ComputeNodeRow(uuid=node, nodename='node-9.example.org', host='node-9')])

    chosen = first_choice(client)

    assert (chosen.service_host, chosen.nodename, chosen.cell_uuid) == (
        'node-9', 'node-9.example.org', OTHER_CELL)


def test_with_both_sources_a_new_compute_gets_its_cell_from_its_cell_database(
        placement_client, fake_nova, cell_db, start):
    service, client = start(nova=fake_nova, cells=[f'{OTHER_CELL}={cell_db.reader_url}'])
    node = add_host(placement_client, 'node-5.example.org')
    fake_nova.hypervisors = [samples.hypervisor(node, 'node-5.example.org', 'node-5')]
    cell_db.insert([ComputeNodeRow(uuid=node, nodename='node-5.example.org', host='node-5')])

    chosen = first_choice(client)

    assert (chosen.service_host, chosen.cell_uuid) == ('node-5', OTHER_CELL)


# A destination named by the caller (API 2.74 host/hypervisor_hostname, forced hosts, the
# target of an evacuation or live migration) that registered after the last sync.

def boot_on(host: str | None = None, node: str | None = None):
    return boot_spec(requested_destination=Destination(host=host, node=node))


@pytest.mark.parametrize('host, node', [('node-3', None), ('node-3', 'node-3.example.org'),
                                        (None, 'node-3.example.org')])
def test_a_requested_compute_read_from_its_cell_database_is_placed(
        placement_client, cell_db, start, host, node):
    service, client = start(cells=[f'{OTHER_CELL}={cell_db.reader_url}'])
    add_host(placement_client, 'cn-old')
    new = add_host(placement_client, 'node-3.example.org')
    cell_db.insert([ComputeNodeRow(uuid=new, nodename='node-3.example.org', host='node-3')])
    assert service.catalog.find_nodes('node-3', None) == []   # no sync has seen it

    chosen = first_choice(client, boot_on(host, node))

    assert (chosen.service_host, chosen.nodename, chosen.cell_uuid) == (
        'node-3', 'node-3.example.org', OTHER_CELL)
    assert len(consumers_with_allocations(placement_client, [new])) == 1   # claimed there


def test_a_requested_host_the_compute_api_lists_is_placed_after_one_search(
        placement_client, fake_nova, start):
    service, client = start(nova=fake_nova)
    new = add_host(placement_client, 'node-4.example.org')
    fake_nova.hypervisors = [samples.hypervisor(new, 'node-4.example.org', 'node-4')]

    chosen = first_choice(client, boot_on('node-4'))

    assert (chosen.service_host, chosen.nodename) == ('node-4', 'node-4.example.org')
    assert fake_nova.searches == ['node-4']
    assert fake_nova.requests.count('/v2.1/os-hypervisors/detail') == 2  # start-up sync + 1


def test_a_requested_host_no_source_knows_gets_the_reason_it_got_without_sources(
        placement_client, fake_nova, cell_db, start):
    _, without_sources = start()
    _, with_sources = start(nova=fake_nova, cells=[f'{OTHER_CELL}={cell_db.reader_url}'])
    new = add_host(placement_client, 'node-5.example.org')
    fake_nova.hypervisors = [samples.hypervisor(new, 'node-5.example.org', 'node-5')]
    cell_db.insert([ComputeNodeRow(uuid=new, nodename='node-5.example.org', host='node-5')])

    reasons = []
    for client in (without_sources, with_sources, with_sources):
        with pytest.raises(NoValidHost) as failure:
            first_choice(client, boot_on('nowhere'))
        reasons.append(str(failure.value))

    assert reasons == [reasons[0]] * 3
    assert 'No such host - host: nowhere node: None' in reasons[0]
    assert 'node-5' not in reasons[0] and new not in reasons[0]
    assert fake_nova.searches == ['nowhere']   # the second request did not ask again
