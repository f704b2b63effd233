"""``scheduler-service``: run the scheduler RPC service.

``[scheduler] workers`` processes consume from the same ``scheduler`` queue
(any number of machines can do the same on one RabbitMQ). With more than one
worker this process supervises them: a worker that dies is started again,
SIGTERM is passed on and each worker finishes its calls in flight within
``[DEFAULT] graceful_shutdown_timeout`` before exiting.
"""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
import time

from oslo_config import cfg
from oslo_log import log as oslo_logging

from scheduler import conf as scheduler_conf
from scheduler import exceptions as exc
from scheduler.catalog.nova_sync import reads_service_states
from scheduler.catalog.shared_provider_reads import SharedProviderReads
from scheduler.catalog.shared_services import SharedReads
from scheduler.conf.scheduler import provider_view_on
from scheduler.memory import heap
from scheduler.provider_view.siblings import ClaimsBoard

LOG = logging.getLogger(__name__)

EXIT_CONFIG = 2
# A worker that dies sooner than this after its start is restarted only after a pause.
_MIN_WORKER_LIFETIME = 5.0
# prctl(2): the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1
# The indexes of the compute services reader and of the provider view's reader
# among the supervisor's children.
_READER = -1
_PROVIDER_READER = -2
_KINDS = {_READER: 'compute services reader', _PROVIDER_READER: 'provider view reader'}


def run_worker(conf: cfg.ConfigOpts, worker_index: int = 0,
               claims_board: ClaimsBoard | None = None,
               service_reads: SharedReads | None = None,
               provider_reads: SharedProviderReads | None = None) -> int:
    """Serve until SIGTERM/SIGINT, then drain in-flight calls; returns the exit code."""
    from scheduler.service import SchedulerService  # after fork: own transport, threads

    # Before any thread of the worker's starts (scheduler/memory/heap.py says why).
    heap.limit_arenas()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        service = SchedulerService(conf, worker_index=worker_index,
                                   claims_board=claims_board, service_reads=service_reads,
                                   provider_reads=provider_reads)
    except exc.ConfigurationError as e:
        LOG.error('cannot start: %s', e)
        return EXIT_CONFIG
    # Start-up (the hosts file above all) leaves free heap pages behind: given
    # back, they stop counting in an idle worker's resident size (calls fault
    # in again what they use).
    heap.release_free_memory()
    service.start()
    LOG.info('worker %d serving', os.getpid())
    stop.wait()
    LOG.info('worker %d stopping: finishing calls in flight', os.getpid())
    service.stop()
    waiter = threading.Thread(target=service.wait, daemon=True)
    waiter.start()
    waiter.join(conf.graceful_shutdown_timeout or None)
    if waiter.is_alive():
        LOG.warning('calls still in flight after %ss; exiting anyway',
                    conf.graceful_shutdown_timeout)
    service.transport.cleanup()
    return 0


def run_reader(conf: cfg.ConfigOpts, index: int,
               shared: SharedReads | SharedProviderReads) -> int:
    """Read for the workers until SIGTERM/SIGINT: the compute services' state
    (``_READER``), or the provider view's changes (``_PROVIDER_READER``)."""
    # After fork: its own connections.
    from scheduler.catalog import provider_reader, services_reader

    try:
        if index == _READER:
            assert isinstance(shared, SharedReads)
            return services_reader.run(conf, shared)
        assert isinstance(shared, SharedProviderReads)
        return provider_reader.run(conf, shared)
    except exc.ConfigurationError as e:   # the workers refuse it too: the service stops
        LOG.error('cannot start: %s', e)
        return EXIT_CONFIG


