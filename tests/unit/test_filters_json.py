"""JsonFilter: the query hint, Nova's little expression language over host attributes."""
from __future__ import annotations

import gc
import json
import logging
import weakref

import pytest

from scheduler.filters.json_filter import (
    MAX_DEPTH,
    MAX_QUERY_CHARS,
    MAX_TERMS,
    InvalidQuery,
    JsonFilter,
    compile_query,
)
from tests.builders import make_host, make_spec

NOT_SATISFIED = (False, 'query hint not satisfied')
PASSES = (True, None)


def qemu_host(name='cn1'):
    # 32768 MB RAM free, 16 VCPU; described like a hosts file entry would
    return make_host(name, hypervisor_type='QEMU', hypervisor_version=8002000,
                     cpu_info={'vendor': 'Intel', 'maxphysaddr': {'bits': 46}},
                     stats={'gpu_model': 'A100'})


def verdict(hint: str, host=None):
    spec = make_spec(hints={'query': hint})
    result = JsonFilter().filter_result(host or qemu_host(), spec)
    return result.passed, result.reason


# (query as JSON data, (passed, reason))
QUERIES = {
    '= compares a lookup with a literal': (['=', '$free_ram_mb', 32768], PASSES),
    '>= holds': (['>=', '$free_ram_mb', 1024], PASSES),
    '< fails': (['<', '$free_ram_mb', 1024], NOT_SATISFIED),
    'a comparison holds against every other argument': (['<', 1, 2, 3], PASSES),
    'one failing comparison among several fails': (['<', 1, 2, 0], NOT_SATISFIED),
    'in finds the first argument among the others': (
        ['in', '$hypervisor_type', 'kvm', 'QEMU'], PASSES),
    'in fails when absent': (['in', '$hypervisor_type', 'kvm', 'xen'], NOT_SATISFIED),
    'and needs every argument': (
        ['and', ['>=', '$free_ram_mb', 1024], ['>=', '$vcpus_total', 32]], NOT_SATISFIED),
    'or needs one argument': (
        ['or', ['>=', '$free_ram_mb', 1024], ['>=', '$vcpus_total', 32]], PASSES),
    'not flips its argument': (['not', ['=', '$hypervisor_type', 'xen']], PASSES),
    'not inside and is a boolean (Nova: a list, always true)': (
        ['and', ['not', ['=', '$hypervisor_type', 'QEMU']]], NOT_SATISFIED),
    'not of several arguments is true when any is false': (['not', True, False], PASSES),
    'stats keys are looked up': (['=', '$stats.gpu_model', 'A100'], PASSES),
    'cpu_info keys are looked up, nested': (['>=', '$cpu_info.maxphysaddr.bits', 46], PASSES),
    'service keys are looked up': (['=', '$service.disabled', False], PASSES),
    'a lookup that finds nothing drops out (leaving too few arguments)': (
        ['=', '$stats.missing', 'x'], NOT_SATISFIED),
    'a lookup into a value that is not a mapping finds nothing': (
        ['=', '$free_ram_mb.x', 'x'], NOT_SATISFIED),
    'attributes Nova has not are not looked up': (['=', '$record', '$record'],
                                                  NOT_SATISFIED),
    'null and empty strings drop out': (['=', None, '', 1, 1], PASSES),
    'a comparison of fewer than two arguments is false': (['=', 1], NOT_SATISFIED),
    'and without arguments is true': (['and'], PASSES),
    'or without arguments is false': (['or'], NOT_SATISFIED),
    'an empty sub-query is true': (['and', []], PASSES),
    'an empty query passes every host': ([], PASSES),
    'a null query passes every host': (None, PASSES),
    'values of types that do not order are a reason, not a crash': (
        ['<', '$host', 5],
        (False, "query hint cannot be evaluated on the host: '<' cannot compare int with "
                'str values')),
    'an unknown operator is an invalid query': (
        ['xor', 1, 2], (False, 'invalid query hint: unknown operator "xor" (known: <, <=, =, '
                               '>, >=, and, in, not, or)')),
    'a literal list is a sub-query, as in Nova': (
        ['in', '$host', ['cn1', 'cn2']], (False, 'invalid query hint: unknown operator '
                                                 '"cn1" (known: <, <=, =, >, >=, and, in, '
                                                 'not, or)')),
    'a query that is not a list is invalid': (
        {'=': 1}, (False, 'invalid query hint: not a JSON list [operator, argument, ...]')),
    'too many keys in a lookup is invalid': (
        ['=', '$stats' + '.a' * 9, 1],
        (False, "invalid query hint: lookup '$stats.a.a.a.a.a.a.a.a.a' has more than 8 keys")),
}


