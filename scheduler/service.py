"""One scheduler worker: the RPC server and everything behind it."""
from __future__ import annotations

import logging
import warnings

import oslo_messaging as messaging
from oslo_config import cfg
from oslo_messaging.rpc import dispatcher

from placement_client import exceptions as pexc
from placement_client.api import PlacementAPI
from scheduler import exceptions as exc
from scheduler import metrics, metrics_server, notifications, plugins
from scheduler.catalog import HostCatalog
from scheduler.catalog.cell_db import cell_db_sync_from_conf
from scheduler.catalog.destinations import DestinationLookup, DestinationSource
from scheduler.catalog.neutron import neutron_from_conf
from scheduler.catalog.nova_sync import nova_sync_from_conf
from scheduler.catalog.placement_db import provider_view_from_conf
from scheduler.catalog.resolver import HostLookup, HostResolver
from scheduler.catalog.shared_provider_reads import SharedProviderReads
from scheduler.catalog.shared_services import SharedReads
from scheduler.conf import upgrade_levels
from scheduler.conf.placement import load_client
from scheduler.journal.log import JournalError
from scheduler.journal.requests import RequestJournal
from scheduler.journal.worker import open_worker_journal
from scheduler.manager import SchedulerManager
from scheduler.objects.codec import DecodeLimits
from scheduler.pipeline.claimer import PendingCleanups
from scheduler.pipeline.spread import Spread
from scheduler.provider_view.siblings import ClaimsBoard
from scheduler.provider_view.view import ProviderViewError
from scheduler.request.filters import load_request_filters
from scheduler.request.routed_networks import RoutedNetworkSources
from scheduler.rpc.endpoint import BaseAPIEndpoint, SchedulerEndpoint
from scheduler.rpc.serializer import ContextSerializer
from scheduler.rpc.server import get_rpc_server
from scheduler.rpc.transport import get_transport

LOG = logging.getLogger(__name__)


def decode_limits(conf: cfg.ConfigOpts) -> DecodeLimits:
    s = conf.scheduler
    return DecodeLimits(max_instances=s.max_instances_per_request,
                        max_string_length=s.max_string_length,
                        max_extra_specs=s.max_extra_specs, max_depth=s.max_nesting_depth)


def reply_cap(conf: cfg.ConfigOpts) -> str | None:
    """The series ``[upgrade_levels] reply_objects`` caps replies at; None for 'auto'."""
    cap = conf.upgrade_levels.reply_objects
    return None if cap == upgrade_levels.AUTO else cap


def build_catalog(conf: cfg.ConfigOpts) -> HostCatalog:
    kwargs = dict(default_cell_uuid=conf.scheduler.default_cell_uuid,
                  default_availability_zone=conf.default_availability_zone)
    if conf.scheduler.hosts_file:
        return HostCatalog.from_file(conf.scheduler.hosts_file, **kwargs)
    return HostCatalog(**kwargs)


def host_resolver(conf: cfg.ConfigOpts, catalog: HostCatalog, *sources: HostLookup | None
                  ) -> HostResolver:
    lookups = [s for s in sources if s is not None]
    policy = conf.scheduler.unresolved_hosts
    exclude = policy == 'exclude' or (policy == 'auto' and bool(lookups))
    return HostResolver(catalog.unresolved_providers, lookups, exclude_unresolved=exclude,
                        retry_after=conf.scheduler.unresolved_hosts_retry)


def destination_lookup(conf: cfg.ConfigOpts, catalog: HostCatalog,
                       *sources: DestinationSource | None) -> DestinationLookup | None:
    """Requested hosts and nodes the catalog does not know, looked up in ``sources``
    (None without any: they are refused at once, as before)."""
    configured = [s for s in sources if s is not None]
    if not configured:
        return None
    return DestinationLookup(lambda host, node: bool(catalog.find_nodes(host, node)),
                             configured, retry_after=conf.scheduler.unresolved_hosts_retry)