def _stop_when_parent_dies(parent: int) -> None:
    """Have the kernel send this worker SIGTERM when the supervisor dies (Linux).

    A worker left behind by a killed supervisor would go on serving, holding its
    claims journal, beside the workers of the restarted service; it finishes its
    calls and exits instead.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):   # not Linux: the operator's init stops them
        return
    if os.getppid() != parent:          # it died before the request was made
        os.kill(os.getpid(), signal.SIGTERM)


class Supervisor:
    def __init__(self, conf: cfg.ConfigOpts, workers: int):
        self.conf = conf
        self.workers = workers
        self.children: dict[int, float] = {}   # pid -> start time
        # pid -> worker index: a replacement takes the index (and metrics port) it replaces
        self.indexes: dict[int, int] = {}
        self.stopping = False
        # The provider views' shared record of the workers' claims, mapped before
        # they are forked (scheduler/provider_view/siblings.py).
        self.claims_board = (ClaimsBoard(workers)
                             if provider_view_on(conf) else None)
        # The workers read the compute services' state by turns, or ask a reader
        # of the service's own (made before they are forked:
        # scheduler/catalog/shared_services.py).
        self.service_reads = SharedReads.create() if reads_service_states(conf) else None
        # The provider views' reads of Placement's database, made once for all the
        # workers by a reader of the service's own
        # (scheduler/catalog/shared_provider_reads.py).
        self.provider_reads = (SharedProviderReads.create()
                               if provider_view_on(conf) and workers > 1
                               and conf.scheduler.provider_view_shared_reads else None)

    def _spawn(self, index: int) -> None:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            code = 1
            try:
                # Not the supervisor's handlers (they signal its children): until the
                # worker installs its own, SIGTERM simply ends it.
                for sig in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, signal.SIG_DFL)
                _stop_when_parent_dies(parent)
                if index in _KINDS:
                    shared = self.service_reads if index == _READER else self.provider_reads
                    assert shared is not None
                    code = run_reader(self.conf, index, shared)
                else:
                    code = run_worker(self.conf, index, self.claims_board, self.service_reads,
                                      self.provider_reads)
            except Exception:
                LOG.exception('worker crashed')
            finally:
                logging.shutdown()
                os._exit(code)
        self.children[pid] = time.monotonic()
        self.indexes[pid] = index

    def _terminate(self, *_args) -> None:
        self.stopping = True
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._terminate)
        signal.signal(signal.SIGINT, self._terminate)
        if self.service_reads is not None:
            self._spawn(_READER)
        if self.provider_reads is not None:
            self._spawn(_PROVIDER_READER)
        for index in range(self.workers):
            self._spawn(index)
        LOG.info('supervising %d workers: %s', self.workers,
                 sorted(pid for pid, index in self.indexes.items() if index not in _KINDS))
        deadline: float | None = None
        code = 0
        while self.children:
            if self.stopping and deadline is None:
                deadline = time.monotonic() + (self.conf.graceful_shutdown_timeout or 0) + 5
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                if deadline is not None and time.monotonic() > deadline:
                    for child in list(self.children):
                        os.kill(child, signal.SIGKILL)
                time.sleep(0.2)
                continue
            started = self.children.pop(pid, time.monotonic())
            index = self.indexes.pop(pid, 0)
            exit_code = os.waitstatus_to_exitcode(status)
            kind = _KINDS.get(index, 'worker')
            if self.stopping:
                continue
            if exit_code == EXIT_CONFIG:
                LOG.error('%s %d cannot start with this configuration; stopping', kind, pid)
                code = EXIT_CONFIG
                self._terminate()
                continue
            LOG.warning('%s %d exited (%s); starting a new one', kind, pid, exit_code)
            if time.monotonic() - started < _MIN_WORKER_LIFETIME:
                time.sleep(_MIN_WORKER_LIFETIME)
            if not self.stopping:
                self._spawn(index)
        for shared in (self.service_reads, self.provider_reads):
            if shared is not None:
                shared.remove()
        return code


def main(argv: list[str] | None = None) -> int:
    conf = scheduler_conf.parse_args(sys.argv[1:] if argv is None else argv)
    oslo_logging.setup(conf, 'scheduler')
    workers = conf.scheduler.workers or 1
    if workers == 1:
        return run_worker(conf)
    # Fail fast on what can be checked without the network, once, before forking.
    try:
        from scheduler import plugins
        from scheduler.conf.placement import load_client
        from scheduler.request.filters import load_request_filters
        plugins.load_filters(conf)
        plugins.load_weighers(conf)
        load_request_filters(conf.scheduler.request_filters)
        load_client(conf)
    except exc.ConfigurationError as e:
        LOG.error('cannot start: %s', e)
        return EXIT_CONFIG
    return Supervisor(conf, workers).run()


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
