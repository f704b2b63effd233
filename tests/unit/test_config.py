"""Configuration: the generated sample, Nova compatibility, parsing a nova.conf."""
from __future__ import annotations

import filecmp
import textwrap
from pathlib import Path

import oslo_messaging
import pytest
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg, generator

from scheduler.conf import opts, parse_args

ROOT = Path(__file__).resolve().parents[2]
GENERATOR_CONF = ROOT / 'etc' / 'scheduler' / 'scheduler-config-generator.conf'
SAMPLE = ROOT / 'etc' / 'scheduler' / 'scheduler.conf.sample'

# Nova 34's options as nova/conf/ registers them (group, name, type, default, min, max,
# first line of the help). [scheduler] workers is the one deliberate difference:
# see test_workers_default_to_the_cpu_count_and_the_sample_says_so.
NOVA_OPTIONS = [
    ('scheduler', 'discover_hosts_in_cells_interval', 'IntOpt', -1, -1, None,
     'Periodic task interval.'),
    ('scheduler', 'enable_isolated_aggregate_filtering', 'BoolOpt', False, None, None,
     'Restrict use of aggregates to instances with matching metadata.'),
    ('scheduler', 'image_metadata_prefilter', 'BoolOpt', False, None, None,
     'Use placement to filter hosts based on image metadata.'),
    ('scheduler', 'limit_tenants_to_placement_aggregate', 'BoolOpt', False, None, None,
     'Restrict tenants to specific placement aggregates.'),
    ('scheduler', 'max_attempts', 'IntOpt', 3, 1, None,
     'The maximum number of schedule attempts.'),
    ('scheduler', 'max_placement_results', 'IntOpt', 1000, 1, None,
     'The maximum number of placement results to request.'),
    ('scheduler', 'placement_aggregate_required_for_tenants', 'BoolOpt', False, None, None,
     'Require a placement aggregate association for all tenants.'),
    ('scheduler', 'query_placement_for_image_type_support', 'BoolOpt', False, None, None,
     "Use placement to determine host support for the instance's image type."),
    ('scheduler', 'query_placement_for_routed_network_aggregates', 'BoolOpt', False, None, None,
     'Enable the scheduler to filter compute hosts affined to routed network segment'),
    ('filter_scheduler', 'aggregate_image_properties_isolation_namespace', 'StrOpt', None,
     None, None,
     'Image property namespace for use in the host aggregate.'),
    ('filter_scheduler', 'aggregate_image_properties_isolation_separator', 'StrOpt', '.',
     None, None,
     'Separator character(s) for image property namespace and name.'),
    ('filter_scheduler', 'available_filters', 'MultiStrOpt',
     ['nova.scheduler.filters.all_filters'], None, None,
     'Filters that the scheduler can use.'),
    ('filter_scheduler', 'build_failure_weight_multiplier', 'FloatOpt', 1000000.0, None, None,
     'Multiplier used for weighing hosts that have had recent build failures.'),
    ('filter_scheduler', 'cpu_weight_multiplier', 'FloatOpt', 1.0, None, None,
     'CPU weight multiplier ratio.'),
    ('filter_scheduler', 'cross_cell_move_weight_multiplier', 'FloatOpt', 1000000.0, None, None,
     'Multiplier used for weighing hosts during a cross-cell move.'),
    ('filter_scheduler', 'disk_weight_multiplier', 'FloatOpt', 1.0, None, None,
     'Disk weight multiplier ratio.'),
    ('filter_scheduler', 'enabled_filters', 'ListOpt',
     ['ComputeFilter', 'ComputeCapabilitiesFilter', 'ImagePropertiesFilter',
      'ServerGroupAntiAffinityFilter', 'ServerGroupAffinityFilter'], None, None,
     'Filters that the scheduler will use.'),
    ('filter_scheduler', 'host_subset_size', 'IntOpt', 1, 1, None,
     'Size of subset of best hosts selected by scheduler.'),
    ('filter_scheduler', 'hypervisor_version_weight_multiplier', 'FloatOpt', 1.0, None, None,
     'Hypervisor Version weight multiplier ratio.'),
    ('filter_scheduler', 'image_properties_default_architecture', 'StrOpt', None, None, None,
     'The default architecture to be used when using the image properties filter.'),
    ('filter_scheduler', 'image_props_weight_multiplier', 'FloatOpt', 0.0, None, None,
     'Image Properties weight multiplier ratio.'),
    ('filter_scheduler', 'image_props_weight_setting', 'ListOpt', [], None, None,
     'Mapping of image properties to weight modifier.'),
    ('filter_scheduler', 'io_ops_weight_multiplier', 'FloatOpt', -1.0, None, None,
     'IO operations weight multiplier ratio.'),
    ('filter_scheduler', 'isolated_hosts', 'ListOpt', [], None, None,
     'List of hosts that can only run certain images.'),
    ('filter_scheduler', 'isolated_images', 'ListOpt', [], None, None,
     'List of UUIDs for images that can only be run on certain hosts.'),
    ('filter_scheduler', 'max_instances_per_host', 'IntOpt', 50, 1, None,
     'Maximum number of instances that can exist on a host.'),
    ('filter_scheduler', 'max_io_ops_per_host', 'IntOpt', 8, 0, None,
     'The number of instances that can be actively performing IO on a host.'),
    ('filter_scheduler', 'num_instances_weight_multiplier', 'FloatOpt', 0.0, None, None,
     'Number of instances weight multiplier ratio.'),
    ('filter_scheduler', 'pci_in_placement', 'BoolOpt', False, None, None,
     'Enable scheduling and claiming PCI devices in Placement.'),
    ('filter_scheduler', 'pci_weight_multiplier', 'FloatOpt', 1.0, 0.0, None,
     'PCI device affinity weight multiplier.'),
    ('filter_scheduler', 'ram_weight_multiplier', 'FloatOpt', 1.0, None, None,
     'RAM weight multiplier ratio.'),
    ('filter_scheduler', 'restrict_isolated_hosts_to_isolated_images', 'BoolOpt', True, None, None,
     'Prevent non-isolated images from being built on isolated hosts.'),
    ('filter_scheduler', 'shuffle_best_same_weighed_hosts', 'BoolOpt', False, None, None,
     'Enable spreading the instances between hosts with the same best weight.'),
    ('filter_scheduler', 'soft_affinity_weight_multiplier', 'FloatOpt', 1.0, 0.0, None,
     'Multiplier used for weighing hosts for group soft-affinity.'),
    ('filter_scheduler', 'soft_anti_affinity_weight_multiplier', 'FloatOpt', 1.0, 0.0, None,
     'Multiplier used for weighing hosts for group soft-anti-affinity.'),
    ('filter_scheduler', 'track_instance_changes', 'BoolOpt', True, None, None,
     'Enable querying of individual hosts for instance information.'),
    ('filter_scheduler', 'weight_classes', 'ListOpt',
     ['nova.scheduler.weights.all_weighers'], None, None,
     'Weighers that the scheduler will use.'),
    ('metrics', 'required', 'BoolOpt', True, None, None,
     'Whether metrics are required.'),
    ('metrics', 'weight_multiplier', 'FloatOpt', 1.0, None, None,
     'Multiplier used for weighing hosts based on reported metrics.'),
    ('metrics', 'weight_of_unavailable', 'FloatOpt', -10000.0, None, None,
     'Default weight for unavailable metrics.'),
    ('metrics', 'weight_setting', 'ListOpt', [], None, None,
     'Mapping of metric to weight modifier.'),
    ('workarounds', 'disable_fallback_pcpu_query', 'BoolOpt', False, None, None,
     'Disable fallback request for VCPU allocations when using pinned instances.'),
]

