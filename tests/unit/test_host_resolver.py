"""Providers no host source knows: looked up at once, then set aside, never guessed.

Also what the manager does with the ones left: drop their trees from Placement's
answer (``Candidates.without_trees``), and what a user may read of a query.
"""
from __future__ import annotations

from placement_client.models import Candidates
from placement_client.query import AllocationCandidatesQuery
from scheduler.catalog import HostCatalog
from scheduler.catalog.nova_api import HypervisorInfo
from scheduler.catalog.resolver import HostResolver
from tests.builders import CELL_UUID, uuid_for


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class NovaApi:
    """A host source that knows the nodes in ``nodes`` (uuid -> (node, host))."""


    def __init__(self, catalog: HostCatalog, nodes: dict[str, tuple[str, str]]):
        self.catalog = catalog
        self.nodes = nodes
        self.asked: list[list[str]] = []

    def look_up(self, provider_uuids):
        self.asked.append(list(provider_uuids))
        self.catalog.add_hypervisors(
            HypervisorInfo(provider_uuid=u, nodename=self.nodes[u][0],
                           service_host=self.nodes[u][1])
            for u in provider_uuids if u in self.nodes)


def setup(nodes, *, exclude=True):
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    api = NovaApi(catalog, nodes)
    clock = Clock()
    resolver = HostResolver(catalog.unresolved_providers, [api], exclude_unresolved=exclude,
                            retry_after=30.0, clock=clock)
    return catalog, api, clock, resolver


def test_an_unknown_provider_is_looked_up_and_then_answered_under_its_service_host():
    new = uuid_for('node-1.example.org')
    catalog, api, _, resolver = setup({new: ('node-1.example.org', 'node-1')})

    assert resolver.resolve([new]) == set()
    assert api.asked == [[new]]
    record = catalog.record_for_provider(new, 'node-1.example.org')
    assert (record.service_host, record.nodename) == ('node-1', 'node-1.example.org')
    # Known now: not asked again.
    assert resolver.resolve([new]) == set()
    assert api.asked == [[new]]


def test_a_provider_no_source_knows_is_set_aside_and_asked_about_again_only_later():
    orphan = uuid_for('orphan')
    _, api, clock, resolver = setup({})

    assert resolver.resolve([orphan]) == {orphan}
    clock.now += 29
    assert resolver.resolve([orphan]) == {orphan}
    assert api.asked == [[orphan]]
    clock.now += 1
    assert resolver.resolve([orphan]) == {orphan}
    assert api.asked == [[orphan], [orphan]]


def test_with_guessing_allowed_nothing_is_set_aside():
    orphan = uuid_for('orphan')
    _, api, _, resolver = setup({}, exclude=False)

    assert resolver.resolve([orphan]) == set()
    assert api.asked == [[orphan]]


def test_a_provider_the_hosts_file_names_by_node_is_resolved_without_a_look_up(tmp_path):
    hosts = tmp_path / 'hosts.yaml'
    hosts.write_text('hosts:\n  - nodename: cn1.example.org\n    service_host: cn1\n')
    catalog = HostCatalog.from_file(str(hosts), default_cell_uuid=CELL_UUID)
    catalog.remember_provider_names({uuid_for('cn1'): 'cn1.example.org'})

    assert catalog.unresolved_providers([uuid_for('cn1'), uuid_for('cn2')]) == {uuid_for('cn2')}


def answer(*trees):
    """Placement's answer: one allocation request per (root, [child]) tree."""
    requests, summaries = [], {}
    for root, child in trees:
        allocations = {root: {'resources': {'VCPU': 1}}}
        summaries[root] = {'resources': {}, 'root_provider_uuid': root}
        if child:
            allocations[child] = {'resources': {'CUSTOM_X': 1}}
            summaries[child] = {'resources': {}, 'root_provider_uuid': root}
        requests.append({'allocations': allocations})
    return Candidates.from_json({'allocation_requests': requests,
                                 'provider_summaries': summaries}, '1.39')


def test_dropping_a_tree_drops_its_requests_and_every_summary_in_it():
    a, a_child, b = uuid_for('a'), uuid_for('a-child'), uuid_for('b')
    candidates = answer((a, a_child), (b, None))

    left = candidates.without_trees({a})

    assert candidates.root_provider_uuids() == {a, b}
    assert [list(r['allocations']) for r in left.raw_requests()] == [[b]]
    assert set(left.raw_summaries()) == {b}


def test_a_query_as_a_user_may_read_it_names_no_aggregate_or_provider():
    query = AllocationCandidatesQuery()
    group = query.group()
    group.resources = {'VCPU': 1}
    group.member_of = [frozenset({uuid_for('agg-1'), uuid_for('agg-2')})]
    group.forbidden_aggregates = {uuid_for('agg-3')}
    group.in_tree = uuid_for('cn1')

    shown = query.describe(redact=True)

    assert shown == ('in_tree=<the requested host>&member_of=!in:<an aggregate>&'
                     'member_of=in:<one of 2 aggregates>&resources=VCPU:1')
    for name in ('agg-1', 'agg-2', 'agg-3', 'cn1'):
        assert uuid_for(name) in query.describe()
        assert uuid_for(name) not in shown
