"""The services held as disabled or down that no answer of a request can be on are not
read again before it.

Nova reads its services table after Placement answers, and only its candidates' rows
count. A disabled compute's roots carry COMPUTE_STATUS_DISABLED, which every request
forbids on roots: with the provider view, the read before a request leaves those hosts
out, and reads them after all when the request's answer is on one of their roots (a
trait removed since the view's snapshot, or Placement answering from a newer state).
The NovaSync side of it, on a cell database: tests/unit/test_services_between_scans.py.
"""
from __future__ import annotations

import random
import threading
from collections.abc import Collection, Sequence
from dataclasses import replace

import numpy as np

from scheduler.catalog import HostCatalog
from scheduler.catalog.hosts_file import HostsFileContent
from scheduler.catalog.nova_api import ServiceState
from scheduler.host_state import HostRecord
from scheduler.provider_view.hosts import ViewTables
from scheduler.provider_view.reach import HeldRows, out_of_reach
from scheduler.provider_view.view import ProviderView
from tests.builders import SERVICE_CELL, compute_filtered_manager, select, user_spec, uuid_for
from tests.unit.test_provider_view import Reads, snapshot

DISABLED = 'COMPUTE_STATUS_DISABLED'
FORBIDDEN = {DISABLED}


def catalog_of(*nodes: tuple[str, str]) -> HostCatalog:
    """Compute nodes (node name, service host), each the root provider of its name."""
    catalog = HostCatalog(default_cell_uuid=SERVICE_CELL)
    catalog.load_content(HostsFileContent(hosts=tuple(
        HostRecord(nodename=node, service_host=host, cell_uuid=SERVICE_CELL,
                   provider_uuid=uuid_for(node)) for node, host in nodes)), 'test')
    return catalog


def table(view_snapshot, catalog):
    return ViewTables().hosts(view_snapshot, catalog, default_availability_zone='nova')


def test_a_held_host_whose_every_root_carries_a_forbidden_trait_is_out_of_reach():
    catalog = catalog_of(('a', 'a'), ('b', 'b'), ('c', 'c'))
    hosts = table(snapshot(('a', 8, 0), ('b', 8, 0), ('c', 8, 0),
                           traits={'a': {DISABLED}, 'c': {DISABLED}}), catalog)

    # c is not held; d has no root in the view (Placement may know one).
    found = out_of_reach(hosts, ['a', 'b', 'd'], FORBIDDEN)

    assert found is not None and found.hosts == {'a'}
    assert out_of_reach(hosts, ['a', 'b'], set()) is None
    assert out_of_reach(hosts, ['b', 'd'], FORBIDDEN) is None


def test_a_host_with_a_root_that_a_request_can_be_answered_with_is_within_reach():
    # One service host, two nodes (Ironic's shape): read unless both carry the trait.
    catalog = catalog_of(('node1', 'ironic'), ('node2', 'ironic'))
    one = table(snapshot(('node1', 8, 0), ('node2', 8, 0), traits={'node1': {DISABLED}}),
                catalog)
    both = table(snapshot(('node1', 8, 0), ('node2', 8, 0),
                          traits={'node1': {DISABLED}, 'node2': {DISABLED}}), catalog)

    assert out_of_reach(one, ['ironic'], FORBIDDEN) is None
    found = out_of_reach(both, ['ironic'], FORBIDDEN)
    assert found is not None and found.hosts == {'ironic'} and len(found.rows) == 2


def test_an_answer_from_a_later_snapshot_on_a_root_of_a_host_left_out_reaches_it():
    catalog = catalog_of(('a', 'a'), ('b', 'b'))
    before = snapshot(('a', 8, 0), ('b', 8, 0), traits={'a': {DISABLED}, 'b': {DISABLED}})
    found = out_of_reach(table(before, catalog), ['a', 'b'], FORBIDDEN)
    assert found is not None and found.hosts == {'a', 'b'}
    # The same providers, a's trait gone: a request matched on a's row reaches a.
    after = snapshot(('a', 8, 0), ('b', 8, 0), traits={'b': {DISABLED}}
                     ).sharing_providers_of(before)
    a_row, b_row = after.index[uuid_for('a')], after.index[uuid_for('b')]

    assert found.reachable_in_rows(after, np.array([a_row])) == {'a'}
    assert found.reachable_in_rows(after, np.array([], dtype=np.intp)) == set()
    assert found.only({'b'}).reachable_in_rows(after, np.array([a_row, b_row])) == {'b'}
    assert found.only({'c'}) is None