NOVA_ARCHITECTURES = [
    'alpha', 'armv6', 'armv7l', 'armv7b', 'aarch64', 'cris', 'i686', 'ia64', 'lm32', 'm68k',
    'microblaze', 'microblazeel', 'mips', 'mipsel', 'mips64', 'mips64el', 'openrisc',
    'parisc', 'parisc64', 'ppc', 'ppcle', 'ppc64', 'ppc64le', 'ppcemb', 's390', 's390x',
    'sh4', 'sh4eb', 'sparc', 'sparc64', 'unicore32', 'x86_64', 'xtensa', 'xtensaeb',
]


def our_options() -> dict[tuple[str, str], cfg.Opt]:
    result = {}
    for group, group_opts in opts.list_opts():
        name = group.name if isinstance(group, cfg.OptGroup) else group
        for opt in group_opts:
            result[(name, opt.dest)] = opt
    return result


def parse(*argv: str) -> cfg.ConfigOpts:
    # No default files: a scheduler.conf on the test machine must not leak in.
    return parse_args(list(argv), default_config_files=[])


# The generated sample ---------------------------------------------------------------------

def test_the_checked_in_sample_equals_a_freshly_generated_one(tmp_path, monkeypatch):
    fresh = tmp_path / 'scheduler.conf.sample'
    monkeypatch.chdir(ROOT)
    generator.main(['--config-file', str(GENERATOR_CONF), '--output-file', str(fresh)])
    assert filecmp.cmp(fresh, SAMPLE, shallow=False), (
        f'{SAMPLE.relative_to(ROOT)} is out of date; regenerate it with `tox -e genconfig` '
        f'(oslo-config-generator --config-file {GENERATOR_CONF.relative_to(ROOT)})')


