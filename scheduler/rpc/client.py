"""A client for the scheduler's RPC API, as nova-conductor calls it.

Used by ``scheduler-manage simulate``, by the functional tests, and by any
non-Nova caller. Failures come back as this package's typed errors: a
remote ``nova.exception.NoValidHost`` is rebuilt as
:class:`scheduler.exceptions.NoValidHost` with its reason, whether or not
Nova is installed on the client side.
"""
from __future__ import annotations

import json
from typing import Any

import oslo_messaging as messaging

from scheduler import exceptions as exc
from scheduler.context import RequestContext
from scheduler.objects.codec import decode_selection
from scheduler.objects.selection import Selection
from scheduler.rpc.serializer import ContextSerializer

_PREFIXES = {
    'NoValidHost': (exc.NoValidHost, 'No valid host was found. '),
    'InvalidInput': (exc.InvalidInput, 'Invalid input received: '),
}


def _typed_error(error: Exception) -> Exception:
    """Map a remote failure onto our classes; anything else is returned unchanged."""
    name = getattr(error, 'exc_type', None) or type(error).__name__.removesuffix('_Remote')
    if name not in _PREFIXES:
        return error
    cls, prefix = _PREFIXES[name]
    kwargs = getattr(error, 'kwargs', None)
    if isinstance(kwargs, dict) and 'reason' in kwargs:
        return cls(reason=kwargs['reason'])
    # Without Nova installed oslo.messaging hands us a RemoteError whose value is
    # the message; its first line is the message, the rest a traceback.
    message = str(getattr(error, 'value', None) or error).split('\n', 1)[0]
    return cls(reason=message[len(prefix):] if message.startswith(prefix) else message)


class SchedulerClient:
    def __init__(self, transport: messaging.Transport, *, topic: str = 'scheduler',
                 timeout: float = 60, call_monitor_timeout: float | None = None):
        target = messaging.Target(topic=topic, version='4.0')
        self._client = messaging.get_rpc_client(transport, target, serializer=ContextSerializer())
        self._timeout = timeout
        self._call_monitor_timeout = call_monitor_timeout

    def select_destinations(self, context: RequestContext | dict, spec_primitive: dict,
                            instance_uuids: list[str] | None, *, return_objects: bool = True,
                            return_alternates: bool = True) -> list:
        """Selections per instance (or legacy host dicts when ``return_objects`` is False)."""
        kwargs: dict[str, Any] = {'spec_obj': spec_primitive, 'instance_uuids': instance_uuids,
                                  'return_objects': return_objects,
                                  'return_alternates': return_alternates}
        cctxt = self._client.prepare(version='4.5', timeout=self._timeout,
                                     call_monitor_timeout=self._call_monitor_timeout)
        try:
            result = cctxt.call(_context(context), 'select_destinations', **kwargs)
        except Exception as error:  # noqa: BLE001 - re-typed below, never swallowed
            typed = _typed_error(error)
            if typed is error:
                raise
            raise typed from error
        if not return_objects:
            return result
        return [[decode_selection(s) for s in per_instance] for per_instance in result]

    def call(self, context: RequestContext | dict, method: str, *, version: str = '4.5',
             namespace: str | None = None, **kwargs: Any) -> Any:
        """Any call, for tools and tests (e.g. ``ping`` in namespace ``baseapi``)."""
        cctxt = self._client.prepare(version=version, namespace=namespace, timeout=self._timeout)
        try:
            return cctxt.call(_context(context), method, **kwargs)
        except Exception as error:  # noqa: BLE001
            typed = _typed_error(error)
            if typed is error:
                raise
            raise typed from error

    def cast(self, context: RequestContext | dict, method: str, *, version: str = '4.2',
             fanout: bool = True, **kwargs: Any) -> None:
        self._client.prepare(version=version, fanout=fanout).cast(_context(context), method,
                                                                   **kwargs)


def _context(context: RequestContext | dict) -> RequestContext:
    return context if isinstance(context, RequestContext) else RequestContext.from_dict(context)


def loads_allocation_request(selection: Selection) -> dict[str, Any] | None:
    return json.loads(selection.allocation_request)
