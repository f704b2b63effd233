"""A requested host or node no source knows yet: looked up once before it is refused.

The look-up's bounds (one at a time per name, misses asked about again only later,
failures not fatal), the two sources' look-ups (a SQLite cell database, a stub
compute API), and what the manager does with the answer: the request goes on as
for a known host, and a name nobody knows keeps today's "No such host".
"""
from __future__ import annotations

import logging
import sqlite3
import threading

import pytest

from scheduler import exceptions as exc
from scheduler.catalog import HostCatalog
from scheduler.catalog import destinations as destinations_mod
from scheduler.catalog.cell_db import CellDatabaseReader, CellDatabaseSync
from scheduler.catalog.destinations import DestinationLookup
from scheduler.catalog.nova_api import HypervisorInfo, NovaApiError
from scheduler.catalog.nova_sync import NovaComputeReader, NovaSync
from scheduler.catalog.resolver import HostResolver
from scheduler.context import RequestContext
from scheduler.objects.spec import Destination
from tests.builders import CELL_UUID, select, user_spec, uuid_for, uuids
from tests.fixtures import nova_api_samples as samples
from tests.unit.test_catalog_nova_sync import _Response

ADMIN = 'admin-user'
CONTEXT = RequestContext(request_id='req-destination', user_id=ADMIN, project_id=ADMIN)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class ComputeApi:
    """A source that knows the nodes in ``nodes`` (uuid -> (node, host)), as the
    compute API does: it adds what matches to the catalog."""

    def __init__(self, catalog: HostCatalog, nodes: dict[str, tuple[str, str]]):
        self.catalog = catalog
        self.nodes = nodes
        self.asked: list[tuple[str | None, str | None]] = []
        self.by_uuid: list[list[str]] = []

    def look_up(self, provider_uuids):
        """HostLookup: by root provider uuid."""
        self.by_uuid.append(list(provider_uuids))
        self.catalog.add_hypervisors(
            HypervisorInfo(provider_uuid=u, nodename=self.nodes[u][0],
                           service_host=self.nodes[u][1])
            for u in provider_uuids if u in self.nodes)

    def look_up_names(self, host, node):
        self.asked.append((host, node))
        self.catalog.add_hypervisors(
            HypervisorInfo(provider_uuid=u, nodename=n, service_host=h)
            for u, (n, h) in self.nodes.items()
            if (node is None or n == node) and (host is None or h.lower() == host.lower()))


class Broken:
    def __init__(self) -> None:
        self.asked = 0

    def look_up_names(self, host, node):
        self.asked += 1
        raise RuntimeError('a bug in a source')


def known_in(catalog: HostCatalog):
    return lambda host, node: bool(catalog.find_nodes(host, node))


NEW = uuid_for('node-7.example.org')


def setup(*sources_of, retry_after=30.0):
    catalog, clock = HostCatalog(default_cell_uuid=CELL_UUID), Clock()
    sources = [make(catalog) for make in sources_of]
    lookup = DestinationLookup(known_in(catalog), sources, retry_after=retry_after,
                               clock=clock)
    return catalog, sources, clock, lookup


def api_with_node_7(catalog):
    return ComputeApi(catalog, {NEW: ('node-7.example.org', 'node-7')})


# --------------------------------------------------------------------------- the look-up

@pytest.mark.parametrize('host, node', [('node-7', None), ('NODE-7', None),
                                        (None, 'node-7.example.org'),
                                        ('node-7', 'node-7.example.org')])
def test_a_compute_a_source_knows_is_found_by_host_or_node(host, node):
    catalog, [api], _, lookup = setup(api_with_node_7)

    assert lookup.look_up(host, node) is True

    [record] = catalog.find_nodes(host, node)
    assert (record.provider_uuid, record.service_host) == (NEW, 'node-7')
    assert api.asked == [(host, node)]


def test_without_sources_nothing_is_asked_and_nothing_found():
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    lookup = DestinationLookup(known_in(catalog), [])

    assert lookup.look_up('node-7', None) is False


