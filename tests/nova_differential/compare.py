"""One case through both sides: each filter's verdict per host, each weigher's weight
per host, and what consuming the first instance leaves of the NUMA cells and PCI pools."""
from __future__ import annotations

import copy
import dataclasses
import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.nova_differential import cloud as cloudmod
from tests.nova_differential import compute, decision, known, nova_side, our_side

#: Compared with a relative and absolute tolerance: both sides normalise in floats.
WEIGHT_TOLERANCE = 1e-9
CONSUME = 'consume (NUMA cells, PCI pools)'
DECISION = 'whole decision (hosts and alternates)'
#: Which side of the pipeline enforces what a filter checks when Placement
#: already decides part of it (shown in the table).
ENFORCED_ALSO_BY_PLACEMENT = {
    'NUMATopologyFilter': 'PCPU/VCPU/MEMORY_MB totals: Placement; per-cell fit: the filter',
    'PciPassthroughFilter': 'PCI in Placement (off here): Placement; pools: the filter',
    'ComputeFilter': 'disabled computes: Placement too (COMPUTE_STATUS_DISABLED)',
    'AggregateMultiTenancyIsolation': 'with limit_tenants_to_placement_aggregate: Placement',
}


@dataclass
class Outcome:
    """What one name (filter, weigher or consume) did in one case."""

    name: str
    mattered: bool
    #: (host, what Nova did, what we did) for undocumented differences
    differences: list[tuple[str, str, str]] = field(default_factory=list)
    #: rule name -> hosts
    documented: dict[str, list[str]] = field(default_factory=dict)
    nova_log: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class CaseResult:
    case: cloudmod.Case
    outcomes: list[Outcome]
    refused: int   # requests Nova refused before this one was drawn


def prepared(case: cloudmod.Case, now: datetime.datetime
             ) -> tuple[cloudmod.Case, int, compute.WrittenCloud, dict[str, Any]] | None:
    refused = 0
    while True:
        try:
            primitive = compute.build_request(case)
            break
        except compute.Refused:
            refused += 1
            if refused > 40:
                return None
            case = cloudmod.redraw_request(case, refused)
    return case, refused, compute.write_cloud(case, now), primitive


def run_case(case: cloudmod.Case, names: Iterable[str] | None = None,
             now: datetime.datetime | None = None) -> CaseResult | None:
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    ready = prepared(case, now)
    if ready is None:
        return None
    case, refused, written, primitive = ready
    wanted = set(names) if names else None
    outcomes = []
    answer = compute.placement_answer(written, primitive)
    nova_states = nova_side.host_states(written, answer)
    nova_spec = compute.nova_request(primitive)
    ours = our_side.host_view(written, answer, now)
    our_spec = our_side.request_spec(primitive)
    for name in sorted(nova_side.filter_classes()):
        if wanted is None or name in wanted:
            outcomes.append(compare_filter(name, written, answer, nova_states, nova_spec, ours,
                                           our_spec))
    for name in sorted(nova_side.weigher_classes()):
        if wanted is None or name in wanted:
            outcomes.append(compare_weigher(name, written, nova_states, nova_spec, ours,
                                            our_spec))
    if (wanted is None or CONSUME in wanted or 'consume' in wanted) and \
            case.request.num_instances > 1:
        outcomes.append(compare_consume(written, answer, primitive, now))
    if wanted is None or DECISION in wanted or 'decision' in wanted:
        outcomes.append(compare_decision(written, answer, primitive, now, outcomes))
    return CaseResult(case, outcomes, refused)


