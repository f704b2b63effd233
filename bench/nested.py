"""Nested queries: the provider view against Placement's own GET, on the same state.

``python -m bench.nested [--hosts N] [--repeats K] [--json out.json]`` (also
``tox -e bench -- --nested``): one Placement 16 on PostgreSQL, seeded straight
into its tables (bench.seed_sql) with a cloud of nested trees built here from
bench.synthetic's dataclasses:

* NUMA hosts: DISK_GB on the root, two NUMA nodes with PCPU, VCPU and
  MEMORY_MB, half of them with an SR-IOV PF (SRIOV_NET_VF, a physnet) below
  each node;
* PCI hosts: PCI devices of a custom class, one each, some trusted, and two
  PFs with VFs on a physnet each;
* vGPU hosts: physical GPUs holding VGPU, each of one vGPU type;
* NIC hosts: a NIC below the root and bandwidth providers below it;
* candidate-explosion hosts: eight identical children holding VGPU of a type
  of their own, some of them partly or wholly used.

Per request shape (:func:`shapes`: granular groups numbered and named,
``group_policy`` none and isolate, ``same_subtree``, traits per group,
``root_required``), in one run on that state:

* Placement: ``GET /allocation_candidates`` at the service's microversion with
  the service's ``limit`` (``max_placement_results``), timed from the request
  to the last byte of the answer (not decoded), ``repeats`` times or until
  ``placement_budget`` seconds went to the shape (at least
  :data:`MIN_PLACEMENT_SAMPLES`);
* the view: ``ProviderView.match`` over a snapshot of Placement's database
  (read once, untimed) and the allocation requests of the hosts a request
  then looks at (:data:`HOSTS_LOOKED_AT`), ``repeats`` times; also the whole
  answer as Placement's JSON (``trees.candidates``: every answered host's
  requests and summaries).

Before timing, a guard: Placement's whole answer (no limit) is fetched once
and the view's hosts must be exactly its hosts, each request the view gives
one Placement gives, and the JSON answer Placement's
(tests/functional/test_provider_view_nested.py's contract). A shape the view
leaves to Placement says why instead of a latency.
"""
from __future__ import annotations

import contextlib
import datetime
import gc
import pathlib
import random
import shutil
import sys
import tempfile
import time
import uuid as uuidlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import requests

from bench import deploy
from bench.cli import settings_from, settings_parser
from bench.report import Row, render, write_json
from bench.synthetic import SyntheticCloud, SyntheticHost, SyntheticProvider
from placement_client.client import ALLOCATION_CANDIDATES_MICROVERSION
from placement_client.query import AllocationCandidatesQuery, RequestGroupQuery
from tests.fixtures.postgres_placement import POSTGRES_URL

DEFAULT_HOSTS = 1000
DEFAULT_REPEATS = 20
#: Candidate-explosion hosts in the cloud: each costs Placement a product of up to
#: 8**6 combinations per query, seconds per host.
DEFAULT_EXPLOSION_HOSTS = 3
#: Seconds of Placement's GETs per shape, after which the shape's samples stop
#: (a 6-group query on the explosion hosts takes seconds each).
DEFAULT_PLACEMENT_BUDGET = 15.0
MIN_PLACEMENT_SAMPLES = 3
#: The issue's target on the candidate-explosion tree.
EXPLOSION_P99_MS = 50.0
#: Hosts whose allocation requests a request builds: the chosen one and Nova's
#: default two alternates (``[scheduler] max_attempts`` = 3).
HOSTS_LOOKED_AT = 3
#: What the service sends as ``limit`` (``[scheduler] max_placement_results``).
SERVICE_LIMIT = 1000
#: Seconds the view's runs wait after Placement's last answer (see measure()).
SETTLE_SECONDS = 1.0
MICROVERSION = ALLOCATION_CANDIDATES_MICROVERSION
#: Placement gunicorn workers: the GETs are sent one at a time, one serves them.
PLACEMENT_WORKERS = 2
SEED = 20261127

