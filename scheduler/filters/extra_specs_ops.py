"""Nova's extra-spec operators: does a host-side value satisfy a flavor's requirement?

A requirement is the value of a flavor extra spec, e.g. ``">= 4"``, ``"<in> avx2"``,
``"<or> kvm <or> qemu"`` or just ``"true"``. Its first word picks the operator:

======================  ============================================================
``=``                   numeric: value >= operand (not equality: Nova's historic "at least")
``==`` ``!=``           numeric equality / inequality
``>=`` ``<=``           numeric comparison
``s==`` ``s!=``         string equality / inequality
``s<`` ``s<=`` ``s>``   string (lexicographic) comparison
``s>=``
``<in>``                the operand is a substring of the value
``<all-in>``            every operand is a substring of the value
``<or>``                ``<or> a <or> b ...``: the value equals one of the alternatives
anything else           the whole requirement, as written, equals the value
======================  ============================================================

Only the first operand counts for the single-operand operators (``">= 4 8"`` is
``">= 4"``). Numbers are read as Python floats read them, ``nan`` and ``inf``
included, as in Nova.

Where Nova raises (a non-number under a numeric operator, ``<or>`` with nothing
after it), a requirement here simply is not met, and :attr:`Requirement.problem`
says why, so a filter can tell the user that no host could ever satisfy it.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

OR = '<or>'
ALL_IN = '<all-in>'
IN = '<in>'

_NUMERIC: dict[str, Callable[[float, float], bool]] = {
    '=': operator.ge,
    '==': operator.eq,
    '!=': operator.ne,
    '>=': operator.ge,
    '<=': operator.le,
}
_STRING: dict[str, Callable[[str, str], bool]] = {
    's==': operator.eq,
    's!=': operator.ne,
    's<': operator.lt,
    's<=': operator.le,
    's>': operator.gt,
    's>=': operator.ge,
}
#: Every word that makes a requirement an operator expression.
OPERATORS = frozenset({*_NUMERIC, *_STRING, IN, ALL_IN, OR})


@dataclass(frozen=True)
class Requirement:
    """A parsed requirement. ``op`` is None for plain string equality with ``raw``."""

    raw: str
    op: str | None
    operands: tuple[str, ...]

    @property
    def problem(self) -> str | None:
        """Why no value can ever satisfy this requirement; None if some value can."""
        if self.op is None:
            return None
        if not self.operands:
            return f"'{self.op}' is not followed by a value"
        if self.op in _NUMERIC and _number(self.operands[0]) is None:
            return f"'{self.operands[0]}' is not a number"
        return None

    @property
    def alternatives(self) -> tuple[str, ...]:
        """For ``<or>``: the values that satisfy it (every other word is a keyword)."""
        return self.operands[::2] if self.op == OR else ()


def parse(req: str) -> Requirement:
    """Split a requirement into operator and operands; never fails."""
    words = req.split()
    if words and words[0] in OPERATORS:
        return Requirement(req, words[0], tuple(words[1:]))
    return Requirement(req, None, ())


def match(value: str | None, req: str | Requirement) -> bool:
    """Whether ``value`` (a host capability or aggregate metadata value, as a string)
    satisfies the requirement ``req``."""
    requirement = req if isinstance(req, Requirement) else parse(req)
    if requirement.op is None:
        return value == requirement.raw
    if value is None or not requirement.operands:
        return False
    op, operands = requirement.op, requirement.operands
    if op == OR:
        # Nova drops the word after each alternative whatever it is, so
        # "<or> a b c" offers a and c; kept as is for identical verdicts.
        return value in requirement.alternatives
    if op == IN:
        return operands[0] in value
    if op == ALL_IN:
        return all(word in value for word in operands)
    if op in _STRING:
        return _STRING[op](value, operands[0])
    have, want = _number(value), _number(operands[0])
    if have is None or want is None:
        return False
    return _NUMERIC[op](have, want)


def _number(text: str) -> float | None:
    # NaN is a number, as Nova's float() reads it: no comparison with it holds
    # but !=, so "!= nan" is met by every number (nova.scheduler.filters.
    # extra_specs_ops.match).
    try:
        return float(text)
    except ValueError:
        return None
