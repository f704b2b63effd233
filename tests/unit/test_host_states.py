"""Host states from Placement's answer (the rows of a host table): trees, sharing
providers, the catalog, consumption.

One cloud throughout: compute ``cn1`` is a tree (memory on the root, vCPUs on
two NUMA children), ``cn2`` a single provider, and ``nfs`` a sharing provider
of disk (MISC_SHARES_VIA_AGGREGATE) both computes use.
"""
from __future__ import annotations

import pytest

from placement_client.models import AllocationRequest, Candidates, ProviderSummary, ResourceUsage
from scheduler.catalog import HostCatalog
from scheduler.host_state import SHARING_TRAIT
from scheduler.host_table import HostTable
from scheduler.objects.spec import Aggregate
from tests.builders import CELL, host_states, uuid_for

CN1, NUMA0, NUMA1 = uuid_for('cn1'), uuid_for('cn1-numa0'), uuid_for('cn1-numa1')
CN2, NFS = uuid_for('cn2'), uuid_for('nfs')
INSTANCE = '6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e8b01'


def summary(rp: str, root: str, parent: str | None = None, traits=(), **resources):
    return ProviderSummary(uuid=rp, root_provider_uuid=root, parent_provider_uuid=parent,
                           resources={rc: ResourceUsage(*usage) for rc, usage in
                                      resources.items()},
                           traits=frozenset(traits))


SUMMARIES = {
    CN1: summary(CN1, CN1, MEMORY_MB=(16384, 1024), traits=['HW_CPU_X86_AVX2']),
    NUMA0: summary(NUMA0, CN1, CN1, VCPU=(4, 3)),
    NUMA1: summary(NUMA1, CN1, CN1, VCPU=(4, 0)),
    CN2: summary(CN2, CN2, VCPU=(8, 0), MEMORY_MB=(8192, 0), DISK_GB=(100, 10)),
    NFS: summary(NFS, NFS, DISK_GB=(10000, 500), traits=[SHARING_TRAIT]),
}

