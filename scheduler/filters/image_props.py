"""ImagePropertiesFilter: the host must be able to run the image.

An image that sets none of ``hw_architecture`` (default ``[filter_scheduler]
image_properties_default_architecture``), ``img_hv_type`` and ``hw_vm_mode``
passes every host, whatever else it asks: Nova's ``_instance_supported``
returns before looking at the version or the address bits. Otherwise three
checks, each on image properties Nova defines:

* the set ones of those three must match one ``[architecture,
  hypervisor_type, vm_mode]`` entry of the host's ``supported_instances``;
* ``img_hv_requested_version`` (e.g. ``>=6.0,<7``) must be satisfied by the
  host's ``hypervisor_version`` (Nova's integer encoding: 6002000 is 6.2.0);
* ``hw_maxphysaddr_bits`` must not exceed the host's
  ``cpu_info.maxphysaddr.bits``.

Where the host catalog has no data for a check (a host known only from
Placement), that check is skipped for the host, which is logged at WARNING once
per host and process: Nova's computes always report these fields, and failing
every undescribed host would make Nova's default filter list reject a whole
cloud for any image that names an architecture.
"""
from __future__ import annotations

import functools
import logging
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from packaging.version import InvalidVersion, Version

from scheduler.filters.base import BaseHostFilter, FilterResult, RowsVerdict, all_pass, host_label
from scheduler.filters.host_attributes import MISSING, walk
from scheduler.filters.log_once import LogOnce
from scheduler.filters.reasons import brief

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

MAXPHYSADDR_BITS_PATH = ('maxphysaddr', 'bits')


# Canonical names, as Nova's Architecture / HVType / VMMode fields coerce them ----------

def canonical_architecture(name: str | None) -> str | None:
    if not name:
        return None
    name = name.strip().lower()
    if name in ('i386', 'i486', 'i586', 'x86_32', 'x86_32p'):
        return 'i686'
    if name == 'amd64':
        return 'x86_64'
    return name


def canonical_hv_type(name: str | None) -> str | None:
    if not name:
        return None
    name = name.strip().lower()
    return 'xen' if name == 'xapi' else name


def canonical_vm_mode(name: str | None) -> str | None:
    if not name:
        return None
    name = name.strip().lower()
    return {'pv': 'xen', 'hv': 'hvm', 'baremetal': 'hvm'}.get(name, name)


Triple = tuple[str | None, str | None, str | None]
_FIELDS = ('architecture', 'hypervisor type', 'VM mode')


def canonical_triple(entry: Any) -> Triple:
    """A supported_instances entry, canonical; malformed entries match nothing."""
    try:
        arch, hv_type, vm_mode = entry
    except (TypeError, ValueError):
        return (None, None, None)
    return (canonical_architecture(_text(arch)), canonical_hv_type(_text(hv_type)),
            canonical_vm_mode(_text(vm_mode)))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def supports(entries: Any, wanted: Triple) -> bool:
    """Whether one entry matches every wanted (non-None) element, position by position."""
    for entry in entries:
        have = canonical_triple(entry)
        if all(w is None or w == h for w, h in zip(wanted, have, strict=True)):
            return True
    return False


# img_hv_requested_version ------------------------------------------------------------

class InvalidVersionPredicate(ValueError):
    """An ``img_hv_requested_version`` that is not a comma-separated list of
    ``<op> <version>`` comparisons."""


# oslo.utils' VersionPredicate, which Nova's filter uses: the version is any
# PEP 440 one (6.0rc1, v6, 1!2.0), compared as packaging compares them.
_COMPARISON = re.compile(r'^\s*(<=|>=|<|>|!=|==)\s*([^\s]+)\s*$')
_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    '<': operator.lt, '<=': operator.le, '>': operator.gt, '>=': operator.ge,
    '==': operator.eq, '!=': operator.ne}
# Bounds a hostile property: a predicate is a handful of comparisons.
_MAX_PREDICATE_CHARS = 256


