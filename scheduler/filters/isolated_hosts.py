"""IsolatedHostsFilter: keep isolated images on isolated hosts (and, optionally,
other images off them)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.filters.base import BaseHostFilter, FilterResult

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec

RESERVED_FOR_ISOLATED = 'host is reserved for isolated images (isolated_hosts)'
IMAGE_ISOLATED = 'image may run only on isolated hosts (isolated_images)'


class IsolatedHostsFilter(BaseHostFilter):
    """Nova's matrix over ``[filter_scheduler] isolated_images``, ``isolated_hosts``
    and ``restrict_isolated_hosts_to_isolated_images``:

    ========================  ==================  ======================
    restrict = True           isolated image      other image (or none)
    ========================  ==================  ======================
    isolated host             passes              fails
    other host                fails               passes
    ========================  ==================  ======================

    With ``restrict`` False, other images may also use isolated hosts. Hosts
    match by service host name, exactly; the image by its id. A request without
    an image id (boot from volume) counts as "other image". With no isolated
    images configured, isolated hosts take nothing when ``restrict`` is True
    and everything when it is False.
    """

    # Configuration and image do not change within a request.
    run_filter_once_per_request = True
    RUN_ON_REBUILD = True

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        options = self.require_conf().filter_scheduler
        restrict = options.restrict_isolated_hosts_to_isolated_images
        host_isolated = host_state.host in (options.isolated_hosts or ())
        image_id = spec_obj.image.id if spec_obj.image is not None else None
        image_isolated = image_id is not None and image_id in (options.isolated_images or ())
        if image_isolated and not host_isolated:
            return FilterResult.fail(IMAGE_ISOLATED)
        if host_isolated and not image_isolated and restrict:
            return FilterResult.fail(RESERVED_FOR_ISOLATED)
        return FilterResult.ok()
