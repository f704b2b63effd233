"""The periodic sync of host data through Nova's compute API (``[nova]``).

:class:`NovaComputeReader` does the HTTP (one keystoneauth1 Adapter, bounded
timeouts, no retries: the next interval is the retry) and hands the JSON to
the pure translation in :mod:`scheduler.catalog.nova_api`. :class:`NovaSync`
runs it on its own thread and applies each complete snapshot to the catalog
in one step; calls never wait for it (they read whatever the catalog holds).
A failed read is logged and changes nothing: the last good data stays.

Nothing here logs request headers, bodies or credentials; error texts drop
``user:password@`` from URLs.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol, cast

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg

from scheduler.catalog import nova_api
from scheduler.catalog.catalog import HostCatalog
from scheduler.catalog.cell_db import cell_readers_from_conf
from scheduler.catalog.cell_services import CellServicesReader
from scheduler.catalog.nova_api import (
    HypervisorInfo,
    NovaApiError,
    NovaSnapshot,
    ServiceState,
    ServiceStates,
)
from scheduler.catalog.periodic import PeriodicSync
from scheduler.catalog.shared_services import Checked, SharedReads
from scheduler.conf.cell_database import GROUP as CELL_GROUP
from scheduler.conf.ksa import load_adapter
from scheduler.conf.nova import GROUP, MAX_MICROVERSION, MIN_MICROVERSION
from scheduler.exceptions import ConfigurationError
from scheduler.objects.spec import Aggregate

LOG = logging.getLogger(__name__)

#: More hypervisor pages than this is a paging loop, not a cloud.
MAX_HYPERVISOR_PAGES = 1000
#: Above this many unknown nodes at once, one full sync costs less than look-ups.
MAX_SINGLE_LOOKUPS = 20
_URL_USERINFO_RE = re.compile(r'(//)[^/@\s]+@')
#: A read of the compute services' state that requests wait for, longer than this, is
#: logged: it is many times what deciding takes (Nova 34's nova-api needs about 0.5 ms
#: per compute service for it, so this is about 2,000 computes).
SLOW_SERVICES_READ = 1.0
#: Each kind of slow-read WARNING is logged at most once in this many seconds per process.
SLOW_LOG_EVERY = 3600.0
#: Between two reads of every service, the services held as disabled or down are read
#: again (by host, then by the ids found) before a request while they are at most this
#: many, or this share of the services if that is more; more, and every row is read.
#: Measured when those reads were by host, such a read cost about what a read of every
#: row does at a seventh of the rows (PostgreSQL 15, 50,000 services: 19 ms for every
#: row, 1.3 ms for 500 hosts by host), and a large cloud always has some computes
#: disabled for maintenance (1% of 50,000 is 500).
MAX_HOSTS_READ_AGAIN = 500
READ_AGAIN_SHARE = 0.05
#: While the cell databases hold every compute node the compute API knows, the sync
#: reads no hypervisor list, and checks that they still do only this often.
HYPERVISOR_CHECK_EVERY = 3600.0
#: How long the check's ``GET /os-services`` may take, at least: the compute API
#: serialises every compute service for it (19 s of Nova 34's nova-api at 50,000 on
#: the benchmark's machine, 90 s and more while that machine served requests), and
#: the sync's thread, not a request, waits for it. Given up after ``read_timeout``,
#: the read was sent again at the next sync while nova-api went on serialising the
#: last: 21 reads in about 16 minutes, none answered in time (doc/performance.md).
CHECK_READ_TIMEOUT = 600.0


class Throttle:
    """True at the first :meth:`due` and then at most once per ``every`` seconds."""

    def __init__(self, every: float = SLOW_LOG_EVERY,
                 clock: Callable[[], float] = time.monotonic):
        self._every = every
        self._clock = clock
        self._last: float | None = None

    def due(self) -> bool:
        now = self._clock()
        if self._last is not None and now - self._last < self._every:
            return False
        self._last = now
        return True


def note_services_read(seconds: float, throttle: Throttle, *, from_api: bool) -> None:
    """A WARNING when a read of the services' state that requests wait for was slow;
    ``from_api``: read through the compute API (else the cell databases)."""
    if seconds <= SLOW_SERVICES_READ or not throttle.due():
        return
    if from_api:
        LOG.warning('reading the compute services\' state before requests took %.1fs, and '
                    'they wait for it: through the compute API the read grows with the '
                    'number of computes (about 0.5 ms each for Nova 34\'s nova-api). Read '
                    'the cell databases\' services tables instead ([cell_database] '
                    'service_states = true, with Nova\'s database servicegroup driver) or '
                    'set [nova] service_state_max_age = -1 (doc/host-data.md). Logged at '
                    'most once an hour.', seconds)
    else:
        LOG.warning('reading the compute services\' state from the cell databases before '
                    'requests took %.1fs, and they wait for it: set [nova] '
                    'service_state_max_age to a value longer than a read, or to -1 '
                    '(doc/host-data.md). Logged at most once an hour.', seconds)


def _redact(text: str) -> str:
    return _URL_USERINFO_RE.sub(r'\1***@', text)


def _version(text: str) -> tuple[int, int]:
    major, minor = text.strip().split('.')
    return int(major), int(minor)


def check_microversion(value: str) -> str:
    """``value`` if it is a compute microversion the sync can use; ConfigurationError if not."""
    try:
        version = _version(value)
    except ValueError:
        raise ConfigurationError(f'[{GROUP}] microversion must look like 2.87, '
                                 f'got {value!r}') from None
    if not _version(MIN_MICROVERSION) <= version <= _version(MAX_MICROVERSION):
        raise ConfigurationError(
            f'[{GROUP}] microversion {value} is outside {MIN_MICROVERSION}..{MAX_MICROVERSION}: '
            f'hypervisor ids are compute node UUIDs from {MIN_MICROVERSION}, and 2.88 dropped '
            f'cpu_info from GET /os-hypervisors/detail')
    return value.strip()


class ServicesSource(Protocol):
    """What the read of the compute services' state before a request reads from."""

    def read_services(self) -> tuple[ServiceStates, list[str]]: ...

    def read_service_keys(self) -> tuple[ServiceStates, list[str],
                                         list[nova_api.ServiceKey]]: ...

    def states_of_keys(self, keys: Any) -> tuple[ServiceStates, list[str]]: ...


