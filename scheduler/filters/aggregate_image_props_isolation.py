"""AggregateImagePropertiesIsolation: image properties against aggregate metadata."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scheduler.filters.aggregate_metadata import aggregate_metadata_by_key
from scheduler.filters.base import BaseHostFilter, FilterResult, host_label
from scheduler.filters.image_props import (
    canonical_architecture,
    canonical_hv_type,
    canonical_vm_mode,
)
from scheduler.filters.reasons import brief

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

# Nova's ImageMetaProps coerces these to canonical names; so do we, so that an
# aggregate saying "x86_64" isolates an image that says "AMD64".
_CANONICAL: dict[str, Callable[[str | None], str | None]] = {
    'hw_architecture': canonical_architecture,
    'img_hv_type': canonical_hv_type,
    'hw_vm_mode': canonical_vm_mode,
}


def property_text(name: str, value: Any) -> str:
    """How an image property compares with aggregate metadata (which is text)."""
    if name in _CANONICAL and isinstance(value, str):
        return _CANONICAL[name](value) or value
    return str(value)


def is_unset(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list, tuple, dict)) and not value)


def property_allowed(name: str, value: Any, options: frozenset[str]) -> bool:
    text = property_text(name, value)
    if isinstance(value, bool):
        # Nova compares str(True) == "True"; operators also write "true".
        return text.lower() in {o.lower() for o in options}
    return text in options


class AggregateImagePropertiesIsolation(BaseHostFilter):
    """For each metadata key of the host's aggregates that names an image property
    the image sets, the image's value must be one of the aggregate values
    (comma-separated entries count separately).

    With ``[filter_scheduler] aggregate_image_properties_isolation_namespace`` set,
    only keys starting with the namespace and
    ``aggregate_image_properties_isolation_separator`` are considered; the whole
    key is still the property name, as in Nova.
    """

    # Aggregates and the image do not change within a request.
    run_filter_once_per_request = True
    RUN_ON_REBUILD = True

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        props = spec_obj.image.properties if spec_obj.image is not None else {}
        if not props or not host_state.aggregates:
            return FilterResult.ok()
        prefix = self._prefix()
        metadata = aggregate_metadata_by_key(host_state)
        for key in sorted(metadata):
            if prefix and not key.startswith(prefix):
                continue
            value = props.get(key)
            if is_unset(value):
                continue
            if property_allowed(key, value, metadata[key]):
                continue
            LOG.debug('%s: host %s aggregates allow %s=%s, image has %r', self.name,
                      host_label(host_state), key, sorted(metadata[key]), value)
            return FilterResult.fail(
                f"image property {brief(key)}='{brief(property_text(key, value), 40)}' "
                f"is not among the host's aggregate values")
        return FilterResult.ok()

    def _prefix(self) -> str:
        options = self.require_conf().filter_scheduler
        namespace = options.aggregate_image_properties_isolation_namespace
        if not namespace:
            return ''
        return f'{namespace}{options.aggregate_image_properties_isolation_separator or ""}'
