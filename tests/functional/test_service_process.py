"""``scheduler-service`` as operators run it: a process, a config file, RabbitMQ.

Several workers share the ``scheduler`` queue; a worker that dies is
replaced, and so are the compute services reader and the provider view reader
the workers ask; SIGTERM lets
calls in flight finish before the process exits; a configuration that cannot
work stops start-up with an error naming the option.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid

import pytest

from scheduler import exceptions as exc
from scheduler.objects.codec import encode_request_spec
from scheduler.rpc.client import SchedulerClient
from scheduler.rpc.transport import get_transport
from tests.builders import CONTEXT, boot_spec, chosen_host, new_uuids, select
from tests.fixtures.processes import REPO, ServiceProcess, wait_for, write_config
from tests.fixtures.service import conf_for
from tests.functional.cloud import add_host
from tests.functional.test_metrics_endpoint import scrape, two_free_ports, value


@pytest.fixture
def service_process(tmp_path, placement, rabbit_url):
    started: list[ServiceProcess] = []

    def start(workers: int, extra: str = '', **env: str):
        topic = f'scheduler-proc-{uuid.uuid4().hex[:8]}'
        config = write_config(tmp_path / 'scheduler.conf', placement_url=placement.url,
                              transport_url=rabbit_url, topic=topic, workers=workers,
                              extra=extra)
        process = ServiceProcess(config, env)
        started.append(process)
        conf = conf_for(placement.url, rabbit_url)
        transport = get_transport(conf)
        client = SchedulerClient(transport, topic=topic, timeout=20)
        # A ping sent before the worker's queue exists is lost: ask often, briefly.
        pinger = SchedulerClient(transport, topic=topic, timeout=2)

        def answers():
            if process.proc.poll() is not None:
                pytest.fail(f'scheduler-service exited early:\n{process.output()}')
            try:
                return pinger.call(CONTEXT, 'ping', version='1.1', namespace='baseapi', arg=1)
            except Exception:  # noqa: BLE001 - not up yet
                return None

        wait_for(answers, 'the service to answer ping', timeout=90)
        return process, client, transport

    yield start
    for process in started:
        process.stop()


def test_a_killed_worker_is_replaced_and_the_others_keep_serving(service_process,
                                                                 placement_client):
    add_host(placement_client, 'cn0')
    process, client, transport = service_process(workers=2)
    workers = wait_for(lambda: len(process.workers()) == 2 and process.workers(), 'two workers')

    victim = sorted(workers)[0]
    os.kill(victim, signal.SIGKILL)

    # Calls keep being answered while the supervisor replaces the worker.
    for _ in range(4):
        [selections] = client.select_destinations(CONTEXT, encode_request_spec(boot_spec()),
                                                  new_uuids(1))
        assert selections[0].service_host == 'cn0'
    replaced = wait_for(lambda: (len(process.workers()) == 2 and victim not in process.workers()
                                 and process.workers()), 'a replacement worker')
    assert victim not in replaced
    transport.cleanup()


def test_the_compute_services_reader_is_replaced_when_it_dies_and_requests_still_see_the_api(
        service_process, placement_client, fake_nova):
    """With ``[nova]`` at its defaults and two workers, the service runs a third child
    that reads the compute services' state for them (scheduler/catalog/services_reader.py).
    Killed, it is started again; meanwhile and afterwards a host forced down through
    the compute API before a request is never chosen by it."""
    from tests.fixtures import nova_api_samples as samples

    hosts = {name: add_host(placement_client, name, ram_mb=ram)
             for name, ram in (('big-host', 65536), ('small-host', 16384))}
    fake_nova.services = [samples.compute_service(name) for name in hosts]
    fake_nova.hypervisors = [samples.hypervisor(rp, name, name) for name, rp in hosts.items()]
    nova = ''.join(f'{name.split(".", 1)[1]} = {value}\n'
                   for name, value in fake_nova.options(startup_sync_timeout=60).items())
    process, client, _ = service_process(workers=2, extra=f'[nova]\n{nova}')

    def reader_pid() -> int | None:
        pids = [int(line.split('compute services reader ', 1)[1].split()[0])
                for line in process.output().splitlines()
                if 'compute services reader ' in line and 'serving the workers' in line]
        return pids[-1] if pids and pids[-1] in process.workers() else None

    first = wait_for(reader_pid, 'the compute services reader')
    assert len(process.workers()) == 3
    assert chosen_host(client, boot_spec()) == 'big-host'

    os.kill(first, signal.SIGKILL)
    fake_nova.services = [samples.compute_service('big-host', up=False, forced_down=True),
                          samples.compute_service('small-host')]
    for _ in range(4):
        assert chosen_host(client, boot_spec()) == 'small-host'

    second = wait_for(lambda: (pid := reader_pid()) not in (None, first) and pid,
                      'a new compute services reader')
    fake_nova.services = [samples.compute_service(name) for name in hosts]
    assert chosen_host(client, boot_spec()) == 'big-host'
    assert second in process.workers()


def test_each_worker_s_provider_view_shows_the_other_s_claims_before_its_next_read(
        service_process, placement, placement_client):
    # Four hosts with room for one 4-vCPU instance each, ordered by free RAM. Each
    # view is read once and kept (max age 300 s): a worker sees the other's claims
    # only through the board the supervisor shares with them. Without it, a request
    # answered by the other worker after a claim would offer the claimed host, and
    # Placement would refuse that claim for capacity. Nova's ordering (tolerance 0,
    # not the view's default 0.01, with which a worker may take a host of its own
    # share up to 10% below a nearly full best one of the other's), so that the
    # order of the hosts chosen is the order of their weights.
    hosts = [add_host(placement_client, f'siblings-{i}', vcpus=4, ram_mb=16384 - 1024 * i)
             for i in range(4)]
    port = two_free_ports()
    process, client, transport = service_process(workers=2, extra=f"""
