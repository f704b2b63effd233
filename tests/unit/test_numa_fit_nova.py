"""numa_fit decides as Nova 34's nova.virt.hardware does, down to the host CPUs pinned.

Each test names the Nova function it follows. Host cells are written as
nova-compute writes them (NUMACell fields, CPU lists in the order Nova's JSON
has them); instance cells as nova-api's ``numa_get_constraints`` builds them.
"""
from __future__ import annotations

from scheduler.filters.numa_fit import (
    DEDICATED_CPUS,
    ISOLATE,
    ISOLATE_SMT,
    MEMORY,
    REQUIRE,
    CellFit,
    NumaFit,
    Ratios,
    apply_fit,
    fit_cell,
    fit_instance,
    host_cell_order,
    pack_pcpus,
)
from scheduler.objects.numa import parse_host_numa_topology
from scheduler.request.numa import PAGES_ANY, InstanceCell, InstanceTopology

SMALL, HUGE_2M, HUGE_1G = 4, 2048, 1048576
RATIOS = Ratios(cpu=16.0, ram=1.5)


def pages(size_kb, total, used=0, reserved=0):
    return {'size_kb': size_kb, 'total': total, 'used': used, 'reserved': reserved}


def host(*cells):
    return parse_host_numa_topology({'cells': list(cells)}, where='test', strict=True)


def hcell(id, *, cpus=(), pcpus=(), siblings=None, memory=4096, mempages=None, **fields):
    """A host cell; siblings default to one per CPU (a host without SMT)."""
    if siblings is None:
        siblings = [[c] for c in sorted(set(cpus) | set(pcpus))]
    if mempages is None:
        mempages = [pages(SMALL, memory * 256)]
    return {'id': id, 'cpuset': list(cpus), 'pcpuset': list(pcpus), 'memory': memory,
            'siblings': siblings, 'mempages': mempages, **fields}


def dedicated(id=0, vcpus=(0,), memory=1024, thread_policy=None, pagesize=None):
    return InstanceCell(id=id, pcpuset=frozenset(vcpus), memory=memory, pagesize=pagesize,
                        cpu_policy='dedicated', cpu_thread_policy=thread_policy)


def shared(id=0, vcpus=(0,), memory=1024, pagesize=None):
    return InstanceCell(id=id, cpuset=frozenset(vcpus), memory=memory, pagesize=pagesize)


def one_cell(topology):
    [cell] = topology.cells
    return cell


# nova.virt.hardware._numa_fit_instance_cell: memory ------------------------------------------

def test_a_pinned_cell_without_a_page_size_needs_free_small_pages():
    """Follows _numa_fit_instance_cell: use_free for dedicated and mixed policies."""
    cell = one_cell(host(hcell(0, pcpus=[0, 1], mempages=[
        pages(SMALL, 262144, used=131072, reserved=65536)])))

    assert fit_cell(cell, dedicated(memory=256), RATIOS) != MEMORY
    assert fit_cell(cell, dedicated(memory=512), RATIOS) == MEMORY  # 256 MB free, 1 GB total


def test_a_shared_cell_without_a_page_size_counts_small_pages_used_or_not():
    """Follows _numa_fit_instance_cell: shared guests may overcommit the small pages."""
    cell = one_cell(host(hcell(0, cpus=[0, 1], mempages=[pages(SMALL, 262144, used=262144)])))

    assert isinstance(fit_cell(cell, shared(memory=1024), Ratios()), CellFit)
    assert fit_cell(cell, shared(memory=1025), Ratios()) == MEMORY


def test_the_cell_free_memory_does_not_limit_a_pinned_cell_the_pages_hold():
    """Follows _numa_fit_instance_cell: with page sizes reported, only pages count."""
    cell = one_cell(host(hcell(0, pcpus=[0, 1], memory=4096, memory_usage=4096,
                               mempages=[pages(SMALL, 262144), pages(HUGE_2M, 512)])))

    assert isinstance(fit_cell(cell, dedicated(memory=1024), RATIOS), CellFit)
    assert isinstance(fit_cell(cell, dedicated(memory=1024, pagesize=HUGE_2M), RATIOS), CellFit)