def test_the_sample_does_not_depend_on_the_machine_it_was_generated_on():
    text = SAMPLE.read_text(encoding='utf-8')
    assert '#host = <hostname>' in text
    assert '#workers = <number of CPUs available to the process>' in text


def test_the_sample_shows_novas_exchange_and_placement_defaults():
    text = SAMPLE.read_text(encoding='utf-8')
    assert '#control_exchange = nova' in text
    assert '#service_type = placement' in text
    assert '#valid_interfaces = internal,public' in text


# Nova compatibility ---------------------------------------------------------------------

@pytest.mark.parametrize('group, name, type_name, default, minimum, maximum, help_first_line',
                         NOVA_OPTIONS, ids=[f'{o[0]}.{o[1]}' for o in NOVA_OPTIONS])
def test_nova_options_have_novas_name_type_default_bounds_and_help(
        group, name, type_name, default, minimum, maximum, help_first_line):
    opt = our_options().get((group, name))
    assert opt is not None, f'[{group}] {name} is missing'
    assert type(opt).__name__ == type_name
    assert opt.default == default
    assert getattr(opt.type, 'min', None) == minimum
    assert getattr(opt.type, 'max', None) == maximum
    assert opt.help.startswith(help_first_line)


def test_nova_options_keep_their_defaults_once_registered_and_parsed():
    conf = parse()
    for group, name, _, default, *_ in NOVA_OPTIONS:
        assert conf[group][name] == default, f'[{group}] {name}'


def test_the_deprecated_isolation_options_are_deprecated_like_in_nova():
    options = our_options()
    assert options[('filter_scheduler', 'aggregate_image_properties_isolation_namespace')
                   ].deprecated_for_removal
    assert options[('filter_scheduler', 'aggregate_image_properties_isolation_separator')
                   ].deprecated_for_removal


def test_the_default_architecture_offers_novas_choices():
    opt = our_options()[('filter_scheduler', 'image_properties_default_architecture')]
    assert [choice for choice, _ in opt.type.choices.items()] == NOVA_ARCHITECTURES


def test_workers_default_to_the_cpu_count_and_the_sample_says_so():
    # Nova's default is None, meaning "the number of CPUs", computed at start-up;
    # here the default is that number, so `workers` always reads as an int.
    opt = our_options()[('scheduler', 'workers')]
    assert isinstance(opt.default, int) and opt.default >= 1
    assert opt.type.min == 0 and opt.sample_default.startswith('<')


