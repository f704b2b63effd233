"""``[filter_scheduler]``: filters, weighers and their settings.

Every option Nova 34 defines in this group, with Nova's names, types, defaults
and bounds, so an existing nova.conf ``[filter_scheduler]`` section works
unchanged. Each help text starts with Nova's first line; what follows says how
this service reads the option.
"""
from __future__ import annotations

from oslo_config import cfg

GROUP = 'filter_scheduler'

# Nova's aliases for "every filter / weigher that ships with the scheduler".
ALL_FILTERS = 'nova.scheduler.filters.all_filters'
ALL_WEIGHERS = 'nova.scheduler.weights.all_weighers'

# nova.objects.fields.Architecture.ALL, the choices Nova offers.
ARCHITECTURES = (
    'alpha', 'armv6', 'armv7l', 'armv7b', 'aarch64', 'cris', 'i686', 'ia64', 'lm32',
    'm68k', 'microblaze', 'microblazeel', 'mips', 'mipsel', 'mips64', 'mips64el',
    'openrisc', 'parisc', 'parisc64', 'ppc', 'ppcle', 'ppc64', 'ppc64le', 'ppcemb',
    's390', 's390x', 'sh4', 'sh4eb', 'sparc', 'sparc64', 'unicore32', 'x86_64',
    'xtensa', 'xtensaeb',
)

filter_scheduler_group = cfg.OptGroup(
    GROUP, title='Filter scheduler options',
    help='Which filters and weighers run, and the settings they read. Filter and weigher '
         "names are Nova's class names.")

_AGGREGATE_OVERRIDE = (
    '\n\nAn aggregate of the host whose metadata has the key ``{key}`` overrides this '
    'value for that host (the smallest value wins when several aggregates set it).')

