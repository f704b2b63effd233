"""Image properties against the host (ImagePropertiesFilter) and against aggregate
metadata (AggregateImagePropertiesIsolation)."""
from __future__ import annotations

import json
import logging

import pytest

from scheduler.filters.aggregate_image_props_isolation import AggregateImagePropertiesIsolation
from scheduler.filters.image_props import (
    ImagePropertiesFilter,
    InvalidVersionPredicate,
    hypervisor_version_parts,
    parse_version_predicate,
)
from scheduler.objects.spec import ImageMeta, ImageMetaProps
from tests.builders import make_aggregate, make_conf, make_host, make_spec

X86_QEMU = [('x86_64', 'qemu', 'hvm'), ('x86_64', 'kvm', 'hvm')]


def image_spec(**props):
    return make_spec(image=ImageMeta(id='img', properties=ImageMetaProps(props)))


def image_filter(**filter_scheduler):
    f = ImagePropertiesFilter()
    f.conf = make_conf(filter_scheduler=filter_scheduler)
    return f


def host(name='cn1', **fields):
    defaults = dict(supported_instances=X86_QEMU, hypervisor_version=8002000,
                    cpu_info={'arch': 'x86_64', 'maxphysaddr': {'mode': 'emulate', 'bits': 46}})
    defaults.update(fields)
    return make_host(name, **defaults)


def verdict(filter_, host_state, spec):
    result = filter_.filter_result(host_state, spec)
    return result.passed, result.reason


def warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# ImagePropertiesFilter ----------------------------------------------------------------

NO_AARCH64 = 'host supports no instances of architecture aarch64 (image properties)'

# (image properties, host fields, (passed, reason))
IMAGE_PROPERTIES = {
    'an image without such properties passes': ({'os_distro': 'cirros'}, {}, (True, None)),
    'a supported architecture passes': ({'hw_architecture': 'x86_64'}, {}, (True, None)),
    'an unsupported architecture fails': (
        {'hw_architecture': 'aarch64'}, {}, (False, NO_AARCH64)),
    'properties left unset match any entry': ({'img_hv_type': 'kvm'}, {}, (True, None)),
    'all set properties must match one entry': (
        {'hw_architecture': 'x86_64', 'img_hv_type': 'kvm', 'hw_vm_mode': 'hvm'}, {},
        (True, None)),
    'properties matching different entries do not add up': (
        {'hw_architecture': 'aarch64', 'img_hv_type': 'kvm'},
        {'supported_instances': [('aarch64', 'qemu', 'hvm'), ('x86_64', 'kvm', 'hvm')]},
        (False, 'host supports no instances of architecture aarch64, hypervisor type kvm '
                '(image properties)')),
    'names compare position by position (xen as vm mode is not xen as hypervisor)': (
        {'hw_vm_mode': 'xen'}, {'supported_instances': [('x86_64', 'xen', 'hvm')]},
        (False, 'host supports no instances of VM mode xen (image properties)')),
    "Nova's aliases name the same architecture": (
        {'hw_architecture': 'AMD64'}, {}, (True, None)),
    'host entries are compared by canonical name too': (
        {'img_hv_type': 'qemu', 'hw_vm_mode': 'hv'},
        {'supported_instances': [('X86_64', 'QEMU', 'HVM')]}, (True, None)),
    'a requested hypervisor version the host has passes': (
        {'hw_architecture': 'x86_64', 'img_hv_requested_version': '>=8.0'}, {}, (True, None)),
    'a version range is every comparison at once': (
        {'hw_architecture': 'x86_64', 'img_hv_requested_version': '>=8.0, <8.2'}, {},
        (False, "hypervisor version does not satisfy image img_hv_requested_version "
                "'>=8.0, <8.2'")),
    'versions compare with missing parts as zero': (
        {'hw_vm_mode': 'hvm', 'img_hv_requested_version': '==8.2'}, {}, (True, None)),
    'a version too high fails': (
        {'img_hv_type': 'kvm', 'img_hv_requested_version': '>=9'}, {},
        (False, "hypervisor version does not satisfy image img_hv_requested_version '>=9'")),
    'versions are PEP 440 ones, as oslo.utils reads them': (
        {'img_hv_type': 'kvm', 'img_hv_requested_version': '>=8.2rc1, <v8.3'}, {},
        (True, None)),
    'a version requirement that is not one fails every host, saying why': (
        {'hw_architecture': 'x86_64', 'img_hv_requested_version': '8.0'}, {},
        (False, "image img_hv_requested_version '8.0' is not a version requirement: "
                "'8.0' is not <op> <version> (op: <, <=, >, >=, ==, !=)")),
    'enough physical address bits pass': (
        {'hw_architecture': 'x86_64', 'hw_maxphysaddr_bits': 46}, {}, (True, None)),
    'too few physical address bits fail': (
        {'hw_architecture': 'x86_64', 'hw_maxphysaddr_bits': 48}, {},
        (False, 'host CPU has fewer physical address bits than image hw_maxphysaddr_bits 48')),
    'physical address bits are read from cpu_info held as a JSON string': (
        {'hw_architecture': 'x86_64', 'hw_maxphysaddr_bits': 48},
        {'cpu_info': json.dumps({'maxphysaddr': {'bits': 52}})}, (True, None)),
    'a host reporting 0 physical address bits is not judged': (
        {'hw_architecture': 'x86_64', 'hw_maxphysaddr_bits': 48},
        {'cpu_info': {'maxphysaddr': {'bits': 0}}}, (True, None)),
}