def test_the_next_source_is_asked_only_while_the_names_are_unknown():
    _, [first, second], _, lookup = setup(api_with_node_7, api_with_node_7)

    assert lookup.look_up('node-7', None) is True
    assert (first.asked, second.asked) == ([('node-7', None)], [])


def test_names_no_source_knows_are_asked_about_again_only_after_retry_after():
    _, [api], clock, lookup = setup(api_with_node_7)

    assert lookup.look_up('nowhere', None) is False
    clock.now += 29
    assert lookup.look_up('NOWHERE', None) is False   # the same host, as Nova matches it
    assert api.asked == [('nowhere', None)]
    clock.now += 1
    assert lookup.look_up('nowhere', None) is False
    assert api.asked == [('nowhere', None), ('nowhere', None)]
    # Other names are not held back by that one.
    assert lookup.look_up('node-7', None) is True


def test_a_source_that_fails_is_logged_and_the_next_one_still_asked(caplog):
    _, [broken, api], _, lookup = setup(lambda catalog: Broken(), api_with_node_7)

    with caplog.at_level(logging.ERROR, logger='scheduler.catalog.destinations'):
        assert lookup.look_up('node-7', None) is True

    assert broken.asked == 1 and api.asked == [('node-7', None)]
    assert 'look-up of the requested host node-7 node None in Broken failed' in caplog.text


def test_a_failed_look_up_counts_as_a_miss():
    _, [broken], _, lookup = setup(lambda catalog: Broken())

    assert lookup.look_up('node-7', None) is False
    assert lookup.look_up('node-7', None) is False
    assert broken.asked == 1


def test_requests_naming_a_compute_being_looked_up_wait_for_that_look_up():
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    api = api_with_node_7(catalog)
    entered, release = threading.Event(), threading.Event()

    class Slow:
        def look_up_names(self, host, node):
            entered.set()
            release.wait(5)
            api.look_up_names(host, node)

    lookup = DestinationLookup(known_in(catalog), [Slow()])
    results: list[bool] = []
    first = threading.Thread(target=lambda: results.append(lookup.look_up('node-7', None)))
    first.start()
    assert entered.wait(5)
    second = threading.Thread(target=lambda: results.append(lookup.look_up('node-7', None)))
    second.start()
    release.set()
    first.join(5)
    second.join(5)

    assert results == [True, True]
    assert api.asked == [('node-7', None)]   # one look-up for both requests


def test_the_names_remembered_as_missed_are_bounded(monkeypatch):
    monkeypatch.setattr(destinations_mod, 'MAX_REMEMBERED', 2)
    _, [api], _, lookup = setup(api_with_node_7)

    for host in ('a', 'b', 'c'):
        lookup.look_up(host, None)
    lookup.look_up('a', None)   # forgotten first: asked again

    assert api.asked == [('a', None), ('b', None), ('c', None), ('a', None)]
    assert len(lookup._missed) == 2


# --------------------------------------------------------------------------- the sources

SCHEMA = """CREATE TABLE compute_nodes (
    id INTEGER PRIMARY KEY, uuid VARCHAR(36), host VARCHAR(255),
    hypervisor_hostname VARCHAR(255), numa_topology TEXT, pci_stats TEXT,
    cpu_allocation_ratio FLOAT, ram_allocation_ratio FLOAT, supported_instances TEXT,
    host_ip VARCHAR(39), hypervisor_type TEXT, hypervisor_version INTEGER, cpu_info TEXT,
    stats TEXT, deleted INTEGER DEFAULT 0)"""


def sqlite_cell(path, rows):
    """(uuid, node, host, deleted) rows in a SQLite compute_nodes table."""
    with sqlite3.connect(path) as db:
        db.execute(SCHEMA)
        db.executemany('INSERT INTO compute_nodes (uuid, hypervisor_hostname, host, deleted) '
                       'VALUES (?, ?, ?, ?)', rows)
    return f'sqlite:///{path}'