PCI_CLASS = 'CUSTOM_PCI_8086_1563'
CUSTOM_CLASSES = (PCI_CLASS,)
PHYSNETS = ('CUSTOM_PHYSNET_A', 'CUSTOM_PHYSNET_B')
VGPU_TYPES = ('CUSTOM_VGPU_TYPE_A10', 'CUSTOM_VGPU_TYPE_T4', 'CUSTOM_VGPU_TYPE_L4')
WIDE_TYPE = 'CUSTOM_VGPU_TYPE_A16'
TRUSTED = 'CUSTOM_PCI_TRUSTED'
NORMAL = 'CUSTOM_VNIC_TYPE_NORMAL'
EGRESS, INGRESS = 'NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC'
ROOT_TRAITS = ('HW_CPU_X86_AVX2', 'HW_CPU_X86_AVX512F', 'HW_CPU_X86_SSE42')
#: Host kinds and their shares of the hosts that are not explosion hosts.
KINDS = (('numa', 0.35), ('pci', 0.2), ('vgpu', 0.15), ('nic', 0.3))
#: Usage of the eight children (VGPU total 2) of each explosion host in turn: room
#: on four, five and six of them. Placement builds the product of every group's
#: candidates, 4**6 + 5**6 + 6**6 combinations for six groups on the three (measured
#: here: 2 to 4 s a GET; with room on all eight children, 8**6 on one tree, over
#: 45 s). Under isolate six groups fit on the third tree alone, five on the last
#: two; without, five fit on all three (the first holds five units), six on two.
EXPLOSION_USAGE = ((0, 1, 1, 2, 2, 2, 1, 2), (0, 0, 1, 1, 1, 2, 2, 2), (1,) * 6 + (2, 2))


# ---------------------------------------------------------------- the cloud


class _Trees:
    """Builds one host's providers: uuids from the seed, usage drawn per inventory."""

    def __init__(self, rng: random.Random, name: str):
        self.rng = rng
        self.name = name
        self.root: SyntheticProvider | None = None
        self.children: list[SyntheticProvider] = []

    def provider(self, suffix: str, parent: SyntheticProvider | None,
                 inventory: dict[str, tuple[int, int, float, int]],
                 traits: list[str]) -> SyntheticProvider:
        uuid = str(uuidlib.UUID(int=self.rng.getrandbits(128), version=4))
        root_uuid = uuid if parent is None else parent.root_uuid
        p = SyntheticProvider(uuid, f'{self.name}{suffix}', root_uuid,
                              None if parent is None else parent.uuid, inventory, traits)
        if parent is None:
            self.root = p
        else:
            self.children.append(p)
        return p

    def inv(self, total: int, ratio: float = 1.0, *, used: int | None = None
            ) -> tuple[int, int, float, int]:
        """An inventory partly used: a random share of its capacity, or ``used``."""
        if used is None:
            used = int(total * ratio * self.rng.betavariate(2.0, 3.0))
        return (total, 0, ratio, used)

    def device(self) -> tuple[int, int, float, int]:
        # A device of one unit is taken or not.
        return self.inv(1, used=int(self.rng.random() < 0.35))


def _numa_host(t: _Trees) -> None:
    root = t.provider('', None, {'DISK_GB': t.inv(960)}, _root_traits(t.rng))
    with_pf = t.rng.random() < 0.5
    for n in range(2):
        node = t.provider(f'_numa{n}', root, {'PCPU': t.inv(16), 'VCPU': t.inv(16, 4.0),
                                              'MEMORY_MB': t.inv(131072)}, ['HW_NUMA_ROOT'])
        if with_pf:
            t.provider(f'_numa{n}_pf', node, {'SRIOV_NET_VF': t.inv(8)},
                       [t.rng.choice(PHYSNETS)])


def _flavor_root(t: _Trees) -> SyntheticProvider:
    return t.provider('', None, {'VCPU': t.inv(64, 4.0), 'MEMORY_MB': t.inv(262144),
                                 'DISK_GB': t.inv(1920)}, _root_traits(t.rng))


