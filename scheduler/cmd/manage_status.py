"""``scheduler-manage status``: can this deployment serve, and if not, why?

One line per check, worst first wins the exit status (``EXIT_CODES``): 0 every
check passed, 1 at least one warning and no failure, 2 at least one failure
(or a configuration that cannot be read). The checks, in order:

``config``       what ``scheduler-service`` checks before it starts, without the
                 network: filters, weighers and request filters load, the
                 ``[placement]`` auth plugin loads.
``placement``    ``GET /``: Placement answers and offers microversion >= 1.36.
``credentials``  ``GET /resource_providers`` (authenticated; a call the service
                 itself makes): Placement accepts the ``[placement]`` credentials.
``catalog``      the hosts file parses as the service would parse it; hosts it
                 lists that Placement does not know, and ``last_seen_up`` values
                 older than ``service_down_time`` (ComputeFilter's "down").
``broker``       the message broker accepts the transport's credentials; on
                 RabbitMQ, how many consumers the scheduler queues have.
``workers``      ``ping`` (namespace ``baseapi``) answered on the topic and on
                 this host's server queue.

What a ping proves: Nova's ``ping`` answer names no process, so an answer
proves that *some* consumer of the queue took the call and replied, not which
one. On RabbitMQ the broker's consumer count of the ``scheduler`` queue is the
authoritative number of connected RPC servers (workers of every machine, plus a
nova-scheduler that still runs); the check sends as many sequential pings as
there are consumers, and RabbitMQ hands a queue's messages to its consumers in
turn, so a worker that holds its connection but no longer answers shows as a
ping without an answer. ``<topic>.<host>`` is consumed by the workers of one
machine only (``[DEFAULT] host``), which is how "this host runs its
``[scheduler] workers``" is checked. Other drivers give no consumer counts:
one ping each, and the line says so. The catalog that running workers hold
(fed by Nova's casts) is in their memory and not visible from here.
"""
from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import oslo_messaging as messaging
from oslo_config import cfg

from placement_client import exceptions as pexc
from placement_client.api import PlacementAPI
from placement_client.models import ResourceProvider
from scheduler import exceptions as exc

LOG = logging.getLogger(__name__)

OK = 'ok'
WARNING = 'warning'
FAILURE = 'failure'
SKIPPED = 'skipped'
EXIT_CODES = {OK: 0, SKIPPED: 0, WARNING: 1, FAILURE: 2}
EXIT_FAILURE = EXIT_CODES[FAILURE]

DEFAULT_TIMEOUT = 5.0
#: Pings per queue at most: enough for every worker of a few machines, bounded
#: so that a queue with many silent consumers cannot stall the command for long.
MAX_PINGS = 32
#: Host names quoted per finding; the count is always complete.
_NAMES_SHOWN = 5
_USERINFO_RE = re.compile(r'(//)[^/@\s]+@')

T = TypeVar('T')


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    summary: str
    details: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------- pure parts


def exit_code(checks: Sequence[Check]) -> int:
    return max((EXIT_CODES[c.status] for c in checks), default=0)


def overall(checks: Sequence[Check]) -> str:
    return {0: OK, 1: WARNING, 2: FAILURE}[exit_code(checks)]


def render_text(checks: Sequence[Check]) -> str:
    lines = [f'{c.status.upper():<8} {c.name:<12} {c.summary}' for c in checks]
    lines.append(f'status: {overall(checks)} (exit {exit_code(checks)})')
    return '\n'.join(lines)


def render_json(checks: Sequence[Check]) -> str:
    return json.dumps({'status': overall(checks), 'exit_code': exit_code(checks),
                       'checks': [asdict(c) for c in checks]}, indent=2, sort_keys=True)


def _names(names: Sequence[str]) -> str:
    shown = ', '.join(sorted(names)[:_NAMES_SHOWN])
    return shown + (f' and {len(names) - _NAMES_SHOWN} more' if len(names) > _NAMES_SHOWN else '')