filter_scheduler_opts = [
    cfg.IntOpt('host_subset_size', default=1, min=1,
               help='Size of subset of best hosts selected by scheduler.\n\n'
                    'Each instance goes to a host picked at random among the N best-weighed '
                    'hosts. A value above 1 lowers the chance that concurrent schedulers '
                    'pick the same host, at the price of less optimal choices.'),
    cfg.IntOpt('max_io_ops_per_host', default=8, min=0,
               help='The number of instances that can be actively performing IO on a '
                    'host.\n\nRead by IoOpsFilter and AggregateIoOpsFilter; IO operations '
                    'are counted from the ``io_workload`` stat of the host. A host without '
                    'that stat in the host catalog counts only the instances placed on it '
                    'within one request (a WARNING names such a host once). '
                    'AggregateIoOpsFilter lets aggregate metadata ``max_io_ops_per_host`` '
                    'override this value (the smallest integer wins).'),
    cfg.IntOpt('max_instances_per_host', default=50, min=1,
               help='Maximum number of instances that can exist on a host.\n\n'
                    'Read by NumInstancesFilter and AggregateNumInstancesFilter. Instances '
                    'are counted from the ``num_instances`` stat of the host or the instance '
                    'info casts of its nova-compute, whichever says more; a host with '
                    'neither counts only the instances placed on it within one request (a '
                    'WARNING names such a host once). AggregateNumInstancesFilter lets '
                    'aggregate metadata ``max_instances_per_host`` override this value (the '
                    'smallest integer wins).'),
    cfg.BoolOpt('track_instance_changes', default=True,
                help='Enable querying of individual hosts for instance information.\n\n'
                     'nova-compute reads this option to decide whether to send the '
                     'update/delete/sync_instance_info casts. This service has no database '
                     'to fall back to: it always keeps what those casts tell it, and '
                     'without them the affinity filters and weighers see no instances.'),
    cfg.MultiStrOpt('available_filters', default=[ALL_FILTERS],
                    help='Filters that the scheduler can use.\n\n'
                         f'``{ALL_FILTERS}`` stands for every filter registered under the '
                         '``placement_scheduler.filters`` entry-point group. Every name in '
                         '``enabled_filters`` must be available.'),
    cfg.ListOpt('enabled_filters',
                default=['ComputeFilter', 'ComputeCapabilitiesFilter',
                         'ImagePropertiesFilter', 'ServerGroupAntiAffinityFilter',
                         'ServerGroupAffinityFilter'],
                help='Filters that the scheduler will use.\n\n'
                     'Class names, applied in this order; put the most restrictive first. '
                     'A name that is not available stops the service at start-up.'),
    cfg.ListOpt('weight_classes', default=[ALL_WEIGHERS],
                help='Weighers that the scheduler will use.\n\n'
                     f'``{ALL_WEIGHERS}`` stands for every weigher registered under the '
                     '``placement_scheduler.weighers`` entry-point group; otherwise list '
                     'weigher class names.'),
    cfg.FloatOpt('ram_weight_multiplier', default=1.0,
                 help='RAM weight multiplier ratio.\n\n'
                      'Positive values spread instances over hosts with the most free RAM, '
                      'negative values stack them.'
                      + _AGGREGATE_OVERRIDE.format(key='ram_weight_multiplier')),
    cfg.FloatOpt('cpu_weight_multiplier', default=1.0,
                 help='CPU weight multiplier ratio.\n\n'
                      'Positive values spread instances over hosts with the most free vCPUs, '
                      'negative values stack them.'
                      + _AGGREGATE_OVERRIDE.format(key='cpu_weight_multiplier')),
    cfg.FloatOpt('disk_weight_multiplier', default=1.0,
                 help='Disk weight multiplier ratio.\n\n'
                      'Positive values spread instances over hosts with the most free disk, '
                      'negative values stack them.'
                      + _AGGREGATE_OVERRIDE.format(key='disk_weight_multiplier')),
    cfg.FloatOpt('hypervisor_version_weight_multiplier', default=1.0,
                 help='Hypervisor Version weight multiplier ratio.\n\n'
                      'Positive values prefer hosts with newer hypervisors.'
                      + _AGGREGATE_OVERRIDE.format(
                          key='hypervisor_version_weight_multiplier')),
    cfg.FloatOpt('num_instances_weight_multiplier', default=0.0,
                 help='Number of instances weight multiplier ratio.\n\n'
                      'Positive values prefer hosts with more instances, negative values '
                      'hosts with fewer; 0.0 disables the weigher.'
                      + _AGGREGATE_OVERRIDE.format(key='num_instances_weight_multiplier')),
    cfg.FloatOpt('io_ops_weight_multiplier', default=-1.0,
                 help='IO operations weight multiplier ratio.\n\n'
                      'Negative values prefer hosts with fewer concurrent IO operations.'
                      + _AGGREGATE_OVERRIDE.format(key='io_ops_weight_multiplier')),
    cfg.FloatOpt('image_props_weight_multiplier', default=0.0,
                 help='Image Properties weight multiplier ratio.\n\n'
                      'Positive values prefer hosts running instances with the same image '
                      'properties; 0.0 disables the weigher. The host catalog of this '
                      'service keeps instances by uuid only, not their image properties, so '
                      'every host weighs 0 and the weigher does not change the order; '
                      'start-up warns when this value is not 0.'
                      + _AGGREGATE_OVERRIDE.format(key='image_props_weight_multiplier')),
    cfg.ListOpt('image_props_weight_setting', default=[],
                help='Mapping of image properties to weight modifier.\n\n'
                     'Entries ``property=ratio``, for example ``os_distro=1, hw_machine_type=2``; '
                     'properties not listed count 0. Empty: every property counts 1.'),
    cfg.FloatOpt('pci_weight_multiplier', default=1.0, min=0.0,
                 help='PCI device affinity weight multiplier.\n\n'
                      'Keeps hosts with PCI devices free for requests that need them. This '
                      'service knows no PCI device pools yet: every host weighs the same and '
                      'the weigher does not change the order.'
                      + _AGGREGATE_OVERRIDE.format(key='pci_weight_multiplier')),
    cfg.FloatOpt('soft_affinity_weight_multiplier', default=1.0, min=0.0,
                 help='Multiplier used for weighing hosts for group soft-affinity.'
                      + _AGGREGATE_OVERRIDE.format(key='soft_affinity_weight_multiplier')),
    cfg.FloatOpt('soft_anti_affinity_weight_multiplier', default=1.0, min=0.0,
                 help='Multiplier used for weighing hosts for group soft-anti-affinity.'
                      + _AGGREGATE_OVERRIDE.format(
                          key='soft_anti_affinity_weight_multiplier')),
    cfg.FloatOpt('build_failure_weight_multiplier', default=1000000.0,
                 help='Multiplier used for weighing hosts that have had recent build '
                      'failures.\n\nThe failures are counted from the ``failed_builds`` stat '
                      'of the host; the default makes any failure outweigh all other '
                      'weighers.'
                      + _AGGREGATE_OVERRIDE.format(key='build_failure_weight_multiplier')),
    cfg.FloatOpt('cross_cell_move_weight_multiplier', default=1000000.0,
                 help='Multiplier used for weighing hosts during a cross-cell move.\n\n'
                      'Positive values prefer hosts in the cell the instance is in.'
                      + _AGGREGATE_OVERRIDE.format(key='cross_cell_move_weight_multiplier')),
    cfg.BoolOpt('shuffle_best_same_weighed_hosts', default=False,
                help='Enable spreading the instances between hosts with the same best '
                     'weight.\n\nUseful with identical hosts and ``host_subset_size = 1``.'),
    cfg.StrOpt('image_properties_default_architecture', default=None, choices=ARCHITECTURES,
               help='The default architecture to be used when using the image properties '
                    'filter.\n\nUsed by ImagePropertiesFilter for images without '
                    '``hw_architecture``.'),
    cfg.ListOpt('isolated_images', default=[],
                help='List of UUIDs for images that can only be run on certain hosts.\n\n'
                     'Read by IsolatedHostsFilter.'),
    cfg.ListOpt('isolated_hosts', default=[],
                help='List of hosts that can only run certain images.\n\n'
                     'Read by IsolatedHostsFilter.'),
    cfg.BoolOpt('restrict_isolated_hosts_to_isolated_images', default=True,
                help='Prevent non-isolated images from being built on isolated hosts.\n\n'
                     'Read by IsolatedHostsFilter.'),
    cfg.StrOpt('aggregate_image_properties_isolation_namespace', default=None,
               deprecated_for_removal=True, deprecated_since='33.0.0',
               deprecated_reason='Deprecated in Nova 33.0.0.',
               help='Image property namespace for use in the host aggregate.\n\n'
                    'Read by AggregateImagePropertiesIsolation: only aggregate metadata '
                    'keys with this prefix are compared with image properties.'),
    cfg.StrOpt('aggregate_image_properties_isolation_separator', default='.',
               deprecated_for_removal=True, deprecated_since='33.0.0',
               deprecated_reason='Deprecated in Nova 33.0.0.',
               help='Separator character(s) for image property namespace and name.\n\n'
                    'Read by AggregateImagePropertiesIsolation.'),
    cfg.BoolOpt('pci_in_placement', default=False,
                help='Enable scheduling and claiming PCI devices in Placement.\n\n'
                     'Must have the same value here, on nova-api and on nova-conductor.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # A new OptGroup for every ConfigOpts: oslo.config copies a registered group
    # shallowly, so registering the module-level object would share option state
    # (overrides, defaults) between all ConfigOpts instances of the process.
    conf.register_group(cfg.OptGroup(GROUP, title=filter_scheduler_group.title,
                                     help=filter_scheduler_group.help))
    conf.register_opts(filter_scheduler_opts, group=GROUP)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {filter_scheduler_group: filter_scheduler_opts}
