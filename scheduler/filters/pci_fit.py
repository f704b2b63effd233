"""Can a host's free PCI devices serve a request's PCI requests? (pure)

Nova 34's ``PciDeviceStats`` arithmetic (``support_requests``/``apply_requests``),
written for this service's data, step for step, so that it passes and fails
the same hosts and takes the same devices:

* the pools are read in the order ``PciDeviceStats.__init__`` keeps them:
  sorted (stably) by how many keys the pool has (fixed fields and tags), so a
  pool with more tags comes after one with fewer, whatever the compute wrote;
* each request, in order, narrows the pools as ``_filter_pools`` does, each
  step on what the one before left: the spec (``_filter_pools_for_spec``:
  every key of one of the request's specs equal, strings compared
  case-insensitively; ``resource_class``, ``traits``, ``rp_uuids``, ``rp_uuid``
  are Placement's); NUMA affinity with NUMA cells chosen for the instance
  (``_filter_pools_for_numa_cells``, counting the devices the spec matched,
  unrequested PFs and the rest included); physical functions, vDPA devices and
  remote-managed devices only for requests that ask for them; the pools of
  the candidate's Placement allocation; live-migratable devices; and it fails
  when fewer devices than requested remain after the spec, the NUMA and the PF
  steps and at the end, or when none is left;
* devices are taken as ``_apply_request`` takes them: from the pools left, in
  their order, or, with PCI in Placement, as many from each pool as the
  candidate allocates from its provider; a pool taken to zero leaves the list
  (``_decrease_pool_count``).

PCI in Placement: the providers of a request are those of the candidate's
request groups named ``<request_id>-...`` (``_get_rp_uuids_for_request``; a
port's request has none). When the host's pools never said which provider
they are (the ``rp_uuid`` tag nova-compute adds with PCI in Placement; a hosts
file's pools), or they are unknown, Placement's answer is taken as it is: it
counted the devices (Nova would fail the host: its pools cannot show them).
Once they did, they are followed to the end, as Nova: a provider whose pool is
used up serves no more.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oslo_utils import strutils

from scheduler.objects.pci import HostPciStats, PciPool
from scheduler.request.pci import PciRequest

if TYPE_CHECKING:
    from scheduler.host_state import HostState

#: Spec keys that say what Placement allocates, not what a pool is: Nova's
#: ``ignored_spec_tags`` (one list with ``ignored_pool_tags``, so ``rp_uuid`` too).
PLACEMENT_ONLY_KEYS = frozenset({'resource_class', 'traits', 'rp_uuids', 'rp_uuid'})
NO_POOLS = 'no PCI device pools known for the host'


@dataclass(frozen=True)
class NumaCells:
    """The host NUMA cells the instance was fitted to, for PCI NUMA affinity."""

    ids: frozenset[int]
    #: socket of every host cell (not only the chosen ones); None if unknown
    socket_of: Mapping[int, int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class PciFit:
    passed: bool
    reason: str | None = None
    #: pool index -> devices this fit takes (for the next instance of the request); a
    #: pool listed here that is left with none leaves the host's pools, as in Nova
    taken: Mapping[int, int] = field(default_factory=dict)


def fit_requests(stats: HostPciStats | None, requests: Sequence[PciRequest], *,
                 mappings: Mapping[str, Sequence[str]] | None = None,
                 numa: NumaCells | None = None) -> PciFit:
    """Whether ``requests`` can be served together; ``mappings`` is the allocation
    candidate's (None: no candidate), ``numa`` the chosen cells (None: no affinity)."""
    pools = stats.pools if stats is not None else ()
    # Nova's working list (pool indexes in PciDeviceStats order) and its counts.
    alive = nova_order(pools)
    free = [p.count for p in pools]
    taken: dict[int, int] = {}
    for request in requests:
        providers = placement_providers(request, mappings)
        if providers and (stats is None or not stats.names_providers):
            continue  # Placement counted them; no pool says more (module docstring)
        if stats is None:
            return PciFit(False, NO_POOLS)
        chosen = filter_pools(pools, alive, free, request, numa, providers)
        if not chosen:
            where = ' with the requested NUMA affinity' if numa is not None else ''
            return PciFit(False, f'not enough free PCI devices{where}: {request.describe()}')
        if not providers:
            wanted = request.count
            for i in chosen:
                # _decrease_pool_count: a pool that gives all it has leaves the list.
                take = min(wanted, free[i])
                free[i] -= take
                wanted -= take
                taken[i] = taken.get(i, 0) + take
                if not free[i]:
                    alive.remove(i)
                if not wanted:
                    break
        else:
            if not _one_pool_per_provider(pools, alive):
                return PciFit(False, f"PCI pools split one Placement provider's devices: "
                                     f'{request.describe()}')
            per_provider = Counter(providers)
            for i in chosen:
                take = per_provider.pop(pools[i].tags['rp_uuid'], 0)
                free[i] -= take
                taken[i] = taken.get(i, 0) + take
                if not free[i]:
                    alive.remove(i)
    return PciFit(True, taken=taken)


