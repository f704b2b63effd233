"""Nova 34's side: its HostStates from the rows, its filters and weighers, unmodified.

The input path is nova-scheduler's own (``HostManager._get_host_states``):
``ComputeNode._from_db_object`` and ``Service._from_db_object`` on the rows,
``HostState.update(compute, dict(service), aggregates, instances)``, then the
allocation candidates of Placement's answer attached as ``_schedule`` does.
Nothing of Nova's is patched.
"""
from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.nova_differential.compute import WrittenCloud, context, nova

LOG_RECORDS: list[str] = []


class _Capture(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            LOG_RECORDS.append(f'{record.name}: {record.getMessage()}')
        except Exception:  # noqa: BLE001 - a log line that cannot be formatted
            LOG_RECORDS.append(f'{record.name}: {record.msg}')


def capture_logs(debug: bool) -> None:
    """Nova's log lines are kept per filter call (for reproductions) only with
    ``debug``: its DEBUG lines cost as much as the filters themselves."""
    logger = logging.getLogger('nova')
    if not any(isinstance(h, _Capture) for h in logger.handlers):
        logger.addHandler(_Capture())
        logger.propagate = False
    logger.setLevel(logging.DEBUG if debug else logging.WARNING)


@dataclass
class Verdict:
    passed: set[str]
    #: host -> the exception the filter raised on it (Nova's filters may raise).
    raised: dict[str, str]
    log: dict[str, list[str]]


def host_states(cloud: WrittenCloud, answer: dict[str, Any]) -> list[Any]:
    n = nova()
    ctx = context()
    o = n.objects
    candidates = {a['mappings'][''][0]: a for a in answer['allocation_requests']}
    states = []
    for h in cloud.hosts:
        if h.host.uuid not in candidates:
            continue   # Placement did not offer it: nova-scheduler never reads it
        compute = o.ComputeNode._from_db_object(ctx, o.ComputeNode(ctx), dict(h.compute_row))
        service = o.Service._from_db_object(ctx, o.Service(ctx), dict(h.service_row))
        aggregates = [a for a in cloud.aggregates if h.host.name in a.hosts]
        instances = {u: o.Instance(uuid=u, host=h.host.name, node=h.host.name)
                     for u in h.instances}
        state = n.host_manager.HostState(h.host.name, h.host.name, h.host.cell)
        state.update(compute, dict(service), aggregates, instances)
        state.allocation_candidates = [copy.deepcopy(candidates[h.host.uuid])]
        states.append(state)
    return states


def filter_classes() -> dict[str, type]:
    return {cls.__name__: cls for cls in nova().filters.all_filters()}


def weigher_classes() -> dict[str, type]:
    return {cls.__name__: cls for cls in nova().weights.all_weighers()}


def run_filter(name: str, states: Sequence[Any], spec: Any) -> Verdict:
    """Each host judged alone by a fresh instance of the filter (as Nova's
    ``BaseFilter.filter_all`` calls ``_filter_one`` per host)."""
    filter_ = filter_classes()[name]()
    passed: set[str] = set()
    raised: dict[str, str] = {}
    log: dict[str, list[str]] = {}
    for state in states:
        del LOG_RECORDS[:]
        keep = copy.copy(state)
        keep.allocation_candidates = copy.deepcopy(state.allocation_candidates)
        try:
            if filter_._filter_one(keep, spec):
                passed.add(state.host)
        except Exception as e:  # noqa: BLE001 - Nova's filters may raise; that is a verdict
            raised[state.host] = f'{type(e).__name__}: {e}'
        log[state.host] = list(LOG_RECORDS)
    return Verdict(passed, raised, log)


def run_weigher(name: str, states: Sequence[Any], spec: Any) -> dict[str, float]:
    """Each host's weight from this weigher alone (normalised, times its multiplier)."""
    n = nova()
    weigher = weigher_classes()[name]()
    try:
        weighed = n.weights.HostWeightHandler().get_weighed_objects([weigher], list(states),
                                                                    spec)
    except Exception as e:  # noqa: BLE001 - e.g. a required metric missing: the request fails
        raise WeigherRaised(f'{type(e).__name__}: {e}') from None
    return {w.obj.host: float(w.weight) for w in weighed}


class WeigherRaised(Exception):
    """Nova's weigher raised: nova-scheduler fails the whole request."""


def consume(states: Sequence[Any], host: str, spec: Any) -> Any:
    """The host's state after Nova's ``consume_from_request`` (the next instance's
    view), once its NUMATopologyFilter has passed the host and left its limits
    (ratios and network metadata) in ``host_state.limits``, as in ``_schedule``.
    ``states`` are used up."""
    # The state itself, as _schedule has it: a deep copy would rebuild its CPU sets,
    # whose iteration order decides which free CPU Nova pins.
    state = next(s for s in states if s.host == host)
    spec = spec.obj_clone()
    if not filter_classes()['NUMATopologyFilter']().host_passes(state, spec):
        raise AssertionError(f'NUMATopologyFilter no longer passes {host}')
    del LOG_RECORDS[:]
    state.consume_from_request(spec)
    # consume_from_request swallows its own errors (set_update_time_on_success) and
    # says so at WARNING: the usage it had not yet added is then never added.
    state.consume_failure = next((line for line in LOG_RECORDS
                                  if 'failed to consume from instance' in line), None)
    return state