def _pci_host(t: _Trees) -> None:
    root = _flavor_root(t)
    for d in range(t.rng.randint(2, 6)):
        t.provider(f'_pci_0000_8{d}_00_0', root, {PCI_CLASS: t.device()},
                   [TRUSTED] if t.rng.random() < 0.7 else [])
    for pf in range(2):
        t.provider(f'_pf{pf}', root, {'SRIOV_NET_VF': t.inv(16)}, [PHYSNETS[pf]])


def _vgpu_host(t: _Trees) -> None:
    root = _flavor_root(t)
    for g in range(t.rng.randint(2, 4)):
        t.provider(f'_pgpu{g}', root, {'VGPU': t.inv(t.rng.choice((4, 8, 16)))},
                   [t.rng.choice(VGPU_TYPES)])


def _nic_host(t: _Trees) -> None:
    root = _flavor_root(t)
    nic = t.provider('_nic', root, {}, [NORMAL])
    for b in range(t.rng.randint(1, 2)):
        t.provider(f'_nic_bw{b}', nic, {EGRESS: t.inv(10_000_000), INGRESS: t.inv(10_000_000)},
                   [PHYSNETS[b]])


def _explosion_host(t: _Trees, usage: tuple[int, ...]) -> None:
    root = _flavor_root(t)
    for g, used in enumerate(usage):
        t.provider(f'_wide{g}', root, {'VGPU': t.inv(2, used=used)}, [WIDE_TYPE])


def _root_traits(rng: random.Random) -> list[str]:
    return rng.sample(ROOT_TRAITS, rng.randint(0, 2))


BUILDERS: dict[str, Callable[[_Trees], None]] = {
    'numa': _numa_host, 'pci': _pci_host, 'vgpu': _vgpu_host, 'nic': _nic_host}


def make_nested_cloud(hosts: int, *, explosion_hosts: int = DEFAULT_EXPLOSION_HOSTS,
                      seed: int = SEED) -> SyntheticCloud:
    """``hosts`` hosts of the kinds of :data:`KINDS`, the last ``explosion_hosts`` of
    them candidate-explosion hosts; same arguments, same cloud."""
    rng = random.Random(seed * 1_000_003 + hosts)
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    kinds = [k for k, _ in KINDS]
    weights = [w for _, w in KINDS]
    built: list[SyntheticHost] = []
    for i in range(hosts):
        t = _Trees(rng, f'nested-{i:05d}')
        explosion = i - (hosts - explosion_hosts)
        if explosion >= 0:
            _explosion_host(t, EXPLOSION_USAGE[explosion % len(EXPLOSION_USAGE)])
        else:
            BUILDERS[rng.choices(kinds, weights)[0]](t)
        assert t.root is not None
        built.append(SyntheticHost(
            index=i, name=t.root.name, root=t.root, children=t.children, disabled=False,
            forced_down=False, last_seen_up=now, host_ip=f'10.1.{i // 256 % 256}.{i % 256}',
            hypervisor_version=9000000, cpu_info={}, num_instances=0, io_workload=0,
            failed_builds=0))
    return SyntheticCloud(seed=seed, hosts=built, aggregates=[], now=now)


# ---------------------------------------------------------------- the shapes


@dataclass
class Shape:
    name: str
    query: AllocationCandidatesQuery
    #: held to the candidate-explosion target
    explosion: bool = False


