"""Flavor extra specs against host capabilities (ComputeCapabilitiesFilter) and
against aggregate metadata (AggregateInstanceExtraSpecsFilter)."""
from __future__ import annotations

import json

import pytest

from scheduler.filters.aggregate_image_props_isolation import AggregateImagePropertiesIsolation
from scheduler.filters.aggregate_instance_extra_specs import (
    AggregateInstanceExtraSpecsFilter,
    aggregate_key,
)
from scheduler.filters.compute_capabilities import ComputeCapabilitiesFilter
from scheduler.filters.handler import SKIPPED_ON_REBUILD, SKIPPED_ONCE_PER_REQUEST, apply_filters
from scheduler.filters.image_props import ImagePropertiesFilter
from scheduler.filters.json_filter import JsonFilter
from scheduler.objects.spec import Flavor
from tests.builders import make_aggregate, make_conf, make_host, make_spec

CPU_INFO = {'arch': 'x86_64', 'vendor': 'Intel', 'model': 'Icelake-Server',
            'features': ['avx2', 'aes'], 'maxphysaddr': {'mode': 'emulate', 'bits': 46}}


def described_host(name: str = 'cn1', **overrides):
    """A host the catalog describes fully, as a hosts file entry would."""
    fields = dict(hypervisor_type='QEMU', hypervisor_version=8002000, cpu_info=CPU_INFO,
                  supported_instances=[('x86_64', 'qemu', 'hvm')],
                  stats={'gpu_model': 'A100', 'num_instances': '3'})
    fields.update(overrides)
    return make_host(name, **fields)


def flavor_spec(extra_specs):
    return make_spec(flavor=Flavor(vcpus=1, memory_mb=512, root_gb=1,
                                   extra_specs=dict(extra_specs)))


def verdict(filter_, host, spec):
    result = filter_.filter_result(host, spec)
    return result.passed, result.reason


# ComputeCapabilitiesFilter --------------------------------------------------------------

# (extra specs, host overrides, (passed, reason))
CAPABILITIES = {
    'a flavor without extra specs passes': ({}, {}, (True, None)),
    'extra specs of other namespaces are not capabilities': (
        {'hw:cpu_policy': 'dedicated', 'resources:VCPU': '2', 'trait:HW_CPU_X86_AVX2':
         'required', 'quota:cpu_shares': '100'}, {}, (True, None)),
    'a scoped host attribute that matches passes': (
        {'capabilities:hypervisor_type': 's== QEMU'}, {}, (True, None)),
    'a scoped host attribute that differs fails, quoting the extra spec': (
        {'capabilities:hypervisor_type': 's== kvm'}, {},
        (False, "extra spec capabilities:hypervisor_type='s== kvm' not met")),
    'a numeric capability is compared as a number': (
        {'capabilities:hypervisor_version': '>= 8000000'}, {}, (True, None)),
    'a nested cpu_info key is walked': (
        {'capabilities:cpu_info:vendor': 'Intel'}, {}, (True, None)),
    'a nested cpu_info key that differs fails': (
        {'capabilities:cpu_info:vendor': 'AMD'}, {},
        (False, "extra spec capabilities:cpu_info:vendor='AMD' not met")),
    'a list capability compares as its text': (
        {'capabilities:cpu_info:features': '<all-in> aes avx2'}, {}, (True, None)),
    'the whole cpu_info compares as JSON, as Nova holds it': (
        {'capabilities:cpu_info': '<in> "vendor": "Intel"'}, {}, (True, None)),
    'a scoped name that is no attribute is a stats key': (
        {'capabilities:gpu_model': 'A100'}, {}, (True, None)),
    'an unscoped HostState attribute is a capability': (
        {'hypervisor_type': 'kvm'}, {}, (False, "extra spec hypervisor_type='kvm' not met")),
    'an unscoped stats key is a capability': (
        {'gpu_model': '<or> H100 <or> A100'}, {}, (True, None)),
    'an unscoped key the host has no stat for is ignored': (
        {'gpu_model': 'H100'}, {'stats': {}}, (True, None)),
    'an unscoped key that is neither attribute nor stat is ignored': (
        {'group_policy': 'isolate'}, {}, (True, None)),
    'our own HostState attributes are not capabilities (Nova has no "capacity")': (
        {'capacity': 'anything'}, {}, (True, None)),
    'a nested key the host does not report fails': (
        {'capabilities:cpu_info:topology:cores': '>= 4'}, {},
        (False, "extra spec capabilities:cpu_info:topology:cores='>= 4': host does not "
                'report cpu_info:topology:cores')),
    'a capability the host catalog has no data for fails, saying so': (
        {'capabilities:cpu_info:vendor': 'Intel'}, {'cpu_info': {}},
        (False, "extra spec capabilities:cpu_info:vendor='Intel': the host catalog has no "
                'cpu_info for the host')),
    'a scoped stats key the host lacks fails': (
        {'capabilities:gpu_model': 'A100'}, {'stats': {}},
        (False, "extra spec capabilities:gpu_model='A100': the host catalog has no "
                'gpu_model for the host')),
    'a requirement no value can meet fails every host, saying why': (
        {'capabilities:hypervisor_version': '>= eight'}, {},
        (False, "extra spec capabilities:hypervisor_version='>= eight' can never be met: "
                "'eight' is not a number")),
    'a scope that names nothing fails': (
        {'capabilities:': 'x'}, {}, (False, "extra spec capabilities:='x' names no capability")),
    'hw:maxphysaddr_bits is met by a host with as many bits or more': (
        {'hw:maxphysaddr_bits': '46'}, {}, (True, None)),
    'hw:maxphysaddr_bits fails on a host with fewer bits': (
        {'hw:maxphysaddr_bits': '48'}, {},
        (False, "extra spec hw:maxphysaddr_bits='48' not met "
                '(cpu_info:maxphysaddr:bits >= 48)')),
    'hw:maxphysaddr_bits fails on a host that does not report the bits': (
        {'hw:maxphysaddr_bits': '40'}, {'cpu_info': {'arch': 'x86_64'}},
        (False, "extra spec hw:maxphysaddr_bits='40': host does not report "
                'cpu_info:maxphysaddr:bits')),
    'the first unmet extra spec is the reason': (
        {'capabilities:cpu_info:arch': 'x86_64', 'capabilities:cpu_info:vendor': 'AMD',
         'capabilities:hypervisor_type': 'xen'}, {},
        (False, "extra spec capabilities:cpu_info:vendor='AMD' not met")),
}


