"""``scheduler-manage status``: how findings become lines and exit codes (no network)."""
from __future__ import annotations

import datetime
import json

from placement_client.models import ResourceProvider
from scheduler.catalog import HostsFileContent
from scheduler.cmd import manage
from scheduler.cmd.manage_status import (
    FAILURE,
    OK,
    SKIPPED,
    WARNING,
    Check,
    catalog_findings,
    check_configuration,
    exit_code,
    render_json,
    render_text,
    workers_check,
)
from scheduler.conf import parse_args
from scheduler.host_state import HostRecord
from tests.builders import SERVICE_CELL

NOW = datetime.datetime(2026, 1, 15, 12, 0, tzinfo=datetime.timezone.utc)


def _checks(*statuses: str) -> list[Check]:
    return [Check(f'c{i}', s, f'summary {i}') for i, s in enumerate(statuses)]


def test_the_exit_code_is_that_of_the_worst_check():
    assert exit_code([]) == 0
    assert exit_code(_checks(OK, SKIPPED)) == 0
    assert exit_code(_checks(OK, WARNING, SKIPPED)) == 1
    assert exit_code(_checks(WARNING, FAILURE, OK)) == 2


def test_each_check_is_one_line_and_the_last_line_states_the_outcome():
    text = render_text(_checks(OK, WARNING))

    assert text.splitlines() == ['OK       c0           summary 0',
                                 'WARNING  c1           summary 1',
                                 'status: warning (exit 1)']
    report = json.loads(render_json(_checks(OK, FAILURE)))
    assert (report['status'], report['exit_code']) == (FAILURE, 2)
    assert [c['name'] for c in report['checks']] == ['c0', 'c1']


def _workers(**overrides) -> Check:
    values = dict(topic='scheduler', host='sched-1', expected_workers=2, topic_consumers=4,
                  topic_answered=4, topic_pings=4, host_consumers=2, host_answered=2,
                  host_pings=2)
    return workers_check(**{**values, **overrides})


def test_workers_are_ok_when_every_consumer_answers_and_this_host_runs_its_workers():
    check = _workers()

    assert check.status == OK
    assert check.summary == ('topic scheduler: 4 consumer(s), 4/4 ping(s) answered; this host '
                             '(sched-1): 2 consumer(s) for [scheduler] workers = 2, 2/2 ping(s) '
                             'answered')


def test_no_consumer_or_no_answer_on_the_topic_is_a_failure():
    assert _workers(topic_consumers=0, topic_pings=0, topic_answered=0).status == FAILURE
    assert _workers(topic_answered=0).status == FAILURE


def test_a_silent_consumer_or_a_worker_count_that_differs_is_a_warning():
    assert 'does not answer' in _workers(topic_answered=3).summary
    extra = _workers(host_consumers=3, host_pings=3, host_answered=3)
    missing = _workers(host_consumers=1, host_pings=1, host_answered=1)

    assert (extra.status, missing.status) == (WARNING, WARNING)
    assert 'nova-scheduler still running' in extra.summary
    assert 'fewer workers than configured' in missing.summary


def test_without_consumer_counts_the_line_says_only_pings_were_possible():
    check = _workers(topic_consumers=None, topic_pings=1, topic_answered=1,
                     host_consumers=None, host_pings=1, host_answered=1)

    assert check.status == OK
    assert 'no consumer counts' in check.summary


def _provider(uuid: str, name: str, root: str | None = None) -> ResourceProvider:
    return ResourceProvider(uuid=uuid, name=name, generation=0, root_provider_uuid=root or uuid,
                            parent_provider_uuid=None if root is None else root)


def _record(nodename: str, **kw) -> HostRecord:
    return HostRecord(nodename=nodename, service_host=nodename, cell_uuid=SERVICE_CELL, **kw)


def test_hosts_matching_no_root_provider_by_uuid_or_name_are_reported():
    u1, u2, child = ('00000000-0000-0000-0000-00000000000' + c for c in '12c')
    content = HostsFileContent(hosts=(
        _record('cn1'),                            # by name
        _record('renamed', provider_uuid=u2),      # by uuid, whatever its name
        _record('gone'),                           # no provider of that name
        _record('nic', provider_uuid=child),       # a child provider is not a compute node
    ))
    providers = [_provider(u1, 'cn1'), _provider(u2, 'cn2'), _provider(child, 'nic', root=u1)]

    [finding] = catalog_findings(content, providers, now=NOW, service_down_time=60)

    assert finding.startswith('2 listed host(s) match no Placement root provider')
    assert finding.endswith(': gone, nic')


def test_a_last_seen_up_older_than_service_down_time_is_reported_naive_meaning_utc():
    content = HostsFileContent(hosts=(
        _record('fresh', last_seen_up=NOW - datetime.timedelta(seconds=30)),
        _record('stale', last_seen_up=(NOW - datetime.timedelta(seconds=61)).replace(
            tzinfo=None)),
        _record('never'),
    ))

    [finding] = catalog_findings(content, None, now=NOW, service_down_time=60)

    assert finding == ('1 host(s) have a last_seen_up older than service_down_time (60 s), so '
                       'ComputeFilter treats them as down: stale')


def test_a_filter_the_service_cannot_load_fails_the_configuration_check(tmp_path):
    path = tmp_path / 'scheduler.conf'
    path.write_text('[filter_scheduler]\nenabled_filters = NoSuchFilter\n'
                    '[placement]\nauth_type = none\nendpoint_override = http://placement\n')
    conf = parse_args(['--config-file', str(path)], default_config_files=[])

    check, client = check_configuration(conf)

    assert (check.status, client) == (FAILURE, None)
    assert 'NoSuchFilter' in check.summary


def test_an_unreadable_configuration_exits_2_with_the_reason(tmp_path, capsys):
    missing = tmp_path / 'nowhere.conf'

    assert manage.main(['status', '--config-file', str(missing)]) == 2
    assert 'cannot read the configuration' in capsys.readouterr().err