FLAVOR = {'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 20}


def _query(groups: list[RequestGroupQuery], **kwargs: Any) -> AllocationCandidatesQuery:
    return AllocationCandidatesQuery(groups=groups, **kwargs)


def _group(suffix: str, resources: dict[str, int], *traits: str) -> RequestGroupQuery:
    return RequestGroupQuery(suffix=suffix, resources=resources, required_traits=set(traits))


def shapes() -> list[Shape]:
    """The request shapes, as Nova's ResourceRequest would shape them (forbidden
    traits are left out: Placement 16 on PostgreSQL answers them with HTTP 500 on a
    cloud with nested providers, see test_provider_view.py)."""
    cell = {'VCPU': 2, 'MEMORY_MB': 2048}
    found = [
        Shape('numa: two guest cells, isolate', _query(
            [_group('', {'DISK_GB': 20}), _group('1', cell), _group('2', cell)],
            group_policy='isolate')),
        Shape('numa: pinned cell + VF on its node, same_subtree', _query(
            [_group('', {'DISK_GB': 20}), _group('1', {'PCPU': 2, 'MEMORY_MB': 1024}),
             _group('2', {'SRIOV_NET_VF': 1}, PHYSNETS[0])],
            group_policy='isolate', same_subtree=[['1', '2']])),
        Shape('numa: cells with VCPU unsuffixed too, isolate', _query(
            [_group('', {'VCPU': 1, 'DISK_GB': 20}), _group('1', cell), _group('2', cell)],
            group_policy='isolate')),
        Shape('pci: two trusted devices, isolate', _query(
            [_group('', FLAVOR), _group('pci1', {PCI_CLASS: 1}, TRUSTED),
             _group('pci2', {PCI_CLASS: 1}, TRUSTED)], group_policy='isolate')),
        Shape('sriov: a VF on a physnet', _query(
            [_group('', FLAVOR), _group('1', {'SRIOV_NET_VF': 1}, PHYSNETS[0])],
            group_policy='none')),
        Shape('vgpu: typed, root_required AVX2', _query(
            [_group('', FLAVOR), _group('1', {'VGPU': 1}, VGPU_TYPES[0])],
            group_policy='none', root_required={ROOT_TRAITS[0]})),
        Shape('bandwidth: port below its NIC, same_subtree', _query(
            [_group('', FLAVOR),
             _group('port1', {EGRESS: 1000, INGRESS: 1000}, PHYSNETS[0]),
             _group('port1-nic', {}, NORMAL)],
            group_policy='none', same_subtree=[['port1', 'port1-nic']])),
    ]
    for groups in (4, 5, 6):
        for policy in ('none', 'isolate'):
            found.append(Shape(f'explosion: {groups} groups, {policy}', _query(
                [_group('', {'VCPU': 2, 'MEMORY_MB': 2048})]
                + [_group(str(n), {'VGPU': 1}, WIDE_TYPE) for n in range(1, groups + 1)],
                group_policy=policy), explosion=True))
    return found


# ---------------------------------------------------------------- measuring


@dataclass
class Result:
    shape: Shape
    placement_ms: list[float] = field(default_factory=list)
    view_ms: list[float] = field(default_factory=list)
    json_ms: list[float] = field(default_factory=list)
    placement_hosts: int = 0
    placement_candidates: int = 0
    view_hosts: int | None = None
    #: why the view left the shape to Placement (None: it answered)
    left_to_placement: str | None = None
    #: what the guard found wrong (None: the view's answer is Placement's)
    mismatch: str | None = None


def percentile(values: list[float], q: float) -> float | None:
    return deploy.percentile(values, q) if values else None


class _Placement:
    """GETs of ``/allocation_candidates`` at the service's microversion."""

    def __init__(self, url: str):
        self.url = url
        self.session = requests.Session()
        self.session.headers.update({**deploy.HEADERS,
                                     'OpenStack-API-Version': f'placement {MICROVERSION}'})

    def get(self, query: AllocationCandidatesQuery) -> requests.Response:
        response = self.session.get(f'{self.url}/allocation_candidates',
                                    params=query.to_params(), timeout=900)
        response.raise_for_status()
        return response

    def timed(self, query: AllocationCandidatesQuery, *, repeats: int,
              budget: float) -> list[float]:
        """Milliseconds per GET (the body read, not decoded), until ``repeats`` or
        ``budget`` seconds, whichever comes first after :data:`MIN_PLACEMENT_SAMPLES`."""
        samples: list[float] = []
        started = time.monotonic()
        while len(samples) < repeats and (len(samples) < MIN_PLACEMENT_SAMPLES
                                          or time.monotonic() - started < budget):
            begin = time.perf_counter()
            self.get(query)
            samples.append((time.perf_counter() - begin) * 1000)
        return samples


def _timed(fn: Callable[[], Any], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        # A collection lands in whichever run crosses the threshold; the guard's
        # big answers are garbage by now: run it untimed (as bench/__main__.py does).
        gc.collect()
        begin = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - begin) * 1000)
    return samples