@pytest.mark.parametrize(('props', 'host_fields', 'expected'), IMAGE_PROPERTIES.values(),
                         ids=IMAGE_PROPERTIES.keys())
def test_image_properties(props, host_fields, expected):
    assert verdict(image_filter(), host(**host_fields), image_spec(**props)) == expected


@pytest.mark.parametrize('props', [
    {'img_hv_requested_version': '>=99.0'}, {'hw_maxphysaddr_bits': 64},
    {'img_hv_requested_version': '>=99.0', 'hw_maxphysaddr_bits': 64}])
def test_an_image_naming_no_architecture_hypervisor_or_vm_mode_passes_every_host(props):
    """As Nova's ImagePropertiesFilter._instance_supported, which returns True
    when none of hw_architecture, img_hv_type, hw_vm_mode is set, before it
    compares the hypervisor version or the physical address bits."""
    too_old = host(hypervisor_version=8002000, cpu_info={'maxphysaddr': {'bits': 40}})
    spec = image_spec(**props)
    assert verdict(image_filter(), too_old, spec) == (True, None)
    assert verdict(image_filter(image_properties_default_architecture='x86_64'), too_old,
                   spec)[0] is False


def test_the_default_architecture_applies_to_images_without_one():
    f = image_filter(image_properties_default_architecture='aarch64')
    assert verdict(f, host(), image_spec(os_distro='cirros')) == (False, NO_AARCH64)
    assert verdict(f, host(), make_spec(image=None)) == (False, NO_AARCH64)
    assert verdict(f, host(), image_spec(hw_architecture='x86_64')) == (True, None)


# (missing host data, image properties, what the warning names)
UNJUDGED = {
    'no supported_instances': (
        {'supported_instances': []}, {'hw_architecture': 'aarch64'}, 'supported_instances'),
    'no hypervisor_version': (
        {'hypervisor_version': None},
        {'hw_architecture': 'x86_64', 'img_hv_requested_version': '>=99.0'},
        'hypervisor_version'),
    'no physical address bits': (
        {'cpu_info': {}}, {'hw_architecture': 'x86_64', 'hw_maxphysaddr_bits': 64},
        'cpu_info maxphysaddr bits'),
}


@pytest.mark.parametrize(('host_fields', 'props', 'data'), UNJUDGED.values(),
                         ids=UNJUDGED.keys())
def test_a_host_the_catalog_does_not_describe_passes_with_one_warning_per_host(
        caplog, host_fields, props, data):
    f = image_filter()
    spec = image_spec(**props)
    first, second = host('cn1', **host_fields), host('cn2', **host_fields)

    results = [f.filter_result(h, spec).passed for h in (first, first, second, first)]

    assert results == [True, True, True, True]
    logged = warnings(caplog)
    assert len(logged) == 2
    assert all(f'the host catalog has no {data}' in m and 'passes unchecked' in m
               for m in logged)
    assert ['cn1' in logged[0], 'cn2' in logged[1]] == [True, True]


def test_a_described_host_is_judged_without_warning(caplog):
    image_filter().filter_result(host(), image_spec(hw_architecture='aarch64',
                                                    img_hv_requested_version='>=8.0',
                                                    hw_maxphysaddr_bits=40))
    assert warnings(caplog) == []


@pytest.mark.parametrize(('encoded', 'parts'), [
    (6002000, (6, 2, 0)), (1000, (1, 0)), (8000000, (8, 0, 0)), (1002003004, (1, 2, 3, 4)),
    (7, (7,))])
def test_hypervisor_versions_decode_nova_integers(encoded, parts):
    assert hypervisor_version_parts(encoded) == parts


@pytest.mark.parametrize(('text', 'version', 'satisfied'), [
    ('>=6.0', (6, 2, 0), True), ('>6.2', (6, 2, 0), False), ('<7', (6, 2, 0), True),
    ('!=6.2.0', (6, 2), False), ('>= 6.0 , < 6.1', (6, 0, 5), True),
    ('==1.2.3.4', (1, 2, 3, 4), True)])
def test_version_predicates(text, version, satisfied):
    assert parse_version_predicate(text).satisfied_by(version) is satisfied


@pytest.mark.parametrize('text', ['6.0', '>= six', '=>6.0', '>=6.0,', '', '>=' + '1.' * 200])
def test_version_predicates_that_are_not_ones_are_refused(text):
    with pytest.raises(InvalidVersionPredicate):
        parse_version_predicate(text)


# AggregateImagePropertiesIsolation -------------------------------------------------------

