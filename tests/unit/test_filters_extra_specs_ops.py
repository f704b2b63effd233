"""Nova's extra-spec operators: which host values satisfy which flavor requirements."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.filters.extra_specs_ops import OPERATORS, match, parse

# (host value, requirement, satisfied?)
MATCHES = {
    # "=" means "at least", Nova's historic numeric operator
    '= is at least: more': ('1024', '= 512', True),
    '= is at least: equal': ('512', '= 512', True),
    '= is at least: less': ('511', '= 512', False),
    '== is numeric equality': ('512.0', '== 512', True),
    '== fails on a different number': ('513', '== 512', False),
    '!= holds on a different number': ('1', '!= 2', True),
    '!= fails on the same number': ('2.0', '!= 2', False),
    '>= holds': ('8', '>= 4', True),
    '>= fails': ('2', '>= 4', False),
    '<= holds': ('2', '<= 4', True),
    '<= fails': ('8', '<= 4', False),
    'numbers are read as floats': ('1e3', '>= 999.5', True),
    's== is string equality': ('abc', 's== abc', True),
    's== does not read numbers': ('1.0', 's== 1', False),
    's!= holds on another string': ('abc', 's!= abd', True),
    's!= fails on the same string': ('abc', 's!= abc', False),
    's< is lexicographic': ('10', 's< 9', True),
    's<= holds on equal strings': ('abc', 's<= abc', True),
    's> holds': ('b', 's> a', True),
    's>= fails': ('a', 's>= b', False),
    '<in> is a substring test': ('avx2 aes sse4', '<in> aes', True),
    '<in> on a rendered list is still a substring test': ("['avx2', 'aes']", '<in> avx', True),
    '<in> fails when absent': ('avx2', '<in> aes', False),
    '<all-in> needs every word': ("['avx2', 'aes']", '<all-in> aes avx2', True),
    '<all-in> fails when one is absent': ("['avx2', 'aes']", '<all-in> aes sse4', False),
    '<or> matches one alternative': ('kvm', '<or> qemu <or> kvm', True),
    '<or> fails on none': ('xen', '<or> qemu <or> kvm', False),
    '<or> takes every other word as a keyword': ('b', '<or> a b c', False),
    '<or> reads the word after a keyword': ('c', '<or> a b c', True),
    '<or> compares whole values, not substrings': ('kvm2', '<or> kvm <or> qemu', False),
    'a plain value is string equality': ('true', 'true', True),
    'plain equality is case sensitive': ('True', 'true', False),
    'plain equality compares the requirement as written': ('a b', 'a b', True),
    'an unknown first word makes it plain equality': ('>> 4', '>> 4', True),
    'an empty requirement equals only the empty value': ('', '', True),
    'an empty requirement is not met by a value': ('x', '', False),
    'only the first operand counts': ('5', '>= 4 8', True),
    'surrounding whitespace is ignored by operators': ('5', '  >=   4 ', True),
    'a non-number never meets a numeric operator': ('abc', '= 1', False),
    'a non-number operand is met by nothing': ('1', '>= abc', False),
    'nan is a number: != holds': ('nan', '!= 1', True),
    '!= nan holds for every number': ('5', '!= nan', True),
    'nan meets no other comparison': ('nan', '>= nan', False),
    'inf is a number': ('inf', '>= 1e308', True),
    'an operator without operand is met by nothing': ('1', '=', False),
    '<or> without alternatives is met by nothing': ('x', '<or>', False),
    'no value meets an operator': (None, '= 1', False),
    'no value meets a plain requirement': (None, 'x', False),
}


@pytest.mark.parametrize(('value', 'req', 'expected'), MATCHES.values(), ids=MATCHES.keys())
def test_match(value, req, expected):
    assert match(value, req) is expected


@pytest.mark.parametrize(('value', 'req', 'expected'), [
    ('nan', '!= 1', True), ('5', '!= nan', True), ('NaN', '== nan', False),
    ('nan', '= -inf', False), ('7', '<= inf', True)])
def test_nan_and_inf_are_numbers_as_in_nova_s_extra_specs_ops_match(value, req, expected):
    """As nova.scheduler.filters.extra_specs_ops.match, which reads both sides with
    float(): nan meets only !=, inf compares as infinity; neither is a problem."""
    assert match(value, req) is expected
    assert parse(req).problem is None


def test_a_parsed_requirement_matches_like_its_text():
    requirement = parse('<or> qemu <or> kvm')
    assert requirement.op == '<or>'
    assert requirement.alternatives == ('qemu', 'kvm')
    assert match('kvm', requirement) and not match('xen', requirement)


PROBLEMS = {
    'a numeric operand that is not a number': ('= abc', "'abc' is not a number"),
    'an operator with nothing after it': ('s==', "'s==' is not followed by a value"),
    '<or> with no alternatives': ('<or>', "'<or>' is not followed by a value"),
    'a satisfiable numeric requirement': ('>= 4', None),
    'a string operator takes any operand': ('s== abc', None),
    'a plain value': ('anything at all', None),
}


@pytest.mark.parametrize(('req', 'problem'), PROBLEMS.values(), ids=PROBLEMS.keys())
def test_a_requirement_no_value_can_meet_says_why(req, problem):
    assert parse(req).problem == problem


def test_every_operator_is_recognised_as_one():
    assert {parse(f'{op} 1').op for op in OPERATORS} == set(OPERATORS)


@given(st.integers(-10**6, 10**6), st.integers(-10**6, 10**6))
def test_numeric_operators_agree_with_arithmetic(have, want):
    assert match(str(have), f'>= {want}') is (have >= want)
    assert match(str(have), f'= {want}') is (have >= want)
    assert match(str(have), f'<= {want}') is (have <= want)
    assert match(str(have), f'== {want}') is (have == want)
    assert match(str(have), f'!= {want}') is (have != want)


@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1))
def test_s_equals_holds_exactly_for_the_same_word(word):
    assert match(word, f's== {word}')
    assert not match(word + 'x', f's== {word}')
