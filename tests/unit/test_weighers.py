"""Weighers: Nova's normalisation, multipliers (config and aggregate), ordering."""
from __future__ import annotations

import logging

import pytest

from scheduler.exceptions import WeigherError
from scheduler.explain import InstanceAttempt, RequestTrace
from scheduler.host_table import as_view
from scheduler.pipeline.weighing import weigh
from scheduler.weights.base import (
    BaseHostWeigher,
    WeighedHost,
    get_weight_multiplier,
    normalize,
    weigh_hosts,
)
from scheduler.weights.cpu import CPUWeigher
from scheduler.weights.disk import DiskWeigher
from scheduler.weights.ram import RAMWeigher
from tests.builders import configured, make_aggregate, make_host, make_spec


def order(weighed):
    return [w.host.host for w in weighed]


class ConstantWeigher(BaseHostWeigher):
    def _weigh_object(self, host_state, weight_properties):
        return 5.0


class NameNumberWeigher(BaseHostWeigher):
    """Weighs hosts by the digit their name ends in."""

    def _weigh_object(self, host_state, weight_properties):
        return float(host_state.host[-1])


class BoundedNameNumberWeigher(NameNumberWeigher):
    minval = 2
    maxval = 6


class RelativeWeigher(BaseHostWeigher):
    """Overrides weigh_objects the Nova way: reads ``.obj`` and returns weights only."""

    def weigh_objects(self, weighed_obj_list, weight_properties):
        rams = [w.obj.free_ram_mb for w in weighed_obj_list]
        return [r - min(rams) for r in rams]


class ExplodingWeigher(BaseHostWeigher):
    def _weigh_object(self, host_state, weight_properties):
        raise ZeroDivisionError('metrics')


class ShortWeigher(BaseHostWeigher):
    def weigh_objects(self, weighed_obj_list, weight_properties):
        return [1.0]


# normalize ------------------------------------------------------------------------------

@pytest.mark.parametrize(('values', 'minval', 'maxval', 'expected'), [
    ([], None, None, []),
    ([1.0, 2.0], None, None, [0.0, 1.0]),
    ([1.0, 2.0, 3.0], None, None, [0.0, 0.5, 1.0]),
    ([2.0, 2.0], None, None, [0.0, 0.0]),                # all equal -> 0
    ([1.0, 2.0], None, 3.0, [0.0, 0.5]),                 # weigher's maxval replaces max
    ([1.0, 3.0], 0.0, None, [1 / 3, 1.0]),               # weigher's minval replaces min
    ([0.5, 1.5], 0.0, 2.0, [0.25, 0.75]),
    ([1000.0, 1000.0], 0.0, None, [1.0, 1.0]),           # minval 0: equal non-zero -> 1.0
    ([0.0, 0.0], 0.0, None, [0.0, 0.0]),                 # ... but equal zeros -> 0
    ([5.0], 5.0, 5.0, [0.0]),
])
def test_normalize_is_novas(values, minval, maxval, expected):
    assert normalize(values, minval, maxval) == pytest.approx(expected)


def test_normalize_does_not_clamp_like_nova():
    assert normalize([-1.0, 1.0], 0.0, 1.0) == [-1.0, 1.0]


# weigh_objects ---------------------------------------------------------------------------

def test_raw_weights_are_clamped_to_the_weighers_bounds():
    hosts = [WeighedHost(make_host(f'h{i}')) for i in (0, 4, 9)]
    assert BoundedNameNumberWeigher().weigh_objects(hosts, make_spec()) == [2, 4, 6]


def test_negative_free_ram_is_clamped_to_zero():
    over = make_host('over', ram=(1024, 2048))
    assert RAMWeigher().weigh_objects([WeighedHost(over)], make_spec()) == [0]


# weigh_hosts --------------------------------------------------------------------------

def test_hosts_are_sorted_by_weight_descending():
    hosts = [make_host('h1'), make_host('h3'), make_host('h2')]
    weighed = weigh_hosts([NameNumberWeigher()], hosts, make_spec())
    assert order(weighed) == ['h3', 'h2', 'h1']
    assert [w.weight for w in weighed] == [1.0, 0.5, 0.0]


def test_ties_keep_the_input_order():
    hosts = [make_host(name) for name in ('b', 'a', 'c', 'd')]
    weighed = weigh_hosts([ConstantWeigher()], hosts, make_spec())
    assert order(weighed) == ['b', 'a', 'c', 'd']


