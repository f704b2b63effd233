"""The service side of the interop tests: Placement and ``scheduler-service`` as processes.

The test process is nova-conductor: it holds one Nova release and that release's
library versions (tox -e interop-<series>). Placement 16 and this service need
newer libraries than the older releases pin (doc/operations.md, "Supported Nova
releases"), so both run from the Python named by ``SCHEDULER_TEST_SERVICE_PYTHON``
(the env tests/interop/service_env.py builds), as they would run from their own
virtualenv or container beside an older Nova. Without it they run from the test
process's own Python.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from tests.fixtures.processes import ServiceProcess

SERVICE_PYTHON = os.environ.get('SCHEDULER_TEST_SERVICE_PYTHON') or sys.executable


class SideProcess(ServiceProcess):
    """``SERVICE_PYTHON -m MODULE ARGS...`` from the repository; output in ``log``.

    Stopped as a ServiceProcess is (SIGTERM, then a kill after a minute); its
    standard input is a pipe that closes when the test run ends.
    """

    def __init__(self, module: str, *args: str, log: pathlib.Path,
                 stdout: int | None = None):
        # Another interpreter (the service's virtualenv), another module.
        super().__init__(None, argv=[SERVICE_PYTHON, '-m', module, *args], log=log,
                         stdin=subprocess.PIPE, stdout=stdout)

    def stop(self) -> None:
        super().stop()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def start_placement(db_dir: pathlib.Path) -> tuple[SideProcess, str]:
    """Placement on an ephemeral port, and its URL once it answers."""
    process = SideProcess('tests.interop.placement_process', str(db_dir),
                          log=db_dir / 'placement.log', stdout=subprocess.PIPE)
    assert process.proc.stdout is not None
    url = process.proc.stdout.readline().decode().strip()
    if not url.startswith('http://'):
        process.stop()
        raise RuntimeError(f'Placement did not start:\n{process.output()}')
    return process, url


def start_scheduler(config: pathlib.Path) -> SideProcess:
    return SideProcess('scheduler.cmd.service', '--config-file', str(config),
                       log=config.with_suffix('.log'))
