"""bench.view's nested workload is answered by the provider view, not by Placement.

A small cloud with nested trees (bench.synthetic ``nested=True``: NUMA nodes, PCI
devices tracked in Placement, pGPUs of several vGPU types), the real service with
the view on, and each of bench.view's nested kinds (Nova flavor extra specs with
granular groups) asked a few times: each is placed, no ``GET /allocation_candidates``
reaches Placement (its access log), the service's metric says the view answered every
query, and each claim is the allocation Placement's own answer would hold (a root and
the child the granular group asks for).
"""
from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

import pytest
import requests

from bench import deploy, view
from tests.fixtures.postgres_placement import ServiceMissing, require_or_skip

HOSTS = 200
ASKED = 3


@pytest.fixture
def dep() -> Iterator[deploy.Deployment]:
    with contextlib.ExitStack() as stack:
        try:
            seeded = stack.enter_context(deploy.seeded_deployment(
                HOSTS, direct=True, fill_mean=0.5, nested=True))
        except ServiceMissing as e:
            require_or_skip(str(e))
        yield seeded


def test_the_nested_kinds_are_answered_by_the_view_with_no_query_to_placement(dep):
    from scheduler.rpc.client import SchedulerClient

    opts = view.Options(workers=1, nested=True)
    run = view._Run(dep, opts)
    outcomes: Counter = Counter()
    consumers: dict[str, view.Kind] = {}
    with run.service(view._view_config(dep, opts)) as (svc, transport):
        client = SchedulerClient(transport, topic=svc.topic, timeout=120)
        run.fresh()
        for kind, _ in view.NESTED_KINDS:
            decide = view._service_decide(client, view._Rngs(1), ((kind, 1.0),), outcomes)
            for _ in range(ASKED):
                consumers[decide()] = kind
        asked = view._view_queries(view._scraped(svc))
    calls = run.log.read_new()

    assert {name for name, outcome in outcomes if outcome != 'placed'} == set(), outcomes
    assert len(consumers) == ASKED * len(view.NESTED_KINDS)
    gets = [c.query for c in calls if c.kind == 'GET a_c']
    assert gets == [], gets
    assert asked == Counter({('view', ''): len(consumers)}), asked

    providers = {p.uuid: (h, p) for h in dep.cloud.hosts for p in h.providers}
    headers = {**deploy.HEADERS, 'OpenStack-API-Version': 'placement 1.36'}
    for consumer, kind in consumers.items():
        held = requests.get(f'{dep.url}/allocations/{consumer}', headers=headers,
                            timeout=30).json()['allocations']
        assert len({providers[rp][0].name for rp in held}) == 1, (kind.name, held)
        host = providers[next(iter(held))][0]
        assert host.root.uuid in held, (kind.name, held)
        assert held[host.root.uuid]['resources'] == kind.resources, (kind.name, held)
        children = {rp: a['resources'] for rp, a in held.items() if rp != host.root.uuid}
        assert len(children) == len(kind.groups), (kind.name, held)
        for rp, resources in children.items():
            child = providers[rp][1]
            assert any(resources == wanted and traits <= set(child.traits)
                       for wanted, traits in kind.groups), (kind.name, child, resources)
    deploy.delete_consumers(dep.url, list(consumers))
    assert view._read_back(dep) == (0, run.seeded_consumers)
