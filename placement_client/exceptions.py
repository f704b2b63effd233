"""Typed errors of the Placement client. The client never returns None for failure."""
from __future__ import annotations


class PlacementConfigError(Exception):
    """The client's options cannot work (no auth plugin, one that does not load,
    invalid session or adapter options); raised while the client is built."""


class PlacementError(Exception):
    """Placement answered with an error the caller has to handle.

    ``status`` is the HTTP status, ``code`` Placement's error code (for
    example ``placement.concurrent_update``) and ``detail`` its human text.
    """

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None,
                 detail: str | None = None, request_id: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.detail = detail
        self.request_id = request_id


class PlacementUnavailable(PlacementError):
    """Placement could not be reached or kept failing (connection, timeout, 5xx)
    after the configured retries. ``attempts`` says how many were made."""

    def __init__(self, message: str, *, attempts: int, last_error: str = '', **kwargs):
        super().__init__(message, **kwargs)
        self.attempts = attempts
        #: What the last attempt met, in words that quote nothing ('timed out',
        #: 'connection failed'; empty for an HTTP status, which ``status`` has).
        self.last_error = last_error


class PlacementVersionTooOld(PlacementError):
    """Placement does not offer the microversion this client needs."""


class PlacementAuthError(PlacementError):
    """Authentication or authorization towards Placement failed (401/403, no plugin)."""


class ClaimConflict(PlacementError):
    """A 409 while writing allocations."""


class ProviderGenerationConflict(ClaimConflict):
    """A resource provider changed concurrently; the same claim may be retried."""


class ConsumerGenerationConflict(ClaimConflict):
    """The consumer's generation is not the one we sent.

    ``expected`` is the generation Placement holds (``None`` if it holds none),
    parsed from the detail text when Placement gives it.
    """

    def __init__(self, message: str, *, expected: int | None = None,
                 sent: int | None = None, **kwargs):
        super().__init__(message, **kwargs)
        self.expected = expected
        self.sent = sent


class CapacityExceeded(ClaimConflict):
    """The allocation would exceed a provider's capacity (Placement's 409
    ``placement.undefined_code`` "... would violate inventory constraints")."""


class BadRequest(PlacementError):
    """Placement rejected the request as malformed (400) — a bug on our side or
    an unknown trait/resource class; ``detail`` carries Placement's words."""


class NotFound(PlacementError):
    """404 for a resource this client expected to exist."""
