"""HostCatalog: what Placement does not know about compute hosts.

Placement knows providers, their resources, traits and aggregate UUIDs. A
scheduler also needs the service host and cell of each compute node, aggregate
metadata (availability zones, weight overrides), the instances on each host and
whether the compute service is disabled. Nova reads those from its databases;
this service has none (doc/design.md, D3) and keeps them here, fed by

* a static hosts file (:mod:`scheduler.catalog.hosts_file`), loaded at start-up
  and replaced as a whole by :meth:`HostCatalog.load_file`;
* the fanout casts Nova already sends (aggregates from nova-api, instance lists
  from nova-compute), applied with Nova's semantics where Nova would not need its
  database;
* an optional periodic sync through Nova's compute API
  (:mod:`scheduler.catalog.nova_sync`), applied as a whole by
  :meth:`HostCatalog.apply_nova_snapshot`;
* an optional, read-only periodic read of Nova's cell databases
  (:mod:`scheduler.catalog.cell_db`: NUMA topologies and PCI pools), applied as
  a whole by :meth:`HostCatalog.apply_cell_db_nodes`;
* provider names learned from Placement, for providers the file does not list.

Precedence (doc/host-data.md):

* Aggregates, by uuid: file < Nova API snapshot < casts received after that
  snapshot's read began. A snapshot supersedes the casts received before its
  read began (it reflects them, or something newer). An aggregate deleted by
  a cast stays deleted whatever the file or a snapshot still says (uuids are
  never reused; a snapshot read before the deletion must not bring it back).
  An aggregate updated or deleted by a cast stays so when the file is reloaded.
* Compute nodes: the fields the compute API reports (service host, host_ip,
  hypervisor type/version, cpu_info; per service host: disabled,
  disabled_reason, forced_down, up/down) come from the latest snapshot when it
  has the node (matched by provider uuid, else by nodename); the file supplies
  everything else (cell, supported_instances, stats, metrics) and everything
  for nodes the snapshot does not have. Casts carry no host data.
* NUMA topology, PCI pools, stats and metrics: the cell databases' when they have
  the node (by provider uuid, else nodename) and its row has them, else the
  file's. The cell databases also give the compute API's fields (service host,
  host_ip, hypervisor type/version, cpu_info: the same row's) of nodes the
  compute API snapshot does not have, which is all of them when the ``[nova]``
  sync leaves the hypervisors to the cell databases.

Every method takes the one lock; casts arrive on RPC threads while requests
read. Returned containers are new; the Aggregate and HostRecord objects in them
are shared and must be treated as read-only (the catalog never mutates them, it
replaces them).
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from scheduler.catalog.cell_db import ComputeNodeData
from scheduler.catalog.hosts_child import read_hosts_file
from scheduler.catalog.hosts_file import HostsFileContent, normalize_uuid
from scheduler.catalog.nova_api import HypervisorInfo, NovaSnapshot, ServiceState, ServiceStates
from scheduler.exceptions import CatalogError
from scheduler.host_state import HostRecord, bare_record
from scheduler.objects.spec import Aggregate

LOG = logging.getLogger(__name__)


class _FileLayer:
    """One hosts file's content with the indexes lookups need; never mutated."""

    def __init__(self, content: HostsFileContent, path: str | None):
        self.path = path
        self.content = content
        self.by_provider = {r.provider_uuid: r for r in content.hosts if r.provider_uuid}
        # Only the records without a provider uuid: a provider is matched by name
        # to those alone (a record naming another uuid never matches), and at
        # tens of thousands of hosts an index of every record costs megabytes.
        self.uuidless_by_nodename = {r.nodename: r for r in content.hosts
                                     if not r.provider_uuid}
        self.aggregates = {a.uuid: a for a in content.aggregates}


class _NovaLayer:
    """One compute API snapshot with the indexes lookups need; never mutated."""

    def __init__(self, snapshot: NovaSnapshot, applied: int):
        self.snapshot = snapshot
        self.applied = applied  # how many snapshots were applied, this one included
        self.by_provider = {h.provider_uuid: h for h in snapshot.hypervisors}
        self.by_nodename: dict[str, HypervisorInfo] = {}
        for hypervisor in snapshot.hypervisors:
            self.by_nodename.setdefault(hypervisor.nodename, hypervisor)
        self.aggregates = {a.uuid: a for a in snapshot.aggregates}


