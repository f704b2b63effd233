"""Can a host's free PCI devices serve a request's PCI requests? (pure)

Nova's ``PciDeviceStats.support_requests`` semantics, written for this
service's data:

* a pool serves a request when one of the request's specs matches it (every
  key equal, case-insensitively; ``resource_class`` and ``traits`` are
  Placement's business); physical functions (``type-PF``), vDPA devices and
  remote-managed devices serve only requests that ask for them by name;
* with NUMA cells chosen for the instance, the request's NUMA affinity policy
  (``numa_policy``; ``legacy`` when unset) narrows the pools: ``required`` —
  only pools on those cells; ``legacy`` — those, or pools without NUMA
  information; ``socket`` — those, or pools on a cell of the same socket;
  ``preferred`` — those if there are enough, else any;
* requests are served in order, each taking from what the earlier ones left;
* PCI in Placement: a request whose devices the allocation candidate allocates
  (its request groups ``<request_id>-<n>`` are in the candidate's mappings) is
  already counted by Placement. When the pools say which provider they are
  (the ``rp_uuid`` tag nova-compute adds with PCI in Placement), the request is
  checked against exactly those pools, and they must still serve it as above
  (an alias's ``product_id`` is not a trait Placement checked; nova-compute
  would refuse the claim) and meet its NUMA affinity; otherwise Placement's
  answer is taken as it is.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.objects.pci import HostPciStats, PciPool
from scheduler.request.pci import PciRequest

if TYPE_CHECKING:
    from scheduler.host_state import HostState

#: Spec keys that say what Placement allocates, not what a pool is (``rp_uuids``:
#: the providers a move's earlier allocation took the devices from).
PLACEMENT_ONLY_KEYS = frozenset({'resource_class', 'traits', 'rp_uuids'})
NO_POOLS = 'no PCI device pools known for the host'


@dataclass(frozen=True)
class NumaCells:
    """The host NUMA cells the instance was fitted to, for PCI NUMA affinity."""

    ids: frozenset[int]
    #: socket of every host cell (not only the chosen ones); None if unknown
    socket_of: Mapping[int, int | None] = field(default_factory=dict)

    @property
    def sockets(self) -> frozenset[int]:
        return frozenset(s for i, s in self.socket_of.items() if i in self.ids and s is not None)


@dataclass(frozen=True)
class PciFit:
    passed: bool
    reason: str | None = None
    #: pool index -> devices this fit takes (for the next instance of the request)
    taken: Mapping[int, int] = field(default_factory=dict)


def fit_requests(stats: HostPciStats | None, requests: Sequence[PciRequest], *,
                 mappings: Mapping[str, Sequence[str]] | None = None,
                 numa: NumaCells | None = None) -> PciFit:
    """Whether ``requests`` can be served together; ``mappings`` is the allocation
    candidate's (None: no candidate), ``numa`` the chosen cells (None: no affinity)."""
    pools = stats.pools if stats is not None else ()
    free = [p.count for p in pools]
    taken: dict[int, int] = {}
    for request in requests:
        groups = request.placement_groups()
        placed = bool(groups) and mappings is not None and all(g in mappings for g in groups)
        if placed:
            assert mappings is not None
            providers = {rp for g in groups for rp in mappings[g]}
            if not any('rp_uuid' in p.tags for p in pools):
                continue  # Placement counted them; no pool says more
            eligible = [i for i, p in enumerate(pools)
                        if p.tags.get('rp_uuid') in providers and serves(p, request)]
        elif stats is None:
            return PciFit(False, NO_POOLS)
        else:
            eligible = [i for i, p in enumerate(pools) if serves(p, request)]
        eligible = [i for i in eligible if free[i] > 0]
        if numa is not None:
            eligible = _numa_affine(eligible, pools, free, request, numa)
        if sum(free[i] for i in eligible) < request.count:
            where = ' with the requested NUMA affinity' if numa is not None else ''
            return PciFit(False, f'not enough free PCI devices{where}: {request.describe()}')
        wanted = request.count
        for i in eligible:
            take = min(wanted, free[i])
            free[i] -= take
            taken[i] = taken.get(i, 0) + take
            wanted -= take
            if not wanted:
                break
    return PciFit(True, taken=taken)


def serves(pool: PciPool, request: PciRequest) -> bool:
    """Whether a device of ``pool`` can serve ``request`` (no counts, no NUMA)."""
    if pool.dev_type == 'type-PF' and not _asks(request, 'dev_type', 'type-pf'):
        return False
    if pool.dev_type == 'vdpa' and not _asks(request, 'dev_type', 'vdpa'):
        return False
    if (str(pool.tags.get('remote_managed', '')).lower() == 'true'
            and not _asks(request, 'remote_managed', 'true')):
        return False
    return any(_matches(pool, spec) for spec in request.specs)


def _asks(request: PciRequest, key: str, value: str) -> bool:
    return any(str(spec.get(key, '')).lower() == value for spec in request.specs)


def _matches(pool: PciPool, spec: Mapping[str, str]) -> bool:
    for key, wanted in spec.items():
        if key in PLACEMENT_ONLY_KEYS:
            continue
        have = pool.get(key)
        if have is None or str(have).lower() != str(wanted).lower():
            return False
    return True


def _numa_affine(eligible: list[int], pools: Sequence[PciPool], free: list[int],
                 request: PciRequest, numa: NumaCells) -> list[int]:
    def enough(indexes: list[int]) -> bool:
        return sum(free[i] for i in indexes) >= request.count

    policy = request.numa_policy or 'legacy'
    local = [i for i in eligible if pools[i].numa_node in numa.ids]
    if policy == 'required' or enough(local):
        return local
    if policy == 'socket':
        sockets = numa.sockets
        return [i for i in eligible if (node := pools[i].numa_node) is not None
                and numa.socket_of.get(node) in sockets]
    unknown_too = [i for i in eligible
                   if pools[i].numa_node in numa.ids or pools[i].numa_node is None]
    if policy == 'legacy' or enough(unknown_too):
        return unknown_too
    return eligible  # preferred


def use_devices(host_state: HostState, taken: Mapping[int, int]) -> None:
    """Take ``taken`` (a :class:`PciFit`'s) out of the host's pools; for HostState.consume."""
    if host_state.pci_stats is not None:
        host_state.pci_stats = host_state.pci_stats.minus(taken)