class ServicesByHost(Protocol):
    """A source whose rows can also be read a few hosts at a time (the held ones by
    the ids of their rows, once found by host: :meth:`CellServicesReader.usual_again
    <scheduler.catalog.cell_services.CellServicesReader.usual_again>`)."""

    def usual_again(self, hosts: Collection[str]) -> Mapping[str, ServiceState]: ...

    def unusual_now(self, hosts: Collection[str]) -> Mapping[str, ServiceState]: ...


def _unusual(state: ServiceState) -> bool:
    """Whether a service is other than up and enabled with no reason."""
    return (not state.up or state.disabled or state.forced_down
            or state.disabled_reason is not None)


def silent_majority(services: Mapping[str, ServiceState]) -> list[str]:
    """The hosts down for want of a heartbeat (not forced down), when they are more than
    half of the services that are not forced down; else none."""
    states = ServiceStates.of(services)
    heard = [s for s in states.other.values() if not s.forced_down]
    silent = [s.host for s in heard if not s.up]
    return silent if len(silent) * 2 > len(heard) + len(states.usual) else []


class CheckedCellServices:
    """The cell databases' services tables, as long as the heartbeats are kept there.

    Nova's database servicegroup driver (its default) writes each service's
    heartbeat into its row; the memcache driver keeps it in memcached, and the
    rows then say that every service is down. So when a read finds most of the
    services down for want of a heartbeat, the compute API, which asks Nova's
    own driver, is asked about them: when it finds most of them up, the rows
    cannot tell, and every later read goes to the compute API (an ERROR says
    so once); when it agrees, the computes really are down (it is asked again
    at most once per ``recheck`` seconds while they are)."""

    def __init__(self, cells: CellServicesReader, api: NovaComputeReader, *,
                 recheck: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self._cells = cells
        self._api = api
        self._recheck = recheck
        self._clock = clock
        self._agreed_at: float | None = None
        self._failed_reads = Throttle(clock=clock)
        # The last read's states and their verdict: a read that changed nothing hands
        # back the same mapping, and judging 10,000 states again took 0.4 ms a read.
        self._judged: tuple[Mapping[str, ServiceState], list[str]] | None = None
        #: Whether the reads go to the compute API, the rows having been found wanting.
        self.from_api = False

    def read_services(self) -> tuple[ServiceStates, list[str]]:
        services, unknown, _ = self.read_service_keys()
        return services, unknown

    def read_service_keys(self) -> tuple[ServiceStates, list[str],
                                         list[nova_api.ServiceKey]]:
        if self.from_api:
            return self._api.read_service_keys()
        try:
            read = self._cells.read_service_keys()
        except NovaApiError as e:
            # Before 2026-11-30 a reader needed SELECT on compute_nodes only: a user
            # without it on services keeps the compute API's read, as then.
            if self._failed_reads.due():
                LOG.warning('the compute services\' state could not be read from the cell '
                            'databases (%s); reading it through the compute API instead. '
                            'Grant SELECT on services to the [cell_database] user, or set '
                            '[cell_database] service_states = false. Logged at most once '
                            'an hour.', e)
            return self._api.read_service_keys()
        if self._judged is None or self._judged[0] is not read[0]:
            self._judged = read[0], silent_majority(read[0])
        silent = self._judged[1]
        if not silent:
            self._agreed_at = None
            return read
        now = self._clock()
        if self._agreed_at is not None and now - self._agreed_at < self._recheck:
            return read
        try:
            answer = self._api.read_service_keys()
        except NovaApiError as e:
            LOG.warning('%d of the compute services are down in the cell databases for want '
                        'of a heartbeat; the compute API could not confirm it (%s)',
                        len(silent), e)
            return read
        up = sum(1 for host in silent if (state := answer[0].get(host)) and state.up)
        if up * 2 <= len(silent):
            self._agreed_at = now
            return read
        self.from_api = True
        LOG.error('the cell databases\' services tables say that %d compute services are '
                  'down for want of a heartbeat, and the compute API finds %d of them up: '
                  'the heartbeats are not kept in the databases (a servicegroup driver '
                  'other than "db", such as memcache). The services\' state is read through '
                  'the compute API from now on; set [cell_database] service_states = false '
                  'to say so.', len(silent), up)
        return answer

    def states_of_keys(self, keys: Any) -> tuple[ServiceStates, list[str]]:
        return (self._api if self.from_api else self._cells).states_of_keys(keys)

    @property
    def reads_by_host(self) -> bool:
        """Whether the reads by host read the rows: not once they were found wanting."""
        return not self.from_api

    def usual_again(self, hosts: Collection[str]) -> Mapping[str, ServiceState]:
        return self._cells.usual_again(hosts)

    def unusual_now(self, hosts: Collection[str]) -> Mapping[str, ServiceState]:
        return self._cells.unusual_now(hosts)

    def service_hosts(self, *, read: bool = False) -> set[str] | None:
        """The compute service hosts the last read of the rows named (with ``read``,
        read now when none is held); None when the rows were never read, or are not
        read any more."""
        return None if self.from_api else self._cells.service_hosts(read=read)


def _decoded(url: str, raw: bytes) -> Any:
    """The JSON of a compute API answer; NovaApiError when it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        raise NovaApiError(f'GET {url}: the answer is not JSON') from None


class NovaComputeReader:
    """Reads one :class:`NovaSnapshot` through the compute API; thread-compatible."""

    def __init__(self, adapter: Any, *, microversion: str, connect_timeout: float,
                 read_timeout: float, page_size: int):
        self._adapter = adapter
        self._microversion = check_microversion(microversion)
        self._timeout = (connect_timeout, read_timeout)
        self._page_size = page_size
        self._services = nova_api.ServicesParser()
        # The last aggregates read: a digest of the answer's bytes, and what they gave.
        self._aggregates: tuple[bytes, tuple[Aggregate, ...]] | None = None

    def read(self, *, hypervisors: bool = True, services: bool = True) -> NovaSnapshot:
        """Aggregates, and unless told not to, nova-compute services and every
        hypervisor page (else none: the caller has them from elsewhere); NovaApiError
        on any failure (then nothing was read, as far as the caller is concerned)."""
        aggregates = self.read_aggregates()
        if not services:
            return NovaSnapshot(aggregates=aggregates)
        states, unknown = self.read_services()
        return NovaSnapshot(aggregates=aggregates, services=states,
                            hypervisors=tuple(self.read_hypervisors()) if hypervisors else (),
                            unknown_services=tuple(unknown))

    def read_aggregates(self) -> tuple[Aggregate, ...]:
        """``GET /os-aggregates``; an answer byte for byte the last one gives the last
        one's aggregates (read-only, as the catalog holds them) without decoding it:
        at 50,000 computes an availability zone names every host, and each sync in
        each worker decoded and checked 50,000 names again to find them unchanged."""
        raw = self._get_raw('/os-aggregates')
        digest = hashlib.blake2b(raw, digest_size=16).digest()
        last = self._aggregates
        if last is not None and last[0] == digest:
            return last[1]
        aggregates = tuple(nova_api.parse_aggregates(_decoded('/os-aggregates', raw)))
        self._aggregates = digest, aggregates
        return aggregates

    def read_hypervisors(self) -> list[HypervisorInfo]:
        """Every page of ``GET /os-hypervisors/detail``."""
        hypervisors: list[HypervisorInfo] = []
        marker: str | None = None
        for _ in range(MAX_HYPERVISOR_PAGES):
            params: dict[str, Any] = {'limit': self._page_size}
            if marker:
                params['marker'] = marker
            body = self._get('/os-hypervisors/detail', params)
            hypervisors.extend(nova_api.parse_hypervisors(body))
            marker = nova_api.next_hypervisor_marker(body)
            if marker is None:
                break
        else:
            raise NovaApiError(f'GET /os-hypervisors/detail: more than {MAX_HYPERVISOR_PAGES} '
                               f'pages of {self._page_size}; refusing to page on')
        return hypervisors

    def read_services(self) -> tuple[ServiceStates, list[str]]:
        """``GET /os-services?binary=nova-compute``: (state by service host, hosts in
        down cells)."""
        services, unknown, _ = self.read_service_keys()
        return services, unknown

    def read_service_keys(self) -> tuple[ServiceStates, list[str],
                                         list[nova_api.ServiceKey]]:
        """:meth:`read_services` and the read's keys, for the workers sharing it."""
        raw = self._get_raw('/os-services', {'binary': nova_api.COMPUTE_BINARY})
        return self._services.parse_raw_with_keys(raw)

    def states_of_keys(self, keys: Any) -> tuple[ServiceStates, list[str]]:
        """The states of another worker's read (its keys)."""
        return self._services.parse_keys(keys)

    def read_service_hosts(self) -> set[str]:
        """The hosts of every nova-compute service, a down cell's too (one ``GET
        /os-services``, of which nothing else is kept: :func:`nova_api.service_hosts`)."""
        raw = self._get_raw('/os-services', {'binary': nova_api.COMPUTE_BINARY},
                            read_timeout=max(self._timeout[1], CHECK_READ_TIMEOUT))
        try:
            return nova_api.service_hosts(raw)
        except NovaApiError as e:
            raise NovaApiError(f'GET /os-services: {e}') from None

    def read_hypervisor(self, provider_uuid: str) -> HypervisorInfo | None:
        """``GET /os-hypervisors/{uuid}``: one compute node (its id is the root
        provider's uuid from 2.53), or None when the compute API has no such node."""
        try:
            body = self._get(f'/os-hypervisors/{provider_uuid}')
        except NovaApiError as e:
            if e.status_code == 404:
                return None
            raise
        hypervisor = body.get('hypervisor') if isinstance(body, dict) else None
        [info] = nova_api.parse_hypervisors({'hypervisors': [hypervisor]})
        return info

    def read_hypervisors_matching(self, pattern: str) -> list[HypervisorInfo]:
        """``GET /os-hypervisors/detail?hypervisor_hostname_pattern=…``: the compute
        nodes whose name contains ``pattern`` (Nova's LIKE; not paged, Nova refuses
        paging with a pattern), none when the compute API has none (its 404)."""
        try:
            body = self._get('/os-hypervisors/detail',
                             {'hypervisor_hostname_pattern': pattern})
        except NovaApiError as e:
            if e.status_code == 404:
                return []
            raise
        return nova_api.parse_hypervisors(body)

    def _get(self, url: str, params: dict[str, Any] | None = None) -> Any:
        return _decoded(url, self._get_raw(url, params))

    def _get_raw(self, url: str, params: dict[str, Any] | None = None, *,
                 read_timeout: float | None = None) -> bytes:
        """The answer's body as it came (requests undoes any content encoding)."""
        timeout = self._timeout if read_timeout is None else (self._timeout[0], read_timeout)
        try:
            response = self._adapter.get(
                url, params=params, microversion=self._microversion, timeout=timeout,
                headers={'Accept': 'application/json'}, raise_exc=False,
                connect_retries=0, status_code_retries=0)
        except (ks_exc.EndpointNotFound, ks_exc.DiscoveryFailure) as e:
            raise NovaApiError(f'no compute endpoint: {_redact(str(e))} (check [{GROUP}] '
                               f'endpoint_override, service_type, valid_interfaces, '
                               f'region_name)') from e
        except ks_exc.ClientException as e:
            # Connection failures, timeouts, and the identity service refusing us.
            raise NovaApiError(f'GET {url}: {type(e).__name__}: {_redact(str(e))}') from e
        if response.status_code != 200:
            detail = _redact((response.text or '').strip().replace('\n', ' ')[:200])
            hint = (' (the compute API does not offer this microversion)'
                    if response.status_code == 406 else '')
            raise NovaApiError(f'GET {url}: HTTP {response.status_code}{hint}: {detail}',
                               status_code=response.status_code)
        return response.content


class NovaSync(PeriodicSync):
    """Applies a fresh snapshot to ``catalog`` every ``interval`` seconds, on a thread."""

    thread_name = 'nova-api-sync'
    label = 'compute API sync'

    def __init__(self, catalog: HostCatalog, reader: NovaComputeReader, *, interval: float,
                 service_state_max_age: float | None = None,
                 shared: SharedReads | None = None,
                 services: ServicesSource | None = None,
                 reader_wait: float = 30.0,
                 cell_databases_have: Callable[[Iterable[str]], bool] | None = None,
                 scan_every: float = 0.0,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(interval=interval)
        self._catalog = catalog
        self._reader = reader
        # Where the read before a request finds the services' state: the compute
        # API, or the cell databases (scheduler/catalog/cell_services.py).
        self._services: ServicesSource = services if services is not None else reader
        self.failures_in_a_row = 0
        self.last_success: float | None = None  # time.monotonic()
        self._max_age = service_state_max_age
        self._clock = clock
        self._services_lock = threading.Lock()
        self._services_read_at: float | None = None  # when the last services read began
        # The reads of the other workers of this service, and which of their
        # changes this worker holds (a digest of its keys, what it compares its own
        # reads with: the keys themselves were 5 MB of a worker at 50,000 services).
        self._shared = shared
        # How long a request waits for the service's reader before this worker
        # reads in its turn instead.
        self._reader_wait = reader_wait
        self._held_change: int | None = None
        self._held_digest: int | None = None
        self._slow_reads = Throttle(clock=clock)
        self._slow_syncs = Throttle(clock=clock)
        # The cell databases' word on which compute nodes they hold (None: no
        # [cell_database]); whether they held every one at the last check, when that
        # was, and whether the next sync is to check against the hypervisor list.
        self._cell_databases_have = cell_databases_have
        self.cells_hold_every_node = False
        self._checked_at: float | None = None
        self._list_next = False
        # Whether this thread's sync leaves the catalog its services' state (the one the
        # reads before requests keep: _with_cell_services), set by each sync; per thread,
        # as a request's look-up may sync while the periodic one does.
        self._sync_thread = threading.local()
        # This worker's own last check, as the workers of a service share theirs
        # (Checked: its failures in a row, and when the last began); None: none yet.
        self._own_check: Checked | None = None
        # How often, at most, the read before a request reads every row, where the
        # services' rows can be read by host (:meth:`_by_host`); the hosts held
        # as unusual in the catalog's mapping of that identity.
        self._scan_every = scan_every
        self._unusual: tuple[Mapping[str, ServiceState], list[str]] | None = None
        # When the last read of those hosts, under the services lock, began, and which
        # of them it left unread (a request's ``skip``).
        self._usual_read_at: float | None = None
        self._usual_left: frozenset[str] = frozenset()
        self._by_host_reads = threading.Lock()

    def fresh_service_states(self, skip: Collection[str] = ()) -> frozenset[str]:
        """Make the compute services' state at most ``service_state_max_age`` seconds
        old before a request is decided, as Nova reads its services table per request;
        the hosts of ``skip`` left as held, when only the held ones are read (the hosts
        no candidate of the request can be on: scheduler/provider_view/reach.py), and
        returned (those of them held: the caller reads them with :meth:`read_again`
        if the request's answer can be on them after all).

        One read at a time, applied before the next one starts (an older read can
        never land after a newer one): requests that queued behind a read begun
        after they arrived use it instead of reading again; with the other workers
        of the service sharing their reads, whichever worker's read it was. A failed
        read keeps the last good state (logged).

        Where the rows can be read by host, every row is read only every
        ``scan_every`` seconds: in between, the rows of the services the catalog
        holds as disabled or down are read again (a few index look-ups), and
        :meth:`unusable_hosts` checks the hosts a request is about to answer with.
        """
        if self._max_age is None:
            return frozenset()
        now = self._clock()
        wanted_after = now - self._max_age
        with self._services_lock:
            read_at = self._services_read_at
            if read_at is not None and read_at >= wanted_after:
                return frozenset()
            source = self._by_host()
            if source is not None:
                if read_at is None or read_at < now - self._scan_every:
                    self._read_every_row(now - self._scan_every)
                    read_at = self._services_read_at
                    if read_at is not None and read_at >= wanted_after:
                        return frozenset()
                if read_at is not None:
                    left = self._read_unusual_again(source, wanted_after, skip)
                    if left is not None:
                        return left
            self._read_every_row(wanted_after)
            return frozenset()

    def held_hosts(self) -> Sequence[str]:
        """The hosts whose services the catalog holds as disabled, forced down or
        silent, when the read before a request reads only theirs (else none: every
        row is read); the same object until the catalog's services change."""
        source = self._by_host()
        if source is None:
            return ()
        return self._held_unusual()[1]

    def read_again(self, hosts: Collection[str]) -> None:
        """The services of ``hosts`` (held, and left unread before a request that can
        be answered with them after all), read now and applied; every row when that
        read fails."""
        source = self._by_host()
        if not hosts or source is None:
            return
        with self._services_lock:
            if not self._apply_usual_again(source, hosts):
                self._read_every_row(self._clock())

    def _read_every_row(self, wanted_after: float) -> None:
        """Under the services lock: a read of every service begun after
        ``wanted_after``, this worker's or the service's reader's."""
        if self._shared is not None:
            # Read by the service's reader when there is one; taken in the turn.
            self._shared.ask(wanted_after, self._reader_wait)
            with self._shared.turn():
                self._take_turn(wanted_after)
            return
        started = self._clock()
        try:
            services, unknown = self._services.read_services()
        except NovaApiError as e:
            LOG.warning('compute services read failed (%s); deciding with the '
                        'state of %s', e,
                        'the last sync' if self._services_read_at else 'no sync yet')
            return
        note_services_read(self._clock() - started, self._slow_reads,
                           from_api=reads_from_api(self._services, self._reader))
        self._catalog.apply_service_states(services, unknown)
        self._services_read_at = started

    def _by_host(self) -> ServicesByHost | None:
        """The source, when its rows are read by host between two reads of every row."""
        # Not with service_state_max_age -1: the operator asked for no read per request.
        if (self._max_age is not None and self._scan_every > 0
                and getattr(self._services, 'reads_by_host', False)):
            return cast(ServicesByHost, self._services)
        return None

    def _held_unusual(self) -> tuple[Mapping[str, ServiceState], list[str]]:
        """The catalog's services, and the hosts of those disabled, forced down or
        silent (worked out again only when the catalog's services change)."""
        held = self._catalog.service_states()
        unusual = self._unusual
        if unusual is None or unusual[0] is not held:
            unusual = self._unusual = held, [host for host, state in held.other.items()
                                             if _unusual(state)]
        return unusual

    def _read_unusual_again(self, source: ServicesByHost, wanted_after: float,
                            skip: Collection[str]) -> frozenset[str] | None:
        """Under the services lock: the rows of the services the catalog holds as
        disabled, forced down or silent, but those of ``skip``, read again
        (``usual_again``) and applied, unless such a read began after ``wanted_after``
        and left none of the others unread (a request that queued behind another's
        takes it); the held hosts left unread, or None (nothing read) when they are too
        many to look up one by one, or the read failed: then every row is read."""
        held, hosts = self._held_unusual()
        wanted = [host for host in hosts if host not in skip] if skip else hosts
        if len(wanted) > max(MAX_HOSTS_READ_AGAIN, len(held) * READ_AGAIN_SHARE):
            return None
        left = frozenset(hosts).difference(wanted) if len(wanted) < len(hosts) else frozenset()
        if not wanted or (self._usual_read_at is not None
                          and self._usual_read_at >= wanted_after
                          and self._usual_left <= left):
            return left
        started = self._clock()
        if not self._apply_usual_again(source, wanted):
            return None
        self._usual_read_at = started
        self._usual_left = left
        return left

    def _apply_usual_again(self, source: ServicesByHost, hosts: Collection[str]) -> bool:
        """Under the services lock: the held ``hosts``' rows read again
        (``usual_again``) and applied; False when the read failed (logged: the caller
        reads every row instead)."""
        try:
            with self._by_host_reads:
                fresh = source.usual_again(hosts)
        except NovaApiError as e:
            LOG.warning('compute services read by host failed (%s); reading every row', e)
            return False
        self._catalog.update_service_states(fresh)
        return True

    def unusable_hosts(self, hosts: Sequence[str]) -> set[str]:
        """Of ``hosts`` (about to be claimed, or offered as alternates), those whose
        compute service is disabled or down now, read by host, when the read before the
        request may have been older than the request (:meth:`fresh_service_states`);
        else none. What is read is applied. A failed read finds none (logged): the
        request is then decided on what the catalog held, as when a read fails
        before it."""
        source = self._by_host()
        if not hosts or source is None:
            return set()
        try:
            with self._by_host_reads:
                fresh = source.unusual_now(hosts)
        except NovaApiError as e:
            LOG.warning('compute services read of the chosen hosts failed (%s); answering '
                        'with the state read before the request', e)
            return set()
        self._catalog.update_service_states(fresh)
        return {host for host, state in fresh.items() if state.disabled or not state.up}

    def _take_turn(self, wanted_after: float) -> None:
        """In this worker's turn: take the last read when it began after
        ``wanted_after``, else read and hand the read to the others."""
        assert self._shared is not None
        published = self._shared.published()
        if published.read_at is not None and published.read_at >= wanted_after:
            if published.change == self._held_change:
                self._services_read_at = published.read_at
                return
            try:
                keys = nova_api.taken_keys(self._shared.keys())
                services, unknown = self._services.states_of_keys(keys)
            except (OSError, ValueError, NovaApiError) as e:
                # Reading the services itself keeps the request's guarantee, and its
                # read, unlike what this worker holds, is handed over anew.
                LOG.warning('the other workers\' compute services read could not be '
                            'taken (%s); reading the services itself instead', e)
            else:
                self._catalog.apply_service_states(services, unknown)
                self._held_change = published.change
                self._held_digest = nova_api.keys_digest(keys)
                self._services_read_at = published.read_at
                return
        started = self._clock()
        try:
            services, unknown, keys = self._services.read_service_keys()
        except NovaApiError as e:
            LOG.warning('compute services read failed (%s); deciding with the state '
                        'of %s', e, 'the last read' if self._services_read_at else 'no sync yet')
            return
        note_services_read(self._clock() - started, self._slow_reads,
                           from_api=reads_from_api(self._services, self._reader))
        try:
            digest = nova_api.keys_digest(keys)
            published = self._shared.publish_read(
                started, keys, self._held_change,
                digest is not None and digest == self._held_digest)
            self._held_change, self._held_digest = published.change, digest
        except OSError as e:
            LOG.warning('the compute services read could not be handed to the other '
                        'workers (%s); they read their own', e)
            self._held_change = self._held_digest = None
        self._catalog.apply_service_states(services, unknown)
        self._services_read_at = started

    def sync_once(self) -> bool:
        """One read-and-apply; False (logged, catalog unchanged) when the read failed.

        The hypervisor list is the compute nodes' rows as nova-api serialises them
        (8-10 ms a node for Nova 34's nova-api): while the cell databases hold every
        compute node, their reads give the same fields, fresher, and the list is not
        read. Whether they do is checked at the first sync and then every
        :data:`HYPERVISOR_CHECK_EVERY` seconds: when the reads before requests take
        the cells' services tables, by whether those name every compute service
        ``GET /os-services`` lists (each cell's nodes are in its own database); else
        by reading the list and finding each node in the cell databases. Between
        checks the services' state comes from where the reads before requests
        take it."""
        mark = self._catalog.cast_mark()
        started = self._clock()
        self._sync_thread.services_kept = False
        checking = self._cell_databases_have is not None and (
            not self.cells_hold_every_node or self._checked_at is None or self._list_next
            or started - self._checked_at >= HYPERVISOR_CHECK_EVERY)
        listed = self._cell_databases_have is None
        checked_at: float | None = started
        try:
            if self._cell_databases_have is None:
                snapshot = self._reader.read()
            elif checking:
                snapshot, listed, checked_at = self._check_in_turn(started)
            else:
                snapshot = self._between_checks()
        except NovaApiError as e:
            self.failures_in_a_row += 1
            since = ('never synced' if self.last_success is None else
                     f'data is {int(time.monotonic() - self.last_success)}s old')
            LOG.warning('compute API sync failed (%d in a row; %s; keeping the last good '
                        'data, next try in %ss): %s', self.failures_in_a_row, since,
                        self._interval, e)
            return False
        if checking and checked_at is not None:
            self._checked_at = checked_at
        kept = self._sync_thread.services_kept
        self._catalog.apply_nova_snapshot(snapshot, cast_mark=mark, keep_services=kept)
        if not kept:
            with self._services_lock:
                self._services_read_at = max(self._services_read_at or started, started)
        if snapshot.unknown_services:
            LOG.warning('compute API sync: no data for %d compute service(s) in down cells '
                        '(%s); they keep what the hosts file says', len(snapshot.unknown_services),
                        ', '.join(sorted(snapshot.unknown_services)[:10]))
        log = LOG.info if self.failures_in_a_row or self.last_success is None else LOG.debug
        log('compute API sync: %d aggregates, %d compute services, %s in %.1fs',
            len(snapshot.aggregates), len(self._catalog.service_states()),
            'hypervisors from the cell databases' if self.cells_hold_every_node
            else f'{len(snapshot.hypervisors)} hypervisors', time.monotonic() - started)
        took = self._clock() - started
        if took > self._interval and self._slow_syncs.due():
            LOG.warning('compute API sync took %.0fs, longer than [nova] sync_interval '
                        '(%ss): each worker reads every compute service%s once per sync, '
                        'which takes Nova 34\'s nova-api about %s; lengthen sync_interval%s. '
                        'Logged at most once an hour.', took, self._interval,
                        ' and lists every hypervisor' if listed else '',
                        '10 ms a node' if listed else '0.5 ms a service',
                        '' if self._cell_databases_have is not None else
                        ', or give [cell_database] every cell, which leaves the hypervisors '
                        'to the cell databases')
        self.failures_in_a_row = 0
        self.last_success = time.monotonic()
        return True

    def _between_checks(self) -> NovaSnapshot:
        """A snapshot without the hypervisors, which the cell databases hold: the
        services' state from where the reads before requests take it."""
        if reads_from_api(self._services, self._reader):
            return self._reader.read(hypervisors=False)
        return self._with_cell_services(self._reader.read(hypervisors=False, services=False))

    def _check_in_turn(self, started: float) -> tuple[NovaSnapshot, bool, float | None]:
        """:meth:`_checked_against_cells`, made by one worker of the service for all of
        them: a snapshot, whether the hypervisor list was read, and when the check it
        rests on began (None: no check was made, see :meth:`_attempt_check`).

        Each check reads every compute service through the compute API (8 s of Nova
        34's nova-api at 50,000), and every worker of a service checked on its own, at
        start-up and every hour, all at once: at 50,000 computes the four reads outlasted
        ``read_timeout`` together, were tried again every ``sync_interval``, and kept
        nova-api busy for as long. Now the workers check in turns, and a worker whose
        turn comes after another found, less than :data:`HYPERVISOR_CHECK_EVERY` ago,
        that the cell databases held every node takes that word for it. A check that
        found them wanting is not taken: each worker then lists the hypervisors itself,
        as it reads them at every sync until they do. A check the compute API could not
        answer is not tried again at the next sync by any worker, but after twice the
        wait of the last (:meth:`_check_delay`); meanwhile the syncs go on with what the
        cell databases hold."""
        if self._shared is None or self._list_next:
            snapshot, listed, checked_at, self._own_check = self._check_unless_backing_off(
                self._own_check, started)
            return snapshot, listed, checked_at
        with self._shared.check_turn():
            last = self._shared.checked()
            if (last is not None and not last.failures and last.held
                    and started - last.at < HYPERVISOR_CHECK_EVERY):
                self._note_held(True)
                return self._between_checks(), False, last.at
            snapshot, listed, checked_at, made = self._check_unless_backing_off(last, started)
            if made is not last:
                self._shared.publish_check(made)
            return snapshot, listed, checked_at

    def _check_unless_backing_off(self, last: Checked | None, started: float
                                  ) -> tuple[NovaSnapshot, bool, float | None, Checked]:
        """:meth:`_attempt_check`, unless the checks up to ``last`` failed less than
        :meth:`_check_delay` ago: a snapshot, whether the hypervisor list was read, when
        the check began (None: none was made), and the last check now (``last`` itself
        when none was made)."""
        failures = last.failures if last is not None else 0
        if last is not None and failures and started - last.at < self._check_delay(failures):
            self._note_held(last.held)
            return self._between_checks(), False, None, last
        checked = self._attempt_check(failures)
        if checked is None:
            held = last.held if last is not None else self.cells_hold_every_node
            return self._between_checks(), False, None, Checked(held, started, failures + 1)
        return *checked, started, Checked(self.cells_hold_every_node, started)

    def _check_delay(self, failures: int) -> float:
        """How long after ``failures`` checks in a row could not be made the next is
        tried: twice as long after each, from two sync intervals up to the hour."""
        return min(HYPERVISOR_CHECK_EVERY, max(self._interval, 1.0) * 2.0 ** failures)

    def _attempt_check(self, failures: int) -> tuple[NovaSnapshot, bool] | None:
        """:meth:`_checked_against_cells`, or None (logged) when the compute API could not
        answer it: then the sync goes on with what the cell databases hold, as between
        two checks, and the check is tried again later (:meth:`_check_delay`), not at
        the next sync."""
        try:
            return self._checked_against_cells()
        except NovaApiError as e:
            LOG.warning('compute API sync: the check that the cell databases hold every '
                        'compute node could not be made (%s; %d in a row); the sync goes on '
                        'with what they hold, and the check is tried again in %ds', e,
                        failures + 1, self._check_delay(failures + 1))
            return None

    def _with_cell_services(self, snapshot: NovaSnapshot) -> NovaSnapshot:
        """``snapshot`` with the services' state of the cell databases, which hold every
        compute node the compute API lists (their services tables then say what
        ``GET /os-services`` would, without nova-api serialising every service for
        every worker every sync: 5.4 s at 10,000).

        A worker of a service with several takes the state the reads before requests
        keep (the service's reader's read, at most ``scan_every`` seconds old, or one
        taken in its turn), and the catalog keeps it (``services_kept``): a read
        of every row of its own each sync left each worker holding a whole read's keys
        and states, about 10 MB at 50,000 computes, beside the read it takes from the
        reader."""
        with self._services_lock:
            if self._shared is not None:
                now = self._clock()
                self._read_every_row(now if self._max_age is None else now - self._scan_every)
                self._sync_thread.services_kept = True
                return snapshot
            services, unknown = self._services.read_services()
        return dataclasses.replace(snapshot, services=services,
                                   unknown_services=tuple(unknown))

    def _checked_against_cells(self) -> tuple[NovaSnapshot, bool]:
        """A snapshot with the hypervisors unless the cell databases hold every compute
        node, and whether the list was read (sets :attr:`cells_hold_every_node`)."""
        assert self._cell_databases_have is not None
        cell_hosts = None if self._list_next else self._cell_service_hosts()
        self._list_next = False
        if cell_hosts is not None:
            # Only the hosts, and when the cells hold them, their states from the cells
            # as between two checks; else the services and hypervisors, read again.
            held = cell_hosts.issuperset(self._reader.read_service_hosts())
            listed = not held
            if held:
                snapshot = self._between_checks()
            else:
                snapshot = self._reader.read()
        else:
            snapshot, listed = self._reader.read(), True
            held = self._cell_databases_have(h.provider_uuid for h in snapshot.hypervisors)
        self._note_held(held)
        return (dataclasses.replace(snapshot, hypervisors=()) if held else snapshot), listed

    def _note_held(self, held: bool) -> None:
        if held != self.cells_hold_every_node:
            LOG.info('compute API sync: the cell databases %s every compute node the compute '
                     'API knows; %s', 'hold' if held else 'no longer hold',
                     f'the hypervisor list is left to them, checked once every '
                     f'{HYPERVISOR_CHECK_EVERY:.0f}s' if held else
                     'the hypervisor list is read at every sync')
        self.cells_hold_every_node = held

    def _cell_service_hosts(self) -> set[str] | None:
        """The compute service hosts of the cell databases' services tables, when the
        reads before requests take them (read now if they never were); None when not."""
        hosts = getattr(self._services, 'service_hosts', None)
        if hosts is None:
            return None
        with self._services_lock:
            return cast('set[str] | None', hosts(read=True))

    def look_up(self, provider_uuids: Sequence[str]) -> None:
        """The compute API's word on nodes no sync has seen yet (HostLookup).

        Up to :data:`MAX_SINGLE_LOOKUPS` nodes are read one by one; more than
        that, and one full sync is cheaper. Failures are logged, never raised:
        the request goes on with what the catalog knows.
        """
        if len(provider_uuids) > MAX_SINGLE_LOOKUPS:
            # A sync that reads the list (they are not in the cell databases, which were
            # asked first), and checks the cell databases against it.
            self._list_next = True
            self.sync_once()
            return
        found = []
        for provider_uuid in provider_uuids:
            try:
                info = self._reader.read_hypervisor(provider_uuid)
            except NovaApiError as e:
                LOG.warning('compute API look-up of compute node %s failed: %s',
                            provider_uuid, e)
                return
            if info is not None:
                found.append(info)
        self._catalog.add_hypervisors(found)


    def look_up_names(self, host: str | None, node: str | None) -> None:
        """The compute API's word on the nodes on service ``host`` named ``node``
        (None: any), no sync has seen yet (DestinationSource): one
        ``GET /os-hypervisors/detail`` by name pattern, the node's name, else the
        host's (libvirt's node is the host's FQDN; most other drivers name the node
        after the host), kept when the names match exactly (the host without
        regard to case, as Nova matches forced hosts). A node whose name does not
        contain its host's is found by host alone only in the cell databases, or
        by the next sync. Failures are logged, never raised."""
        pattern = node or host
        if not pattern:
            return
        try:
            hypervisors = self._reader.read_hypervisors_matching(pattern)
        except NovaApiError as e:
            LOG.warning('compute API look-up of the requested host %s node %s failed: %s',
                        host, node, e)
            return
        wanted_host = host.lower() if host else None
        self._catalog.add_hypervisors(
            h for h in hypervisors
            if (node is None or h.nodename == node)
            and (wanted_host is None or h.service_host.lower() == wanted_host))


def reads_service_states(conf: cfg.ConfigOpts) -> bool:
    """Whether ``[nova]`` has requests read the compute services' state (then the
    workers of a service share those reads: :mod:`scheduler.catalog.shared_services`)."""
    opts = conf[GROUP]
    return bool(opts.auth_type) and opts.sync_interval > 0 and opts.service_state_max_age >= 0


def nova_sync_from_conf(conf: cfg.ConfigOpts, catalog: HostCatalog,
                        shared: SharedReads | None = None) -> NovaSync | None:
    """The sync ``[nova]`` asks for, or None when it is off (no auth_type, or interval 0);
    ``shared``: the reads of the compute services' state of the service's other workers.

    ConfigurationError for options that cannot work (bad microversion, an auth
    plugin that does not load); the service refuses to start then.
    """
    opts = conf[GROUP]
    if not opts.auth_type:
        LOG.info('[%s] auth_type is not set: host data comes from the hosts file and the '
                 'fanout casts only (no compute API sync)', GROUP)
        return None
    if opts.sync_interval <= 0:
        LOG.info('[%s] sync_interval is 0: compute API sync is off', GROUP)
        return None
    reader = compute_reader_from_conf(conf)
    max_age = opts.service_state_max_age
    services = cell_services_from_conf(conf) if max_age >= 0 else None
    LOG.info('compute API sync every %ss at microversion %s; compute services\' state read '
             '%s%s', opts.sync_interval, opts.microversion,
             'before every request' if max_age == 0 else
             f'before a request when older than {max_age}s' if max_age > 0 else
             'with the sync only',
             ' from the cell databases\' services tables' if services is not None else '')
    cells = any(value.strip() for value in conf[CELL_GROUP].connections or ())
    return NovaSync(catalog, reader, interval=opts.sync_interval,
                    service_state_max_age=max_age if max_age >= 0 else None,
                    shared=shared if max_age >= 0 else None, services=services,
                    reader_wait=opts.connect_timeout + opts.read_timeout + 1.0,
                    cell_databases_have=catalog.cell_databases_have if cells else None,
                    scan_every=conf[CELL_GROUP].service_scan_interval)


def compute_reader_from_conf(conf: cfg.ConfigOpts) -> NovaComputeReader:
    opts = conf[GROUP]
    check_microversion(opts.microversion)
    return NovaComputeReader(load_adapter(conf, GROUP), microversion=opts.microversion,
                             connect_timeout=opts.connect_timeout,
                             read_timeout=opts.read_timeout,
                             page_size=opts.hypervisor_page_size)


def reads_from_api(source: ServicesSource, api: object = None) -> bool:
    """Whether ``source`` reads the services' state through the compute API (``api``)."""
    return (source is api or isinstance(source, NovaComputeReader)
            or bool(getattr(source, 'from_api', False)))


def services_source_from_conf(conf: cfg.ConfigOpts) -> ServicesSource:
    """Where the read of the compute services' state before a request reads: the
    cell databases' services tables, or the compute API."""
    services = cell_services_from_conf(conf)
    return services if services is not None else compute_reader_from_conf(conf)


def cell_services_from_conf(conf: cfg.ConfigOpts) -> CheckedCellServices | None:
    """The cell databases' services tables, when ``[cell_database]`` names databases
    and reads the services' state there (``service_states``), checked against the
    compute API (:class:`CheckedCellServices`)."""
    if not conf[CELL_GROUP].service_states:
        return None
    readers = cell_readers_from_conf(conf, keep_connection=True)
    if not readers:
        return None
    return CheckedCellServices(CellServicesReader(readers, down_time=conf.service_down_time),
                               compute_reader_from_conf(conf))
