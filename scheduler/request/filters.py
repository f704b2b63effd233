"""Request filters: adjust the RequestSpec before Placement is asked for candidates.

Nova's ``scheduler/request_filter.py`` (reference/nova-scheduler.md section 3.2):
each filter mutates the spec in place (``request_level_params``,
``requested_destination``), which is how it reaches the query built by
:mod:`scheduler.request.translate`, and returns True when it acted. A filter
that decides no host can serve the request raises RequestFilterFailed.

Signature: ``f(spec, catalog, conf) -> bool``. ``catalog`` answers
``aggregates_with_metadata(key, value=None) -> list[Aggregate]``; these two
filters do not read ``conf`` (it may be None).

Filters are plugins of the entry point group ``placement_scheduler.request_filters``.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import os_traits
from stevedore import driver, extension
from stevedore import exception as stevedore_exc

from scheduler.exceptions import PluginNotFound
from scheduler.objects.spec import Aggregate, Destination, RequestSpec

LOG = logging.getLogger(__name__)

NAMESPACE = 'placement_scheduler.request_filters'
OPTION = '[scheduler] request_filters'


class AggregateSource(Protocol):
    def aggregates_with_metadata(self, key: str,
                                 value: str | None = None) -> list[Aggregate]: ...


RequestFilter = Callable[[RequestSpec, Any, Any], bool]


def compute_status_filter(spec: RequestSpec, catalog: AggregateSource | None,
                          conf: Any) -> bool:
    """Keep out computes whose service is disabled.

    Nova's compute service puts COMPUTE_STATUS_DISABLED on its root provider
    while the service is disabled, so forbidding it on the root skips them.
    """
    spec.request_level_params.root_forbidden.add(os_traits.COMPUTE_STATUS_DISABLED)
    return True


def map_az_to_placement_aggregate(spec: RequestSpec, catalog: AggregateSource,
                                  conf: Any) -> bool:
    """Availability zone -> the Placement aggregates of that zone (one OR-set).

    An AZ is a host aggregate with metadata ``availability_zone=<az>``; Nova
    mirrors host aggregates into Placement aggregates of the same uuid. An
    AZ no aggregate names (the default zone ``nova``) adds no constraint.
    """
    zone = spec.availability_zone
    if not zone:
        return False
    aggregates = catalog.aggregates_with_metadata('availability_zone', zone)
    if not aggregates:
        return False
    if spec.requested_destination is None:
        spec.requested_destination = Destination()
    destination = spec.requested_destination
    destination.aggregates = [*(destination.aggregates or []),
                              ','.join(sorted({agg.uuid for agg in aggregates}))]
    return True


def run_request_filters(filters: Sequence[RequestFilter], spec: RequestSpec, catalog: Any,
                        conf: Any) -> list[str]:
    """Run ``filters`` in order on ``spec``; the names of those that acted.

    RequestFilterFailed propagates: the caller turns it into NoValidHost.
    """
    acted: list[str] = []
    for request_filter in filters:
        name = _name(request_filter)
        if request_filter(spec, catalog, conf):
            LOG.debug('request filter %s acted', name)
            acted.append(name)
    return acted


def load_request_filters(names: Sequence[str], *, option: str = OPTION) -> list[RequestFilter]:
    """The request filters called ``names``, in that order.

    Raises PluginNotFound (naming ``option``) for a name no entry point has.
    """
    loaded: list[RequestFilter] = []
    for name in names:
        try:
            manager = driver.DriverManager(NAMESPACE, name, invoke_on_load=False)
        except stevedore_exc.NoMatches:
            available = extension.ExtensionManager(NAMESPACE).names()
            raise PluginNotFound(option, name, available) from None
        loaded.append(manager.driver)
    return loaded


def _name(request_filter: RequestFilter) -> str:
    return getattr(request_filter, '__name__', None) or repr(request_filter)