class _CellDbLayer:
    """The compute nodes read from the cell databases, indexed; never changed once
    built (the index by name is built when first asked for, under the catalog's lock)."""

    def __init__(self, nodes: Iterable[ComputeNodeData] | dict[str, ComputeNodeData]):
        # Nodes by provider uuid are held as given (see HostCatalog.apply_cell_db_nodes).
        self.by_provider: dict[str, ComputeNodeData] = (
            nodes if isinstance(nodes, dict) else {n.provider_uuid: n for n in nodes})
        # Records are found by their provider's uuid; only a record of the file without
        # one is found by name, which at 50,000 nodes was an index of 1.9 MB in every
        # worker, built every minute and rarely read.
        self._by_nodename: dict[str, ComputeNodeData] | None = None

    @property
    def by_nodename(self) -> dict[str, ComputeNodeData]:
        if self._by_nodename is None:
            by_nodename: dict[str, ComputeNodeData] = {}
            for node in self.by_provider.values():
                if node.nodename:
                    by_nodename.setdefault(node.nodename, node)
            self._by_nodename = by_nodename
        return self._by_nodename

    def find(self, provider_uuid: str | None, nodename: str) -> ComputeNodeData | None:
        if provider_uuid is not None:
            return self.by_provider.get(provider_uuid)
        return self.by_nodename.get(nodename)

    def replacing(self, nodes: Mapping[str, ComputeNodeData]) -> _CellDbLayer:
        """This layer with ``nodes`` in place of the nodes of the same providers, whose
        names they keep (:func:`_node_names`): the indexes as a whole build would make
        them, without one (a dict or two copied, not 50,000 nodes indexed again)."""
        layer = _CellDbLayer(())
        layer.by_provider = {**self.by_provider, **nodes}
        if self._by_nodename is not None:
            by_nodename = layer._by_nodename = dict(self._by_nodename)
            for uuid, node in nodes.items():
                old = self.by_provider[uuid]
                if old.nodename and by_nodename.get(old.nodename) is old:
                    by_nodename[old.nodename] = node
        return layer


#: Changes to named hosts the catalog remembers for changed_hosts_since(): far more
#: than change between two requests, and a change of more hosts than this is a change
#: of everything (each entry is 63 bytes of a worker, for as long as it is remembered).
CHANGE_LOG = 20_000
#: Distinct supported-instances lists the catalog shares between records (a region's
#: computes have a handful; more than this and it starts again).
MAX_INSTANCE_LISTS = 1_000


