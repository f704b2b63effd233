"""The explain report: SchedulerManager.explain as a dry run, the NoValidHost line's
limit note and host names, and scheduler-manage explain's request parsing and output."""
from __future__ import annotations

import argparse
import json
import random

import pytest

from scheduler import explain
from scheduler.catalog import HostCatalog
from scheduler.cmd import manage_explain
from scheduler.cmd.manage import build_parser
from scheduler.context import RequestContext
from scheduler.filters.base import BaseHostFilter, FilterResult
from scheduler.manager import SchedulerManager
from scheduler.pipeline.claimer import PendingCleanups
from scheduler.weights.base import BaseHostWeigher
from scheduler.weights.ram import RAMWeigher
from tests.builders import CELL, make_conf, make_spec
from tests.fixtures import wire_samples
from tests.unit.fake_placement import FakePlacement

CONTEXT = RequestContext(request_id='req-explain', user_id='u', project_id='p')


class NotOddHosts(BaseHostFilter):
    """Removes h1, h3, ... for one reason and h5 for another."""

    def filter_result(self, host_state, spec_obj):
        number = int(host_state.host[1:])
        if number == 5:
            return FilterResult(False, 'host five is special')
        return FilterResult(number % 2 == 0, 'odd host number')


class PrefersLowNames(BaseHostWeigher):
    def _weigh_object(self, host_state, weight_properties):
        return -int(host_state.host[1:])


@pytest.fixture
def build():
    built: list[SchedulerManager] = []

    def make(fake: FakePlacement, *, filters=(), scheduler=None) -> SchedulerManager:
        conf = make_conf(scheduler=scheduler)
        weighers = [RAMWeigher(), PrefersLowNames()]
        for w in weighers:
            w.conf = conf
        manager = SchedulerManager(
            conf, placement=fake, catalog=HostCatalog(default_cell_uuid=CELL),
            filters=list(filters), weighers=weighers, request_filters=[],
            cleanups=PendingCleanups(fake, interval=3600), rng=random.Random(0))
        built.append(manager)
        return manager

    yield make
    for manager in built:
        manager.cleanups.stop()


def cloud(hosts: int, *, odd_only: bool = False) -> FakePlacement:
    """Hosts h0, h1, ... (or h1, h3, ... which NotOddHosts all removes), less RAM each."""
    fake = FakePlacement()
    for n in range(hosts):
        number = 2 * n + 1 if odd_only else n
        fake.add_compute(f'h{number}', ram_mb=32768 - 1024 * number)
    return fake


# ------------------------------------------------------------------ the dry run
def test_explain_reports_every_stage_and_the_chosen_host_without_claiming(build):
    fake = cloud(8)
    manager = build(fake, filters=[NotOddHosts()])

    report = manager.explain(CONTEXT, make_spec(), top=2)

    assert report.placed and report.reason is None and report.error is None
    assert report.placement.candidates == 8 and report.placement.hosts == 8
    assert not report.placement.truncated
    [instance] = report.instances
    [stage] = instance.stages
    assert (stage.name, stage.hosts_in, stage.hosts_out) == ('NotOddHosts', 8, 4)
    assert {r.reason: r.hosts for r in stage.removed} == {
        'odd host number': ['h1', 'h3', 'h7'], 'host five is special': ['h5']}
    # top 2 of 4 by weight; each weigher's share adds up to the weight
    assert [w.host for w in instance.weighed] == ['h0', 'h2']
    for w in instance.weighed:
        assert set(w.contributions) == {'RAMWeigher', 'PrefersLowNames'}
        assert sum(w.contributions.values()) == pytest.approx(w.weight)
    assert instance.chosen == 'h0'
    assert instance.alternates == ['h2', 'h4']     # max_attempts 3 -> 2 alternates
    assert fake.calls_to('put_allocations') == [] and fake.holdings() == {}


