"""This service's side: the same rows through its own input paths, its filters and weighers.

* ``compute_nodes`` columns the cell-database source reads (NUMA topology, PCI
  pools, allocation ratios, supported instances, ``host_ip``, hypervisor,
  ``cpu_info``, ``stats``, the ``metrics`` ``[metrics] weight_setting`` names):
  :func:`parse_rows` on the row, as
  :class:`~scheduler.catalog.cell_db.CellDatabaseReader` does, applied to the
  catalog;
* what an operator's hosts file gives of the service row (its state), beside
  the node's names and cell: a hosts file document, through ``parse_hosts``;
* aggregates and instance lists: the casts nova-api and nova-compute send
  (``update_aggregates`` with Nova's Aggregate primitives through the RPC codec,
  ``sync_instance_info``);
* Placement's answer: its JSON through ``Candidates.from_json``, then the host
  table the manager builds;
* the request: the conductor's RequestSpec primitive through the RPC codec.
"""
from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oslo_config import cfg

from placement_client.models import Candidates
from scheduler import conf as scheduler_conf
from scheduler import plugins
from scheduler.catalog import HostCatalog
from scheduler.catalog.cell_db import metric_names, parse_rows
from scheduler.catalog.hosts_file import parse_hosts
from scheduler.filters.compute import ComputeFilter
from scheduler.filters.handler import apply_filters
from scheduler.host_table import HostTable, HostView
from scheduler.objects.codec import decode_request_spec
from scheduler.objects.codec.host_data import decode_aggregates
from scheduler.objects.spec import RequestSpec
from scheduler.weights.base import weigh_hosts
from tests.nova_differential.cloud import CELL_UUID, CELLS
from tests.nova_differential.compute import (
    MICROVERSION,
    WrittenCloud,
    context,
    nova,
    set_shared_options,
)


def make_conf(filters: Sequence[str] = (), weighers: Sequence[str] = ()) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    scheduler_conf.register_opts(conf)
    conf([], project='scheduler', default_config_files=[], default_config_dirs=[],
         use_env=False)
    conf.set_override('enabled_filters', list(filters), group='filter_scheduler')
    conf.set_override('weight_classes', list(weighers), group='filter_scheduler')
    set_shared_options(conf)
    return conf


def _hosts_entry(row: dict[str, Any], service: dict[str, Any], cell: str) -> dict[str, Any]:
    """What a hosts file says of one compute node, copied from its rows."""
    return {
        'nodename': row['hypervisor_hostname'], 'service_host': row['host'],
        'provider_uuid': row['uuid'], 'cell': cell,
        'disabled': bool(service['disabled']), 'disabled_reason': service['disabled_reason'],
        'forced_down': bool(service['forced_down']),
        'last_seen_up': service['last_seen_up'].replace(
            tzinfo=datetime.timezone.utc).isoformat(),
    }


def catalog_for(cloud: WrittenCloud) -> HostCatalog:
    catalog = HostCatalog(default_cell_uuid=CELL_UUID)
    document = {'cells': [{'uuid': u, 'name': name} for u, name in CELLS.items()],
                'hosts': [_hosts_entry(h.compute_row, h.service_row, h.host.cell)
                          for h in cloud.hosts]}
    catalog.load_content(parse_hosts(document, source='differential',
                                     default_cell_uuid=CELL_UUID), 'differential')
    nodes = []
    for cell in CELLS:   # one reader per cell database
        read, problems = parse_rows([
            (r['uuid'], r['hypervisor_hostname'], r['host'], r['numa_topology'],
             r['pci_stats'], r['cpu_allocation_ratio'], r['ram_allocation_ratio'],
             r['supported_instances'], r['host_ip'], r['hypervisor_type'],
             r['hypervisor_version'], r['cpu_info'], r['stats'], r['metrics'])
            for r in (h.compute_row for h in cloud.hosts if h.host.cell == cell)], cell,
            metric_names=metric_names(make_conf()))
        if problems:
            raise AssertionError(f'the cell database rows did not parse: {problems}')
        nodes.extend(read)
    catalog.apply_cell_db_nodes(nodes)
    n = nova()
    serializer = n.obj_base.NovaObjectSerializer()
    if cloud.aggregates:
        primitives = n.jsonutils.loads(n.jsonutils.dumps(
            [serializer.serialize_entity(context(), a) for a in cloud.aggregates]))
        catalog.update_aggregates(decode_aggregates(primitives))
    for h in cloud.hosts:
        catalog.sync_instance_info(h.host.name, list(h.instances))
    return catalog


@dataclass
class OurHosts:
    catalog: HostCatalog
    view: HostView
    now: datetime.datetime


def host_view(cloud: WrittenCloud, answer: dict[str, Any], now: datetime.datetime) -> OurHosts:
    catalog = catalog_for(cloud)
    candidates = Candidates.from_json(json.loads(json.dumps(answer)), MICROVERSION)
    return OurHosts(catalog, HostTable(candidates, catalog).view(), now)


def request_spec(primitive: dict[str, Any]) -> RequestSpec:
    return decode_request_spec(json.loads(json.dumps(primitive)))


_FILTERS: dict[str, Any] = {}


def _filter(name: str, now: datetime.datetime) -> Any:
    if name not in _FILTERS:
        (_FILTERS[name],) = plugins.load_filters(make_conf(filters=[name]))
    filter_ = _FILTERS[name]
    if isinstance(filter_, ComputeFilter):
        filter_.clock = lambda: now.replace(tzinfo=datetime.timezone.utc)
    return filter_


def run_filter(name: str, hosts: OurHosts, spec: RequestSpec) -> tuple[set[str], dict[str, str]]:
    """The hosts the filter passes alone, and the reason for each it removed."""
    run = apply_filters([_filter(name, hosts.now)], hosts.view, spec, instance_index=0)
    reasons = {}
    for step in run.steps:
        for why, names in step.removed.items():
            for label in names:
                reasons[label] = why
    return {h.host for h in run.hosts}, reasons


_WEIGHERS: dict[str, Any] = {}


def run_weigher(name: str, hosts: OurHosts, spec: RequestSpec) -> dict[str, float]:
    if name not in _WEIGHERS:
        (_WEIGHERS[name],) = plugins.load_weighers(make_conf(weighers=[name]))
    weighed = weigh_hosts([_WEIGHERS[name]], hosts.view, spec)
    return {w.obj.host: float(w.weight) for w in weighed}


def quiet() -> None:
    logging.getLogger('scheduler').setLevel(logging.ERROR)