def nova_order(pools: Sequence[PciPool]) -> list[int]:
    """Pool indexes in the order ``PciDeviceStats.__init__`` sorts the pools: by
    the number of keys of Nova's pool dict (``PciDevicePool.to_dict``), stably."""
    return sorted(range(len(pools)), key=lambda i: len(pools[i]))


def placement_providers(request: PciRequest,
                        mappings: Mapping[str, Sequence[str]] | None) -> list[str]:
    """The providers Placement allocated the request's devices from, one per device:
    Nova's ``_get_rp_uuids_for_request``."""
    if request.alias_name is None:
        return []  # a port's request (InstancePCIRequest.source NEUTRON_PORT)
    if not mappings:
        # After a claim: the spec carries them (a comma-separated list).
        value = request.specs[0].get('rp_uuids') if request.specs else None
        return value.split(',') if value else []
    if not request.request_id:
        return []
    return [providers[0] for group, providers in mappings.items()
            if group.startswith(request.request_id) and providers]


def filter_pools(pools: Sequence[PciPool], alive: Sequence[int], free: Sequence[int],
                 request: PciRequest, numa: NumaCells | None,
                 providers: Sequence[str]) -> list[int]:
    """The pools (indexes, in order) that may serve ``request``; [] when they cannot:
    Nova's ``_filter_pools`` with ``_apply_request``'s check that some pool is left."""
    def enough(indexes: Sequence[int]) -> bool:
        return sum(free[i] for i in indexes) >= request.count

    steps: list[tuple[Callable[[list[int]], list[int]], bool]] = [
        (lambda ix: [i for i in ix if _spec_matches(pools[i], free[i], request)], True),
        (lambda ix: _numa_affine(ix, pools, free, request, numa), True),
        (lambda ix: _unrequested(ix, pools, request, 'dev_type', 'type-PF'), True),
        (lambda ix: _unrequested(ix, pools, request, 'dev_type', 'vdpa'), False),
        (lambda ix: _unrequested_remote_managed(ix, pools, request), False),
        (lambda ix: _allocated_in_placement(ix, pools, free, providers), False),
        (lambda ix: _live_migratable(ix, pools, request), True),
    ]
    indexes = list(alive)
    for step, check in steps:
        indexes = step(indexes)
        # Nova checks the count after these steps only.
        if check and not enough(indexes):
            return []
    return indexes


