"""IsolatedHostsFilter: isolated images only on isolated hosts, and (by default)
other images off them."""
from __future__ import annotations

import pytest

from scheduler.filters.isolated_hosts import (
    IMAGE_ISOLATED,
    RESERVED_FOR_ISOLATED,
    IsolatedHostsFilter,
)
from scheduler.objects.spec import ImageMeta
from tests.builders import make_conf, make_host, make_spec

ISO_IMAGE, OTHER_IMAGE = 'image-isolated', 'image-other'
ISO_HOST, OTHER_HOST = 'iso1', 'cn1'


def isolated_filter(*, images=(ISO_IMAGE,), hosts=(ISO_HOST,), restrict=True):
    f = IsolatedHostsFilter()
    f.conf = make_conf(filter_scheduler={
        'isolated_images': list(images), 'isolated_hosts': list(hosts),
        'restrict_isolated_hosts_to_isolated_images': restrict})
    return f


def spec_with(image_id):
    return make_spec(image=ImageMeta(id=image_id) if image_id is not None else None)


PASS = (True, None)
RESERVED = (False, RESERVED_FOR_ISOLATED)
ISOLATED = (False, IMAGE_ISOLATED)

# (restrict, host, image id) -> verdict: Nova's matrix, both settings
MATRIX = [
    (True, ISO_HOST, ISO_IMAGE, PASS),
    (True, ISO_HOST, OTHER_IMAGE, RESERVED),
    (True, OTHER_HOST, ISO_IMAGE, ISOLATED),
    (True, OTHER_HOST, OTHER_IMAGE, PASS),
    (False, ISO_HOST, ISO_IMAGE, PASS),
    (False, ISO_HOST, OTHER_IMAGE, PASS),
    (False, OTHER_HOST, ISO_IMAGE, ISOLATED),
    (False, OTHER_HOST, OTHER_IMAGE, PASS),
]


@pytest.mark.parametrize('restrict,host,image,expected', MATRIX,
                         ids=[f'restrict={r} host={h} image={i}' for r, h, i, _ in MATRIX])
def test_isolation_matrix(restrict, host, image, expected):
    result = isolated_filter(restrict=restrict).filter_result(make_host(host), spec_with(image))

    assert (result.passed, result.reason) == expected


@pytest.mark.parametrize('restrict,host,expected', [
    (True, ISO_HOST, RESERVED), (True, OTHER_HOST, PASS),
    (False, ISO_HOST, PASS), (False, OTHER_HOST, PASS),
])
def test_without_isolated_images_isolated_hosts_take_nothing_only_when_restricted(
        restrict, host, expected):
    f = isolated_filter(images=(), restrict=restrict)

    result = f.filter_result(make_host(host), spec_with(OTHER_IMAGE))

    assert (result.passed, result.reason) == expected


@pytest.mark.parametrize('spec', [spec_with(None), make_spec(image=ImageMeta())],
                         ids=['no image (boot from volume)', 'image without id'])
def test_a_request_without_an_image_id_counts_as_a_non_isolated_image(spec):
    f = isolated_filter()

    assert not f.filter_result(make_host(ISO_HOST), spec).passed
    assert f.filter_result(make_host(OTHER_HOST), spec).passed


def test_hosts_match_by_exact_service_host_name():
    f = isolated_filter(images=(), hosts=('ISO1',))

    assert f.filter_result(make_host('iso1'), spec_with(OTHER_IMAGE)).passed


def test_without_isolated_hosts_an_isolated_image_has_nowhere_to_go():
    result = isolated_filter(hosts=()).filter_result(make_host(OTHER_HOST), spec_with(ISO_IMAGE))

    assert (result.passed, result.reason) == ISOLATED


def test_isolated_hosts_filter_runs_once_per_request_and_on_rebuild():
    assert IsolatedHostsFilter.run_filter_once_per_request
    assert IsolatedHostsFilter.RUN_ON_REBUILD