def catalog_findings(content: Any, providers: Sequence[ResourceProvider] | None, *,
                     now: datetime.datetime, service_down_time: int) -> list[str]:
    """What makes a parsed hosts file stale, given Placement's providers (None: unknown).

    A listed node matches the root provider with its ``provider_uuid`` or, without
    one, the root provider named like it (the catalog's own matching rule).
    """
    findings = []
    if providers is not None:
        roots = [p for p in providers if p.uuid == p.root_provider_uuid]
        uuids = {p.uuid for p in roots}
        names = {p.name for p in roots}
        unknown = [h.nodename for h in content.hosts
                   if (h.provider_uuid not in uuids if h.provider_uuid
                       else h.nodename not in names)]
        if unknown:
            findings.append(f'{len(unknown)} listed host(s) match no Placement root provider '
                            f'(stale entries?): {_names(unknown)}')
    limit = datetime.timedelta(seconds=service_down_time)
    aged = [h.nodename for h in content.hosts
            if h.last_seen_up is not None and now - _aware(h.last_seen_up) > limit]
    if aged:
        findings.append(f'{len(aged)} host(s) have a last_seen_up older than '
                        f'service_down_time ({service_down_time} s), so ComputeFilter treats '
                        f'them as down: {_names(aged)}')
    return findings


def _aware(moment: datetime.datetime) -> datetime.datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


def workers_check(*, topic: str, host: str, expected_workers: int,
                  topic_consumers: int | None, topic_answered: int, topic_pings: int,
                  host_consumers: int | None, host_answered: int, host_pings: int) -> Check:
    """The ``workers`` line from consumer counts (None: the driver cannot tell) and pings."""
    details = {'topic': topic, 'topic_consumers': topic_consumers, 'topic_pings': topic_pings,
               'topic_answered': topic_answered, 'host': host,
               'host_consumers': host_consumers, 'host_pings': host_pings,
               'host_answered': host_answered, 'expected_workers': expected_workers}
    shared = (f'topic {topic}: ' + ('' if topic_consumers is None
                                    else f'{topic_consumers} consumer(s), ')
              + f'{topic_answered}/{topic_pings} ping(s) answered')
    local = (f'this host ({host}): ' + ('' if host_consumers is None
                                       else f'{host_consumers} consumer(s) for '
                                            f'[scheduler] workers = {expected_workers}, ')
             + f'{host_answered}/{host_pings} ping(s) answered')
    if topic_consumers == 0:
        return Check('workers', FAILURE, f'no scheduler consumes topic {topic}: calls from '
                     'nova-conductor will time out', details)
    if topic_answered == 0:
        return Check('workers', FAILURE, f'no worker answered: {shared}', details)
    problems = []
    if topic_answered < topic_pings:
        problems.append('a consumer of the topic does not answer (a hung worker, or not a '
                        'scheduler)')
    if host_consumers is not None and host_consumers != expected_workers:
        problems.append('more consumers than workers on this host (is nova-scheduler still '
                        'running here?)' if host_consumers > expected_workers
                        else 'fewer workers than configured consume on this host')
    elif host_answered < host_pings:
        problems.append('a worker of this host does not answer')
    if problems:
        return Check('workers', WARNING, f'{shared}; {local}: ' + '; '.join(problems), details)
    driver_note = '' if topic_consumers is not None else \
        ' (this driver gives no consumer counts: one ping per queue)'
    return Check('workers', OK, f'{shared}; {local}{driver_note}', details)


# ------------------------------------------------------------------------- the checks


def check_configuration(conf: cfg.ConfigOpts) -> tuple[Check, Any]:
    """What ``scheduler-service`` refuses to start with; no network. (check, PlacementClient)."""
    from scheduler import plugins
    from scheduler.conf.placement import load_client
    from scheduler.request.filters import load_request_filters

    try:
        filters = plugins.load_filters(conf)
        weighers = plugins.load_weighers(conf)
        request_filters = load_request_filters(conf.scheduler.request_filters)
        client = load_client(conf)
    except exc.ConfigurationError as e:
        return Check('config', FAILURE, f'the service would not start: {e}'), None
    return Check('config', OK, f'{len(filters)} filters, {len(weighers)} weighers, '
                 f'{len(request_filters)} request filters load; [placement] auth plugin '
                 f'{conf.placement.auth_type}',
                 {'filters': [type(f).__name__ for f in filters],
                  'weighers': [type(w).__name__ for w in weighers]}), client


