"""SimpleCIDRAffinityFilter: the scheduler hints ``build_near_host_ip`` and ``cidr``."""
from __future__ import annotations

import ipaddress
import logging
from typing import TYPE_CHECKING, Any

from scheduler.filters.base import BaseHostFilter, FilterResult, host_label
from scheduler.filters.log_once import LogOnce

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

NEAR_HINT = 'build_near_host_ip'
CIDR_HINT = 'cidr'
DEFAULT_CIDR = '/24'
HOST_IP_UNKNOWN = f'host IP address unknown, cannot honour the {NEAR_HINT} hint'
# Bounds the part of a user's hint value echoed in a reason.
_ECHO = 60

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class InvalidHint(ValueError):
    """The hints do not make a network; the message is fit for the user."""


def near_network(near: Any, cidr: Any) -> Network:
    """The network ``near`` + ``cidr`` (default ``/24``) names, as Nova builds it.

    ``cidr`` may also be given without its slash (``24``). Raises
    :class:`InvalidHint` for anything else that is not an address plus prefix.
    """
    if not isinstance(near, str) or not isinstance(cidr, str):
        raise InvalidHint(f'{NEAR_HINT} and {CIDR_HINT} must each be one string')
    prefix = cidr.strip()
    if prefix and not prefix.startswith('/'):
        prefix = '/' + prefix
    text = near.strip() + prefix
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        shown = text if len(text) <= _ECHO else text[:_ECHO - 3] + '...'
        raise InvalidHint(f'{shown!r} is not an IP network') from None


class SimpleCIDRAffinityFilter(BaseHostFilter):
    """With hint ``build_near_host_ip`` (and optionally ``cidr``, default ``/24``)
    the host's IP address must lie in that network.

    The host's address is the ``host_ip`` the host catalog holds. A host without
    one cannot be shown to be near, so it fails (Nova would raise on it), and the
    operator is told once per host in a WARNING. Hint values that make no
    network fail every host with a reason quoting them (Nova fails the request
    with an internal error).
    """

    # Host addresses do not change within a request.
    run_filter_once_per_request = True
    RUN_ON_REBUILD = False

    def __init__(self) -> None:
        self._log_once = LogOnce(LOG)

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        near = spec_obj.get_scheduler_hint(NEAR_HINT)
        if not near:
            return FilterResult.ok()
        try:
            network = near_network(near, spec_obj.get_scheduler_hint(CIDR_HINT, DEFAULT_CIDR))
        except InvalidHint as exc:
            return FilterResult.fail(f'invalid {NEAR_HINT}/{CIDR_HINT} hint: {exc}')
        address = self._host_address(host_state)
        if address is None:
            return FilterResult.fail(HOST_IP_UNKNOWN)
        if address in network:
            return FilterResult.ok()
        # The host's own address stays in the DEBUG log: hosts are not named to users.
        LOG.debug('%s: host %s address %s is not in %s', self.name, host_label(host_state),
                  address, network)
        return FilterResult.fail(f'host IP address is not in {network} ({NEAR_HINT} hint)')

    def _host_address(self, host_state: HostState
                      ) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        raw = host_state.host_ip
        if raw:
            try:
                return ipaddress.ip_address(str(raw).strip())
            except ValueError:
                pass
        label = host_label(host_state)
        self._log_once.warning(
            label, '%s: the host catalog has no valid host_ip for host %s (%r); requests '
            'with the %s hint never go there', self.name, label, raw, NEAR_HINT)
        return None
