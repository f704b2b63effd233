"""Extra specs and image properties that become Placement requirements (Nova's
ResourceRequest._translate_*_request, nova/scheduler/utils.py), the CPU policies'
finer points, Nova's ``all_required_traits`` and the PCPU fallback query.

Queries are compared decoded, as (parameter, value) pairs. The specs are
nova_spec's: a 4 vCPU, 4096 MB, 40 GB flavor after Nova's always-on request filters.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import pytest

from scheduler.conf import workarounds
from scheduler.exceptions import RequestTranslationError
from scheduler.objects.spec import RequestGroup, RequestSpec
from scheduler.request.translate import all_required_traits, build_query, fallback_query_needed
from tests.builders import make_conf, nova_spec
from tests.fixtures.request_specs import BASE, LIMIT, PORT_UUID, ROOT

UEFI = {'hw_firmware_type': 'uefi'}
SEV = 'resources=DISK_GB:40,MEMORY_MB:4096,MEM_ENCRYPTION_CONTEXT:1,VCPU:4'


def params(*pairs: str) -> list[tuple[str, str]]:
    return sorted(tuple(p.split('=', 1)) for p in pairs)  # type: ignore[misc]


@dataclass
class Row:
    spec: RequestSpec
    expected: list[str]
    pinning_translate: bool = True
    warnings: list[str] = field(default_factory=list)


ROWS = {
    # memory encryption -----------------------------------------------------------------------
    'hw:mem_encryption asks one encryption context and the AMD SEV trait (the default model)':
        Row(nova_spec(extra_specs={'hw:mem_encryption': 'true'}, image_props=UEFI),
            ['limit=1000', 'required=HW_CPU_X86_AMD_SEV', SEV, ROOT]),
    'the image property hw_mem_encryption asks the same':
        Row(nova_spec(image_props={**UEFI, 'hw_mem_encryption': True}),
            ['limit=1000', 'required=HW_CPU_X86_AMD_SEV', SEV, ROOT]),
    'the model comes from hw:mem_encryption_model':
        Row(nova_spec(extra_specs={'hw:mem_encryption': 'yes',
                                   'hw:mem_encryption_model': 'amd-sev-es'},
                      image_props={**UEFI, 'hw_machine_type': 'pc-q35-8.2'}),
            ['limit=1000', 'required=HW_CPU_X86_AMD_SEV_ES', SEV, ROOT]),
    'SEV-SNP needs stateless firmware, which is required of the host too':
        Row(nova_spec(image_props={**UEFI, 'hw_mem_encryption': True,
                                   'hw_mem_encryption_model': 'amd-sev-snp',
                                   'hw_firmware_stateless': True}),
            ['limit=1000', 'required=COMPUTE_SECURITY_STATELESS_FIRMWARE,HW_CPU_X86_AMD_SEV_SNP',
             SEV, ROOT]),
    'Intel TDX with stateless firmware and no video device':
        Row(nova_spec(image_props={**UEFI, 'hw_mem_encryption': True,
                                   'hw_mem_encryption_model': 'intel-tdx',
                                   'hw_firmware_stateless': True, 'hw_video_model': 'none'}),
            ['limit=1000', 'required=COMPUTE_SECURITY_STATELESS_FIRMWARE,HW_CPU_X86_INTEL_TDX',
             SEV, ROOT]),
    'hw:mem_encryption=false asks nothing, whatever the image firmware':
        Row(nova_spec(extra_specs={'hw:mem_encryption': 'false'}), ['limit=1000', BASE, ROOT]),
    'memory encryption replaces an explicit MEM_ENCRYPTION_CONTEXT amount, as Nova does':
        Row(nova_spec(extra_specs={'hw:mem_encryption': 'true',
                                   'resources:MEM_ENCRYPTION_CONTEXT': '4'}, image_props=UEFI),
            ['limit=1000', 'required=HW_CPU_X86_AMD_SEV', SEV, ROOT]),
    # persistent memory -----------------------------------------------------------------------
    'hw:pmem asks one namespace of each label, counted':
        Row(nova_spec(extra_specs={'hw:pmem': '4GB, 4GB,small-ns'}),
            ['limit=1000', 'resources=CUSTOM_PMEM_NAMESPACE_4GB:2,CUSTOM_PMEM_NAMESPACE_SMALL_NS:1,'
             'DISK_GB:40,MEMORY_MB:4096,VCPU:4', ROOT]),
    'hw:pmem replaces an explicit amount of its class, as Nova does':
        Row(nova_spec(extra_specs={'hw:pmem': '4GB', 'resources:CUSTOM_PMEM_NAMESPACE_4GB': '3'}),
            ['limit=1000', 'resources=CUSTOM_PMEM_NAMESPACE_4GB:1,DISK_GB:40,MEMORY_MB:4096,VCPU:4',
             ROOT]),
    # vTPM -------------------------------------------------------------------------------------
    'a TPM 2.0 defaults to the TIS model':
        Row(nova_spec(extra_specs={'hw:tpm_version': '2.0'}),
            ['limit=1000', 'required=COMPUTE_SECURITY_TPM_2_0,COMPUTE_SECURITY_TPM_TIS', BASE,
             ROOT]),
    'a CRB TPM 2.0 from the image':
        Row(nova_spec(image_props={'hw_tpm_version': '2.0', 'hw_tpm_model': 'tpm-crb'}),
            ['limit=1000', 'required=COMPUTE_SECURITY_TPM_2_0,COMPUTE_SECURITY_TPM_CRB', BASE,
             ROOT]),
    'a TPM 1.2, flavor and image agreeing':
        Row(nova_spec(extra_specs={'hw:tpm_version': '1.2'}, image_props={'hw_tpm_version': '1.2'}),
            ['limit=1000', 'required=COMPUTE_SECURITY_TPM_1_2,COMPUTE_SECURITY_TPM_TIS', BASE,
             ROOT]),
    'a TPM model without a version asks nothing':
        Row(nova_spec(extra_specs={'hw:tpm_model': 'tpm-crb'}), ['limit=1000', BASE, ROOT]),
    # PCI NUMA affinity, secure boot, maxphysaddr, stateless firmware --------------------------
    'PCI NUMA affinity socket needs COMPUTE_SOCKET_PCI_NUMA_AFFINITY':
        Row(nova_spec(extra_specs={'hw:pci_numa_affinity_policy': 'socket'}),
            ['limit=1000', 'required=COMPUTE_SOCKET_PCI_NUMA_AFFINITY', BASE, ROOT]),
    'the other PCI NUMA policies have no trait':
        Row(nova_spec(image_props={'hw_pci_numa_affinity_policy': 'preferred'}),
            ['limit=1000', BASE, ROOT]),
    'secure boot required (flavor os:secure_boot)':
        Row(nova_spec(extra_specs={'os:secure_boot': 'required'}),
            ['limit=1000', 'required=COMPUTE_SECURITY_UEFI_SECURE_BOOT', BASE, ROOT]),
    'secure boot optional asks nothing':
        Row(nova_spec(image_props={'os_secure_boot': 'optional'}), ['limit=1000', BASE, ROOT]),
    'maxphysaddr passthrough':
        Row(nova_spec(extra_specs={'hw:maxphysaddr_mode': 'passthrough'}),
            ['limit=1000', 'required=COMPUTE_ADDRESS_SPACE_PASSTHROUGH', BASE, ROOT]),
    'maxphysaddr emulate (from the image)':
        Row(nova_spec(image_props={'hw_maxphysaddr_mode': 'emulate'}),
            ['limit=1000', 'required=COMPUTE_ADDRESS_SPACE_EMULATED', BASE, ROOT]),
    'stateless firmware with UEFI':
        Row(nova_spec(image_props={**UEFI, 'hw_firmware_stateless': True}),
            ['limit=1000', 'required=COMPUTE_SECURITY_STATELESS_FIRMWARE', BASE, ROOT]),
    'stateless firmware without UEFI is ignored with Nova\'s warning':
        Row(nova_spec(image_props={'hw_firmware_type': 'bios', 'hw_firmware_stateless': True}),
            ['limit=1000', BASE, ROOT],
            warnings=["'hw_firmware_stateless' is set for non UEFI firmware type"]),
    'stateless firmware false asks nothing':
        Row(nova_spec(image_props={**UEFI, 'hw_firmware_stateless': False}),
            ['limit=1000', BASE, ROOT]),
    # where they land ----------------------------------------------------------------------------
    'they stay in the unsuffixed group next to numbered groups':
        Row(nova_spec(extra_specs={'hw:tpm_version': '2.0', 'resources1:VGPU': '1'}),
            ['limit=1000', 'required=COMPUTE_SECURITY_TPM_2_0,COMPUTE_SECURITY_TPM_TIS', BASE,
             'resources1=VGPU:1', ROOT]),
    'without unsuffixed resources the traits are required of the root provider':
        Row(nova_spec(extra_specs={'resources:VCPU': '0', 'resources:MEMORY_MB': '0',
                                   'resources:DISK_GB': '0', 'resources1:VGPU': '1',
                                   'os:secure_boot': 'required'}),
            ['limit=1000', 'resources1=VGPU:1',
             'root_required=COMPUTE_SECURITY_UEFI_SECURE_BOOT,OWNER_NOVA,'
             '!COMPUTE_STATUS_DISABLED']),
    'the PCPU fallback query keeps them (only the pinning translation is off)':
        Row(nova_spec(extra_specs={'hw:cpu_policy': 'dedicated', 'hw:tpm_version': '2.0'}),
            ['limit=1000', 'required=COMPUTE_SECURITY_TPM_2_0,COMPUTE_SECURITY_TPM_TIS', BASE,
             ROOT], pinning_translate=False),
    'a spec without an image translates the flavor\'s hardware requests':
        Row(nova_spec(image=False, extra_specs={'hw:maxphysaddr_mode': 'emulate'}),
            ['limit=1000', 'required=COMPUTE_ADDRESS_SPACE_EMULATED', BASE, ROOT]),
    # CPU policies: what the existing translation already does, pinned down ---------------------
    'emulator threads isolate without pinning adds no PCPU (Nova: only dedicated/mixed)':
        Row(nova_spec(extra_specs={'hw:emulator_threads_policy': 'isolate'}),
            ['limit=1000', BASE, ROOT]),
    'the image thread policy applies when the flavor sets none':
        Row(nova_spec(extra_specs={'hw:cpu_policy': 'dedicated'},
                      image_props={'hw_cpu_thread_policy': 'isolate'}),
            ['limit=1000', 'required=!HW_CPU_HYPERTHREADING',
             'resources=DISK_GB:40,MEMORY_MB:4096,PCPU:4', ROOT]),
    'a flavor that prefers wins over the image (Nova: flavor_policy or image_policy)':
        Row(nova_spec(extra_specs={'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'prefer'},
                      image_props={'hw_cpu_thread_policy': 'isolate'}),
            ['limit=1000', 'resources=DISK_GB:40,MEMORY_MB:4096,PCPU:4', ROOT]),
}


@pytest.mark.parametrize('row', ROWS.values(), ids=ROWS.keys())
def test_hardware_requests_become_placement_requirements(row: Row) -> None:
    before = copy.deepcopy(row.spec)

    translated = build_query(row.spec, limit=LIMIT, pinning_translate=row.pinning_translate)

    assert translated.query.to_params() == params(*row.expected)
    for fragment in row.warnings:
        assert any(fragment in w for w in translated.warnings), translated.warnings
    if not row.warnings:
        assert translated.warnings == []
    assert row.spec == before, 'the translation must not modify the spec'


REFUSED = {
    'memory encryption without UEFI firmware':
        (nova_spec(extra_specs={'hw:mem_encryption': 'true'}), "hw_firmware_type to 'uefi'"),
    'memory encryption on in the flavor, off in the image':
        (nova_spec(extra_specs={'hw:mem_encryption': 'true'},
                   image_props={**UEFI, 'hw_mem_encryption': False}), 'hw_mem_encryption'),
    'two memory encryption models':
        (nova_spec(extra_specs={'hw:mem_encryption': 'true', 'hw:mem_encryption_model': 'amd-sev'},
                   image_props={**UEFI, 'hw_mem_encryption_model': 'amd-sev-es'}),
         'hw:mem_encryption_model'),
    'an unknown memory encryption model':
        (nova_spec(extra_specs={'hw:mem_encryption': 'true',
                                'hw:mem_encryption_model': 'arm-cca'}, image_props=UEFI),
         "'arm-cca'"),
    'memory encryption with a machine type other than q35':
        (nova_spec(extra_specs={'hw:mem_encryption': 'true'},
                   image_props={**UEFI, 'hw_machine_type': 'pc-i440fx-8.2'}), 'q35'),
    'SEV-SNP without stateless firmware':
        (nova_spec(extra_specs={'hw:mem_encryption': 'true',
                                'hw:mem_encryption_model': 'amd-sev-snp'}, image_props=UEFI),
         'stateless firmware'),
    'Intel TDX with a video device':
        (nova_spec(extra_specs={'hw:mem_encryption': 'true',
                                'hw:mem_encryption_model': 'intel-tdx'},
                   image_props={**UEFI, 'hw_firmware_stateless': True}), 'video'),
    'an unknown TPM version':
        (nova_spec(extra_specs={'hw:tpm_version': '3.0'}), "TPM version '3.0'"),
    'an unknown TPM model':
        (nova_spec(extra_specs={'hw:tpm_version': '2.0', 'hw:tpm_model': 'tpm-spapr'}),
         "TPM model 'tpm-spapr'"),
    'a CRB TPM 1.2':
        (nova_spec(extra_specs={'hw:tpm_version': '1.2', 'hw:tpm_model': 'tpm-crb'}),
         'only valid with TPM version 2.0'),
    'two TPM versions':
        (nova_spec(extra_specs={'hw:tpm_version': '1.2'}, image_props={'hw_tpm_version': '2.0'}),
         'hw_tpm_version'),
    'an unknown secure boot policy':
        (nova_spec(extra_specs={'os:secure_boot': 'always'}), "secure boot policy 'always'"),
    'an unknown maxphysaddr mode':
        (nova_spec(extra_specs={'hw:maxphysaddr_mode': 'host'}), "maxphysaddr mode 'host'"),
    'an unknown PCI NUMA affinity policy':
        (nova_spec(extra_specs={'hw:pci_numa_affinity_policy': 'nearest'}), "'nearest'"),
    'two PCI NUMA affinity policies':
        (nova_spec(extra_specs={'hw:pci_numa_affinity_policy': 'socket'},
                   image_props={'hw_pci_numa_affinity_policy': 'required'}),
         'hw_pci_numa_affinity_policy'),
    'a derived trait the flavor forbids':
        (nova_spec(extra_specs={'os:secure_boot': 'required',
                                'trait:COMPUTE_SECURITY_UEFI_SECURE_BOOT': 'forbidden'}),
         'both required and forbidden: COMPUTE_SECURITY_UEFI_SECURE_BOOT'),
}


@pytest.mark.parametrize('spec, reason', REFUSED.values(), ids=REFUSED.keys())
def test_contradictory_hardware_requests_are_refused_with_the_reason(
        spec: RequestSpec, reason: str) -> None:
    with pytest.raises(RequestTranslationError) as info:
        build_query(spec, limit=LIMIT)
    assert reason in str(info.value)


# -- Nova's ResourceRequest.all_required_traits (isolate_aggregates reads it) -------------------
def test_all_required_traits_gathers_every_group_but_not_root_required() -> None:
    spec = nova_spec(
        extra_specs={'trait:HW_CPU_X86_AVX2': 'required', 'trait:CUSTOM_MAINTENANCE': 'forbidden',
                     'resources1:VGPU': '1', 'trait1:CUSTOM_NVIDIA_A16': 'required',
                     'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'require',
                     'hw:tpm_version': '2.0', 'group_policy': 'none'},
        image_props={'traits_required': ['COMPUTE_NET_VIRTIO_PACKED']},
        requested_resources=[RequestGroup(requester_id=PORT_UUID, resources={'SRIOV_NET_VF': 1},
                                          required_traits={'CUSTOM_PHYSNET_PUBLIC'})])

    assert all_required_traits(spec) == {
        'HW_CPU_X86_AVX2', 'CUSTOM_NVIDIA_A16', 'HW_CPU_HYPERTHREADING',
        'COMPUTE_SECURITY_TPM_2_0', 'COMPUTE_SECURITY_TPM_TIS', 'COMPUTE_NET_VIRTIO_PACKED',
        'CUSTOM_PHYSNET_PUBLIC'}


# -- the PCPU fallback query ------------------------------------------------------------------
@pytest.mark.parametrize('extra_specs, disabled, needed', [
    ({'hw:cpu_policy': 'dedicated'}, False, True),
    ({'hw:cpu_policy': 'dedicated'}, True, False),
    # Nova's cpu_pinning_requested is only for 'dedicated', not for 'mixed'.
    ({'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '^0'}, False, False),
    ({}, False, False),
])
def test_a_fallback_query_is_needed_for_pinned_cpus_unless_the_workaround_disables_it(
        extra_specs: dict[str, str], disabled: bool, needed: bool) -> None:
    translated = build_query(nova_spec(extra_specs=extra_specs), limit=LIMIT)
    conf = make_conf(workarounds={'disable_fallback_pcpu_query': disabled})

    assert fallback_query_needed(translated, conf) is needed


def test_the_fallback_workaround_is_novas_deprecated_option() -> None:
    (opt,) = workarounds.workarounds_opts
    assert (opt.name, opt.default, opt.deprecated_for_removal) == (
        'disable_fallback_pcpu_query', False, True)
    assert make_conf().workarounds.disable_fallback_pcpu_query is False
