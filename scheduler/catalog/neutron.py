"""The optional, read-only Neutron source of routed network segments (``[neutron]``).

Nova's routed networks request filter asks Neutron two things, and so does
this source, with the same GETs Nova's network API sends:

* the segments of a network: the ``segment_id`` of each of its subnets
  (``GET /v2.0/subnets?network_id=…&fields=segment_id``; Neutron's segments
  list would also name a provider network's segmentation);
* the segment a port's fixed IP is on: the port (``GET /v2.0/ports/{id}``),
  then its first fixed IP's subnet (``GET /v2.0/subnets/{id}``); a port
  without a fixed IP stands for its network.

Both answer nothing when Neutron has no ``segment`` extension
(``GET /v2.0/extensions``, kept ``extensions_cache_time`` seconds). Each
request is bounded by ``[neutron] connect_timeout``/``read_timeout`` and is
not retried: a failure is a :class:`NeutronError`, which fails the request
that needed it (never guessed). Nothing here writes, and no token is logged.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg

from scheduler.conf.ksa import load_adapter
from scheduler.conf.neutron import GROUP
from scheduler.exceptions import SchedulerError

SEGMENT_EXTENSION = 'segment'


class NeutronError(SchedulerError):
    """Neutron could not be read, or answered something we cannot use."""


@dataclass(frozen=True)
class PortSegments:
    network_id: str | None
    #: The subnet of the port's first fixed IP; None without one.
    subnet_id: str | None
    segments: tuple[str, ...]


class NeutronNetworks:
    """Segments of networks and ports, read from Neutron; thread-safe."""

    def __init__(self, adapter: Any, *, connect_timeout: float, read_timeout: float,
                 extensions_cache_time: float,
                 clock: Callable[[], float] = time.monotonic):
        self._adapter = adapter
        self._timeout = (connect_timeout, read_timeout)
        self._cache_time = extensions_cache_time
        self._clock = clock
        self._lock = threading.Lock()
        self._segments_enabled: tuple[float, bool] | None = None

    def network_segments(self, network_id: str) -> list[str]:
        """The segment ids of the network's subnets; [] when it is not routed."""
        if not self._has_segments():
            return []
        body = self._get('/v2.0/subnets', {'network_id': network_id, 'fields': 'segment_id'})
        subnets = _list(body, 'subnets')
        return [str(s['segment_id']) for s in subnets
                if isinstance(s, dict) and s.get('segment_id')]

    def port_segments(self, port_id: str) -> PortSegments:
        """Where the port is: the segment of its first fixed IP's subnet; without a
        fixed IP (deferred allocation), any segment of its network."""
        port = self._get(f'/v2.0/ports/{port_id}').get('port')
        if not isinstance(port, dict):
            raise NeutronError(f'GET /v2.0/ports/{port_id}: no port in the answer')
        network_id = port.get('network_id')
        fixed_ips = port.get('fixed_ips') or []
        if not fixed_ips:
            return PortSegments(network_id, None, tuple(
                self.network_segments(network_id) if network_id else ()))
        subnet_id = fixed_ips[0].get('subnet_id') if isinstance(fixed_ips[0], dict) else None
        if not subnet_id:
            raise NeutronError(f'port {port_id}: a fixed IP without a subnet')
        if not self._has_segments():
            return PortSegments(network_id, subnet_id, ())
        subnet = self._get(f'/v2.0/subnets/{subnet_id}').get('subnet')
        if not isinstance(subnet, dict):
            raise NeutronError(f'GET /v2.0/subnets/{subnet_id}: no subnet in the answer')
        segment = subnet.get('segment_id')
        return PortSegments(network_id, subnet_id, (str(segment),) if segment else ())

    def _has_segments(self) -> bool:
        now = self._clock()
        with self._lock:
            known = self._segments_enabled
        if known is not None and now - known[0] < self._cache_time:
            return known[1]
        extensions = _list(self._get('/v2.0/extensions'), 'extensions')
        enabled = any(isinstance(e, dict) and e.get('alias') == SEGMENT_EXTENSION
                      for e in extensions)
        with self._lock:
            self._segments_enabled = (now, enabled)
        return enabled

    def _get(self, url: str, params: dict[str, Any] | None = None) -> dict:
        try:
            response = self._adapter.get(url, params=params, timeout=self._timeout,
                                         headers={'Accept': 'application/json'},
                                         raise_exc=False, connect_retries=0,
                                         status_code_retries=0)
        except ks_exc.ClientException as e:
            raise NeutronError(f'GET {url}: {type(e).__name__}') from e
        if response.status_code != 200:
            raise NeutronError(f'GET {url}: HTTP {response.status_code}')
        try:
            body = response.json()
        except ValueError:
            raise NeutronError(f'GET {url}: the answer is not JSON') from None
        if not isinstance(body, dict):
            raise NeutronError(f'GET {url}: the answer is not a JSON object')
        return body


def _list(body: dict, key: str) -> list:
    value = body.get(key)
    if not isinstance(value, list):
        raise NeutronError(f'expected a list of {key}, got {type(value).__name__}')
    return value


def neutron_from_conf(conf: cfg.ConfigOpts) -> NeutronNetworks | None:
    """The source ``[neutron]`` describes, or None without an auth plugin."""
    opts = conf[GROUP]
    if not opts.auth_type:
        return None
    return NeutronNetworks(load_adapter(conf, GROUP), connect_timeout=opts.connect_timeout,
                           read_timeout=opts.read_timeout,
                           extensions_cache_time=opts.extensions_cache_time)
