"""One request's stages, one module each, named as the metric stages are.

In the order :class:`scheduler.manager.SchedulerManager` runs them:

* :mod:`.request_filters` — Nova's request filters edit the spec (or fail it);
* :mod:`.placement_query` — destination resolution, the translation into
  ``GET /allocation_candidates``, candidate reuse (:mod:`.candidate_reuse`), the
  PCPU fallback;
* :mod:`.hosts` — services' and compute nodes' freshness, provider names,
  unresolved providers, the host table, the cell and name restrictions, the
  rebuild check's hosts;
* :mod:`.decide` — per instance: :mod:`.filtering`, :mod:`.weighing`,
  :mod:`.ordering`, then a host is chosen (:mod:`.claim`: claimed with
  :mod:`.claimer`, checked against concurrent anti-affinity members with
  :mod:`.group_check`) and consumed;
* :mod:`.answer` — Selections with alternates; what a caller reads of a failure
  (:mod:`.failures`).

The manager sequences them and owns the all-or-nothing rule
(doc/design.md#claims-all-or-nothing); nothing here imports it (import-linter).
"""
