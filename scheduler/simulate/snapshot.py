"""A read-only snapshot of a Placement, saved as JSON and replayed into the embedded one.

``take_snapshot`` only ever sends GET requests (the source is a production
Placement: a capacity question must not change it). Per provider it records
what the scheduler's decisions depend on: the tree (parent, root), inventories,
usages, traits and aggregates. Existing allocations are kept as usage per
provider, not per consumer: the scheduler only ever sees usage, and one
consumer per provider keeps a replay of thousands of instances cheap.

``replay`` writes a snapshot into an (empty) embedded Placement. A provider's
usage may break its own inventory's rules (summed usage above ``max_unit``,
not a multiple of ``step_size``, or above capacity after an inventory was
shrunk), so the usage is written against a permissive inventory first and the
real inventory is put back afterwards: Placement accepts an inventory below
current usage, as it does for the real cloud.
"""
from __future__ import annotations

import json
import uuid as uuidlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.exceptions import ConfigurationError
from scheduler.objects.spec import Aggregate
from scheduler.simulate.cloud import SIMULATION_NAMESPACE

if TYPE_CHECKING:
    from placement_client.api import PlacementAPI
    from placement_client.client import PlacementClient

FORMAT_VERSION = 1
#: Owner of the consumers that carry a snapshot's usage in the replay.
USAGE_PROJECT_ID = '00000000000000000000000000005a95'
USAGE_USER_ID = '00000000000000000000000000005a95'
_INVENTORY_KEYS = ('total', 'reserved', 'min_unit', 'max_unit', 'step_size',
                   'allocation_ratio')


class SnapshotError(ConfigurationError):
    """A snapshot file that cannot be read, or a snapshot that cannot be taken or replayed."""


@dataclass(frozen=True)
class ProviderSnapshot:
    uuid: str
    name: str
    generation: int
    parent_provider_uuid: str | None
    root_provider_uuid: str
    #: resource class -> Placement's inventory record (total, reserved, ...)
    inventories: Mapping[str, Mapping[str, Any]]
    usages: Mapping[str, int] = field(default_factory=dict)
    traits: tuple[str, ...] = ()
    aggregates: tuple[str, ...] = ()

    def capacity(self, resource_class: str) -> int:
        inv = self.inventories.get(resource_class)
        if inv is None:
            return 0
        return int((inv['total'] - inv['reserved']) * inv['allocation_ratio'])

    def free(self, resource_class: str) -> int:
        return max(0, self.capacity(resource_class) - self.usages.get(resource_class, 0))


@dataclass(frozen=True)
class CloudSnapshot:
    providers: tuple[ProviderSnapshot, ...]
    #: Nova host aggregates (names, metadata, member hosts): Placement does not know
    #: them, so they come from the synthetic cloud or stay empty for a real one.
    nova_aggregates: tuple[Aggregate, ...] = ()
    source: str = ''

    def provider(self, name: str) -> ProviderSnapshot:
        for p in self.providers:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def roots(self) -> tuple[ProviderSnapshot, ...]:
        return tuple(p for p in self.providers if p.parent_provider_uuid is None)


def usage_consumer(provider_uuid: str) -> str:
    """The consumer that carries one provider's snapshot usage in the replay."""
    return str(uuidlib.uuid5(SIMULATION_NAMESPACE, f'snapshot-usage/{provider_uuid}'))


# Serialisation (pure) ------------------------------------------------------------------


def to_dict(snapshot: CloudSnapshot) -> dict[str, Any]:
    return {
        'format_version': FORMAT_VERSION,
        'source': snapshot.source,
        'providers': [{
            'uuid': p.uuid, 'name': p.name, 'generation': p.generation,
            'parent_provider_uuid': p.parent_provider_uuid,
            'root_provider_uuid': p.root_provider_uuid,
            'inventories': {rc: dict(inv) for rc, inv in sorted(p.inventories.items())},
            'usages': dict(sorted(p.usages.items())),
            'traits': list(p.traits), 'aggregates': list(p.aggregates),
        } for p in snapshot.providers],
        'nova_aggregates': [{
            'id': a.id, 'uuid': a.uuid, 'name': a.name, 'hosts': list(a.hosts),
            'metadata': dict(a.metadata)} for a in snapshot.nova_aggregates],
    }