def _spec_matches(pool: PciPool, count: int, request: PciRequest) -> bool:
    """``_filter_pools_for_spec`` (``pci_device_prop_match``): every key of one spec
    equal to the pool's, strings lower-cased; a None value matches a pool without the key."""
    def value(key: str) -> Any:
        return count if key == 'count' else pool.get(key)

    return any(all(_lower(value(k)) == _lower(v) for k, v in spec.items()
                   if k not in PLACEMENT_ONLY_KEYS)
               for spec in request.specs)


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _numa_affine(indexes: list[int], pools: Sequence[PciPool], free: Sequence[int],
                 request: PciRequest, numa: NumaCells | None) -> list[int]:
    """``_filter_pools_for_numa_cells``: each policy tries the stricter ones first."""
    if numa is None or not numa.ids:
        return indexes

    def enough(ix: list[int]) -> bool:
        return sum(free[i] for i in ix) >= request.count

    policy = request.numa_policy or 'legacy'
    local = [i for i in indexes if pools[i].numa_node in numa.ids]
    if policy == 'required' or enough(local):
        return local
    if policy == 'socket':
        return _same_socket(indexes, pools, numa)
    # Devices whose NUMA node the host does not know serve LEGACY too.
    near = [i for i in indexes if pools[i].numa_node in numa.ids or pools[i].numa_node is None]
    if policy == 'legacy' or enough(near):
        return near
    # PREFERRED: any pool, the near ones first.
    return sorted(indexes, key=lambda i: not (pools[i].numa_node in numa.ids
                                              or pools[i].numa_node is None))


def _same_socket(indexes: list[int], pools: Sequence[PciPool], numa: NumaCells) -> list[int]:
    """``_filter_pools_for_socket_affinity``: pools on a host cell of a socket of the
    chosen cells; none when a host cell's socket is unknown."""
    if any(s is None for s in numa.socket_of.values()):
        return []
    sockets = {numa.socket_of[c] for c in numa.ids if c in numa.socket_of}
    allowed = {c for c, s in numa.socket_of.items() if s in sockets}
    return [i for i in indexes if pools[i].numa_node in allowed]


def _unrequested(indexes: list[int], pools: Sequence[PciPool], request: PciRequest,
                 key: str, value: str) -> list[int]:
    """``_filter_pools_for_unrequested_pfs`` and ``..._vdpa_devices``: such pools only
    for a request one of whose specs names the type (exactly, as Nova compares it)."""
    if any(spec.get(key) == value for spec in request.specs):
        return indexes
    return [i for i in indexes if pools[i].get(key) != value]


def _unrequested_remote_managed(indexes: list[int], pools: Sequence[PciPool],
                                request: PciRequest) -> list[int]:
    """``_filter_pools_for_unrequested_remote_managed_devices`` (oslo's bool_from_string
    on both sides: 'yes', '1', 'on' are true)."""
    if any(strutils.bool_from_string(spec.get('remote_managed')) for spec in request.specs):
        return indexes
    return [i for i in indexes
            if not strutils.bool_from_string(pools[i].get('remote_managed'))]


def _allocated_in_placement(indexes: list[int], pools: Sequence[PciPool], free: Sequence[int],
                            providers: Sequence[str]) -> list[int]:
    """``_filter_pools_based_on_placement_allocation``: the pools of the allocated
    providers that still have what Placement allocated from them."""
    if not providers:
        return indexes
    wanted = Counter(providers)
    return [i for i in indexes
            if (rp := pools[i].tags.get('rp_uuid')) is not None and rp in wanted
            and free[i] >= wanted[rp]]


def _live_migratable(indexes: list[int], pools: Sequence[PciPool],
                     request: PciRequest) -> list[int]:
    """``_filter_pools_for_live_migratable_devices``: when every spec says 'true' (or
    every spec 'false'), only pools tagged so."""
    for wanted in ('true', 'false'):
        if all(spec.get('live_migratable') == wanted for spec in request.specs):
            return [i for i in indexes if pools[i].get('live_migratable') == wanted]
    return indexes


def _one_pool_per_provider(pools: Sequence[PciPool], alive: Sequence[int]) -> bool:
    """``_assert_one_pool_per_rp_uuid``: Nova refuses to follow Placement's allocation
    when one provider's devices are in several of the host's pools."""
    seen: set[str] = set()
    for i in alive:
        rp = pools[i].tags.get('rp_uuid')
        if rp is not None:
            if rp in seen:
                return False
            seen.add(rp)
    return True


def use_devices(host_state: HostState, taken: Mapping[int, int]) -> None:
    """Take ``taken`` (a :class:`PciFit`'s) out of the host's pools; for HostState.consume."""
    if host_state.pci_stats is not None:
        host_state.pci_stats = host_state.pci_stats.minus(taken)
