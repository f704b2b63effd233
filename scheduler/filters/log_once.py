"""Log a message once per key (per host, per bad value) for the life of a filter.

Filters judge every host on every request. A fact worth a WARNING, such as
"the host catalog has no I/O statistics for this host", would otherwise
repeat thousands of times an hour and drown the log. The plugin loader builds
each filter once per service process, so a registry held by the filter
instance means "once per key per process".
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Hashable

# Bounds the memory a long-running process spends on remembered keys; past it
# the registry starts again (a repeated warning beats unbounded growth).
MAX_KEYS = 10_000


class LogOnce:
    """Thread-safe: requests are filtered on several RPC threads at once."""

    def __init__(self, logger: logging.Logger, *, max_keys: int = MAX_KEYS):
        self._logger = logger
        self._max_keys = max_keys
        self._seen: set[Hashable] = set()
        self._lock = threading.Lock()

    def first_time(self, key: Hashable) -> bool:
        """True the first time ``key`` is seen (and remembers it)."""
        with self._lock:
            if key in self._seen:
                return False
            if len(self._seen) >= self._max_keys:
                self._seen.clear()
            self._seen.add(key)
            return True

    def warning(self, key: Hashable, msg: str, *args: object) -> None:
        if self.first_time(key):
            self._logger.warning(msg, *args)
