"""``GET /allocation_candidates`` query parameters, built from request groups.

Pure: no I/O. The scheduler's request translation produces an
:class:`AllocationCandidatesQuery`; the client only serializes it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode


@dataclass
class RequestGroupQuery:
    """One request group; ``suffix`` "" is the unsuffixed group."""

    suffix: str = ''
    resources: dict[str, int] = field(default_factory=dict)
    required_traits: set[str] = field(default_factory=set)
    forbidden_traits: set[str] = field(default_factory=set)
    # Each inner set is one OR-set (``member_of=in:a,b``); sets are ANDed.
    member_of: list[frozenset[str]] = field(default_factory=list)
    forbidden_aggregates: set[str] = field(default_factory=set)
    in_tree: str | None = None

    def has_constraints(self) -> bool:
        return bool(self.required_traits or self.forbidden_traits or self.member_of
                    or self.forbidden_aggregates or self.in_tree)

    def is_empty(self) -> bool:
        return not self.resources and not self.has_constraints()

    def to_params(self, *, redact: bool = False) -> list[tuple[str, str]]:
        """The query parameters; ``redact`` replaces aggregate and provider uuids
        with what they stand for (a reason a user reads names neither)."""
        s = self.suffix
        params: list[tuple[str, str]] = []
        # A group without resources gets no ``resources{S}=`` at all: Placement
        # rejects an empty value with 400 (Nova sends it anyway:
        # nova.objects.request_spec.RequestGroup.to_queryparams).
        if self.resources:
            params.append((f'resources{s}', ','.join(
                f'{rc}:{amount}' for rc, amount in sorted(self.resources.items()))))
        traits = sorted(self.required_traits) + [f'!{t}' for t in sorted(self.forbidden_traits)]
        if traits:
            params.append((f'required{s}', ','.join(traits)))
        for agg_set in self.member_of:
            params.append((f'member_of{s}', 'in:' + (_aggregates(len(agg_set)) if redact
                                                     else ','.join(sorted(agg_set)))))
        if self.in_tree:
            params.append((f'in_tree{s}', '<the requested host>' if redact else self.in_tree))
        if self.forbidden_aggregates:
            params.append((f'member_of{s}', '!in:' + (
                _aggregates(len(self.forbidden_aggregates)) if redact
                else ','.join(sorted(self.forbidden_aggregates)))))
        return params


@dataclass
class AllocationCandidatesQuery:
    groups: list[RequestGroupQuery] = field(default_factory=list)
    group_policy: str | None = None   # "none" | "isolate"
    root_required: set[str] = field(default_factory=set)
    root_forbidden: set[str] = field(default_factory=set)
    same_subtree: list[list[str]] = field(default_factory=list)
    limit: int | None = None

    def group(self, suffix: str = '') -> RequestGroupQuery:
        """The group with this suffix, created empty if absent."""
        for g in self.groups:
            if g.suffix == suffix:
                return g
        g = RequestGroupQuery(suffix=suffix)
        self.groups.append(g)
        return g

    def to_params(self, *, redact: bool = False) -> list[tuple[str, str]]:
        params: list[tuple[str, str]] = []
        if self.limit is not None:
            params.append(('limit', str(self.limit)))
        if self.group_policy:
            params.append(('group_policy', self.group_policy))
        root = sorted(self.root_required) + [f'!{t}' for t in sorted(self.root_forbidden)]
        if root:
            params.append(('root_required', ','.join(root)))
        for subtree in self.same_subtree:
            params.append(('same_subtree', ','.join(sorted(subtree))))
        for g in self.groups:
            if not g.is_empty():
                params.extend(g.to_params(redact=redact))
        return sorted(params)

    def to_querystring(self) -> str:
        return urlencode(self.to_params())

    def describe(self, *, redact: bool = False) -> str:
        """Decoded, human-readable form for logs and, ``redact``-ed, for NoValidHost
        reasons (no aggregate or provider uuid)."""
        return '&'.join(f'{k}={v}' for k, v in self.to_params(redact=redact))


def _aggregates(count: int) -> str:
    return f'<one of {count} aggregates>' if count > 1 else '<an aggregate>'