@pytest.mark.parametrize(('query', 'expected'), QUERIES.values(), ids=QUERIES.keys())
def test_json_filter(query, expected):
    assert verdict(json.dumps(query)) == expected


def test_without_the_hint_every_host_passes():
    assert JsonFilter().filter_result(qemu_host(), make_spec()).passed


def test_text_that_is_not_json_is_an_invalid_query():
    passed, reason = verdict('[">=", "$free_ram_mb", 1024')
    assert not passed and reason.startswith('invalid query hint: not JSON (')


def test_the_hint_given_twice_is_an_invalid_query():
    spec = make_spec(hints={'query': ['["and"]', '["or"]']})
    result = JsonFilter().filter_result(qemu_host(), spec)
    assert (result.passed, result.reason) == (
        False, 'invalid query hint: give it once, as one JSON string')


def nested(depth: int) -> list:
    query: list = ['and']
    for _ in range(depth - 1):
        query = ['and', query]
    return query


def test_a_query_nested_to_the_bound_is_evaluated():
    assert verdict(json.dumps(nested(MAX_DEPTH))) == PASSES


# A hostile hint cannot make the filter work hard: it is refused by its shape.
HOSTILE = {
    'nested deeper than the bound': (
        json.dumps(nested(MAX_DEPTH + 1)),
        f'invalid query hint: nested deeper than {MAX_DEPTH} levels'),
    'nested deeper than the JSON parser goes': (
        '[' * (MAX_QUERY_CHARS // 2) + ']' * (MAX_QUERY_CHARS // 2),
        f'invalid query hint: nested deeper than {MAX_DEPTH} levels'),
    'more terms than the bound': (
        json.dumps(['and'] + [['=', 1, 1]] * MAX_TERMS),
        f'invalid query hint: more than {MAX_TERMS} terms'),
    'longer than the bound': (
        json.dumps(['in', 'x'] + ['y' * 100] * (MAX_QUERY_CHARS // 100)),
        f'invalid query hint: longer than {MAX_QUERY_CHARS} characters'),
}


@pytest.mark.parametrize(('hint', 'reason'), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_query_is_refused_with_a_reason(hint, reason):
    assert verdict(hint) == (False, reason)


def test_a_query_is_parsed_once_for_all_hosts():
    text = json.dumps(['>=', '$free_ram_mb', 1])
    assert compile_query(text) is compile_query(text)


def test_an_invalid_query_is_refused_the_same_way_each_time():
    for _ in range(2):
        with pytest.raises(InvalidQuery, match='unknown operator'):
            compile_query('["nand", 1]')


class _RequestState:
    """Stands for what the request that gave the hint holds (its hosts)."""


def _judge_a_host_and_return(hint: str) -> weakref.ref[_RequestState]:
    state = _RequestState()
    try:
        compile_query(hint)
    except InvalidQuery:
        pass
    return weakref.ref(state)


def test_an_invalid_query_keeps_nothing_of_the_requests_that_gave_it():
    # The refusal is parsed once and kept; an error kept and raised again would carry
    # the frames of every host it was raised for, and theirs hold their requests.
    gc.disable()
    try:
        given = [_judge_a_host_and_return('["nand", 1]') for _ in range(3)]
        assert [state() for state in given] == [None, None, None]
    finally:
        gc.enable()


def test_hosts_are_judged_on_their_own_values():
    query = json.dumps(['=', '$stats.gpu_model', 'A100'])
    other = make_host('cn2', stats={'gpu_model': 'H100'})
    assert verdict(query, qemu_host()) == PASSES
    assert verdict(query, other) == NOT_SATISFIED


def test_a_host_passing_only_because_the_catalog_lacks_its_data_is_logged_once(caplog):
    query = json.dumps(['not', ['=', '$hypervisor_type', 'xen']])
    undescribed = make_host('bare')   # known only from Placement: no hypervisor_type
    filter_ = JsonFilter()
    spec = make_spec(hints={'query': query})

    results = [filter_.filter_result(undescribed, spec).passed for _ in range(3)]

    assert results == [True, True, True]
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert 'the host catalog has no hypervisor_type for host bare' in warning


def test_a_described_host_passing_a_query_is_not_logged(caplog):
    spec = make_spec(hints={'query': json.dumps(['not', ['=', '$hypervisor_type', 'xen']])})
    assert JsonFilter().filter_result(qemu_host(), spec).passed
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
