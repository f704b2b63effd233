"""The chaos drill: workers and the whole service SIGKILLed under load, then every
allocation read back.

Real processes throughout: ``scheduler-service`` with ``[scheduler] workers``
on RabbitMQ, in a session of its own so that the whole service (supervisor and
workers) can be killed at once as an init system's ``KillMode=control-group``
would; Placement on PostgreSQL (several server processes, so claims meet inside
it); callers sending boots over RPC with instance uuids and a call timeout, as
nova-conductor does; a cloud kept near full by deleting instances the way a user
deleting a server does. After the last kill the service is left (or started
again) and one clean-up interval allowed, then Placement is read:

* instances of requests whose callers saw a timeout or an error hold nothing,
  unless the service had answered for them (its reply handed to the transport, or
  about to be, when the caller had already given up or a kill lost the reply:
  doc/reliability.md, "Out of scope"); those are counted apart, from the
  service's DEBUG log;
* instances refused with NoValidHost hold nothing, and nothing unknown is held;
* every answered, undeleted instance holds exactly its Selection's allocations;
* no provider is over capacity.

``tests/functional/test_chaos.py`` runs a short drill in CI;
``python -m tests.functional.chaos`` runs the full one and prints the table
(doc/reliability.md).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from placement_client.client import PlacementClient
from scheduler import exceptions as exc
from scheduler.simulate import seed
from tests.fixtures.invariants import expected_allocations, over_capacity, read_capacity, read_held
from tests.fixtures.placement import make_placement_conf
from tests.fixtures.processes import REPO, child_pids, wait_for, write_config

# Per host: room for eight "small" (1 VCPU, 1 GiB, 10 GB) or four "medium" instances.
HOST_INVENTORY = {
    'VCPU': {'total': 4, 'allocation_ratio': 2.0},
    'MEMORY_MB': {'total': 8704, 'reserved': 512, 'allocation_ratio': 1.0},
    'DISK_GB': {'total': 100, 'allocation_ratio': 1.0},
}
FLAVORS = {'small': ({'vcpus': 1, 'ram_mb': 1024, 'disk_gb': 10}, 1),
           'medium': ({'vcpus': 2, 'ram_mb': 2048, 'disk_gb': 20}, 2)}
CLEANUP_INTERVAL = 1.0


@dataclass
class Drill:
    placement_url: str
    rabbit_url: str
    workdir: pathlib.Path
    hosts: int = 30
    callers: int = 8
    seconds: float = 75.0
    worker_kills: int = 10
    service_kills: int = 0
    workers: int = 2
    call_timeout: float = 25.0
    seed: int = 1
    #: False: the service runs without its claims journal (the baseline)
    journal: bool = True
    #: The topic the service consumes (a fresh one when None) and the caller's
    #: boot: (flavor as boot_spec's arguments, instance uuids) -> per instance, the
    #: allocations its Selection announced; raises NoValidHost when refused. None:
    #: this project's own client (tests/interop passes Nova's).
    topic: str | None = None
    boot: Callable[[dict[str, int], list[str]], list[dict[str, dict[str, int]]]] | None = None
    #: The Python the service runs with (tests/interop: the service's own virtualenv).
    service_python: str = sys.executable
    #: The service logs at DEBUG: what tells a reply the caller missed from a leak,
    #: and what a failed drill met.
    debug: bool = True


@dataclass
class Request:
    instances: list[str]
    units: int
    answered: list[dict[str, dict[str, int]]] | None = None   # per instance, as told
    refused: bool = False
    error: str | None = None
    detail: str = ''
    took: float = 0.0      # seconds the caller waited


@dataclass
class Report:
    requests: int = 0
    answered: int = 0
    refused: int = 0
    failed: int = 0                       # the caller saw a timeout or another error
    failed_instances: int = 0
    failed_instances_holding: int = 0     # must be 0
    #: instances of failed requests that hold their claims because the service
    #: answered for them: the reply the caller missed (counted apart, not a leak
    #: the journal is meant to prevent)
    replies_the_caller_missed: int = 0
    refused_instances_holding: int = 0    # must be 0
    unknown_consumers: int = 0            # must be 0
    answered_instances_checked: int = 0
    answered_instances_wrong: int = 0     # must be 0
    providers_over_capacity: int = 0      # must be 0
    worker_kills: int = 0
    service_kills: int = 0
    deleted_by_users: int = 0
    claims_given_back: int = 0            # from the services' logs
    claims_left_alone: int = 0
    longest_restart_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    #: what the first few errors said (a caller's library may fail in ways of its own)
    error_samples: list[str] = field(default_factory=list)
    #: the instances of failed requests that hold allocations, and how long their
    #: callers waited (what to look for in the services' logs when the drill fails)
    failed_holding: dict[str, float] = field(default_factory=dict)
    #: the services' log lines about them, and about the requests that name them
    failed_holding_log: list[str] = field(default_factory=list)

    def holds(self) -> bool:
        return not (self.failed_instances_holding or self.refused_instances_holding
                    or self.unknown_consumers or self.answered_instances_wrong
                    or self.providers_over_capacity)


class Service:
    """``scheduler-service`` in a session of its own; every start logs to its own file."""

    def __init__(self, config: pathlib.Path, workers: int, python: str = sys.executable):
        self.config = config
        self.worker_count = workers
        self.python = python
        self.starts = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.logs: list[pathlib.Path] = []

    def start(self) -> float:
        """Start it and wait until every worker serves; returns how long that took."""
        began = time.monotonic()
        self.starts += 1
        log = self.config.with_name(f'{self.config.stem}-{self.starts}.log')
        self.logs.append(log)
        with log.open('wb') as out:
            self.proc = subprocess.Popen(
                [self.python, '-m', 'scheduler.cmd.service', '--config-file',
                 str(self.config)], cwd=REPO, start_new_session=True,
                env={**os.environ, 'PYTHONPATH': str(REPO)}, stdout=out,
                stderr=subprocess.STDOUT)
        wait_for(self.all_serving, f'{log.name}: every worker serving', timeout=120)
        return time.monotonic() - began

    def all_serving(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f'scheduler-service exited:\n{self.output()[-3000:]}')
        pids = self.workers()
        log = self.logs[-1].read_text(errors='replace')
        return len(pids) == self.worker_count and all(f'worker {pid} serving' in log
                                                      for pid in pids)

    def workers(self) -> set[int]:
        assert self.proc is not None
        # One worker: the service serves in its own process, without a supervisor.
        return {self.proc.pid} if self.worker_count == 1 else child_pids(self.proc.pid)

    def kill_worker(self, rng: random.Random) -> int:
        pid = rng.choice(sorted(self.workers()))
        os.kill(pid, signal.SIGKILL)
        return pid

    def kill_all(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        # The workers die with the group; wait until none is left holding a journal.
        wait_for(lambda: not _group_alive(self.proc.pid if self.proc else 0),
                 'the killed service\'s processes to be gone', timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def output(self) -> str:
        return ''.join(log.read_text(errors='replace') for log in self.logs)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def seed_cloud(client: PlacementClient, hosts: int) -> list[str]:
    seed.delete_all(client)
    return [seed.create_provider(client, name=f'chaos-cn{n}',
                                 uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, f'chaos-cn{n}')),
                                 inventories=HOST_INVENTORY)
            for n in range(hosts)]


def run(drill: Drill) -> Report:
    rng = random.Random(drill.seed)
    placement = PlacementClient.from_conf(make_placement_conf(drill.placement_url))
    providers = seed_cloud(placement, drill.hosts)
    capacity_units = drill.hosts * 8
    topic = drill.topic or f'scheduler-chaos-{uuid.uuid4().hex[:8]}'
    config = write_config(
        drill.workdir / 'chaos.conf', placement_url=drill.placement_url,
        transport_url=drill.rabbit_url, topic=topic, workers=drill.workers,
        host='scheduler-chaos', filters='ComputeFilter',
        weighers='RAMWeigher,CPUWeigher,DiskWeigher',
        extra=(f'[scheduler]\ncleanup_retry_interval = {CLEANUP_INTERVAL}\n'
               'claim_retry_delay = 0.02\n[placement]\nread_timeout = 10\n'
               f'[DEFAULT]\ngraceful_shutdown_timeout = 5\ndebug = {drill.debug}\n'
               + ('' if drill.journal else '[claims_journal]\ndirectory =\n')))
    service = Service(config, drill.workers, drill.service_python)
    report = Report()
    requests: list[Request] = []
    live: list[tuple[str, int]] = []     # answered, undeleted instances and their units
    deleted: set[str] = set()
    lock = threading.Lock()
    # This project's client only when the caller's is not given: tests/interop
    # brings Nova's, in a process with the libraries of Nova's release, where the
    # scheduler's own request flow need not even import.
    transport = None
    if drill.boot is None:
        from scheduler.rpc.transport import get_transport
        from tests.fixtures.service import conf_for
        transport = get_transport(conf_for(drill.placement_url, drill.rabbit_url))
    restarts: list[float] = []
    try:
        service.start()
        deadline = time.monotonic() + drill.seconds

        def our_boot(flavor: dict[str, int], instances: list[str]
                     ) -> list[dict[str, dict[str, int]]]:
            from scheduler.rpc.client import SchedulerClient
            from tests.builders import boot_spec, select

            client = SchedulerClient(transport, topic=topic, timeout=drill.call_timeout)
            selections = select(client, boot_spec(num_instances=len(instances), **flavor),
                                instances)
            return [expected_allocations(s[0].allocation_request) for s in selections]

        boot = drill.boot or our_boot

        def caller(n: int) -> None:
            mine = random.Random(drill.seed * 1000 + n)
            while time.monotonic() < deadline:
                flavor = mine.choice(['small', 'small', 'medium'])
                count = mine.choice([1, 1, 2, 3])
                args, units = FLAVORS[flavor]
                request = Request([str(uuid.uuid4()) for _ in range(count)], units * count)
                began = time.monotonic()
                try:
                    request.answered = boot(args, request.instances)
                except exc.NoValidHost:
                    request.refused = True
                except Exception as e:  # noqa: BLE001 - what the caller saw is the result
                    request.error = type(e).__name__
                    request.detail = str(e)[:300]
                request.took = round(time.monotonic() - began, 2)
                with lock:
                    requests.append(request)
                    if request.answered is not None:
                        live.extend((i, units) for i in request.instances)
                    # Users delete servers: the cloud stays near full, not full.
                    while sum(u for _, u in live) > 0.85 * capacity_units:
                        gone, _ = live.pop(mine.randrange(len(live)))
                        deleted.add(gone)
                        placement.delete_allocations(gone)

        threads = [threading.Thread(target=caller, args=(n,), daemon=True)
                   for n in range(drill.callers)]
        for t in threads:
            t.start()
        kills = (['worker'] * drill.worker_kills + ['service'] * drill.service_kills)
        rng.shuffle(kills)
        gap = drill.seconds / (len(kills) + 1)
        for kind in kills:
            time.sleep(gap * rng.uniform(0.6, 1.4))
            if kind == 'worker':
                service.kill_worker(rng)
                report.worker_kills += 1
            else:
                service.kill_all()
                report.service_kills += 1
                restarts.append(service.start())
        for t in threads:
            t.join(drill.seconds + drill.call_timeout + 60)
        # The service back with every worker, then one clean-up interval.
        wait_for(service.all_serving, 'every worker serving after the drill', timeout=120)
        time.sleep(CLEANUP_INTERVAL + 1.0)
        text = service.output()
        _audit(report, placement, providers, requests, deleted, answered_for(text))
        report.failed_holding_log = _lines_about(text, list(report.failed_holding))
        report.claims_given_back = text.count('gave back the claim of')
        report.claims_left_alone = text.count('left the allocations of')
        report.longest_restart_s = round(max(restarts, default=0.0), 1)
        report.deleted_by_users = len(deleted)
        return report
    finally:
        if transport is not None:
            transport.cleanup()
        service.stop()


def _lines_about(text: str, instances: list[str], most: int = 60) -> list[str]:
    lines = text.splitlines()
    named = [line for line in lines if any(i in line for i in instances)]
    requests = {word for line in named for word in line.split() if word.startswith('req-')}
    return [line for line in lines
            if any(i in line for i in instances) or any(r in line for r in requests)][:most]


REPLYING = re.compile(r"replying: the claims of (.+) are the caller's from now on")


def answered_for(text: str) -> set[str]:
    """The consumers the service's log says it answered for (scheduler/rpc/server.py)."""
    return {consumer for match in REPLYING.finditer(text)
            for consumer in match.group(1).split(', ')}