class HostCatalog:
    def __init__(self, *, default_cell_uuid: str, default_availability_zone: str = 'nova'):
        try:
            self._default_cell_uuid = normalize_uuid(default_cell_uuid)
        except (TypeError, ValueError):
            raise CatalogError(
                f'default cell uuid must be a UUID, got {default_cell_uuid!r}') from None
        self._default_availability_zone = default_availability_zone
        self._lock = threading.Lock()
        # Moves on every change of what host_rows() returns (see versions()); the
        # changes confined to named service hosts (instance lists, service states)
        # are logged, so that a table kept across requests re-reads only their rows
        # (changed_hosts_since()). Nova's computes send their instance lists every
        # two minutes each: at 10,000 hosts, 80 changes a second.
        self._version = 0
        self._changes: collections.deque[tuple[int, str]] = collections.deque(
            maxlen=CHANGE_LOG)
        # The latest version that changed more than named hosts, and the latest
        # whose logged changes are no longer all kept.
        self._wide_change = 0
        self._forgotten = 0
        self._file = _FileLayer(HostsFileContent(), None)
        # Aggregates as the casts left them, and uuids of aggregates deleted by a cast.
        self._cast_aggregates: dict[str, Aggregate] = {}
        self._deleted_aggregates: set[str] = set()
        # Sequence number of every aggregate cast, and of each uuid's latest one:
        # a snapshot supersedes the casts numbered up to its mark (cast_mark()).
        self._cast_seq = 0
        self._cast_seq_by_uuid: dict[str, int] = {}
        self._nova = _NovaLayer(NovaSnapshot(), 0)
        # The mapping last applied by apply_service_states, and the layer it left.
        self._services_applied: tuple[Mapping[str, ServiceState], _NovaLayer] | None = None
        self._cell_db = _CellDbLayer(())
        # Instances per service host, for hosts whose full list we know
        # (insertion-ordered dicts used as sets).
        self._instances: dict[str, dict[str, None]] = {}
        self._provider_names: dict[str, str] = {}
        # host_rows' records per provider uuid, resolved once and reused until one
        # of their sources (file, compute API, cell databases, provider names)
        # changes: every request asks for the same few thousand providers.
        self._resolved: dict[str, HostRecord] = {}
        # Derived from the file and the casts by _rebuild_aggregates().
        self._aggregates: tuple[Aggregate, ...] = ()
        self._aggregates_by_host: dict[str, tuple[Aggregate, ...]] = {}
        # One list per supported-instances tuple of the cell databases' nodes, shared by
        # the records resolved from them (read-only, as the hosts file shares its lists):
        # a list of its own per record was 3.6 MB of a worker at 50,000 nodes.
        self._instance_lists: dict[tuple[tuple[str, str, str], ...],
                                   list[tuple[str, str, str]]] = {}

    # Loading ---------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str, **kw: Any) -> HostCatalog:
        catalog = cls(**kw)
        catalog.load_file(path)
        return catalog

    def load_file(self, path: str) -> None:
        """Replace everything the previous file said; on error nothing changes."""
        self.load_content(read_hosts_file(path, default_cell_uuid=self._default_cell_uuid),
                          path)

    def load_content(self, content: HostsFileContent, source: str) -> None:
        """Replace the file layer with ``content`` (a parsed hosts file from ``source``)."""
        layer = _FileLayer(content, source)
        with self._lock:
            self._changed()
            self._file = layer
            self._resolved = {}
            self._rebuild_aggregates()
        LOG.info('host catalog loaded %s: %d hosts, %d aggregates, %d cells', source,
                 len(content.hosts), len(content.aggregates), len(content.cells))

    # Hosts -----------------------------------------------------------------------------
    def record_for_provider(self, provider_uuid: str, provider_name: str | None) -> HostRecord:
        """The record of the compute node whose root provider this is.

        Known by provider uuid, else by nodename == provider name (the name
        Placement gives a compute node's provider); a file record that names a
        different provider uuid does not match by name. Unknown providers get a
        record whose node and service host are the provider name (the uuid
        when no name is known) in the default cell.
        """
        with self._lock:
            record, _ = self._resolve(provider_uuid, provider_name)
        return record

    def host_rows(self, provider_uuids: Sequence[str]
                  ) -> list[tuple[HostRecord, tuple[Aggregate, ...], tuple[str, ...], bool]]:
        """Per root provider, in order: its record (as :meth:`record_for_provider`),
        its aggregates, the uuids of its instances, and whether instance info was
        ever reported (:meth:`has_instance_info`), read under one lock: one
        consistent view of the catalog for a whole request, at a cost per host
        low enough for tens of thousands of hosts."""
        rows = []
        with self._lock:
            aggregates_by_host = self._aggregates_by_host
            instances = self._instances
            resolved = self._resolved
            for provider_uuid in provider_uuids:
                record = resolved.get(provider_uuid)
                if record is None:
                    record = resolved[provider_uuid] = self._resolve(provider_uuid, None)[0]
                host = record.service_host
                on_host = instances.get(host)
                rows.append((record, aggregates_by_host.get(host, ()),
                             tuple(on_host) if on_host is not None else (),
                             on_host is not None))
        return rows

    def versions(self) -> object:
        """A value that changes whenever anything :meth:`host_rows` returns may have
        changed (a table kept across requests is read again then)."""
        with self._lock:
            return self._version

    def changed_hosts_since(self, version: object) -> set[str] | None:
        """The service hosts whose :meth:`host_rows` may have changed since
        :meth:`versions` returned ``version``; None when more than named hosts may
        have (a file, a snapshot, aggregates, names), or when that is too long ago."""
        with self._lock:
            if (not isinstance(version, int) or version > self._version
                    or version < max(self._wide_change, self._forgotten)):
                return None
            hosts = set()
            for changed_at, host in reversed(self._changes):
                if changed_at <= version:
                    break
                hosts.add(host)
            return hosts

    def _changed(self, hosts: Iterable[str] | None = None) -> None:
        """Under the lock: a new version, which changed ``hosts``' rows (None: any)."""
        self._version += 1
        if hosts is not None and not isinstance(hosts, Collection):
            hosts = list(hosts)
        if hosts is None or len(hosts) > (self._changes.maxlen or 0):
            self._wide_change = self._version
            return
        for host in hosts:
            if len(self._changes) == self._changes.maxlen:
                self._forgotten = self._changes[0][0]
            self._changes.append((self._version, host))

    def provider_name(self, provider_uuid: str) -> str | None:
        with self._lock:
            name = self._provider_names.get(provider_uuid)
            if name is None:
                record = self._file.by_provider.get(provider_uuid)
                hypervisor = self._nova.by_provider.get(provider_uuid)
                node = self._cell_db.by_provider.get(provider_uuid)
                name = (record.nodename if record else
                        hypervisor.nodename if hypervisor else
                        node.nodename if node else None)
        return name

    def remember_provider_names(self, names: Mapping[str, str]) -> None:
        """Learn provider uuid -> name pairs from Placement."""
        with self._lock:
            known = self._provider_names
            if any(known.get(uuid) != name for uuid, name in names.items()):
                self._changed()
                known.update(names)
                self._resolved = {}

    def unknown_provider_uuids(self, uuids: Iterable[str]) -> set[str]:
        """The uuids for which neither the file nor Placement told us a name."""
        with self._lock:
            return self._not_known_by_uuid(uuids).difference(self._provider_names)

    def unresolved_providers(self, uuids: Iterable[str]) -> set[str]:
        """The root providers whose service host no source states: not in the file
        (by uuid, or by the provider's name as a node name), the compute API
        snapshot or the cell databases. Such a provider's record carries a guess
        (its name as service host, in the default cell)."""
        with self._lock:
            candidates = self._not_known_by_uuid(uuids)
            if not candidates:
                return candidates
            by_name = self._file.uuidless_by_nodename
            return {u for u in candidates if self._provider_names.get(u) not in by_name}

    def add_hypervisors(self, hypervisors: Iterable[HypervisorInfo]) -> None:
        """Compute nodes looked up one by one (:mod:`scheduler.catalog.resolver`):
        added to the latest snapshot until the next one replaces it."""
        found = list(hypervisors)
        if not found:
            return
        with self._lock:
            self._changed()
            snapshot = self._nova.snapshot
            known = {h.provider_uuid for h in found}
            merged = tuple(h for h in snapshot.hypervisors if h.provider_uuid not in known)
            self._nova = _NovaLayer(
                dataclasses.replace(snapshot, hypervisors=merged + tuple(found)),
                self._nova.applied)
            for uuid in known:
                self._resolved.pop(uuid, None)
        LOG.info('compute nodes looked up in the compute API: %s',
                 ', '.join(f'{h.nodename} on {h.service_host}' for h in found))

    def add_cell_db_nodes(self, nodes: Iterable[ComputeNodeData]) -> None:
        """Compute nodes read by uuid from a cell database: added to, or replacing
        their rows in, what the last read of every cell said.

        Read before every request that asks for NUMA or PCI (``[cell_database]
        max_age`` 0), for its candidates, and mostly as they were: only the hosts
        whose nodes changed lose their resolved records. Taking every node read as a
        change of everything cost each such request, at 50,000 computes, the rows of
        every host a table kept across requests reads again (doc/performance.md).
        A node added or renamed (which moves what names resolve to) is still a
        change of everything.
        """
        found = list(nodes)
        if not found:
            return
        with self._lock:
            before = self._cell_db.by_provider
            changed = {n.provider_uuid: n for n in found
                       if (old := before.get(n.provider_uuid)) is not n and old != n}
            if not changed:
                return
            moved = any(_node_names(before.get(uuid)) != _node_names(node)
                        for uuid, node in changed.items())
            if moved:
                self._cell_db = _CellDbLayer({**before, **changed}.values())
                self._changed()
            else:
                self._cell_db = self._cell_db.replacing(changed)
                resolved = self._resolved
                hosts = {resolved[uuid].service_host if uuid in resolved
                         else node.service_host for uuid, node in changed.items()}
                self._changed({host for host in hosts if host is not None})
            for uuid in changed:
                self._resolved.pop(uuid, None)
        new = [n for uuid, n in changed.items() if uuid not in before]
        if new:
            LOG.info('compute nodes read from their cell database: %s',
                     ', '.join(f'{n.nodename} on {n.service_host}' for n in new))

    def cell_databases_have(self, provider_uuids: Iterable[str]) -> bool:
        """Whether the cell databases' last reads hold every one of these compute
        nodes (then they say all the compute API's hypervisor list would)."""
        with self._lock:
            return set(provider_uuids).issubset(self._cell_db.by_provider)

    def find_nodes(self, host: str | None, node: str | None) -> list[HostRecord]:
        """Compute nodes on service ``host`` (case-insensitive, as Nova matches forced
        hosts) and named ``node`` (exact); None matches any. Sorted by host, node.

        Candidates are the file's records and the providers whose names were
        learned from Placement; records carry the provider uuid when known.
        """
        with self._lock:
            records = self._all_records()
        wanted_host = host.lower() if host is not None else None
        return sorted(
            (r for r in records
             if (wanted_host is None or r.service_host.lower() == wanted_host)
             and (node is None or r.nodename == node)),
            key=lambda r: (r.service_host, r.nodename))

    def cells(self) -> set[str]:
        """Every cell a node can be in, the default cell included."""
        with self._lock:
            return self._cells()

    # Aggregates ------------------------------------------------------------------------
    def aggregates_for_host(self, service_host: str) -> list[Aggregate]:
        with self._lock:
            return list(self._aggregates_by_host.get(service_host, ()))

    def all_aggregates(self) -> list[Aggregate]:
        """Every aggregate (file and casts), ordered by id: for lookups by metadata
        key prefix or value, which the request filters need (Nova queries its API
        database with LIKE there)."""
        with self._lock:
            return list(self._aggregates)

    def aggregates_with_metadata(self, key: str, value: str | None = None) -> list[Aggregate]:
        """Aggregates whose metadata has ``key`` (with ``value``, when given)."""
        with self._lock:
            aggregates = self._aggregates
        return [a for a in aggregates
                if key in a.metadata and (value is None or a.metadata[key] == value)]

    def availability_zone(self, service_host: str) -> str:
        """The host's AZ: from its aggregates' metadata, else the default AZ."""
        for aggregate in self.aggregates_for_host(service_host):
            if aggregate.availability_zone:
                return aggregate.availability_zone
        return self._default_availability_zone

    # Instances -------------------------------------------------------------------------
    def instances_on_host(self, service_host: str) -> dict[str, dict]:
        """uuid -> ``{'uuid': uuid}`` for the instances the casts reported on the host."""
        with self._lock:
            uuids = list(self._instances.get(service_host, ()))
        return {u: {'uuid': u} for u in uuids}

    def has_instance_info(self, service_host: str) -> bool:
        """Whether a cast ever told us the instances on the host (an empty
        :meth:`instances_on_host` is otherwise "unknown", not "none")."""
        with self._lock:
            return service_host in self._instances

    # Fanout casts ----------------------------------------------------------------------
    def update_aggregates(self, aggregates: list[Aggregate] | Aggregate) -> None:
        """Nova's HostManager.update_aggregates: each aggregate replaces the one with
        its uuid, and its host list replaces its old memberships."""
        if isinstance(aggregates, Aggregate):  # Nova's manager accepts one, too
            aggregates = [aggregates]
        copies = [_copy_aggregate(a) for a in aggregates]
        with self._lock:
            self._changed()
            for aggregate in copies:
                self._cast_seq += 1
                self._cast_seq_by_uuid[aggregate.uuid] = self._cast_seq
                self._cast_aggregates[aggregate.uuid] = aggregate
                self._deleted_aggregates.discard(aggregate.uuid)
            self._rebuild_aggregates()
        LOG.debug('aggregates updated by cast: %s', [a.name for a in copies])

    def delete_aggregate(self, aggregate: Aggregate) -> None:
        aggregate = _copy_aggregate(aggregate)
        with self._lock:
            self._changed()
            self._cast_seq += 1
            self._cast_seq_by_uuid[aggregate.uuid] = self._cast_seq
            self._cast_aggregates.pop(aggregate.uuid, None)
            self._deleted_aggregates.add(aggregate.uuid)
            self._rebuild_aggregates()
        LOG.debug('aggregate %s deleted by cast', aggregate.name)

    def update_instance_info(self, host: str, instance_uuids: list[str]) -> None:
        """New or changed instances on ``host``.

        Known host: merged. Unknown host: Nova takes a list of more than one
        instance as the host's full list and re-reads the database otherwise;
        with no database, any list is taken as the full list until the next
        sync_instance_info (nova-compute sends one every 120 s by default).
        """
        with self._lock:
            self._changed([host])
            known = self._instances.get(host)
            if known is None:
                self._instances[host] = dict.fromkeys(instance_uuids)
            else:
                known.update(dict.fromkeys(instance_uuids))

    def delete_instance_info(self, host: str, instance_uuid: str) -> None:
        """An instance left ``host``. Unknown host: nothing is known to remove (Nova
        would re-read the database); the host stays unknown until a list arrives."""
        with self._lock:
            self._changed([host])
            known = self._instances.get(host)
            if known is not None:
                known.pop(instance_uuid, None)

    def sync_instance_info(self, host: str, instance_uuids: list[str]) -> None:
        """The full list of instances on ``host``. Nova keeps its view when the list
        matches and re-reads the database when it does not; the compute host's own
        list is what that read would return, so it replaces ours."""
        with self._lock:
            self._changed([host])
            self._instances[host] = dict.fromkeys(instance_uuids)

    # Nova compute API sync -------------------------------------------------------------
    def cast_mark(self) -> int:
        """Take before reading a snapshot; hand to :meth:`apply_nova_snapshot`."""
        with self._lock:
            return self._cast_seq

    def apply_nova_snapshot(self, snapshot: NovaSnapshot, *, cast_mark: int,
                            keep_services: bool = False) -> None:
        """Replace the previous snapshot with ``snapshot``, atomically.

        ``cast_mark`` is :meth:`cast_mark` taken before the read began: aggregate
        updates cast up to then are superseded by the snapshot; later ones stay
        on top of it. Deletions by cast always stay (see the module docstring).
        ``keep_services``: the services' state (and the hosts of down cells) stay
        those the catalog holds, whatever the snapshot says of them.
        """
        if not isinstance(snapshot.services, ServiceStates):
            snapshot = dataclasses.replace(snapshot,
                                           services=ServiceStates.of(snapshot.services))
        with self._lock:
            old, aggregates = self._nova, self._aggregates
            if keep_services:
                snapshot = dataclasses.replace(
                    snapshot, services=old.snapshot.services,
                    unknown_services=old.snapshot.unknown_services)
            for agg_uuid in [u for u in self._cast_aggregates
                             if self._cast_seq_by_uuid.get(u, 0) <= cast_mark]:
                del self._cast_aggregates[agg_uuid]
            # A deletion marker only matters while something could still show the
            # aggregate; drop the old ones neither the file nor Nova mentions.
            in_snapshot = {a.uuid for a in snapshot.aggregates}
            self._deleted_aggregates = {
                u for u in self._deleted_aggregates
                if self._cast_seq_by_uuid.get(u, 0) > cast_mark
                or u in self._file.aggregates or u in in_snapshot}
            self._cast_seq_by_uuid = {
                u: n for u, n in self._cast_seq_by_uuid.items()
                if u in self._cast_aggregates or u in self._deleted_aggregates}
            self._nova = _NovaLayer(snapshot, old.applied + 1)
            self._rebuild_aggregates()
            # A snapshot every minute in every worker, mostly the same as the last:
            # only the hosts whose records it moves are resolved again (50,000 records
            # each minute were a fifth of a worker's CPU at 50,000 computes).
            hosts = _hosts_moved(old.snapshot, snapshot)
            self._changed(hosts if hosts is not None and self._aggregates == aggregates
                          else None)
            if hosts is None:
                self._resolved = {}
            elif hosts:
                self._resolved = {uuid: record for uuid, record in self._resolved.items()
                                  if record.service_host not in hosts}
        LOG.debug('compute API snapshot applied: %d aggregates, %d services, %d hypervisors',
                  len(snapshot.aggregates), len(snapshot.services), len(snapshot.hypervisors))

    def apply_service_states(self, services: Mapping[str, ServiceState],
                             unknown: Sequence[str] = ()) -> None:
        """A fresher read of the compute services than the latest snapshot's.

        Read before every request by default, and every heartbeat moves some
        service's ``updated_at``: only the hosts whose records would change
        (:func:`_service_fields`) lose their resolved records, and a read that
        changes none leaves the catalog as it is. A ``dict`` given becomes the
        catalog's own: the caller must not change it afterwards.
        """
        with self._lock:
            changed = self._apply_service_states(services, unknown)
        if changed is not None:
            LOG.debug('compute service states applied: %d services, %d changed',
                      len(services), changed)

    def service_states(self) -> ServiceStates:
        """The compute services' state the catalog holds, by service host (not to be
        changed: the catalog's own mapping)."""
        return ServiceStates.of(self._nova.snapshot.services)

    def update_service_states(self, fresh: Mapping[str, ServiceState]) -> int:
        """Some services' state, read after the catalog's: each replaces the one held
        for its host (the others are kept); how many of them differed."""
        with self._lock:
            held = ServiceStates.of(self._nova.snapshot.services)
            moved = {host: state for host, state in fresh.items() if held.get(host) != state}
            if moved:
                self._apply_service_states(held.updated(moved),
                                           self._nova.snapshot.unknown_services)
        return len(moved)

    def _apply_service_states(self, services: Mapping[str, ServiceState],
                              unknown: Sequence[str]) -> int | None:
        """Under the lock: :meth:`apply_service_states`; how many hosts changed, None
        when the read was the one applied last."""
        snapshot = self._nova.snapshot
        # A read that changed no key hands back the last read's mapping itself
        # (ServicesParser): nothing to compare, record by record.
        applied = self._services_applied
        if (applied is not None and applied[0] is services and applied[1] is self._nova
                and snapshot.unknown_services == tuple(unknown)):
            return None
        # The read's own states, not a copy (its maker keeps them only to hand them back
        # unchanged, ServicesParser): a copy was 2.2 MB of a worker at 50,000 services.
        held = ServiceStates.of(services)
        changed = _services_moved(snapshot.services, held)
        if not changed and snapshot.unknown_services == tuple(unknown):
            self._services_applied = (services, self._nova)
            return 0
        self._changed(changed if snapshot.unknown_services == tuple(unknown) else None)
        self._nova = _NovaLayer(dataclasses.replace(
            snapshot, services=held, unknown_services=tuple(unknown)), self._nova.applied)
        if changed:
            self._resolved = {uuid: record for uuid, record in self._resolved.items()
                              if record.service_host not in changed}
        self._services_applied = (services, self._nova)
        return len(changed)

    # Nova cell databases ----------------------------------------------------------------
    def apply_cell_db_nodes(self, nodes: Iterable[ComputeNodeData] | dict[str, ComputeNodeData]
                            ) -> None:
        """Replace what the cell databases said (every cell's last good read), atomically.

        Read every minute in every worker, and mostly the same: only the hosts whose
        nodes changed lose their resolved records (a table then reads their rows
        again, not all of them); a node added, gone or renamed (which moves what
        names resolve to) is a change of everything, as any read was before.

        A ``dict`` of nodes by provider uuid (one cell's reader's last read) is held as
        given, not indexed again: the caller must not change it afterwards.
        """
        layer = _CellDbLayer(nodes)
        with self._lock:
            before, after = self._cell_db.by_provider, layer.by_provider
            changed = [uuid for uuid, node in after.items()
                       if (old := before.get(uuid)) is not node and old != node]
            moved = len(before) != len(after) or any(
                _node_names(before.get(uuid)) != _node_names(after[uuid]) for uuid in changed)
            self._cell_db = layer
            if moved:
                self._changed()
                self._resolved = {}
            elif changed:
                hosts = {self._resolved[uuid].service_host
                         for uuid in changed if uuid in self._resolved}
                self._changed(hosts)
                self._resolved = {uuid: record for uuid, record in self._resolved.items()
                                  if record.service_host not in hosts}
        LOG.debug('cell database nodes applied: %d, %d changed%s', len(after), len(changed),
                  ' (names moved)' if moved else '')

    # Introspection ---------------------------------------------------------------------
    def snapshot_stats(self) -> dict:
        with self._lock:
            return {
                'hosts_file': self._file.path,
                'file_hosts': len(self._file.content.hosts),
                'file_aggregates': len(self._file.aggregates),
                'cells': len(self._cells()),
                'aggregates': len(self._aggregates),
                'aggregates_from_casts': len(self._cast_aggregates),
                'aggregates_deleted_by_casts': len(self._deleted_aggregates),
                'hosts_with_instance_info': len(self._instances),
                'instances': sum(len(v) for v in self._instances.values()),
                'provider_names': len(self._provider_names),
                'nova_snapshots_applied': self._nova.applied,
                'nova_aggregates': len(self._nova.aggregates),
                'nova_services': len(self._nova.snapshot.services),
                'nova_hypervisors': len(self._nova.by_provider),
                'cell_db_nodes': len(self._cell_db.by_provider),
            }

    # Internals (callers hold the lock) -------------------------------------------------
    def _not_known_by_uuid(self, uuids: Iterable[str]) -> set[str]:
        """The uuids neither the file, the compute API snapshot nor the cell
        databases name. Set differences run in C and probe each dict once per uuid
        asked about (a thousand roots per request), whatever the dicts' sizes."""
        return (set(uuids).difference(self._file.by_provider)
                .difference(self._nova.by_provider)
                .difference(self._cell_db.by_provider))

    def _resolve(self, provider_uuid: str, provider_name: str | None
                 ) -> tuple[HostRecord, bool]:
        """(record with the Nova API's fields, whether it comes from the file)."""
        record = self._file.by_provider.get(provider_uuid)
        if record is not None:
            return self._with_nova(record), True
        hypervisor = self._nova.by_provider.get(provider_uuid)
        node = self._cell_db.by_provider.get(provider_uuid)
        name = (hypervisor.nodename if hypervisor else None) \
            or (node.nodename if node else None) or provider_name \
            or self._provider_names.get(provider_uuid)
        if name is not None:
            record = self._file.uuidless_by_nodename.get(name)
            if record is not None:
                return self._with_nova(
                    dataclasses.replace(record, provider_uuid=provider_uuid)), True
        name = name or provider_uuid
        return self._with_nova(bare_record(name, name, self._default_cell_uuid,
                                           provider_uuid)), False

    def _with_nova(self, record: HostRecord) -> HostRecord:
        """``record`` with the fields the latest compute API snapshot and the cell
        databases report."""
        if record.provider_uuid is not None:
            hypervisor = self._nova.by_provider.get(record.provider_uuid)
        else:
            hypervisor = self._nova.by_nodename.get(record.nodename)
        changes: dict[str, Any] = {}
        if hypervisor is not None:
            changes.update(_hypervisor_fields(hypervisor))
        node = self._cell_db.find(record.provider_uuid, record.nodename)
        if node is not None:
            if hypervisor is None:
                # The row the compute API's hypervisor list would show them from.
                changes.update(_hypervisor_fields(node))
            if node.cell_uuid is not None:
                changes['cell_uuid'] = node.cell_uuid
            if node.supported_instances is not None:
                changes['supported_instances'] = self._instance_list(node.supported_instances)
                changes['supported_instances_reported'] = True
            if node.numa_topology is not None:
                changes['numa_topology'] = node.numa_topology
            if node.pci_stats is not None:
                changes['pci_pools'] = node.pci_stats
            if node.stats is not None:
                changes['stats'] = node.stats
            if node.metrics is not None:
                changes['metrics'] = node.metrics
        service = self._nova.snapshot.services.get(
            changes.get('service_host', record.service_host))
        if service is not None:
            changes.update(_service_fields(service))
        return dataclasses.replace(record, **changes) if changes else record

    def _instance_list(self, supported: tuple[tuple[str, str, str], ...]
                       ) -> list[tuple[str, str, str]]:
        lists = self._instance_lists
        shared = lists.get(supported)
        if shared is None:
            if len(lists) >= MAX_INSTANCE_LISTS:   # not a handful of models: share less
                lists.clear()
            shared = lists[supported] = list(supported)
        return shared

    def _cells(self) -> set[str]:
        result = set(self._file.content.cells)
        result.update(r.cell_uuid for r in self._file.content.hosts)
        result.update(n.cell_uuid for n in self._cell_db.by_provider.values() if n.cell_uuid)
        result.add(self._default_cell_uuid)
        return result

    def _all_records(self) -> list[HostRecord]:
        # Providers known by uuid (from Nova first, then learned from Placement)
        # but not in the file by uuid: the file names them by nodename, or not at all.
        known: dict[str, str] = {u: h.nodename for u, h in self._nova.by_provider.items()}
        for provider_uuid, node in self._cell_db.by_provider.items():
            if node.nodename:
                known.setdefault(provider_uuid, node.nodename)
        for provider_uuid, name in self._provider_names.items():
            known.setdefault(provider_uuid, name)
        by_name: dict[str, str] = {}
        for provider_uuid, name in known.items():
            if provider_uuid not in self._file.by_provider:
                by_name.setdefault(name, provider_uuid)
        records = []
        for record in self._file.content.hosts:
            learned = by_name.get(record.nodename) if record.provider_uuid is None else None
            records.append(self._with_nova(dataclasses.replace(record, provider_uuid=learned)
                                           if learned else record))
        for provider_uuid, name in known.items():
            record, from_file = self._resolve(provider_uuid, name)
            if not from_file:
                records.append(record)
        return records

    def _rebuild_aggregates(self) -> None:
        merged = {u: a for u, a in self._file.aggregates.items()
                  if u not in self._deleted_aggregates}
        merged.update((u, a) for u, a in self._nova.aggregates.items()
                      if u not in self._deleted_aggregates)
        merged.update(self._cast_aggregates)
        ordered = tuple(sorted(merged.values(), key=lambda a: (a.id, a.uuid)))
        if ordered == self._aggregates:
            # Each worker's compute-API sync brings, once a minute, new objects of the
            # same aggregates; the walk below over every member of each took 19 ms
            # alone at 50,000 hosts, and 3% of a loaded worker's profile samples
            # (doc/performance.md). The old objects stay, and with them what was
            # derived from them.
            return
        # Hosts in the same aggregates share one tuple (tens of thousands of hosts,
        # a handful of combinations), from the start: a list per host first, freed
        # at the end, made this step allocate 9 MB instead of 3 at 50,000 hosts.
        # A host's next tuple is found by (its tuple, the aggregate) by identity:
        # every tuple stays alive in `following`, every aggregate in `ordered`.
        following: dict[tuple[int, int], tuple[Aggregate, ...]] = {}
        by_host: dict[str, tuple[Aggregate, ...]] = {}
        for aggregate in ordered:
            for host in dict.fromkeys(aggregate.hosts):
                current = by_host.get(host, ())
                key = (id(current), id(aggregate))
                after = following.get(key)
                if after is None:
                    after = following[key] = (*current, aggregate)
                by_host[host] = after
        self._aggregates = ordered
        self._aggregates_by_host = by_host


