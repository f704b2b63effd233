"""Load the configured host filters and weighers (stevedore entry points).

Names follow Nova so that an existing ``[filter_scheduler]`` section works:

* a plugin name registered in our entry-point groups (Nova's class names:
  ``ComputeFilter``, ``RAMWeigher``);
* a Nova dotted path whose last component is such a name
  (``nova.scheduler.filters.compute_filter.ComputeFilter``); ``nova.*`` paths
  are never imported, Nova's classes would need Nova's config and database;
* the dotted import path of an out-of-tree class, subclassing our
  :class:`~scheduler.filters.base.BaseHostFilter` /
  :class:`~scheduler.weights.base.BaseHostWeigher`, or Nova's
  ``nova.scheduler.filters.BaseHostFilter`` / ``nova.scheduler.weights.BaseHostWeigher``
  where ``nova`` is importable (run unchanged, :mod:`scheduler.nova_plugins`);
  a ``nova.*`` path whose class name we do not register is imported too;
* for filters, also Nova's way: the class's dotted path in
  ``available_filters`` and its class name in ``enabled_filters``;
* for ``weight_classes``, ``nova.scheduler.weights.all_weighers`` or ``all``:
  every registered weigher.

A Nova plugin this service does not ship yet is skipped with a start-up
WARNING that says what goes unchecked, so Nova's default ``enabled_filters``
loads; any other unknown name aborts start-up with :class:`PluginNotFound`.
"""
from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from typing import TypeVar

from oslo_config import cfg
from stevedore import named

from scheduler import nova_plugins
from scheduler.exceptions import ConfigurationError, PluginNotFound
from scheduler.filters.base import BaseHostFilter
from scheduler.nova_plugins import nova_plugin_kind
from scheduler.vector_hooks import trusted_hook
from scheduler.weights.base import BaseHostWeigher

LOG = logging.getLogger(__name__)

FILTERS_NAMESPACE = 'placement_scheduler.filters'
WEIGHERS_NAMESPACE = 'placement_scheduler.weighers'
FILTERS_OPTION = '[filter_scheduler] enabled_filters'
AVAILABLE_FILTERS_OPTION = '[filter_scheduler] available_filters'
ALL_FILTERS = 'nova.scheduler.filters.all_filters'
WEIGHERS_OPTION = '[filter_scheduler] weight_classes'
ALL_WEIGHERS = frozenset({'nova.scheduler.weights.all_weighers', 'all'})

# The one place that lists Nova 34 plugins we do not ship yet, with what a
# deployment loses while they are missing. A name that gets an entry point
# is loaded normally even if it is still listed here. Every Nova 34 filter and
# weigher ships (scheduler/filters/, scheduler/weights/); the mappings stay for
# the loader's "not implemented yet" path.
NOVA_FILTERS_NOT_SHIPPED: Mapping[str, str] = {}
NOVA_WEIGHERS_NOT_SHIPPED: Mapping[str, str] = {}

P = TypeVar('P', BaseHostFilter, BaseHostWeigher)


def load_filters(conf: cfg.ConfigOpts) -> list[BaseHostFilter]:
    """Instances of ``[filter_scheduler] enabled_filters``, in configured order."""
    names = list(conf.filter_scheduler.enabled_filters or ())
    filters = _load(conf, names, namespace=FILTERS_NAMESPACE, option=FILTERS_OPTION,
                    base=BaseHostFilter, not_shipped=NOVA_FILTERS_NOT_SHIPPED,
                    missing_verb='hosts are not checked for',
                    extra=_available_filter_classes(conf))
    LOG.info('Host filters enabled: %s', ', '.join(f.name for f in filters) or '(none)')
    _log_how_they_run(conf, 'Host filters', filters)
    return filters


def load_weighers(conf: cfg.ConfigOpts) -> list[BaseHostWeigher]:
    """Instances of ``[filter_scheduler] weight_classes``."""
    names: list[str] = []
    for name in conf.filter_scheduler.weight_classes or ():
        if name.strip() in ALL_WEIGHERS:
            names.extend(_all_weigher_names())
        else:
            names.append(name)
    weighers = _load(conf, names, namespace=WEIGHERS_NAMESPACE, option=WEIGHERS_OPTION,
                     base=BaseHostWeigher, not_shipped=NOVA_WEIGHERS_NOT_SHIPPED,
                     missing_verb='hosts are not weighed by')
    LOG.info('Host weighers enabled: %s', ', '.join(w.name for w in weighers) or '(none)')
    _log_how_they_run(conf, 'Host weighers', weighers)
    return weighers


