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
from dataclasses import dataclass

from bench.cli import settings_from, settings_parser
from bench.nested import view_decision
from bench.report import Row, render, write_json
from bench.seed_sql import DISABLED_TRAIT
from bench.synthetic import SyntheticCloud, make_cloud
from bench.view import kinds_for, option_default, pick
from scheduler.catalog import HostCatalog
from scheduler.provider_view.snapshot import ProviderSnapshot
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
    rows = []
    everything = [s for samples in spent.values() for s in samples]
    for name, samples in sorted(spent.items()) + [('the workload\'s mix', everything)]:
        for part, label in ((0, 'match'), (1, 'host table')):
            rows.append(Row(f'{label}: {name}', opts.providers,
                            statistics.fmean(s[part] for s in samples),
                            note=f'mean of {len(samples)} requests, '
                                 f'{len(snapshot):,} providers'))
    return rows


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
