"""Placement's JSON bodies decode the same with and without orjson."""
from __future__ import annotations

import json

import pytest

from placement_client import json_body

ANSWER = {
    'allocation_requests': [
        {'allocations': {'4a6e1f0c-0000-4000-8000-000000000001': {
            'resources': {'VCPU': 2, 'MEMORY_MB': 4096, 'DISK_GB': 40}}},
         'mappings': {'': ['4a6e1f0c-0000-4000-8000-000000000001']}}],
    'provider_summaries': {'4a6e1f0c-0000-4000-8000-000000000001': {
        'resources': {'VCPU': {'capacity': 64, 'used': 3}},
        'traits': ['HW_CPU_X86_AVX2', 'COMPUTE_STATUS_DISABLED'],
        'parent_provider_uuid': None,
        'root_provider_uuid': '4a6e1f0c-0000-4000-8000-000000000001'}},
    'ratio': 1.5, 'name': 'n\u00f6de \u2603', 'flags': [True, False, None],
}


@pytest.fixture(params=['orjson', 'stdlib'])
def decoder(request, monkeypatch):
    if request.param == 'orjson':
        pytest.importorskip('orjson')
    else:
        monkeypatch.setattr(json_body, 'orjson', None)
    return json_body.loads


def test_a_placement_answer_decodes_to_what_the_stdlib_gives(decoder):
    raw = json.dumps(ANSWER).encode()
    assert decoder(raw) == json.loads(raw) == ANSWER


def test_text_and_bytes_decode_alike(decoder):
    text = json.dumps(ANSWER)
    assert decoder(text) == decoder(text.encode()) == ANSWER


@pytest.mark.parametrize('raw', [
    '{"a": 1}'.encode('utf-16'),     # JSON in UTF-16, with a BOM
    '{"a": 1}'.encode('utf-32-le'),  # and UTF-32 without one
    b'{"a": NaN, "b": -Infinity}',   # the stdlib's extensions
    b'{"a": 18446744073709551615}',  # the largest 64-bit integer
])
def test_what_the_stdlib_accepts_stays_accepted(decoder, raw):
    assert repr(decoder(raw)) == repr(json.loads(raw))


def test_an_integer_beyond_64_bits_is_accepted_as_the_nearest_number(decoder):
    # Placement cannot send one (json_body's docstring); it still decodes.
    raw = b'{"a": 123456789012345678901234567890}'
    assert float(decoder(raw)['a']) == float(json.loads(raw)['a'])


@pytest.mark.parametrize('raw', [b'', b'<html>502 Bad Gateway</html>', b'{"a": 1', b'\xff\xfe\x00'])
def test_a_body_that_is_not_json_raises_value_error(decoder, raw):
    with pytest.raises(ValueError):
        decoder(raw)


def test_orjson_is_what_decodes_when_it_is_installed(monkeypatch):
    orjson = pytest.importorskip('orjson')
    calls = []

    def counting(content):
        calls.append(content)
        return orjson.loads(content)

    monkeypatch.setattr(json_body, 'orjson', type('Stub', (), {
        'loads': staticmethod(counting), 'JSONDecodeError': orjson.JSONDecodeError}))
    assert json_body.loads(b'{"a": 1}') == {'a': 1}
    assert calls == [b'{"a": 1}']
