"""``scheduler-manage simulate``: the whole service on an embedded default.

A real Placement (in-process, sqlite), a synthetic cloud seeded into it, the
real scheduler service on oslo.messaging's in-process ``fake://`` transport,
and a stream of boot requests sent through the real RPC client from a few
client threads. At the end the usage is read back from Placement, so the
summary reports what Placement holds, not what the scheduler believes.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from scheduler import exceptions as exc
from scheduler.objects.spec import Aggregate
from scheduler.simulate import capacity, report, snapshot
from scheduler.simulate.cloud import CloudSpec, SyntheticCloud, generate_cloud, seed_cloud
from scheduler.simulate.workload import BootRequest, WorkloadSpec, generate_workload
from scheduler.simulate.workload_file import WorkloadFile

LOG = logging.getLogger(__name__)

TRANSPORT_URL = 'fake://'
#: The noauth2 token of the embedded Placement that carries the admin role.
ADMIN_TOKEN = 'admin'
RPC_TIMEOUT = 120.0
_REASON_LENGTH = 300
_LOG_FORMAT = '%(asctime)s %(levelname)s %(name)s: %(message)s'
# Third-party loggers that are noise at INFO in a simulation.
_QUIET_LOGGERS = ('oslo_messaging', 'keystoneauth', 'stevedore', 'urllib3')
# Placement warns about every claim that lost a race ("Over capacity for ..."); the
# scheduler retries those and the summary counts what matters.
_PLACEMENT_LOGGER = 'placement'


def build_conf(config_file: str | None = None) -> cfg.ConfigOpts:
    """Every option of the service, read from ``config_file`` when given (and only then:
    a simulation must not pick up /etc/scheduler/scheduler.conf), on the in-process
    transport. Raises oslo.config's errors for a missing or invalid file."""
    from scheduler import conf as scheduler_conf

    conf = cfg.ConfigOpts()
    scheduler_conf.register_opts(conf)
    # The admin_token plugin's options (token, endpoint) exist only once auth_type is
    # known; registering them first lets them be set before the client loads them.
    conf.register_opts(ks_loading.get_auth_plugin_conf_options('admin_token'),
                       group='placement')
    args = ['--config-file', config_file] if config_file else []
    conf(args, project=scheduler_conf.PROJECT, default_config_files=[],
         default_config_dirs=[], use_env=False)
    conf.set_override('transport_url', TRANSPORT_URL)
    # A journal of its own: an operator's file must not point a simulation at the
    # running service's journal (it is held), and the simulation's claims are in its
    # own embedded Placement.
    scratch = tempfile.mkdtemp(prefix='scheduler-simulate-')
    atexit.register(shutil.rmtree, scratch, True)
    conf.set_override('directory', scratch, group='claims_journal')
    _check_values(conf)
    return conf


def _check_values(conf: cfg.ConfigOpts) -> None:
    """Read every option of the service once: oslo.config converts values lazily, and a
    bad value should stop the simulation before Placement and the service start."""
    from scheduler.conf import opts as conf_opts

    for group, options in conf_opts.list_opts():
        name = group.name if isinstance(group, cfg.OptGroup) else group
        section = conf if name in (None, 'DEFAULT') else conf[name]
        for opt in options:
            try:
                getattr(section, opt.dest)
            except cfg.NoSuchOptError:
                # Options of auth plugins other than the one in use are not registered.
                continue


def use_placement(conf: cfg.ConfigOpts, placement_url: str) -> None:
    """Point ``[placement]`` at the embedded Placement, whatever the file said."""
    for name, value in (('auth_type', 'admin_token'), ('token', ADMIN_TOKEN),
                        ('endpoint', placement_url), ('endpoint_override', placement_url)):
        conf.set_override(name, value, group='placement')