def runs_on_columns(plugin: BaseHostFilter | BaseHostWeigher) -> bool:
    """Whether ``plugin`` judges the host table column-wise (a trusted hook) rather
    than host by host; a hook may still hand a particular request back to the
    per-host path."""
    if isinstance(plugin, BaseHostFilter):
        return (type(plugin).filter_all is BaseHostFilter.filter_all
                and trusted_hook(plugin, 'filter_rows', BaseHostFilter,
                                 ('filter_result', 'host_passes')) is not None)
    return trusted_hook(plugin, 'raw_weights', BaseHostWeigher,
                        ('_weigh_object', 'weigh_objects')) is not None


def _log_how_they_run(conf: cfg.ConfigOpts, what: str,
                      plugins: Sequence[BaseHostFilter | BaseHostWeigher]) -> None:
    # An operator's subclass that overrides a per-host method loses the built-in
    # hook (scheduler/vector_hooks.py): said once here, not discovered in a profile.
    if not plugins:
        return
    if not conf.scheduler.columnar_host_states:
        LOG.info('%s run host by host: [scheduler] columnar_host_states is off', what)
        return
    LOG.info('%s, how they run: %s', what, ', '.join(
        f'{p.name} {"on columns" if runs_on_columns(p) else "host by host"}' for p in plugins))


def _available_filter_classes(conf: cfg.ConfigOpts) -> dict[str, type]:
    """Out-of-tree classes listed in ``available_filters``, by class name.

    Nova's way to add a filter: its dotted path in ``available_filters`` and its
    class name in ``enabled_filters``. Registered filters are always available
    (``nova.scheduler.filters.all_filters`` or not), and Nova's own filters
    (``nova.scheduler.filters.*``, or a registered class name) are ours.
    """
    try:
        entries = conf.filter_scheduler.available_filters
    except cfg.NoSuchOptError:
        return {}
    classes: dict[str, type] = {}
    registered = _entry_point_names(FILTERS_NAMESPACE)
    for raw in entries or ():
        path = raw.strip()
        if not path or path == ALL_FILTERS or '.' not in path:
            continue
        if path.startswith('nova.') and (path.rsplit('.', 1)[1] in registered
                                         or path.startswith('nova.scheduler.filters.')):
            continue
        try:
            classes[path.rsplit('.', 1)[1]] = _import_class(path)
        except (ImportError, AttributeError) as exc:
            raise PluginNotFound(AVAILABLE_FILTERS_OPTION, path,
                                 sorted(_entry_point_names(FILTERS_NAMESPACE))) from exc
    return classes


def _all_weigher_names() -> list[str]:
    registered = sorted(_entry_point_names(WEIGHERS_NAMESPACE))
    # Nova's all_weighers includes these; name them so that the usual
    # "not implemented yet" warning says what the default loses.
    return registered + [n for n in NOVA_WEIGHERS_NOT_SHIPPED if n not in registered]


def _entry_point_names(namespace: str) -> set[str]:
    # Loads nothing: only reads the entry-point metadata of the group.
    manager: named.NamedExtensionManager[object] = named.NamedExtensionManager(
        namespace, names=[], on_missing_entrypoints_callback=None)
    return set(manager.entry_points_names())