def test_an_answer_from_a_snapshot_of_other_providers_reaches_every_host_left_out():
    # A provider added or deleted since: a new root may be a held host's.
    catalog = catalog_of(('a', 'a'), ('b', 'b'))
    before = snapshot(('a', 8, 0), ('b', 8, 0), traits={'a': {DISABLED}})
    found = out_of_reach(table(before, catalog), ['a'], FORBIDDEN)
    other = snapshot(('a', 8, 0), ('b', 8, 0), ('c', 8, 0), traits={'a': {DISABLED}})

    assert found is not None
    assert found.reachable_in_rows(other, np.array([other.index[uuid_for('b')]])) == {'a'}


def test_placement_s_answer_reaches_the_hosts_left_out_it_holds_a_root_of():
    catalog = catalog_of(('a', 'a'), ('b', 'b'))
    found = out_of_reach(table(snapshot(('a', 8, 0), ('b', 8, 0), traits={'a': {DISABLED}}),
                               catalog), ['a'], FORBIDDEN)

    assert found is not None
    assert found.reachable_in_roots({uuid_for('b')}) == set()
    assert found.reachable_in_roots({uuid_for('a'), uuid_for('b')}) == {'a'}
    # A root the snapshot does not hold may be a new node of a host left out.
    assert found.reachable_in_roots({uuid_for('b'), uuid_for('new')}) == {'a'}


def out_by_definition(hosts, held, forbidden) -> dict[str, set[int]]:
    """Held host -> its roots' snapshot rows, for each held host with a root in the
    table and a forbidden trait on every one of them, worked out the long way."""
    roots: dict[str, set[int]] = {}
    for row, name in enumerate(hosts.table.host_names):
        if name in held:
            roots.setdefault(name, set()).add(int(hosts.roots[row]))
    return {name: rows for name, rows in roots.items()
            if all(set(hosts.snapshot.traits.of(r)) & set(forbidden) for r in rows)}


def as_found(found) -> dict[str, set[int]]:
    if found is None:
        return {}
    assert set(found.owners) == found.hosts and len(found.owners) == len(found.rows)
    out: dict[str, set[int]] = {}
    for owner, row in zip(found.owners, found.rows.tolist(), strict=True):
        out.setdefault(owner, set()).add(row)
    return out


def test_held_hosts_are_out_of_reach_when_every_root_carries_a_forbidden_trait():
    # Random clouds: service hosts of one to three nodes, traits from a few, held
    # hosts with and without roots in the view, and a later read of the same
    # providers with other traits, which keeps the held hosts' rows found before.
    rng = random.Random(20261204)
    kinds = [DISABLED, 'CUSTOM_A', 'CUSTOM_B']

    def traits(nodes):
        return {node: set(rng.sample(kinds, rng.randint(0, 2))) for node, _ in nodes}

    for _ in range(60):
        nodes = [(f'n{i}', f'h{rng.randrange(12)}') for i in range(rng.randint(1, 24))]
        catalog = catalog_of(*nodes)
        tables = ViewTables()
        first = snapshot(*((node, 8, 0) for node, _ in nodes), traits=traits(nodes))
        before = tables.hosts(first, catalog, default_availability_zone='nova')
        held = rng.sample([f'h{i}' for i in range(14)], rng.randint(0, 14))
        forbidden = set(rng.sample(kinds, rng.randint(0, 2)))
        rows = HeldRows.of(before, held)
        assert as_found(out_of_reach(before, held, forbidden)) == as_found(
            rows.out_of_reach(before, forbidden)) == out_by_definition(before, held, forbidden)

        second = snapshot(*((node, 8, rng.randint(0, 4)) for node, _ in nodes),
                          traits=traits(nodes)).sharing_providers_of(first)
        after = tables.hosts(second, catalog, default_availability_zone='nova')
        assert rows.fits(after, held) and not rows.fits(after, list(held))
        assert as_found(rows.out_of_reach(after, forbidden)) == out_by_definition(
            after, held, forbidden)