def test_each_weighers_scores_are_logged_at_debug(caplog):
    caplog.set_level(logging.DEBUG, logger='scheduler.weights.base')
    weigh_hosts([NameNumberWeigher()], [make_host('h1'), make_host('h3')], make_spec())
    [message] = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert message == ('NameNumberWeigher (multiplier * normalised raw): '
                       'h1: 1.0 * 0.0000 (1.0), h3: 1.0 * 1.0000 (3.0)')


def test_one_or_no_host_is_not_weighed():
    only = make_host('h1')
    assert [(w.host, w.weight) for w in weigh_hosts([ExplodingWeigher()], [only],
                                                    make_spec())] == [(only, 0.0)]
    assert weigh_hosts([ExplodingWeigher()], [], make_spec()) == []


def test_weights_are_the_sum_of_multiplier_times_normalised_value_per_weigher():
    ram = configured(RAMWeigher, ram_weight_multiplier=2.0)
    cpu = configured(CPUWeigher, cpu_weight_multiplier=1.0)
    big_ram = make_host('big-ram', ram=(8192, 0), vcpu=(8, 6))
    big_cpu = make_host('big-cpu', ram=(8192, 4096), vcpu=(8, 0))
    weighed = weigh_hosts([ram, cpu], [big_ram, big_cpu], make_spec())
    by_name = {w.host.host: w for w in weighed}
    # RAM: 8192 and 4096 free over [0, 8192] -> 1.0 and 0.5; CPU: 2 and 8 over [0, 8].
    assert by_name['big-ram'].contributions == pytest.approx(
        {'RAMWeigher': 2.0, 'CPUWeigher': 0.25})
    assert by_name['big-cpu'].contributions == pytest.approx(
        {'RAMWeigher': 1.0, 'CPUWeigher': 1.0})
    assert by_name['big-ram'].weight == pytest.approx(2.25)
    assert order(weighed) == ['big-ram', 'big-cpu']


def test_a_request_keeps_no_weigher_shares_and_weighs_exactly_as_one_that_does():
    ram = configured(RAMWeigher, ram_weight_multiplier=2.0)
    cpu = configured(CPUWeigher, cpu_weight_multiplier=1.0)
    hosts = [make_host(f'h{n}', ram=(8192, 512 * n), vcpu=(8, n % 5)) for n in range(12)]
    explained = InstanceAttempt(index=0, weigher_shares=True)
    answered = InstanceAttempt(index=0)

    with_shares = weigh([ram, cpu, NameNumberWeigher()], make_spec(), as_view(hosts), explained)
    without = weigh([ram, cpu, NameNumberWeigher()], make_spec(), as_view(hosts), answered)

    assert [(w.host.host, w.weight) for w in without] == [
        (w.host.host, w.weight) for w in with_shares]
    assert all(w.contributions == {} for w in without)
    assert all(set(w.contributions) == {'RAMWeigher', 'CPUWeigher', 'NameNumberWeigher'}
               for w in with_shares)
    assert RequestTrace(weigher_shares=True).new_attempt(0, 12).weigher_shares
    assert not RequestTrace().new_attempt(0, 12).weigher_shares


def test_identical_hosts_score_one_per_resource_weigher_as_in_nova():
    weighers = [configured(cls) for cls in (RAMWeigher, CPUWeigher, DiskWeigher)]
    weighed = weigh_hosts(weighers, [make_host('a'), make_host('b')], make_spec())
    assert [w.weight for w in weighed] == [3.0, 3.0]
    assert order(weighed) == ['a', 'b']


def test_ram_weigher_spreads_by_default_and_stacks_with_a_negative_multiplier():
    hosts = [make_host('busy', ram=(8192, 6144)), make_host('idle', ram=(8192, 0))]
    assert order(weigh_hosts([configured(RAMWeigher)], hosts, make_spec()))[0] == 'idle'
    stack = configured(RAMWeigher, ram_weight_multiplier=-1.0)
    assert order(weigh_hosts([stack], hosts, make_spec()))[0] == 'busy'


def test_cpu_weigher_weighs_free_vcpus():
    weigher = configured(CPUWeigher)
    host = make_host('h', vcpu=(32, 12))
    assert weigher._weigh_object(host, make_spec()) == 20