def check_placement(client: PlacementAPI) -> Check:
    from placement_client.client import MIN_MICROVERSION

    try:
        version = client.negotiate()
    except pexc.PlacementVersionTooOld as e:
        return Check('placement', FAILURE, str(e))
    except pexc.PlacementAuthError as e:
        return Check('placement', FAILURE, f'the [placement] credentials were refused before '
                     f'Placement was reached: {e}')
    except pexc.PlacementError as e:
        return Check('placement', FAILURE, str(e))   # it names the outage and the attempts
    return Check('placement', OK, f'Placement answers; microversions up to {version} (this '
                 f'scheduler needs >= {MIN_MICROVERSION})',
                 {'max_microversion': version, 'min_microversion_needed': MIN_MICROVERSION})


def check_credentials(client: PlacementAPI) -> tuple[Check, list[ResourceProvider] | None]:
    try:
        providers = client.get_resource_providers()
    except pexc.PlacementAuthError as e:
        return Check('credentials', FAILURE, f'Placement refused the [placement] '
                     f'credentials: {e}'), None
    except pexc.PlacementError as e:
        return Check('credentials', FAILURE, f'GET /resource_providers failed: {e}'), None
    roots = sum(1 for p in providers if p.uuid == p.root_provider_uuid)
    return Check('credentials', OK, f'Placement accepts the [placement] credentials: '
                 f'GET /resource_providers lists {len(providers)} provider(s), {roots} '
                 f'root(s)', {'providers': len(providers), 'roots': roots}), providers


def check_catalog(conf: cfg.ConfigOpts, providers: Sequence[ResourceProvider] | None, *,
                  now: datetime.datetime | None = None) -> Check:
    from scheduler.catalog import read_hosts_file

    path = conf.scheduler.hosts_file
    if not path:
        return Check('catalog', OK, 'no [scheduler] hosts_file: compute nodes are the Placement '
                     'root providers by name, in the default cell; aggregates and instance '
                     'lists come from Nova\'s casts')
    try:
        content = read_hosts_file(path, default_cell_uuid=conf.scheduler.default_cell_uuid)
        modified = os.stat(path).st_mtime
    except (exc.CatalogError, OSError) as e:
        return Check('catalog', FAILURE, f'the service would not start: {e}')
    now = now or datetime.datetime.now(datetime.timezone.utc)
    age = max(0, int(now.timestamp() - modified))
    details = {'hosts_file': path, 'hosts': len(content.hosts),
               'aggregates': len(content.aggregates), 'cells': len(content.cells),
               'age_seconds': age, 'compared_with_placement': providers is not None}
    summary = (f'{path}: {len(content.hosts)} host(s), {len(content.aggregates)} '
               f'aggregate(s), {len(content.cells)} cell(s); changed {_age(age)} ago')
    if providers is None:
        summary += '; not compared with Placement (unavailable)'
    findings = catalog_findings(content, providers, now=now,
                                service_down_time=conf.service_down_time)
    details['findings'] = findings
    if findings:
        return Check('catalog', WARNING, summary + '; ' + '; '.join(findings), details)
    return Check('catalog', OK, summary, details)


def _age(seconds: int) -> str:
    for unit, size in (('d', 86400), ('h', 3600), ('min', 60)):
        if seconds >= size:
            return f'{seconds // size} {unit}'
    return f'{seconds} s'


# ----------------------------------------------------------------- broker and workers


class _Overdue(Exception):
    pass


