"""When a plugin's column-wise hook may stand in for its per-host methods.

Built-in filters and weighers offer a hook that judges every row of a
:class:`~scheduler.host_table.HostTable` at once, written to agree with their
per-host method. An operator's subclass that overrides the per-host method
(say, a ComputeFilter with an extra rule) would silently lose its change if
the parent's hook still ran, so a hook counts only when no per-host method is
overridden below the class that defines the hook.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any


def _owner(cls: type, name: str) -> type | None:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass
    return None


def trusted_hook(plugin: Any, hook: str, base: type,
                 per_host: Sequence[str]) -> Callable[..., Any] | None:
    """``plugin``'s bound ``hook``, or None when the per-host path must run."""
    cls: type = type(plugin)
    if not _trusted(cls, hook, base, tuple(per_host)):
        return None
    return getattr(plugin, hook)


@functools.lru_cache(maxsize=1024)
def _trusted(cls: type, hook: str, base: type, per_host: tuple[str, ...]) -> bool:
    owner = _owner(cls, hook)
    if owner is None or owner is base:
        return False
    for name in per_host:
        defined_in = _owner(cls, name)
        if defined_in is not None and defined_in is not owner and issubclass(defined_in, owner):
            return False
    return True