def compare_decision(written: compute.WrittenCloud, answer: dict[str, Any],
                     primitive: dict[str, Any], now: datetime.datetime,
                     earlier: list[Outcome]) -> Outcome:
    """The whole decision (:mod:`.decision`), where the inputs are equal and no
    documented difference of a filter or weigher decides it."""
    outcome = Outcome(DECISION, mattered=False)
    if any(h.host.cpu_ratio != 1 or h.host.ram_ratio != 1 or h.host.disk_ratio != 1
           for h in written.hosts):
        return outcome   # free amounts differ on purpose: not comparable
    documented = sorted({rule for o in earlier for rule in o.documented})
    if documented:
        outcome.documented[f'decided by a documented difference ({documented[0]})'] = []
        return outcome
    outcome.mattered = True
    nova_did = decision.nova_decision(written, answer, primitive)
    we_did = decision.our_decision(written, answer, primitive, now)
    found, tie = decision.differences(nova_did, we_did)
    rule = known.consume_rule(nova_did.consume_failure)
    if isinstance(nova_did.hosts, str) and nova_did.hosts.startswith(decision.METRIC_NOT_FOUND):
        rule = known.METRIC_MISSING
    if found and rule is not None:
        outcome.documented[f'decided by a documented difference ({rule})'] = []
    elif tie:
        outcome.documented['equal weights ordered otherwise (Nova: a set of host states; '
                           'ours: Placement\'s order)'] = []
    elif found:
        outcome.differences.append(('(decision)', found[0], ''))
    return outcome


def compare_filter(name: str, written: compute.WrittenCloud, answer: dict[str, Any],
                   nova_states: list[Any], nova_spec: Any, ours: our_side.OurHosts,
                   our_spec: Any) -> Outcome:
    verdict = nova_side.run_filter(name, nova_states, nova_spec)
    passed, reasons = our_side.run_filter(name, ours, our_spec)
    offered = [h for h in written.hosts if h.host.uuid in answer['provider_summaries']]
    everyone = {h.host.name for h in offered}
    outcome = Outcome(name, mattered=bool(everyone - verdict.passed or everyone - passed))
    for h in offered:
        host = h.host.name
        n_ok, o_ok = host in verdict.passed, host in passed
        raised = verdict.raised.get(host)
        if n_ok == o_ok and raised is None:
            continue
        diff = known.FilterDiff(name, h, n_ok, raised, o_ok, reasons.get(host),
                                tuple(a for a in written.case.aggregates if host in a.hosts),
                                written.case.request.hints)
        rule = known.filter_rule(diff)
        if rule is not None:
            outcome.documented.setdefault(rule, []).append(host)
            continue
        outcome.differences.append((host, raised or ('passes' if n_ok else 'fails'),
                                    'passes' if o_ok else f'fails: {reasons.get(host)}'))
        outcome.nova_log[host] = verdict.log.get(host, [])
    return outcome


def compare_weigher(name: str, written: compute.WrittenCloud, nova_states: list[Any],
                    nova_spec: Any, ours: our_side.OurHosts, our_spec: Any) -> Outcome:
    our_w = our_side.run_weigher(name, ours, our_spec)
    try:
        nova_w = nova_side.run_weigher(name, nova_states, nova_spec)
    except nova_side.WeigherRaised as e:
        outcome = Outcome(name, mattered=True)
        offered = frozenset(s.host for s in nova_states)
        left_out = sorted(offered - set(our_w))
        rule = known.weigher_raised_rule(known.WeightDiff(name, written, {}, our_w, offered),
                                         str(e))
        if rule is not None:
            outcome.documented[rule] = left_out
        else:
            outcome.differences.append(('(all)', str(e), f'weighed {len(our_w)} host(s)'))
        return outcome
    mattered = len(set(nova_w.values())) > 1 or len(set(our_w.values())) > 1
    outcome = Outcome(name, mattered=mattered)
    differing = [h for h in nova_w if not _close(nova_w[h], our_w.get(h))]
    if not differing:
        return outcome
    rule = known.weight_rule(known.WeightDiff(name, written, nova_w, our_w,
                                              frozenset(s.host for s in nova_states)))
    if rule is not None:
        outcome.documented[rule] = differing
        return outcome
    for host in differing:
        outcome.differences.append((host, f'{nova_w[host]:.6g}', f'{our_w.get(host)!r}'))
    return outcome


def _close(a: float, b: float | None) -> bool:
    return b is not None and abs(a - b) <= WEIGHT_TOLERANCE * max(1.0, abs(a), abs(b))


