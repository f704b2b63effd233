"""Host weighers: the plugin surface and the weighing loop, as Nova does it.

For each weigher: raw value per host (clamped to the weigher's ``minval`` /
``maxval``) -> normalised to [0, 1] over the list (the weigher's bounds replace
the list's min/max where set; all equal -> all 0.0) -> times the per-host
multiplier -> summed over weighers. Hosts are sorted by total weight,
descending and stable, so ties keep the input order.

A consequence kept on purpose (Nova does the same, ``nova/weights.py``
``normalize``): RAM, CPU
and Disk weighers have ``minval = 0``, so hosts with identical non-zero free
resources all normalise to 1.0, not 0.0.

One deliberate difference: a weigher that cannot weigh a host at all (Nova's
MetricsWeigher with ``[metrics] required`` and a metric missing raises and
fails the whole request) says so through
:meth:`BaseHostWeigher.unweighable_reason`; :func:`weigh_hosts` then leaves
that host out with the reason, and the other hosts are weighed as usual.
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.exceptions import ConfigurationError, WeigherError
from scheduler.filters.base import host_label
from scheduler.host_table import (
    HostView,
    WeighedHost,
    WeighedView,
    as_view,
    multiplier_from_values,
)
from scheduler.vector_hooks import trusted_hook

if TYPE_CHECKING:
    from oslo_config import cfg

    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

# Bounds the hosts listed per weigher in the DEBUG log line.
_LOG_HOSTS = 20


@dataclass(frozen=True)
class Exclusion:
    """A host a weigher could not weigh, and why (user-facing, no host name)."""

    weigher: str
    host: HostState
    reason: str


def normalize(values: Sequence[float], minval: float | None = None,
              maxval: float | None = None) -> list[float]:
    """Nova's ``nova.weights.normalize``: scale ``values`` to [0, 1].

    ``minval`` / ``maxval`` replace the list's own min / max when given. If
    the bounds are equal every value becomes 0.0. Values are not clamped here
    (:meth:`BaseHostWeigher.weigh_objects` does that), as in Nova.
    """
    if not values:
        return []
    upper = float(max(values) if maxval is None else maxval)
    lower = float(min(values) if minval is None else minval)
    if lower == upper:
        return [0.0] * len(values)
    span = upper - lower
    return [(v - lower) / span for v in values]


class BaseHostWeigher:
    """Base class of host weighers, with Nova's surface.

    Subclasses implement :meth:`_weigh_object` (higher wins before the
    multiplier) and usually :meth:`weight_multiplier`.
    """

    # Class attributes of a weigher written here; the adapter of a Nova weigher
    # (scheduler/nova_plugins.py) sets them on its instance.
    minval: float | None = None
    maxval: float | None = None

    #: The service's ConfigOpts, set by the plugin loader after instantiation.
    conf: cfg.ConfigOpts | None = None

    @property
    def name(self) -> str:
        return type(self).__name__

    def weight_multiplier(self, host_state: HostState) -> float:
        """How much this weigher counts for this host (config, aggregate override)."""
        return 1.0

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        raise NotImplementedError(f'{self.name} must implement _weigh_object()')

    def unweighable_reason(self, host_state: HostState,
                           weight_properties: RequestSpec) -> str | None:
        """Why this host cannot be weighed at all (it is then not chosen), or None.

        For data a weigher *requires*; missing optional data should weigh low
        instead. The reason reaches users: say what is missing, not the host name.
        """
        return None

    # Column-wise hooks (see scheduler.host_table). Each must agree with the
    # per-host method it stands for; None means "use the per-host method".
    def raw_weights(self, table: HostTable, rows: np.ndarray,
                    weight_properties: RequestSpec) -> np.ndarray | None:
        """:meth:`_weigh_object` for every row at once (before clamping), or None."""
        return None

    def multipliers(self, table: HostTable, rows: np.ndarray) -> np.ndarray | float | None:
        """:meth:`weight_multiplier` for every row at once (one float when it is
        the same for all), or None."""
        return None

    def weighs_every_host(self, weight_properties: RequestSpec) -> bool:
        """True when :meth:`unweighable_reason` is None for every host of this
        request, so that it need not be asked host by host."""
        return False

    def check_configuration(self) -> None:
        """Called once by the plugin loader after ``conf`` is set.

        Parse and validate settings here and log start-up notices; raise
        :class:`~scheduler.exceptions.ConfigurationError` to stop start-up.
        """

    def weigh_objects(self, weighed_obj_list: Sequence[Any],
                      weight_properties: RequestSpec) -> list[float]:
        """Raw weights, one per object (objects have ``.obj``, the HostState).

        Override to weigh hosts against each other; return weights only,
        never modify the objects.
        """
        weights = []
        for weighed in weighed_obj_list:
            weight = self._weigh_object(weighed.obj, weight_properties)
            if self.minval is not None:
                weight = max(weight, self.minval)
            if self.maxval is not None:
                weight = min(weight, self.maxval)
            weights.append(weight)
        return weights

    def require_conf(self) -> cfg.ConfigOpts:
        """The configuration, or a clear error if the weigher was built by hand without it."""
        if self.conf is None:
            raise ConfigurationError(
                f'{self.name} has no configuration; set .conf (the plugin loader does)')
        return self.conf


def get_weight_multiplier(host_state: HostState, option_name: str,
                          config_value: float) -> float:
    """The multiplier for ``host_state``: ``config_value`` unless the host's
    aggregates set metadata ``option_name``; several values -> the smallest;
    any unparsable (or non-finite) value -> ``config_value``, with a warning.
    """
    values = {agg.metadata[option_name] for agg in host_state.aggregates
              if option_name in agg.metadata}
    return multiplier_from_values(option_name, values, config_value)


@functools.lru_cache(maxsize=1024)
def _warn_unweighable(weigher: str, host: str, reason: str) -> None:
    # Once per host and reason: the same host is left out of every request
    # until its data or the configuration changes.
    LOG.warning('%s leaves host %s out of scheduling: %s', weigher, host, reason)


def normalize_array(values: np.ndarray, minval: float | None = None,
                    maxval: float | None = None) -> np.ndarray:
    """:func:`normalize` over an array, with the same float operations."""
    if not len(values):
        return values.astype(np.float64)
    upper = float(values.max() if maxval is None else maxval)
    lower = float(values.min() if minval is None else minval)
    if lower == upper:
        return _ALL_ZERO
    return (values.astype(np.float64) - lower) / (upper - lower)


# normalize_array's "all 0.0" (compared by identity, so callers can skip the arithmetic).
_ALL_ZERO = np.zeros(0, dtype=np.float64)


def weigh_hosts(weighers: Sequence[BaseHostWeigher], hosts: Sequence[HostState],
                spec_obj: RequestSpec, *, excluded: list[Exclusion] | None = None,
                vectorised: bool = True, shares: bool = True) -> WeighedView:
    """Weigh ``hosts`` (rows of a host table; other sequences become one) and
    order them best first (descending weight, ties in input order).

    With at most one host nothing is weighed and its weight is 0.0: Nova's
    ``BaseWeightHandler.get_weighed_objects`` returns a lone host before any
    weigher sees it, so a lone host is never left out either. Otherwise hosts a
    weigher cannot weigh (:meth:`BaseHostWeigher.unweighable_reason`) are left
    out of the result and appended to ``excluded`` when given; if one host is
    left after that, it is not weighed. With ``vectorised``, a weigher with
    trusted column-wise hooks weighs all rows at once; without, every weigher
    weighs host by host. With ``shares``, each host's :attr:`WeighedHost.contributions`
    say what each weigher added to its weight; without, they are empty. Raises
    :class:`WeigherError` naming the weigher when a plugin raises.
    """
    view = as_view(hosts)
    table = view.table
    if len(view) > 1:
        view = _weighable(weighers, view, spec_obj, excluded, vectorised)
    rows = view.rows
    weights = np.zeros(len(rows), dtype=np.float64)
    contributions: dict[str, np.ndarray] = {}
    if len(rows) <= 1:
        return WeighedView(table, rows, weights, contributions)
    for weigher in weighers:
        name = weigher.name
        try:
            raw = _raw_weights(weigher, view, spec_obj, weights, vectorised)
            if len(raw) != len(rows):
                raise ValueError(f'returned {len(raw)} weights for {len(rows)} hosts')
            normalized = normalize_array(raw, weigher.minval, weigher.maxval)
            multipliers = _multipliers(weigher, view, vectorised)
        except Exception as exc:
            raise WeigherError(name, f'{type(exc).__name__}: {exc}') from exc
        if normalized is _ALL_ZERO:
            # Every host weighs the same: no share to add (0.0 each, as below), and
            # nothing to keep per host (a read-only view of one zero).
            score = np.broadcast_to(np.float64(0.0), rows.shape)
            normalized = score
        else:
            score = multipliers * normalized
            weights += score
        if shares:
            before = contributions.get(name)
            contributions[name] = score if before is None else before + score
        if LOG.isEnabledFor(logging.DEBUG):
            shown = rows[:_LOG_HOSTS].tolist()
            per_row = np.broadcast_to(multipliers, rows.shape).tolist()
            LOG.debug('%s (multiplier * normalised raw): %s', name, ', '.join(
                f'{table.label(r)}: {m} * {n:.4f} ({w})'
                for r, w, n, m in zip(shown, raw.tolist(), normalized.tolist(), per_row,
                                      strict=False)))
    # Ordered as far as it is read (a stable sort by descending weight).
    return WeighedView(table, rows, weights, contributions)


def _weighable(weighers: Sequence[BaseHostWeigher], view: HostView, spec_obj: RequestSpec,
               excluded: list[Exclusion] | None, vectorised: bool) -> HostView:
    for weigher in weighers:
        # Most weighers weigh every host; skip the per-host call for them.
        if type(weigher).unweighable_reason is BaseHostWeigher.unweighable_reason:
            continue
        name = weigher.name
        everyone = (trusted_hook(weigher, 'weighs_every_host', BaseHostWeigher,
                                 ('unweighable_reason',)) if vectorised else None)
        try:
            if everyone is not None and everyone(spec_obj):
                continue
        except Exception as exc:
            raise WeigherError(name, f'{type(exc).__name__}: {exc}') from exc
        keep = np.ones(len(view), dtype=bool)
        for pos, host in enumerate(view):
            try:
                reason = weigher.unweighable_reason(host, spec_obj)
            except Exception as exc:
                raise WeigherError(name, f'{type(exc).__name__}: {exc}') from exc
            if reason is None:
                continue
            keep[pos] = False
            LOG.debug('%s cannot weigh %s: %s', name, host_label(host), reason)
            _warn_unweighable(name, host_label(host), reason)
            if excluded is not None:
                excluded.append(Exclusion(name, host, reason))
        view = view.where(keep)
    return view


def _raw_weights(weigher: BaseHostWeigher, view: HostView, spec_obj: RequestSpec,
                 weights: np.ndarray, vectorised: bool) -> np.ndarray:
    hook = (trusted_hook(weigher, 'raw_weights', BaseHostWeigher,
                         ('_weigh_object', 'weigh_objects')) if vectorised else None)
    raw = hook(view.table, view.rows, spec_obj) if hook is not None else None
    if raw is None:
        # Nova's weighed objects carry the weight the weighers before gave them.
        weighed = [WeighedHost(h, w) for h, w in zip(view, weights.tolist(), strict=True)]
        return np.asarray(weigher.weigh_objects(weighed, spec_obj), dtype=np.float64)
    raw = np.asarray(raw, dtype=np.float64)
    if weigher.minval is not None:
        raw = np.maximum(raw, weigher.minval)
    if weigher.maxval is not None:
        raw = np.minimum(raw, weigher.maxval)
    return raw


def _multipliers(weigher: BaseHostWeigher, view: HostView,
                 vectorised: bool) -> np.ndarray | float:
    hook = (trusted_hook(weigher, 'multipliers', BaseHostWeigher, ('weight_multiplier',))
            if vectorised else None)
    values = hook(view.table, view.rows) if hook is not None else None
    if values is None:
        return np.array([float(weigher.weight_multiplier(h)) for h in view], dtype=np.float64)
    if isinstance(values, (int, float)):
        return float(values)
    return np.asarray(values, dtype=np.float64)
