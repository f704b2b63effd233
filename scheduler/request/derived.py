"""Placement requirements derived from ``hw:*`` extra specs and image properties.

Nova's ``ResourceRequest._translate_*_request`` steps (``nova/scheduler/utils.py``,
called by ``ResourceRequest.from_request_spec``), run after the flavor's base
amounts: memory encryption, persistent memory, vTPM, PCI NUMA affinity
``socket``, secure boot, maxphysaddr and stateless firmware. Everything goes
to the unsuffixed request group, as in Nova: traits as required traits of the
group (not ``root_required``), because some of them live on child providers
(Nova 34 puts MEM_ENCRYPTION_CONTEXT and its model trait on a
``<node>_<model>`` child of the compute node).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import os_resource_classes
import os_traits

from scheduler.objects.spec import Flavor
from scheduler.request import hardware

MEM_ENCRYPTION_CONTEXT = os_resource_classes.MEM_ENCRYPTION_CONTEXT

_TPM_MODEL_TRAITS = {hardware.TPM_MODEL_TIS: os_traits.COMPUTE_SECURITY_TPM_TIS,
                     hardware.TPM_MODEL_CRB: os_traits.COMPUTE_SECURITY_TPM_CRB}
_TPM_VERSION_TRAITS = {'1.2': os_traits.COMPUTE_SECURITY_TPM_1_2,
                       '2.0': os_traits.COMPUTE_SECURITY_TPM_2_0}
_MAXPHYSADDR_TRAITS = {'passthrough': os_traits.COMPUTE_ADDRESS_SPACE_PASSTHROUGH,
                       'emulate': os_traits.COMPUTE_ADDRESS_SPACE_EMULATED}


@dataclass
class Derived:
    # Amounts that replace the unsuffixed group's amount of that class (Nova sets them).
    resources: dict[str, int] = field(default_factory=dict)
    required_traits: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)


def derived_requirements(flavor: Flavor, image_props: Mapping[str, Any]) -> Derived:
    """What the hardware requests add to the unsuffixed group.

    Raises RequestTranslationError for conflicting or invalid values.
    """
    derived = Derived()
    _mem_encryption(derived, flavor, image_props)
    _pmem(derived, flavor)
    _vtpm(derived, flavor, image_props)
    if hardware.pci_numa_policy(flavor, image_props) == 'socket':
        derived.required_traits.add(os_traits.COMPUTE_SOCKET_PCI_NUMA_AFFINITY)
    if hardware.secure_boot_policy(flavor, image_props) == 'required':
        derived.required_traits.add(os_traits.COMPUTE_SECURITY_UEFI_SECURE_BOOT)
    mode = hardware.maxphysaddr_mode(flavor, image_props)
    if mode is not None:
        derived.required_traits.add(_MAXPHYSADDR_TRAITS[mode])
    stateless, warning = hardware.stateless_firmware(image_props)
    if stateless:
        derived.required_traits.add(os_traits.COMPUTE_SECURITY_STATELESS_FIRMWARE)
    if warning:
        derived.warnings.append(warning)
    return derived


def _mem_encryption(derived: Derived, flavor: Flavor, image_props: Mapping[str, Any]) -> None:
    model = hardware.mem_encryption(flavor, image_props)
    if model is None:
        return
    # One encryption context (an ASID slot for SEV) per guest.
    derived.resources[MEM_ENCRYPTION_CONTEXT] = 1
    derived.required_traits.add(model.trait)


def _pmem(derived: Derived, flavor: Flavor) -> None:
    for label, count in Counter(hardware.pmem_labels(flavor)).items():
        # The class the libvirt driver reports for a namespace of that label.
        derived.resources[os_resource_classes.normalize_name(f'PMEM_NAMESPACE_{label}')] = count


def _vtpm(derived: Derived, flavor: Flavor, image_props: Mapping[str, Any]) -> None:
    config = hardware.vtpm(flavor, image_props)
    if config is None:
        return
    derived.required_traits.add(_TPM_MODEL_TRAITS[config.model])
    derived.required_traits.add(_TPM_VERSION_TRAITS[config.version])
