"""A killed scheduler leaves no allocation behind.

A worker (or the whole service) is SIGKILLed while a request holds claims and
has not answered; its caller times out. The claims journal, read by the worker
that replaces it (or by the service started again), gives those claims back.
Real processes, RabbitMQ and a real Placement throughout; the drill at the end
does it at random under load (tests/functional/chaos.py).
"""
from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import uuid

import oslo_messaging
import pytest

from scheduler.objects.codec import encode_request_spec
from scheduler.rpc.client import SchedulerClient
from scheduler.rpc.transport import get_transport
from tests.builders import CONTEXT, boot_spec, new_uuids, select
from tests.fixtures.postgres_placement import PostgresPlacement
from tests.fixtures.processes import REPO, wait_for, write_config
from tests.fixtures.service import conf_for
from tests.functional import chaos
from tests.functional.cloud import add_host

pytestmark = pytest.mark.rabbit
CALL_TIMEOUT = 6.0


class Caught:
    """A scheduler-service whose filter holds the second filter pass of the process
    (a request's alternates, after its claims) and names the worker it holds."""

    def __init__(self, tmp_path: pathlib.Path, placement_url: str, rabbit_url: str, *,
                 workers: int, journal: bool = True, after_calls: int = 1):
        self.marker = tmp_path / 'caught'
        self.topic = f'scheduler-chaos-{uuid.uuid4().hex[:8]}'
        extra = ('[scheduler]\ncleanup_retry_interval = 0.5\n'
                 '[DEFAULT]\ngraceful_shutdown_timeout = 2\n')
        if not journal:
            extra += '[claims_journal]\ndirectory =\n'
        self.config = write_config(tmp_path / 'scheduler.conf', placement_url=placement_url,
                                   transport_url=rabbit_url, topic=self.topic,
                                   workers=workers, host='scheduler-caught', extra=extra)
        self.service = chaos.Service(self.config, workers)
        self.env = {'SLOW_FILTER_MARKER': str(self.marker), 'SLOW_FILTER_SECONDS': '60',
                    'SLOW_FILTER_AFTER_CALLS': str(after_calls)}
        self.transport = get_transport(conf_for(placement_url, rabbit_url))

    def start(self) -> None:
        old = dict(os.environ)
        os.environ.update(self.env)
        try:
            self.service.start()
        finally:
            os.environ.clear()
            os.environ.update(old)

    def call_until_caught(self, instances: list[str]) -> tuple[int, dict]:
        """Send a boot of ``instances``; returns the worker holding it (its claims made)
        and what the caller will have seen once it gives up."""
        outcome: dict = {}
        client = SchedulerClient(self.transport, topic=self.topic, timeout=CALL_TIMEOUT)

        def call() -> None:
            try:
                outcome['result'] = client.select_destinations(
                    CONTEXT, encode_request_spec(boot_spec(num_instances=len(instances))),
                    instances, return_objects=True, return_alternates=True)
            except Exception as e:  # noqa: BLE001 - asserted by the tests
                outcome['error'] = e
        self.caller = threading.Thread(target=call)
        self.caller.start()
        wait_for(lambda: self.marker.exists() and self.marker.read_text(),
                 'the request to hold its claims')
        return int(self.marker.read_text()), outcome

    def kill_and_replace(self, worker: int) -> None:
        """SIGKILL ``worker``; return once its caller gave up and a new worker serves."""
        os.kill(worker, signal.SIGKILL)
        self.caller.join(CALL_TIMEOUT + 10)
        wait_for(lambda: worker not in self.service.workers() and self.service.all_serving(),
                 'the worker to be replaced')

    def close(self) -> None:
        self.transport.cleanup()
        self.service.stop()


@pytest.fixture
def caught(tmp_path, placement, rabbit_url):
    made: list[Caught] = []

    def make(**kwargs) -> Caught:
        made.append(Caught(tmp_path, placement.url, rabbit_url, **kwargs))
        made[-1].start()
        return made[-1]
    yield make
    for c in made:
        c.close()