@dataclass(frozen=True)
class VersionPredicate:
    text: str
    comparisons: tuple[tuple[str, Version], ...]

    def satisfied_by(self, version: tuple[int, ...]) -> bool:
        # As Nova: the host's parts joined with dots, then read as a version
        # (6.0 == 6.0.0).
        have = Version(format_version(version))
        return all(_OPERATORS[op](have, wanted) for op, wanted in self.comparisons)


@functools.lru_cache(maxsize=256)
def parse_version_predicate(text: str) -> VersionPredicate:
    """``">=6.0, <7"`` -> comparisons; :class:`InvalidVersionPredicate` otherwise
    (where Nova's oslo.utils parser raises ValueError)."""
    if len(text) > _MAX_PREDICATE_CHARS:
        raise InvalidVersionPredicate(f'longer than {_MAX_PREDICATE_CHARS} characters')
    comparisons = []
    for part in text.split(','):
        found = _COMPARISON.match(part)
        if found is None:
            raise InvalidVersionPredicate(
                f"'{brief(part.strip(), 30)}' is not <op> <version> (op: {', '.join(_OPERATORS)})")
        try:
            wanted = Version(found[2])
        except InvalidVersion:
            raise InvalidVersionPredicate(
                f"'{brief(found[2], 30)}' is not a version") from None
        comparisons.append((found[1], wanted))
    return VersionPredicate(text, tuple(comparisons))


def hypervisor_version_parts(version: int) -> tuple[int, ...]:
    """Nova's integer encoding, three decimal digits per part: 6002000 -> (6, 2, 0)."""
    parts: list[int] = []
    while version > 0:
        version, part = divmod(version, 1000)
        parts.insert(0, part)
    return tuple(parts)


def format_version(parts: tuple[int, ...]) -> str:
    return '.'.join(str(p) for p in parts)


# The filter --------------------------------------------------------------------------