def test_without_page_sizes_a_pinned_cell_needs_free_memory_a_shared_one_total():
    """Follows _numa_fit_instance_cell's branch for hosts reporting no pages."""
    cell = one_cell(host(hcell(0, cpus=[0, 1], pcpus=[2, 3], memory=2048, memory_usage=1536,
                               mempages=[])))

    assert fit_cell(cell, dedicated(memory=1024), Ratios()) == MEMORY
    assert isinstance(fit_cell(cell, shared(memory=1024), Ratios()), CellFit)


# nova.virt.hardware._pack_instance_onto_cores ----------------------------------------------

def test_isolate_on_smt_with_cpu_dedicated_set_is_refused_as_nova_bug_1889633():
    """Follows _pack_instance_onto_cores: only pcpuset == cpuset (vcpu_pin_set) isolates."""
    new_style = one_cell(host(hcell(0, cpus=[0, 1], pcpus=[2, 3, 4, 5],
                                    siblings=[[0, 1], [2, 3], [4, 5]])))
    legacy = one_cell(host(hcell(0, cpus=[2, 3, 4, 5], pcpus=[2, 3, 4, 5],
                                 siblings=[[2, 3], [4, 5]])))

    assert pack_pcpus(new_style, [0], 'isolate') == ISOLATE_SMT
    assert pack_pcpus(legacy, [0, 1], 'isolate').pairs == ((0, 2), (1, 4))


def test_isolate_without_smt_is_allowed_with_cpu_dedicated_set():
    """Follows _pack_instance_onto_cores: one thread per core is no SMT to avoid."""
    cell = one_cell(host(hcell(0, cpus=[0, 1], pcpus=[2, 3])))

    assert pack_pcpus(cell, [0, 1], 'isolate').pairs == ((0, 2), (1, 3))


def test_isolate_needs_fully_free_cores():
    """Follows _pack_instance_onto_cores: isolate packs onto the sibling sets of
    threads_per_core free threads only."""
    cell = one_cell(host(hcell(0, cpus=[0, 1, 2, 3], pcpus=[0, 1, 2, 3],
                               siblings=[[0, 1], [2, 3]], pinned_cpus=[1])))

    assert pack_pcpus(cell, [0], 'isolate').pairs == ((0, 2),)
    assert pack_pcpus(cell, [0, 1], 'isolate') == ISOLATE


def test_cpus_are_taken_in_the_order_nova_iterates_its_sets():
    """Follows _pack_instance_onto_cores/_get_pinning: ``list(sibling_set)[:threads]``
    takes a Python set's hash order, in which {5, 17} comes 17 first."""
    cell = one_cell(host(hcell(0, pcpus=[5, 6, 17, 18], siblings=[[17, 5], [18, 6]])))

    assert pack_pcpus(cell, [0], 'prefer').pairs == ((0, 17),)
    assert pack_pcpus(cell, [0, 1, 2], None).pairs == ((0, 17), (1, 5), (2, 18))


def test_prefer_packs_with_the_most_threads_per_core_that_hold_all_vcpus():
    """Follows _pack_instance_onto_cores: sibling sets by thread count, most first."""
    cell = one_cell(host(hcell(0, pcpus=list(range(8)),
                               siblings=[[0, 1, 2, 3], [4, 5, 6, 7]], pinned_cpus=[0])))

    # Only the untouched core has four free threads, and they hold two vCPUs.
    assert pack_pcpus(cell, [0, 1], None).pairs == ((0, 4), (1, 5))
    # Five do not fit four threads of one core; three threads of both cores hold them.
    assert pack_pcpus(cell, range(5), None).pairs == (
        (0, 1), (1, 2), (2, 3), (3, 4), (4, 5))


def test_require_settles_for_no_single_threads_prefer_takes_any_free_cpus():
    """Follows _pack_instance_onto_cores: require skips threads_no 1; prefer falls back
    to every free thread as a core of its own."""
    cell = one_cell(host(hcell(0, pcpus=[0, 1, 2, 3], siblings=[[0, 1], [2, 3]],
                               pinned_cpus=[0, 2])))

    assert pack_pcpus(cell, [0, 1], 'require') == REQUIRE
    assert pack_pcpus(cell, [0, 1], 'prefer').pairs == ((0, 1), (1, 3))