def view_decision(view: Any, query: AllocationCandidatesQuery) -> Callable[[], Any]:
    """What a request asks of the view: its matching hosts, then the allocation
    requests of the hosts it looks at (built when their HostStates are)."""
    def decide() -> Any:
        match, _ = view.match(query)
        if match is not None and match.requests is not None:
            for row in match.rows[:HOSTS_LOOKED_AT].tolist():
                match.requests(row)
        return match
    return decide


def measure(shape: Shape, placement: _Placement, view: Any, snapshot: Any, *,
            repeats: int, budget: float) -> Result:
    from scheduler.provider_view import trees

    result = Result(shape)
    query = shape.query
    theirs = placement.get(query).json()    # whole: no limit
    result.placement_candidates = len(theirs['allocation_requests'])
    result.placement_hosts = len(_hosts(theirs))
    match, why = view.match(query)
    result.mismatch = guard(snapshot, query, match, why, theirs)
    del theirs
    if match is None:
        result.left_to_placement = why
    else:
        # Placement's worker frees the objects of the answer it just sent (hundreds
        # of thousands for an explosion tree) after the last byte: on two cores
        # that lands in the view's runs unless it is waited out.
        time.sleep(SETTLE_SECONDS)
        result.view_hosts = len(match)
        result.view_ms = _timed(view_decision(view, query), repeats)
        result.json_ms = _timed(lambda: trees.candidates(
            snapshot, query, overlay={}, microversion=MICROVERSION), repeats)
    limited = replace(query, limit=SERVICE_LIMIT)
    result.placement_ms = placement.timed(limited, repeats=repeats, budget=budget)
    return result


# ---------------------------------------------------------------- the guard


def _hosts(body: dict[str, Any]) -> set[str]:
    """The roots Placement's answer takes from (the cloud has no sharing provider)."""
    summaries = body['provider_summaries']
    return {summaries[rp]['root_provider_uuid'] for request in body['allocation_requests']
            for rp in request['allocations']}


def guard(snapshot: Any, query: AllocationCandidatesQuery, match: Any, why: str | None,
          theirs: dict[str, Any]) -> str | None:
    """What differs between the view's answer and Placement's whole answer
    ``theirs``; None when nothing does. A shape left to Placement has nothing to
    differ, unless the view said that no host fits and Placement found one."""
    from placement_client.models import Candidates
    from scheduler.provider_view import trees
    from scheduler.provider_view.view import NONE_FIT
    from tests.functional.test_provider_view import request_key
    from tests.functional.test_provider_view_nested import assert_same_answer

    hosts = _hosts(theirs)
    if match is None:
        return f'the view says none fits, Placement answers {len(hosts)} hosts' if (
            why == NONE_FIT and hosts) else None
    ours = {snapshot.uuids[row] for row in match.rows.tolist()}
    if ours != hosts:
        return (f'hosts differ: {len(ours - hosts)} only in the view, '
                f'{len(hosts - ours)} only in Placement')
    their_requests = {request_key(r) for r in theirs['allocation_requests']}
    for row in match.rows.tolist():
        given = match.requests(row)
        if not 1 <= len(given) <= trees.REQUESTS_PER_ROOT:
            return f'{len(given)} requests for {snapshot.uuids[row]}'
        if any(request_key(r) not in their_requests for r in given):
            return f'a request for {snapshot.uuids[row]} is not one of Placement\'s'
    try:
        assert_same_answer(trees.candidates(snapshot, query, overlay={},
                                            microversion=MICROVERSION),
                           Candidates.from_json(theirs, MICROVERSION), query)
    except AssertionError as e:
        return f'the JSON answer differs: {str(e)[:200]}'
    return None


# ---------------------------------------------------------------- the run


@dataclass
class Options:
    hosts: int = DEFAULT_HOSTS
    repeats: int = DEFAULT_REPEATS
    explosion_hosts: int = DEFAULT_EXPLOSION_HOSTS
    placement_budget: float = DEFAULT_PLACEMENT_BUDGET


