"""bench.match times what the provider view does for each kind of bench.view's workload."""
from __future__ import annotations

import numpy as np

from bench import match
from bench.view import NESTED_KINDS


def test_every_nested_kind_is_matched_and_tabled_in_process():
    rows = match.run(match.Options(providers=300, nested=True, requests=120))

    matched = {r.name for r in rows if r.name.startswith('match: ')}
    assert {f'match: {kind.name}' for kind, _ in NESTED_KINDS} <= matched
    assert "match: the workload's mix" in matched
    assert {'held hosts out of reach: found afresh', 'held hosts out of reach: rows kept'} <= {
        r.name for r in rows}
    assert all(r.ours_ms is not None and r.ours_ms > 0 for r in rows)


def test_the_snapshot_holds_every_provider_of_the_cloud_under_its_root():
    cloud = match.make_cloud(50, nested=True)

    snapshot = match.snapshot_of(cloud)

    providers = [p for host in cloud.hosts for p in host.providers]
    assert len(snapshot) == len(providers)
    for host in cloud.hosts:
        root = snapshot.index[host.root.uuid]
        assert all(snapshot.roots[snapshot.index[c.uuid]] == root for c in host.children)


def test_the_read_a_take_is_timed_on_is_what_a_read_after_claims_would_find():
    # Taken in, it gives each provider read again a generation and a unit of usage
    # more, and leaves everything else as it was.
    cloud = match.make_cloud(40, nested=True)
    snapshot = match.snapshot_of(cloud)
    rows = np.array([0, 3, 7])

    taken = match._read_after_claims(snapshot, rows).apply(snapshot)

    assert taken is not None
    for row in range(len(snapshot)):
        before, after = snapshot.inventory_of(row), taken.inventory_of(row)
        moved = row in rows.tolist()
        assert int(taken.generations[row]) == int(snapshot.generations[row]) + moved
        assert {rc: v[:6] for rc, v in after.items()} == {rc: v[:6] for rc, v in before.items()}
        assert {rc: v[6] - before[rc][6] for rc, v in after.items()} == {
            rc: int(moved) for rc in before}
        assert taken.traits.of(row) == snapshot.traits.of(row)