@pytest.mark.parametrize('host, node, found', [
    ('node-7', None, ['node-7.example.org', 'node-7b.example.org']),
    (None, 'node-7.example.org', ['node-7.example.org']),
    ('node-7', 'node-7b.example.org', ['node-7b.example.org']),
    ('node-8', 'node-7.example.org', []),
    ('gone', None, []),
])
def test_a_cell_database_is_read_by_service_host_and_node_name(tmp_path, host, node, found):
    url = sqlite_cell(tmp_path / 'cell1.db', [
        (NEW, 'node-7.example.org', 'node-7', 0),
        (uuid_for('7b'), 'node-7b.example.org', 'node-7', 0),
        (uuid_for('8'), 'node-8.example.org', 'node-8', 0),
        (uuid_for('gone'), 'gone.example.org', 'gone', 3)])
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    sync = CellDatabaseSync(catalog, [CellDatabaseReader(url)], interval=3600)

    sync.look_up_names(host, node)

    assert sorted(r.nodename for r in catalog.find_nodes(None, None)) == found


def test_a_cell_database_that_cannot_be_read_leaves_the_catalog_as_it_was(tmp_path, caplog):
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    url = f'sqlite:///{tmp_path / "missing-dir" / "cell.db"}'
    sync = CellDatabaseSync(catalog, [CellDatabaseReader(url)], interval=3600)

    with caplog.at_level(logging.WARNING, logger='scheduler.catalog.cell_db'):
        sync.look_up_names('node-7', None)

    assert catalog.find_nodes(None, None) == []
    assert 'read of the requested host node-7 node None failed' in caplog.text


class SearchAdapter:
    """Answers hypervisor searches by pattern; records the patterns asked for."""

    def __init__(self, hypervisors: list[dict], status: int | None = None):
        self.hypervisors = hypervisors
        self.status = status
        self.asked: list[dict] = []

    def get(self, url, *, params=None, **kw):
        assert url == '/os-hypervisors/detail'
        self.asked.append(dict(params))
        if self.status is not None:
            return _Response(self.status, 'injected')
        matching = [h for h in self.hypervisors
                    if params['hypervisor_hostname_pattern'] in h['hypervisor_hostname']]
        return _Response(200 if matching else 404, {'hypervisors': matching})


def nova_sync(catalog, adapter):
    reader = NovaComputeReader(adapter, microversion='2.87', connect_timeout=1,
                               read_timeout=1, page_size=100)
    return NovaSync(catalog, reader, interval=3600)


HYPERVISORS = [samples.hypervisor(NEW, 'node-7.example.org', 'node-7'),
               samples.hypervisor(uuid_for('17'), 'node-17.example.org', 'node-17')]


@pytest.mark.parametrize('host, node, pattern, found', [
    ('node-7', None, 'node-7', ['node-7.example.org']),   # not node-17: another host
    ('Node-7', None, 'Node-7', []),                      # Nova's LIKE may ignore case; ours
    (None, 'node-7.example.org', 'node-7.example.org', ['node-7.example.org']),
    ('node-17', 'node-7.example.org', 'node-7.example.org', []),
    ('nowhere', None, 'nowhere', []),
])
def test_the_compute_api_is_searched_by_name_and_only_exact_matches_kept(host, node, pattern,
                                                                           found):
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    adapter = SearchAdapter(HYPERVISORS)

    nova_sync(catalog, adapter).look_up_names(host, node)

    assert adapter.asked == [{'hypervisor_hostname_pattern': pattern}]  # never paged
    assert [r.nodename for r in catalog.find_nodes(None, None)] == found


def test_a_compute_api_that_fails_leaves_the_catalog_as_it_was(caplog):
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)

    with caplog.at_level(logging.WARNING, logger='scheduler.catalog.nova_sync'):
        nova_sync(catalog, SearchAdapter(HYPERVISORS, status=503)).look_up_names('node-7', None)

    assert catalog.find_nodes(None, None) == []
    assert 'look-up of the requested host node-7 node None failed: ' in caplog.text
    assert 'HTTP 503' in caplog.text


