"""A compute host's free PCI devices, pooled, as plain immutable data (no Nova import).

nova-compute groups its assignable PCI devices into pools of identical
devices and writes the free count of each into its cell database
(``compute_nodes.pci_stats``: the JSON of a ``PciDevicePoolList`` primitive,
each ``PciDevicePool`` with ``vendor_id``, ``product_id``, ``numa_node``,
``tags`` and ``count``). The hosts file may carry the same fields.
:func:`parse_pci_pools` reads either into :class:`HostPciStats`.

A pool reads like Nova's pool dicts (``pool['count']``, ``pool.get('dev_type')``):
its tags (``dev_type``, ``physical_network``, ``remote_managed``, ``rp_uuid``
with PCI in Placement, ...) sit beside the fixed fields, as Nova flattens them,
so filters and weighers written against Nova's ``PciDeviceStats.pools`` work.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.exceptions import HostDataError
from scheduler.objects.host_fields import DATA_KEY, Fields, kind_of, load_json

_POOL_KEYS = frozenset({'vendor_id', 'product_id', 'numa_node', 'tags', 'count'})


@dataclass(frozen=True)
class PciPool(Mapping[str, Any]):
    vendor_id: str
    product_id: str
    count: int
    numa_node: int | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    def _flat(self) -> dict[str, Any]:
        flat: dict[str, Any] = dict(self.tags)
        flat.update(vendor_id=self.vendor_id, product_id=self.product_id,
                    numa_node=self.numa_node, count=self.count)
        return flat

    def __getitem__(self, key: str) -> Any:
        return self._flat()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._flat())

    def __len__(self) -> int:
        return len(self._flat())

    @property
    def dev_type(self) -> str | None:
        return self.tags.get('dev_type')


@dataclass(frozen=True)
class HostPciStats:
    """The host's pools (Nova's ``HostState.pci_stats`` exposes ``pools`` too)."""

    pools: tuple[PciPool, ...] = ()
    #: Whether the pools name their Placement providers (the ``rp_uuid`` tag
    #: nova-compute adds with PCI in Placement); still so once the pools that had
    #: it are used up and gone.
    names_providers: bool = False

    def __post_init__(self) -> None:
        if not self.names_providers and any('rp_uuid' in p.tags for p in self.pools):
            object.__setattr__(self, 'names_providers', True)

    @property
    def free_devices(self) -> int:
        return sum(p.count for p in self.pools)

    def minus(self, taken: Mapping[int, int]) -> HostPciStats:
        """These pools after taking ``taken[i]`` devices from pool ``i``; a pool taken
        from that is left with none goes, as Nova's ``_decrease_pool_count`` removes it
        (the pools left keep their order)."""
        pools = []
        for i, p in enumerate(self.pools):
            if i not in taken:
                pools.append(p)
            elif p.count - taken[i] > 0:
                pools.append(dataclasses.replace(p, count=p.count - taken[i]))
        return HostPciStats(tuple(pools), names_providers=self.names_providers)


def free_devices(stats: Any) -> int:
    """The free devices of a host's pools: a :class:`HostPciStats`, or pools of Nova's
    shape (mappings with a ``count``) that an operator's HostState may carry; 0 for
    none."""
    pools = getattr(stats, 'pools', None) or ()
    return sum(pool.count if isinstance(pool, PciPool) else int(pool.get('count', 0) or 0)
               for pool in pools)


def parse_pci_pools(value: Any, *, where: str, strict: bool) -> HostPciStats:
    """A PciDevicePoolList primitive (or its JSON text, or the hosts file's list).

    Raises :class:`~scheduler.exceptions.HostDataError` naming the field.
    """
    value = load_json(value, where)
    if isinstance(value, Mapping) and (DATA_KEY in value or 'objects' in value):
        # The list object's envelope (Nova's column), or its data.
        value = Fields(value, where, allowed=('objects',), strict=strict,
                       kind='PciDevicePoolList').items('objects')
    if not isinstance(value, list):
        raise HostDataError(f'{where}: must be a list of pools, got {kind_of(value)}')
    pools = []
    for i, item in enumerate(value):
        f = Fields(item, f'{where}[{i}]', allowed=_POOL_KEYS, strict=strict,
                   kind='PciDevicePool')
        pools.append(PciPool(
            vendor_id=_hex_id(f, 'vendor_id'), product_id=_hex_id(f, 'product_id'),
            count=f.integer('count'), numa_node=f.optional_integer('numa_node'),
            tags=f.string_map('tags')))
    return HostPciStats(tuple(pools))


def _hex_id(f: Fields, key: str) -> str:
    if isinstance(f.data.get(key), int):
        # YAML reads an unquoted 8086 as a number (and 0154 as octal).
        raise f.error(key, f"must be a string of hex digits; quote it ('{f.data[key]}')")
    text = f.string(key, required=True)
    assert text is not None
    return text.lower()