# ---------------------------------------------------------------------------- consume
def compare_consume(written: compute.WrittenCloud, answer: dict[str, Any],
                    primitive: dict[str, Any], now: datetime.datetime) -> Outcome:
    """Where both sides' NUMA and PCI filters pass a host for the first instance, the
    cells and pools each leaves for the second after consuming the first there."""
    nova_spec = compute.nova_request(primitive)
    if nova_spec.numa_topology is None and not nova_spec.pci_requests.requests:
        return Outcome(CONSUME, mattered=False)
    nova_states = nova_side.host_states(written, answer)
    pair = ('NUMATopologyFilter', 'PciPassthroughFilter')
    nova_pass = set.intersection(*(nova_side.run_filter(f, nova_states, nova_spec).passed
                                   for f in pair))
    ours = our_side.host_view(written, answer, now)
    our_spec = our_side.request_spec(primitive)
    run = our_side.apply_filters([our_side._filter(f, now) for f in pair], ours.view,
                                 our_spec, instance_index=0)
    outcome = Outcome(CONSUME, mattered=False)
    uuid = compute.instance_uuids(written.case)[0]
    for host in run.hosts:
        if host.host not in nova_pass:
            continue
        outcome.mattered = True
        host.consume(host.allocation_candidates[0], uuid)
        mine = _our_usage(host)
        consumed = nova_side.consume(nova_states, host.host, nova_spec)
        theirs = _nova_usage(consumed)
        if mine == theirs:
            continue
        rule = known.consume_rule(consumed.consume_failure)
        if rule is not None:
            outcome.documented.setdefault(rule, []).append(host.host)
        else:
            outcome.differences.append((host.host, _show(theirs), _show(mine)))
    return outcome


# An exhausted pool: Nova removes it (PciDeviceStats._decrease_pool_count), we keep
# it at 0; both mean no device there, so neither side shows it.
def _nova_usage(state: Any) -> dict[str, Any]:
    cells = {}
    for c in state.numa_topology.cells if state.numa_topology else ():
        cells[c.id] = (c.cpu_usage, c.memory_usage, tuple(sorted(c.pinned_cpus)),
                       tuple((p.size_kb, p.used) for p in c.mempages))
    pools = sorted(((p['product_id'], p.get('numa_node'), p.get('dev_type'),
                     p.get('physical_network'), p['count']) for p in state.pci_stats.pools
                    if p['count']), key=repr)
    return {'cells': cells, 'pools': pools}


def _our_usage(host: Any) -> dict[str, Any]:
    cells = {}
    for c in host.numa_topology.cells if host.numa_topology else ():
        cells[c.id] = (c.cpu_usage, c.memory_usage, tuple(sorted(c.pinned_cpus)),
                       tuple((p.size_kb, p.used) for p in c.mempages))
    pools = sorted(((p.product_id, p.numa_node, p.tags.get('dev_type'),
                     p.tags.get('physical_network'), p.count)
                    for p in (host.pci_stats.pools if host.pci_stats else ()) if p.count),
                   key=repr)
    return {'cells': cells, 'pools': pools}


def _show(usage: dict[str, Any]) -> str:
    cells = '; '.join(f'cell {i}: cpu_usage {u[0]}, memory_usage {u[1]}, pinned {list(u[2])}, '
                      f'pages used {dict(u[3])}' for i, u in sorted(usage['cells'].items()))
    pools = ', '.join(f'{p[0]}@{p[1]}={p[4]}' for p in usage['pools'])
    return f'{cells} | pools {pools}'


