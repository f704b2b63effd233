"""Request filters that require capability traits of the compute node (root) provider.

Each adds to ``request_level_params.root_required``: the compute service reports
these traits on its compute node provider, so forbidding hosts without them is
a Placement query instead of a host filter. Nova 34's order and triggers
(``nova/scheduler/request_filter.py``); where Nova crashes on a spec without an
image (``packed_virtqueue_filter`` and three others read the image's properties
unguarded), an absent image reads as one without properties.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

import os_traits

from scheduler.exceptions import RequestFilterFailed
from scheduler.objects.spec import ImageMetaProps, RequestSpec
from scheduler.request import hardware
from scheduler.request.filters import option

LOG = logging.getLogger(__name__)

_STANDARD_TRAITS = frozenset(os_traits.get_traits())

# Image property -> trait prefix (Nova's transform_image_metadata). hw_viommu_model
# is the one Nova gets wrong: it builds COMPUTE_VIOMMU_<MODEL>, os-traits names the
# traits COMPUTE_VIOMMU_MODEL_<MODEL> (nova/scheduler/request_filter.py).
IMAGE_PROPERTY_TRAIT_PREFIXES = {
    'hw_cdrom_bus': 'COMPUTE_STORAGE_BUS',
    'hw_disk_bus': 'COMPUTE_STORAGE_BUS',
    'hw_video_model': 'COMPUTE_GRAPHICS_MODEL',
    'hw_vif_model': 'COMPUTE_NET_VIF_MODEL',
    'hw_architecture': 'HW_ARCH',
    'hw_emulation_architecture': 'COMPUTE_ARCH',
    'hw_viommu_model': 'COMPUTE_VIOMMU_MODEL',
}
# Nova's Architecture field stores these spellings under their canonical name.
_ARCHITECTURE_ALIASES = {'amd64': 'x86_64', 'i386': 'i686', 'i486': 'i686', 'i586': 'i686',
                         'x86_32': 'i686', 'x86_32p': 'i686'}
_ARCHITECTURE_PROPERTIES = ('hw_architecture', 'hw_emulation_architecture')

_TPM_SECRET_SECURITY_TRAITS = {
    'user': os_traits.COMPUTE_SECURITY_TPM_SECRET_SECURITY_USER,
    'host': os_traits.COMPUTE_SECURITY_TPM_SECRET_SECURITY_HOST,
    'deployment': os_traits.COMPUTE_SECURITY_TPM_SECRET_SECURITY_DEPLOYMENT,
}


def _image_props(spec: RequestSpec) -> Mapping[str, Any]:
    return spec.image.properties if spec.image is not None else ImageMetaProps()


def _require(spec: RequestSpec, trait: str, filter_name: str) -> bool:
    spec.request_level_params.root_required.add(trait)
    LOG.debug('%s request filter added required trait %s', filter_name, trait)
    return True


def require_image_type_support(spec: RequestSpec, catalog: Any, conf: Any) -> bool:
    """``[scheduler] query_placement_for_image_type_support``: the host must support
    the image's disk format (``COMPUTE_IMAGE_TYPE_<FORMAT>``). Not for
    boot-from-volume (the volume, not the compute host, holds the image)."""
    if not option(conf, 'query_placement_for_image_type_support') or spec.is_bfv:
        return False
    disk_format = spec.image.disk_format if spec.image is not None else None
    if not disk_format:
        # Nova crashes here; a spec without an image or disk format has no type to require.
        LOG.debug('require_image_type_support: the request names no image disk format')
        return False
    trait = f'COMPUTE_IMAGE_TYPE_{disk_format.upper()}'
    if trait not in _STANDARD_TRAITS:
        LOG.warning('require_image_type_support: computed trait name %r is not a standard '
                    'trait (is os-traits up to date?); the image type is not required', trait)
        return False
    return _require(spec, trait, 'require_image_type_support')


def transform_image_metadata(spec: RequestSpec, catalog: Any, conf: Any) -> bool:
    """``[scheduler] image_metadata_prefilter``: image properties naming virtual
    hardware (disk and CD-ROM bus, video, VIF and vIOMMU model, architecture,
    emulated architecture) -> the traits of hosts that provide it.

    A property whose trait os-traits does not know is left out with a warning
    and the others still count (Nova's ``transform_image_metadata`` drops them all).
    """
    if not option(conf, 'image_metadata_prefilter'):
        return False
    acted = False
    for trait in image_metadata_traits(_image_props(spec)):
        acted = _require(spec, trait, 'transform_image_metadata')
    return acted


def image_metadata_traits(image_props: Mapping[str, Any]) -> Iterator[str]:
    """The standard traits ``transform_image_metadata`` requires for these properties."""
    for key, prefix in IMAGE_PROPERTY_TRAIT_PREFIXES.items():
        value = image_props.get(key)
        if not value:
            continue
        value = str(value).strip().lower()
        if key in _ARCHITECTURE_PROPERTIES:
            value = _ARCHITECTURE_ALIASES.get(value, value)
        trait = f'{prefix}_{value.replace("-", "_").upper()}'
        if trait in _STANDARD_TRAITS:
            yield trait
        else:
            LOG.warning('transform_image_metadata: image property %s=%r gives the trait name '
                        '%r, which is not a standard trait (is os-traits up to date?); only '
                        'this property is left out of the request', key, image_props.get(key),
                        trait)


def accelerators_filter(spec: RequestSpec, catalog: Any, conf: Any) -> bool:
    """A flavor with ``accel:device_profile`` needs a compute service able to
    handle accelerator requests (``COMPUTE_ACCELERATORS``)."""
    if not (spec.flavor.extra_specs or {}).get('accel:device_profile'):
        return False
    return _require(spec, os_traits.COMPUTE_ACCELERATORS, 'accelerators_filter')


def packed_virtqueue_filter(spec: RequestSpec, catalog: Any, conf: Any) -> bool:
    """``hw:virtio_packed_ring`` / ``hw_virtio_packed_ring`` true ->
    ``COMPUTE_NET_VIRTIO_PACKED``."""
    if not hardware.packed_virtqueue_requested(spec.flavor, _image_props(spec)):
        return False
    return _require(spec, os_traits.COMPUTE_NET_VIRTIO_PACKED, 'packed_virtqueue_filter')


def remote_managed_ports_filter(spec: RequestSpec, catalog: Any, conf: Any) -> bool:
    """A ``remote-managed`` port needs ``COMPUTE_REMOTE_MANAGED_PORTS``.

    Nova asks Neutron for each requested port's VNIC type. This service does
    not talk to Neutron; the request says it anyway: for every SR-IOV class
    port (remote-managed is one) Nova's API creates a PCI request whose spec
    carries ``remote_managed`` = ``'True'`` exactly when the VNIC type is
    remote-managed. Those PCI requests travel in the RequestSpec (and, unlike
    ``requested_networks``, are kept for moves), so the trait is required
    whenever such a port is attached, including on moves, where Nova's filter
    sees no requested networks and adds nothing.
    """
    if remote_managed_port_requested(spec):
        return _require(spec, os_traits.COMPUTE_REMOTE_MANAGED_PORTS,
                        'remote_managed_ports_filter')
    if spec.pci_requests is None and any(n.get('port_id') for n in spec.requested_networks):
        LOG.warning('remote_managed_ports_filter: the request names ports but carries no PCI '
                    'requests, so whether a port is remote-managed is unknown; '
                    'COMPUTE_REMOTE_MANAGED_PORTS is not required')
    return False


def remote_managed_port_requested(spec: RequestSpec) -> bool:
    for request in pci_requests(spec):
        if request.get('alias_name') is not None:
            continue  # a flavor PCI alias, not a port
        for device_spec in request.get('spec') or ():
            if str((device_spec or {}).get('remote_managed', '')).lower() == 'true':
                return True
    return False


def pci_requests(spec: RequestSpec) -> list[dict[str, Any]]:
    """The InstancePCIRequest fields of ``spec.pci_requests`` (kept as primitives)."""
    container = spec.pci_requests or {}
    data = container.get('nova_object.data', container)
    return [request.get('nova_object.data', request)
            for request in (data.get('requests') or ()) if isinstance(request, dict)]


def ephemeral_encryption_filter(spec: RequestSpec, catalog: Any, conf: Any) -> bool:
    """``hw:ephemeral_encryption`` / ``hw_ephemeral_encryption`` -> the host encrypts
    ephemeral storage (``COMPUTE_EPHEMERAL_ENCRYPTION``), in the requested format
    when one is given (``COMPUTE_EPHEMERAL_ENCRYPTION_<FORMAT>``)."""
    image_props = _image_props(spec)
    if not hardware.ephemeral_encryption_requested(spec.flavor, image_props):
        return False
    _require(spec, os_traits.COMPUTE_EPHEMERAL_ENCRYPTION, 'ephemeral_encryption_filter')
    encryption_format = hardware.ephemeral_encryption_format(spec.flavor, image_props)
    if encryption_format:
        _require(spec, f'COMPUTE_EPHEMERAL_ENCRYPTION_{encryption_format.upper()}',
                 'ephemeral_encryption_filter')
    return True


def virtio_sound_filter(spec: RequestSpec, catalog: Any, conf: Any) -> bool:
    """Sound model ``virtio`` (``hw:sound_model`` / ``hw_sound_model``) ->
    ``COMPUTE_SOUND_MODEL_VIRTIO``."""
    if hardware.sound_model(spec.flavor, _image_props(spec)) != 'virtio':
        return False
    return _require(spec, os_traits.COMPUTE_SOUND_MODEL_VIRTIO, 'virtio_sound_filter')


def tpm_secret_security_filter(spec: RequestSpec, catalog: Any, conf: Any) -> bool:
    """A vTPM guest needs a host that keeps its secret as ``hw:tpm_secret_security``
    asks (``user`` by default): ``COMPUTE_SECURITY_TPM_SECRET_SECURITY_<POLICY>``.
    An unknown policy fails the request, as in Nova."""
    if hardware.vtpm(spec.flavor, _image_props(spec)) is None:
        return False
    security = hardware.tpm_secret_security(spec.flavor)
    trait = _TPM_SECRET_SECURITY_TRAITS.get(security)
    if trait is None:
        LOG.warning("TPM secret security '%s' is not supported.", security)
        raise RequestFilterFailed(f"TPM secret security '{security}' is not supported.")
    return _require(spec, trait, 'tpm_secret_security_filter')


def owner_nova_filter(spec: RequestSpec, catalog: Any, conf: Any) -> bool:
    """Only Nova's own providers: ``OWNER_NOVA`` on the root provider and on the
    request groups of PCI devices (flavor PCI aliases with PCI in Placement).

    Nova adds it only once every nova-compute reports service version 73 (Nova
    34), the first to report the trait; this service cannot read service
    versions, so the filter is not in the default ``[scheduler] request_filters``:
    list it once every compute node runs Nova 34. Older computes would otherwise
    all be excluded.
    """
    spec.request_level_params.root_required.add(os_traits.OWNER_NOVA)
    alias_request_ids = {r['request_id'] for r in pci_requests(spec)
                         if r.get('alias_name') is not None and r.get('request_id')}
    for group in spec.requested_resources:
        # PCI request groups are named <pci request id>-<index>.
        if group.requester_id and group.requester_id.rsplit('-', 1)[0] in alias_request_ids:
            group.required_traits.add(os_traits.OWNER_NOVA)
    LOG.debug('owner_nova_filter request filter added required trait %s', os_traits.OWNER_NOVA)
    return True