def _bounded(fn: Callable[[], T], seconds: float) -> T:
    """``fn()`` in a daemon thread, or _Overdue after ``seconds``.

    oslo.messaging retries a lost broker connection for ever in some paths (the
    reply queue's); a health check must answer anyway.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box['value'] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            box['error'] = e

    thread = threading.Thread(target=run, name='status-check', daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise _Overdue(f'no answer within {seconds:g} s')
    if 'error' in box:
        raise box['error']
    return box['value']


def _redact(text: str) -> str:
    return _USERINFO_RE.sub(r'\1***@', text)


def _broker_place(conf: cfg.ConfigOpts) -> tuple[str, str]:
    """(driver, 'host:port,... vhost /x') of the transport URL, without credentials."""
    url = messaging.TransportURL.parse(conf, conf.transport_url)
    hosts = ','.join(f'{h.hostname}:{h.port}' if h.port else str(h.hostname)
                     for h in url.hosts) or '(default host)'
    return url.transport or '', f'{hosts} vhost /{url.virtual_host or ""}'


def _rabbit_queue_consumers(transport: messaging.Transport,
                            queues: Sequence[str]) -> dict[str, int]:
    """Consumers per queue (0 when the queue does not exist), from a passive declare.

    Uses the driver's own connection class (not a second kombu set-up) so that TLS,
    login method, failover hosts and vhost are exactly the service's; it is the only
    place that reaches into oslo.messaging's driver, which has no public API for this.
    """
    import amqp.exceptions
    from oslo_messaging._drivers import common as driver_common

    # retry=1: one reconnection attempt, not oslo.messaging's "for ever".
    connection = transport._driver._connection_pool.create(driver_common.PURPOSE_LISTEN,
                                                           retry=1)
    try:
        counts = {}
        for name in queues:
            channel = connection.connection.channel()
            try:
                counts[name] = channel.queue_declare(queue=name, passive=True).consumer_count
            except amqp.exceptions.NotFound:
                counts[name] = 0   # the broker closed this channel; the next gets a new one
            finally:
                try:
                    channel.close()
                except Exception:  # noqa: BLE001 - already closed by the broker
                    pass
        return counts
    finally:
        connection.close()


def _ping(transport: messaging.Transport, topic: str, server: str | None, count: int,
          timeout: float) -> int:
    """How many of ``count`` sequential pings were answered."""
    from scheduler.context import RequestContext
    from scheduler.rpc.serializer import ContextSerializer

    client = messaging.get_rpc_client(transport, messaging.Target(topic=topic, server=server,
                                                                   version='1.1'),
                                      serializer=ContextSerializer())
    prepared = client.prepare(namespace='baseapi', timeout=timeout, retry=0)
    answered = 0
    for i in range(count):
        try:
            prepared.call(RequestContext(), 'ping', arg=f'scheduler-manage status {i + 1}')
        except messaging.MessagingTimeout:
            continue
        answered += 1
    return answered


def check_broker_and_workers(conf: cfg.ConfigOpts, *, host: str, timeout: float,
                             transport: messaging.Transport | None = None) -> list[Check]:
    from scheduler.rpc.transport import get_transport

    topic = conf.scheduler.rpc_topic
    expected = conf.scheduler.workers or 1
    try:
        driver, place = _broker_place(conf)
        own = transport is None
        transport = transport or get_transport(conf)
    except (messaging.InvalidTransportURL, messaging.DriverLoadFailure) as e:
        return [Check('broker', FAILURE, f'[DEFAULT] transport_url is not usable: '
                      f'{_redact(str(e))}'),
                Check('workers', SKIPPED, 'no broker')]
    try:
        consumers: dict[str, int] | None = None
        if driver == 'rabbit':
            try:
                consumers = _bounded(lambda: _rabbit_queue_consumers(
                    transport, [topic, f'{topic}.{host}']), timeout + 5)
            except Exception as e:  # noqa: BLE001 - any broker failure is the finding
                return [Check('broker', FAILURE, f'{driver} at {place}: '
                              f'{type(e).__name__}: {_redact(str(e))}'),
                        Check('workers', SKIPPED, 'no broker')]
            broker = Check('broker', OK, f'{driver} at {place} accepts the transport\'s '
                           f'credentials', {'driver': driver, 'where': place})
        elif driver == 'fake':
            broker = Check('broker', OK, 'fake:// (in-process, for tests): nothing to reach',
                           {'driver': driver})
        else:
            broker = Check('broker', SKIPPED, f'{driver} at {place}: reachability is checked '
                           'only through the pings', {'driver': driver, 'where': place})
        topic_consumers = consumers[topic] if consumers is not None else None
        host_consumers = consumers[f'{topic}.{host}'] if consumers is not None else None
        topic_pings = min(MAX_PINGS, 1 if topic_consumers is None else topic_consumers)
        host_pings = min(MAX_PINGS, 1 if host_consumers is None else host_consumers)
        try:
            topic_answered = _bounded(lambda: _ping(transport, topic, None, topic_pings,
                                                    timeout), (timeout + 1) * topic_pings + 5)
            host_answered = _bounded(lambda: _ping(transport, topic, host, host_pings,
                                                   timeout), (timeout + 1) * host_pings + 5)
        except Exception as e:  # noqa: BLE001 - the broker went away while pinging
            own = False   # a call may still hang inside the transport: do not wait on it
            return [broker, Check('workers', FAILURE, f'pinging failed: {type(e).__name__}: '
                                  f'{_redact(str(e))}')]
        return [broker, workers_check(
            topic=topic, host=host, expected_workers=expected, topic_consumers=topic_consumers,
            topic_answered=topic_answered, topic_pings=topic_pings,
            host_consumers=host_consumers, host_answered=host_answered,
            host_pings=host_pings)]
    finally:
        if own:
            transport.cleanup()


def run_checks(conf: cfg.ConfigOpts, *, host: str | None = None,
               timeout: float = DEFAULT_TIMEOUT,
               transport: messaging.Transport | None = None) -> list[Check]:
    config, client = check_configuration(conf)
    checks = [config]
    providers = None
    if client is None:
        checks += [Check('placement', SKIPPED, 'no usable [placement] configuration'),
                   Check('credentials', SKIPPED, 'no usable [placement] configuration')]
    else:
        checks.append(check_placement(client))
        if checks[-1].status == OK:
            credentials, providers = check_credentials(client)
            checks.append(credentials)
        else:
            checks.append(Check('credentials', SKIPPED, 'Placement not usable'))
    checks.append(check_catalog(conf, providers))
    checks += check_broker_and_workers(conf, host=host or conf.host, timeout=timeout,
                                       transport=transport)
    return checks


# ------------------------------------------------------------------------ command line


def add_parser(commands: Any) -> None:
    status = commands.add_parser(
        'status', help='check Placement, credentials, broker, workers and the host catalog',
        description='Check, one line each, what this scheduler needs to serve: the '
                    'configuration loads, Placement answers and is new enough, it accepts '
                    'the [placement] credentials, the hosts file parses and matches '
                    'Placement, the broker is reachable and workers answer ping. Exit status: '
                    '0 all checks passed, 1 warnings only, 2 at least one failure (or an '
                    'unreadable configuration).')
    status.add_argument('--config-file', metavar='PATH', action='append', default=[],
                        help='configuration file (repeatable; default: oslo.config\'s search '
                             'for scheduler.conf, e.g. /etc/scheduler/scheduler.conf)')
    status.add_argument('--config-dir', metavar='DIR', action='append', default=[],
                        help='directory of *.conf files (repeatable)')
    status.add_argument('--host', help='the machine whose workers to count (its '
                                       '[DEFAULT] host; default: this configuration\'s)')
    status.add_argument('--timeout', type=float, default=DEFAULT_TIMEOUT,
                        help='seconds to wait for each ping and for the broker '
                             '(default: %(default)s)')
    status.add_argument('--json', action='store_true', help='print the checks as JSON')
    status.add_argument('--verbose', '-v', action='store_true',
                        help='log what the checks do to stderr')
    status.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from scheduler import conf as scheduler_conf

    if args.verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    elif not logging.getLogger().handlers:
        # The checks report every failure themselves; library log lines would repeat them.
        logging.getLogger().addHandler(logging.NullHandler())
    argv = [a for path in args.config_file for a in ('--config-file', path)]
    argv += [a for path in args.config_dir for a in ('--config-dir', path)]
    try:
        conf = scheduler_conf.parse_args(argv)
    except (cfg.Error, OSError) as e:
        print(f'scheduler-manage status: cannot read the configuration: {e}', file=sys.stderr)
        return EXIT_FAILURE
    checks = run_checks(conf, host=args.host, timeout=args.timeout)
    print(render_json(checks) if args.json else render_text(checks))
    return exit_code(checks)
