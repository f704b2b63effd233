"""CPU pinning policies (``hw:cpu_policy`` & co.) -> PCPU/VCPU amounts and a trait.

Nova's ``ResourceRequest._translate_pinning_policies`` with the validation
of ``nova.virt.hardware`` it relies on. Where Nova raises (invalid policy,
flavor/image conflict, bad mask) this raises RequestTranslationError: the
Nova API refuses such flavors and images, so only stale data gets here.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oslo_utils import strutils

from scheduler.exceptions import RequestTranslationError
from scheduler.objects.spec import Flavor

SHARED, DEDICATED, MIXED = 'shared', 'dedicated', 'mixed'
CPU_POLICIES = (SHARED, DEDICATED, MIXED)
THREAD_POLICIES = ('prefer', 'isolate', 'require')
EMULATOR_THREADS_POLICIES = ('share', 'isolate')
HYPERTHREADING = 'HW_CPU_HYPERTHREADING'
_HYPERTHREADING_BY_THREAD_POLICY = {'isolate': 'forbidden', 'require': 'required'}


@dataclass(frozen=True)
class Pinning:
    """What the policies ask of the unsuffixed request group."""

    vcpu: int | None = None           # replaces the unsuffixed VCPU amount (mixed)
    pcpu: int | None = None           # replaces the unsuffixed PCPU amount
    hyperthreading: str | None = None  # 'required' | 'forbidden' for HW_CPU_HYPERTHREADING
    dedicated: bool = False           # Nova's cpu_pinning_requested: only for 'dedicated'


def parse_cpu_spec(spec: str) -> set[int]:
    """``0-3,^1,5`` -> {0, 2, 3, 5} (``nova.virt.hardware.parse_cpu_spec``)."""
    wanted: set[int] = set()
    rejected: set[int] = set()
    for rule in spec.split(','):
        rule = rule.strip()
        if not rule:
            continue
        target = wanted
        if rule.startswith('^'):
            target, rule = rejected, rule[1:]
        start_text, sep, end_text = rule.partition('-')
        try:
            start = int(start_text.strip())
            end = int(end_text.strip()) if sep else start
        except ValueError:
            raise RequestTranslationError(f'invalid CPU range expression {rule!r}') from None
        if start > end or start < 0:
            raise RequestTranslationError(f'invalid CPU range expression {rule!r}')
        target.update(range(start, end + 1))
    return wanted - rejected


def _choose_cpu_policy(flavor_policy: str | None, image_policy: str | None) -> str | None:
    for source, value in (('flavor extra spec hw:cpu_policy', flavor_policy),
                          ('image property hw_cpu_policy', image_policy)):
        if value and value not in CPU_POLICIES:
            raise RequestTranslationError(
                f'{source}={value!r} is not one of {", ".join(CPU_POLICIES)}')
    if flavor_policy == DEDICATED:
        return flavor_policy
    if flavor_policy == MIXED:
        if image_policy == DEDICATED:
            raise _pinning_conflict('hw:cpu_policy', flavor_policy, image_policy)
        return flavor_policy
    if flavor_policy == SHARED:
        if image_policy in (MIXED, DEDICATED):
            raise _pinning_conflict('hw:cpu_policy', flavor_policy, image_policy)
        return flavor_policy
    return image_policy or None


def _choose_thread_policy(flavor_policy: str | None, image_policy: str | None) -> str | None:
    for source, value in (('flavor extra spec hw:cpu_thread_policy', flavor_policy),
                          ('image property hw_cpu_thread_policy', image_policy)):
        if value and value not in THREAD_POLICIES:
            raise RequestTranslationError(
                f'{source}={value!r} is not one of {", ".join(THREAD_POLICIES)}')
    if flavor_policy in (None, '', 'prefer'):
        return flavor_policy or image_policy or None
    if image_policy and image_policy != flavor_policy:
        raise _pinning_conflict('hw:cpu_thread_policy', flavor_policy, image_policy)
    return flavor_policy


def _pinning_conflict(name: str, flavor_value: str, image_value: str) -> RequestTranslationError:
    return RequestTranslationError(
        f'the image asks for {name}={image_value!r} but the flavor sets {flavor_value!r}')


def _emulator_threads_policy(extra_specs: Mapping[str, str]) -> str | None:
    policy = extra_specs.get('hw:emulator_threads_policy') or None
    if policy is not None and policy not in EMULATOR_THREADS_POLICIES:
        raise RequestTranslationError(
            f'flavor extra spec hw:emulator_threads_policy={policy!r} is not one of '
            f'{", ".join(EMULATOR_THREADS_POLICIES)}')
    return policy


def _dedicated_cpus(flavor: Flavor) -> set[int] | None:
    mask = (flavor.extra_specs or {}).get('hw:cpu_dedicated_mask')
    if not mask:
        return None
    if mask.strip().startswith('^'):
        pcpus = parse_cpu_spec(f'0-{flavor.vcpus - 1},{mask}')
    else:
        pcpus = parse_cpu_spec(mask)
    cpus = set(range(flavor.vcpus))
    if not pcpus or not cpus - pcpus or not pcpus <= cpus:
        raise RequestTranslationError(
            f'flavor extra spec hw:cpu_dedicated_mask={mask!r} must name some but not all of '
            f'the {flavor.vcpus} vCPUs of the flavor')
    return pcpus


def _realtime_cpus(flavor: Flavor, image_props: Mapping[str, Any],
                   emulator_policy: str | None) -> set[int] | None:
    extra_specs = flavor.extra_specs or {}
    if not strutils.bool_from_string(extra_specs.get('hw:cpu_realtime')):
        return None
    # Nova: the image mask wins, it is the more specific requirement.
    mask = image_props.get('hw_cpu_realtime_mask') or extra_specs.get('hw:cpu_realtime_mask')
    cpus = set(range(flavor.vcpus))
    if mask:
        if mask.strip().startswith('^'):
            realtime = parse_cpu_spec(f'0-{flavor.vcpus - 1},{mask}')
        else:
            realtime = parse_cpu_spec(mask)
    else:
        realtime = set(cpus)
    if not realtime or (realtime == cpus and not emulator_policy) or not realtime <= cpus:
        raise RequestTranslationError(
            f'realtime CPU mask {mask!r} must name a subset of the {flavor.vcpus} vCPUs of the '
            f'flavor and leave one for the emulator (or set hw:emulator_threads_policy)')
    return realtime


def translate_pinning(flavor: Flavor, image_props: Mapping[str, Any]) -> Pinning:
    extra_specs = flavor.extra_specs or {}
    cpu_policy = _choose_cpu_policy(extra_specs.get('hw:cpu_policy') or None,
                                    image_props.get('hw_cpu_policy') or None)
    thread_policy = _choose_thread_policy(extra_specs.get('hw:cpu_thread_policy') or None,
                                          image_props.get('hw_cpu_thread_policy') or None)
    emulator_policy = _emulator_threads_policy(extra_specs)

    vcpu: int | None = None
    pcpu: int | None = None
    if cpu_policy == DEDICATED:
        pcpu = flavor.vcpus
    elif cpu_policy == MIXED:
        dedicated = _dedicated_cpus(flavor)
        realtime = _realtime_cpus(flavor, image_props, emulator_policy)
        pinned = dedicated or realtime
        if not pinned:
            # Nova's API refuses this combination; its scheduler would ask for
            # no PCPU at all, i.e. an unpinned guest.
            raise RequestTranslationError(
                'hw:cpu_policy=mixed needs hw:cpu_dedicated_mask or a realtime mask '
                '(hw:cpu_realtime with hw:cpu_realtime_mask) to say which vCPUs are pinned')
        pcpu = len(pinned)
        vcpu = flavor.vcpus - pcpu
    if pcpu is not None and emulator_policy == 'isolate':
        pcpu += 1
    # Nova adds the trait whatever the CPU policy, even for unpinned guests.
    return Pinning(vcpu=vcpu, pcpu=pcpu,
                   hyperthreading=_HYPERTHREADING_BY_THREAD_POLICY.get(thread_policy or ''),
                   dedicated=cpu_policy == DEDICATED)


@dataclass(frozen=True)
class Policies:
    """The CPU policies a flavor and image settle on, and which vCPUs are pinned."""

    cpu_policy: str | None
    thread_policy: str | None
    emulator_threads_policy: str | None
    pinned_vcpus: frozenset[int]


def resolve_policies(flavor: Flavor, image_props: Mapping[str, Any]) -> Policies:
    """Nova's choice between flavor and image policies (``nova.virt.hardware``), with the
    vCPUs that get dedicated host CPUs: all of them for ``dedicated``, the dedicated
    (else realtime) mask for ``mixed``, none otherwise. RequestTranslationError where
    Nova's API would refuse the combination."""
    extra_specs = flavor.extra_specs or {}
    cpu_policy = _choose_cpu_policy(extra_specs.get('hw:cpu_policy') or None,
                                    image_props.get('hw_cpu_policy') or None)
    thread_policy = _choose_thread_policy(extra_specs.get('hw:cpu_thread_policy') or None,
                                          image_props.get('hw_cpu_thread_policy') or None)
    emulator_policy = _emulator_threads_policy(extra_specs)
    pinned: set[int] = set()
    if cpu_policy == DEDICATED:
        pinned = set(range(flavor.vcpus))
    elif cpu_policy == MIXED:
        pinned = (_dedicated_cpus(flavor)
                  or _realtime_cpus(flavor, image_props, emulator_policy) or set())
        if not pinned:
            raise RequestTranslationError(
                'hw:cpu_policy=mixed needs hw:cpu_dedicated_mask or a realtime mask '
                '(hw:cpu_realtime with hw:cpu_realtime_mask) to say which vCPUs are pinned')
    return Policies(cpu_policy=cpu_policy, thread_policy=thread_policy,
                    emulator_threads_policy=emulator_policy, pinned_vcpus=frozenset(pinned))
