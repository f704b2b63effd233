"""Host data from Nova's compute API: a freshly started scheduler, with no hosts file
and no cast yet, already knows an availability zone and a disabled compute service
because it read them from a (fake, real-HTTP) compute API at start-up."""
from __future__ import annotations

import logging
import uuid

import pytest

from scheduler.catalog import HostCatalog
from scheduler.rpc.client import SchedulerClient
from scheduler.service import SchedulerService
from tests.builders import boot_spec, chosen_host
from tests.fixtures import nova_api_samples as samples
from tests.fixtures.fake_nova import TOKEN
from tests.functional.cloud import add_host

AZ_AGGREGATE = str(uuid.uuid5(uuid.NAMESPACE_DNS, 'aggregate:london'))


@pytest.fixture
def cloud(placement_client, fake_nova):
    """Three hosts in Placement; Nova says one is in AZ london, one is disabled.

    The disabled host is the biggest, so the weighers would choose it if the
    scheduler did not know it is disabled; the AZ host is the smallest.
    """
    hosts = {
        'disabled-host': add_host(placement_client, 'disabled-host', ram_mb=65536),
        'plain-host': add_host(placement_client, 'plain-host', ram_mb=32768),
        'az-host': add_host(placement_client, 'az-host', ram_mb=16384,
                            aggregates=[AZ_AGGREGATE]),
    }
    fake_nova.aggregates = [samples.aggregate(1, AZ_AGGREGATE, 'london-az', ['az-host'],
                                              {'availability_zone': 'london'})]
    fake_nova.services = [samples.compute_service(name) for name in ('plain-host', 'az-host')]
    fake_nova.services.append(samples.compute_service('disabled-host', disabled=True,
                                                      reason='disk replacement'))
    fake_nova.hypervisors = [samples.hypervisor(rp, name, name) for name, rp in hosts.items()]
    return hosts


@pytest.fixture
def start_with_nova(start_scheduler, fake_nova):
    def start() -> tuple[SchedulerService, SchedulerClient]:
        running = start_scheduler(**fake_nova.options(hypervisor_page_size=2,
                                                      startup_sync_timeout=60))
        return running.service, running.client

    return start


def test_a_started_scheduler_knows_nova_s_zones_and_disabled_hosts_before_any_cast(
        cloud, fake_nova, start_with_nova, caplog):
    caplog.set_level(logging.DEBUG)
    service, client = start_with_nova()

    assert chosen_host(client, boot_spec()) == 'plain-host'   # not the bigger, disabled one
    assert chosen_host(client, boot_spec(availability_zone='london')) == 'az-host'

    # All three pages of hypervisors (page size 2) at 2.87, with the planted token.
    assert fake_nova.requests.count('/v2.1/os-hypervisors/detail') == 2
    assert fake_nova.microversions_seen == {'compute 2.87'}
    assert set(fake_nova.tokens_seen) == {TOKEN}
    assert TOKEN not in caplog.text


def test_a_failing_compute_api_keeps_the_last_good_data_until_it_answers_again(
        cloud, fake_nova, start_with_nova, caplog):
    caplog.set_level(logging.DEBUG)
    service, client = start_with_nova()
    sync = service.nova_sync

    fake_nova.fail_with = 500
    assert sync.sync_once() is False
    assert 'HTTP 500' in caplog.text and 'keeping the last good data' in caplog.text
    assert chosen_host(client, boot_spec(availability_zone='london')) == 'az-host'
    assert chosen_host(client, boot_spec()) == 'plain-host'

    # Back, and the operator re-enabled the big host meanwhile.
    fake_nova.fail_with = None
    fake_nova.services[-1] = samples.compute_service('disabled-host')
    assert sync.sync_once() is True
    assert chosen_host(client, boot_spec()) == 'disabled-host'
    assert TOKEN not in caplog.text


def test_a_host_disabled_through_the_api_is_never_chosen_by_the_next_request(
        cloud, fake_nova, start_with_nova):
    service, client = start_with_nova()
    assert chosen_host(client, boot_spec()) == 'plain-host'
    reads = fake_nova.requests.count('/v2.1/os-services')

    # Forced down a moment ago: the periodic sync is an hour away.
    fake_nova.services = [samples.compute_service('plain-host', up=False, forced_down=True),
                          samples.compute_service('az-host'),
                          samples.compute_service('disabled-host', disabled=True)]

    assert chosen_host(client, boot_spec()) == 'az-host'
    assert fake_nova.requests.count('/v2.1/os-services') == reads + 1  # one read per request


def test_with_service_state_max_age_negative_only_the_sync_reads_services(
        cloud, fake_nova, start_scheduler):
    running = start_scheduler(**fake_nova.options(service_state_max_age=-1,
                                                  startup_sync_timeout=60))
    reads = fake_nova.requests.count('/v2.1/os-services')
    fake_nova.services = [samples.compute_service('plain-host', up=False, forced_down=True)]

    # The state the sync read still stands: an operator's choice of staleness.
    assert chosen_host(running.client, boot_spec()) == 'plain-host'
    assert fake_nova.requests.count('/v2.1/os-services') == reads


@pytest.mark.parametrize('with_reader', [False, True], ids=['turns', 'the service reader'])
def test_workers_sharing_their_reads_never_choose_a_host_disabled_before_the_requests(
        cloud, fake_nova, placement, transport_url, with_reader):
    """Two workers of one service on one queue, reading the compute services' state
    by turns, or asking the service's reader (scheduler/catalog/services_reader.py):
    whichever worker answers, and whichever read it takes, a host forced down
    before the requests were sent is not chosen."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from scheduler.catalog.nova_sync import services_source_from_conf
    from scheduler.catalog.services_reader import Publisher
    from scheduler.catalog.shared_services import SharedReads
    from scheduler.rpc.transport import get_transport
    from tests.builders import SERVICE_CELL
    from tests.fixtures.service import conf_for

    topic = f'scheduler-test-{uuid.uuid4().hex[:8]}'
    conf = conf_for(placement.url, transport_url, **{
        'scheduler.rpc_topic': topic, 'scheduler.workers': 2,
        **fake_nova.options(startup_sync_timeout=60)})
    reads = SharedReads.create()
    stop, reader_reads = threading.Event(), []
    if with_reader:
        publisher = Publisher(services_source_from_conf(conf), reads)

        def read():
            reader_reads.append(publisher.read())
            return reader_reads[-1]

        threading.Thread(target=reads.serve, args=(read, stop), daemon=True).start()
    transport = get_transport(conf)
    workers = [SchedulerService(conf, transport=transport, service_reads=reads, worker_index=i,
                                catalog=HostCatalog(default_cell_uuid=SERVICE_CELL))
               for i in range(2)]
    try:
        for worker in workers:
            worker.start()
        client = SchedulerClient(transport, topic=topic, timeout=60)
        assert chosen_host(client, boot_spec()) == 'plain-host'

        fake_nova.services = [samples.compute_service('plain-host', up=False, forced_down=True),
                              samples.compute_service('az-host'),
                              samples.compute_service('disabled-host', disabled=True)]
        with ThreadPoolExecutor(6) as pool:  # az-host has room for 7 more
            chosen = list(pool.map(lambda _: chosen_host(client, boot_spec()), range(6)))

        assert set(chosen) == {'az-host'}
        if with_reader:
            assert reader_reads and None not in reader_reads
    finally:
        stop.set()
        for worker in workers:
            worker.stop()
            worker.wait()
        transport.cleanup()
        reads.remove()