@pytest.mark.parametrize('name, default', [
    ('service_down_time', 60), ('default_availability_zone', 'nova'),
    ('graceful_shutdown_timeout', 180), ('control_exchange', 'nova'),
    ('transport_url', 'rabbit://'), ('rpc_response_timeout', 60),
    ('executor_thread_pool_size', 64),
])
def test_default_section_options_have_novas_defaults(name, default):
    assert parse()[name] == default


def test_host_defaults_to_the_machine_hostname():
    import socket
    assert parse().host == socket.gethostname()


def test_placement_has_novas_keystoneauth_options_and_defaults():
    conf = parse()
    for name in ('cafile', 'certfile', 'keyfile', 'insecure', 'timeout', 'collect_timing',
                 'split_loggers', 'auth_type', 'auth_section', 'service_type', 'service_name',
                 'valid_interfaces', 'region_name', 'endpoint_override', 'connect_retries',
                 'connect_retry_delay', 'status_code_retries', 'status_code_retry_delay',
                 'retriable_status_codes', 'tls_ciphers', 'tls_min_version'):
        assert name in conf.placement, name
    assert conf.placement.service_type == 'placement'
    assert conf.placement.valid_interfaces == ['internal', 'public']
    assert conf.placement.insecure is False


def test_nova_scheduler_options_this_service_ignores_say_so_in_their_help():
    options = our_options()
    assert 'ignored' in options[('scheduler', 'discover_hosts_in_cells_interval')].help


@pytest.mark.parametrize('name, request_filter', [
    ('query_placement_for_routed_network_aggregates', 'routed_networks_filter'),
    ('limit_tenants_to_placement_aggregate', 'require_tenant_aggregate'),
    ('placement_aggregate_required_for_tenants', 'require_tenant_aggregate'),
    ('query_placement_for_image_type_support', 'require_image_type_support'),
    ('enable_isolated_aggregate_filtering', 'isolate_aggregates'),
    ('image_metadata_prefilter', 'transform_image_metadata'),
])
def test_nova_request_filter_options_name_the_filter_that_honours_them(name, request_filter):
    help_text = our_options()[('scheduler', name)].help
    assert f'Honoured by the request filter ``{request_filter}``' in help_text
    assert request_filter in parse().scheduler.request_filters


# Our own options ------------------------------------------------------------------------

def test_our_scheduler_options_have_their_documented_defaults():
    s = parse().scheduler
    assert s.hosts_file is None
    assert s.default_cell_uuid == '00000000-0000-0000-0000-000000000001'
    # Nova's request filters in Nova's order, but owner_nova_filter (see its help).
    assert s.request_filters == [
        'require_tenant_aggregate', 'map_az_to_placement_aggregate', 'require_image_type_support',
        'compute_status_filter', 'isolate_aggregates', 'transform_image_metadata',
        'accelerators_filter', 'packed_virtqueue_filter', 'routed_networks_filter',
        'remote_managed_ports_filter', 'ephemeral_encryption_filter', 'virtio_sound_filter',
        'tpm_secret_security_filter']
    assert (s.max_instances_per_request, s.max_string_length, s.max_extra_specs,
            s.max_nesting_depth) == (1000, 4096, 256, 32)
    assert (s.claim_max_retries, s.claim_retry_delay, s.cleanup_retry_interval) == (4, 0.2, 5.0)
    assert s.rpc_topic == 'scheduler'


def test_every_option_has_help():
    assert [key for key, opt in our_options().items() if not opt.help] == []


def test_a_value_below_a_minimum_is_refused(tmp_path):
    path = tmp_path / 'scheduler.conf'
    path.write_text('[scheduler]\nmax_attempts = 0\n', encoding='utf-8')
    conf = parse('--config-file', str(path))
    with pytest.raises(ValueError):
        conf.scheduler.max_attempts  # noqa: B018 - oslo.config validates on access


# Parsing -------------------------------------------------------------------------------

