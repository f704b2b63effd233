"""Placement misbehaving under the service: down, hanging, failing, losing answers.

The real service talks to the real (embedded) Placement through a real TCP
fault-injecting proxy (tests/fixtures/fault_proxy.py). What the proxy saw
proves the bounds (how many attempts, and that the client gave up on each
hung one); what Placement holds afterwards is read back from Placement
directly, around the proxy.

The RPC transport plays no part in these faults, so they run over the
in-process transport only; the broker's own faults are in test_rabbit_restart.py.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from scheduler import exceptions as exc
from tests.builders import boot_spec, new_uuids, select
from tests.fixtures import fault_proxy as fp
from tests.fixtures.processes import wait_for
from tests.functional.cloud import add_host, consumers_with_allocations


@pytest.fixture
def transport_url() -> str:
    return 'fake://'


@pytest.fixture
def proxy(placement) -> Iterator[fp.FaultProxy]:
    proxy = fp.FaultProxy(placement.url, hang_limit=30).start()
    yield proxy
    proxy.stop()


def select_no_alternates(running, spec, uuids):
    """Placement's faults decide the one host chosen; alternates would only hide them."""
    return select(running, spec, uuids, return_alternates=False)


def outcomes(proxy: fp.FaultProxy, method: str | None = None,
             path: str | None = None) -> list[str]:
    proxy.settle()
    return [e.outcome for e in proxy.exchanges(method, path)]


# ----------------------------------------------------------------- down at start-up


def test_a_service_started_while_placement_is_down_says_so_names_the_outage_and_recovers(
        start_scheduler, placement, placement_client, caplog):
    add_host(placement_client, 'cn0')
    placement.stop()

    with caplog.at_level(logging.WARNING, logger='scheduler.service'):
        running = start_scheduler()
    assert 'Placement is unreachable' in caplog.text and 'starting anyway' in caplog.text

    with pytest.raises(exc.NoValidHost) as failure:
        select_no_alternates(running, boot_spec(), new_uuids(1))
    reason = failure.value.reason
    assert reason.startswith('Placement unreachable after 2 attempts'), reason
    # An outage is never reported as a lack of capacity.
    assert 'no allocation candidates' not in reason
    assert 'not enough hosts' not in reason and 'hosts available' not in reason

    placement.start()   # no restart of the service: the next call simply works
    [instance] = new_uuids(1)
    [selections] = select_no_alternates(running, boot_spec(), [instance])
    assert selections[0].service_host == 'cn0'
    assert placement_client.get_allocations(instance).allocations


# ------------------------------------------------------- hanging, 5xx, dropped links


def test_a_hanging_placement_is_given_up_on_after_each_read_timeout_then_named(
        start_scheduler, proxy, placement_client):
    host = add_host(placement_client, 'cn0')
    running = start_scheduler(placement_url=proxy.url, **{'placement.read_timeout': 0.3,
                                                          'placement.max_retries': 2})
    proxy.set_mode(fp.HANG)
    [instance] = new_uuids(1)

    with pytest.raises(exc.NoValidHost) as failure:
        select_no_alternates(running, boot_spec(), [instance])

    assert failure.value.reason.startswith('Placement unreachable after 3 attempts')
    assert 'timed out' in failure.value.reason
    # max_retries + 1 attempts, and the client hung up on every one of them.
    assert outcomes(proxy, 'GET', '/allocation_candidates') == [
        'abandoned by client'] * 3
    assert consumers_with_allocations(placement_client, [host]) == {}

    proxy.set_mode(fp.PASS)
    assert select_no_alternates(running, boot_spec(), [instance])[0][0].service_host == 'cn0'


@pytest.mark.parametrize('max_retries', [0, 3])
def test_placement_answering_503_is_tried_max_retries_plus_one_times_then_named(
        start_scheduler, proxy, placement_client, max_retries):
    add_host(placement_client, 'cn0')
    running = start_scheduler(placement_url=proxy.url,
                              **{'placement.max_retries': max_retries})
    proxy.forget()   # start-up's version negotiation went through the proxy too
    proxy.set_mode(fp.UNAVAILABLE)

    with pytest.raises(exc.NoValidHost) as failure:
        select_no_alternates(running, boot_spec(), new_uuids(1))

    assert failure.value.reason.startswith(
        f'Placement unreachable after {max_retries + 1} attempts')
    assert 'HTTP 503' in failure.value.reason
    assert outcomes(proxy) == ['injected'] * (max_retries + 1)


def test_a_connection_dropped_once_costs_one_retry_and_the_request_succeeds(
        start_scheduler, proxy, placement_client):
    add_host(placement_client, 'cn0')
    running = start_scheduler(placement_url=proxy.url)
    proxy.fail_nth('GET', 1, fp.CLOSE, path='/allocation_candidates')
    [instance] = new_uuids(1)

    [selections] = select_no_alternates(running, boot_spec(), [instance])

    assert selections[0].service_host == 'cn0'
    assert outcomes(proxy, 'GET', '/allocation_candidates') == ['closed', 'answered']


