"""Amounts that reach a Placement query are bounded by what Placement can hold.

Placement stores totals and allocations as 32-bit integers: a larger amount
can never be satisfied, and one beyond 64 bits makes Placement fail with a
500 that would read as an outage (found by tests/functional/
test_translation_property.py). The translation refuses both up front.
"""
from __future__ import annotations

import pytest

from scheduler.exceptions import RequestTranslationError
from scheduler.objects.spec import Flavor
from scheduler.request import names
from scheduler.request.translate import build_query
from tests.builders import make_spec


def test_the_largest_amount_placement_holds_is_accepted():
    assert names.amount(str(2**31 - 1), 'x') == 2**31 - 1


@pytest.mark.parametrize('value', [2**31, '2147483648', '9' * 30])
def test_a_larger_amount_is_refused_naming_the_bound(value):
    with pytest.raises(RequestTranslationError, match=r'larger than Placement can hold'):
        names.amount(value, 'flavor extra spec resources:VCPU')


def test_an_absurd_extra_spec_amount_never_becomes_a_query():
    spec = make_spec(flavor=Flavor(vcpus=1, memory_mb=512, root_gb=1,
                                   extra_specs={'resources:VCPU': '9' * 30}))
    with pytest.raises(RequestTranslationError, match="resources:VCPU.*999.*\\.\\.\\."):
        build_query(spec, limit=1000)
