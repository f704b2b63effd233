"""Filters that reserve hosts by aggregate metadata: for projects, for flavors, by
availability zone.

Aggregates and their metadata come from the host catalog (hosts file and
nova-api's aggregate casts); what they say does not change within a request,
so each of these runs once per request.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scheduler.filters.aggregate_metadata import aggregate_list
from scheduler.filters.base import BaseHostFilter, FilterResult, host_label

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

TENANT_KEY = 'filter_tenant_id'
INSTANCE_TYPE_KEY = 'instance_type'
AZ_KEY = 'availability_zone'


class AggregateMultiTenancyIsolation(BaseHostFilter):
    """A host in an aggregate with ``filter_tenant_id`` metadata takes only the
    projects listed there; hosts in no such aggregate take every project.

    Values are comma-separated project ids, merged over all the host's
    aggregates. Unlike Nova's filter, which reads only the key
    ``filter_tenant_id``, every key that starts with it (``filter_tenant_id2``,
    ...) counts too: that is how Nova's own tenant request filter
    (``limit_tenants_to_placement_aggregate``) lets operators list more projects
    than one 255-character value holds, and the two should agree.
    """

    run_filter_once_per_request = True
    RUN_ON_REBUILD = False

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        tenants = aggregate_list(host_state, TENANT_KEY, prefix=True)
        if not tenants.present or spec_obj.project_id in tenants.values:
            return FilterResult.ok()
        # Other projects' ids stay out of the reason: it goes to this project's user.
        LOG.debug('%s: host %s is reserved for projects %s, not %s', self.name,
                  host_label(host_state), sorted(tenants.values), spec_obj.project_id)
        return FilterResult.fail(f'host is reserved for other projects (aggregate {TENANT_KEY})')


class AggregateTypeAffinityFilter(BaseHostFilter):
    """A host in an aggregate with ``instance_type`` metadata (comma-separated
    flavor names, merged over the host's aggregates) takes only those flavors."""

    run_filter_once_per_request = True
    RUN_ON_REBUILD = False

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        allowed = aggregate_list(host_state, INSTANCE_TYPE_KEY)
        flavor_name = spec_obj.flavor.name
        if not allowed.present or flavor_name in allowed.values:
            return FilterResult.ok()
        # The allowed list may name private flavors; it stays in the DEBUG log.
        LOG.debug('%s: host %s takes flavors %s, not %s', self.name, host_label(host_state),
                  sorted(allowed.values), flavor_name)
        shown = flavor_name if flavor_name else '(unnamed)'
        return FilterResult.fail(
            f'flavor {shown} is not allowed on this host (aggregate {INSTANCE_TYPE_KEY})')


class AvailabilityZoneFilter(BaseHostFilter):
    """The host must be in the requested availability zone.

    A host's zones are the ``availability_zone`` values of its aggregates;
    a host in no such aggregate is in ``[DEFAULT] default_availability_zone``.
    Nova removed this filter in 29.0.0 (the ``map_az_to_placement_aggregate``
    request filter asks Placement for the zone's hosts instead, and is always on
    here); it is kept so that an ``enabled_filters`` list that still names it
    loads, and it then double-checks the zone against the host catalog.
    """

    run_filter_once_per_request = True
    RUN_ON_REBUILD = False

    def __init__(self) -> None:
        LOG.info('AvailabilityZoneFilter is enabled: Nova removed it in 29.0.0, the '
                 'map_az_to_placement_aggregate request filter already limits requests to '
                 'the zone; it can be dropped from [filter_scheduler] enabled_filters')

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        requested = spec_obj.availability_zone
        if not requested:
            return FilterResult.ok()
        zones = aggregate_list(host_state, AZ_KEY)
        if zones.present:
            host_zones = zones.values
        else:
            host_zones = frozenset({self.require_conf().default_availability_zone})
        if requested in host_zones:
            return FilterResult.ok()
        return FilterResult.fail(f'host is not in availability zone {requested}')