def _hosts_moved(old: NovaSnapshot, new: NovaSnapshot) -> set[str] | None:
    """The service hosts whose records (:meth:`HostCatalog._with_nova`, which reads no
    aggregate) differ between the two snapshots; None when any record may differ: the
    hypervisors' names, hosts, number or order moved (records found by name), or the
    hosts of down cells."""
    if old.unknown_services != new.unknown_services or [
            h.provider_uuid for h in old.hypervisors] != [
            h.provider_uuid for h in new.hypervisors]:
        return None
    hosts: set[str] = set()
    for before, after in zip(old.hypervisors, new.hypervisors, strict=True):
        if before != after:
            if (before.nodename, before.service_host) != (after.nodename, after.service_host):
                return None
            if after.service_host:
                hosts.add(after.service_host)
    return hosts | _services_moved(old.services, new.services)


def _services_moved(old: Mapping[str, ServiceState],
                    new: Mapping[str, ServiceState]) -> set[str]:
    """The hosts whose records the move from ``old`` to ``new`` services' states changes
    (added, gone, or a field a record takes moved)."""
    old, new = ServiceStates.of(old), ServiceStates.of(new)
    # A host up and enabled on both sides has the same record; the others are few.
    hosts = old.other.keys() | new.other.keys()
    if old.usual is not new.usual:
        hosts.update(old.usual ^ new.usual)
    moved = set()
    for host in hosts:
        # The parser hands back the same object for a state that did not move.
        before, after = old.get(host), new.get(host)
        if before is not after and (before is None or after is None
                                    or _service_fields(before) != _service_fields(after)):
            moved.add(host)
    return moved