ON_NUMA0 = AllocationRequest({CN1: {'MEMORY_MB': 512}, NUMA0: {'VCPU': 1}, NFS: {'DISK_GB': 10}})
ON_NUMA1 = AllocationRequest({CN1: {'MEMORY_MB': 512}, NUMA1: {'VCPU': 1}, NFS: {'DISK_GB': 10}})
CHILD_ONLY = AllocationRequest({NUMA1: {'VCPU': 2}})
ON_CN2 = AllocationRequest({CN2: {'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 10}})
CN2_WITH_NFS = AllocationRequest({CN2: {'VCPU': 1, 'MEMORY_MB': 512}, NFS: {'DISK_GB': 10}})


def candidates(*requests: AllocationRequest) -> Candidates:
    return Candidates(allocation_requests=requests, provider_summaries=SUMMARIES,
                      microversion='1.36')


@pytest.fixture
def catalog() -> HostCatalog:
    catalog = HostCatalog(default_cell_uuid=CELL)
    catalog.remember_provider_names({CN1: 'cn1'})
    catalog.update_aggregates([Aggregate(id=1, uuid=uuid_for('agg-az1'), name='az1-hosts',
                                         hosts=['cn1'], metadata={'availability_zone': 'az1'})])
    catalog.update_instance_info('cn1', [INSTANCE])
    return catalog


def by_host(hosts):
    return {h.uuid: h for h in hosts}


def host_roots(candidates: Candidates) -> dict:
    """Each host's allocation requests, as a host table groups Placement's answer."""
    hosts = HostTable(candidates, HostCatalog(default_cell_uuid=CELL)).view()
    return {h.uuid: h.allocation_candidates for h in hosts}


# ---------------------------------------------------------------------- host_roots


def test_every_request_belongs_to_the_compute_tree_it_touches_in_placements_order():
    roots = host_roots(candidates(ON_NUMA0, ON_CN2, ON_NUMA1, CHILD_ONLY, CN2_WITH_NFS))

    assert roots == {CN1: [ON_NUMA0, ON_NUMA1, CHILD_ONLY], CN2: [ON_CN2, CN2_WITH_NFS]}
    assert list(roots) == [CN1, CN2]


def test_a_sharing_provider_is_never_a_host():
    assert NFS not in host_roots(candidates(ON_NUMA0, CN2_WITH_NFS))


def test_a_request_only_from_nested_children_belongs_to_their_root():
    assert host_roots(candidates(CHILD_ONLY)) == {CN1: [CHILD_ONLY]}


# ---------------------------------------------------------------------- host states


def test_a_host_state_sums_its_tree_and_leaves_the_sharing_provider_out(catalog):
    hosts = by_host(host_states(candidates(ON_NUMA0, ON_CN2), catalog))

    cn1 = hosts[CN1]
    assert cn1.tree_providers == {CN1, NUMA0, NUMA1}
    assert cn1.capacity == {'MEMORY_MB': 16384, 'VCPU': 8}
    assert cn1.used == {'MEMORY_MB': 1024, 'VCPU': 3}
    assert (cn1.free_ram_mb, cn1.vcpus_total, cn1.vcpus_used) == (15360, 8, 3)
    assert cn1.free_disk_mb == 0          # disk is shared, not the host's own
    assert cn1.traits == frozenset({'HW_CPU_X86_AVX2'})
    assert cn1.allocation_candidates == [ON_NUMA0]


def test_the_catalog_gives_names_cell_zone_and_instances(catalog):
    hosts = by_host(host_states(candidates(ON_NUMA0, ON_CN2), catalog,
                                      default_availability_zone='zone0'))

    cn1, cn2 = hosts[CN1], hosts[CN2]
    assert (cn1.host, cn1.nodename, cn1.cell_uuid) == ('cn1', 'cn1', CELL)
    assert cn1.availability_zone == 'az1'
    assert [a.name for a in cn1.aggregates] == ['az1-hosts']
    assert set(cn1.instances) == {INSTANCE} and cn1.num_instances == 1
    # A provider the catalog has no name for is known by its uuid, in the defaults.
    assert (cn2.host, cn2.nodename, cn2.cell_uuid) == (CN2, CN2, CELL)
    assert cn2.availability_zone == 'zone0'
    assert cn2.instances == {}


def test_only_hosts_with_a_request_become_host_states(catalog):
    hosts = host_states(candidates(ON_CN2), catalog)

    assert [h.uuid for h in hosts] == [CN2]


# ---------------------------------------------------------------------- fits / consume


@pytest.fixture
def cn1(catalog):
    return by_host(host_states(candidates(ON_NUMA0, ON_NUMA1, CHILD_ONLY), catalog))[CN1]


def test_fits_checks_each_provider_not_the_trees_total(cn1):
    numa0_twice = AllocationRequest({NUMA0: {'VCPU': 2}})   # NUMA0 has 1 free, tree has 5

    assert not cn1.fits(numa0_twice)
    assert cn1.fits(AllocationRequest({NUMA1: {'VCPU': 4}}))
    assert not cn1.fits(AllocationRequest({NUMA1: {'VCPU': 5}}))


def test_fits_refuses_a_class_the_provider_does_not_have(cn1):
    assert not cn1.fits(AllocationRequest({NUMA0: {'MEMORY_MB': 1}}))


def test_fits_leaves_providers_outside_the_tree_to_the_claim(cn1):
    assert cn1.fits(AllocationRequest({NUMA1: {'VCPU': 1}, NFS: {'DISK_GB': 10 ** 9}}))


def test_consume_accounts_the_request_on_its_providers_and_the_tree(cn1):
    cn1.consume(ON_NUMA0, 'new-instance')

    assert cn1.used == {'MEMORY_MB': 1536, 'VCPU': 4}
    assert cn1.free_ram_mb == 16384 - 1536
    assert not cn1.fits(ON_NUMA0)           # NUMA0 is full now
    assert cn1.fits(ON_NUMA1)               # NUMA1 is not
    assert 'DISK_GB' not in cn1.used        # the shared disk is not this host's
    assert 'new-instance' in cn1.instances
    assert (cn1.num_instances, cn1.num_io_ops) == (2, 1)


def test_consume_without_an_instance_uuid_still_counts_the_instance(cn1):
    cn1.consume(CHILD_ONLY, None)

    assert cn1.used['VCPU'] == 5
    assert set(cn1.instances) == {INSTANCE}
    assert cn1.num_instances == 2


def test_consumption_is_per_host_state_not_shared_between_requests(catalog):
    first = by_host(host_states(candidates(ON_NUMA0), catalog))[CN1]
    first.consume(ON_NUMA0, 'x')

    second = by_host(host_states(candidates(ON_NUMA0), catalog))[CN1]

    assert second.fits(ON_NUMA0)
    assert second.used == {'MEMORY_MB': 1024, 'VCPU': 3}