def test_require_on_a_cell_without_smt_fails():
    """Follows _pack_instance_onto_cores: require needs threads_per_core > 1."""
    cell = one_cell(host(hcell(0, pcpus=[0, 1, 2, 3])))

    assert pack_pcpus(cell, [0], 'require') == REQUIRE


def test_dedicated_cpus_no_sibling_set_names_are_never_pinned():
    """Follows _pack_instance_onto_cores: Nova packs from free_siblings only."""
    cell = one_cell(host(hcell(0, pcpus=[0, 1, 2], siblings=[[0], [1]])))

    assert pack_pcpus(cell, [0, 1], None).pairs == ((0, 0), (1, 1))
    assert pack_pcpus(cell, [0, 1, 2], None) == DEDICATED_CPUS


def test_the_emulator_threads_cpu_is_the_first_free_one_the_pinning_left():
    """Follows _pack_instance_onto_cores/_get_reserved."""
    cell = one_cell(host(hcell(0, pcpus=[0, 1, 2, 3], siblings=[[0, 1], [2, 3]])))
    legacy = one_cell(host(hcell(0, cpus=[0, 1, 2, 3, 4, 5], pcpus=[0, 1, 2, 3, 4, 5],
                                 siblings=[[0, 1], [2, 3], [4, 5]])))

    prefer = pack_pcpus(cell, [0], None, reserved=1)
    assert (prefer.pairs, prefer.reserved) == (((0, 0),), frozenset({1}))
    isolate = pack_pcpus(legacy, [0, 1], 'isolate', reserved=1)
    assert (isolate.pairs, isolate.reserved) == (((0, 0), (1, 2)), frozenset({4}))


def test_emulator_threads_are_reserved_on_the_first_instance_cell_only():
    """Follows numa_fit_instance_to_host: cpuset_reserved=1 for instance cell 0."""
    topology = host(hcell(0, pcpus=[0, 1]), hcell(1, pcpus=[2, 3]))
    request = InstanceTopology((dedicated(0, [0, 1]), dedicated(1, [2])),
                               emulator_threads_policy='isolate')

    fit = fit_instance(topology, request, ratios=RATIOS)

    # Two vCPUs and the emulator thread do not fit a two-CPU cell: cell 1 first.
    assert fit.reason == DEDICATED_CPUS and not fit.passed
    request = InstanceTopology((dedicated(0, [0]), dedicated(1, [1, 2])),
                               emulator_threads_policy='isolate')
    fit = fit_instance(topology, request, ratios=RATIOS)
    assert [(c.host_cell_id, c.pinning, c.reserved) for c in fit.cells] == [
        (0, ((0, 0),), frozenset({1})), (1, ((1, 2), (2, 3)), frozenset())]


# nova.virt.hardware.numa_fit_instance_to_host -----------------------------------------------

def test_host_cells_are_tried_emptiest_first_when_the_host_has_more_than_asked():
    """Follows numa_fit_instance_to_host's sorts (spread: free memory, then CPUs)."""
    topology = host(hcell(0, cpus=[0, 1], memory_usage=1024, cpu_usage=1),
                    hcell(1, cpus=[2, 3], memory_usage=0, cpu_usage=1),
                    hcell(2, cpus=[4, 5], memory_usage=0, cpu_usage=0))
    request = InstanceTopology((shared(),))

    assert [c.id for c in host_cell_order(topology, request)] == [2, 1, 0]
    assert fit_instance(topology, request, ratios=RATIOS).cells[0].host_cell_id == 2


def test_pinned_requests_try_cells_with_most_free_dedicated_cpus_first():
    """Follows numa_fit_instance_to_host: len(free_pcpus), most first."""
    topology = host(hcell(0, pcpus=[0, 1, 2]), hcell(1, pcpus=[3, 4, 5, 6], pinned_cpus=[3, 4]),
                    hcell(2, pcpus=[7, 8, 9, 10]))
    request = InstanceTopology((dedicated(),))

    assert [c.id for c in host_cell_order(topology, request)] == [2, 0, 1]


def test_host_cells_are_not_reordered_when_the_request_uses_them_all():
    """Follows numa_fit_instance_to_host: sorting only with more host cells."""
    topology = host(hcell(0, cpus=[0, 1], cpu_usage=2), hcell(1, cpus=[2, 3]))
    request = InstanceTopology((shared(0), shared(1)))

    assert [c.id for c in host_cell_order(topology, request, {1: 3})] == [0, 1]


