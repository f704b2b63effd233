"""A shared, recent view of Placement's providers, to answer the requests it can
answer exactly without a ``GET /allocation_candidates`` each.

Placement computes every matching candidate before it applies ``limit``, so a
request pays for the whole cloud however few hosts it needs (1.3-2.7 s at 10,000
providers), while the claim itself costs about 50 ms at any size. Here, as
kube-scheduler decides from its cache and Nomad from a state snapshot, a worker
decides from a snapshot of the providers (inventories, usages, traits,
aggregates, trees) read from Placement's database (:mod:`scheduler.catalog.placement_db`,
optional and read-only), and Placement stays the only writer and the arbiter: a
claim it refuses (the view was stale) moves on to the next candidate, counts as
used in the view and starts a new read; it can cost a retry, never an overcommit.

* :mod:`.snapshot`: the providers as columns, read in one transaction.
* :mod:`.answer`: which queries the snapshot answers exactly, and the answer of
  those one root holds alone.
* :mod:`.trees`: the answer of the others (granular groups, nested trees), tree by
  tree: :mod:`.groups` finds each group's providers, :mod:`.search` a combination.
* :mod:`.view`: the shared holder: how old a snapshot may be, the worker's own
  claims since it was read, refused claims.
"""
