"""Build (or reuse) the service side's virtualenv for tox -e interop-<series>.

``python tests/interop/service_env.py DEST`` makes DEST a virtualenv with this
service and Placement installed as the unit tests' env has them
(``-c constraints.txt -e .[placement]``), and prints its Python. The older
releases' upper-constraints pin libraries below this service's floors, so the
service cannot live in their env (doc/operations.md, "Supported Nova
releases"); it runs from here, as an operator runs it from a virtualenv or
container of its own. The env is rebuilt only when pyproject.toml or
constraints.txt change, so every interop env of a run shares one.
"""
from __future__ import annotations

import hashlib
import pathlib
import subprocess
import sys
import venv

REPO = pathlib.Path(__file__).resolve().parents[2]
INPUTS = ('pyproject.toml', 'constraints.txt')


def fingerprint() -> str:
    digest = hashlib.sha256()
    for name in INPUTS:
        digest.update((REPO / name).read_bytes())
    return digest.hexdigest()


def ensure(dest: pathlib.Path) -> pathlib.Path:
    python = dest / 'bin' / 'python'
    stamp = dest / 'placement-scheduler.inputs'
    if python.exists() and stamp.exists() and stamp.read_text() == fingerprint():
        return python
    venv.EnvBuilder(clear=True, with_pip=True).create(dest)
    subprocess.run([str(python), '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check',
                    '-c', str(REPO / 'constraints.txt'), '-e', f'{REPO}[placement]'],
                   check=True)
    stamp.write_text(fingerprint())
    return python


if __name__ == '__main__':
    print(ensure(pathlib.Path(sys.argv[1]).resolve()))
