"""This release's nova-conductor reads our replies, even when our default is newer.

The release table (scheduler/objects/nova_releases.py) is checked against the
Nova installed here: what it sends is what the table says, and what it reads is
what its own Selection and SchedulerLimits classes are. Then a reply chosen
for its request, while our default reads a Selection 1.2 no release has, goes
through Nova's own deserializer; the same reply labelled at our default does not.
"""
from __future__ import annotations

import pytest
from nova import objects
from nova import version as nova_version
from nova.objects import base as objects_base
from oslo_versionedobjects import exception as ovo_exception

from scheduler.objects import codec
from scheduler.objects.codec.bounded import VERSION_KEY
from scheduler.objects.nova_releases import (
    RELEASES,
    NovaRelease,
    caller_floor,
    format_version,
    parse_version,
    reply_versions,
)
from scheduler.objects.selection import SchedulerLimits, Selection
from tests.interop import nova_builders as build

NOVA_MAJOR = int(nova_version.version_string().split('.')[0])
FUTURE = NovaRelease('2099.1', 99, {'RequestSpec': (1, 15), 'ImageMetaProps': (1, 99)},
                     {'Selection': (1, 2), 'SchedulerLimits': (1, 0)})


@pytest.fixture
def sent(nova_conf) -> dict:
    """The object versions of a boot request as this release's conductor sends it."""
    ctxt = build.user_context()
    [instance] = build.new_uuids(1)
    spec = build.boot_request_spec(ctxt, instance_uuid=instance)
    primitive = objects_base.NovaObjectSerializer().serialize_entity(ctxt, spec)
    return codec.sent_versions(primitive)


def selection() -> Selection:
    return Selection(compute_node_uuid='1f0e2d3c-4b5a-4697-8877-665544332211',
                     service_host='cn1', nodename='cn1', cell_uuid=build.SERVICE_CELL,
                     allocation_request='null', allocation_request_version='1.36',
                     availability_zone='az1',
                     limits=SchedulerLimits(numa_topology=None, vcpu=None, disk_gb=None,
                                            memory_mb=2048))


def test_the_release_table_says_what_this_nova_sends_and_reads(sent):
    [row] = [r for r in RELEASES if r.nova == NOVA_MAJOR]
    assert dict(row.sends) == sent
    assert row.reads == {'Selection': parse_version(objects.Selection.VERSION),
                         'SchedulerLimits': parse_version(objects.SchedulerLimits.VERSION)}
    # Told apart from the others, or taken for an older release that sends the same.
    floor = caller_floor(sent)
    assert floor is not None and floor.nova <= NOVA_MAJOR and floor.sends == row.sends


def test_a_reply_for_this_caller_is_read_by_nova_even_when_our_default_is_newer(sent):
    releases = (*RELEASES, FUTURE)
    versions = reply_versions(sent, releases=releases)
    assert versions['Selection'] <= parse_version(objects.Selection.VERSION) < (1, 2)
    primitive = codec.encode_selection(selection(), versions)
    ctxt = build.user_context()

    read = objects_base.NovaObjectSerializer().deserialize_entity(ctxt, primitive)

    assert isinstance(read, objects.Selection)
    assert (read.service_host, read.nodename, read.cell_uuid) == ('cn1', 'cn1',
                                                                  build.SERVICE_CELL)
    assert read.limits.memory_mb == 2048 and read.allocation_request_version == '1.36'
    if versions['Selection'] >= (1, 1):
        assert read.availability_zone == 'az1'

    # Our default labelled as such: Nova cannot read it (it would ask the
    # conductor for a backport that no scheduler answers).
    newest = dict(primitive, **{VERSION_KEY: format_version(FUTURE.reads['Selection'])})
    with pytest.raises(ovo_exception.IncompatibleObjectVersion):
        objects.Selection.obj_from_primitive(newest)


def test_a_reply_capped_at_the_oldest_release_is_read_by_this_one(sent):
    versions = reply_versions(sent, cap=RELEASES[0].series)
    read = objects_base.NovaObjectSerializer().deserialize_entity(
        build.user_context(), codec.encode_selection(selection(), versions))
    assert isinstance(read, objects.Selection) and read.service_host == 'cn1'
