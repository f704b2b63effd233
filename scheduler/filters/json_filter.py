"""JsonFilter: the ``query`` scheduler hint, a small JSON expression over host attributes.

A query is a JSON list ``[operator, argument, ...]``. Arguments are nested
queries (lists), literals, or ``"$attribute.key.key"`` lookups of a Nova
HostState attribute and keys inside it (``"$free_ram_mb"``,
``"$stats.gpu_model"``, ``"$cpu_info.vendor"``)::

    ["and", [">=", "$free_ram_mb", 1024], ["in", "$hypervisor_type", "QEMU", "kvm"]]

Operators, as in Nova: ``=`` ``<`` ``>`` ``<=`` ``>=`` (the first argument
compared with every other; false with fewer than two), ``in`` (the first
argument equals one of the others), ``not``, ``or``, ``and``. A lookup that
finds nothing, JSON ``null`` and ``""`` drop out of the argument list. An empty
or otherwise false query (``[]``, ``null``) lets every host pass.

Differences from Nova, each where Nova crashes or silently misjudges:

* the query is bounded (characters, nesting depth, number of terms, lookup
  path length) and an invalid query is a reason on every host, not an
  internal error;
* comparing values of types that do not order (a number with a string) is a
  reason on the host, not an internal error;
* ``not`` is true when any of its arguments is false; Nova's ``not`` yields a
  list, which inside ``and``/``or`` is always true;
* lookups read Nova's HostState attributes only, step into mappings (and JSON
  object strings), and find nothing where Nova would raise.

A host passes with a WARNING (once per host and attribute) when it passed while
a lookup found nothing because the host catalog has no data for the attribute
(``$hypervisor_type`` of a host known only from Placement).
"""
from __future__ import annotations

import functools
import json
import logging
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scheduler.filters.base import BaseHostFilter, FilterResult, host_label
from scheduler.filters.host_attributes import (
    CATALOG_ATTRIBUTES,
    MISSING,
    host_attribute,
    is_absent,
    walk,
)
from scheduler.filters.log_once import LogOnce
from scheduler.filters.reasons import brief

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

HINT = 'query'
MAX_QUERY_CHARS = 8192
MAX_DEPTH = 16
MAX_TERMS = 256
MAX_LOOKUP_KEYS = 8

_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    '=': operator.eq, '<': operator.lt, '>': operator.gt,
    '<=': operator.le, '>=': operator.ge,
}
OPERATORS = frozenset({*_COMPARISONS, 'in', 'not', 'or', 'and'})


class InvalidQuery(ValueError):
    """The hint is not a query this filter can evaluate (same for every host)."""


class QueryEvaluationError(ValueError):
    """The query cannot be evaluated against one host's values."""


@dataclass(frozen=True)
class Lookup:
    """``$name.key...``: a Nova HostState attribute, then keys inside it."""

    name: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Expression:
    op: str
    args: tuple[Term, ...]


Term = Expression | Lookup | Any


@dataclass(frozen=True)
class Query:
    """A validated query; ``root`` is an Expression, or a constant for a false query."""

    text: str
    root: Term


def compile_query(text: str) -> Query:
    """Parse and validate a query hint; :class:`InvalidQuery` says what is wrong."""
    compiled = _compile_cached(text)
    if isinstance(compiled, str):
        # A new error each time: one kept and raised again would gather the
        # frames of every host it was raised for (and those hold their requests).
        raise InvalidQuery(compiled)
    return compiled


@functools.lru_cache(maxsize=128)
def _compile_cached(text: str) -> Query | str:
    # Hosts of one request share the hint: parse it once, failures included (as
    # the refusal's text).
    try:
        return Query(text, _compile(text))
    except InvalidQuery as exc:
        return str(exc)


def _compile(text: str) -> Term:
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidQuery(f'longer than {MAX_QUERY_CHARS} characters')
    try:
        data = json.loads(text)
    except RecursionError:
        raise InvalidQuery(f'nested deeper than {MAX_DEPTH} levels') from None
    except ValueError as exc:
        raise InvalidQuery(f'not JSON ({brief(exc, 80)})') from None
    if not data:
        return True
    if not isinstance(data, list):
        raise InvalidQuery('not a JSON list [operator, argument, ...]')
    budget = [MAX_TERMS]
    return _expression(data, 1, budget)