def _node_names(node: ComputeNodeData | None) -> tuple[str | None, ...] | None:
    """What a cell database's node says about names and places, which records of
    other providers and lookups by name may depend on."""
    if node is None:
        return None
    return (node.nodename, node.service_host, node.cell_uuid)


def _hypervisor_fields(source: HypervisorInfo | ComputeNodeData) -> dict[str, Any]:
    """What a compute node's record takes from the compute API's hypervisor list, or
    from the cell database row that list shows; a null there means "not reported",
    and the file's value stays. A ``cpu_info`` is shared, not copied (records are
    read-only, and the nodes of one model share one, as the hosts file's do)."""
    changes: dict[str, Any] = {}
    if source.service_host:
        changes['service_host'] = source.service_host
    for name in ('host_ip', 'hypervisor_type', 'hypervisor_version'):
        value = getattr(source, name)
        if value is not None:
            changes[name] = value
    if source.cpu_info:
        cpu_info = source.cpu_info
        changes['cpu_info'] = cpu_info if isinstance(cpu_info, dict) else dict(cpu_info)
    return changes


def _service_fields(service: ServiceState) -> dict[str, Any]:
    """What a compute node's record takes from its service's state."""
    return {'disabled': service.disabled, 'disabled_reason': service.disabled_reason,
            'forced_down': service.forced_down, 'last_seen_up': service.last_seen_up}


def _copy_aggregate(aggregate: Aggregate) -> Aggregate:
    if not isinstance(aggregate, Aggregate):
        raise CatalogError(f'expected an Aggregate, got {type(aggregate).__name__}')
    # The caller keeps its object; ours must not change under the lock's feet.
    return Aggregate(id=aggregate.id, uuid=aggregate.uuid, name=aggregate.name,
                     hosts=list(aggregate.hosts or ()), metadata=dict(aggregate.metadata or {}))