class _NoiseFilter(logging.Filter):
    """Below DEBUG, keep chatty libraries to what matters: warnings from the messaging
    and HTTP libraries, errors from Placement."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        if name == _PLACEMENT_LOGGER or name.startswith(_PLACEMENT_LOGGER + '.'):
            return record.levelno >= logging.ERROR
        if any(name == n or name.startswith(n + '.') for n in _QUIET_LOGGERS):
            return record.levelno >= logging.WARNING
        return True


@contextlib.contextmanager
def _stderr_logging(level: str | int, stream: IO[str]) -> Iterator[None]:
    """Log to ``stream`` at ``level`` for the run; the previous set-up comes back after."""
    root = logging.getLogger()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(_LOG_FORMAT))
    handler.setLevel(level)
    if logging.getLevelName(handler.level) != 'DEBUG':
        handler.addFilter(_NoiseFilter())
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(level)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def _send(client: Any, request: BootRequest) -> report.Outcome:
    """One select_destinations call; every failure becomes an outcome, none escapes."""
    spec, uuids = request.to_rpc()
    start = time.monotonic()
    try:
        result = client.select_destinations(request.context(), spec, uuids,
                                            return_objects=True, return_alternates=True)
    except exc.NoValidHost as e:
        return report.Outcome(request.index, request.kind, request.num_instances,
                              time.monotonic() - start, error='NoValidHost', reason=e.reason)
    except Exception as e:  # noqa: BLE001 - a failed call is a result of the simulation
        reason = getattr(e, 'reason', None) or str(e)
        return report.Outcome(request.index, request.kind, request.num_instances,
                              time.monotonic() - start, error=type(e).__name__,
                              reason=reason[:_REASON_LENGTH])
    latency = time.monotonic() - start
    if len(result) != len(uuids) or not all(result):
        # Nova's contract (nova/scheduler/manager.py, _get_alternate_hosts): one
        # non-empty list per instance, in order.
        return report.Outcome(request.index, request.kind, request.num_instances, latency,
                              error='MalformedReply',
                              reason=f'{len(result)} selection lists for {len(uuids)} '
                                     f'instances, {sum(1 for r in result if not r)} empty')
    placed = tuple(
        report.PlacedInstance(instance_uuid=uuid, host=selections[0].service_host,
                              compute_node_uuid=selections[0].compute_node_uuid,
                              alternates=len(selections) - 1)
        for uuid, selections in zip(uuids, result, strict=True))
    return report.Outcome(request.index, request.kind, request.num_instances, latency,
                          placed=placed)


def run_workload(client: Any, requests: Sequence[BootRequest], concurrency: int,
                 collector: report.Collector) -> None:
    """Send every request from ``concurrency`` client threads, as conductors would."""
    with ThreadPoolExecutor(max_workers=concurrency,
                            thread_name_prefix='sim-client') as pool:
        for outcome in pool.map(lambda r: _send(client, r), requests):
            collector.add(outcome)


def read_usage(client: Any) -> list[report.ProviderUsage]:
    """Capacity, usage and consumers of every root provider, as Placement has them."""
    from placement_client.client import MIN_MICROVERSION, error_from_response

    def get(url: str, params: Any = None) -> dict[str, Any]:
        response = client.request('GET', url, microversion=MIN_MICROVERSION, params=params)
        if response.status_code != 200:
            raise error_from_response(response, method='GET', url=url)
        return response.json()

    disabled = {rp['uuid'] for rp in get('/resource_providers',
                                         params={'required': 'COMPUTE_STATUS_DISABLED'})[
                                             'resource_providers']}
    usages = []
    for rp in client.get_resource_providers():
        if rp.parent_provider_uuid is not None:
            continue
        inventories = get(f'/resource_providers/{rp.uuid}/inventories')['inventories']
        allocations = get(f'/resource_providers/{rp.uuid}/allocations')['allocations']
        capacity = {rc: int((inv['total'] - inv['reserved']) * inv['allocation_ratio'])
                    for rc, inv in inventories.items()}
        used: dict[str, int] = {}
        for consumer in allocations.values():
            for rc, amount in consumer['resources'].items():
                used[rc] = used.get(rc, 0) + amount
        usages.append(report.ProviderUsage(uuid=rp.uuid, name=rp.name, capacity=capacity,
                                           used=used, consumers=frozenset(allocations),
                                           disabled=rp.uuid in disabled))
    return sorted(usages, key=lambda u: u.name)


def _say(stream: IO[str], text: str) -> None:
    stream.write(text + '\n')
    stream.flush()


@dataclass(frozen=True)
class CloudSource:
    """Where the simulated cloud comes from: the synthetic cloud (neither field), a saved
    snapshot file, or a read-only snapshot of the Placement in the configuration."""

    snapshot_path: str | None = None
    from_placement: bool = False

    def __post_init__(self) -> None:
        if self.snapshot_path and self.from_placement:
            raise ValueError('a snapshot file or the configured Placement, not both')


def run_simulation(hosts: int = 100, requests: int = 200, seed: int = 42, concurrency: int = 4,
                   json_path: str | None = None, log_level: str | int = 'WARNING', *,
                   config_file: str | None = None, out: IO[str] | None = None,
                   err: IO[str] | None = None, source: CloudSource | None = None,
                   workload_file: WorkloadFile | None = None,
                   save_snapshot: str | None = None, chart: bool = False) -> report.Summary:
    """Run one simulation; prints progress to ``err`` and the summary to ``out``.

    With ``workload_file`` the file's entries follow the generated stream (``requests``
    may be 0), one boot at a time, and the summary gains the capacity answer."""
    out = out or sys.stdout
    err = err or sys.stderr
    if concurrency < 1:
        raise ValueError(f'concurrency must be at least 1, not {concurrency}')
    source = source or CloudSource()
    with _stderr_logging(log_level, err):
        # Inside: oslo.log's option registration puts a bare stderr handler on a root
        # logger that has none, and every line would then show twice. Configuration
        # errors still surface before anything is started.
        conf = build_conf(config_file)
        cloud: SyntheticCloud | None = None
        snap: snapshot.CloudSnapshot | None = None
        if source.from_placement:
            snap = _snapshot_of_configured_placement(conf, err)
        elif source.snapshot_path:
            snap = snapshot.load(source.snapshot_path)
            _say(err, f'snapshot {source.snapshot_path}: {len(snap.providers)} providers')
        else:
            cloud = generate_cloud(CloudSpec(hosts=hosts, seed=seed))
        zones = (cloud.availability_zones if cloud is not None else
                 tuple(a.availability_zone for a in snap.nova_aggregates  # type: ignore[union-attr]
                       if a.availability_zone))
        workload = generate_workload(WorkloadSpec(requests=requests, seed=seed,
                                                  availability_zones=zones))
        summary, capacity_report = _run(
            conf, cloud, snap, workload, workload_file, seed=seed, concurrency=concurrency,
            err=err, save_snapshot=save_snapshot)
    _say(out, report.render(summary))
    if capacity_report is not None:
        _say(out, capacity.render(capacity_report))
    if chart or capacity_report is not None:
        _say(out, report.render_chart(summary.utilisation))
    if json_path:
        body = report.to_json(summary)
        if capacity_report is not None:
            body['capacity'] = capacity.to_json(capacity_report)
        with open(json_path, 'w', encoding='utf-8') as f:
            json.dump(body, f, indent=2, sort_keys=True)
            f.write('\n')
        _say(err, f'summary written to {json_path}')
    return summary


def _snapshot_of_configured_placement(conf: cfg.ConfigOpts,
                                      err: IO[str]) -> snapshot.CloudSnapshot:
    """Read-only: the client built from the file's [placement] sends GET requests only."""
    from placement_client.exceptions import PlacementError
    from scheduler.conf.placement import load_client

    try:
        snap = snapshot.take_snapshot(load_client(conf),
                                      source='placement of --config-file')
    except PlacementError as e:
        raise snapshot.SnapshotError(f'cannot read the configured Placement: {e}') from None
    _say(err, f'snapshot of the configured Placement: {len(snap.providers)} providers, '
              f'{sum(1 for p in snap.providers if p.usages)} with usage')
    return snap