def _expression(items: list, depth: int, budget: list[int]) -> Term:
    if depth > MAX_DEPTH:
        raise InvalidQuery(f'nested deeper than {MAX_DEPTH} levels')
    budget[0] -= len(items)
    if budget[0] < 0:
        raise InvalidQuery(f'more than {MAX_TERMS} terms')
    if not items:
        return True  # Nova: an empty (sub)query is true
    op = items[0]
    if not isinstance(op, str) or op not in OPERATORS:
        raise InvalidQuery(f"unknown operator {brief(json.dumps(op), 30)} (known: "
                           f"{', '.join(sorted(OPERATORS))})")
    return Expression(op, tuple(_term(arg, depth, budget) for arg in items[1:]))


def _term(arg: Any, depth: int, budget: list[int]) -> Term:
    if isinstance(arg, list):
        return _expression(arg, depth + 1, budget)
    if isinstance(arg, str) and arg.startswith('$'):
        name, *keys = arg[1:].split('.')
        if len(keys) > MAX_LOOKUP_KEYS:
            raise InvalidQuery(f"lookup '{brief(arg, 40)}' has more than {MAX_LOOKUP_KEYS} keys")
        return Lookup(name, tuple(keys))
    return arg


@dataclass(frozen=True)
class Evaluation:
    passed: bool
    #: catalog-fed attributes the query looked up and the host catalog has no data for
    undescribed: frozenset[str]


def evaluate(query: Query, host_state: HostState) -> Evaluation:
    """Whether the host satisfies the query; QueryEvaluationError if it cannot be told."""
    undescribed: set[str] = set()
    passed = bool(_value(query.root, host_state, undescribed))
    return Evaluation(passed, frozenset(undescribed))


def _value(term: Term, host_state: HostState, undescribed: set[str]) -> Any:
    if isinstance(term, Expression):
        values = (_value(a, host_state, undescribed) for a in term.args)
        return _apply(term.op, [v for v in values if v is not None])
    if isinstance(term, Lookup):
        top = host_attribute(host_state, term.name)
        value = walk(top, term.keys)
        if value is MISSING or value is None:
            if term.name in CATALOG_ATTRIBUTES and is_absent(top):
                undescribed.add(term.name)
            return None
        return value
    if term == '':
        return None
    return term


def _apply(op: str, args: Sequence[Any]) -> bool:
    if op == 'and':
        return all(args)
    if op == 'or':
        return any(args)
    if op == 'not':
        return bool(args) and not all(args)
    if len(args) < 2:
        return False
    first, rest = args[0], args[1:]
    if op == 'in':
        return first in rest
    compare = _COMPARISONS[op]
    try:
        return all(compare(first, other) for other in rest)
    except TypeError:
        kinds = sorted({type(a).__name__ for a in args})
        raise QueryEvaluationError(
            f"'{op}' cannot compare {' with '.join(kinds)} values") from None


class JsonFilter(BaseHostFilter):
    """Hosts must satisfy the ``query`` scheduler hint."""

    # Host usage changes between the instances of a request: evaluate for each.
    run_filter_once_per_request = False
    RUN_ON_REBUILD = False

    def __init__(self) -> None:
        self._log_once = LogOnce(LOG)

    def filter_result(self, host_state: HostState, spec_obj: RequestSpec) -> FilterResult:
        hint = spec_obj.get_scheduler_hint(HINT)
        if not hint:
            return FilterResult.ok()
        if not isinstance(hint, str):
            return FilterResult.fail('invalid query hint: give it once, as one JSON string')
        try:
            evaluation = evaluate(compile_query(hint), host_state)
        except InvalidQuery as exc:
            return FilterResult.fail(f'invalid query hint: {exc}')
        except QueryEvaluationError as exc:
            return FilterResult.fail(f'query hint cannot be evaluated on the host: {exc}')
        if not evaluation.passed:
            return FilterResult.fail('query hint not satisfied')
        if evaluation.undescribed:
            # A lookup that finds nothing drops out (Nova's rule), which can let
            # the host pass; say so when it is the catalog that knows nothing.
            label = host_label(host_state)
            for name in sorted(evaluation.undescribed):
                self._log_once.warning(
                    (label, name), '%s: the host catalog has no %s for host %s; query '
                    'lookups of it find nothing and the host passed without it (logged once '
                    'per host)', self.name, name, label)
        return FilterResult.ok()
