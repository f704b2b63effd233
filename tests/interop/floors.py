"""Which of this service's dependency floors a Nova release's upper-constraints break.

An env pinned by openstack/requirements' upper-constraints.txt holds exactly one
version of each library; this service installs into it only if every pin meets
the service's own requirement (pyproject.toml ``dependencies``). A pin below a
floor is reason enough for pip to refuse; tests/interop/test_service_install.py
asks pip itself.
"""
from __future__ import annotations

import pathlib

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REPO = pathlib.Path(__file__).resolve().parents[2]
CONSTRAINTS = pathlib.Path(__file__).resolve().parent / 'constraints'


def constraints_file(series: str) -> pathlib.Path:
    """The series' upper-constraints; the project's own constraints.txt for a series
    without one (the newest: its openstack/requirements file is not at hand)."""
    path = CONSTRAINTS / f'upper-constraints-{series}.txt'
    return path if path.exists() else REPO / 'constraints.txt'


def pins(path: pathlib.Path) -> dict[str, str]:
    """name -> pinned version, for this interpreter (``name===1.0;python_version>='3.9'``,
    or ``name==1.0`` as constraints.txt writes it)."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        spec, _, marker = line.partition(';')
        if marker and not Marker(marker).evaluate():
            continue
        name, _, version = spec.partition('==')
        found[canonicalize_name(name)] = version.lstrip('=').strip()
    return found


def service_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / 'pyproject.toml').read_text())['project']
    return [Requirement(text) for text in project['dependencies']]


def broken_floors(series: str) -> dict[str, str]:
    """``{'oslo.service': 'oslo.service[threading]>=4.2.0 but 3.4.1 is pinned'}``."""
    pinned = pins(constraints_file(series))
    broken: dict[str, str] = {}
    for req in service_requirements():
        version = pinned.get(canonicalize_name(req.name))
        if version is not None and not req.specifier.contains(version, prereleases=True):
            broken[req.name] = f'{req} but {version} is pinned'
    return broken