@dataclass
class Seeded:
    placement: Any
    cloud: SyntheticCloud
    seed_seconds: float



def _ensure_classes(url: str) -> None:
    """The custom resource classes, which bench.seed_sql expects Placement to know."""
    session = requests.Session()
    session.headers.update({**deploy.HEADERS, 'OpenStack-API-Version': f'placement {MICROVERSION}'})
    for rc in CUSTOM_CLASSES:
        response = session.put(f'{url}/resource_classes/{rc}', timeout=30)
        if response.status_code not in (201, 204):
            raise RuntimeError(f'PUT /resource_classes/{rc} answered {response.status_code}: '
                               f'{response.text[:200]}')


@contextlib.contextmanager
def seeded(workdir: pathlib.Path, opts: Options) -> Iterator[Seeded]:
    """Placement on a fresh PostgreSQL database with the nested cloud in its tables."""
    from bench.seed_sql import seed_cloud_sql

    cloud = make_nested_cloud(opts.hosts, explosion_hosts=opts.explosion_hosts)
    with deploy.placement_on_postgres(workdir, workers=PLACEMENT_WORKERS) as placement:
        started = time.monotonic()
        _ensure_classes(placement.url)
        connection = deploy.connect(placement)
        try:
            seed_cloud_sql(connection, cloud)
        finally:
            connection.close()
        # Statistics for the planner, as a database in service has them.
        deploy.analyze(placement, vacuum=True)
        yield Seeded(placement, cloud, time.monotonic() - started)


def _view_over(placement: Any) -> tuple[Any, Any, Any]:
    """(reader, snapshot, view): the real reader of Placement's database, read once,
    and a view that keeps that snapshot for the whole run."""
    from scheduler.catalog.placement_db import PlacementDatabaseReader
    from scheduler.provider_view.view import ProviderView

    reader = PlacementDatabaseReader(POSTGRES_URL.rsplit('/', 1)[0] + f'/{placement.database}')
    snapshot = reader.read()
    return reader, snapshot, ProviderView(lambda _: snapshot, max_age=float('inf'))


def run(opts: Options | None = None) -> tuple[list[Result], list[Row]]:
    """Every shape measured on one seeded Placement; the results and their rows."""
    opts = opts or Options()
    workdir = pathlib.Path(tempfile.mkdtemp(prefix='bench-nested-'))
    try:
        with seeded(workdir, opts) as state:
            providers = sum(len(h.providers) for h in state.cloud.hosts)
            print(f'nested: {opts.hosts} hosts, {providers} providers seeded in '
                  f'{state.seed_seconds:.1f} s', file=sys.stderr)
            reader, snapshot, view = _view_over(state.placement)
            try:
                placement = _Placement(state.placement.url)
                results = []
                for shape in shapes():
                    results.append(measure(shape, placement, view, snapshot,
                                           repeats=opts.repeats, budget=opts.placement_budget))
                    print(table(results[-1:]).splitlines()[-1], file=sys.stderr)
            finally:
                reader.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return results, rows(results, opts.hosts, providers, state.seed_seconds)


# ---------------------------------------------------------------- reporting


def _ms(value: float | None) -> str:
    return '-' if value is None else f'{value:,.1f}'


def _ratio(results: Result, q: float) -> float | None:
    ours, theirs = percentile(results.view_ms, q), percentile(results.placement_ms, q)
    return theirs / ours if ours and theirs is not None else None


