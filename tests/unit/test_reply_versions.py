"""Replies at the object versions their caller reads.

A Nova release is told from the versions its request carries (RequestSpec and
the image's ImageMetaProps); the reply's Selection and SchedulerLimits are
written at what that release reads, never above ``[upgrade_levels]
reply_objects``, and never above what the codec can write.
"""
from __future__ import annotations

import copy
import dataclasses
import itertools

import pytest

from scheduler import conf as scheduler_conf
from scheduler.catalog import HostCatalog
from scheduler.conf import upgrade_levels
from scheduler.objects import codec
from scheduler.objects.codec.bounded import DATA_KEY, VERSION_KEY
from scheduler.objects.codec.selection import NEWEST
from scheduler.objects.nova_releases import (
    OLDEST_READS,
    RELEASES,
    NovaRelease,
    caller_floor,
    reply_versions,
)
from scheduler.rpc.endpoint import SchedulerEndpoint
from scheduler.service import reply_cap
from tests.builders import CELL, override, service_conf
from tests.fixtures import wire_samples
from tests.unit.test_endpoint import CONTEXT, RecordingManager, selection

#: A Nova that does not exist yet: it sends ImageMetaProps 1.45 and reads a Selection 1.2.
FUTURE = NovaRelease('2027.1', 35, {'RequestSpec': (1, 15), 'ImageMetaProps': (1, 45)},
                     {'Selection': (1, 2), 'SchedulerLimits': (1, 0)})
WITH_A_NEWER_DEFAULT = (*RELEASES, FUTURE)


def sent_by(series: str) -> dict:
    return dict(next(r for r in RELEASES if r.series == series).sends)


@pytest.mark.parametrize('series, floor', [
    ('2024.1', '2024.1'), ('2024.2', '2024.2'), ('2025.1', '2025.1'), ('2025.2', '2025.2'),
    # 2026.1 sends what 2025.2 sends: nothing tells them apart, the older is assumed.
    ('2026.1', '2025.2'), ('2026.2', '2026.2'),
])
def test_each_release_is_told_from_the_versions_it_sends(series, floor):
    assert caller_floor(sent_by(series)).series == floor


def test_a_request_without_image_properties_is_taken_for_the_oldest_release_it_could_be():
    assert caller_floor({'RequestSpec': (1, 15)}).series == '2024.1'


def test_a_request_older_than_every_release_is_answered_at_the_versions_of_rpc_4_5():
    sent = {'RequestSpec': (1, 11), 'ImageMetaProps': (1, 20)}
    assert caller_floor(sent) is None
    assert reply_versions(sent) == OLDEST_READS == {'Selection': (1, 0),
                                                     'SchedulerLimits': (1, 0)}


def test_a_request_newer_than_every_release_is_answered_at_the_newest_versions():
    sent = {'RequestSpec': (1, 16), 'ImageMetaProps': (1, 50)}
    assert caller_floor(sent) == RELEASES[-1]
    assert reply_versions(sent) == RELEASES[-1].reads


def test_when_our_default_is_newer_than_the_oldest_caller_knows_it_still_gets_what_it_reads():
    # Our default: what the newest release reads, here a Selection 1.2 nova 29 never saw.
    assert reply_versions(sent_by('2026.2'), releases=WITH_A_NEWER_DEFAULT)['Selection'] == (
        1, 1)
    assert reply_versions(FUTURE.sends, releases=WITH_A_NEWER_DEFAULT)['Selection'] == (1, 2)
    for release in RELEASES:
        assert reply_versions(release.sends, releases=WITH_A_NEWER_DEFAULT) == {
            'Selection': (1, 1), 'SchedulerLimits': (1, 0)}


def test_a_cap_lowers_a_newer_callers_versions_and_never_raises_an_older_ones():
    older = dataclasses.replace(RELEASES[0], series='2023.2',
                                sends={'RequestSpec': (1, 14), 'ImageMetaProps': (1, 36)},
                                reads={'Selection': (1, 0), 'SchedulerLimits': (1, 0)})
    releases = (older, *WITH_A_NEWER_DEFAULT)
    assert reply_versions(FUTURE.sends, cap='2024.1', releases=releases)['Selection'] == (1, 1)
    assert reply_versions(FUTURE.sends, cap='2023.2', releases=releases)['Selection'] == (1, 0)
    assert reply_versions(older.sends, cap='2027.1', releases=releases)['Selection'] == (1, 0)
    with pytest.raises(ValueError, match='2099.1'):
        reply_versions(FUTURE.sends, cap='2099.1', releases=releases)


