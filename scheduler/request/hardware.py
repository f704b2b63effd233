"""What a flavor and image ask of the host's virtual hardware (``nova.virt.hardware``).

Pure readers of flavor extra specs (``hw:<key>``, strings) and image
properties (``hw_<key>``, already coerced by the codec: booleans are bools),
shared by the request translation and the request filters. Where Nova raises
(a flavor/image conflict, a value outside Nova's enum) these raise
RequestTranslationError: Nova's API refuses such flavors and images, so only
stale data gets here, and the caller answers InvalidInput.

``image_props`` is the image's properties, or an empty mapping when the spec
carries no image (Nova's request filters crash on some of these paths then,
``nova/scheduler/request_filter.py``).
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import os_traits
from oslo_utils import strutils

from scheduler.exceptions import RequestTranslationError
from scheduler.objects.spec import Flavor

LOG = logging.getLogger(__name__)

# Nova's enums (nova/objects/fields.py).
TPM_VERSIONS = ('1.2', '2.0')
TPM_MODEL_TIS, TPM_MODEL_CRB = 'tpm-tis', 'tpm-crb'
TPM_MODELS = (TPM_MODEL_TIS, TPM_MODEL_CRB)
TPM_SECRET_SECURITY = ('user', 'host', 'deployment')
SECURE_BOOT_POLICIES = ('required', 'disabled', 'optional')
MAXPHYSADDR_MODES = ('passthrough', 'emulate')
PCI_NUMA_POLICIES = ('required', 'legacy', 'preferred', 'socket')
SOUND_MODELS = ('sb16', 'es1370', 'pcspk', 'ac97', 'ich6', 'ich9', 'usb', 'virtio')
EPHEMERAL_ENCRYPTION_FORMATS = ('plain', 'luks', 'luksv2')


@dataclass(frozen=True)
class MemEncryptionModel:
    name: str
    trait: str
    needs_stateless_firmware: bool
    forbids_video: bool = False


MEM_ENCRYPTION_MODELS = {m.name: m for m in (
    MemEncryptionModel('amd-sev', os_traits.HW_CPU_X86_AMD_SEV, False),
    MemEncryptionModel('amd-sev-es', os_traits.HW_CPU_X86_AMD_SEV_ES, False),
    MemEncryptionModel('amd-sev-snp', os_traits.HW_CPU_X86_AMD_SEV_SNP, True),
    MemEncryptionModel('intel-tdx', os_traits.HW_CPU_X86_INTEL_TDX, True, forbids_video=True),
)}
DEFAULT_MEM_ENCRYPTION_MODEL = 'amd-sev'


@dataclass(frozen=True)
class VTPM:
    version: str
    model: str


def _extra_specs(flavor: Flavor) -> Mapping[str, str]:
    return flavor.extra_specs or {}


def flavor_image_values(key: str, flavor: Flavor, image_props: Mapping[str, Any], *,
                        prefix: str = 'hw') -> tuple[Any, Any]:
    """(flavor ``<prefix>:<key>``, image ``<prefix>_<key>``), each None when unset."""
    return (_extra_specs(flavor).get(f'{prefix}:{key}'),
            image_props.get(f'{prefix}_{key}'))


def unique_value(key: str, flavor: Flavor, image_props: Mapping[str, Any], *,
                 prefix: str = 'hw') -> Any:
    """The value the flavor or the image sets; both setting different values conflict."""
    flavor_value, image_value = flavor_image_values(key, flavor, image_props, prefix=prefix)
    if flavor_value and image_value and flavor_value != image_value:
        raise conflict(f'{prefix}:{key}', flavor_value, f'{prefix}_{key}', image_value)
    return flavor_value or image_value


def conflict(flavor_key: str, flavor_value: Any, image_key: str,
             image_value: Any) -> RequestTranslationError:
    return RequestTranslationError(
        f'the flavor extra spec {flavor_key}={flavor_value!r} conflicts with the image '
        f'property {image_key}={image_value!r}')


def _one_of(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise RequestTranslationError(
            f'{what} {value!r} is not one of {", ".join(allowed)}')
    return value


def _flavor_bool(value: str | None) -> bool | None:
    # Nova: strutils.bool_from_string, so an unknown word reads as False.
    return None if value is None else strutils.bool_from_string(value)


def _image_bool(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    return strutils.bool_from_string(value)


def _bool_pair(key: str, flavor: Flavor, image_props: Mapping[str, Any]) -> bool:
    """A boolean both may set (Nova's packed ring / ephemeral encryption / memory
    encryption rule): explicit values that differ conflict; either True asks."""
    flavor_raw, image_raw = flavor_image_values(key, flavor, image_props)
    flavor_value, image_value = _flavor_bool(flavor_raw), _image_bool(image_raw)
    if flavor_value is not None and image_value is not None and flavor_value != image_value:
        raise conflict(f'hw:{key}', flavor_raw, f'hw_{key}', image_raw)
    return bool(flavor_value or image_value)


# -- request filters ---------------------------------------------------------------------------
def packed_virtqueue_requested(flavor: Flavor, image_props: Mapping[str, Any]) -> bool:
    return _bool_pair('virtio_packed_ring', flavor, image_props)


def ephemeral_encryption_requested(flavor: Flavor, image_props: Mapping[str, Any]) -> bool:
    return _bool_pair('ephemeral_encryption', flavor, image_props)


def ephemeral_encryption_format(flavor: Flavor, image_props: Mapping[str, Any]) -> str | None:
    value = unique_value('ephemeral_encryption_format', flavor, image_props)
    if not value:
        return None
    return _one_of(value, EPHEMERAL_ENCRYPTION_FORMATS, 'ephemeral encryption format')


def sound_model(flavor: Flavor, image_props: Mapping[str, Any]) -> str | None:
    value = unique_value('sound_model', flavor, image_props)
    if not value:
        return None
    return _one_of(value, SOUND_MODELS, 'sound device model')


def vtpm(flavor: Flavor, image_props: Mapping[str, Any]) -> VTPM | None:
    """The requested vTPM (``hw:tpm_version`` / ``hw_tpm_version`` turn it on)."""
    version = unique_value('tpm_version', flavor, image_props)
    if version is None:
        return None
    _one_of(version, TPM_VERSIONS, 'TPM version')
    model = unique_value('tpm_model', flavor, image_props)
    if model is None:
        model = TPM_MODEL_TIS
    _one_of(model, TPM_MODELS, 'TPM model')
    if model == TPM_MODEL_CRB and version != '2.0':
        raise RequestTranslationError('TPM model tpm-crb is only valid with TPM version 2.0')
    return VTPM(version=version, model=model)


def tpm_secret_security(flavor: Flavor) -> str:
    """``hw:tpm_secret_security``, default ``user`` (flavor only, as in Nova: an image
    property would lock the policy in, since a vTPM server cannot be rebuilt).

    Not validated here: the request filter fails the request for an unknown value.
    """
    return _extra_specs(flavor).get('hw:tpm_secret_security') or 'user'


# -- translation -------------------------------------------------------------------------------
def secure_boot_policy(flavor: Flavor, image_props: Mapping[str, Any]) -> str | None:
    value = unique_value('secure_boot', flavor, image_props, prefix='os')
    if value is None:
        return None
    return _one_of(value, SECURE_BOOT_POLICIES, 'secure boot policy')


def maxphysaddr_mode(flavor: Flavor, image_props: Mapping[str, Any]) -> str | None:
    value = unique_value('maxphysaddr_mode', flavor, image_props)
    if value is None:
        return None
    return _one_of(value, MAXPHYSADDR_MODES, 'maxphysaddr mode')


def pci_numa_policy(flavor: Flavor, image_props: Mapping[str, Any]) -> str | None:
    flavor_value, image_value = flavor_image_values('pci_numa_affinity_policy', flavor,
                                                    image_props)
    if flavor_value and image_value and flavor_value != image_value:
        raise conflict('hw:pci_numa_affinity_policy', flavor_value,
                       'hw_pci_numa_affinity_policy', image_value)
    policy = flavor_value or image_value
    if not policy:
        return None
    return _one_of(policy, PCI_NUMA_POLICIES, 'PCI NUMA affinity policy')


def stateless_firmware(image_props: Mapping[str, Any]) -> tuple[bool, str | None]:
    """(requested, warning): ``hw_firmware_stateless`` counts only with UEFI firmware."""
    value = _image_bool(image_props.get('hw_firmware_stateless'))
    if value is None:
        return False, None
    if image_props.get('hw_firmware_type') != 'uefi':
        return False, ("The image property 'hw_firmware_stateless' is set for non UEFI "
                       "firmware type. This property is ignored.")
    return value, None


def pmem_labels(flavor: Flavor) -> list[str]:
    """``hw:pmem=4GB,4GB,SMALL`` -> ['4GB', '4GB', 'SMALL'] (one namespace each)."""
    value = _extra_specs(flavor).get('hw:pmem') or ''
    return [label.strip() for label in value.split(',') if label.strip()]


def mem_encryption(flavor: Flavor, image_props: Mapping[str, Any]) -> MemEncryptionModel | None:
    """The memory encryption model requested (``hw:mem_encryption`` / ``hw_mem_encryption``),
    checked as Nova's ``get_mem_encryption_constraint`` checks it."""
    flavor_raw, image_raw = flavor_image_values('mem_encryption', flavor, image_props)
    flavor_value, image_value = _flavor_bool(flavor_raw), _image_bool(image_raw)
    if not flavor_value and not image_value:
        return None
    if flavor_value is not None and image_value is not None and flavor_value != image_value:
        raise conflict('hw:mem_encryption', flavor_raw, 'hw_mem_encryption', image_raw)
    flavor_model, image_model = flavor_image_values('mem_encryption_model', flavor, image_props)
    if flavor_model is not None and image_model is not None and flavor_model != image_model:
        raise conflict('hw:mem_encryption_model', flavor_model, 'hw_mem_encryption_model',
                       image_model)
    name = image_model or flavor_model or DEFAULT_MEM_ENCRYPTION_MODEL
    model = MEM_ENCRYPTION_MODELS.get(name)
    if model is None:
        raise RequestTranslationError(
            f'memory encryption model {name!r} is not one of '
            f'{", ".join(MEM_ENCRYPTION_MODELS)}')
    _check_mem_encryption(model, image_props)
    return model


def _check_mem_encryption(model: MemEncryptionModel, image_props: Mapping[str, Any]) -> None:
    if image_props.get('hw_firmware_type') != 'uefi':
        raise RequestTranslationError(
            "memory encryption is requested but the image does not set the property "
            "hw_firmware_type to 'uefi'")
    machine_type = image_props.get('hw_machine_type')
    # A versioned machine type such as pc-q35-8.2 is fine: Nova matches a substring.
    if machine_type is not None and 'q35' not in machine_type:
        raise RequestTranslationError(
            f'memory encryption model {model.name} needs a q35 machine type, the image asks '
            f'for hw_machine_type={machine_type!r}')
    if model.needs_stateless_firmware and not stateless_firmware(image_props)[0]:
        raise RequestTranslationError(
            f'memory encryption model {model.name} needs stateless firmware: the image must '
            f'set hw_firmware_stateless=True')
    if model.forbids_video and image_props.get('hw_video_model') != 'none':
        raise RequestTranslationError(
            f"memory encryption model {model.name} cannot have a video device: the image "
            f"must set hw_video_model='none'")