# ----------------------------------------------------------------------------- shrink
def shrink(case: cloudmod.Case, name: str, host: str) -> cloudmod.Case:
    """A smaller case that still differs for ``name`` on ``host``: that host alone,
    then each extra spec, image property, hint, guest and pool dropped while the
    difference stays."""
    small = copy.deepcopy(case)
    small.hosts = [h for h in small.hosts if h.name == host]
    small.aggregates = [a for a in small.aggregates if host in a.hosts]
    if not _still_differs(small, name, host):
        small = copy.deepcopy(case)   # the difference needs the other hosts
    request = small.request
    for attr in ('extra_specs', 'image_properties', 'hints'):
        for key in list(getattr(request, attr)):
            trial = copy.deepcopy(small)
            del getattr(trial.request, attr)[key]
            if _still_differs(trial, name, host):
                small = trial
    for attempt in ('group', 'physnets', 'aggregates'):
        trial = copy.deepcopy(small)
        if attempt == 'group':
            trial.request.group = None
        elif attempt == 'physnets':
            trial.request.physnets, trial.request.tunneled = [], False
            trial.request.sriov_ports = []
        else:
            trial.aggregates = []
        if _still_differs(trial, name, host):
            small = trial
    target = next((h for h in small.hosts if h.name == host), None)
    if target is not None:
        for kind in ('guests', 'pools'):
            for item in list(getattr(target, kind)):
                trial = copy.deepcopy(small)
                trial_host = next(h for h in trial.hosts if h.name == host)
                getattr(trial_host, kind).remove(item)
                if _still_differs(trial, name, host):
                    small, target = trial, trial_host
    if small.request.num_instances > 1 and name != CONSUME:
        trial = copy.deepcopy(small)
        trial.request.num_instances = 1
        if _still_differs(trial, name, host):
            small = trial
    return small


def _still_differs(case: cloudmod.Case, name: str, host: str) -> bool:
    frozen = dataclasses.replace(case)
    try:
        result = run_fixed(frozen, name)
    except Exception:  # noqa: BLE001 - a shrunk case Nova refuses is not a reproduction
        return False
    return result is not None and any(
        d[0] == host for o in result.outcomes if o.name == name for d in o.differences)


def run_fixed(case: cloudmod.Case, name: str) -> CaseResult | None:
    """:func:`run_case` for one name, without drawing another request."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    try:
        compute.build_request(case)
    except compute.Refused:
        return None
    return run_case(case, [name], now)


def describe(case: cloudmod.Case, host: str) -> list[str]:
    """The case's request and one host, as a reproduction shows them."""
    r = case.request
    lines = [f'request: {r.vcpus} vCPU, {r.memory_mb} MB, {r.root_gb}+{r.ephemeral_gb} GB, '
             f'{r.num_instances} instance(s), project {r.project_id[:8]}',
             f'  extra specs: {r.extra_specs}', f'  image {r.image_id[:8]}: {r.image_properties}']
    if r.hints:
        lines.append(f'  hints: {r.hints}')
    if r.group:
        lines.append(f'  group: {r.group}')
    if r.physnets or r.tunneled:
        lines.append(f'  networks: physnets {r.physnets}, tunneled {r.tunneled}')
    if r.sriov_ports:
        lines.append(f'  SR-IOV ports (physnet, vnic_type, numa policy): {r.sriov_ports}')
    for h in case.hosts:
        if h.name != host:
            continue
        lines.append(f'host {h.name}: ratios cpu {h.cpu_ratio} ram {h.ram_ratio}, '
                     f'disabled {h.disabled}, forced_down {h.forced_down}, '
                     f'seen {h.seen_seconds_ago}s ago, stats io {h.io_workload} '
                     f'instances {h.num_instances} failed {h.failed_builds}')
        for c in h.cells:
            lines.append(f'  cell {c.id}: cpuset {c.cpuset} pcpuset {c.pcpuset} '
                         f'siblings {c.siblings} memory {c.memory} pages {c.mempages} '
                         f'socket {c.socket} physnets {c.physnets} tunneled {c.tunneled}')
        for g in h.guests:
            lines.append(f'  guest: {g.vcpus} vCPU {g.memory_mb} MB {g.extra_specs}')
        for p in h.pools:
            lines.append(f'  pool: {p}')
        lines.append(f'  cpu_info {h.cpu_info}, {h.hypervisor_type} {h.hypervisor_version}, '
                     f'supported {h.supported_instances}, metrics {h.metrics}')
    for a in case.aggregates:
        if host in a.hosts:
            lines.append(f'aggregate {a.name}: {a.metadata}')
    return lines
