"""Nova's capability filters in the real service: a hosts file describes two hosts
differently, and requests go where their flavor and image can run (or get a
NoValidHost that names the filters that said no)."""
from __future__ import annotations

import pytest
import yaml

from scheduler import exceptions as exc
from scheduler.catalog import HostCatalog
from scheduler.objects.spec import ImageMetaProps
from tests.builders import SERVICE_CELL, boot_spec, chosen_host
from tests.functional.cloud import add_host, consumers_with_allocations

FILTERS = ['ComputeFilter', 'ComputeCapabilitiesFilter', 'ImagePropertiesFilter']


@pytest.fixture
def two_kinds_of_host(placement_client, tmp_path):
    """A big x86 host the weighers prefer and a small ARM host with more address bits."""
    x86 = add_host(placement_client, 'x86-big', ram_mb=65536)
    arm = add_host(placement_client, 'arm-small', ram_mb=16384)
    hosts_file = tmp_path / 'hosts.yaml'
    hosts_file.write_text(yaml.safe_dump({'hosts': [
        {'nodename': 'x86-big', 'provider_uuid': x86, 'hypervisor_type': 'QEMU',
         'hypervisor_version': 8002000, 'supported_instances': [['x86_64', 'qemu', 'hvm']],
         'cpu_info': {'arch': 'x86_64', 'vendor': 'Intel', 'maxphysaddr': {'bits': 40}}},
        {'nodename': 'arm-small', 'provider_uuid': arm, 'hypervisor_type': 'QEMU',
         'hypervisor_version': 8002000, 'supported_instances': [['aarch64', 'qemu', 'hvm']],
         'cpu_info': {'arch': 'aarch64', 'vendor': 'ARM', 'maxphysaddr': {'bits': 48}}},
    ]}))
    catalog = HostCatalog.from_file(str(hosts_file), default_cell_uuid=SERVICE_CELL)
    return catalog, (x86, arm)


def test_requests_land_on_the_host_whose_capabilities_fit(start_scheduler, two_kinds_of_host):
    catalog, _ = two_kinds_of_host
    running = start_scheduler(catalog, **{'filter_scheduler.enabled_filters': FILTERS})
    arm_image = boot_spec()
    arm_image.image.properties = ImageMetaProps(hw_architecture='aarch64')

    assert chosen_host(running, boot_spec()) == 'x86-big'     # what the weighers prefer
    assert chosen_host(running, arm_image) == 'arm-small'      # ImagePropertiesFilter
    assert chosen_host(running, boot_spec(extra_specs={'hw:maxphysaddr_bits': '46'})) == \
        'arm-small'                                        # ComputeCapabilitiesFilter


def test_when_no_host_fits_the_reason_names_each_filter_that_said_no(
        start_scheduler, two_kinds_of_host, placement_client):
    catalog, providers = two_kinds_of_host
    running = start_scheduler(catalog, **{'filter_scheduler.enabled_filters': FILTERS})
    spec = boot_spec(extra_specs={'capabilities:cpu_info:vendor': 'Intel'})
    spec.image.properties = ImageMetaProps(hw_architecture='aarch64')

    with pytest.raises(exc.NoValidHost) as failure:
        chosen_host(running, spec)

    assert failure.value.reason == (
        "0/2 hosts available: ComputeCapabilitiesFilter removed 1 (extra spec "
        "capabilities:cpu_info:vendor='Intel' not met); ImagePropertiesFilter removed 1 "
        '(host supports no instances of architecture aarch64 (image properties))')
    assert consumers_with_allocations(placement_client, providers) == {}
