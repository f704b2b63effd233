"""ImagePropertiesWeigher: Nova's count of shared image properties; the host catalog keeps
no image properties of instances, so in this release every host weighs 0 and start-up says
so when the multiplier is not 0."""
from __future__ import annotations

import logging

import pytest

from scheduler import plugins
from scheduler.objects.spec import ImageMeta, ImageMetaProps
from scheduler.weights.base import weigh_hosts
from scheduler.weights.image_props import ImagePropertiesWeigher, shared_properties_weight
from scheduler.weights.ram import RAMWeigher
from tests.builders import make_aggregate, make_conf, make_host, make_spec

UBUNTU = {'os_distro': 'ubuntu', 'hw_machine_type': 'q35'}


def configured(**filter_scheduler):
    weigher = ImagePropertiesWeigher()
    weigher.conf = make_conf(filter_scheduler=filter_scheduler)
    return weigher


def booting(properties):
    return make_spec(image=ImageMeta(properties=ImageMetaProps(properties)))


def host_running(name, *images, **host_fields):
    """A host whose instances carry the image properties given (one mapping each)."""
    host = make_host(name, **host_fields)
    for i, properties in enumerate(images):
        uuid = f'{name}-instance-{i}'
        host.instances[uuid] = {'uuid': uuid, 'image_properties': properties}
    return host


# Nova's count --------------------------------------------------------------------------

def test_each_shared_property_counts_once_per_instance_running_it():
    existing = [UBUNTU, {'os_distro': 'ubuntu', 'hw_machine_type': 'pc'}, {'os_distro': 'rhel'}]
    # os_distro=ubuntu on 2 instances, hw_machine_type=q35 on 1
    assert shared_properties_weight(UBUNTU, existing, {}) == 3.0


def test_with_a_weight_setting_each_property_counts_its_ratio_and_unlisted_ones_nothing():
    existing = [UBUNTU, UBUNTU]
    assert shared_properties_weight(UBUNTU, existing, {'os_distro': 2.5}) == 5.0
    assert shared_properties_weight(UBUNTU, existing, {'hw_vif_model': 9.0}) == 0.0


def test_values_compare_as_strings_so_lists_and_numbers_match():
    requested = {'hw_cpu_cores': 4, 'traits_required': ['CUSTOM_A']}
    assert shared_properties_weight(
        requested, [{'hw_cpu_cores': '4', 'traits_required': "['CUSTOM_A']"}], {}) == 2.0


def test_no_image_or_no_instance_image_weighs_zero():
    assert shared_properties_weight(None, [UBUNTU], {}) == 0.0
    assert shared_properties_weight(UBUNTU, [None, {}], {}) == 0.0


# The weigher ---------------------------------------------------------------------------

def test_with_instances_known_by_uuid_only_every_host_weighs_zero_and_ram_decides():
    # What the host catalog gives today: {'uuid': ...} per instance, no image.
    hosts = [make_host('small', ram=(4096, 0), instances=['6b1e7a52-3f0c-4d8e-9a41-0c2f5d7e0001']),
             make_host('large', ram=(65536, 0))]
    ram = RAMWeigher()
    ram.conf = make_conf()
    weighed = weigh_hosts([configured(image_props_weight_multiplier=100.0), ram], hosts,
                          booting(UBUNTU))
    assert [w.host.host for w in weighed] == ['large', 'small']
    assert {w.contributions['ImagePropertiesWeigher'] for w in weighed} == {0.0}


def test_a_positive_multiplier_packs_alike_images_when_instances_carry_their_properties():
    hosts = [host_running('rhel', {'os_distro': 'rhel'}),
             host_running('ubuntu', UBUNTU, UBUNTU)]
    weighed = weigh_hosts([configured(image_props_weight_multiplier=1.0)], hosts,
                          booting(UBUNTU))
    assert [w.host.host for w in weighed] == ['ubuntu', 'rhel']


def test_a_negative_multiplier_spreads_alike_images():
    hosts = [host_running('ubuntu', UBUNTU), host_running('rhel', {'os_distro': 'rhel'})]
    weighed = weigh_hosts([configured(image_props_weight_multiplier=-1.0)], hosts,
                          booting(UBUNTU))
    assert [w.host.host for w in weighed] == ['rhel', 'ubuntu']


def test_a_zero_configured_multiplier_weighs_nothing_even_if_an_aggregate_sets_one():
    # Nova skips the work when the configured multiplier is 0, whatever aggregates say.
    eager = make_aggregate('eager', metadata={'image_props_weight_multiplier': '5'})
    host = host_running('ubuntu', UBUNTU, aggregates=[eager])
    weigher = configured()
    assert weigher.weight_multiplier(host) == 5.0
    assert weigher._weigh_object(host, booting(UBUNTU)) == 0.0


def test_the_weight_setting_is_read_from_the_configuration():
    host = host_running('ubuntu', UBUNTU)
    weigher = configured(image_props_weight_multiplier=1.0,
                         image_props_weight_setting=['os_distro=3', 'broken'])
    assert weigher._weigh_object(host, booting(UBUNTU)) == 3.0


# Start-up ------------------------------------------------------------------------------

def load(caplog, **filter_scheduler):
    plugins.load_weighers(make_conf(filter_scheduler={
        'weight_classes': ['ImagePropertiesWeigher'], **filter_scheduler}))
    return [r.getMessage() for r in caplog.records
            if r.name.startswith('scheduler.weights') and r.levelno == logging.WARNING]


def test_start_up_warns_once_that_the_weigher_has_nothing_to_compare_when_enabled(caplog):
    [warning] = load(caplog, image_props_weight_multiplier=2.0)
    assert 'image_props_weight_multiplier is 2.0' in warning
    assert 'weighs every host 0' in warning


def test_start_up_is_silent_when_the_weigher_is_off(caplog):
    assert load(caplog) == []


def test_start_up_names_the_invalid_entries_of_the_weight_setting(caplog):
    [warning] = load(caplog, image_props_weight_setting=['os_distro=1', 'hw_x=abc'])
    assert warning == ('Ignoring the invalid elements of the option '
                       '[filter_scheduler] image_props_weight_setting: hw_x=abc')


@pytest.mark.parametrize('entry', ['noequals', '=1', 'name=', 'name=inf', 'name=nan'])
def test_malformed_weight_setting_entries_are_ignored(entry):
    weigher = configured(image_props_weight_setting=['os_distro=2', entry])
    assert weigher.setting() == {'os_distro': 2.0}
