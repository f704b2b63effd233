"""RequestSpec -> ``GET /allocation_candidates`` query (pure, no I/O).

Follows Nova 34's ``ResourceRequest.from_request_spec`` and
``resources_from_request_spec`` (both in ``nova/scheduler/utils.py``),
including the requirements derived from ``hw:*`` extra specs and image
properties (:mod:`scheduler.request.derived`), with two deliberate differences:

* Requests Nova would send malformed (Placement answers 400 and Nova turns
  that into an unexplained NoValidHost) raise RequestTranslationError here,
  before anything reaches Placement. So do resource amounts and classes Nova
  drops with a warning: dropping one silently changes what is allocated.
* Groups with constraints but no resources (Nova's ``RequestGroup.to_queryparams``
  sends ``resources{S}=``, which Placement refuses with 400) become the
  equivalent valid query; see
  ``_make_resourceless_groups_valid``.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from placement_client.query import AllocationCandidatesQuery, RequestGroupQuery
from scheduler.exceptions import RequestTranslationError
from scheduler.objects.spec import ImageMetaProps, RequestGroup, RequestSpec
from scheduler.request import cpu_policy, derived, names

# Nova's key pattern: the prefixes are exactly ``resources`` and ``trait``
# (singular), the optional suffix directly follows the prefix.
_EXTRA_SPEC_KEY = re.compile(rf'^(resources|trait)({names.SUFFIX_PATTERN})?:(.*)$')
_GROUP_POLICIES = ('none', 'isolate')
_TRAIT_VALUES = ('required', 'forbidden')
# Hints whose filters need every host, not the first ``limit`` candidates.
NO_LIMIT_HINTS = ('group', 'same_host', 'different_host')
# The group that carries the constraints of a resourceless unsuffixed group.
ROOT_CONSTRAINTS_SUFFIX = '_UNSUFFIXED'


@dataclass
class TranslatedRequest:
    query: AllocationCandidatesQuery
    # The request asked for pinned CPUs (PCPU): Nova then makes a fallback
    # query with ``pinning_translate=False`` (VCPU instead).
    cpu_pinning_requested: bool
    # Things ignored or defaulted, worded as Nova logs them (WARNING).
    warnings: list[str] = field(default_factory=list)
    # Where this query knowingly differs from the one Nova would send (INFO/DEBUG).
    notes: list[str] = field(default_factory=list)


def build_query(spec: RequestSpec, *, limit: int | None, in_tree: str | None = None,
                pinning_translate: bool = True) -> TranslatedRequest:
    """The allocation candidates query for ``spec``.

    ``limit``: ``[scheduler] max_placement_results``, or None for no limit;
    dropped when the spec carries a group / same_host / different_host hint.
    ``in_tree``: the compute node provider the caller resolved the requested
    (or forced) host/node to, when it resolved to exactly one.
    ``pinning_translate``: False for Nova's fallback query (VCPU, no PCPU).

    Raises RequestTranslationError when the request cannot be a valid query.
    """
    return _Translation(spec).run(limit=limit, in_tree=in_tree,
                                  pinning_translate=pinning_translate)


def all_required_traits(spec: RequestSpec) -> frozenset[str]:
    """Every trait some request group of ``spec`` requires (Nova's
    ``ResourceRequest.all_required_traits``: flavor ``trait*:`` specs of any group,
    image ``traits_required``, the CPU thread policy, the derived hardware traits and
    the ``requested_resources`` groups; not ``root_required``).

    Raises RequestTranslationError when the request cannot be translated.
    """
    translation = _Translation(spec)
    translation.request_groups(pinning_translate=True)
    return frozenset(t for g in translation.query.groups for t in g.required_traits)


def fallback_query_needed(translated: TranslatedRequest, conf: Any) -> bool:
    """Whether Nova would also ask for VCPU-based candidates (its PCPU fallback query).

    True when the request asked for pinned CPUs and ``[workarounds]
    disable_fallback_pcpu_query`` is off. The caller then builds the query again
    with ``build_query(..., pinning_translate=False)``, asks Placement, and adds
    those allocation requests after the first query's ones (provider summaries
    merged), as Nova does.
    """
    return translated.cpu_pinning_requested and not conf.workarounds.disable_fallback_pcpu_query


class _Translation:
    """One translation; each step is one step of Nova's algorithm."""

    def __init__(self, spec: RequestSpec):
        self.spec = spec
        self.query = AllocationCandidatesQuery()
        self.warnings: list[str] = []
        self.notes: list[str] = []
        self.flavor_suffixes: set[str] = set()
        self.invalid_group_policy: str | None = None
        self.image_props: Mapping[str, Any] = (
            spec.image.properties if spec.image is not None else ImageMetaProps())

    @property
    def unsuffixed(self) -> RequestGroupQuery:
        return self.query.group('')

    def run(self, *, limit: int | None, in_tree: str | None,
            pinning_translate: bool) -> TranslatedRequest:
        pinning_requested = self.request_groups(pinning_translate=pinning_translate)
        self._destination()
        if in_tree is not None:
            self.unsuffixed.in_tree = names.uuid(in_tree, 'in_tree')
        self._drop_empty_unsuffixed_group()
        self._make_resourceless_groups_valid()
        self._group_policy_default()
        self._check_consistency()
        self._limit(limit)
        return TranslatedRequest(query=self.query, cpu_pinning_requested=pinning_requested,
                                 warnings=self.warnings, notes=self.notes)

    def request_groups(self, *, pinning_translate: bool) -> bool:
        """Nova's ``ResourceRequest.from_request_spec``: the groups, before the
        destination and the request-wide rules; whether pinning was requested."""
        self._request_level_params()
        self._flavor_extra_specs()
        self._image_traits()
        pinning_requested = self._pinning() if pinning_translate else False
        self._requested_resources()
        self._flavor_base_amounts()
        self._derived_requirements()
        self._strip_zeros_and_empty_groups()
        return pinning_requested

    # -- inputs ----------------------------------------------------------------
    def _request_level_params(self) -> None:
        params = self.spec.request_level_params
        self.query.root_required = {
            names.trait(t, 'root_required') for t in params.root_required}
        self.query.root_forbidden = {
            names.trait(t, 'root_forbidden') for t in params.root_forbidden}
        self.query.same_subtree = [
            [names.suffix(s, 'same_subtree') for s in subtree] for subtree in params.same_subtree]

    def _flavor_extra_specs(self) -> None:
        for key, value in sorted((self.spec.flavor.extra_specs or {}).items()):
            if key == 'group_policy':
                if value in _GROUP_POLICIES:
                    self.query.group_policy = value
                else:
                    # Nova warns and ignores it; a missing policy is then
                    # handled like an absent one (_group_policy_default).
                    self.invalid_group_policy = value
                    self.warnings.append(
                        f"Invalid group_policy '{value}'. Valid values are 'none' and "
                        f"'isolate'.")
                continue
            match = _EXTRA_SPEC_KEY.match(key)
            if not match:
                continue
            prefix, suffix, name = match.groups()
            suffix = suffix or ''
            where = f'flavor extra spec {key!r}'
            if suffix:
                self.flavor_suffixes.add(suffix)
            if prefix == 'resources':
                self.query.group(suffix).resources[names.resource_class(name, where)] = (
                    names.amount(value, where))
            elif value in _TRAIT_VALUES:
                self._add_trait(self.query.group(suffix), names.trait(name, where), value)
            else:
                # Nova warns and ignores it: the value, not the trait, is wrong,
                # and Nova's API validation refuses it for new flavors.
                self.warnings.append(
                    f"Only (required, forbidden) traits are supported. Received '{value}' "
                    f"for key {key}.")

    def _image_traits(self) -> None:
        # Image traits always go to the unsuffixed group (no granular image traits).
        for name in self.image_props.get('traits_required') or ():
            self.unsuffixed.required_traits.add(
                names.trait(name, 'image property traits_required'))

    def _pinning(self) -> bool:
        pinning = cpu_policy.translate_pinning(self.spec.flavor, self.image_props)
        group = self.unsuffixed
        if pinning.vcpu is not None:
            group.resources['VCPU'] = pinning.vcpu
        if pinning.pcpu is not None:
            group.resources['PCPU'] = pinning.pcpu
        if pinning.hyperthreading:
            self._add_trait(group, cpu_policy.HYPERTHREADING, pinning.hyperthreading)
        return pinning.dedicated

    def _requested_resources(self) -> None:
        """Groups from outside the flavor (ports, devices), suffixed by requester_id."""
        for request_group in self.spec.requested_resources or ():
            self.query.groups.append(self._external_group(request_group))

    def _external_group(self, group: RequestGroup) -> RequestGroupQuery:
        if not group.requester_id:
            raise RequestTranslationError(
                f'a requested_resources group has no requester_id: {_describe(group)}')
        suffix = names.suffix(group.requester_id, 'requested_resources requester_id')
        where = f'requested_resources group {suffix!r}'
        if any(g.suffix == suffix for g in self.query.groups):
            raise RequestTranslationError(
                f'{where}: the suffix is already used by another request group')
        if not (group.resources or group.required_traits or group.forbidden_traits
                or group.aggregates or group.forbidden_aggregates):
            raise RequestTranslationError(f'{where} asks for nothing')
        query_group = RequestGroupQuery(
            suffix=suffix,
            resources={names.resource_class(rc, where): names.amount(n, where)
                       for rc, n in group.resources.items()},
            required_traits={names.trait(t, where) for t in group.required_traits},
            forbidden_traits={names.trait(t, where) for t in group.forbidden_traits},
            member_of=[_aggregate_set(aggs, where) for aggs in group.aggregates],
            forbidden_aggregates={names.uuid(a, where) for a in group.forbidden_aggregates},
            in_tree=names.uuid(group.in_tree, where) if group.in_tree else None)
        return query_group

    def _flavor_base_amounts(self) -> None:
        """Flavor VCPU / MEMORY_MB / DISK_GB, each only if no group mentions the class.

        "Mentions" includes a zero amount: ``resources:VCPU=0`` removes VCPU.
        """
        flavor = self.spec.flavor
        mentioned = {rc for g in self.query.groups for rc in g.resources}
        group = self.unsuffixed
        if 'VCPU' not in mentioned and 'PCPU' not in mentioned:
            group.resources['VCPU'] = names.amount(flavor.vcpus, 'flavor vcpus')
        if 'MEMORY_MB' not in mentioned:
            group.resources['MEMORY_MB'] = names.amount(flavor.memory_mb, 'flavor memory_mb')
        if 'DISK_GB' not in mentioned:
            disk = names.amount(flavor.ephemeral_gb, 'flavor ephemeral_gb')
            disk += math.ceil(names.amount(flavor.swap, 'flavor swap') / 1024)
            if not self.spec.is_bfv:
                disk += names.amount(flavor.root_gb, 'flavor root_gb')
            if disk:
                group.resources['DISK_GB'] = disk

    def _derived_requirements(self) -> None:
        """Memory encryption, pmem, vTPM, PCI NUMA socket, secure boot, maxphysaddr,
        stateless firmware: into the unsuffixed group, amounts replacing its own."""
        requirements = derived.derived_requirements(self.spec.flavor, self.image_props)
        group = self.unsuffixed
        for rc, amount in requirements.resources.items():
            where = ('flavor extra spec hw:pmem' if rc != derived.MEM_ENCRYPTION_CONTEXT
                     else 'memory encryption')
            group.resources[names.resource_class(rc, where)] = names.amount(amount, where)
        group.required_traits |= requirements.required_traits
        self.warnings.extend(requirements.warnings)

    def _strip_zeros_and_empty_groups(self) -> None:
        for group in self.query.groups:
            group.resources = {rc: n for rc, n in group.resources.items() if n}
        # Nova's RequestGroup.is_empty: in_tree alone does not keep a group.
        self.query.groups = [
            g for g in self.query.groups
            if g.resources or g.required_traits or g.forbidden_traits or g.member_of
            or g.forbidden_aggregates]

    def _destination(self) -> None:
        destination = self.spec.requested_destination
        if destination is None:
            return
        for aggs in destination.aggregates or ():
            self.unsuffixed.member_of.append(
                _aggregate_set(aggs.split(','), 'requested_destination.aggregates'))
        self.unsuffixed.forbidden_aggregates |= {
            names.uuid(a, 'requested_destination.forbidden_aggregates')
            for a in destination.forbidden_aggregates or ()}

    def _drop_empty_unsuffixed_group(self) -> None:
        # ``self.unsuffixed`` creates the group on access; one that ends up
        # with nothing in it must not linger.
        self.query.groups = [g for g in self.query.groups if g.suffix or not g.is_empty()]

    # -- Nova's defect: groups with constraints but no resources ---------------
    def _make_resourceless_groups_valid(self) -> None:
        """Rewrite groups without resources into the equivalent valid query.

        Placement (1.36) refuses ``resources{S}=`` with an empty value, refuses
        an unsuffixed group without resources outright, and accepts a suffixed
        group without resources only when its suffix is named in a
        ``same_subtree``. Verified against the real Placement 16.
        """
        if not any(g.resources for g in self.query.groups):
            raise RequestTranslationError(
                'the request asks for no resources at all (every amount of the flavor and '
                'its extra specs is zero); Placement needs at least one')
        root = next((g for g in self.query.groups if not g.suffix), None)
        if root is not None and not root.resources:
            self._relocate_resourceless_unsuffixed_group(root)
        mentioned = {s for subtree in self.query.same_subtree for s in subtree}
        for group in self.query.groups:
            if group.suffix and not group.resources and group.suffix not in mentioned:
                # A one-group same_subtree constrains nothing (one provider is
                # its own subtree); it only makes the group legal. The group
                # still binds to the candidate's tree: Placement combines
                # groups per root provider (anchor).
                self.query.same_subtree.append([group.suffix])
                self.notes.append(
                    f'request group {group.suffix!r} has no resources: sent with '
                    f'same_subtree={group.suffix} so that Placement accepts it')

    def _relocate_resourceless_unsuffixed_group(self, root: RequestGroupQuery) -> None:
        """Move the unsuffixed group's constraints where they keep their meaning.

        Without unsuffixed resources those constraints can only be about the
        host, i.e. the provider tree of the candidate:
        * required/forbidden traits -> ``root_required`` (the compute node
          provider carries the capability traits Nova asks for);
        * in_tree -> every suffixed group (all resources from that tree);
        * member_of (AZ, tenant aggregates) -> a resourceless group of its own:
          some provider of the candidate's tree is in the aggregates. Nova puts
          compute node providers (the roots) in aggregates, so that is "the host
          is in the aggregate". Copying member_of to the resource groups would
          instead require every child provider (a GPU, a NIC) to be a member.
        * forbidden aggregates cannot be expressed: Placement applies them to
          the root only through the unsuffixed group -> RequestTranslationError.
        """
        if root.forbidden_aggregates:
            raise RequestTranslationError(
                'forbidden aggregates (member_of=!in:...) apply to the host only through '
                'the unsuffixed request group, and this request puts no resources there '
                '(the flavor moves every resource into numbered groups); Placement cannot '
                'express it')
        self.query.groups.remove(root)
        if root.required_traits or root.forbidden_traits:
            self.query.root_required |= root.required_traits
            self.query.root_forbidden |= root.forbidden_traits
            self.notes.append(
                'the unsuffixed request group has no resources: its traits are required of '
                'the root provider (root_required)')
        if root.in_tree:
            for group in self.query.groups:
                if group.in_tree is None:
                    group.in_tree = root.in_tree
            self.notes.append(
                'the unsuffixed request group has no resources: in_tree applies to every '
                'request group')
        if root.member_of:
            if self.query.group_policy == 'isolate':
                raise RequestTranslationError(
                    'group_policy=isolate and aggregate constraints (availability zone, '
                    'requested aggregates) while the flavor puts no resources in the '
                    'unsuffixed group: the aggregate constraint needs a request group of its '
                    'own, which isolate would force onto a provider no other group uses')
            suffix = self._unused_suffix(ROOT_CONSTRAINTS_SUFFIX)
            self.query.groups.append(RequestGroupQuery(
                suffix=suffix, member_of=list(root.member_of), in_tree=root.in_tree))
            self.notes.append(
                f'the unsuffixed request group has no resources: its aggregate constraints '
                f'are sent as the resourceless group {suffix!r}')

    def _unused_suffix(self, base: str) -> str:
        used = {g.suffix for g in self.query.groups}
        candidate, n = base, 1
        while candidate in used:
            n += 1
            candidate = f'{base}{n}'
        return candidate

    # -- request-wide rules ----------------------------------------------------
    def _group_policy_default(self) -> None:
        suffixed = [g for g in self.query.groups if g.suffix]
        if len(suffixed) < 2 or self.query.group_policy is not None:
            return
        from_flavor = [g.suffix for g in suffixed if g.suffix in self.flavor_suffixes]
        if len(from_flavor) >= 2:
            # Nova sends it anyway and Placement answers 400.
            given = (f' (the value {self.invalid_group_policy!r} is not one of none, isolate)'
                     if self.invalid_group_policy is not None else '')
            raise RequestTranslationError(
                f'the flavor defines {len(from_flavor)} numbered request groups '
                f'({", ".join(sorted(from_flavor))}) but no group_policy{given}; set the extra '
                f'spec group_policy to none (groups may share a provider) or isolate (each '
                f'group from a separate provider)')
        outside = sorted(g.suffix for g in suffixed if g.suffix not in self.flavor_suffixes)
        self.warnings.append(
            'There is more than one numbered request group in the allocation candidate query '
            'but the flavor did not specify any group policy. At least one numbered request '
            f'group is defined outside of the flavor ({", ".join(outside)}); to avoid the '
            "placement failure the group policy defaults to 'none'.")
        self.query.group_policy = 'none'

    def _check_consistency(self) -> None:
        """What Placement would refuse with 400, refused here with a reason."""
        for group in self.query.groups:
            both = group.required_traits & group.forbidden_traits
            if both:
                raise RequestTranslationError(
                    f'request group {group.suffix or "(unsuffixed)"!r}: traits both required '
                    f'and forbidden: {", ".join(sorted(both))}')
        both = self.query.root_required & self.query.root_forbidden
        if both:
            raise RequestTranslationError(
                f'traits both required and forbidden on the root provider: '
                f'{", ".join(sorted(both))}')
        suffixes = {g.suffix for g in self.query.groups if g.suffix}
        for subtree in self.query.same_subtree:
            unknown = sorted(set(subtree) - suffixes)
            if unknown:
                raise RequestTranslationError(
                    f'same_subtree names request groups that do not exist or ask for '
                    f'nothing: {", ".join(unknown)}')

    def _limit(self, limit: int | None) -> None:
        if any(hint in (self.spec.scheduler_hints or {}) for hint in NO_LIMIT_HINTS):
            limit = None
        if limit is not None and limit < 1:
            raise RequestTranslationError(f'limit must be at least 1, not {limit}')
        self.query.limit = limit

    @staticmethod
    def _add_trait(group: RequestGroupQuery, name: str, kind: str) -> None:
        (group.required_traits if kind == 'required' else group.forbidden_traits).add(name)


def _aggregate_set(uuids: Iterable[str], where: str) -> frozenset[str]:
    members = frozenset(names.uuid(u.strip(), where) for u in uuids if u.strip())
    if not members:
        raise RequestTranslationError(f'{where}: an empty set of aggregates')
    return members


def _describe(group: RequestGroup) -> str:
    return (f'resources={dict(group.resources)} required={sorted(group.required_traits)} '
            f'forbidden={sorted(group.forbidden_traits)}')