def test_explain_of_a_request_that_would_fail_carries_the_reason_instead_of_raising(build):
    fake = cloud(3, odd_only=True)
    manager = build(fake, filters=[NotOddHosts()])

    report = manager.explain(CONTEXT, make_spec())

    assert not report.placed and report.error == 'NoValidHost'
    assert report.reason == ('0/3 hosts available: NotOddHosts removed 3 (2 × odd host '
                             'number; 1 × host five is special)')
    assert [i.chosen for i in report.instances] == [None]
    assert fake.calls_to('put_allocations') == [] and fake.holdings() == {}


def test_explain_names_the_query_and_reports_an_empty_answer(build):
    fake = FakePlacement()
    manager = build(fake)

    report = manager.explain(CONTEXT, make_spec())

    assert report.placement.candidates == 0 and 'resources=' in report.placement.query
    assert report.reason.startswith('Placement returned no allocation candidates')
    assert report.instances == []


def test_explain_says_when_the_limit_cut_placements_answer(build):
    fake = cloud(3)
    manager = build(fake, scheduler={'max_placement_results': 3})

    report = manager.explain(CONTEXT, make_spec())

    assert report.placement.truncated and report.placement.limit == 3


def test_the_report_is_plain_json():
    trace = explain.RequestTrace(num_instances=1, query='resources=VCPU:1', limit=10,
                                 candidates=0)
    data = json.loads(json.dumps(explain.build_report(trace).to_dict()))

    assert data['placed'] is True and data['placement']['candidates'] == 0


# ------------------------------------------------------------------ the wire reason
def failed_trace(*, candidates: int = 5, limit: int | None = 1000) -> explain.RequestTrace:
    trace = explain.RequestTrace(num_instances=1, query='resources=VCPU:1', limit=limit,
                                 candidates=candidates, hosts=candidates)
    attempt = trace.new_attempt(0, 5)
    attempt.filter_steps.append(('AntiAffinity', 5, {'group member on host': 5}))
    return trace


def test_the_reason_says_when_placements_answer_was_cut_by_the_limit():
    reason = explain.failure_reason(failed_trace(candidates=5, limit=5))

    assert reason == ('0/5 hosts available: AntiAffinity removed 5 (group member on host); '
                      'Placement returned 5 candidates (limit 5: other hosts were not '
                      'considered)')


def test_the_limit_note_survives_a_reason_cut_to_its_bound():
    trace = failed_trace(candidates=5, limit=5)
    trace.attempts[0].filter_steps = [('F', 5, {'x' * 2000: 5})]

    reason = explain.failure_reason(trace)

    assert len(reason) <= explain.MAX_REASON_LENGTH
    assert reason.endswith('(limit 5: other hosts were not considered)')


def test_the_reason_names_no_host_unless_the_operator_allows_it():
    from scheduler.filters.handler import FilterStep

    trace = failed_trace()
    trace.attempts[0].steps = [FilterStep('AntiAffinity', 5, {
        'group member on host': ['h1', 'h2', 'h3', 'h4', 'h5']})]

    assert 'h1' not in explain.failure_reason(trace)
    assert explain.failure_reason(trace, host_names=True) == (
        '0/5 hosts available: AntiAffinity removed 5 (group member on host: h1, h2, h3 '
        '+2 more)')


def test_the_manager_sends_host_names_only_with_explain_host_names(build):
    from scheduler import exceptions as exc

    for allowed in (False, True):
        manager = build(cloud(2, odd_only=True), filters=[NotOddHosts()],
                        scheduler={'explain_host_names': allowed})
        with pytest.raises(exc.NoValidHost) as failure:
            manager.select_destinations(CONTEXT, make_spec(), None)
        assert ('h1' in failure.value.reason) is allowed, failure.value.reason


# ------------------------------------------------------------------ the command
def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(['explain', *argv])


def test_flavor_image_and_hints_come_from_the_options():
    args = parse('--vcpus', '2', '--memory-mb', '4096', '--disk-gb', '20',
                 '--extra-spec', 'trait:CUSTOM_SSD=required', '--image-prop',
                 'hw_architecture=x86_64', '--hint', 'same_host=a', '--hint', 'same_host=b',
                 '--az', 'az1', '--instances', '3')

    spec = manage_explain.spec_from_options(args)

    assert (spec.vcpus, spec.memory_mb, spec.root_gb) == (2, 4096, 20)
    assert spec.flavor.extra_specs == {'trait:CUSTOM_SSD': 'required'}
    assert spec.image.properties.hw_architecture == 'x86_64'
    assert spec.scheduler_hints == {'same_host': ['a', 'b']}
    assert (spec.availability_zone, spec.num_instances) == ('az1', 3)