def _audit(report: Report, placement: PlacementClient, providers: list[str],
           requests: list[Request], deleted: set[str], answered: set[str]) -> None:
    held = read_held(placement, providers)
    known: set[str] = set()
    report.requests = len(requests)
    for request in requests:
        known.update(request.instances)
        if request.answered is not None:
            report.answered += 1
            for instance, told in zip(request.instances, request.answered, strict=True):
                if instance in deleted:
                    continue
                report.answered_instances_checked += 1
                if held.get(instance) != told:
                    report.answered_instances_wrong += 1
        elif request.refused:
            report.refused += 1
            report.refused_instances_holding += sum(i in held for i in request.instances)
        else:
            report.failed += 1
            report.errors[request.error or '?'] = report.errors.get(request.error or '?', 0) + 1
            if request.error != 'MessagingTimeout' and len(report.error_samples) < 3:
                report.error_samples.append(f'{request.error}: {request.detail}')
            report.failed_instances += len(request.instances)
            holding = [i for i in request.instances if i in held and i not in answered]
            report.replies_the_caller_missed += sum(i in held and i in answered
                                                    for i in request.instances)
            report.failed_instances_holding += len(holding)
            report.failed_holding.update(dict.fromkeys(holding, request.took))
    report.unknown_consumers = len(set(held) - known)
    inventories, usages = read_capacity(placement, providers)
    report.providers_over_capacity = len(over_capacity(inventories, usages))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--hosts', type=int, default=30)
    parser.add_argument('--callers', type=int, default=8)
    parser.add_argument('--seconds', type=float, default=75.0)
    parser.add_argument('--worker-kills', type=int, default=10)
    parser.add_argument('--service-kills', type=int, default=3)
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--call-timeout', type=float, default=25.0)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--no-journal', action='store_true',
                        help='run the service without its claims journal (the baseline)')
    parser.add_argument('--rabbit-url', default='rabbit://guest:guest@127.0.0.1:5672/')
    args = parser.parse_args(argv)
    from tests.fixtures.postgres_placement import start_postgres_placement

    with tempfile.TemporaryDirectory(prefix='scheduler-chaos-') as tmp:
        workdir = pathlib.Path(tmp)
        (workdir / 'placement').mkdir()
        server, connection = start_postgres_placement(workdir / 'placement',
                                                      database_prefix='placement_chaos')
        try:
            report = run(Drill(server.url, args.rabbit_url, workdir, hosts=args.hosts,
                               callers=args.callers, seconds=args.seconds,
                               worker_kills=args.worker_kills,
                               service_kills=args.service_kills, workers=args.workers,
                               call_timeout=args.call_timeout, seed=args.seed,
                               journal=not args.no_journal))
        finally:
            server.stop()
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{server.database}" WITH (FORCE)')
            connection.close()
    print(json.dumps(asdict(report), indent=2, sort_keys=True))
    return 0 if report.holds() else 1


if __name__ == '__main__':
    sys.exit(main())