def claims_journal(conf: cfg.ConfigOpts, worker_index: int
                   ) -> tuple[RequestJournal | None, dict[int, dict]]:
    """This worker's claims journal and the records a dead process left in it;
    (None, {}) when ``[claims_journal] directory`` is empty."""
    opts = conf.claims_journal
    if not opts.directory:
        LOG.warning('[claims_journal] directory is empty: the claims of a worker that dies '
                    'before it answers will not be given back')
        return None, {}
    try:
        return open_worker_journal(opts.directory, host=conf.host, index=worker_index,
                                   workers=conf.scheduler.workers or 1, fsync=opts.fsync,
                                   compact_bytes=opts.compact_bytes, lock_wait=opts.lock_wait)
    except JournalError as e:
        raise exc.ConfigurationError(f'[claims_journal] directory: {e}') from e


class SchedulerService:
    """Builds the worker from configuration; fails fast on configuration errors.

    Placement being down at start-up is not a configuration error: the
    worker starts, says so, and answers calls with a NoValidHost that names
    the outage until Placement is back (every call tries it again).
    """

    def __init__(self, conf: cfg.ConfigOpts, *, transport: messaging.Transport | None = None,
                 placement_client: PlacementAPI | None = None,
                 catalog: HostCatalog | None = None,
                 worker_index: int = 0,
                 notification_transport: messaging.Transport | None = None,
                 claims_board: ClaimsBoard | None = None,
                 service_reads: SharedReads | None = None,
                 provider_reads: SharedProviderReads | None = None):
        self.conf = conf
        self.catalog = catalog if catalog is not None else build_catalog(conf)
        # Host data from Nova's compute API, when [nova] has credentials (None: off);
        # the compute services' state read by turns with the other workers.
        self.nova_sync = nova_sync_from_conf(conf, self.catalog, service_reads)
        # NUMA topologies and PCI pools from Nova's cell databases (None: off).
        self.cell_db_sync = cell_db_sync_from_conf(conf, self.catalog)
        # The cell databases first: they also say which cell a node is in.
        self.resolver = host_resolver(conf, self.catalog, self.cell_db_sync, self.nova_sync)
        filters = plugins.load_filters(conf)
        weighers = plugins.load_weighers(conf)
        request_filters = load_request_filters(conf.scheduler.request_filters)
        self.placement = placement_client or load_client(
            conf, on_error=metrics.count_placement_error)
        self._check_placement()
        # Segments of routed networks from Neutron, when [neutron] is configured.
        neutron = neutron_from_conf(conf)
        filter_sources = (RoutedNetworkSources(self.catalog, neutron, self.placement)
                          if neutron is not None else self.catalog)
        # Opened before anything can claim; what a dead process left is given back
        # once the service starts.
        self.journal, self._unanswered = claims_journal(conf, worker_index)
        self.cleanups = PendingCleanups(self.placement,
                                        interval=conf.scheduler.cleanup_retry_interval,
                                        journal=self.journal)
        board = claims_board.of_worker(worker_index) if claims_board is not None else None
        self.manager = SchedulerManager(conf, placement=self.placement, catalog=self.catalog,
                                        filters=filters, weighers=weighers,
                                        request_filters=request_filters, cleanups=self.cleanups,
                                        journal=self.journal,
                                        resolver=self.resolver,
                                        destinations=destination_lookup(
                                            conf, self.catalog, self.cell_db_sync,
                                            self.nova_sync),
                                        request_filter_sources=filter_sources,
                                        refresh_service_states=(
                                            self.nova_sync.fresh_service_states
                                            if self.nova_sync is not None else None),
                                        unusable_hosts=(
                                            self.nova_sync.unusable_hosts
                                            if self.nova_sync is not None else None),
                                        held_services=self.nova_sync,
                                        refresh_compute_nodes=(
                                            self.cell_db_sync.fresh_nodes
                                            if self.cell_db_sync is not None else None),
                                        provider_view=provider_view_from_conf(
                                            conf, siblings=board, shared=provider_reads),
                                        # One lane per worker of this service: its
                                        # workers' concurrent claims keep apart.
                                        spread=Spread.of_worker(worker_index,
                                                                conf.scheduler.workers,
                                                                board=board))
        self.transport = transport or get_transport(conf)
        self.notifier = notifications.from_conf(conf, notification_transport)
        # Listening is the last thing that can fail at start-up (port taken).
        self.metrics = metrics_server.from_conf(conf.scheduler.metrics_listen, worker_index)
        if self.metrics is not None:
            metrics.watch_catalog(self.catalog, self.cleanups)
        target = messaging.Target(topic=conf.scheduler.rpc_topic, server=conf.host)
        endpoints = [SchedulerEndpoint(self.manager, self.catalog, decode_limits(conf),
                                       notifier=self.notifier,
                                       reply_cap=reply_cap(conf)),
                     BaseAPIEndpoint()]
        with warnings.catch_warnings():
            # Threading is what we want on every supported oslo.messaging; the newest
            # ones choose it themselves and warn that the argument is deprecated,
            # older ones need it spelt out.
            warnings.simplefilter('ignore', DeprecationWarning)
            self.server = get_rpc_server(
                self.transport, target, endpoints, serializer=ContextSerializer(),
                access_policy=dispatcher.DefaultRPCAccessPolicy, journal=self.journal)
        LOG.info('scheduler ready: topic %s, server %s, filters %s, weighers %s',
                 conf.scheduler.rpc_topic, conf.host,
                 [type(f).__name__ for f in filters], [type(w).__name__ for w in weighers])

    def _check_placement(self) -> None:
        try:
            version = self.placement.negotiate()
        except pexc.PlacementVersionTooOld as e:
            raise exc.ConfigurationError(str(e)) from e
        except pexc.PlacementAuthError as e:
            raise exc.ConfigurationError(
                f'[placement] credentials were refused by Placement: {e}') from e
        except pexc.PlacementUnavailable as e:
            # The client's messages are already redacted (no credentials in URLs).
            LOG.warning('Placement is unreachable (%s attempts: %s); starting anyway, every '
                        'request will try again and answer NoValidHost naming the outage '
                        'until it is back', e.attempts, e)
            return
        LOG.info('Placement reachable, max microversion %s', version)

    def start(self) -> None:
        if self.metrics is not None:
            self.metrics.start()
        # In the background, from now on: Placement may be down, and new calls
        # need not wait for the old claims.
        self.cleanups.recover(self._unanswered, max_age=self.conf.claims_journal.max_age)
        self._unanswered = {}
        if self.nova_sync is not None:
            # A bounded head start, so that the first calls already see Nova's
            # aggregates and services; the sync never holds up a call after that.
            self.nova_sync.start()
            wait = self.conf.nova.startup_sync_timeout
            if wait and not self.nova_sync.wait_for_first_attempt(wait):
                LOG.warning('first compute API sync still running after %ss; taking calls '
                            'with the hosts file and casts only until it finishes', wait)
        if self.cell_db_sync is not None:
            self.cell_db_sync.start()
            wait = self.conf.cell_database.startup_sync_timeout
            if wait and not self.cell_db_sync.wait_for_first_attempt(wait):
                LOG.warning('first cell database read still running after %ss; taking calls '
                            'with the hosts file\'s NUMA and PCI data until it finishes', wait)
        view = self.manager.provider_view
        if view is not None:
            # After the syncs' head start: the table of its hosts reads the catalog.
            try:
                view.warm(self.catalog, self.conf.default_availability_zone)
            except ProviderViewError as e:
                LOG.warning('provider view: the first read failed (%s); the first request '
                            'reads again', e)
        self.server.start()

    def stop(self) -> None:
        """Stop taking new calls; calls in flight go on (see wait())."""
        self.server.stop()

    def wait(self) -> None:
        """Return when every call in flight has been answered."""
        self.server.wait()
        self.cleanups.stop()
        if self.journal is not None:
            self.journal.close()
        self.manager.release.stop()
        if self.nova_sync is not None:
            self.nova_sync.stop()
        if self.cell_db_sync is not None:
            self.cell_db_sync.stop()
        if self.metrics is not None:
            self.metrics.stop()