class ImagePropertiesFilter(BaseHostFilter):
    """Hosts must support the image's architecture, hypervisor type, VM mode,
    requested hypervisor version and physical address bits."""

    # Image properties and host capabilities do not change within a request.
    run_filter_once_per_request = True
    RUN_ON_REBUILD = True

    def __init__(self) -> None:
        self._log_once = LogOnce(LOG)

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        props = spec_obj.image.properties if spec_obj.image is not None else {}
        wanted = self._wanted(props)
        if not any(wanted):
            # Nova's _instance_supported returns True here, before the version
            # and address-bits checks: an image asking only for those passes.
            return FilterResult.ok()
        verdict = self._check_instance_type(host_state, wanted)
        if not verdict.passed:
            return verdict
        for check in (self._check_hypervisor_version, self._check_maxphysaddr_bits):
            verdict = check(host_state, props)
            if not verdict.passed:
                return verdict
        return FilterResult.ok()

    def filter_rows(self, table: HostTable, rows: np.ndarray,
                    spec_obj: RequestSpec) -> RowsVerdict | None:
        props = spec_obj.image.properties if spec_obj.image is not None else {}
        wanted = self._wanted(props)
        if not any(wanted):
            return all_pass(rows)
        if props.get('img_hv_requested_version') or props.get('hw_maxphysaddr_bits') is not None:
            return None
        # Hosts with the same supported_instances get the same verdict; hosts
        # without any are judged (and logged) one by one.
        codes = table.supported_codes[rows]
        passed = np.zeros(len(rows), dtype=bool)
        failing: list[np.ndarray] = []
        reason = ''
        for code, supported in enumerate(table.supported_values):
            if not supported:
                continue
            verdict = self._instance_type_verdict(supported, wanted)
            if verdict.passed:
                passed |= codes == code
            else:
                assert verdict.reason is not None  # FilterResult.fail always says why
                reason = verdict.reason
                failing.append(np.flatnonzero(codes == code))
        failed = {pos: reason for positions in failing for pos in positions.tolist()}
        return RowsVerdict(passed, failed)

    def _wanted(self, props: Any) -> Triple:
        arch = props.get('hw_architecture') or self._default_architecture()
        return (canonical_architecture(arch), canonical_hv_type(props.get('img_hv_type')),
                canonical_vm_mode(props.get('hw_vm_mode')))

    def _default_architecture(self) -> str | None:
        if self.conf is None:
            return None
        return self.conf.filter_scheduler.image_properties_default_architecture

    def _check_instance_type(self, host_state: HostState, wanted: Triple) -> FilterResult:
        supported = host_state.supported_instances
        if not supported:
            if host_state.record.supported_instances_reported:
                # Nova's _instance_supported: a host that advertises no instance
                # type supports none of those asked for.
                return FilterResult.fail('host supports no instance types (image properties)')
            self._unchecked(host_state, 'supported_instances',
                            'image architecture, hypervisor type and VM mode')
            return FilterResult.ok()
        return self._instance_type_verdict(supported, wanted)

    @staticmethod
    def _instance_type_verdict(supported: Any, wanted: Triple) -> FilterResult:
        if supports(supported, wanted):
            return FilterResult.ok()
        asked = ', '.join(f'{field} {brief(value, 30)}'
                          for field, value in zip(_FIELDS, wanted, strict=True) if value)
        return FilterResult.fail(f'host supports no instances of {asked} (image properties)')

    def _check_hypervisor_version(self, host_state: HostState, props: Any) -> FilterResult:
        required = props.get('img_hv_requested_version')
        if not required:
            return FilterResult.ok()
        quoted = f"img_hv_requested_version '{brief(required, 40)}'"
        try:
            predicate = parse_version_predicate(str(required))
        except InvalidVersionPredicate as exc:
            return FilterResult.fail(f'image {quoted} is not a version requirement: {exc}')
        version = host_state.hypervisor_version
        if not isinstance(version, int) or isinstance(version, bool) or version <= 0:
            self._unchecked(host_state, 'hypervisor_version', 'img_hv_requested_version')
            return FilterResult.ok()
        parts = hypervisor_version_parts(version)
        if predicate.satisfied_by(parts):
            return FilterResult.ok()
        LOG.debug('%s: host %s hypervisor version %s does not satisfy %r', self.name,
                  host_label(host_state), format_version(parts), predicate.text)
        return FilterResult.fail(f'hypervisor version does not satisfy image {quoted}')

    def _check_maxphysaddr_bits(self, host_state: HostState, props: Any) -> FilterResult:
        wanted = props.get('hw_maxphysaddr_bits')
        if wanted is None:
            return FilterResult.ok()
        try:
            wanted_bits = int(wanted)
        except (TypeError, ValueError):
            return FilterResult.fail(
                f"image hw_maxphysaddr_bits '{brief(wanted, 20)}' is not a number")
        if not wanted_bits:
            return FilterResult.ok()  # Nova's `if not bits_required`
        host_bits = _as_int(walk(host_state.cpu_info or {}, MAXPHYSADDR_BITS_PATH))
        if host_bits is None:
            self._unchecked(host_state, 'cpu_info maxphysaddr bits', 'hw_maxphysaddr_bits')
            return FilterResult.ok()
        # Nova's `if not bits`: a host reporting 0 bits is not judged.
        if not host_bits or host_bits >= wanted_bits:
            return FilterResult.ok()
        return FilterResult.fail(
            f'host CPU has fewer physical address bits than image hw_maxphysaddr_bits '
            f'{wanted_bits}')

    def _unchecked(self, host_state: HostState, data: str, check: str) -> None:
        label = host_label(host_state)
        self._log_once.warning(
            (label, data), '%s: the host catalog has no %s for host %s; the host passes '
            'unchecked for %s (logged once per host)', self.name, data, label, check)


def _as_int(value: Any) -> int | None:
    if value is MISSING or value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