def test_cells_with_pci_devices_go_last_without_a_pci_request_first_with_one():
    """Follows numa_fit_instance_to_host: sorted by free devices per cell (the host's
    pools), fewest first, or most first when the request asks for devices."""
    topology = host(hcell(0, cpus=[0, 1]), hcell(1, cpus=[2, 3]), hcell(2, cpus=[4, 5]))
    request = InstanceTopology((shared(),))
    counts = {0: 2, 1: 5}

    assert [c.id for c in host_cell_order(topology, request, counts)] == [2, 0, 1]
    assert [c.id for c in host_cell_order(topology, request, counts, pci_requested=True)] \
        == [1, 0, 2]


def test_a_symbolic_page_size_once_resolved_stays_for_the_next_permutations():
    """Follows numa_fit_instance_to_host, which fits the same InstanceNUMACell objects
    permutation after permutation: 'any' on cell 0 becomes 1 GB, and 1 GB is then
    what cell 1 (only 2 MB pages) is asked for. Nova fails this host."""
    topology = host(
        hcell(0, cpus=[0, 1, 2, 3], mempages=[pages(SMALL, 262144), pages(HUGE_2M, 512),
                                               pages(HUGE_1G, 1)]),
        hcell(1, cpus=[4, 5], mempages=[pages(SMALL, 262144), pages(HUGE_2M, 1024)]))
    request = InstanceTopology((shared(0, [0], pagesize=PAGES_ANY),
                                shared(1, [1, 2, 3], pagesize=PAGES_ANY)))

    assert not fit_instance(topology, request, ratios=RATIOS).passed
    # Each order on its own fits.
    flipped = InstanceTopology(tuple(reversed(request.cells)))
    assert fit_instance(topology, flipped, ratios=RATIOS).passed


# nova.virt.hardware.numa_usage_from_instance_numa -------------------------------------------

def test_usage_charges_the_smallest_pages_when_no_page_size_was_asked_for():
    """Follows numa_usage_from_instance_numa/_numa_pagesize_usage_from_cell."""
    topology = host(hcell(0, cpus=[0, 1], pcpus=[2, 3],
                          mempages=[pages(SMALL, 262144), pages(HUGE_2M, 512)]))
    request = InstanceTopology((InstanceCell(0, cpuset=frozenset({0}), pcpuset=frozenset({1}),
                                             memory=512, cpu_policy='mixed'),))

    used = one_cell(apply_fit(topology, fit_instance(topology, request, ratios=RATIOS)))

    assert [(p.size_kb, p.used) for p in used.mempages] == [(SMALL, 131072), (HUGE_2M, 0)]
    # Shared vCPUs count in cpu_usage, pinned ones in pinned_cpus; memory in either case.
    assert (used.cpu_usage, used.pinned_cpus, used.memory_usage) == (1, {2}, 512)


def test_usage_charges_the_page_size_the_cell_was_fitted_on():
    """Follows numa_usage_from_instance_numa: instance_cell.pagesize as the fit left it."""
    topology = host(hcell(0, cpus=[0, 1], mempages=[pages(SMALL, 262144), pages(HUGE_2M, 512)]))
    request = InstanceTopology((shared(memory=512, pagesize=PAGES_ANY),))

    fit = fit_instance(topology, request, ratios=RATIOS)
    used = one_cell(apply_fit(topology, fit))

    assert fit.cells[0].page_size_kb == HUGE_2M
    assert [(p.size_kb, p.used) for p in used.mempages] == [(SMALL, 0), (HUGE_2M, 256)]


def test_usage_of_isolate_pins_the_siblings_and_the_emulator_threads_cpu():
    """Follows numa_usage_from_instance_numa: pin_cpus_with_siblings for isolate, and
    cpuset_reserved pinned as well."""
    topology = host(hcell(0, cpus=list(range(6)), pcpus=list(range(6)),
                          siblings=[[0, 1], [2, 3], [4, 5]]))
    request = InstanceTopology((dedicated(vcpus=[0], thread_policy='isolate'),),
                               emulator_threads_policy='isolate')

    fit = fit_instance(topology, request, ratios=RATIOS)
    used = one_cell(apply_fit(topology, fit))

    assert (fit.cells[0].pinning, fit.cells[0].reserved) == (((0, 0),), frozenset({2}))
    assert used.pinned_cpus == {0, 1, 2, 3}