def test_a_table_that_read_a_host_s_row_again_finds_the_host_by_its_name_then():
    catalog = catalog_of(('n1', 'a'), ('n2', 'b'))
    tables = ViewTables()
    before = tables.hosts(snapshot(('n1', 8, 0), ('n2', 8, 0), traits={'n1': {DISABLED}}),
                          catalog, default_availability_zone='nova')

    class Moved:
        """The catalog as one that said n1 moved to service host c as a named change
        (this catalog makes it a change of everything; the table must not rely on it)."""

        def __init__(self, catalog):
            self.catalog = catalog

        def versions(self):
            return ('moved', self.catalog.versions())

        def changed_hosts_since(self, version):
            return {'a', 'c'}

        def host_rows(self, uuids):
            return [(replace(record, service_host='c') if record.service_host == 'a'
                     else record, *rest) for record, *rest in self.catalog.host_rows(uuids)]

        def __getattr__(self, name):
            return getattr(self.catalog, name)

    moved = Moved(catalog)
    after = tables.hosts(before.snapshot, moved, default_availability_zone='nova')

    assert after.table.host_names == ['c', 'b']
    assert as_found(out_of_reach(after, ['c'], FORBIDDEN)) == {'c': {0}}
    assert out_of_reach(after, ['a'], FORBIDDEN) is None
    assert not HeldRows.of(before, ['c']).fits(after, ['c'])


class HeldServices:
    """The services' reads of NovaSync, written down: cn0 disabled and cn2 silent in the
    catalog, each read applying what the 'database' holds now."""

    def __init__(self, catalog: HostCatalog, now: dict[str, ServiceState]):
        self.catalog, self.now = catalog, now
        self.skipped: list[frozenset[str]] = []
        self.read: list[set[str]] = []
        self._held = ['cn0', 'cn2']
        catalog.apply_service_states({
            'cn0': ServiceState('cn0', up=True, disabled=True),
            'cn1': ServiceState('cn1', up=True),
            'cn2': ServiceState('cn2', up=False)}, [])
        self.lock = threading.Lock()

    def held_hosts(self) -> Sequence[str]:
        return self._held

    def fresh_service_states(self, skip: Collection[str] = ()) -> frozenset[str]:
        left = frozenset(skip) & set(self._held)
        with self.lock:
            self.skipped.append(left)
        self.catalog.update_service_states({h: self.now[h] for h in self._held
                                            if h not in left})
        return left

    def read_again(self, hosts: Collection[str]) -> None:
        with self.lock:
            self.read.append(set(hosts))
        self.catalog.update_service_states({h: self.now[h] for h in hosts})


def three_computes(fake, *, cn0_ram_mb: int = 32768) -> HostCatalog:
    """cn0, cn1 and cn2 in Placement, each its own service host in the catalog."""
    for name in ('cn0', 'cn1', 'cn2'):
        fake.add_compute(name, ram_mb=cn0_ram_mb if name == 'cn0' else 32768)
    return catalog_of(('cn0', 'cn0'), ('cn1', 'cn1'), ('cn2', 'cn2'))


def forbidding_disabled_computes():
    """A request as Nova's request filters leave it: COMPUTE_STATUS_DISABLED forbidden
    on roots."""
    spec = user_spec(vcpus=1)
    spec.request_level_params.root_forbidden.add(DISABLED)
    return spec


def decide(fake, catalog: HostCatalog, view: ProviderView, held: HeldServices, spec,
           refresh=None) -> str:
    """The service host one instance of ``spec`` is placed on, by a manager reading the
    services' state through ``held`` (or ``refresh``)."""
    with compute_filtered_manager(fake, catalog, provider_view=view, held_services=held,
                                  refresh_service_states=refresh or held.fresh_service_states
                                  ) as manager:
        [selections] = select(manager, spec, ['i1'], return_alternates=False)
    return selections[0].service_host


