"""Request filters: adjust the RequestSpec before Placement is asked for candidates.

Nova's ``nova/scheduler/request_filter.py`` (run in order by ``process_reqspec``):
each filter mutates the spec in place (``request_level_params``,
``requested_destination``), which is how it reaches the query built by
:mod:`scheduler.request.translate`, and returns True when it changed the spec
(Nova returns True whenever an enabled filter ran; "acted" here feeds the
NoValidHost explanation, so it means "constrained the query"). A filter that
decides no host can serve the request raises RequestFilterFailed; one that
finds the flavor and image contradicting each other raises
RequestTranslationError, which :func:`run_request_filters` turns into
InvalidInput for the caller, as the query translation's errors are.

Signature: ``f(spec, catalog, conf) -> bool``. ``catalog`` is the HostCatalog
(aggregates with their metadata, from the hosts file and Nova's
``update_aggregates`` casts) in place of Nova's API database; ``conf`` the
service's ConfigOpts. Filters Nova gates on a ``[scheduler]`` option read it
through :func:`option`; ``conf`` None means every option at its default (off).

The filters live in this package: these two (Nova's always-on ones), then
:mod:`.aggregate_filters`, :mod:`.trait_filters` and :mod:`.routed_networks`.
They are plugins of the entry point group ``placement_scheduler.request_filters``,
run in the order of ``[scheduler] request_filters`` (by default Nova's order).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import os_traits
from stevedore import driver, extension
from stevedore import exception as stevedore_exc

from scheduler.exceptions import InvalidInput, PluginNotFound, RequestTranslationError
from scheduler.objects.spec import Aggregate, Destination, RequestSpec

LOG = logging.getLogger(__name__)

NAMESPACE = 'placement_scheduler.request_filters'
OPTION = '[scheduler] request_filters'


class AggregateSource(Protocol):
    """What request filters read of the HostCatalog."""

    def aggregates_with_metadata(self, key: str,
                                 value: str | None = None) -> list[Aggregate]: ...

    def all_aggregates(self) -> list[Aggregate]: ...


RequestFilter = Callable[[RequestSpec, Any, Any], bool]


def option(conf: Any, name: str) -> bool:
    """``[scheduler] <name>``, or its default (False) without a configuration."""
    return bool(conf is not None and conf.scheduler[name])


def require_aggregates(spec: RequestSpec, uuids: Iterable[str]) -> None:
    """Candidates must be in one of ``uuids`` (one OR-set, ANDed with earlier ones);
    Nova's ``Destination.require_aggregates``."""
    destination = _destination(spec)
    destination.aggregates = [*(destination.aggregates or []), ','.join(sorted(set(uuids)))]


def forbid_aggregates(spec: RequestSpec, uuids: Iterable[str]) -> None:
    """Candidates must be in none of ``uuids``; Nova's ``append_forbidden_aggregates``."""
    destination = _destination(spec)
    destination.forbidden_aggregates = set(destination.forbidden_aggregates or ()) | set(uuids)


def _destination(spec: RequestSpec) -> Destination:
    if spec.requested_destination is None:
        spec.requested_destination = Destination()
    return spec.requested_destination


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
    require_aggregates(spec, (agg.uuid for agg in aggregates))
    LOG.debug('map_az_to_placement_aggregate: availability zone %r -> aggregates %s', zone,
              ', '.join(sorted(agg.uuid for agg in aggregates)))
    return True


def run_request_filters(filters: Sequence[RequestFilter], spec: RequestSpec, catalog: Any,
                        conf: Any) -> list[str]:
    """Run ``filters`` in order on ``spec``; the names of those that acted.

    RequestFilterFailed propagates: the caller turns it into NoValidHost. A
    RequestTranslationError (the flavor and image contradict each other, a
    value Nova's API refuses) becomes InvalidInput naming the filter.
    """
    acted: list[str] = []
    for request_filter in filters:
        name = _name(request_filter)
        try:
            changed = request_filter(spec, catalog, conf)
        except RequestTranslationError as e:
            raise InvalidInput(reason=f'request filter {name}: {e}') from e
        if changed:
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
            # stevedore types a plugin as a class (type[T]); a request filter is a function.
            manager: driver.DriverManager[Any] = driver.DriverManager(NAMESPACE, name,
                                                                      invoke_on_load=False)
        except stevedore_exc.NoMatches:
            available = extension.ExtensionManager(NAMESPACE).names()
            raise PluginNotFound(option, name, available) from None
        loaded.append(manager.driver)
    return loaded


def _name(request_filter: RequestFilter) -> str:
    return getattr(request_filter, '__name__', None) or repr(request_filter)
