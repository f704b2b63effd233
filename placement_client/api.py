"""PlacementAPI: what a caller may rely on of a Placement client.

The calls the scheduler makes, and nothing more. :class:`~.client.PlacementClient`
is the implementation, a test's fake Placement another. The scheduler's code
takes a Placement client as this Protocol, not as the class, so mypy checks
every client handed to it against these signatures (``tox -e mypy``) and a
fake needs no more than they name.

Every method raises the errors of :mod:`placement_client.exceptions` for
failure (``PlacementUnavailable`` once the retries are spent,
``PlacementAuthError``, ``PlacementError`` and its subclasses for an answer
that says no); none of them returns None for failure.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import requests

    from placement_client.models import (
        AllocationRequest,
        Candidates,
        ConsumerAllocations,
        ProviderSummary,
        ResourceProvider,
    )
    from placement_client.query import AllocationCandidatesQuery


class PlacementAPI(Protocol):
    """The Placement calls a caller may rely on; thread-safe."""

    def request(self, method: str, url: str, *, microversion: str | None,
                json: Any = None, params: Any = None,
                request_id: str | None = None) -> requests.Response:
        """One logical call, retried on transport errors and 5xx; the final
        response whatever its status below 500 except 401/403 (the caller maps it)."""

    def negotiate(self) -> str:
        """Placement's max microversion (``GET /``); PlacementVersionTooOld below 1.36."""

    def get_allocation_candidates(self, query: AllocationCandidatesQuery, *,
                                  request_id: str | None = None) -> Candidates: ...

    def get_allocations(self, consumer_uuid: str, *,
                        request_id: str | None = None) -> ConsumerAllocations: ...

    def put_allocations(self, consumer_uuid: str, allocation_request: AllocationRequest, *,
                        project_id: str | None, user_id: str | None,
                        consumer_generation: int | None, microversion: str = ...,
                        consumer_type: str = ..., request_id: str | None = None) -> None:
        """Replace the consumer's allocations with ``allocation_request`` (a claim).

        A ``project_id`` or ``user_id`` of None is sent as it is: Placement
        refuses it (BadRequest)."""

    def delete_allocations(self, consumer_uuid: str, *,
                           request_id: str | None = None) -> bool:
        """True when allocations were deleted, False when the consumer had none."""

    def get_resource_providers(self, *, name: str | None = None, in_tree: str | None = None,
                               request_id: str | None = None) -> list[ResourceProvider]: ...

    def get_provider_aggregates(self, provider_uuid: str, *,
                                request_id: str | None = None) -> list[str]:
        """The aggregate uuids of a provider; [] for an unknown provider."""

    def get_provider_summaries(self, root_uuid: str, *,
                               request_id: str | None = None) -> dict[str, ProviderSummary]:
        """Summaries of every provider in the tree rooted at ``root_uuid``, as
        ``GET /allocation_candidates`` reports them; {} for an unknown root."""