def test_through_the_view_a_request_reads_no_service_of_a_host_it_forbids(fake):
    catalog = three_computes(fake)
    held = HeldServices(catalog, {'cn0': ServiceState('cn0', up=True, disabled=True),
                                  'cn2': ServiceState('cn2', up=True)})    # cn2 back up
    view = ProviderView(Reads(snapshot(('cn0', 16, 0), ('cn1', 16, 8), ('cn2', 16, 0),
                                       traits={'cn0': {DISABLED}})),
                        max_age=300.0, read_behind=False)
    view.warm(catalog)

    host = decide(fake, catalog, view, held, forbidding_disabled_computes())

    assert held.skipped == [{'cn0'}] and held.read == []
    assert host in {'cn1', 'cn2'}


def test_a_host_left_out_whose_trait_is_gone_by_the_answer_is_read_before_it_is_weighed(fake):
    catalog = three_computes(fake, cn0_ram_mb=65536)
    # cn0 was enabled, and its trait removed after the view's last read.
    held = HeldServices(catalog, {'cn0': ServiceState('cn0', up=True),
                                  'cn2': ServiceState('cn2', up=False)})
    now = [0.0]
    first = snapshot(('cn0', 16, 0), ('cn1', 16, 0), ('cn2', 16, 0),
                     traits={'cn0': {DISABLED}})
    second = snapshot(('cn0', 16, 0), ('cn1', 16, 0), ('cn2', 16, 0))
    view = ProviderView(Reads(first, second), max_age=1.0, clock=lambda: now[0],
                        read_behind=False)
    view.warm(catalog)
    now[0] = 5.0                # the request's match reads the second snapshot

    host = decide(fake, catalog, view, held, forbidding_disabled_computes())

    assert held.skipped == [{'cn0'}] and held.read == [{'cn0'}]
    assert host == 'cn0'        # the most free RAM, enabled now


def test_a_host_left_out_that_placement_answers_with_is_read_before_it_is_weighed(fake):
    # The view cannot answer a class a sharing provider may give: Placement does, from
    # its state now, in which cn0 is enabled and has lost its trait.
    catalog = three_computes(fake, cn0_ram_mb=65536)
    held = HeldServices(catalog, {'cn0': ServiceState('cn0', up=True),
                                  'cn2': ServiceState('cn2', up=False)})
    view = ProviderView(Reads(snapshot(('cn0', 16, 0), ('cn1', 16, 0), ('cn2', 16, 0),
                                       ('nfs', 4, 0), parent_of={'nfs': 'cn1'},
                                       traits={'cn0': {DISABLED},
                                               'nfs': {'MISC_SHARES_VIA_AGGREGATE'}})),
                        max_age=300.0, read_behind=False)
    view.warm(catalog)

    host = decide(fake, catalog, view, held, forbidding_disabled_computes())

    assert len(fake.calls_to('get_allocation_candidates')) == 1
    assert held.skipped == [{'cn0'}] and held.read == [{'cn0'}]
    assert host == 'cn0'


def test_without_a_forbidden_trait_every_held_service_is_read(fake):
    catalog = three_computes(fake)
    held = HeldServices(catalog, {'cn0': ServiceState('cn0', up=True, disabled=True),
                                  'cn2': ServiceState('cn2', up=False)})
    view = ProviderView(Reads(snapshot(('cn0', 16, 0), ('cn1', 16, 0), ('cn2', 16, 0),
                                       traits={'cn0': {DISABLED}})),
                        max_age=300.0, read_behind=False)
    view.warm(catalog)
    reads: list[int] = []

    def read_every_held() -> frozenset[str]:
        reads.append(1)
        return held.fresh_service_states()

    decide(fake, catalog, view, held, user_spec(vcpus=1), refresh=read_every_held)

    assert reads == [1] and held.skipped == [frozenset()]
