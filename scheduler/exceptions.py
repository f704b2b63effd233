"""Typed errors of the scheduler.

Two of them travel back to the caller over RPC and must be rebuilt there as
Nova's own classes: oslo.messaging names a failure by its class's
``__module__`` and ``__name__`` and rebuilds it with ``cls(*args, **kwargs)``,
and nova-conductor only accepts modules listed in ``allowed_remote_exmods``
(``nova.exception``).  So those classes claim to live in ``nova.exception``
and carry the kwargs Nova's constructors accept.
"""
from __future__ import annotations


class SchedulerError(Exception):
    """Base of every error raised by the scheduler itself."""


class ConfigurationError(SchedulerError):
    """The configuration cannot work; raised at start-up, naming the option."""


class PluginNotFound(ConfigurationError):
    def __init__(self, option: str, name: str, available: list[str]):
        self.option = option
        self.name = name
        super().__init__(
            f'{option}: no plugin named {name!r}; available: {", ".join(sorted(available))}')


class _NovaWireError(SchedulerError):
    """An error whose wire form is a class of ``nova.exception``."""

    msg_fmt = 'An unknown exception occurred.'
    code = 500

    def __init__(self, message: str | None = None, **kwargs):
        kwargs.setdefault('code', self.code)
        self.kwargs = kwargs
        if message is None:
            message = self.msg_fmt % kwargs
        super().__init__(message)


class NoValidHost(_NovaWireError):
    """No host could take the request; ``reason`` says which stage emptied the list."""

    msg_fmt = 'No valid host was found. %(reason)s'

    def __init__(self, message: str | None = None, **kwargs):
        kwargs.setdefault('reason', '')
        super().__init__(message, **kwargs)

    @property
    def reason(self) -> str:
        return self.kwargs['reason']


class InvalidInput(_NovaWireError):
    """The caller sent arguments the scheduler will not act on."""

    msg_fmt = 'Invalid input received: %(reason)s'
    code = 400

    def __init__(self, message: str | None = None, **kwargs):
        kwargs.setdefault('reason', '')
        super().__init__(message, **kwargs)

    @property
    def reason(self) -> str:
        return self.kwargs['reason']


# The wire identity (see the module docstring).
NoValidHost.__module__ = 'nova.exception'
InvalidInput.__module__ = 'nova.exception'

#: Errors that are an answer, not a fault: oslo.messaging logs them without a traceback.
EXPECTED_RPC_ERRORS = (NoValidHost, InvalidInput)


class CatalogError(SchedulerError):
    """The host catalog (hosts file, casts) could not be read or applied."""


class RequestTranslationError(SchedulerError):
    """A RequestSpec cannot be expressed as a Placement query.

    Raised before anything reaches Placement; the manager turns it into
    :class:`InvalidInput` for the caller.
    """


class RequestFilterFailed(SchedulerError):
    """A request filter decided that no host can serve this request (Nova's name)."""


class FilterError(SchedulerError):
    """A host filter raised instead of answering; names the filter (and host, if known).

    The original exception is chained as ``__cause__`` so its traceback survives.
    """

    def __init__(self, filter_name: str, detail: str, host: str | None = None):
        self.filter_name = filter_name
        self.host = host
        self.detail = detail
        where = f' on host {host}' if host else ''
        super().__init__(f'filter {filter_name} failed{where}: {detail}')


class WeigherError(SchedulerError):
    """A host weigher raised instead of answering; names the weigher."""

    def __init__(self, weigher_name: str, detail: str):
        self.weigher_name = weigher_name
        self.detail = detail
        super().__init__(f'weigher {weigher_name} failed: {detail}')


class HostDataError(SchedulerError):
    """Host NUMA topology or PCI pool data (a cell database row, a hosts file
    entry) is not what Nova writes; the message names the field."""
