"""The RPC endpoints: nova-scheduler's API 4.x and the ``baseapi`` ping.

Arguments arrive as primitives and are decoded and bounded here, so a
malformed call gets :class:`InvalidInput` back (rebuilt by the conductor as
``nova.exception.InvalidInput``) instead of an opaque dispatcher error, and
the service keeps serving. Fanout casts update the HostCatalog and never
block a call.

``select_destinations`` across 4.x (``nova/scheduler/rpcapi.py`` downgrades to
them): 4.0-4.2 send the legacy
``request_spec``/``filter_properties`` dicts and no instance uuids, 4.3 a
``spec_obj`` without them (nothing is claimed), 4.4 adds ``instance_uuids``
(claims) and 4.5 ``return_objects``/``return_alternates``; without
``return_objects`` the answer is Nova's legacy host dicts, with it Selections at
the versions the calling release reads (scheduler/objects/nova_releases.py,
capped by ``[upgrade_levels] reply_objects``). Unknown methods and
versions never reach this module: oslo.messaging's dispatcher answers them
with ``NoSuchMethod``/``UnsupportedVersion``. Everything else on an endpoint
is private, so that no attribute can be called as a method.
"""
from __future__ import annotations

import functools
import logging
from typing import Any

import oslo_messaging as messaging

from scheduler import exceptions as exc
from scheduler import metrics
from scheduler.context import RequestContext
from scheduler.objects import codec, nova_releases
from scheduler.objects.nova_releases import Version
from scheduler.objects.selection import Selection

LOG = logging.getLogger(__name__)

_UNSET = object()


def _reject_unknown(method: str, extra: dict[str, Any]) -> None:
    if extra:
        names = ', '.join(sorted(str(k)[:64] for k in extra)[:10])
        raise exc.InvalidInput(reason=f'{method}: unexpected argument(s): {names}')