def test_disk_weigher_weighs_free_disk_in_mb():
    weigher = configured(DiskWeigher)
    assert weigher._weigh_object(make_host('h', disk=(100, 40)), make_spec()) == 60 * 1024


def test_disk_weigher_follows_its_multiplier():
    hosts = [make_host('small', disk=(100, 90)), make_host('large', disk=(100, 0))]
    weighed = weigh_hosts([configured(DiskWeigher, disk_weight_multiplier=-3.0)], hosts,
                          make_spec())
    assert order(weighed) == ['small', 'large']
    assert weighed[1].weight == pytest.approx(-3.0)


def test_a_weigher_overriding_weigh_objects_the_nova_way_works():
    hosts = [make_host('a', ram=(4096, 0)), make_host('b', ram=(8192, 0))]
    assert order(weigh_hosts([RelativeWeigher()], hosts, make_spec())) == ['b', 'a']


def test_a_weigher_exception_becomes_a_weigher_error_naming_it():
    with pytest.raises(WeigherError, match='ExplodingWeigher') as caught:
        weigh_hosts([ExplodingWeigher()], [make_host('a'), make_host('b')], make_spec())
    assert isinstance(caught.value.__cause__, ZeroDivisionError)


def test_a_weigher_returning_the_wrong_number_of_weights_is_an_error():
    with pytest.raises(WeigherError, match='1 weights for 2 hosts'):
        weigh_hosts([ShortWeigher()], [make_host('a'), make_host('b')], make_spec())


def test_a_weigher_without_configuration_fails_clearly():
    with pytest.raises(WeigherError, match='RAMWeigher has no configuration'):
        weigh_hosts([RAMWeigher()], [make_host('a'), make_host('b')], make_spec())


# Aggregate multiplier override ----------------------------------------------------------

def test_the_configured_multiplier_applies_without_aggregate_metadata():
    host = make_host('h', aggregates=[make_aggregate('az1', metadata={'other': '5'})])
    assert get_weight_multiplier(host, 'ram_weight_multiplier', 1.5) == 1.5


def test_aggregate_metadata_named_like_the_option_overrides_the_multiplier():
    agg = make_aggregate('fast', metadata={'ram_weight_multiplier': '3.5'})
    assert get_weight_multiplier(make_host('h', aggregates=[agg]),
                                 'ram_weight_multiplier', 1.0) == 3.5


def test_the_smallest_of_several_aggregate_values_wins():
    aggs = [make_aggregate('a', metadata={'cpu_weight_multiplier': '2'}),
            make_aggregate('b', metadata={'cpu_weight_multiplier': '-1'}, id=2)]
    assert get_weight_multiplier(make_host('h', aggregates=aggs),
                                 'cpu_weight_multiplier', 1.0) == -1.0


@pytest.mark.parametrize('bad', ['fast', 'nan', 'inf'])
def test_an_unparsable_aggregate_value_falls_back_to_the_config_value(bad):
    aggs = [make_aggregate('a', metadata={'disk_weight_multiplier': bad}),
            make_aggregate('b', metadata={'disk_weight_multiplier': '0.5'}, id=2)]
    host = make_host('h', aggregates=aggs)
    assert get_weight_multiplier(host, 'disk_weight_multiplier', 7.0) == 7.0


def test_an_unparsable_aggregate_value_is_warned_about_once():
    agg = make_aggregate('once', metadata={'ram_weight_multiplier': 'bogus-once'})
    host = make_host('h', aggregates=[agg])
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger('scheduler.weights.base')
    logger.addHandler(handler)
    try:
        for _ in range(3):
            get_weight_multiplier(host, 'ram_weight_multiplier', 1.0)
    finally:
        logger.removeHandler(handler)
    assert len(records) == 1
    assert 'ram_weight_multiplier' in records[0].getMessage()


def test_weighers_apply_the_aggregate_override_per_host():
    heavy = make_aggregate('heavy', metadata={'ram_weight_multiplier': '10'})
    hosts = [make_host('plain', ram=(8192, 0)),
             make_host('in-agg', ram=(8192, 4096), aggregates=[heavy])]
    weighed = weigh_hosts([configured(RAMWeigher)], hosts, make_spec())
    assert order(weighed) == ['in-agg', 'plain']
    assert [w.weight for w in weighed] == pytest.approx([5.0, 1.0])