def test_a_failed_fit_adds_no_usage():
    topology = host(hcell(0, cpus=[0]))
    assert apply_fit(topology, NumaFit(None, 'no')) is topology


def test_fit_caches_keyed_by_instance_cell_ids_that_fits_rewrite_as_in_nova():
    """Follows numa_fit_instance_to_host's fit_cache / not_fit_cache: keyed by
    (host cell id, instance cell id), while a fit sets the instance cell's id to the
    host cell's. Once instance cell 1 has fitted host cell 2 it answers for cell 2's
    key, so Nova 34 takes cell 2 (three vCPUs) as fitting a two-CPU host cell."""
    topology = host(*(hcell(i, cpus=[2 * i, 2 * i + 1]) for i in range(3)))
    request = InstanceTopology((shared(0, [0], memory=512), shared(1, [1], memory=512),
                                shared(2, [10, 11, 12], memory=512)))

    fit = fit_instance(topology, request, ratios=RATIOS)

    assert [c.host_cell_id for c in fit.cells] == [1, 2, 0]


def test_packing_renames_the_instance_cell_even_when_the_limits_then_reject_it():
    """Follows _numa_fit_instance_cell/_pack_instance_onto_cores: a mixed cell is packed
    (its id set to the host cell's) before the overcommit limits are checked. Instance
    cell 1, rejected by host cell 0's CPU limit, answers for cell 0's key from then
    on, and Nova 34 places it on cell 2, which has no shared CPU at all."""
    topology = host(hcell(0, cpus=[0, 1], cpu_usage=2, memory=1024),
                    hcell(1, pcpus=[2, 3], pinned_cpus=[2], memory=2048),
                    hcell(2, pcpus=[4, 5], memory=1024),
                    hcell(3, pcpus=[6, 7], pinned_cpus=[6], memory=8192))
    request = InstanceTopology((
        InstanceCell(0, pcpuset=frozenset({0}), memory=128, cpu_policy='mixed'),
        InstanceCell(1, cpuset=frozenset({1}), memory=128, cpu_policy='mixed')))

    fit = fit_instance(topology, request, ratios=Ratios(cpu=1.0, ram=1.5))

    assert [(c.host_cell_id, c.pinning) for c in fit.cells] == [(3, ((0, 7),)), (2, ())]


def test_a_guest_read_back_from_the_compute_row_keeps_nova_s_order_instance_after_instance():
    """Follows numa_fit_instance_to_host/_pack_instance_onto_cores/_get_reserved on the
    HostState nova-scheduler reads once (NUMATopology.obj_from_db_obj), fitted by
    NUMATopologyFilter, then again by consume_from_request, whose
    numa_usage_from_instance_numa copies the sets for the next instance. Read from
    the list [3, 11], the free CPUs of the sibling set {3, 11} iterate 11 first: the
    emulator threads take CPU 11, in the filter's fit and the consumption's. (A
    copy.deepcopy of the HostState rebuilds each set from its iteration order, after
    which they iterate 3 first; nova-scheduler makes no such copy.)"""
    topology = host(hcell(0, cpus=list(range(16)), pcpus=list(range(16)), memory=16384,
                          siblings=[[i, i + 8] for i in range(8)], pinned_cpus=[0, 8, 1, 9],
                          cpu_usage=4, memory_usage=512))
    request = InstanceTopology((dedicated(vcpus=[0, 1]),), emulator_threads_policy='isolate')
    placed = []
    for _ in range(3):
        fit = fit_instance(topology, request, ratios=Ratios(cpu=1.0, ram=1.0))
        [cell] = fit.cells
        placed.append((cell.pinning, cell.reserved))
        topology = apply_fit(topology, fit)

    assert placed == [(((0, 2), (1, 10)), frozenset({11})),
                      (((0, 4), (1, 12)), frozenset({3})),
                      (((0, 13), (1, 5)), frozenset({6}))]
    assert one_cell(topology).pinned_cpus == {0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13}
