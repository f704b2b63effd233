"""Build test and simulation clouds in a real Placement, over HTTP.

Placement has no bulk API for providers, inventories, traits or aggregates,
and every write bumps the provider generation, so these helpers chain the
generation from each answer into the next write (PUT traits and PUT aggregates
replace the whole set and need the current generation).
Everything goes through a :class:`PlacementClient`, so seeding exercises the
same client, headers and error mapping as the scheduler.
"""
from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterable, Mapping
from typing import Any

import requests

from placement_client.client import MIN_MICROVERSION, PlacementClient, error_from_response
from placement_client.models import AllocationRequest

#: Keys Placement accepts for one inventory record.
INVENTORY_FIELDS = frozenset(
    {'total', 'reserved', 'allocation_ratio', 'min_unit', 'max_unit', 'step_size'})

InventorySpec = Mapping[str, 'int | Mapping[str, Any]']


def _call(client: PlacementClient, method: str, url: str, *, ok: tuple[int, ...],
          json: Any = None) -> requests.Response:
    response = client.request(method, url, microversion=MIN_MICROVERSION, json=json)
    if response.status_code not in ok:
        raise error_from_response(response, method=method, url=url)
    return response


def normalize_inventories(inventories: InventorySpec) -> dict[str, dict[str, Any]]:
    """``{rc: 8}`` or ``{rc: {'total': 8, ...}}`` -> Placement's inventory records (pure)."""
    records: dict[str, dict[str, Any]] = {}
    for rc, spec in inventories.items():
        if isinstance(spec, bool):
            raise ValueError(f'inventory of {rc}: expected an int or a dict, got {spec!r}')
        if isinstance(spec, int):
            records[rc] = {'total': spec}
            continue
        unknown = set(spec) - INVENTORY_FIELDS
        if unknown:
            raise ValueError(f'inventory of {rc}: unknown field(s) {sorted(unknown)}')
        if 'total' not in spec:
            raise ValueError(f'inventory of {rc}: "total" is required')
        records[rc] = dict(spec)
    return records


def ensure_trait(client: PlacementClient, name: str) -> None:
    """Make the trait exist: create a CUSTOM_ trait, check that a standard one is known."""
    if name.startswith('CUSTOM_'):
        _call(client, 'PUT', f'/traits/{name}', ok=(201, 204))
    else:
        _call(client, 'GET', f'/traits/{name}', ok=(204,))


def ensure_resource_class(client: PlacementClient, name: str) -> None:
    """Make a CUSTOM_ resource class exist (standard classes always do)."""
    if name.startswith('CUSTOM_'):
        _call(client, 'PUT', f'/resource_classes/{name}', ok=(201, 204))


def provider_generation(client: PlacementClient, rp_uuid: str) -> int:
    return _call(client, 'GET', f'/resource_providers/{rp_uuid}', ok=(200,)).json()['generation']


def set_inventories(client: PlacementClient, rp_uuid: str, inventories: InventorySpec, *,
                    generation: int | None = None) -> int:
    """Replace the provider's inventories; returns the new provider generation."""
    records = normalize_inventories(inventories)
    for rc in records:
        ensure_resource_class(client, rc)
    if generation is None:
        generation = provider_generation(client, rp_uuid)
    body = {'resource_provider_generation': generation, 'inventories': records}
    response = _call(client, 'PUT', f'/resource_providers/{rp_uuid}/inventories', ok=(200,),
                     json=body)
    return response.json()['resource_provider_generation']


def set_traits(client: PlacementClient, rp_uuid: str, traits: Iterable[str], *,
               generation: int | None = None) -> int:
    """Replace the provider's traits (creating CUSTOM_ ones); returns the new generation."""
    names = sorted(set(traits))
    for name in names:
        ensure_trait(client, name)
    if generation is None:
        generation = provider_generation(client, rp_uuid)
    body = {'resource_provider_generation': generation, 'traits': names}
    response = _call(client, 'PUT', f'/resource_providers/{rp_uuid}/traits', ok=(200,),
                     json=body)
    return response.json()['resource_provider_generation']


def set_aggregates(client: PlacementClient, rp_uuid: str, aggregates: Iterable[str], *,
                   generation: int | None = None) -> int:
    """Replace the provider's aggregates; returns the new provider generation."""
    if generation is None:
        generation = provider_generation(client, rp_uuid)
    body = {'resource_provider_generation': generation, 'aggregates': sorted(set(aggregates))}
    response = _call(client, 'PUT', f'/resource_providers/{rp_uuid}/aggregates', ok=(200,),
                     json=body)
    return response.json()['resource_provider_generation']


def create_provider(client: PlacementClient, *, name: str, uuid: str | None = None,
                    parent_uuid: str | None = None, inventories: InventorySpec | None = None,
                    traits: Iterable[str] = (), aggregates: Iterable[str] = ()) -> str:
    """Create a provider with its inventories, traits and aggregates; returns its uuid."""
    rp_uuid = uuid or str(uuidlib.uuid4())
    body: dict[str, Any] = {'name': name, 'uuid': rp_uuid}
    if parent_uuid:
        body['parent_provider_uuid'] = parent_uuid
    generation = _call(client, 'POST', '/resource_providers', ok=(200,),
                       json=body).json()['generation']
    if inventories:
        generation = set_inventories(client, rp_uuid, inventories, generation=generation)
    traits = tuple(traits)
    if traits:
        generation = set_traits(client, rp_uuid, traits, generation=generation)
    aggregates = tuple(aggregates)
    if aggregates:
        set_aggregates(client, rp_uuid, aggregates, generation=generation)
    return rp_uuid


def allocate(client: PlacementClient, consumer: str,
             allocations: Mapping[str, Mapping[str, int]], project_id: str,
             user_id: str) -> None:
    """Give ``consumer`` exactly these allocations (new or existing consumer)."""
    current = client.get_allocations(consumer)
    client.put_allocations(
        consumer, AllocationRequest(allocations={rp: dict(r) for rp, r in allocations.items()}),
        project_id=project_id, user_id=user_id,
        consumer_generation=current.consumer_generation)


def delete_all(client: PlacementClient) -> int:
    """Delete every allocation and provider (children before parents); returns providers deleted.

    Traits, resource classes and aggregate uuids stay: Placement keeps them
    independently of providers, and recreating them is idempotent.
    """
    providers = client.get_resource_providers()
    consumers: set[str] = set()
    for rp in providers:
        body = _call(client, 'GET', f'/resource_providers/{rp.uuid}/allocations',
                     ok=(200,)).json()
        consumers.update(body.get('allocations', {}))
    for consumer in sorted(consumers):
        client.delete_allocations(consumer)
    parents = {rp.uuid: rp.parent_provider_uuid for rp in providers}

    def depth(rp_uuid: str) -> int:
        d, parent = 0, parents.get(rp_uuid)
        while parent is not None:
            d, parent = d + 1, parents.get(parent)
        return d

    for rp_uuid in sorted(parents, key=depth, reverse=True):
        _call(client, 'DELETE', f'/resource_providers/{rp_uuid}', ok=(204, 404))
    return len(parents)
