"""Decision quality: the weight of the host a service chose, against the best host
a fresh, whole Placement query offers on the same state.

The reference is this service's own pipeline, configured from the benchmarked
service's configuration file and hosts file, but with no provider view and no
limit: Placement's whole answer for the request (every host that fits, not
``max_placement_results`` of them), the same filters, and the same weighers,
whose weights are normalised over that whole answer. A chosen host's *regret*
is ``(best - chosen) / best`` in those weights: 0 when it is the best host,
0.01 when it is 1% below it. A chosen host the reference filters out counts as
``outside`` (the service saw a state the fresh query no longer has).
"""
from __future__ import annotations

import pathlib
from dataclasses import dataclass

import numpy as np
from oslo_config import cfg

from scheduler import conf as scheduler_conf
from scheduler import plugins
from scheduler.context import RequestContext
from scheduler.explain import RequestTrace
from scheduler.host_table import count_near_best
from scheduler.manager import SchedulerManager
from scheduler.memory import paused_gc
from scheduler.objects.spec import RequestSpec
from scheduler.pipeline import request_filters as request_filters_stage
from scheduler.pipeline.filtering import filter_hosts
from scheduler.pipeline.weighing import weigh
from scheduler.request.filters import load_request_filters
from scheduler.service import build_catalog


@dataclass(frozen=True)
class Regret:
    #: (best - chosen) / best over the reference's weights; None when ``outside``
    share: float | None
    #: hosts the reference weighed (every host of Placement's whole answer that passed)
    weighed: int
    #: of those, the hosts within ``near_best_weight_tolerance`` of the best: how many
    #: hosts concurrent decisions could spread over
    near_best: int = 0

    @property
    def outside(self) -> bool:
        return self.share is None


class Reference:
    """The benchmarked service's decision rules, asking Placement without a limit."""

    def __init__(self, config_file: pathlib.Path):
        from placement_client.client import PlacementClient

        conf = cfg.ConfigOpts()
        scheduler_conf.register_opts(conf)
        conf(['--config-file', str(config_file)], project='scheduler',
             default_config_files=[], default_config_dirs=[], use_env=False)
        conf.set_override('provider_view', False, group='scheduler')
        self.conf = conf
        self.manager = SchedulerManager(
            conf, placement=PlacementClient.from_conf(conf), catalog=build_catalog(conf),
            filters=plugins.load_filters(conf), weighers=plugins.load_weighers(conf),
            request_filters=load_request_filters(conf.scheduler.request_filters))

    def close(self) -> None:
        self.manager.cleanups.stop()

    def weights(self, spec: RequestSpec, context: RequestContext) -> dict[str, float]:
        """Root provider uuid -> weight, for every host the whole answer offers and the
        filters pass."""
        manager = self.manager
        trace = RequestTrace(num_instances=1)
        with paused_gc():
            request_filters_stage.run(manager.request_filters, spec,
                                      manager.request_filter_sources, self.conf, trace)
            candidates = manager.query.candidates(context, spec, trace, claim=False,
                                                  unlimited=True)
            hosts = manager.hosts.for_answer(context, spec, candidates, trace)
            attempt = trace.new_attempt(0, len(hosts))
            passed = filter_hosts(manager.filters, spec, hosts, index=0, attempt=attempt)
            weighed = weigh(manager.weighers, spec, passed, attempt)
            return {w.host.uuid: w.weight for w in weighed}

    def regret(self, weights: dict[str, float], chosen: str) -> Regret:
        near_best = count_near_best(np.fromiter(weights.values(), dtype=float),
                                    self.conf.scheduler.near_best_weight_tolerance)
        if chosen not in weights:
            return Regret(None, len(weights), near_best)
        best = max(weights.values())
        share = (best - weights[chosen]) / abs(best) if best else 0.0
        return Regret(max(0.0, share), len(weights), near_best)