@pytest.fixture
def hosts(placement_client) -> list[str]:
    """Three hosts, room enough for every test's instances and their alternates."""
    return [add_host(placement_client, f'cn{n}') for n in range(3)]


def holding(placement_client, instances) -> list[str]:
    return [i for i in instances if placement_client.get_allocations(i).allocations]


def test_a_worker_killed_holding_claims_leaves_nothing_once_it_is_replaced(
        caught, placement_client, hosts):
    service = caught(workers=2)
    instances = new_uuids(2)
    worker, outcome = service.call_until_caught(instances)
    held = holding(placement_client, instances)
    assert held                                   # claimed, not answered

    service.kill_and_replace(worker)

    assert isinstance(outcome.get('error'), oslo_messaging.MessagingTimeout)
    wait_for(lambda: not holding(placement_client, instances),
             'the replacement to give the claims back', timeout=20)
    assert service.service.output().count('gave back the claim of') == len(held)


def test_without_a_journal_the_claims_of_a_killed_worker_stay(caught, placement_client, hosts):
    # What the journal is for: the same kill, with [claims_journal] directory empty.
    service = caught(workers=2, journal=False)
    instances = new_uuids(2)
    worker, outcome = service.call_until_caught(instances)
    held = holding(placement_client, instances)
    assert held

    service.kill_and_replace(worker)
    time.sleep(1.5)   # three clean-up intervals: a journal would have acted by now

    assert isinstance(outcome.get('error'), oslo_messaging.MessagingTimeout)
    assert holding(placement_client, instances) == held
    for instance in held:
        placement_client.delete_allocations(instance)


def test_the_whole_service_killed_holding_claims_gives_them_back_when_started_again(
        caught, placement_client, hosts):
    service = caught(workers=1)
    instances = new_uuids(3)
    _, outcome = service.call_until_caught(instances)

    service.service.kill_all()
    service.caller.join(CALL_TIMEOUT + 10)
    assert isinstance(outcome.get('error'), oslo_messaging.MessagingTimeout)
    assert holding(placement_client, instances)    # nobody left to undo them

    service.env['SLOW_FILTER_AFTER_CALLS'] = '1000'
    service.start()

    wait_for(lambda: not holding(placement_client, instances),
             'the restarted service to give the claims back', timeout=20)
    # And it serves: a new boot is answered and keeps its claim.
    [selection] = select(SchedulerClient(service.transport, topic=service.topic,
                                         timeout=30), boot_spec(), new_uuids(1))
    assert selection[0].service_host.startswith('cn')


def test_answered_requests_keep_their_claims_across_kills(caught, placement_client, hosts):
    service = caught(workers=1, after_calls=1000)
    client = SchedulerClient(service.transport, topic=service.topic, timeout=30)
    answered = new_uuids(2)
    select(client, boot_spec(num_instances=2), answered)

    service.service.kill_all()
    service.start()
    time.sleep(1.5)   # three clean-up intervals

    assert holding(placement_client, answered) == answered
    assert 'gave back the claim of' not in service.service.output()


def test_the_drill_kills_workers_and_the_service_under_load_and_nothing_leaks(
        postgres_placement: PostgresPlacement, rabbit_url, tmp_path):
    report = chaos.run(chaos.Drill(postgres_placement.url, rabbit_url, tmp_path, hosts=12,
                                   callers=4, seconds=20, worker_kills=3, service_kills=1,
                                   call_timeout=10))
    print(f'\n[chaos drill] {report}')

    assert report.worker_kills == 3 and report.service_kills == 1
    assert report.requests > 0 and report.answered > 0
    assert report.failed_instances_holding == 0
    assert report.refused_instances_holding == 0
    assert report.unknown_consumers == 0
    assert report.answered_instances_wrong == 0
    assert report.providers_over_capacity == 0


def test_the_drill_runs_from_the_command_line():
    done = subprocess.run([sys.executable, '-m', 'tests.functional.chaos', '--help'],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and '--worker-kills' in done.stdout