def _load(conf: cfg.ConfigOpts, names: Sequence[str], *, namespace: str, option: str,
          base: type[P], not_shipped: Mapping[str, str], missing_verb: str,
          extra: Mapping[str, type] | None = None) -> list[P]:
    registered = _entry_point_names(namespace)
    resolved: list[str | type] = []
    skipped: list[str] = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        target = (extra[name] if extra and name in extra
                  else _resolve(name, registered, not_shipped, option))
        if target is None:
            skipped.append(name.rsplit('.', 1)[-1])
        elif target in resolved:
            LOG.warning('%s lists %s more than once; using it once', option, name)
        else:
            resolved.append(target)
    if skipped:
        LOG.warning('%s: %s not implemented yet; %s %s', option,
                    'these Nova plugins are' if len(skipped) > 1 else 'this Nova plugin is',
                    missing_verb,
                    '; '.join(f'{n} ({not_shipped[n]})' for n in dict.fromkeys(skipped)))
    classes = _load_entry_points(namespace, option,
                                 [t for t in resolved if isinstance(t, str)])
    plugins: list[P] = []
    for target in resolved:
        cls = classes[target] if isinstance(target, str) else target
        plugins.append(_instantiate(cls, conf, base, option))
    return plugins


def _resolve(name: str, registered: set[str], not_shipped: Mapping[str, str],
             option: str) -> str | type | None:
    """A registered plugin name, an imported class, or None for "Nova's, not shipped yet"."""
    if name in registered:
        return name
    if name in not_shipped:
        return None
    if '.' not in name:
        raise PluginNotFound(option, name, sorted(registered))
    last = name.rsplit('.', 1)[1]
    if name.startswith('nova.'):
        # Nova's own plugins are ours by name: Nova's classes would need Nova's
        # configuration and databases. Anything else under nova.* (Nova's test
        # plugins, a vendor's module in the nova namespace) loads as written.
        if last in registered:
            return last
        if last in not_shipped:
            return None
    try:
        return _import_class(name)
    except (ImportError, AttributeError) as exc:
        if last in registered:
            LOG.info('%s: %s cannot be imported (%s); using the registered %s',
                     option, name, exc, last)
            return last
        raise PluginNotFound(option, name, sorted(registered)) from exc


def _import_class(path: str) -> type:
    module_name, _, attr = path.rpartition('.')
    target = getattr(importlib.import_module(module_name), attr)
    if not isinstance(target, type):
        raise AttributeError(f'{path} is not a class')
    return target


def _load_entry_points(namespace: str, option: str, names: list[str]) -> dict[str, type]:
    if not names:
        return {}

    def _fail(_manager: object, entry_point: object, exc: BaseException) -> None:
        name = getattr(entry_point, 'name', entry_point)
        raise ConfigurationError(
            f'{option}: plugin {name} cannot be loaded: {type(exc).__name__}: {exc}') from exc

    manager: named.NamedExtensionManager[object] = named.NamedExtensionManager(
        namespace, names=names, name_order=True, invoke_on_load=False,
        on_load_failure_callback=_fail, on_missing_entrypoints_callback=None)
    return {ext.name: ext.plugin for ext in manager.extensions}


def _instantiate(cls: type, conf: cfg.ConfigOpts, base: type[P], option: str) -> P:
    kind = nova_plugin_kind(cls)
    if kind is not None:
        expected = 'filter' if base is BaseHostFilter else 'weigher'
        if kind != expected:
            raise ConfigurationError(
                f'{option}: {cls.__module__}.{cls.__qualname__} is a Nova {kind}, '
                f'not a {expected}')
        try:
            adapted = nova_plugins.adapt(cls)
        except Exception as exc:
            raise ConfigurationError(
                f'{option}: {cls.__qualname__}() failed: {type(exc).__name__}: {exc}') from exc
        adapted.conf = conf
        return adapted  # type: ignore[return-value]
    if not issubclass(cls, base):
        raise ConfigurationError(
            f'{option}: {cls.__module__}.{cls.__qualname__} is not a subclass of '
            f'{base.__module__}.{base.__qualname__}')
    try:
        plugin = cls()
    except Exception as exc:
        raise ConfigurationError(
            f'{option}: {cls.__qualname__}() failed: {type(exc).__name__}: {exc}') from exc
    plugin.conf = conf
    # Plugins that define check_configuration() (every weigher) parse and
    # check their settings once, here, at start-up.
    check = getattr(plugin, 'check_configuration', None)
    if callable(check):
        try:
            check()
        except ConfigurationError:
            raise
        except Exception as exc:
            raise ConfigurationError(
                f'{option}: {cls.__qualname__}.check_configuration() failed: '
                f'{type(exc).__name__}: {exc}') from exc
    return plugin