TYPICAL_NOVA_CONF = """
[DEFAULT]
transport_url = rabbit://nova:secret@rabbit.example.org:5672/
debug = true

[api_database]
connection = mysql+pymysql://nova:secret@db.example.org/nova_api

[scheduler]
workers = 4
max_attempts = 5
discover_hosts_in_cells_interval = 300

[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
available_filters = mycompany.filters.SpecialFilter
enabled_filters = ComputeFilter,AggregateInstanceExtraSpecsFilter,ServerGroupAntiAffinityFilter
host_subset_size = 2
ram_weight_multiplier = -1.0
weight_classes = nova.scheduler.weights.all_weighers
image_properties_default_architecture = x86_64
track_instance_changes = false

[placement]
auth_type = password
auth_url = http://keystone.example.org/identity
username = placement
password = secret
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = RegionOne
valid_interfaces = internal

[metrics]
weight_setting = cpu.frequency=1.0, cpu.user.percent=-1.0
required = false
"""


def test_a_typical_nova_conf_parses(tmp_path):
    path = tmp_path / 'nova.conf'
    path.write_text(textwrap.dedent(TYPICAL_NOVA_CONF), encoding='utf-8')
    conf = parse('--config-file', str(path))
    fs = conf.filter_scheduler
    assert fs.available_filters == ['nova.scheduler.filters.all_filters',
                                    'mycompany.filters.SpecialFilter']
    assert fs.enabled_filters == ['ComputeFilter', 'AggregateInstanceExtraSpecsFilter',
                                  'ServerGroupAntiAffinityFilter']
    assert (fs.host_subset_size, fs.ram_weight_multiplier) == (2, -1.0)
    assert fs.image_properties_default_architecture == 'x86_64'
    assert fs.track_instance_changes is False
    assert (conf.scheduler.workers, conf.scheduler.max_attempts) == (4, 5)
    assert conf.metrics.weight_setting == ['cpu.frequency=1.0', 'cpu.user.percent=-1.0']
    assert conf.metrics.required is False
    assert conf.debug is True
    assert conf.placement.valid_interfaces == ['internal']
    assert conf.placement.region_name == 'RegionOne'
    auth = ks_loading.load_auth_from_conf_options(conf, 'placement')
    assert auth.auth_url == 'http://keystone.example.org/identity'
    assert auth._username == 'placement' and auth._project_name == 'service'


def test_config_dir_is_read(tmp_path):
    conf_dir = tmp_path / 'scheduler.conf.d'
    conf_dir.mkdir()
    (conf_dir / '10-scheduler.conf').write_text('[scheduler]\nmax_attempts = 7\n',
                                                encoding='utf-8')
    assert parse('--config-dir', str(conf_dir)).scheduler.max_attempts == 7


def test_parse_args_registers_on_the_conf_it_is_given():
    conf = cfg.ConfigOpts()
    assert parse_args([], conf=conf, default_config_files=[]) is conf
    assert conf.scheduler.max_attempts == 3


def test_parse_args_without_a_conf_returns_a_new_one_each_time():
    assert parse() is not parse()


@pytest.mark.parametrize('group, name, value', [
    ('scheduler', 'max_attempts', 9), ('filter_scheduler', 'host_subset_size', 4),
    ('metrics', 'required', False), ('placement', 'read_timeout', 1.0),
    (None, 'service_down_time', 5),
])
def test_an_override_on_one_configuration_does_not_leak_into_another(group, name, value):
    first, second = parse(), parse()
    # Read through `first` only: ConfigOpts caches values, which would hide a leak.
    default = first[group][name] if group else first[name]
    first.set_override(name, value, group=group)
    assert (second[group][name] if group else second[name]) == default != value


def test_oslo_messaging_can_build_its_transport_on_the_parsed_conf():
    # Its options were registered in advance (copies); the library registers
    # the originals again when the transport is created, which must not clash.
    conf = parse()
    for url in ('fake:', 'rabbit://guest:guest@127.0.0.1:1/'):
        transport = oslo_messaging.get_rpc_transport(conf, url=url)
        transport.cleanup()
    assert conf.oslo_messaging_rabbit.heartbeat_timeout_threshold == 60
