"""ImagePropertiesWeigher: prefer hosts whose instances share the requested image's properties.

Nova's rule (off by default, multiplier 0.0): each ``(property, value)`` pair
of the requested image counts once per instance on the host whose image has
the same pair; with ``[filter_scheduler] image_props_weight_setting`` each pair
counts its property's ratio instead (unlisted properties count 0). A positive
multiplier packs instances with alike images, a negative one spreads them.
Values compare as strings, as in Nova.

What this service can do: Nova loads each instance's image properties from its
database. This service has none; its host catalog keeps only the uuids of the
instances on a host (the casts carry more, but the catalog does not keep it).
So today every host weighs 0 and the weigher does not change the order; when
the multiplier is non-zero, start-up says so once. An instance entry that
carries its image properties (``{'uuid': ..., 'image_properties': {...}}``) is
counted by Nova's rule, so a catalog that keeps them needs no change here.
"""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier
from scheduler.weights.setting import parse_weight_setting

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

SETTING_OPTION = '[filter_scheduler] image_props_weight_setting'


def _pairs(properties: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    # Lists are not hashable: compare every value as its string, as Nova does.
    return {(str(k), str(v)) for k, v in (properties or {}).items()}


def shared_properties_weight(requested: Mapping[str, Any] | None,
                             existing: Iterable[Mapping[str, Any] | None],
                             setting: Mapping[str, float]) -> float:
    """Nova's count of the requested image's ``(property, value)`` pairs among the
    images of ``existing`` instances (one mapping of properties per instance)."""
    wanted = _pairs(requested)
    seen: Counter[tuple[str, str]] = Counter()
    for properties in existing:
        seen.update(_pairs(properties) & wanted)
    if not setting:
        return float(sum(seen.values()))
    return sum(setting.get(name, 0.0) * count for (name, _value), count in seen.items())


def instance_image_properties(instance: Any) -> Mapping[str, Any] | None:
    """The image properties an instance entry of ``host_state.instances`` carries."""
    if isinstance(instance, Mapping):
        properties = instance.get('image_properties')
        if isinstance(properties, Mapping):
            return properties
    return None


class ImagePropertiesWeigher(BaseHostWeigher):
    _setting: dict[str, float] | None = None

    def check_configuration(self) -> None:
        fs = self.require_conf().filter_scheduler
        self.setting()
        if fs.image_props_weight_multiplier:
            LOG.warning('[filter_scheduler] image_props_weight_multiplier is %s, but the host '
                        'catalog keeps only the uuids of instances, not their image '
                        'properties: ImagePropertiesWeigher weighs every host 0 and does not '
                        'change the order', fs.image_props_weight_multiplier)

    def setting(self) -> dict[str, float]:
        """``image_props_weight_setting`` as property -> ratio (parsed once)."""
        if self._setting is None:
            self._setting = dict(parse_weight_setting(
                self.require_conf().filter_scheduler.image_props_weight_setting,
                SETTING_OPTION))
        return self._setting

    def weight_multiplier(self, host_state: HostState) -> float:
        return get_weight_multiplier(
            host_state, 'image_props_weight_multiplier',
            self.require_conf().filter_scheduler.image_props_weight_multiplier)

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        # Nova skips the (database-heavy) work when the configured multiplier
        # is 0, whatever aggregates say; kept so both weigh the same.
        if not self.require_conf().filter_scheduler.image_props_weight_multiplier:
            return 0.0
        image = weight_properties.image
        return shared_properties_weight(
            image.properties if image is not None else None,
            (instance_image_properties(i) for i in host_state.instances.values()),
            self.setting())

    def multipliers(self, table: HostTable, rows: np.ndarray) -> np.ndarray | float:
        config_value = self.require_conf().filter_scheduler.image_props_weight_multiplier
        return table.multiplier('image_props_weight_multiplier', config_value, rows)

    def raw_weights(self, table: HostTable, rows: np.ndarray,
                    weight_properties: RequestSpec) -> np.ndarray | None:
        if not self.require_conf().filter_scheduler.image_props_weight_multiplier:
            return np.zeros(len(rows))
        return None