def test_the_reader_takes_no_match_for_no_hypervisors():
    reader = NovaComputeReader(SearchAdapter([]), microversion='2.87', connect_timeout=1,
                               read_timeout=1, page_size=100)

    assert reader.read_hypervisors_matching('nowhere') == []
    with pytest.raises(NovaApiError, match='HTTP 500'):
        NovaComputeReader(SearchAdapter([], status=500), microversion='2.87',
                          connect_timeout=1, read_timeout=1,
                          page_size=100).read_hypervisors_matching('x')


# --------------------------------------------------------------------------- the manager

def manager_with_new_compute(fake, make_manager):
    """Placement has node-7's provider (named after the node); the catalog does not
    know it, the compute API does."""
    cn0 = fake.add_compute('cn0')
    node = fake.add_compute('node-7.example.org')
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    # cn0 was there at the last sync.
    catalog.add_hypervisors([HypervisorInfo(provider_uuid=cn0, nodename='cn0',
                                            service_host='cn0')])
    api = ComputeApi(catalog, {node: ('node-7.example.org', 'node-7')})
    # As the service wires them: the same sources answer by uuid and by name.
    manager = make_manager(
        catalog=catalog,
        resolver=HostResolver(catalog.unresolved_providers, [api], exclude_unresolved=True),
        destinations=DestinationLookup(known_in(catalog), [api]))
    return manager, api, node


@pytest.mark.parametrize('destination', [Destination(host='node-7'),
                                         Destination(host='node-7', node='node-7.example.org'),
                                         Destination(node='node-7.example.org')])
def test_a_requested_compute_registered_after_the_sync_is_placed(fake, make_manager,
                                                                destination):
    manager, api, node = manager_with_new_compute(fake, make_manager)

    [selections] = select(manager, user_spec(requested_destination=destination), uuids(1),
                          context=CONTEXT, return_alternates=False)

    assert (selections[0].service_host, selections[0].nodename) == ('node-7',
                                                                  'node-7.example.org')
    assert [list(c.kwargs['allocation_request'].allocations)
            for c in fake.calls_to('put_allocations')] == [[node]]


def test_a_forced_host_registered_after_the_sync_is_placed(fake, make_manager):
    manager, api, _ = manager_with_new_compute(fake, make_manager)

    [selections] = select(manager, user_spec(force_hosts=['node-7']), uuids(1),
                          context=CONTEXT, return_alternates=False)

    assert selections[0].service_host == 'node-7'
    assert api.asked == [('node-7', None)]


@pytest.mark.parametrize('nodes, by_name, by_uuid', [
    # Placement has no provider named after the host: looked up by name.
    ([], [('node-7', None)], []),
    # Placement's provider named after the node is looked up by uuid, as candidates are.
    (['node-7.example.org'], [], [[uuid_for('node-7.example.org')]]),
])
def test_a_rebuild_check_of_a_host_registered_after_the_sync_is_judged(fake, make_manager,
                                                                      nodes, by_name, by_uuid):
    manager, api, _ = manager_with_new_compute(fake, make_manager)
    spec = user_spec(rebuild=True, force_hosts=['node-7'], force_nodes=nodes)

    [selections] = select(manager, spec, uuids(1), context=CONTEXT, return_alternates=False)

    assert selections[0].service_host == 'node-7'
    assert (api.asked, api.by_uuid) == (by_name, by_uuid)


def test_a_requested_host_no_source_knows_keeps_today_s_reason(fake, make_manager):
    manager, api, _ = manager_with_new_compute(fake, make_manager)

    for _ in range(2):
        with pytest.raises(exc.NoValidHost) as failure:
            select(manager, user_spec(requested_destination=Destination(host='nowhere')),
                   uuids(1), context=CONTEXT)
        assert failure.value.reason == 'No such host - host: nowhere node: None '

    assert api.asked == [('nowhere', None)]   # not once per request
    assert fake.claims() == []


def test_a_known_host_asks_no_source(fake, make_manager):
    manager, api, _ = manager_with_new_compute(fake, make_manager)

    [selections] = select(manager, user_spec(requested_destination=Destination(host='cn0')),
                          uuids(1), context=CONTEXT, return_alternates=False)

    assert selections[0].service_host == 'cn0'
    assert (api.asked, api.by_uuid) == ([], [])