@pytest.mark.parametrize(('extra_specs', 'host_fields', 'expected'), CAPABILITIES.values(),
                         ids=CAPABILITIES.keys())
def test_compute_capabilities(extra_specs, host_fields, expected):
    host = described_host(**host_fields)
    assert verdict(ComputeCapabilitiesFilter(), host, flavor_spec(extra_specs)) == expected


def test_cpu_info_held_as_a_json_string_is_walked_as_nova_does():
    host = described_host()
    host.cpu_info = json.dumps(CPU_INFO)
    spec = flavor_spec({'capabilities:cpu_info:maxphysaddr:bits': '>= 46',
                        'hw:maxphysaddr_bits': '46'})
    assert verdict(ComputeCapabilitiesFilter(), host, spec) == (True, None)


@pytest.mark.parametrize(('own', 'bits', 'passed'), [
    ('abc', '46', True), ('>= 64', '40', True), ('s== 1', '46', True), ('== 46', '48', False)])
def test_hw_maxphysaddr_bits_replaces_the_capability_it_stands_for(own, bits, passed):
    """As Nova's ComputeCapabilitiesFilter._satisfies_extra_specs, which overwrites
    capabilities:cpu_info:maxphysaddr:bits with '>= ' + hw:maxphysaddr_bits: the
    flavor's own value of that capability is never checked."""
    spec = flavor_spec({'capabilities:cpu_info:maxphysaddr:bits': own,
                        'hw:maxphysaddr_bits': bits})
    assert verdict(ComputeCapabilitiesFilter(), described_host(), spec)[0] is passed


def test_long_extra_specs_are_shortened_in_the_reason():
    spec = flavor_spec({'capabilities:cpu_info:vendor': 'x' * 500})
    passed, reason = verdict(ComputeCapabilitiesFilter(), described_host(), spec)
    assert not passed and len(reason) < 150 and '...' in reason


def test_the_reason_never_names_the_host_or_its_value():
    spec = flavor_spec({'capabilities:cpu_info:model': 's== Skylake'})
    _, reason = verdict(ComputeCapabilitiesFilter(), described_host('secret-host'), spec)
    assert 'secret-host' not in reason and 'Icelake' not in reason


# AggregateInstanceExtraSpecsFilter ------------------------------------------------------

SSD = make_aggregate('ssd', metadata={'ssd': 'true', 'gpu': 'a100, v100', 'max_vcpus': '32'})
HDD = make_aggregate('hdd', id=2, metadata={'ssd': 'false'})

