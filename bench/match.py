"""What a worker's provider view costs a request, in process, kind by kind.

``python -m bench.match [--providers N] [--nested] [--requests K] [--profile PATH]``:
bench.synthetic's cloud of ``providers`` hosts (``--nested``: with NUMA nodes,
PCI devices and vGPUs below some roots, as bench.view seeds it) held as one
:class:`ProviderSnapshot` built from the rows Placement's tables would hold, and
a :class:`ProviderView` over it. Then ``requests`` requests drawn from
bench.view's workload (:func:`bench.view.kinds_for`), each translated as the
service translates it (its default request filters, then ``build_query``, on
the request spec nova-conductor would send), go through what a request asks of the view
(:func:`bench.nested.view_decision`: the matching hosts, then the allocation
requests of those it looks at) and then the table of its hosts
(``Match.hosts_of_table`` over a catalog of the cloud's hosts file).

Rows before those: what a worker spends taking a read of changes from the
service's provider view reader into that snapshot (:data:`TAKEN` providers read
again; scheduler/catalog/shared_provider_reads.py), finding the held hosts no
answer can be on (:func:`reach_costs`), and what the table of a
request's hosts costs after a request that asks for NUMA or PCI read its
candidates' cell database rows again (:func:`refresh_costs`).

No service, no Placement, no database: the rows are the decision's CPU alone,
per kind and over the mix, to compare a change to the view before a run of
bench.view (minutes at 50,000 providers) says what it does to throughput. A
first pass is left out (the host table is built there). ``--profile`` writes
cProfile's statistics of the timed pass there.
"""
from __future__ import annotations

import cProfile
import gc
import json
import pathlib
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.cli import settings_from, settings_parser
from bench.nested import view_decision
from bench.report import Row, render, write_json
from bench.seed_sql import DISABLED_TRAIT
from bench.synthetic import SyntheticCloud, SyntheticHost, make_cloud
from bench.view import kinds_for, option_default, pick
from scheduler.catalog import HostCatalog
from scheduler.catalog.cell_db import ComputeNodeData
from scheduler.catalog.provider_changes import Changes
from scheduler.provider_view.hosts import ViewTables
from scheduler.provider_view.reach import HeldRows
from scheduler.provider_view.snapshot import Keyed, ProviderSnapshot
from scheduler.provider_view.view import ProviderView
from scheduler.request.filters import load_request_filters, run_request_filters
from scheduler.request.translate import build_query

#: ``[scheduler] max_placement_results``' default: the view ignores it, the
#: translation keeps it in the query.
LIMIT = 1000


@dataclass
class Options:
    providers: int = 50_000
    nested: bool = False
    requests: int = 400
    seed: int = 20261128
    profile: str = ''
    json: str = ''


def snapshot_of(cloud: SyntheticCloud) -> ProviderSnapshot:
    """The snapshot a worker reads of ``cloud`` seeded into Placement: its rows,
    keyed by provider ids in the order seeding gives them (as bench.seed_sql
    seeds it)."""
    ids: dict[str, int] = {}
    for host in cloud.hosts:
        for provider in host.providers:
            ids[provider.uuid] = len(ids) + 1
    providers, inventories, usages, traits = [], [], [], []
    for host in cloud.hosts:
        for p in host.providers:
            pid = ids[p.uuid]
            providers.append((pid, p.uuid, 1, None if p.parent_uuid is None
                              else ids[p.parent_uuid]))
            for rc, (total, reserved, ratio, used) in p.inventory.items():
                inventories.append((pid, rc, total, reserved, 1, total, 1, ratio))
                usages.append((pid, rc, used))
            traits.extend((pid, trait) for trait in p.traits)
        if host.disabled:
            traits.append((ids[host.root.uuid], DISABLED_TRAIT))
    # bench.seed_sql puts no provider in an aggregate: Nova's aggregates are the
    # hosts file's.
    return ProviderSnapshot.from_rows(providers, inventories, usages, traits, [])


