"""Operators' own Nova filters and weighers, loaded unchanged where ``nova`` is importable.

A class that subclasses ``nova.scheduler.filters.BaseHostFilter`` or
``nova.scheduler.weights.BaseHostWeigher`` (an out-of-tree plugin written for
nova-scheduler, or one of Nova's test plugins) runs here as it runs in Nova:

* a filter's ``host_passes(host_state, spec_obj)`` and a weigher's
  ``_weigh_object(host_state, weight_properties)`` and
  ``weight_multiplier(host_state)`` are called with this service's host state
  (which carries the attribute names of Nova's ``HostState``) and with a real
  ``nova.objects.RequestSpec``, rebuilt once per request from the spec the
  conductor sent;
* ``run_filter_once_per_request``, ``RUN_ON_REBUILD``, ``minval`` and ``maxval``
  are the plugin's own; raw weights are normalised by this service's weighing
  loop exactly as Nova normalises them.

Nova is never imported unless such a class is configured.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from scheduler.filters.base import BaseHostFilter
from scheduler.objects.codec import encode_request_spec
from scheduler.weights.base import BaseHostWeigher

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)


def nova_plugin_kind(cls: type) -> str | None:
    """``'filter'`` or ``'weigher'`` for a Nova plugin class, else None.

    Only looks at classes whose method resolution order reaches Nova's base
    classes, so an importable Nova is needed only when such a class exists.
    """
    for base in cls.__mro__:
        if base.__module__ == 'nova.scheduler.filters' and base.__name__ == 'BaseHostFilter':
            return 'filter'
        if base.__module__ == 'nova.weights' and base.__name__ == 'BaseWeigher':
            return 'weigher'
    return None


class _NovaSpecCache:
    """One ``nova.objects.RequestSpec`` per request spec, rebuilt from its primitive.

    Filters and weighers see the same spec object many times in a row (once
    per host); the conversion runs once per spec.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def nova_spec(self, spec_obj: RequestSpec) -> Any:
        cached = getattr(self._local, 'entry', None)
        if cached is not None and cached[0] is spec_obj:
            return cached[1]
        from nova import objects
        objects.register_all()
        nova_spec = objects.RequestSpec.obj_from_primitive(encode_request_spec(spec_obj))
        self._local.entry = (spec_obj, nova_spec)
        return nova_spec


_SPECS = _NovaSpecCache()


class NovaFilterAdapter(BaseHostFilter):
    """A Nova filter instance behind this service's filter surface."""

    def __init__(self, nova_filter: Any):
        self._nova = nova_filter
        self.run_filter_once_per_request = bool(
            getattr(nova_filter, 'run_filter_once_per_request', False))
        self.RUN_ON_REBUILD = bool(getattr(nova_filter, 'RUN_ON_REBUILD', False))
        self.failure_reason = f'rejected by {type(nova_filter).__name__}'

    @property
    def name(self) -> str:
        return type(self._nova).__name__

    def host_passes(self, host_state: HostState, spec_obj: RequestSpec) -> bool:
        return bool(self._nova.host_passes(host_state, _SPECS.nova_spec(spec_obj)))

    def run_filter_for_index(self, index: int) -> bool:
        hook = getattr(self._nova, 'run_filter_for_index', None)
        if callable(hook):
            return bool(hook(index))
        return super().run_filter_for_index(index)


class NovaWeigherAdapter(BaseHostWeigher):
    """A Nova weigher instance behind this service's weigher surface."""

    def __init__(self, nova_weigher: Any):
        self._nova = nova_weigher
        self.minval = getattr(nova_weigher, 'minval', None)
        self.maxval = getattr(nova_weigher, 'maxval', None)

    @property
    def name(self) -> str:
        return type(self._nova).__name__

    def weight_multiplier(self, host_state: HostState) -> float:
        return float(self._nova.weight_multiplier(host_state))

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        return float(self._nova._weigh_object(host_state, _SPECS.nova_spec(weight_properties)))

    def weigh_objects(self, weighed_obj_list: Sequence[Any],
                      weight_properties: RequestSpec) -> list[float]:
        # The plugin's own loop: Nova's clamps to minval/maxval, and a plugin
        # may override it to weigh hosts against each other.
        return [float(w) for w in self._nova.weigh_objects(
            weighed_obj_list, _SPECS.nova_spec(weight_properties))]


def adapt(cls: type) -> BaseHostFilter | BaseHostWeigher:
    """An instance of the Nova plugin class ``cls``, behind the matching adapter."""
    kind = nova_plugin_kind(cls)
    if kind is None:
        raise TypeError(f'{cls.__module__}.{cls.__qualname__} is not a Nova plugin')
    instance = cls()
    LOG.info('%s.%s is a Nova %s: run through Nova\'s interface', cls.__module__,
             cls.__qualname__, kind)
    return NovaFilterAdapter(instance) if kind == 'filter' else NovaWeigherAdapter(instance)
