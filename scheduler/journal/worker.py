"""A worker's journal, opened at its start with what earlier workers left in it."""
from __future__ import annotations

import logging
import pathlib
from typing import Any

from scheduler.journal.log import SUFFIX, JournalFile, journal_name, take_over, worker_index_of
from scheduler.journal.requests import RequestJournal

LOG = logging.getLogger(__name__)


def open_worker_journal(directory: str, *, host: str, index: int, workers: int,
                        fsync: bool, compact_bytes: int, lock_wait: float
                        ) -> tuple[RequestJournal, dict[int, dict[str, Any]]]:
    """Worker ``index``'s journal, and the records still live in it: those of the
    worker it replaces (killed, or the whole service stopped), plus, for worker 0,
    those of workers the service no longer runs. Raises ``JournalError``."""
    log = JournalFile(directory, journal_name(host, index), fsync=fsync,
                      compact_bytes=compact_bytes)
    records = log.open(wait=lock_wait)
    journal = RequestJournal(log)
    if index == 0:
        for path in sorted(pathlib.Path(directory).glob(f'*{SUFFIX}')):
            other = worker_index_of(path, host)
            if other is None or other < max(workers, 1):
                continue

            def adopt(live: dict[int, dict[str, Any]]) -> None:
                # Made this journal's own before the other file goes.
                for record in live.values():
                    records[journal.keep(record)] = record

            if take_over(path, adopt):
                LOG.info('took over the claims journal of worker %d, which this service no '
                         'longer runs', other)
    if records:
        LOG.info('claims journal %s holds %d claim(s) of requests never answered',
                 log.path, len(records))
    return journal, records