def run(opts: Options) -> list[Row]:
    cloud = make_cloud(opts.providers, nested=opts.nested)
    snapshot = snapshot_of(cloud)
    view = ProviderView(lambda _previous: snapshot, max_age=1e9)
    with tempfile.TemporaryDirectory() as tmp:
        hosts_file = pathlib.Path(tmp, 'hosts.json')
        hosts_file.write_text(json.dumps(cloud.hosts_document()))
        catalog = HostCatalog.from_file(str(hosts_file), default_cell_uuid=str(uuid.uuid4()))
    request_filters = load_request_filters(option_default('request_filters'))
    rng = random.Random(opts.seed)
    kinds = kinds_for(opts.nested)
    requests = []
    for i in range(opts.requests):
        kind = pick(rng, kinds)
        spec = kind.boot(f'req-{i}', str(uuid.UUID(int=rng.getrandbits(128)))).request_spec()
        run_request_filters(request_filters, spec, catalog, None)
        requests.append((kind.name, view_decision(view, build_query(spec, limit=LIMIT).query)))

    def one_pass() -> dict[str, list[tuple[float, float]]]:
        spent: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for name, decide in requests:
            begin = time.perf_counter()
            match = decide()
            matched = time.perf_counter()
            if match is not None:
                match.hosts_of_table(catalog)
            spent[name].append(((matched - begin) * 1000, (time.perf_counter() - matched) * 1000))
        return spent

    one_pass()
    # What setting up made is kept out of the collector's walks: the
    # collector is paused while a worker serves a request (scheduler/memory/gc_pause.py).
    gc.collect()
    gc.freeze()
    profiler = cProfile.Profile() if opts.profile else None
    if profiler:
        profiler.enable()
    spent = one_pass()
    if profiler:
        profiler.disable()
        profiler.dump_stats(opts.profile)
    rows = take_costs(snapshot, np.random.default_rng(opts.seed))
    rows += reach_costs(cloud, snapshot, catalog)
    rows += refresh_costs(cloud, catalog, [decide for _, decide in requests], rng)
    everything = [s for samples in spent.values() for s in samples]
    for name, samples in sorted(spent.items()) + [('the workload\'s mix', everything)]:
        for part, label in ((0, 'match'), (1, 'host table')):
            rows.append(Row(f'{label}: {name}', opts.providers,
                            statistics.fmean(s[part] for s in samples),
                            note=f'mean of {len(samples)} requests, '
                                 f'{len(snapshot):,} providers'))
    return rows


#: Providers a read of changes takes again, for the rows on taking one in: a few
#: claims' providers, and those with the refresh slice of 103,177 providers at the
#: defaults (``provider_view_full_read_interval`` 60 s over ``max_age`` 0.25 s).
TAKEN = (30, 430)


def take_costs(snapshot: ProviderSnapshot, rng: np.random.Generator,
               repeat: int = 7) -> list[Row]:
    """What a worker spends taking a read of changes into its snapshot
    (:meth:`Changes.apply`), by the number of providers read again: each one's rows
    as a read after a claim finds them (a generation and a unit of usage more)."""
    rows = []
    for size in TAKEN:
        spent = []
        for _ in range(repeat):
            changes = _read_after_claims(
                snapshot, np.sort(rng.choice(len(snapshot), size, replace=False)))
            begin = time.process_time()
            changes.apply(snapshot)
            spent.append((time.process_time() - begin) * 1000)
        rows.append(Row(f'take in a read of changes: {size} providers', len(snapshot),
                        statistics.median(spent), note=f'median of {repeat}, CPU ms'))
    return rows


def reach_costs(cloud: SyntheticCloud, snapshot: ProviderSnapshot, catalog: HostCatalog,
                repeat: int = 21) -> list[Row]:
    """What a request spends finding the held hosts no answer of it can be on
    (:meth:`ProviderView.out_of_reach`, scheduler/provider_view/reach.py): held, the
    cloud's disabled or forced-down computes; forbidden on roots, the trait of a
    disabled compute. Their rows found afresh (a table built, or a new held set)
    and kept (a read of new usage since)."""
    hosts = ViewTables().hosts(snapshot, catalog, default_availability_zone='nova')
    held = frozenset(h.name for h in cloud.hosts if h.disabled or h.forced_down)
    forbidden = frozenset({DISABLED_TRAIT})
    kept = HeldRows.of(hosts, held)
    spent: dict[str, list[float]] = {'found afresh': [], 'rows kept': []}
    for _ in range(repeat):
        begin = time.process_time()
        afresh = HeldRows.of(hosts, held).out_of_reach(hosts, forbidden)
        middle = time.process_time()
        again = kept.out_of_reach(hosts, forbidden)
        end = time.process_time()
        if (afresh and afresh.hosts) != (again and again.hosts):
            raise AssertionError('the held hosts out of reach differ with the rows kept')
        spent['found afresh'].append((middle - begin) * 1000)
        spent['rows kept'].append((end - middle) * 1000)
    return [Row(f'held hosts out of reach: {label}', len(cloud.hosts), statistics.median(values),
                note=f'median of {repeat}, CPU ms; {len(held)} held, '
                     f'{len(afresh.hosts) if afresh else 0} out of reach')
            for label, values in spent.items()]