def test_a_claim_whose_answer_was_lost_is_recognised_on_the_retry_and_held_once(
        start_scheduler, proxy, placement_client):
    host = add_host(placement_client, 'cn0')
    running = start_scheduler(placement_url=proxy.url)
    proxy.fail_nth('PUT', 1, fp.LOSE_ANSWER)
    [instance] = new_uuids(1)

    [selections] = select_no_alternates(running, boot_spec(vcpus=2), [instance])

    assert selections[0].compute_node_uuid == host
    # The first PUT reached Placement; the retry met its own claim and accepted it.
    assert outcomes(proxy, 'PUT') == ['answer lost', 'answered']
    assert consumers_with_allocations(placement_client, [host]) == {
        instance: {host: {'VCPU': 2, 'MEMORY_MB': 1024, 'DISK_GB': 10}}}


@pytest.mark.parametrize('fault', [fp.UNAVAILABLE, fp.HANG, fp.CLOSE])
def test_placement_failing_mid_request_leaves_no_allocation_once_it_is_back(
        start_scheduler, proxy, placement_client, fault):
    hosts = [add_host(placement_client, f'cn{i}') for i in range(3)]
    running = start_scheduler(placement_url=proxy.url, **{'placement.read_timeout': 0.3,
                                                          'placement.max_retries': 1})
    uuids = new_uuids(3)
    # The first claim lands; from the second on, every PUT and every DELETE fails:
    # the roll-back of the first claim fails too and must not be forgotten.
    proxy.fail_nth('PUT', 2, fault, times=None)
    proxy.fail_nth('DELETE', 1, fault, times=None)

    with pytest.raises(exc.NoValidHost) as failure:
        select_no_alternates(running, boot_spec(num_instances=3), uuids)

    assert failure.value.reason.startswith('Placement unreachable after 2 attempts while '
                                           'claiming')
    proxy.settle()
    deletes = proxy.exchanges('DELETE')
    assert deletes and all(e.fault == fault for e in deletes)
    held = consumers_with_allocations(placement_client, hosts)
    assert set(held) == {uuids[0]}          # still there: Placement refused to delete it
    # The second claim's PUT may yet land (a hang forwards it once Placement is
    # back): it is watched too, and given back if it does.
    assert running.service.cleanups.pending() == {uuids[0], uuids[1]}

    proxy.set_mode(fp.PASS)                 # Placement is back

    wait_for(lambda: not consumers_with_allocations(placement_client, hosts)
             and running.service.cleanups.pending() <= {uuids[1]},
             'the failed roll-back to be retried', timeout=15)
    # Only the second claim is still watched (until recovery.LANDING_WINDOW), and
    # only when Placement shows nothing of it.
    assert not consumers_with_allocations(placement_client, hosts)
    # The roll-back that emptied the consumer reached Placement: sent once Placement
    # was back, or (a hang) one held when it came back and forwarded then.
    reached = {'answered', 'released'} if fault == fp.HANG else {'answered'}
    assert outcomes(proxy, 'DELETE')[-1] in reached


# --------------------------------------------------------- generation conflict storms


def test_a_generation_conflict_storm_costs_a_bounded_number_of_claims_per_host(
        start_scheduler, proxy, placement_client):
    hosts = [add_host(placement_client, f'cn{i}') for i in range(2)]
    running = start_scheduler(placement_url=proxy.url, **{
        'scheduler.claim_max_retries': 3, 'scheduler.max_claim_candidates_per_host': 1})
    proxy.add_rule(fp.Rule(fp.GENERATION_CONFLICT, method='PUT'))

    with pytest.raises(exc.NoValidHost) as failure:
        select_no_alternates(running, boot_spec(), new_uuids(1))

    assert 'concurrent updates' in failure.value.reason
    # 2 hosts x 1 candidate each x 3 attempts, then the request gives up.
    assert len(outcomes(proxy, 'PUT')) == 6
    assert consumers_with_allocations(placement_client, hosts) == {}


def test_a_generation_conflict_that_clears_is_retried_on_the_same_candidate(
        start_scheduler, proxy, placement_client):
    hosts = [add_host(placement_client, f'cn{i}') for i in range(2)]
    running = start_scheduler(placement_url=proxy.url, **{'scheduler.claim_max_retries': 3})
    proxy.fail_nth('PUT', 1, fp.GENERATION_CONFLICT, times=2)
    [instance] = new_uuids(1)

    [selections] = select_no_alternates(running, boot_spec(), [instance])

    assert outcomes(proxy, 'PUT') == ['injected', 'injected', 'answered']
    assert set(consumers_with_allocations(placement_client, hosts)) == {instance}
    assert selections[0].compute_node_uuid in hosts