def test_an_option_without_a_value_is_refused():
    with pytest.raises(manage_explain.SpecError, match='--extra-spec takes KEY=VALUE'):
        manage_explain.spec_from_options(parse('--extra-spec', 'novalue'))


def test_a_request_file_may_hold_novas_primitive_or_a_whole_saved_message(tmp_path):
    primitive = tmp_path / 'spec.json'
    primitive.write_text(json.dumps(wire_samples.spec_obj()))
    saved = tmp_path / 'call.json'
    saved.write_text(json.dumps(wire_samples.load('select_destinations_call.json')))

    a = manage_explain.spec_from_file(str(primitive))
    b = manage_explain.spec_from_file(str(saved))

    assert a == b and a.flavor.vcpus > 0


def test_a_request_file_may_hold_the_plain_form(tmp_path):
    path = tmp_path / 'plain.json'
    path.write_text(json.dumps({'flavor': {'vcpus': 4, 'memory_mb': 2048, 'root_gb': 10},
                                'image': {'properties': {'hw_machine_type': 'q35'}},
                                'num_instances': 2, 'scheduler_hints': {'group': 'g'}}))

    spec = manage_explain.spec_from_file(str(path))

    assert (spec.vcpus, spec.memory_mb, spec.num_instances) == (4, 2048, 2)
    assert spec.scheduler_hints == {'group': ['g']}
    assert spec.image.properties['hw_machine_type'] == 'q35'


def test_a_plain_form_with_unknown_keys_is_refused(tmp_path):
    path = tmp_path / 'plain.json'
    path.write_text(json.dumps({'flavour': {}}))

    with pytest.raises(manage_explain.SpecError, match='unknown key.*flavour'):
        manage_explain.spec_from_file(str(path))


def test_explain_needs_a_placement_to_ask(capsys):
    from scheduler.cmd.manage import main

    assert main(['explain', '--vcpus', '1']) == manage_explain.EXIT_USAGE
    assert 'give --config-file' in capsys.readouterr().err


def test_the_human_output_shows_each_stage_at_a_glance(build):
    manager = build(cloud(8), filters=[NotOddHosts()])
    spec = make_spec()

    text = manage_explain.render(manager.explain(CONTEXT, spec, top=2), spec)
    lines = text.splitlines()

    assert lines[0].startswith('Request: 1 instance of 1 vCPU, 512 MB RAM, 1 GB disk')
    assert '  -> 8 allocation candidates on 8 hosts (limit 1000)' in lines
    assert any(line.split() == ['NotOddHosts', '8', '->', '4', 'removed', '4']
               for line in lines)
    assert '      - 3 hosts: odd host number' in lines
    assert '          h1, h3, h7' in lines
    assert any(line.split()[:3] == ['RAMWeigher', '1.0000', '0.9375'] for line in lines)
    assert '  Chosen: h0; alternates: h2, h4' in lines
    assert lines[-1] == 'Result: would be placed on h0 (nothing was claimed)'


def test_the_human_output_of_a_failure_ends_with_the_callers_reason(build):
    # A capped answer is the last word only with the retry without limit off.
    manager = build(cloud(3, odd_only=True), filters=[NotOddHosts()],
                    scheduler={'max_placement_results': 3, 'retry_without_limit': False})
    spec = make_spec()

    text = manage_explain.render(manager.explain(CONTEXT, spec), spec)

    assert 'the limit was reached' in text
    assert '  Chosen: none' in text.splitlines()
    assert text.splitlines()[-1] == (
        'Result: NoValidHost: 0/3 hosts available: NotOddHosts removed 3 (2 × odd host number; '
        '1 × host five is special); Placement returned 3 candidates (limit 3: other hosts '
        'were not considered)')