[scheduler]
provider_view = true
provider_view_max_age = 300
near_best_weight_tolerance = 0
metrics_listen = 127.0.0.1:{port}
[placement_database]
connection = sqlite:///{placement.db_path}
""")
    # Every worker reads its view: requests no host fits (Placement, asked then, agrees),
    # until each worker has answered one (the second may start consuming later).
    def both_workers_read_their_views() -> bool:
        with pytest.raises(exc.NoValidHost):
            select(client, boot_spec(vcpus=8), new_uuids(1))
        return all(sum(v for (name, labels), v in scrape(p).items()
                       if name == 'scheduler_select_destinations_total'
                       and ('outcome', 'novalidhost') in labels) for p in (port, port + 1))
    wait_for(both_workers_read_their_views, 'both workers to answer a request')

    chosen = [select(client, boot_spec(vcpus=4), new_uuids(1))[0][0].compute_node_uuid
              for _ in hosts]

    assert chosen == hosts                                   # best first, none refused
    assert sum(value(scrape(p), 'scheduler_claim_conflicts_total', kind='capacity')
               for p in (port, port + 1)) == 0
    transport.cleanup()


def test_the_provider_view_reader_serves_the_workers_and_is_replaced_when_it_dies(
        service_process, placement, placement_client):
    """With the provider view on and two workers, a third child reads the view's
    changes for both (scheduler/catalog/provider_reader.py) and the workers take
    its reads. Killed, it is started again; meanwhile the workers read on their
    own, and every request is placed."""
    # Enough hosts that a read of changes takes less than a quarter of them (the
    # reader would read them whole, which the workers cannot take).
    for i in range(16):
        add_host(placement_client, f'shared-reads-{i}')
    port = two_free_ports()
    process, client, _ = service_process(workers=2, extra=f"""
[scheduler]
provider_view = true
provider_view_max_age = 0.05
metrics_listen = 127.0.0.1:{port}
[placement_database]
connection = sqlite:///{placement.db_path}
""")

    def reader_pid() -> int | None:
        pids = [int(line.split('provider view reader ', 1)[1].split()[0])
                for line in process.output().splitlines()
                if 'provider view reader ' in line and 'serving the workers' in line]
        return pids[-1] if pids and pids[-1] in process.workers() else None

    def reads(source: str) -> float:
        return sum(value(scrape(p), 'scheduler_provider_view_reads_total', source=source)
                   for p in (port, port + 1))

    first = wait_for(reader_pid, 'the provider view reader')
    assert len(process.workers()) == 3

    def placed_after_a_shared_read() -> bool:
        assert select(client, boot_spec(), new_uuids(1))
        return reads('shared') > 0
    wait_for(placed_after_a_shared_read, 'a worker to take the reader\'s read')

    os.kill(first, signal.SIGKILL)
    own = reads('own')
    for _ in range(4):
        assert select(client, boot_spec(), new_uuids(1))
    second = wait_for(lambda: (pid := reader_pid()) not in (None, first) and pid,
                      'a new provider view reader')
    assert reads('own') > own
    shared = reads('shared')
    wait_for(lambda: select(client, boot_spec(), new_uuids(1)) and reads('shared') > shared,
             'a worker to take the new reader\'s read')
    assert second in process.workers()


def test_sigterm_lets_the_call_in_flight_finish(service_process, placement_client, tmp_path):
    add_host(placement_client, 'cn0')
    marker = tmp_path / 'in-flight'
    process, client, transport = service_process(
        workers=1, SLOW_FILTER_MARKER=str(marker), SLOW_FILTER_SECONDS='3')
    [instance] = new_uuids(1)
    outcome: dict[str, object] = {}

    def call():
        try:
            outcome['result'] = client.select_destinations(
                CONTEXT, encode_request_spec(boot_spec()), [instance])
        except Exception as e:  # noqa: BLE001 - asserted below
            outcome['error'] = e

    caller = threading.Thread(target=call)
    caller.start()
    wait_for(marker.exists, 'the call to reach the filters')
    process.proc.send_signal(signal.SIGTERM)
    caller.join(timeout=60)

    assert 'error' not in outcome, outcome.get('error')
    assert outcome['result'][0][0].service_host == 'cn0'
    assert process.proc.wait(timeout=60) == 0
    assert placement_client.get_allocations(instance).allocations
    transport.cleanup()


@pytest.mark.parametrize('extra, option', [
    ('[filter_scheduler]\nenabled_filters = NoSuchFilter\n', '[filter_scheduler] enabled_filters'),
    ('', '[placement] auth_type'),
])
def test_a_configuration_that_cannot_work_stops_start_up_naming_the_option(tmp_path, extra,
                                                                           option):
    config = tmp_path / 'scheduler.conf'
    if option == '[placement] auth_type':
        config.write_text('[DEFAULT]\ntransport_url = fake://\n[scheduler]\nworkers = 1\n')
    else:
        config.write_text('[DEFAULT]\ntransport_url = fake://\n[scheduler]\nworkers = 1\n'
                          '[placement]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n'
                          + extra)

    done = subprocess.run([sys.executable, '-m', 'scheduler.cmd.service', '--config-file',
                           str(config)], cwd=REPO, env={**os.environ, 'PYTHONPATH': str(REPO)},
                          capture_output=True, text=True, timeout=120)

    assert done.returncode == 2, done.stdout + done.stderr
    assert option in done.stdout + done.stderr