# (extra specs, aggregates of the host, (passed, reason))
AGGREGATE_SPECS = {
    'a flavor without extra specs passes a host in no aggregate': ({}, [], (True, None)),
    'a colon-less extra spec must be set by an aggregate': (
        {'ssd': 'true'}, [SSD], (True, None)),
    'a colon-less extra spec fails a host whose aggregates do not set it': (
        {'ssd': 'true'}, [], (False, "extra spec ssd='true': no aggregate of the host sets ssd")),
    'a scoped extra spec must be set by an aggregate': (
        {'aggregate_instance_extra_specs:ssd': 'true'}, [SSD], (True, None)),
    'a scoped extra spec that differs fails': (
        {'aggregate_instance_extra_specs:ssd': 'true'}, [HDD],
        (False, "extra spec aggregate_instance_extra_specs:ssd='true' not met by the "
                'aggregate metadata')),
    'a scoped key keeps the colons after the scope': (
        {'aggregate_instance_extra_specs:a:b': 'c'},
        [make_aggregate('colons', metadata={'a:b': 'c'})], (True, None)),
    'other namespaces are not aggregate requirements': (
        {'hw:cpu_policy': 'dedicated', 'capabilities:hypervisor_type': 'QEMU',
         'resources:VCPU': '1'}, [], (True, None)),
    "Nova's own colon-less extra specs are not aggregate requirements": (
        {'group_policy': 'isolate', 'hide_hypervisor_id': 'true'}, [], (True, None)),
    'comma-separated aggregate values count separately': (
        {'gpu': '<or> v100 <or> h100'}, [SSD], (True, None)),
    'values are merged over the host aggregates': (
        {'ssd': 'false'}, [SSD, HDD], (True, None)),
    'operators compare aggregate values': (
        {'max_vcpus': '>= 16'}, [SSD], (True, None)),
    'an operator that fails on every value fails': (
        {'max_vcpus': '>= 64'}, [SSD],
        (False, "extra spec max_vcpus='>= 64' not met by the aggregate metadata")),
    'a requirement no value can meet says why': (
        {'max_vcpus': '>= many'}, [SSD],
        (False, "extra spec max_vcpus='>= many' can never be met: 'many' is not a number")),
}


@pytest.mark.parametrize(('extra_specs', 'aggregates', 'expected'), AGGREGATE_SPECS.values(),
                         ids=AGGREGATE_SPECS.keys())
def test_aggregate_instance_extra_specs(extra_specs, aggregates, expected):
    host = make_host('cn1', aggregates=aggregates)
    assert verdict(AggregateInstanceExtraSpecsFilter(), host, flavor_spec(extra_specs)) == \
        expected


@pytest.mark.parametrize(('extra_spec', 'key'), [
    ('ssd', 'ssd'), ('aggregate_instance_extra_specs:ssd', 'ssd'),
    ('aggregate_instance_extra_specs:a:b', 'a:b'), ('hw:cpu_policy', None),
    ('group_policy', None), ('capabilities:ssd', None)])
def test_which_aggregate_key_an_extra_spec_requires(extra_spec, key):
    assert aggregate_key(extra_spec) == key


# Nova's run-once and rebuild flags, for every filter of this issue ------------------------

FLAGS = {
    'ComputeCapabilitiesFilter': (ComputeCapabilitiesFilter, True, False),
    'AggregateInstanceExtraSpecsFilter': (AggregateInstanceExtraSpecsFilter, True, False),
    'ImagePropertiesFilter': (ImagePropertiesFilter, True, True),
    'AggregateImagePropertiesIsolation': (AggregateImagePropertiesIsolation, True, True),
    'JsonFilter': (JsonFilter, False, False),
}


@pytest.mark.parametrize(('cls', 'once', 'on_rebuild'), FLAGS.values(), ids=FLAGS.keys())
def test_filters_run_once_per_request_and_on_rebuild_as_in_nova(cls, once, on_rebuild):
    filter_ = cls()
    filter_.conf = make_conf()
    hosts = [make_host('cn1')]

    second = apply_filters([filter_], hosts, make_spec(), instance_index=1)
    rebuild = apply_filters([filter_], hosts, make_spec(rebuild=True), instance_index=0,
                            rebuild=True)

    assert (second.steps[0].skipped == SKIPPED_ONCE_PER_REQUEST) is once
    assert (rebuild.steps[0].skipped == SKIPPED_ON_REBUILD) is (not on_rebuild)


def test_a_filter_run_once_keeps_its_verdict_for_the_later_instances_of_the_request():
    spec = flavor_spec({'capabilities:hypervisor_type': 's== QEMU'})
    hosts = [described_host('qemu'), described_host('xen', hypervisor_type='xen')]
    filters = [ComputeCapabilitiesFilter()]

    first = apply_filters(filters, hosts, spec, instance_index=0)
    second = apply_filters(filters, first.hosts, spec, instance_index=1)

    assert [h.host for h in first.hosts] == ['qemu']
    assert [h.host for h in second.hosts] == ['qemu']
    assert first.steps[0].removed == {
        "extra spec capabilities:hypervisor_type='s== QEMU' not met": ['xen']}