WINDOWS = make_aggregate('windows', metadata={
    'os_distro': 'windows', 'hw_disk_bus': 'virtio, scsi', 'availability_zone': 'az1',
    'hw_architecture': 'x86_64', 'hw_qemu_guest_agent': 'true', 'hw_maxphysaddr_bits': '46'})

# (image properties, aggregates of the host, (passed, reason))
ISOLATION = {
    'a host in no aggregate takes any image': ({'os_distro': 'linux'}, [], (True, None)),
    'an image with the aggregate value passes': ({'os_distro': 'windows'}, [WINDOWS],
                                                 (True, None)),
    'an image with another value fails': (
        {'os_distro': 'linux'}, [WINDOWS],
        (False, "image property os_distro='linux' is not among the host's aggregate values")),
    'an image without the property is not constrained': ({}, [WINDOWS], (True, None)),
    'keys that are no image property are ignored': (
        {'hw_disk_bus': 'scsi'}, [WINDOWS], (True, None)),
    'comma-separated aggregate values count separately': (
        {'hw_disk_bus': 'ide'}, [WINDOWS],
        (False, "image property hw_disk_bus='ide' is not among the host's aggregate values")),
    'architectures compare by canonical name': (
        {'hw_architecture': 'AMD64'}, [WINDOWS], (True, None)),
    'booleans compare whatever their case': (
        {'hw_qemu_guest_agent': True}, [WINDOWS], (True, None)),
    'a false property is compared too': (
        {'hw_qemu_guest_agent': False}, [WINDOWS],
        (False, "image property hw_qemu_guest_agent='False' is not among the host's "
                'aggregate values')),
    'numbers compare as their text': ({'hw_maxphysaddr_bits': 46}, [WINDOWS], (True, None)),
    'any aggregate of the host may allow the value': (
        {'os_distro': 'linux'}, [WINDOWS, make_aggregate('linux', id=2,
                                                         metadata={'os_distro': 'linux'})],
        (True, None)),
}


@pytest.mark.parametrize(('props', 'aggregates', 'expected'), ISOLATION.values(),
                         ids=ISOLATION.keys())
def test_aggregate_image_properties_isolation(props, aggregates, expected):
    f = AggregateImagePropertiesIsolation()
    f.conf = make_conf()
    assert verdict(f, make_host('cn1', aggregates=aggregates), image_spec(**props)) == expected


def test_a_namespace_limits_isolation_to_the_keys_it_prefixes():
    f = AggregateImagePropertiesIsolation()
    f.conf = make_conf(filter_scheduler={
        'aggregate_image_properties_isolation_namespace': 'hw',
        'aggregate_image_properties_isolation_separator': '_'})
    in_windows = make_host('cn1', aggregates=[WINDOWS])

    # os_distro is outside the hw_ namespace: not isolated any more
    assert verdict(f, in_windows, image_spec(os_distro='linux')) == (True, None)
    assert verdict(f, in_windows, image_spec(hw_disk_bus='ide')) == (
        False, "image property hw_disk_bus='ide' is not among the host's aggregate values")


def test_a_host_that_reports_no_instance_types_supports_none():
    """Follows nova.scheduler.filters.image_props_filter._instance_supported: a host
    whose supported_instances is empty fails every image that asks for an
    architecture, hypervisor type or VM mode; one that never said passes unchecked."""
    f = image_filter()
    spec = image_spec(hw_architecture='x86_64')
    reported = host('cn1', supported_instances=[], supported_instances_reported=True)
    unknown = host('cn2', supported_instances=[])

    assert verdict(f, reported, spec) == (
        False, 'host supports no instance types (image properties)')
    assert verdict(f, unknown, spec) == (True, None)
    assert verdict(f, reported, image_spec(img_hv_requested_version='>=8.0')) == (True, None)


def test_an_empty_list_in_the_cell_database_or_the_hosts_file_is_a_report_of_none():
    from scheduler.catalog import HostCatalog
    from scheduler.catalog.cell_db import parse_rows
    from scheduler.catalog.hosts_file import parse_hosts
    from tests.builders import CELL_UUID, uuid_for

    def record(supported_in_file, supported_in_row):
        catalog = HostCatalog(default_cell_uuid=CELL_UUID)
        entry = {'nodename': 'cn1', 'provider_uuid': uuid_for('cn1')}
        if supported_in_file is not None:
            entry['supported_instances'] = supported_in_file
        catalog.load_content(parse_hosts({'hosts': [entry]}, source='t',
                                         default_cell_uuid=CELL_UUID), 't')
        nodes, problems = parse_rows([(uuid_for('cn1'), 'cn1', 'cn1', None, None, None, None,
                                       supported_in_row)])
        assert problems == []
        catalog.apply_cell_db_nodes(nodes)
        return catalog.record_for_provider(uuid_for('cn1'), 'cn1')

    assert record(None, None).supported_instances_reported is False
    assert record([], None).supported_instances_reported is True
    assert record(None, '[]').supported_instances_reported is True
    assert record(None, '[["x86_64", "kvm", "hvm"]]').supported_instances == [
        ('x86_64', 'kvm', 'hvm')]
