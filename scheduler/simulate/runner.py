"""``scheduler-manage simulate``: the whole service on an embedded default.

A real Placement (in-process, sqlite), a synthetic cloud seeded into it, the
real scheduler service on oslo.messaging's in-process ``fake://`` transport,
and a stream of boot requests sent through the real RPC client from a few
client threads. At the end the usage is read back from Placement, so the
summary reports what Placement holds, not what the scheduler believes.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from scheduler import exceptions as exc
from scheduler.simulate import report
from scheduler.simulate.cloud import CloudSpec, SyntheticCloud, generate_cloud, seed_cloud
from scheduler.simulate.workload import BootRequest, WorkloadSpec, generate_workload

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
        # The contract (reference 1.4): one non-empty list per instance, in order.
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


def run_simulation(hosts: int = 100, requests: int = 200, seed: int = 42, concurrency: int = 4,
                   json_path: str | None = None, log_level: str | int = 'WARNING', *,
                   config_file: str | None = None, out: IO[str] | None = None,
                   err: IO[str] | None = None) -> report.Summary:
    """Run one simulation; prints progress to ``err`` and the summary to ``out``."""
    out = out or sys.stdout
    err = err or sys.stderr
    if concurrency < 1:
        raise ValueError(f'concurrency must be at least 1, not {concurrency}')
    cloud = generate_cloud(CloudSpec(hosts=hosts, seed=seed))
    workload = generate_workload(WorkloadSpec(requests=requests, seed=seed,
                                              availability_zones=cloud.availability_zones))
    with _stderr_logging(log_level, err):
        # Inside: oslo.log's option registration puts a bare stderr handler on a root
        # logger that has none, and every line would then show twice. Configuration
        # errors still surface before anything is started.
        conf = build_conf(config_file)
        summary = _run(conf, cloud, workload, seed=seed, concurrency=concurrency, err=err)
    _say(out, report.render(summary))
    if json_path:
        report.write_json(summary, json_path)
        _say(err, f'summary written to {json_path}')
    return summary


def _run(conf: cfg.ConfigOpts, cloud: SyntheticCloud, workload: list[BootRequest], *,
         seed: int, concurrency: int, err: IO[str]) -> report.Summary:
    # Imported here: the embedded Placement and the service pull in heavy modules
    # that `scheduler-manage --help` must not pay for.
    from placement_client.client import PlacementClient
    from scheduler.catalog import HostCatalog
    from scheduler.rpc.client import SchedulerClient
    from scheduler.rpc.transport import get_transport
    from scheduler.service import SchedulerService
    from scheduler.simulate.embedded_placement import EmbeddedPlacement

    phases: dict[str, float] = {}
    clock = time.monotonic
    t = clock()
    placement = EmbeddedPlacement().start()
    try:
        # One embedded database per process: start from an empty cloud.
        placement.wipe()
        phases['placement_start'] = clock() - t
        _say(err, f'embedded Placement on {placement.url} ({phases["placement_start"]:.1f} s)')

        use_placement(conf, placement.url)
        seeder = PlacementClient.from_conf(conf)
        t = clock()
        seed_cloud(seeder, cloud)
        phases['seed'] = clock() - t
        zones = len(cloud.availability_zones)
        disabled = sum(h.disabled for h in cloud.hosts)
        _say(err, f'seeded {len(cloud.hosts)} hosts, {len(cloud.aggregates)} aggregates '
                  f'({zones} availability zones), {disabled} disabled '
                  f'({phases["seed"]:.1f} s)')

        t = clock()
        catalog = HostCatalog(default_cell_uuid=conf.scheduler.default_cell_uuid,
                              default_availability_zone=conf.default_availability_zone)
        catalog.update_aggregates(list(cloud.aggregates))
        transport = get_transport(conf, url=TRANSPORT_URL)
        service = SchedulerService(conf, transport=transport, catalog=catalog)
        service.start()
        phases['service_start'] = clock() - t
        try:
            client = SchedulerClient(transport, topic=conf.scheduler.rpc_topic,
                                     timeout=RPC_TIMEOUT)
            instances = sum(r.num_instances for r in workload)
            _say(err, f'sending {len(workload)} requests ({instances} instances) '
                      f'from {concurrency} client threads')
            collector = report.Collector(report.Progress(len(workload), err))
            t = clock()
            run_workload(client, workload, concurrency, collector)
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

    scenario = report.Scenario(hosts=len(cloud.hosts), requests=len(workload), seed=seed,
                               concurrency=concurrency,
                               availability_zones=len(cloud.availability_zones),
                               disabled_hosts=sum(h.disabled for h in cloud.hosts))
    return report.summarise(collector.outcomes, usages, scenario=scenario,
                            wall_time_s=phases['requests'], phases=phases)
