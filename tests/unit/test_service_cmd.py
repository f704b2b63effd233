"""``scheduler-service``: what a worker does around the service it runs."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from scheduler.cmd import service as cmd
from scheduler.memory import heap

REPO = Path(__file__).resolve().parents[2]


def _printed_by(code: str, env: dict[str, str] | None = None) -> list[str]:
    """What a fresh interpreter running ``code`` printed, as words."""
    env = {**os.environ, 'PYTHONPATH': str(REPO)} if env is None else env
    done = subprocess.run([sys.executable, '-c', code], env=env, cwd=REPO,
                          capture_output=True, text=True, check=True)
    return done.stdout.split()


def _imported_by_the_entry_point(env: dict[str, str]) -> tuple[str, bool]:
    setting, greendns = _printed_by(
        'import os, sys, scheduler.cmd.service; '
        'print(os.environ.get("EVENTLET_NO_GREENDNS")); '
        'print("eventlet.support.greendns" in sys.modules)', env)
    return setting, greendns == 'True'


def test_the_entry_point_does_not_load_eventlets_green_dns():
    env = {k: v for k, v in os.environ.items() if k != 'EVENTLET_NO_GREENDNS'}
    env['PYTHONPATH'] = str(REPO)

    assert _imported_by_the_entry_point(env) == ('yes', False)


def test_an_operators_own_green_dns_setting_wins():
    env = {**os.environ, 'PYTHONPATH': str(REPO), 'EVENTLET_NO_GREENDNS': 'no'}

    assert _imported_by_the_entry_point(env)[0] == 'no'


def test_the_entry_point_serves_on_threads_and_never_imports_eventlet_itself():
    printed = _printed_by(
        'import sys, scheduler.cmd.service, scheduler.service; '
        'from oslo_service import backend; '
        'print(backend.get_backend_type().value, "eventlet" in sys.modules); '
        'import eventlet; print(eventlet.__name__)')

    # Importable again afterwards: a Nova-style plugin that imports Nova needs it.
    assert printed == ['threading', 'False', 'eventlet']


def test_without_oslo_services_threading_extra_the_entry_point_still_starts_on_eventlet():
    printed = _printed_by(
        'import sys; sys.modules["cotyledon"] = None; '
        'import scheduler.cmd.service, scheduler.service; '
        'from oslo_service import backend; print(backend.get_backend_type().value)')

    assert printed == ['eventlet']


def test_a_worker_limits_its_arenas_first_and_gives_start_ups_free_memory_back_before_calls(
        monkeypatch):
    events: list[str] = []
    handlers = {}
    monkeypatch.setattr(cmd.signal, 'signal', lambda sig, handler: handlers.update({sig: handler}))
    monkeypatch.setattr(heap, 'limit_arenas', lambda: events.append('arenas'))
    monkeypatch.setattr(heap, 'release_free_memory', lambda: events.append('release'))

    class Service:
        def __init__(self, conf, worker_index, claims_board=None, service_reads=None,
                     provider_reads=None):
            events.append('built')
            self.transport = SimpleNamespace(cleanup=lambda: None)

        def start(self):
            events.append('start')
            handlers[signal.SIGTERM]()  # asked to stop as soon as it serves

        def stop(self):
            events.append('stop')

        def wait(self):
            pass

    monkeypatch.setattr('scheduler.service.SchedulerService', Service)

    assert cmd.run_worker(SimpleNamespace(graceful_shutdown_timeout=1)) == 0
    assert events == ['arenas', 'built', 'release', 'start', 'stop']


def test_a_compute_services_reader_whose_options_cannot_work_stops_the_service(monkeypatch):
    """The workers refuse the same [nova] options; the supervisor stops on this exit code
    instead of starting the reader again and again."""
    from scheduler.catalog.shared_services import SharedReads
    from tests.fixtures.service import conf_for

    monkeypatch.setattr(cmd.signal, 'signal', lambda sig, handler: None)
    conf = conf_for('http://127.0.0.1:9', 'fake://', **{
        'nova.auth_type': 'admin_token', 'nova.token': 'token',
        'nova.endpoint_override': 'http://127.0.0.1:9/v2.1', 'nova.microversion': '2.88'})
    reads = SharedReads.create()
    try:
        assert cmd.run_reader(conf, cmd._READER, reads) == cmd.EXIT_CONFIG
    finally:
        reads.remove()
