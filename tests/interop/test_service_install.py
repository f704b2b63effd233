"""Whether this service installs into this release's upper-constraints, asked of pip.

tox -e interop-<series> names its constraints file in SCHEDULER_TEST_NOVA_SERIES.
pip resolves this service's dependencies under it without installing anything;
it succeeds exactly when no pin is below one of the service's floors
(tests/interop/floors.py), and otherwise names the first such library.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.interop.floors import REPO, broken_floors, constraints_file

SERIES = os.environ.get('SCHEDULER_TEST_NOVA_SERIES')


@pytest.mark.skipif(SERIES is None, reason='the env names no release series')
def test_the_service_installs_beside_this_release_exactly_when_its_floors_allow():
    done = subprocess.run(
        [sys.executable, '-m', 'pip', 'install', '--dry-run', '--ignore-installed',
         '--disable-pip-version-check', '-c', str(constraints_file(SERIES)),
         str(REPO)], capture_output=True, text=True, timeout=600)

    broken = broken_floors(SERIES)
    if broken:
        assert done.returncode != 0, f'pip installed it despite {broken}'
        # "The conflict is caused by: ... oslo.service>=4.2.0 ... oslo.service===3.4.1"
        output = done.stdout + done.stderr
        assert any(name in output for name in broken), output[-2000:]
    else:
        assert done.returncode == 0, done.stderr[-2000:]
