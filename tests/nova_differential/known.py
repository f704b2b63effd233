"""Differences from Nova that are on purpose (doc/nova-compatibility.md), and the
rules that recognise exactly those, so that any other difference fails the run.

A rule sees one host's two verdicts for one filter (or one host's two weights
for one weigher) and the inputs both sides were given; it returns its name
when the difference is the documented one, else None.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.nova_differential.compute import METRICS, WrittenCloud, WrittenHost


@dataclass(frozen=True)
class FilterDiff:
    filter: str
    host: WrittenHost
    nova_passed: bool
    nova_raised: str | None
    ours_passed: bool
    our_reason: str | None
    host_aggregates: tuple[Any, ...] = ()
    hints: dict[str, Any] | None = None


@dataclass(frozen=True)
class WeightDiff:
    weigher: str
    cloud: WrittenCloud
    nova: dict[str, float]
    ours: dict[str, float]
    #: the hosts Placement offered (those weighed)
    offered: frozenset[str] = frozenset()


FilterRule = Callable[[FilterDiff], bool]
WeightRule = Callable[[WeightDiff], bool]


def _raises_where_we_judge(d: FilterDiff) -> bool:
    # doc/nova-compatibility.md, ComputeCapabilitiesFilter and
    # AggregateInstanceExtraSpecsFilter: a numeric operator (``>=``, ``<=``, ``<``, ...)
    # against a value that is not a number raises in Nova's
    # ``extra_specs_ops.match`` (the request fails there); here that value does not
    # match, so the host fails, or passes on another aggregate's value that does.
    return (d.filter in ('ComputeCapabilitiesFilter', 'AggregateInstanceExtraSpecsFilter')
            and d.nova_raised is not None and d.nova_raised.startswith(('ValueError',
                                                                         'TypeError'))
            and (not d.ours_passed or d.filter == 'AggregateInstanceExtraSpecsFilter'
                 and len(d.host_aggregates) > 1))


_AGGREGATE_KEYS = {'AggregateIoOpsFilter': 'max_io_ops_per_host',
                   'AggregateNumInstancesFilter': 'max_instances_per_host'}


def _unparsable_aggregate_value_ignored(d: FilterDiff) -> bool:
    # doc/nova-compatibility.md, IoOpsFilter / AggregateIoOpsFilter (and the
    # instances' one): when one of the host's aggregates gives a value that is
    # not an integer, Nova falls back to the configured value for the host;
    # here the valid values still apply. Only when both kinds of value are there.
    key = _AGGREGATE_KEYS.get(d.filter)
    if key is None or not d.nova_passed or d.ours_passed:
        return False
    values = [a.metadata[key] for a in d.host_aggregates if key in a.metadata]
    valid = [v for v in values if v.strip().lstrip('-').isdigit()]
    return bool(valid) and len(valid) < len(values)


def _query(d: FilterDiff) -> str:
    hints = d.hints or {}
    value = hints.get('query')
    return value if isinstance(value, str) else ''


def _json_not_is_a_boolean(d: FilterDiff) -> bool:
    # doc/nova-compatibility.md, JsonFilter: ``not`` is a real boolean here. Nova's
    # ``JsonFilter._not`` returns a list (``[not arg for arg in args]``), which is
    # true whatever it holds, so Nova passes a host the query's ``not`` excludes.
    return d.filter == 'JsonFilter' and '"not"' in _query(d) and d.nova_passed \
        and not d.ours_passed


def _json_host_ip_is_text(d: FilterDiff) -> bool:
    # doc/nova-compatibility.md, JsonFilter: ``$host_ip`` is the address's text
    # here. Nova's is a netaddr IPAddress (ComputeNode.host_ip), which equals no
    # string: a query that names the host's address never matches it there.
    host_ip = d.host.compute_row['host_ip']
    query = _query(d)
    return d.filter == 'JsonFilter' and '$host_ip' in query and f'"{host_ip}"' in query \
        and d.ours_passed and not d.nova_passed


FILTER_RULES: dict[str, FilterRule] = {
    'JsonFilter: not is a boolean here (a list, always true, in Nova)': _json_not_is_a_boolean,
    'JsonFilter: $host_ip compares as text here (an IPAddress equal to no string in Nova)':
        _json_host_ip_is_text,
    'a numeric operator on a non-number: Nova raises, we judge the host': _raises_where_we_judge,
    'an unparsable aggregate value: Nova falls back to the option, we keep the valid ones':
        _unparsable_aggregate_value_ignored,
}


def _free_from_placement(resource_classes: tuple[str, ...], row_free: Callable[[Any], float]
                         ) -> WeightRule:
    def rule(d: WeightDiff) -> bool:
        # doc/nova-compatibility.md, RAMWeigher/CPUWeigher/DiskWeigher: free amounts
        # come from Placement (its capacity includes the allocation ratio and the
        # reserved amount), not from the compute_nodes row. Recognised only when
        # the two free amounts differ for some host of the case.
        return any(sum(h.placement_free(rc) for rc in resource_classes) != row_free(h)
                   for h in d.cloud.hosts if h.host.name in d.offered)
    return rule


def _row_free_ram(h: WrittenHost) -> float:
    return h.compute_row['free_ram_mb']


def _row_free_vcpus(h: WrittenHost) -> float:
    row = h.compute_row
    return row['vcpus'] * row['cpu_allocation_ratio'] - row['vcpus_used']


def _row_free_disk(h: WrittenHost) -> float:
    row = h.compute_row
    return min(row['free_disk_gb'], row['disk_available_least'])


WEIGHT_RULES: dict[str, dict[str, WeightRule]] = {
    'RAMWeigher': {'free RAM from Placement': _free_from_placement(('MEMORY_MB',),
                                                                   _row_free_ram)},
    'CPUWeigher': {'free vCPUs from Placement': _free_from_placement(('VCPU', 'PCPU'),
                                                                     _row_free_vcpus)},
    'DiskWeigher': {'free disk from Placement': _free_from_placement(('DISK_GB',),
                                                                     _row_free_disk)},
}


METRIC_MISSING = 'a host without a weighed metric: Nova fails the request, we leave the host out'


def weigher_raised_rule(d: WeightDiff, error: str) -> str | None:
    """doc/nova-compatibility.md, MetricsWeigher: with ``[metrics] required`` a host
    lacking a weighed metric is left out here; Nova raises and fails the request.
    Recognised only when exactly the hosts lacking a metric were left out."""
    if d.weigher != 'MetricsWeigher' or not error.startswith('ComputeHostMetricNotFound'):
        return None
    wanted = [s.split('=')[0] for s in METRICS['weight_setting']]
    offered = [h for h in d.cloud.hosts if h.host.name in d.offered]
    lacking = {h.host.name for h in offered if any(m not in h.host.metrics for m in wanted)}
    kept = {h.host.name for h in offered} - lacking
    if set(d.ours) == kept or (len(kept) <= 1 and set(d.ours) <= kept):
        return METRIC_MISSING
    return None


def consume_rule(nova_failure: str | None) -> str | None:
    """doc/nova-compatibility.md, NUMATopologyFilter: where Nova's
    ``consume_from_request`` raises (e.g. ``CPUPinningInvalid`` when isolate's
    sibling reservation meets a CPU already pinned), ``set_update_time_on_success``
    swallows the error with a WARNING and the NUMA and PCI usage of the instance is
    never added for the next instance of the request; here it is. Recognised only
    by that WARNING."""
    if nova_failure is None:
        return None
    return "Nova's consumption raised and was skipped (the host's usage left as before)"


def filter_rule(d: FilterDiff) -> str | None:
    return next((name for name, rule in FILTER_RULES.items() if rule(d)), None)


def weight_rule(d: WeightDiff) -> str | None:
    return next((name for name, rule in WEIGHT_RULES.get(d.weigher, {}).items() if rule(d)),
                None)
