"""This service's side of the in-process stages: its own code paths, no network.

Same interface as :mod:`bench.nova_side` (the runner times each call):

* ``build(raw)``: Placement's raw answer -> the hosts the decision reads: the
  JSON decode the Placement client does, :class:`Candidates`, and the
  manager's host-state step (a HostTable over the host catalog);
* ``decide(built, kind)``: the manager's own per-instance loop
  (``SchedulerManager._place_each``, i.e. :func:`scheduler.pipeline.decide.decide`,
  without claims): filters, weighers, ordering, the first fitting allocation
  request, consumption before the next instance;
* ``whole(raw)``: ``SchedulerManager.select_destinations`` for one instance
  without a claim (RPC 4.3's path), with a Placement client whose GET answers
  ``raw`` in-process: request filters, query translation, decode, host
  states, decision, the Selection with its alternates.

The configuration is the shipped default: Nova 34's default filters and all
13 weighers; the host catalog is the synthetic cloud's hosts file.
"""
from __future__ import annotations

import logging
import random
import sys
from typing import Any

from oslo_config import cfg

from bench.synthetic import CELL_UUID, REQUEST_RESOURCES, SyntheticCloud, make_cloud
from placement_client.client import decode_json
from placement_client.models import Candidates
from scheduler import conf as scheduler_conf
from scheduler import explain, plugins
from scheduler.catalog import HostCatalog
from scheduler.catalog.hosts_file import parse_hosts
from scheduler.context import RequestContext
from scheduler.filters.compute import ComputeFilter
from scheduler.manager import SchedulerManager
from scheduler.memory import paused_gc
from scheduler.objects.spec import Flavor, ImageMeta, ImageMetaProps, InstanceGroup, RequestSpec

KINDS = ('one', 'ten', 'group10')
MICROVERSION = '1.36'


class _CannedPlacement:
    """Answers GET /allocation_candidates with the bytes it holds, decoded as
    the real client decodes a response body; nothing else is asked for."""

    def __init__(self) -> None:
        self.raw = b'{}'

    def get_allocation_candidates(self, query: Any, *, request_id: str | None = None
                                  ) -> Candidates:
        return self.decode(self.raw)

    @staticmethod
    def decode(raw: bytes) -> Candidates:
        # What PlacementClient.get_allocation_candidates does with a body.
        return Candidates.from_json(decode_json(raw), MICROVERSION)


def _conf() -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    scheduler_conf.register_opts(conf)
    conf([], project='scheduler', default_config_files=[], default_config_dirs=[],
         use_env=False)
    return conf


def request_spec(kind: str) -> tuple[RequestSpec, list[str]]:
    """The request of ``kind`` and its instance uuids (2 vCPU, 4 GB, 40 GB, x86_64 image)."""
    count = 1 if kind == 'one' else 10
    uuids = [f'00000000-0000-4000-8000-{i:012d}' for i in range(count)]
    group = None
    if kind == 'group10':
        group = InstanceGroup(uuid='6f0c3b1e-5a1f-4c8e-9d2a-7b3c4d5e6f70', policy='anti-affinity',
                              members=list(uuids), hosts=[], rules={})
    spec = RequestSpec(
        flavor=Flavor(name='m1.bench', vcpus=REQUEST_RESOURCES['VCPU'],
                      memory_mb=REQUEST_RESOURCES['MEMORY_MB'],
                      root_gb=REQUEST_RESOURCES['DISK_GB'], ephemeral_gb=0, swap=0),
        image=ImageMeta(properties=ImageMetaProps({'hw_architecture': 'x86_64'})),
        project_id='4a2c7b1f9d8e4f6a8b0c1d2e3f405162', user_id='user', num_instances=count,
        instance_group=group)
    return spec, uuids


class OursSide:
    name = 'ours'

    def __init__(self, cloud: SyntheticCloud) -> None:
        self.conf = _conf()
        self.catalog = HostCatalog(default_cell_uuid=CELL_UUID)
        self.catalog.load_content(parse_hosts(cloud.hosts_document(), source='synthetic',
                                              default_cell_uuid=CELL_UUID), 'synthetic')
        self.placement = _CannedPlacement()
        self.manager = SchedulerManager(
            self.conf, placement=self.placement, catalog=self.catalog,
            filters=plugins.load_filters(self.conf), weighers=plugins.load_weighers(self.conf),
            request_filters=[], rng=random.Random(0))
        for filter_ in self.manager.filters:
            if isinstance(filter_, ComputeFilter):
                filter_.clock = lambda: cloud.now
        self.context = RequestContext(project_id='4a2c7b1f9d8e4f6a8b0c1d2e3f405162',
                                      user_id='user')

    def close(self) -> None:
        self.manager.cleanups.stop()

    def build(self, raw: bytes) -> Any:
        # A request decodes and tables its answer with the collector paused
        # (SchedulerManager.select_destinations, scheduler/memory/).
        with paused_gc():
            return self.manager.hosts.build(self.placement.decode(raw))

    def decide(self, built: Any, kind: str) -> list[str]:
        spec, uuids = request_spec(kind)
        # select_destinations runs the whole request, this loop included, with
        # the collector paused (SchedulerManager.select_destinations).
        with paused_gc():
            decision = self.manager._place_each(self.context, spec, list(uuids), built,
                                                trace=explain.RequestTrace(), claim=False)
        return [p.host.host for p in decision.placed]

    def whole(self, raw: bytes) -> list[str]:
        self.placement.raw = raw
        spec, _ = request_spec('one')
        selections = self.manager.select_destinations(self.context, spec, None,
                                                      return_alternates=True)
        return [s[0].service_host for s in selections]


def main(argv: list[str]) -> None:
    import statistics
    import time
    logging.basicConfig(level=logging.WARNING)
    n = int(argv[0]) if argv else 1000
    cloud = make_cloud(n)
    raw = cloud.placement_json()
    side = OursSide(cloud)
    try:
        def median(fn, reps=7):
            times = []
            for _ in range(reps):
                start = time.perf_counter()
                fn()
                times.append((time.perf_counter() - start) * 1000)
            return statistics.median(times)
        print(f'N={n} build {median(lambda: side.build(raw)):.2f} ms')
        for kind in KINDS:
            times = []
            for _ in range(7):
                built = side.build(raw)
                start = time.perf_counter()
                side.decide(built, kind)
                times.append((time.perf_counter() - start) * 1000)
            print(f'N={n} decide {kind} {statistics.median(times):.3f} ms')
        print(f'N={n} whole {median(lambda: side.whole(raw)):.2f} ms')
    finally:
        side.close()


if __name__ == '__main__':
    main(sys.argv[1:])
