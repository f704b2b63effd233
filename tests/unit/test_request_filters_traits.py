"""Request filters that require capability traits of the compute node: Nova's
(nova/scheduler/request_filter.py), without its wrong viommu trait names and its
crashes on image=None (doc/nova-compatibility.md).

Each row: a spec, the [scheduler] options set, and the root traits the filter
must require (an empty set: it must not act).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.exceptions import RequestFilterFailed, RequestTranslationError
from scheduler.objects.spec import (
    ImageMeta,
    ImageMetaProps,
    RequestGroup,
    RequestSpec,
)
from scheduler.request import trait_filters
from scheduler.request.filters import RequestFilter
from scheduler.request.trait_filters import (
    accelerators_filter,
    ephemeral_encryption_filter,
    owner_nova_filter,
    packed_virtqueue_filter,
    remote_managed_ports_filter,
    require_image_type_support,
    tpm_secret_security_filter,
    transform_image_metadata,
    virtio_sound_filter,
)
from tests.builders import make_conf, make_spec

PORT = '9b2c1d0e-3f4a-4b5c-8d6e-7f8091a2b3c4'
ALIAS_REQUEST = '5e1a4f1c-7d3b-4a2e-9c8d-0f1e2d3c4b5a'


def spec(*, extra_specs: dict[str, str] | None = None, image: dict[str, Any] | None = None,
         no_image: bool = False, disk_format: str | None = 'qcow2', **fields: Any) -> RequestSpec:
    image_meta = None if no_image else ImageMeta(disk_format=disk_format,
                                                 properties=ImageMetaProps(image or {}))
    return make_spec(vcpus=2, memory_mb=2048, root_gb=20, extra_specs=extra_specs,
                     image=image_meta, **fields)


def pci_requests(*requests: dict[str, Any]) -> dict[str, Any]:
    """InstancePCIRequests as the codec keeps it: the primitive."""
    return {'nova_object.name': 'InstancePCIRequests', 'nova_object.namespace': 'nova',
            'nova_object.version': '1.1',
            'nova_object.data': {'requests': [
                {'nova_object.name': 'InstancePCIRequest', 'nova_object.namespace': 'nova',
                 'nova_object.version': '1.3', 'nova_object.data': r} for r in requests]}}


def port_pci_request(remote_managed: str) -> dict[str, Any]:
    # What Nova's API creates for an SR-IOV class port (nova/network/neutron.py).
    return {'count': 1, 'alias_name': None, 'request_id': PORT, 'requester_id': PORT,
            'spec': [{'physical_network': 'physnet0', 'remote_managed': remote_managed}]}


@dataclass
class Row:
    request_filter: RequestFilter
    spec: RequestSpec
    required: set[str]
    options: dict[str, Any] = field(default_factory=dict)


ROWS = {
    # require_image_type_support ------------------------------------------------------------
    'image type: the disk format of the image is required when the option is on':
        Row(require_image_type_support, spec(),
            {'COMPUTE_IMAGE_TYPE_QCOW2'}, {'query_placement_for_image_type_support': True}),
    'image type: nothing while the option is off (Nova default)':
        Row(require_image_type_support, spec(), set()),
    'image type: boot from volume needs no image type':
        Row(require_image_type_support, spec(is_bfv=True), set(),
            {'query_placement_for_image_type_support': True}),
    'image type: a format os-traits does not know adds nothing':
        Row(require_image_type_support, spec(disk_format='squashfs'), set(),
            {'query_placement_for_image_type_support': True}),
    'image type: a spec without an image adds nothing (Nova crashes)':
        Row(require_image_type_support, spec(no_image=True), set(),
            {'query_placement_for_image_type_support': True}),
    'image type: an image without a disk format adds nothing (Nova crashes)':
        Row(require_image_type_support, spec(disk_format=None), set(),
            {'query_placement_for_image_type_support': True}),
    # transform_image_metadata --------------------------------------------------------------
    'image metadata: every mapped property becomes its trait':
        Row(transform_image_metadata,
            spec(image={'hw_cdrom_bus': 'sata', 'hw_disk_bus': 'virtio',
                        'hw_video_model': 'virtio', 'hw_vif_model': 'e1000e',
                        'hw_architecture': 'x86_64', 'hw_emulation_architecture': 'aarch64'}),
            {'COMPUTE_STORAGE_BUS_SATA', 'COMPUTE_STORAGE_BUS_VIRTIO',
             'COMPUTE_GRAPHICS_MODEL_VIRTIO', 'COMPUTE_NET_VIF_MODEL_E1000E', 'HW_ARCH_X86_64',
             'COMPUTE_ARCH_AARCH64'},
            {'image_metadata_prefilter': True}),
    'image metadata: hw_viommu_model gives os-traits COMPUTE_VIOMMU_MODEL_* (Nova bug 8.9)':
        Row(transform_image_metadata,
            spec(image={'hw_viommu_model': 'intel', 'hw_disk_bus': 'scsi'}),
            {'COMPUTE_VIOMMU_MODEL_INTEL', 'COMPUTE_STORAGE_BUS_SCSI'},
            {'image_metadata_prefilter': True}),
    'image metadata: "-" in a value becomes "_"':
        Row(transform_image_metadata, spec(image={'hw_vif_model': 'spapr-vlan'}),
            {'COMPUTE_NET_VIF_MODEL_SPAPR_VLAN'}, {'image_metadata_prefilter': True}),
    'image metadata: an unknown trait drops only that property, the others count':
        Row(transform_image_metadata,
            spec(image={'hw_video_model': 'hologram', 'hw_disk_bus': 'virtio'}),
            {'COMPUTE_STORAGE_BUS_VIRTIO'}, {'image_metadata_prefilter': True}),
    'image metadata: an architecture alias is canonicalized as Nova stores it':
        Row(transform_image_metadata, spec(image={'hw_architecture': 'AMD64'}),
            {'HW_ARCH_X86_64'}, {'image_metadata_prefilter': True}),
    'image metadata: nothing while the option is off (Nova default)':
        Row(transform_image_metadata, spec(image={'hw_disk_bus': 'virtio'}), set()),
    'image metadata: a spec without an image adds nothing':
        Row(transform_image_metadata, spec(no_image=True), set(),
            {'image_metadata_prefilter': True}),
    # accelerators_filter -------------------------------------------------------------------
    'accelerators: a device profile needs COMPUTE_ACCELERATORS':
        Row(accelerators_filter, spec(extra_specs={'accel:device_profile': 'fpga-1'}),
            {'COMPUTE_ACCELERATORS'}),
    'accelerators: no device profile, no trait':
        Row(accelerators_filter, spec(), set()),
    # packed_virtqueue_filter ---------------------------------------------------------------
    'packed ring: from the flavor':
        Row(packed_virtqueue_filter, spec(extra_specs={'hw:virtio_packed_ring': 'true'}),
            {'COMPUTE_NET_VIRTIO_PACKED'}),
    'packed ring: from the image':
        Row(packed_virtqueue_filter, spec(image={'hw_virtio_packed_ring': True}),
            {'COMPUTE_NET_VIRTIO_PACKED'}),
    'packed ring: false asks nothing':
        Row(packed_virtqueue_filter, spec(extra_specs={'hw:virtio_packed_ring': 'no'}), set()),
    'packed ring: a spec without an image reads the flavor (Nova crashes, 8.10)':
        Row(packed_virtqueue_filter,
            spec(no_image=True, extra_specs={'hw:virtio_packed_ring': 'yes'}),
            {'COMPUTE_NET_VIRTIO_PACKED'}),
    # remote_managed_ports_filter -----------------------------------------------------------
    'remote-managed port: its PCI request says remote_managed=True':
        Row(remote_managed_ports_filter,
            spec(pci_requests=pci_requests(port_pci_request('True')),
                 requested_networks=[{'port_id': PORT}]),
            {'COMPUTE_REMOTE_MANAGED_PORTS'}),
    'remote-managed port: also on a move, where requested_networks is empty':
        Row(remote_managed_ports_filter,
            spec(pci_requests=pci_requests(port_pci_request('True'))),
            {'COMPUTE_REMOTE_MANAGED_PORTS'}),
    'remote-managed port: a direct SR-IOV port is not remote-managed':
        Row(remote_managed_ports_filter,
            spec(pci_requests=pci_requests(port_pci_request('False')),
                 requested_networks=[{'port_id': PORT}]), set()),
    'remote-managed port: a flavor PCI alias is not a port':
        Row(remote_managed_ports_filter,
            spec(pci_requests=pci_requests(dict(port_pci_request('True'), alias_name='a1'))),
            set()),
    'remote-managed port: no PCI requests at all':
        Row(remote_managed_ports_filter, spec(requested_networks=[{'port_id': PORT}]), set()),
    # ephemeral_encryption_filter -----------------------------------------------------------
    'ephemeral encryption: the feature trait':
        Row(ephemeral_encryption_filter, spec(extra_specs={'hw:ephemeral_encryption': 'true'}),
            {'COMPUTE_EPHEMERAL_ENCRYPTION'}),
    'ephemeral encryption: with a format, the format trait too':
        Row(ephemeral_encryption_filter,
            spec(image={'hw_ephemeral_encryption': True,
                        'hw_ephemeral_encryption_format': 'luks'}),
            {'COMPUTE_EPHEMERAL_ENCRYPTION', 'COMPUTE_EPHEMERAL_ENCRYPTION_LUKS'}),
    'ephemeral encryption: a format alone asks nothing':
        Row(ephemeral_encryption_filter,
            spec(extra_specs={'hw:ephemeral_encryption_format': 'luks'}), set()),
    'ephemeral encryption: a spec without an image reads the flavor (Nova crashes, 8.10)':
        Row(ephemeral_encryption_filter,
            spec(no_image=True, extra_specs={'hw:ephemeral_encryption': 'true',
                                             'hw:ephemeral_encryption_format': 'plain'}),
            {'COMPUTE_EPHEMERAL_ENCRYPTION', 'COMPUTE_EPHEMERAL_ENCRYPTION_PLAIN'}),
    # virtio_sound_filter -------------------------------------------------------------------
    'sound: the virtio model needs COMPUTE_SOUND_MODEL_VIRTIO':
        Row(virtio_sound_filter, spec(image={'hw_sound_model': 'virtio'}),
            {'COMPUTE_SOUND_MODEL_VIRTIO'}),
    'sound: another model asks nothing':
        Row(virtio_sound_filter, spec(extra_specs={'hw:sound_model': 'ich9'}), set()),
    'sound: a spec without an image reads the flavor (Nova crashes, 8.10)':
        Row(virtio_sound_filter, spec(no_image=True, extra_specs={'hw:sound_model': 'virtio'}),
            {'COMPUTE_SOUND_MODEL_VIRTIO'}),
    # tpm_secret_security_filter ------------------------------------------------------------
    'vTPM secret security: user by default':
        Row(tpm_secret_security_filter, spec(extra_specs={'hw:tpm_version': '2.0'}),
            {'COMPUTE_SECURITY_TPM_SECRET_SECURITY_USER'}),
    'vTPM secret security: host, from the flavor':
        Row(tpm_secret_security_filter,
            spec(image={'hw_tpm_version': '2.0'},
                 extra_specs={'hw:tpm_secret_security': 'host'}),
            {'COMPUTE_SECURITY_TPM_SECRET_SECURITY_HOST'}),
    'vTPM secret security: deployment':
        Row(tpm_secret_security_filter,
            spec(extra_specs={'hw:tpm_version': '1.2', 'hw:tpm_secret_security': 'deployment'}),
            {'COMPUTE_SECURITY_TPM_SECRET_SECURITY_DEPLOYMENT'}),
    'vTPM secret security: no vTPM, no trait':
        Row(tpm_secret_security_filter, spec(extra_specs={'hw:tpm_secret_security': 'host'}),
            set()),
    'vTPM secret security: a spec without an image reads the flavor (Nova crashes, 8.10)':
        Row(tpm_secret_security_filter, spec(no_image=True, extra_specs={'hw:tpm_version': '2.0'}),
            {'COMPUTE_SECURITY_TPM_SECRET_SECURITY_USER'}),
}


@pytest.mark.parametrize('row', ROWS.values(), ids=ROWS.keys())
def test_trait_filters_require_exactly_these_root_traits(row: Row) -> None:
    before = set(row.spec.request_level_params.root_required)

    acted = row.request_filter(row.spec, None, make_conf(scheduler=row.options))

    assert acted is bool(row.required)
    assert row.spec.request_level_params.root_required == before | row.required
    assert row.spec.request_level_params.root_forbidden == set()
    assert row.spec.requested_destination is None


GATED = [require_image_type_support, transform_image_metadata]


@pytest.mark.parametrize('request_filter', GATED, ids=lambda f: f.__name__)
def test_gated_filters_without_a_configuration_use_novas_default_off(
        request_filter: RequestFilter) -> None:
    s = spec(image={'hw_disk_bus': 'virtio'})

    assert request_filter(s, None, None) is False
    assert s.request_level_params.root_required == set()


CONTRADICTIONS = {
    'packed ring true in the flavor, false in the image':
        (packed_virtqueue_filter,
         spec(extra_specs={'hw:virtio_packed_ring': 'true'},
              image={'hw_virtio_packed_ring': False}), 'hw:virtio_packed_ring'),
    'ephemeral encryption true in the flavor, false in the image':
        (ephemeral_encryption_filter,
         spec(extra_specs={'hw:ephemeral_encryption': 'true'},
              image={'hw_ephemeral_encryption': False}), 'hw_ephemeral_encryption'),
    'two ephemeral encryption formats':
        (ephemeral_encryption_filter,
         spec(extra_specs={'hw:ephemeral_encryption': 'true',
                           'hw:ephemeral_encryption_format': 'luks'},
              image={'hw_ephemeral_encryption_format': 'plain'}), 'conflicts'),
    'an unknown ephemeral encryption format':
        (ephemeral_encryption_filter,
         spec(extra_specs={'hw:ephemeral_encryption': 'true',
                           'hw:ephemeral_encryption_format': 'rot13'}), "'rot13'"),
    'an unknown sound model':
        (virtio_sound_filter, spec(extra_specs={'hw:sound_model': 'theremin'}), "'theremin'"),
    'two sound models':
        (virtio_sound_filter,
         spec(extra_specs={'hw:sound_model': 'virtio'}, image={'hw_sound_model': 'ich9'}),
         'hw_sound_model'),
    'an unknown TPM version':
        (tpm_secret_security_filter, spec(extra_specs={'hw:tpm_version': '3.0'}), "'3.0'"),
}


@pytest.mark.parametrize('request_filter, s, reason', CONTRADICTIONS.values(),
                         ids=CONTRADICTIONS.keys())
def test_a_contradicting_flavor_and_image_is_refused_with_the_reason(
        request_filter: RequestFilter, s: RequestSpec, reason: str) -> None:
    with pytest.raises(RequestTranslationError) as info:
        request_filter(s, None, None)
    assert reason in str(info.value)


def test_an_unknown_tpm_secret_security_fails_the_request_as_in_nova() -> None:
    s = spec(extra_specs={'hw:tpm_version': '2.0', 'hw:tpm_secret_security': 'cloud'})

    with pytest.raises(RequestFilterFailed, match="TPM secret security 'cloud' is not supported"):
        tpm_secret_security_filter(s, None, None)


def test_an_unknown_image_metadata_trait_is_logged_as_a_warning(caplog) -> None:
    s = spec(image={'hw_video_model': 'hologram'})

    with caplog.at_level('WARNING', logger=trait_filters.__name__):
        assert transform_image_metadata(s, None, make_conf(
            scheduler={'image_metadata_prefilter': True})) is False

    assert "'COMPUTE_GRAPHICS_MODEL_HOLOGRAM'" in caplog.text
    assert 'hw_video_model' in caplog.text


def test_ports_without_pci_requests_are_reported_as_unjudged(caplog) -> None:
    s = spec(requested_networks=[{'port_id': PORT}])

    with caplog.at_level('WARNING', logger=trait_filters.__name__):
        remote_managed_ports_filter(s, None, None)

    assert 'whether a port is remote-managed is unknown' in caplog.text


# -- owner_nova_filter -------------------------------------------------------------------------
def test_owner_nova_is_required_of_the_root_and_of_pci_alias_groups_only() -> None:
    alias = {'count': 1, 'alias_name': 'a16', 'request_id': ALIAS_REQUEST, 'spec': [{}]}
    s = spec(pci_requests=pci_requests(alias, port_pci_request('False')),
             requested_resources=[
                 RequestGroup(requester_id=f'{ALIAS_REQUEST}-0', resources={'CUSTOM_A16': 1}),
                 RequestGroup(requester_id=PORT, resources={'NET_BW_EGR_KILOBIT_PER_SEC': 10})])

    assert owner_nova_filter(s, None, None) is True

    assert s.request_level_params.root_required == {'OWNER_NOVA'}
    assert s.requested_resources[0].required_traits == {'OWNER_NOVA'}
    assert s.requested_resources[1].required_traits == set()


def test_owner_nova_is_not_in_the_default_request_filters() -> None:
    # Nova adds it only once every compute runs Nova 34; see the option's help.
    assert 'owner_nova_filter' not in make_conf().scheduler.request_filters