class SchedulerEndpoint:
    """Nova's ``SchedulerManager`` RPC surface (topic ``scheduler``, version 4.5)."""

    target = messaging.Target(version='4.5')

    def __init__(self, manager, catalog, limits: codec.DecodeLimits, notifier=None, *,
                 reply_cap: str | None = None):
        self._manager = manager
        self._catalog = catalog
        self._limits = limits
        # scheduler.notifications.SelectDestinationsNotifier, or None: notifications off
        self._notifier = notifier
        # [upgrade_levels] reply_objects: a series whose versions no reply exceeds
        # (None: 'auto', each reply at its caller's versions only).
        self._reply_cap = reply_cap

    @messaging.expected_exceptions(*exc.EXPECTED_RPC_ERRORS)
    def select_destinations(self, ctxt: RequestContext, request_spec: Any = None,
                            filter_properties: Any = None, spec_obj: Any = _UNSET,
                            instance_uuids: Any = None, return_objects: Any = False,
                            return_alternates: Any = False, **extra: Any) -> list:
        with metrics.request():
            return self._select_destinations(
                ctxt, request_spec, filter_properties, spec_obj, instance_uuids,
                return_objects, return_alternates, extra)

    def _select_destinations(self, ctxt: RequestContext, request_spec: Any,
                             filter_properties: Any, spec_obj: Any, instance_uuids: Any,
                             return_objects: Any, return_alternates: Any,
                             extra: dict[str, Any]) -> list:
        _reject_unknown('select_destinations', extra)
        if spec_obj is _UNSET or spec_obj is None:
            # RPC 4.0-4.2: Nova's RequestSpec.from_primitives; such callers send no
            # instance uuids, so nothing is claimed.
            if request_spec is None:
                raise exc.InvalidInput(reason='select_destinations: spec_obj is required')
            spec = codec.decode_legacy_request(request_spec, filter_properties or {},
                                               limits=self._limits)
            sent: dict[str, Version] = {}
        else:
            spec = codec.decode_request_spec(spec_obj, limits=self._limits)
            sent = codec.sent_versions(spec_obj)
        uuids = None
        if instance_uuids is not None:
            uuids = codec.validate_instance_uuids(instance_uuids, limits=self._limits)
        for name, value in (('return_objects', return_objects),
                            ('return_alternates', return_alternates)):
            if not isinstance(value, bool):
                raise exc.InvalidInput(reason=f'select_destinations: {name} must be a boolean')
        if self._notifier is not None:
            self._notifier.start(ctxt, spec)
        # Encoding happens inside the manager's rollback guard: an answer that
        # cannot be encoded must not leave its claims behind.
        answer = self._manager.select_destinations(
            ctxt, spec, uuids, return_objects=return_objects,
            return_alternates=return_alternates,
            finish=(functools.partial(_encode_objects,
                                      nova_releases.reply_versions(sent, self._reply_cap))
                    if return_objects else _encode_legacy))
        if self._notifier is not None:
            # As in Nova: no .end for a request that failed.
            self._notifier.end(ctxt, spec)
        return answer

    # Fanout casts: errors are logged, never raised (nobody waits for a cast).
    def update_aggregates(self, ctxt: RequestContext, aggregates: Any = None, **extra: Any) -> None:
        self._cast('update_aggregates', extra,
                   lambda: self._catalog.update_aggregates(codec.decode_aggregates(aggregates)))

    def delete_aggregate(self, ctxt: RequestContext, aggregate: Any = None, **extra: Any) -> None:
        self._cast('delete_aggregate', extra,
                   lambda: self._catalog.delete_aggregate(codec.decode_aggregate(aggregate)))

    def update_instance_info(self, ctxt: RequestContext, host_name: Any = None,
                             instance_info: Any = None, **extra: Any) -> None:
        self._cast('update_instance_info', extra, lambda: self._catalog.update_instance_info(
            _host_name(host_name),
            codec.decode_instance_uuids_from_instance_list(instance_info)))

    def delete_instance_info(self, ctxt: RequestContext, host_name: Any = None,
                             instance_uuid: Any = None, **extra: Any) -> None:
        self._cast('delete_instance_info', extra, lambda: self._catalog.delete_instance_info(
            _host_name(host_name),
            codec.validate_instance_uuids([instance_uuid], limits=self._limits)[0]))

    def sync_instance_info(self, ctxt: RequestContext, host_name: Any = None,
                           instance_uuids: Any = None, **extra: Any) -> None:
        self._cast('sync_instance_info', extra, lambda: self._catalog.sync_instance_info(
            _host_name(host_name),
            codec.validate_instance_uuids(instance_uuids, limits=self._limits, allow_empty=True,
                                          max_count=self._limits.max_host_instances)))

    @staticmethod
    def _cast(method: str, extra: dict[str, Any], apply) -> None:
        try:
            _reject_unknown(method, extra)
            apply()
        except (exc.InvalidInput, exc.CatalogError) as e:
            LOG.warning('ignored malformed %s cast: %s', method, e)
        except Exception:
            LOG.exception('could not apply %s cast', method)


def _encode_objects(versions: dict[str, Version],
                    selections: list[list[Selection]]) -> list[list[dict[str, Any]]]:
    return [[codec.encode_selection(s, versions) for s in per_instance]
            for per_instance in selections]


def _encode_legacy(selections: list[list[Selection]]) -> list[dict[str, Any]]:
    return [codec.encode_legacy_destination(per_instance[0]) for per_instance in selections]


def _host_name(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 255:
        raise exc.InvalidInput(reason='host_name must be a non-empty string of at most 255 '
                                      'characters')
    return value


class BaseAPIEndpoint:
    """Nova's ``baseapi`` namespace: ``ping`` answers who we are."""

    target = messaging.Target(namespace='baseapi', version='1.1')

    def ping(self, ctxt: RequestContext, arg: Any = None) -> dict[str, Any]:
        return {'service': 'scheduler', 'arg': arg}

    def get_backdoor_port(self, ctxt: RequestContext) -> None:
        return None