def _populate(seeder: Any, cloud: SyntheticCloud | None, snap: snapshot.CloudSnapshot | None,
              err: IO[str]) -> tuple[tuple[Aggregate, ...], int, int]:
    """Write the cloud into the embedded Placement; (Nova aggregates, hosts, disabled)."""
    if cloud is not None:
        seed_cloud(seeder, cloud)
        disabled = sum(h.disabled for h in cloud.hosts)
        _say(err, f'seeded {len(cloud.hosts)} hosts, {len(cloud.aggregates)} aggregates '
                  f'({len(cloud.availability_zones)} availability zones), {disabled} disabled')
        return cloud.aggregates, len(cloud.hosts), disabled
    assert snap is not None
    snapshot.replay(seeder, snap)
    roots = snap.roots
    disabled = sum(1 for p in roots if 'COMPUTE_STATUS_DISABLED' in p.traits)
    _say(err, f'replayed {len(snap.providers)} providers ({len(roots)} hosts, '
              f'{disabled} disabled) from the snapshot')
    return snap.nova_aggregates, len(roots), disabled


def _run(conf: cfg.ConfigOpts, cloud: SyntheticCloud | None,
         snap: snapshot.CloudSnapshot | None, workload: list[BootRequest],
         workload_file: WorkloadFile | None, *, seed: int, concurrency: int, err: IO[str],
         save_snapshot: str | None = None
         ) -> tuple[report.Summary, capacity.CapacityReport | None]:
    # Imported here: the embedded Placement and the service pull in heavy modules
    # that `scheduler-manage --help` must not pay for.
    from scheduler.conf.placement import load_client
    from scheduler.rpc.client import SchedulerClient
    from scheduler.rpc.transport import get_transport
    from scheduler.service import SchedulerService, build_catalog
    from scheduler.simulate.embedded_placement import EmbeddedPlacement

    phases: dict[str, float] = {}
    clock = time.monotonic
    t = clock()
    placement = EmbeddedPlacement().start()
    capacity_report = None
    capacity_collector = report.Collector(None)
    try:
        # One embedded database per process: start from an empty cloud.
        placement.wipe()
        phases['placement_start'] = clock() - t
        _say(err, f'embedded Placement on {placement.url} ({phases["placement_start"]:.1f} s)')

        use_placement(conf, placement.url)
        seeder = load_client(conf)
        t = clock()
        aggregates, host_count, disabled = _populate(seeder, cloud, snap, err)
        phases['seed'] = clock() - t
        if save_snapshot:
            saved = snap or snapshot.take_snapshot(
                seeder, source=f'synthetic cloud, seed {seed}', nova_aggregates=aggregates)
            snapshot.save(saved, save_snapshot)
            _say(err, f'snapshot written to {save_snapshot}')

        t = clock()
        catalog = build_catalog(conf)
        catalog.update_aggregates(list(aggregates))
        transport = get_transport(conf, url=TRANSPORT_URL)
        service = SchedulerService(conf, transport=transport, catalog=catalog)
        service.start()
        phases['service_start'] = clock() - t
        try:
            client = SchedulerClient(transport, topic=conf.scheduler.rpc_topic,
                                     timeout=RPC_TIMEOUT)
            t = clock()
            collector = report.Collector(report.Progress(len(workload), err))
            if workload or workload_file is None:
                instances = sum(r.num_instances for r in workload)
                _say(err, f'sending {len(workload)} requests ({instances} instances) '
                          f'from {concurrency} client threads')
                run_workload(client, workload, concurrency, collector)
            if workload_file is not None:
                _say(err, 'sending the workload file one boot at a time')
                # After the generated stream (if any): its indexes continue the stream's.

                def send(request: BootRequest) -> report.Outcome:
                    outcome = _send(client, request)
                    capacity_collector.add(outcome)
                    return outcome

                capacity_report = capacity.run_entries(workload_file, send,
                                                       catalog.availability_zone,
                                                       first_index=len(workload))
            phases['requests'] = clock() - t
        finally:
            service.stop()
            service.wait()
            transport.cleanup()

        t = clock()
        usages = read_usage(seeder)
        phases['readback'] = clock() - t
    finally:
        placement.stop()

    if snap is not None:
        # The snapshot's usage rides on one consumer per provider: not an instance.
        baseline = snapshot.usage_consumers(snap)
        usages = [dataclasses.replace(u, consumers=u.consumers - baseline) for u in usages]
    outcomes = collector.outcomes + capacity_collector.outcomes
    scenario = report.Scenario(hosts=host_count, requests=len(outcomes), seed=seed,
                               concurrency=concurrency if workload else 1,
                               availability_zones=sum(1 for a in aggregates
                                                      if a.availability_zone),
                               disabled_hosts=disabled)
    summary = report.summarise(outcomes, usages, scenario=scenario,
                               wall_time_s=phases['requests'], phases=phases)
    if snap is not None:
        # A real cloud may already be over capacity (an inventory shrunk under its
        # usage); that is the cloud's state, not something the simulation did.
        before = {p.name for p in snap.providers
                  if any(n > p.capacity(rc) for rc, n in p.usages.items())}
        still = [n for n in summary.utilisation.over_capacity if n not in before]
        summary = dataclasses.replace(summary, utilisation=dataclasses.replace(
            summary.utilisation, over_capacity=still))
    return summary, capacity_report