def table(results: list[Result]) -> str:
    """One line per shape: Placement's GET beside the view (ms), and the guard."""
    width = max([len('shape'), *(len(r.shape.name) for r in results)])
    lines = [f'{"shape":<{width}}  {"hosts":>5}  {"cands":>6}  {"GET p50":>8}  {"GET p99":>8}  '
             f'{"view p50":>8}  {"view p99":>8}  {"JSON p50":>8}  {"p99 ratio":>9}  guard']
    lines.append('-' * len(lines[0]))
    for r in results:
        ratio = _ratio(r, 99)
        view = (('-',) * 4 if r.left_to_placement else
                (_ms(percentile(r.view_ms, 50)), _ms(percentile(r.view_ms, 99)),
                 _ms(percentile(r.json_ms, 50)), '-' if ratio is None else f'{ratio:,.0f}x'))
        guard_cell = ('FAIL: ' + r.mismatch if r.mismatch
                      else f'ok, left to Placement: {r.left_to_placement}'
                      if r.left_to_placement else 'ok')
        lines.append(f'{r.shape.name:<{width}}  {r.placement_hosts:>5}  '
                     f'{r.placement_candidates:>6,}  {_ms(percentile(r.placement_ms, 50)):>8}  '
                     f'{_ms(percentile(r.placement_ms, 99)):>8}  {view[0]:>8}  {view[1]:>8}  '
                     f'{view[2]:>8}  {view[3]:>9}  {guard_cell}')
    return '\n'.join(lines)


def rows(results: list[Result], hosts: int, providers: int, seed_seconds: float) -> list[Row]:
    """The report's rows: per shape the p50 and p99 of the view ("ours") and of
    Placement's GET (in the "nova" column), then the guard and the target."""
    out = [Row('nested: seed Placement (setup)', hosts, seed_seconds, unit='s',
               note=f'{providers} providers straight into its tables')]
    for r in results:
        name = f'nested: {r.shape.name}'
        note = (f'{r.placement_hosts} hosts, {r.placement_candidates} candidates in '
                f'Placement\'s whole answer; {len(r.placement_ms)} GETs (limit '
                f'{SERVICE_LIMIT}), {len(r.view_ms)} view runs')
        if r.left_to_placement:
            out.append(Row(name, hosts, None, percentile(r.placement_ms, 99),
                           note=f'left to Placement: {r.left_to_placement}; {note}'))
            continue
        for q in (50, 99):
            out.append(Row(f'{name}, p{q}', hosts, percentile(r.view_ms, q),
                           percentile(r.placement_ms, q), _ratio(r, q),
                           note=f'{note}; JSON answer p{q} '
                                f'{_ms(percentile(r.json_ms, q))} ms'))
    wrong = [r for r in results if r.mismatch]
    out.append(Row('nested: the view answers as Placement does', hosts, len(wrong), unit='n',
                   target='every shape', passed=not wrong,
                   note='; '.join(f'{r.shape.name}: {r.mismatch}' for r in wrong)
                   or f'{len(results)} shapes'))
    out.append(_explosion_target(results, hosts))
    return out


def _explosion_target(results: list[Result], hosts: int) -> Row:
    """The worst p99 of the explosion shapes the view answers. One it leaves to
    Placement fails the target (the request then waits for Placement's seconds),
    unless no host holds it (Placement's answer is empty too)."""
    explosion = [r for r in results if r.shape.explosion]
    answered = [r for r in explosion if r.view_ms]
    deferred = [r for r in explosion if r.left_to_placement and r.placement_hosts]
    worst = max((percentile(r.view_ms, 99) or 0.0 for r in answered), default=None)
    return Row('candidate-explosion: view p99 <= 50 ms', hosts, worst,
               target=f'<= {EXPLOSION_P99_MS:g} ms',
               passed=worst is not None and worst <= EXPLOSION_P99_MS and not deferred,
               note=f'the worst p99 of the {len(answered)} of {len(explosion)} explosion '
                    f'shapes the view answers; the others: no host holds them'
                    + ''.join(f'; {r.shape.name} left to Placement: {r.left_to_placement}'
                              for r in deferred))


def main(argv: list[str] | None = None) -> int:
    parser = settings_parser('python -m bench.nested', __doc__, Options())
    parser.add_argument('--json', metavar='PATH', help='also write the rows as JSON')
    args = parser.parse_args(argv)
    opts = settings_from(args, Options())
    try:
        results, report = run(opts)
    except deploy.ServiceMissing as e:
        print(f'cannot run: {e}', file=sys.stderr)
        return 2
    print(render(report))
    print()
    print(table(results))
    if args.json:
        write_json(report, args.json)
    return 1 if any(r.passed is False for r in report) else 0


if __name__ == '__main__':
    sys.exit(main())