#: Candidates' rows a request that asks for NUMA or PCI reads again from the cell
#: databases before it is decided (``[cell_database] max_age`` 0): Placement's answer,
#: at nova's ``max_placement_results``.
REFRESHED = 1000


def refresh_costs(cloud: SyntheticCloud, catalog: HostCatalog,
                  decisions: list[Callable[[], Any]], rng: random.Random
                  ) -> list[Row]:
    """What the table of the next request's hosts costs after a request that asks for
    NUMA or PCI read its candidates' ``compute_nodes`` rows again
    (``CellDatabaseSync.fresh_nodes`` into :meth:`HostCatalog.add_cell_db_nodes`),
    as they were at the last read (equal nodes, as a reader without memory parses
    them again) and all changed (nova-compute wrote each since), against no read."""
    def node(host: SyntheticHost, version: int) -> ComputeNodeData:
        return ComputeNodeData(provider_uuid=host.root.uuid, nodename=host.name,
                               service_host=host.name, hypervisor_version=version)

    catalog.apply_cell_db_nodes([node(h, 0) for h in cloud.hosts])
    versions = dict.fromkeys((h.name for h in cloud.hosts), 0)

    refreshed = min(REFRESHED, len(cloud.hosts))

    def read_again(changed: bool) -> None:
        picked = rng.sample(cloud.hosts, refreshed)
        if changed:
            for host in picked:
                versions[host.name] += 1
        catalog.add_cell_db_nodes([node(h, versions[h.name]) for h in picked])

    rows = []
    for label, before in (('no read', None), ('rows unchanged', False),
                          ('rows all changed', True)):
        for decide in decisions[:3]:      # the table built after the cell's first read
            match = decide()
            if match is not None:
                match.hosts_of_table(catalog)
        spent = []
        for decide in decisions:
            if before is not None:
                read_again(before)
            match = decide()
            if match is not None:
                begin = time.process_time()
                match.hosts_of_table(catalog)
                spent.append((time.process_time() - begin) * 1000)
        rows.append(Row(f'host table after a request read {refreshed} candidates\' cell rows '
                        f'again: {label}', len(cloud.hosts), statistics.fmean(spent),
                        note=f'mean of {len(spent)} requests, CPU ms'))
    return rows


def _read_after_claims(snapshot: ProviderSnapshot, rows: np.ndarray) -> Changes:
    codes: dict[str, int] = {}
    inventories, usages, traits = [], [], []
    for row, pid in zip(rows.tolist(), snapshot.ids[rows].tolist(), strict=True):
        for rc, (*values, used) in snapshot.inventory_of(row).items():
            code = codes.setdefault(rc, len(codes))
            inventories.append((pid, code, *values))
            usages.append((pid, code, used + 1))
        traits.extend((pid, codes.setdefault(t, len(codes))) for t in snapshot.traits.of(row))
    names = {code: name for name, code in codes.items()}

    def keyed(found: list[tuple], width: int, dtype: type = np.int64) -> Keyed:
        table = np.array(found, dtype=np.float64).reshape(len(found), 2 + width)
        return Keyed(table[:, 0].astype(np.int64), table[:, 1].astype(np.int64), names,
                     table[:, 2:].astype(dtype))

    return Changes(snapshot.ids[rows], snapshot.generations[rows] + 1,
                   inventories=keyed(inventories, 6, np.float64), usages=keyed(usages, 1),
                   traits=keyed(traits, 0), aggregates=keyed([], 0), marks=None)


def main(argv: list[str] | None = None) -> int:
    parser = settings_parser('python -m bench.match', __doc__, Options())
    opts = settings_from(parser.parse_args(argv), Options())
    rows = run(opts)
    print(render(rows))
    if opts.json:
        write_json(rows, opts.json)
    return 0


if __name__ == '__main__':
    sys.exit(main())
