"""The supported Nova releases: one constraints file, one tox env and one README row each.

The constraints files are openstack/requirements' upper-constraints.txt, kept
verbatim under a header naming the ref and commit they came from; the newest
release is installed under the project's own constraints.txt instead (the
newest file at hand predates it). Which of
them the service itself installs into is decided by its floors and written
down here, so a change of floor or file that changes the answer fails until
the documentation (README, doc/operations.md) says so too.
"""
from __future__ import annotations

import configparser
import re

import pytest

from scheduler.objects.nova_releases import RELEASES
from tests.interop.floors import REPO, broken_floors, constraints_file

#: The service's threading backend came with oslo.service 4.2.0; 2025.1 pins 4.1.2.
NEEDS_ITS_OWN_ENV = {'2024.1', '2024.2', '2025.1'}


@pytest.mark.parametrize('release', RELEASES[:-1], ids=lambda r: r.series)
def test_each_release_has_its_constraints_file_with_its_origin(release):
    header = constraints_file(release.series).read_text().splitlines()[:3]
    assert header[0].startswith(f'# openstack/requirements upper-constraints.txt for OpenStack '
                                f'{release.series} (nova {release.nova})')
    assert re.fullmatch(r'# ref: (master|stable/\S+|unmaintained/\S+|\S+-eol)', header[1])
    assert re.fullmatch(r'# commit: [0-9a-f]{40} \(\d{4}-\d{2}-\d{2}\)', header[2])


def test_the_newest_release_is_installed_under_the_projects_own_constraints():
    assert constraints_file(RELEASES[-1].series) == REPO / 'constraints.txt'


@pytest.mark.parametrize('release', RELEASES, ids=lambda r: r.series)
def test_the_service_installs_beside_a_release_only_from_2025_2(release):
    broken = broken_floors(release.series)
    if release.series in NEEDS_ITS_OWN_ENV:
        assert set(broken) == {'oslo.service'}
    else:
        assert broken == {}


def _tox() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(REPO / 'tox.ini')
    return parser


def test_each_release_has_a_tox_env_installing_its_nova_under_its_constraints():
    tox = _tox()
    for release in RELEASES:
        name = 'testenv:interop' if release is RELEASES[-1] else f'testenv:interop-{release.series}'
        env = tox[name]
        assert constraints_file(release.series).name in env['install_command'], name
        assert re.search(rf'\bnova==({release.nova}\.\S+)', env['deps']), name
        assert f'SCHEDULER_TEST_NOVA_SERIES = {release.series}' in env['setenv'], name


def test_ci_runs_the_oldest_and_the_newest_release():
    ci = (REPO / '.ci' / 'run').read_text()
    assert f'tox -e interop-{RELEASES[0].series}' in ci
    assert re.search(r'tox -e interop\b(?!-)', ci)


def test_the_readme_table_has_a_row_for_each_release():
    readme = (REPO / 'README.md').read_text()
    for release in RELEASES:
        assert re.search(rf'^\| {re.escape(release.series)}( \(SLURP\))? \| {release.nova}\.',
                         readme, re.MULTILINE), release.series
