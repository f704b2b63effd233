"""The PCI devices a request asks for (the instance side of PciPassthroughFilter).

Nova's API turns a flavor's ``pci_passthrough:alias`` (through ``[pci] alias``)
and the SR-IOV ports of a server into ``InstancePCIRequest`` objects and sends
them as the RequestSpec's ``pci_requests``: :func:`requested_pci` reads those.
When the flavor names aliases but the spec carries no request for them (a spec
built by hand, a simulation), the requests are made here from ``[pci] alias``
the way Nova's API makes them.

Each request wants ``count`` devices, each matching any one of its ``specs``
(key = value, compared case-insensitively; ``resource_class`` and ``traits`` are
for Placement and are not matched against pools; a key whose value is None, as
Nova sends ``physical_network`` for a port on a tunneled network, matches a pool
without it). A request for 0 devices is kept: nova-api accepts ``alias:0``, and
Nova still looks for a pool that could serve it.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from oslo_config import cfg

from scheduler.exceptions import ConfigurationError, RequestTranslationError
from scheduler.objects.codec import unwrap
from scheduler.objects.spec import ImageMetaProps, RequestSpec
from scheduler.request import hardware

ALIAS_EXTRA_SPEC = 'pci_passthrough:alias'
DEVICE_TYPES = ('type-PCI', 'type-PF', 'type-VF', 'vdpa')
_ALIAS_KEYS = frozenset({'name', 'vendor_id', 'product_id', 'device_type', 'numa_policy',
                         'resource_class', 'traits', 'live_migratable'})


@dataclass(frozen=True)
class PciRequest:
    count: int
    specs: tuple[Mapping[str, str | None], ...]
    alias_name: str | None = None
    request_id: str | None = None
    requester_id: str | None = None
    numa_policy: str | None = None

    def describe(self) -> str:
        """For reasons: the request's own words, never a host's."""
        what = f"alias '{self.alias_name}'" if self.alias_name else 'a port'
        return f'{self.count} device{"" if self.count == 1 else "s"} for {what}'

    def placement_groups(self) -> list[str]:
        """The request group suffixes Nova gives this request with PCI in Placement."""
        if not self.request_id:
            return []
        return [f'{self.request_id}-{i}' for i in range(self.count)]


@dataclass(frozen=True)
class Alias:
    name: str
    numa_policy: str | None
    specs: tuple[Mapping[str, str], ...]


def parse_aliases(values: Iterable[str]) -> dict[str, Alias]:
    """``[pci] alias`` values (JSON objects) by name; ConfigurationError naming the bad one."""
    found: dict[str, tuple[str | None, str | None, list[dict[str, str]]]] = {}
    for raw in values:
        try:
            entry = json.loads(raw)
        except ValueError as e:
            raise ConfigurationError(f'[pci] alias {raw!r} is not JSON: {e}') from None
        if not isinstance(entry, dict):
            raise ConfigurationError(f'[pci] alias {raw!r} must be a JSON object')
        unknown = sorted(set(entry) - _ALIAS_KEYS)
        if unknown:
            raise ConfigurationError(f'[pci] alias {raw!r}: unknown key(s) {", ".join(unknown)}')
        name = entry.get('name')
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f'[pci] alias {raw!r} needs a name')
        device_type = entry.get('device_type')
        if device_type is not None and device_type not in DEVICE_TYPES:
            raise ConfigurationError(f'[pci] alias {name!r}: device_type {device_type!r} is not '
                                     f'one of {", ".join(DEVICE_TYPES)}')
        policy = entry.get('numa_policy')
        if policy is not None and policy not in hardware.PCI_NUMA_POLICIES:
            raise ConfigurationError(f'[pci] alias {name!r}: numa_policy {policy!r} is not one '
                                     f'of {", ".join(hardware.PCI_NUMA_POLICIES)}')
        spec = {k: str(v) for k, v in entry.items()
                if k not in ('name', 'device_type', 'numa_policy')}
        if device_type is not None:
            spec['dev_type'] = device_type
        known = found.get(name)
        if known is not None and (known[0], known[1]) != (device_type, policy):
            raise ConfigurationError(f'[pci] alias {name!r} is defined more than once with a '
                                     f'different device_type or numa_policy')
        found.setdefault(name, (device_type, policy, []))[2].append(spec)
    return {name: Alias(name, policy, tuple(specs))
            for name, (_, policy, specs) in found.items()}


def requested_pci(spec: RequestSpec, aliases: Mapping[str, Alias] | None = None
                  ) -> list[PciRequest]:
    """The PCI requests of ``spec``; RequestTranslationError for an alias nobody defined."""
    requests = [_from_primitive(r) for r in requested_primitives(spec)]
    flavor_aliases = (spec.flavor.extra_specs or {}).get(ALIAS_EXTRA_SPEC)
    if flavor_aliases and not any(r.alias_name for r in requests):
        requests.extend(_from_aliases(spec, flavor_aliases, aliases or {}))
    return [r for r in requests if r.count >= 0]


def requested_primitives(spec: RequestSpec) -> list[dict[str, Any]]:
    """The spec's own InstancePCIRequest primitives (no aliases resolved)."""
    data = unwrap(spec.pci_requests or {})
    return [r for r in data.get('requests') or () if isinstance(r, dict)]


def _from_primitive(data: Mapping[str, Any]) -> PciRequest:
    return PciRequest(
        count=int(data.get('count') or 0),
        specs=tuple(dict(s) for s in data.get('spec') or () if isinstance(s, dict)),
        alias_name=data.get('alias_name'), request_id=data.get('request_id'),
        requester_id=data.get('requester_id'), numa_policy=data.get('numa_policy'))


def _from_aliases(spec: RequestSpec, value: str, aliases: Mapping[str, Alias]
                  ) -> list[PciRequest]:
    image_props = spec.image.properties if spec.image is not None else ImageMetaProps()
    # Nova: the flavor's or image's PCI NUMA affinity policy overrides the alias's.
    override = hardware.pci_numa_policy(spec.flavor, image_props)
    requests = []
    for item in value.split(','):
        name, sep, count_text = item.strip().partition(':')
        name = name.strip()
        try:
            count = int(count_text) if sep else 1
        except ValueError:
            count = 0
        if not name or count < 1:
            raise RequestTranslationError(
                f'flavor extra spec {ALIAS_EXTRA_SPEC}={value!r}: each entry must be '
                f'<alias>:<count> with a count of at least 1')
        alias = aliases.get(name)
        if alias is None:
            raise RequestTranslationError(
                f'PCI alias {name!r} of the flavor is not defined in [pci] alias')
        requests.append(PciRequest(count=count, specs=alias.specs, alias_name=name,
                                   numa_policy=override or alias.numa_policy))
    return requests


def aliases_from_conf(conf: Any) -> Mapping[str, Alias]:
    """``[pci] alias`` of ``conf``, parsed (once per distinct value); {} when the option
    is not registered. ConfigurationError for an invalid alias."""
    try:
        values = tuple(conf.pci.alias or ())
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        return {}
    return _parsed_aliases(values)


@functools.lru_cache(maxsize=8)
def _parsed_aliases(values: tuple[str, ...]) -> Mapping[str, Alias]:
    return MappingProxyType(parse_aliases(values))