def test_the_newest_release_reads_exactly_what_the_codec_writes_newest():
    assert dict(RELEASES[-1].reads) == NEWEST
    assert all(r.reads.keys() == NEWEST.keys() for r in RELEASES)
    # Oldest first, never going back.
    for older, newer in itertools.pairwise(RELEASES):
        assert older.nova < newer.nova
        assert all(older.sends[k] <= newer.sends[k] for k in older.sends)
        assert all(older.reads[k] <= newer.reads[k] for k in older.reads)


def test_the_versions_are_read_from_the_spec_obj_as_nova_sends_it():
    spec_obj = wire_samples.spec_obj()        # Nova 34's own
    assert codec.sent_versions(spec_obj) == {'RequestSpec': (1, 15), 'ImageMetaProps': (1, 44)}
    del spec_obj[DATA_KEY]['image']
    assert codec.sent_versions(spec_obj) == {'RequestSpec': (1, 15)}
    spec_obj[VERSION_KEY] = 'one.fifteen'
    assert codec.sent_versions(spec_obj) == {}


def _selection():
    return selection('cn1')


def test_a_selection_for_a_caller_that_reads_1_0_has_no_availability_zone():
    encoded = codec.encode_selection(_selection(), {'Selection': (1, 0),
                                                    'SchedulerLimits': (1, 0)})
    newest = codec.encode_selection(_selection())
    assert encoded[VERSION_KEY] == '1.0' and newest[VERSION_KEY] == '1.1'
    assert 'availability_zone' not in encoded[DATA_KEY]
    assert 'availability_zone' not in encoded['nova_object.changes']
    without_az = copy.deepcopy(newest[DATA_KEY])
    del without_az['availability_zone']
    assert encoded[DATA_KEY] == without_az


def test_a_version_the_codec_cannot_write_is_refused_not_mislabelled():
    for versions in ({'Selection': (1, 2)}, {'Selection': (2, 0)},
                     {'SchedulerLimits': (1, 1)}):
        with pytest.raises(codec.EncodeError, match='cannot be written'):
            codec.encode_selection(_selection(), versions)


def test_every_release_is_a_choice_of_the_option():
    [option] = upgrade_levels.upgrade_levels_opts
    assert list(option.type.choices) == ['auto'] + [r.series for r in RELEASES]
    conf = service_conf()
    assert conf.upgrade_levels.reply_objects == 'auto'


def _answer(reply_objects: str, spec_obj: dict) -> list:
    conf = override(service_conf(), **{'upgrade_levels.reply_objects': reply_objects})
    endpoint = SchedulerEndpoint(RecordingManager(), HostCatalog(default_cell_uuid=CELL),
                                 codec.DecodeLimits(), reply_cap=reply_cap(conf))
    return endpoint.select_destinations(
        CONTEXT, spec_obj=spec_obj, instance_uuids=None, return_objects=True,
        return_alternates=True)


def test_the_endpoint_answers_each_caller_at_its_versions_under_the_configured_cap():
    nova_34 = wire_samples.spec_obj()
    nova_29 = copy.deepcopy(nova_34)
    nova_29[DATA_KEY]['image'][DATA_KEY]['properties'][VERSION_KEY] = '1.37'

    def versions(answer):
        return {s[VERSION_KEY] for per_instance in answer for s in per_instance}

    assert versions(_answer('auto', nova_34)) == {'1.1'}
    assert versions(_answer('auto', nova_29)) == {'1.1'}
    assert versions(_answer('2024.1', nova_34)) == {'1.1'}
    old = copy.deepcopy(nova_34)
    old[VERSION_KEY] = '1.10'
    assert versions(_answer('auto', old)) == {'1.0'}


def test_an_unknown_series_is_refused_when_the_configuration_is_read(tmp_path):
    path = tmp_path / 'scheduler.conf'
    path.write_text('[upgrade_levels]\nreply_objects = 2099.1\n')
    conf = service_conf()
    conf([], project=scheduler_conf.PROJECT, default_config_files=[str(path)])
    with pytest.raises(ValueError, match='2099.1'):
        conf.upgrade_levels.reply_objects  # noqa: B018 - oslo.config validates on read
