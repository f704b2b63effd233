"""A catalog source read on a background thread every ``interval`` seconds.

The compute-API sync and the cell-database sync share this loop: start once,
let callers wait for the first attempt (successful or not), keep going after
any error in one round, stop within one wait.
"""
from __future__ import annotations

import logging
import threading

LOG = logging.getLogger(__name__)


class PeriodicSync:
    """Subclasses implement :meth:`sync_once`; ``thread_name`` and ``label`` name them."""

    thread_name = 'catalog-sync'
    label = 'catalog sync'

    def __init__(self, *, interval: float):
        self._interval = interval
        self._stop = threading.Event()
        self._first_attempt = threading.Event()
        self._thread: threading.Thread | None = None

    def sync_once(self) -> bool:
        raise NotImplementedError

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def wait_for_first_attempt(self, timeout: float) -> bool:
        """Whether the first read (successful or not) finished within ``timeout`` seconds."""
        return self._first_attempt.wait(timeout)

    def stop(self, timeout: float | None = None) -> None:
        """Stop the loop; a read in flight ends within its own timeouts."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync_once()
            except Exception:  # noqa: BLE001 - the loop must outlive any bug in one round
                LOG.exception('%s: unexpected error; trying again next interval', self.label)
            finally:
                self._first_attempt.set()
            self._stop.wait(self._interval)
