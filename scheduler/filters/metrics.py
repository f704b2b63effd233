"""MetricsFilter: hosts must report every metric ``[metrics] weight_setting`` names,
so that the MetricsWeigher can weigh them.

Host metrics are the ``metrics`` the host catalog holds for a host (name ->
number; Nova reads them from the compute node's monitors). A host without a
metric the setting names fails, as in Nova; when the catalog holds no metrics at
all for a host, the operator is also told so once per host in a WARNING, since
that usually means the hosts file does not carry them.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scheduler.filters.base import BaseHostFilter, FilterResult, host_label
from scheduler.filters.log_once import LogOnce
from scheduler.weights.setting import parse_weight_setting

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

SETTING_OPTION = '[metrics] weight_setting'
# Bounds the metric names listed in one reason.
_NAMES_IN_REASON = 5


class MetricsFilter(BaseHostFilter):
    """Fails hosts that do not report every metric ``[metrics] weight_setting`` names.

    With an empty setting every host passes. ``[metrics] required`` does not
    matter here (it tells the weigher what to do with a missing metric).
    """

    RUN_ON_REBUILD = False

    def __init__(self) -> None:
        self._log_once = LogOnce(LOG)
        self._parsed: tuple[tuple[str, ...], frozenset[str]] | None = None

    def required_metrics(self) -> frozenset[str]:
        """The metric names of ``[metrics] weight_setting``, read as the
        MetricsWeigher reads them (malformed entries ignored with a warning),
        so that the filter keeps exactly the hosts the weigher can weigh."""
        raw = tuple(self.require_conf().metrics.weight_setting or ())
        parsed = self._parsed
        if parsed is None or parsed[0] != raw:
            # Parsed once per setting value (Nova parses once at start-up), so
            # the warning about malformed entries is logged once, not per host.
            names = frozenset(name for name, _ in parse_weight_setting(raw, SETTING_OPTION))
            parsed = self._parsed = (raw, names)
        return parsed[1]

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        required = self.required_metrics()
        if not required:
            return FilterResult.ok()
        reported = set(host_state.metrics or ())
        missing = sorted(required - reported)
        if not missing:
            return FilterResult.ok()
        if not reported:
            label = host_label(host_state)
            self._log_once.warning(
                label, '%s: the host catalog has no metrics for host %s; it fails every '
                'request while [metrics] weight_setting names metrics', self.name, label)
        shown = ', '.join(missing[:_NAMES_IN_REASON])
        if len(missing) > _NAMES_IN_REASON:
            shown += f' and {len(missing) - _NAMES_IN_REASON} more'
        return FilterResult.fail(f'host does not report metric{"" if len(missing) == 1 else "s"}'
                                 f' {shown} ([metrics] weight_setting)')
