"""Request filters that turn host aggregate metadata into Placement aggregate constraints.

Nova mirrors every host aggregate into a Placement aggregate of the same uuid,
so an aggregate's uuid names the compute nodes in it on both sides. Nova reads
the aggregates from its API database on every request; here they come from the
HostCatalog (the hosts file and Nova's ``update_aggregates`` /
``delete_aggregate`` casts), which holds the same metadata.
"""
from __future__ import annotations

import logging
from typing import Any

from scheduler.exceptions import RequestFilterFailed
from scheduler.objects.spec import RequestSpec
from scheduler.request.filters import AggregateSource, forbid_aggregates, option, require_aggregates
from scheduler.request.translate import all_required_traits

LOG = logging.getLogger(__name__)

TENANT_METADATA_KEY = 'filter_tenant_id'
TRAIT_METADATA_PREFIX = 'trait:'


def require_tenant_aggregate(spec: RequestSpec, catalog: AggregateSource, conf: Any) -> bool:
    """Keep a project on the aggregates dedicated to it.

    ``[scheduler] limit_tenants_to_placement_aggregate``: the aggregates with a
    metadata key starting ``filter_tenant_id`` (``filter_tenant_id``,
    ``filter_tenant_id2``, ...) whose value is the project id become one OR-set
    of required aggregates. As in Nova the value must be the project id itself
    (the AggregateMultiTenancyIsolation host filter, not this one, reads
    comma-separated lists). A project no aggregate names is unconstrained,
    unless ``placement_aggregate_required_for_tenants`` is set: then the request
    fails with Nova's reason.
    """
    if not option(conf, 'limit_tenants_to_placement_aggregate'):
        return False
    project = spec.project_id
    uuids = sorted({
        aggregate.uuid for aggregate in catalog.all_aggregates()
        if project and any(key.startswith(TENANT_METADATA_KEY) and value == project
                           for key, value in aggregate.metadata.items())})
    if uuids:
        require_aggregates(spec, uuids)
        LOG.debug('require_tenant_aggregate: project %s -> aggregates %s', project,
                  ', '.join(uuids))
        return True
    if option(conf, 'placement_aggregate_required_for_tenants'):
        LOG.warning('Tenant %s has no available aggregates', project)
        raise RequestFilterFailed('No hosts available for tenant')
    return False


def isolate_aggregates(spec: RequestSpec, catalog: AggregateSource, conf: Any) -> bool:
    """Keep requests out of aggregates reserved for traits they do not ask for.

    ``[scheduler] enable_isolated_aggregate_filtering``: an aggregate with
    metadata ``trait:<T>=required`` for some trait T the request does not
    require (in any request group: flavor ``trait*:`` specs, image
    ``traits_required``, the hardware translations, port groups) becomes a
    forbidden aggregate. ``root_required`` does not count, as in Nova.
    """
    if not option(conf, 'enable_isolated_aggregate_filtering'):
        return False
    requested = {f'{TRAIT_METADATA_PREFIX}{trait}' for trait in all_required_traits(spec)}
    isolated = sorted({
        aggregate.uuid for aggregate in catalog.all_aggregates()
        if any(key.startswith(TRAIT_METADATA_PREFIX) and value == 'required'
               and key not in requested for key, value in aggregate.metadata.items())})
    if not isolated:
        return False
    forbid_aggregates(spec, isolated)
    LOG.debug('isolate_aggregates: forbidden aggregates %s', ', '.join(isolated))
    return True