def _require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise SnapshotError(f'{where}: "{key}" is missing')
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise SnapshotError(f'{where}: "{key}" has the wrong type ({type(value).__name__})')
    return value


def _inventory(rc: str, record: Any, where: str) -> dict[str, Any]:
    if not isinstance(record, Mapping):
        raise SnapshotError(f'{where}: inventory of {rc} is not a mapping')
    out: dict[str, Any] = {}
    for key in _INVENTORY_KEYS:
        kind = (int, float) if key == 'allocation_ratio' else int
        out[key] = _require(record, key, kind, f'{where}: inventory of {rc}')
    return out


def _provider(data: Any, index: int) -> ProviderSnapshot:
    where = f'providers[{index}]'
    if not isinstance(data, Mapping):
        raise SnapshotError(f'{where} is not a mapping')
    parent = data.get('parent_provider_uuid')
    if parent is not None and not isinstance(parent, str):
        raise SnapshotError(f'{where}: "parent_provider_uuid" must be a string or null')
    inventories = _require(data, 'inventories', Mapping, where)
    usages = data.get('usages', {})
    if not isinstance(usages, Mapping) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in usages.values()):
        raise SnapshotError(f'{where}: "usages" must map resource classes to counts')
    traits = data.get('traits', [])
    aggregates = data.get('aggregates', [])
    for key, value in (('traits', traits), ('aggregates', aggregates)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SnapshotError(f'{where}: "{key}" must be a list of strings')
    return ProviderSnapshot(
        uuid=_require(data, 'uuid', str, where), name=_require(data, 'name', str, where),
        generation=data.get('generation', 0) if isinstance(data.get('generation'), int) else 0,
        parent_provider_uuid=parent,
        root_provider_uuid=data.get('root_provider_uuid') or _require(data, 'uuid', str, where),
        inventories={rc: _inventory(rc, inv, where) for rc, inv in inventories.items()},
        usages=dict(usages), traits=tuple(traits), aggregates=tuple(aggregates))


def from_dict(data: Any) -> CloudSnapshot:
    """Parse a saved snapshot; SnapshotError names the first problem found."""
    if not isinstance(data, Mapping):
        raise SnapshotError('a snapshot is a JSON object')
    version = data.get('format_version')
    if version != FORMAT_VERSION:
        raise SnapshotError(f'unsupported snapshot format_version {version!r} '
                            f'(this version reads {FORMAT_VERSION})')
    providers_data = _require(data, 'providers', list, 'snapshot')
    providers = tuple(_provider(p, i) for i, p in enumerate(providers_data))
    uuids = [p.uuid for p in providers]
    if len(set(uuids)) != len(uuids):
        raise SnapshotError('snapshot: duplicate provider uuids')
    known = set(uuids)
    for p in providers:
        if p.parent_provider_uuid is not None and p.parent_provider_uuid not in known:
            raise SnapshotError(f'provider {p.name}: parent {p.parent_provider_uuid} '
                                'is not in the snapshot')
    aggregates = []
    for i, a in enumerate(data.get('nova_aggregates', [])):
        where = f'nova_aggregates[{i}]'
        if not isinstance(a, Mapping):
            raise SnapshotError(f'{where} is not a mapping')
        aggregates.append(Aggregate(
            id=a.get('id', i + 1), uuid=_require(a, 'uuid', str, where),
            name=_require(a, 'name', str, where), hosts=list(a.get('hosts', [])),
            metadata={str(k): str(v) for k, v in dict(a.get('metadata', {})).items()}))
    return CloudSnapshot(providers=providers, nova_aggregates=tuple(aggregates),
                         source=str(data.get('source', '')))


def save(snapshot: CloudSnapshot, path: str) -> None:
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(to_dict(snapshot), f, indent=1, sort_keys=True)
        f.write('\n')


def load(path: str) -> CloudSnapshot:
    try:
        with open(path, encoding='utf-8') as f:
            data = json.load(f)
    except OSError as e:
        raise SnapshotError(f'cannot read snapshot {path}: {e.strerror or e}') from None
    except ValueError as e:
        raise SnapshotError(f'snapshot {path} is not JSON: {e}') from None
    return from_dict(data)


# Reading a Placement (GET only) --------------------------------------------------------


def _get(client: PlacementAPI, url: str, params: Any = None) -> dict[str, Any]:
    from placement_client.client import MIN_MICROVERSION, error_from_response

    # The only request this module sends to a source Placement: it is read-only by design.
    response = client.request('GET', url, microversion=MIN_MICROVERSION, params=params)
    if response.status_code != 200:
        raise error_from_response(response, method='GET', url=url)
    return response.json()


def take_snapshot(client: PlacementAPI, *, source: str = 'placement',
                  nova_aggregates: Sequence[Aggregate] = ()) -> CloudSnapshot:
    """Read every provider of the Placement ``client`` talks to; sends GET requests only."""
    providers = []
    for rp in _get(client, '/resource_providers')['resource_providers']:
        base = f'/resource_providers/{rp["uuid"]}'
        inventories = _get(client, f'{base}/inventories')['inventories']
        usages = _get(client, f'{base}/usages')['usages']
        traits = _get(client, f'{base}/traits')['traits']
        aggregates = _get(client, f'{base}/aggregates')['aggregates']
        providers.append(ProviderSnapshot(
            uuid=rp['uuid'], name=rp['name'], generation=rp['generation'],
            parent_provider_uuid=rp.get('parent_provider_uuid'),
            root_provider_uuid=rp.get('root_provider_uuid') or rp['uuid'],
            inventories={rc: {k: inv[k] for k in _INVENTORY_KEYS}
                         for rc, inv in inventories.items()},
            usages={rc: n for rc, n in usages.items() if n},
            traits=tuple(sorted(traits)), aggregates=tuple(sorted(aggregates))))
    return CloudSnapshot(providers=tuple(sorted(providers, key=lambda p: p.name)),
                         nova_aggregates=tuple(nova_aggregates), source=source)


# Replaying into the embedded Placement ---------------------------------------------------


def _depth(p: ProviderSnapshot, parents: Mapping[str, str | None]) -> int:
    d, parent = 0, p.parent_provider_uuid
    while parent is not None:
        d, parent = d + 1, parents.get(parent)
    return d


def _permissive(inv: Mapping[str, Any], used: int) -> dict[str, Any]:
    """An inventory that takes ``used`` as one allocation, whatever the real rules are."""
    total = max(int(inv['total']), used + int(inv['reserved']), 1)
    return {'total': total, 'reserved': int(inv['reserved']), 'min_unit': 1,
            'max_unit': total, 'step_size': 1,
            'allocation_ratio': max(float(inv['allocation_ratio']), 1.0)}


def replay(client: PlacementClient, snapshot: CloudSnapshot) -> None:
    """Write ``snapshot`` into the (empty) Placement of ``client``: providers parents first,
    then each provider's usage as one consumer (see the module docstring)."""
    from placement_client.models import AllocationRequest
    from scheduler.simulate import seed

    parents = {p.uuid: p.parent_provider_uuid for p in snapshot.providers}
    for trait in sorted({t for p in snapshot.providers for t in p.traits}):
        seed.ensure_trait(client, trait)
    for p in sorted(snapshot.providers, key=lambda p: (_depth(p, parents), p.name)):
        used = {rc: n for rc, n in p.usages.items() if n}
        unknown = set(used) - set(p.inventories)
        if unknown:
            raise SnapshotError(f'provider {p.name}: usage of {sorted(unknown)} '
                                'without an inventory')
        first = {rc: (_permissive(inv, used.get(rc, 0)) if rc in used else dict(inv))
                 for rc, inv in p.inventories.items()}
        seed.create_provider(client, name=p.name, uuid=p.uuid,
                             parent_uuid=p.parent_provider_uuid, inventories=first,
                             traits=p.traits, aggregates=p.aggregates)
        if not used:
            continue
        client.put_allocations(usage_consumer(p.uuid),
                               AllocationRequest(allocations={p.uuid: used}),
                               project_id=USAGE_PROJECT_ID, user_id=USAGE_USER_ID,
                               consumer_generation=None)
        seed.set_inventories(client, p.uuid, {rc: dict(inv)
                                              for rc, inv in p.inventories.items()})


def usage_consumers(snapshot: CloudSnapshot) -> frozenset[str]:
    return frozenset(usage_consumer(p.uuid) for p in snapshot.providers if any(p.usages.values()))
