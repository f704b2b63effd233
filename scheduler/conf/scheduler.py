"""``[scheduler]``: how this service schedules.

Options Nova 34 defines keep Nova's names, types, defaults and bounds, so an
existing nova.conf ``[scheduler]`` section can be pointed at this service. Where
this service does not act on a Nova option, its help says so. The options after
them are this service's own.
"""
from __future__ import annotations

import os

from oslo_config import cfg

from scheduler.memory.release import TRIM_INTERVAL

GROUP = 'scheduler'

DEFAULT_CELL_UUID = '00000000-0000-0000-0000-000000000001'


def _cpu_count() -> int:
    # The CPUs this process may run on, which in a container or under taskset
    # is fewer than the machine has.
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


scheduler_group = cfg.OptGroup(
    GROUP, title='Scheduler configuration',
    help='How the scheduler chooses hosts, and the bounds it enforces on requests.')

_HONOURED_BY = (
    '\n\nHonoured by the request filter ``{name}``, which is in the default '
    '``[scheduler] request_filters``; the option has no effect if that list leaves the '
    'filter out.')

# Nova's request filters, in Nova's order (nova/scheduler/request_filter.py). Nova runs them
# all on every request; each gated one does nothing while its option is off.
# owner_nova_filter is left out: Nova adds OWNER_NOVA only once every nova-compute
# reports service version 73 (Nova 34), which this service cannot read, and older
# computes lack the trait. List it once all computes run Nova 34.
DEFAULT_REQUEST_FILTERS = [
    'require_tenant_aggregate', 'map_az_to_placement_aggregate', 'require_image_type_support',
    'compute_status_filter', 'isolate_aggregates', 'transform_image_metadata',
    'accelerators_filter', 'packed_virtqueue_filter', 'routed_networks_filter',
    'remote_managed_ports_filter', 'ephemeral_encryption_filter', 'virtio_sound_filter',
    'tpm_secret_security_filter',
]

nova_opts = [
    cfg.IntOpt('max_attempts', default=3, min=1,
               help='The maximum number of schedule attempts.\n\n'
                    'The scheduler returns at most ``max_attempts - 1`` alternate hosts per '
                    'instance, all in the cell of the chosen host. nova-conductor uses its '
                    'own copy of this option as the reschedule limit.'),
    cfg.IntOpt('discover_hosts_in_cells_interval', default=-1, min=-1,
               help='Periodic task interval.\n\n'
                    'In Nova this drives the periodic discovery of new compute hosts in the '
                    'cell databases. This service has no cell database and never discovers '
                    'hosts, so the option is accepted for nova.conf compatibility and '
                    'ignored; hosts are known from Placement, the hosts file '
                    '(``hosts_file``) and the fanout casts.'),
    cfg.IntOpt('max_placement_results', default=1000, min=1,
               help='The maximum number of placement results to request.\n\n'
                    'Sent as ``limit`` on ``GET /allocation_candidates``. A low value '
                    'makes each request cheaper but may leave out the hosts the filters '
                    'and weighers would have preferred.'),
    cfg.BoolOpt('provider_view', default=None, sample_default='<on with a connection>',
                help='Answer the queries it can answer exactly from a shared, recent view '
                     'of Placement\'s providers read from Placement\'s database '
                     '(``[placement_database] connection``) instead of one ``GET '
                     '/allocation_candidates`` per request; Placement still arbitrates every '
                     'claim, so a stale view costs a claim retry, never an overcommit. The '
                     'view answers flat and nested trees, granular groups, ``group_policy`` '
                     'and ``same_subtree`` with the hosts Placement would answer '
                     '(``max_placement_results`` bounds Placement\'s work, not the '
                     'view\'s); queries with sharing providers, NUMA and PCI requests, '
                     'moves, and a query no host of the view fits go to Placement as before '
                     '(``scheduler_provider_view_queries_total`` says which and why). '
                     'Unset (the default): on when ``[placement_database] connection`` is '
                     'set, off otherwise.'),
    cfg.FloatOpt('provider_view_max_age', default=0.25, min=0.0, max=300.0,
                 help='How old, in seconds, the provider view may be when a request is '
                      'answered from it; older, it is read again (what changed since) on a '
                      'thread of its own while requests go on with the one they have, or '
                      'before the request decides when the worker answered no other '
                      'request for that long, nor for as long as its last read took. A '
                      'busy worker reads for at most a quarter of its time: a read that took '
                      'longer than a quarter of this is next made four times as long after '
                      'it began. A claim refused for capacity also starts a read, and '
                      'counts as used until then. Between reads, the claims of the worker '
                      'and of the service\'s other workers (shared in memory) are added '
                      'to it as Placement accepts them.'),
    cfg.BoolOpt('provider_view_shared_reads', default=True,
                help='With several ``workers``, read the provider view\'s changes once for '
                     'all of them, in a process of the service\'s own, instead of once per '
                     'worker: a worker whose view is older than ``provider_view_max_age`` '
                     'asks it for a read, takes one begun up to half of that before it asked, '
                     'and adds to its own view what moved in every read since its last. '
                     'Placement\'s database then serves one worker\'s reads, not every '
                     'worker\'s. A worker reads on its own for its first read, when that '
                     'process does not answer within two seconds, and after that process '
                     'read every provider (its first read; providers created or deleted).'),
    cfg.FloatOpt('provider_view_full_read_interval', default=240.0, min=1.0, max=3600.0,
                 help='Every provider of the view is read again within about this many '
                      'seconds of reads, whatever its generation says: a slice of them '
                      'with each read (every provider_view_max_age seconds under load). A '
                      'read takes the providers whose generation moved (every inventory, '
                      'trait, aggregate and allocation write moves it), the providers '
                      'whose checksum of usage moved when allocations were deleted, and '
                      'its slice, which also takes in what moves no generation '
                      '(aggregates set below microversion 1.19, osc-placement\'s default; '
                      'a deletion hidden behind a late claim\'s row, which leaves a host '
                      'looking fuller, never emptier). Spread over reads, this costs no '
                      'whole read\'s peak of memory; a slice is the cloud\'s providers '
                      'over this many seconds of reads (at 50,000 providers and the '
                      'defaults, 53 a read). Shorter, the slices cost the service\'s '
                      'reader and Placement\'s database more: at 50,000 providers with '
                      'nested trees, 60 s made 4% less throughput than 240 s on average '
                      '(doc/performance.md).'),
    cfg.FloatOpt('near_best_weight_tolerance', default=None, min=0.0, max=0.5,
                 sample_default='<0.01 with the provider view, else 0>',
                 help='Spread concurrent decisions over the hosts whose weight is within '
                      'this fraction of the best host\'s (0.01: 1%), chosen at random '
                      'among them, as ``[filter_scheduler] shuffle_best_same_weighed_hosts`` '
                      'does for exact ties. Schedulers that decide at the same moment from '
                      'the same state (several workers, the provider view) otherwise all '
                      'claim the same best host and all but one are refused by Placement. '
                      'Among those hosts each worker tries its own share of them first '
                      '(by host uuid, one share per worker of the service) and the hosts '
                      'its own claims are in flight on last. When none of its share is '
                      'among them and it decides concurrently with the others (its '
                      'provider view shows claims of its own that the others\' views do '
                      'not yet, or its requests come back to back), a worker takes one of '
                      'its share within twice this fraction before another\'s; when every '
                      'one of them is another\'s share with room for two more instances '
                      'of the request or fewer, one of its share or with more room within '
                      'ten times this fraction; and when its own claims are in flight on '
                      'every one of them, any other host within twice this fraction: a '
                      'chosen host is never more than ten times this fraction worse than '
                      'the best. 0: Nova\'s ordering. Unset (the default): 0.01 when the '
                      'provider view is on (measured: claims refused for a stale view fall '
                      'from 6% to 1% at 1,000 providers with 4 workers, for a mean regret of '
                      '0.58%; doc/performance.md), 0 otherwise.'),
    cfg.BoolOpt('retry_without_limit', default=True,
                help='When Placement\'s answer was cut at ``max_placement_results`` and no '
                     'host of it could be chosen (filters Placement cannot express, such as '
                     'a disabled compute service or an aggregate\'s tenancy, removed them '
                     'all, or every claim was refused), ask Placement once more without the '
                     'limit before answering NoValidHost: hosts beyond the limit may fit. '
                     'Placement computes every candidate before it applies the limit, so the '
                     'second query costs about what the first did, and only such requests '
                     'pay it. False keeps Nova\'s behaviour: the request fails.'),
    cfg.IntOpt('workers', default=_cpu_count(), min=0,
               sample_default='<number of CPUs available to the process>',
               help='Number of workers for the scheduler service.\n\n'
                    'Each worker is a process consuming from the same RabbitMQ queue. '
                    'Defaults to the number of CPUs available to the process. 0 is accepted '
                    'for nova.conf compatibility and means one worker.'),
    cfg.BoolOpt('query_placement_for_routed_network_aggregates', default=False,
                help='Enable the scheduler to filter compute hosts affined to routed '
                     'network segment aggregates.\n\n'
                     "A segment's aggregate is the host aggregate Neutron names ``Neutron "
                     'segment id <segment>``. Which segments a network has, and which '
                     "segment a port's fixed IP is on, only Neutron knows, and this service "
                     'does not query Neutron: with the option on, a request that names a '
                     'network or port fails with NoValidHost saying so (requests without '
                     'networks are unaffected). Leave it off unless the host catalog can '
                     'name the segments of networks.'
                     + _HONOURED_BY.format(name='routed_networks_filter')),
    cfg.BoolOpt('limit_tenants_to_placement_aggregate', default=False,
                help='Restrict tenants to specific placement aggregates.\n\n'
                     'Aggregates whose metadata has ``filter_tenant_id`` keys would be '
                     'turned into ``member_of`` constraints for the listed projects.'
                     + _HONOURED_BY.format(name='require_tenant_aggregate')),
    cfg.BoolOpt('placement_aggregate_required_for_tenants', default=False,
                help='Require a placement aggregate association for all tenants.\n\n'
                     'Only meaningful with ``limit_tenants_to_placement_aggregate``: a '
                     'project that no aggregate names then gets NoValidHost ("No hosts '
                     'available for tenant").'
                     + _HONOURED_BY.format(name='require_tenant_aggregate')),
    cfg.BoolOpt('query_placement_for_image_type_support', default=False,
                help="Use placement to determine host support for the instance's image "
                     'type.\n\nRequires the ``COMPUTE_IMAGE_TYPE_*`` trait of the '
                     "image's disk format on the root provider (not for boot from volume)."
                     + _HONOURED_BY.format(name='require_image_type_support')),
    cfg.BoolOpt('enable_isolated_aggregate_filtering', default=False,
                help='Restrict use of aggregates to instances with matching metadata.\n\n'
                     'Forbids aggregates whose ``trait:*=required`` metadata the request '
                     'does not ask for.'
                     + _HONOURED_BY.format(name='isolate_aggregates')),
    cfg.BoolOpt('image_metadata_prefilter', default=False,
                help='Use placement to filter hosts based on image metadata.\n\n'
                     'Translates image properties (disk and CD-ROM bus, video, VIF and vIOMMU '
                     'model, architecture, emulated architecture) into required root '
                     'provider traits. A property whose trait os-traits does not know is '
                     'left out with a warning; the others still count.'
                     + _HONOURED_BY.format(name='transform_image_metadata')),
]

service_opts = [
    cfg.StrOpt('hosts_file', default=None,
               help='Path of a static YAML host catalog: cells, aggregates with their '
                    'metadata (availability zones) and compute nodes with what Placement '
                    'does not know about them (service host, cell, disabled, IP, '
                    'hypervisor, stats). See etc/scheduler/hosts.yaml.sample. Unset: the '
                    'catalog starts empty and is filled by the fanout casts Nova sends.'),
    cfg.StrOpt('default_cell_uuid', default=DEFAULT_CELL_UUID,
               help='The cell reported for resource providers the host catalog does not '
                    'know. Alternates are always chosen from the cell of the selected '
                    'host.'),
    cfg.StrOpt('unresolved_hosts', default='auto',
               choices=[('auto', 'exclude when [nova] or [cell_database] is configured, '
                                 'provider_name otherwise'),
                        ('exclude', 'never schedule to a compute node whose service host '
                                    'no source states'),
                        ('provider_name', 'take the provider\'s name as its service host, '
                                          'in default_cell_uuid')],
               help='Root providers in a Placement answer that neither the hosts file nor '
                    'the compute API or the cell databases know (after a look-up by uuid '
                    'in those sources, made at once, before the request is decided). A '
                    'compute node\'s provider is named after its node, which is often not '
                    'its service host (libvirt: FQDN vs short name), and nova-conductor '
                    'fails a boot answered under a name it has no host mapping for.'),
    cfg.FloatOpt('unresolved_hosts_retry', default=10.0, min=0.0,
                 help='Seconds before a root provider no source knew is looked up again '
                      '(providers left behind by deleted computes would otherwise cost a '
                      'look-up on every request); likewise a requested or forced host or '
                      'node that neither the hosts file, Placement, the compute API nor the '
                      'cell databases knew.'),
    cfg.ListOpt('request_filters',
                default=DEFAULT_REQUEST_FILTERS,
                help='Request filters run, in this order, on every request before Placement '
                     'is asked for candidates. Names of entry points in the '
                     '``placement_scheduler.request_filters`` group; an unknown name stops '
                     'the service at start-up. The default is Nova 34\'s list in Nova\'s '
                     'order; the filters Nova gates on an option of this section do nothing '
                     'while it is off. ``owner_nova_filter`` (require the ``OWNER_NOVA`` '
                     'trait) is not in the default: Nova adds it only once every nova-compute '
                     'runs Nova 34, which this service cannot check; add it then.'),
    cfg.IntOpt('max_instances_per_request', default=1000, min=1,
               help='The most instances one select_destinations call may ask for. A larger '
                    'request is refused with InvalidInput before any work is done.'),
    cfg.IntOpt('max_string_length', default=4096, min=1,
               help='The longest string accepted anywhere in a request (names, extra spec '
                    'values, image properties, hints). Longer input is refused with '
                    'InvalidInput.'),
    cfg.IntOpt('max_extra_specs', default=256, min=1,
               help='The most flavor extra specs accepted in one request.'),
    cfg.IntOpt('max_nesting_depth', default=32, min=1,
               help='The deepest nesting of lists and objects accepted in a request '
                    'message.'),
    cfg.IntOpt('claim_max_retries', default=4, min=1,
               help='Attempts to claim an allocation candidate when Placement answers with '
                    'a resource provider generation conflict (another scheduler claimed on '
                    'the same provider at the same time). Nova uses 4.'),
    cfg.IntOpt('max_claim_candidates_per_host', default=3, min=1, max=100,
               help='How many of a host\'s allocation candidates (in Placement\'s order) are '
                    'tried before the claim moves on to the next host. A host may have many '
                    'candidates (nested NUMA or device providers, sharing providers); when '
                    'the first one is refused for capacity the host is usually full, so a '
                    'small bound keeps a crowded cloud from costing one PUT per candidate. '
                    'Nova tries only the first.'),
    cfg.BoolOpt('columnar_host_states', default=True,
                help='Let the built-in filters and weighers judge all hosts of a request at '
                     'once, on the columns of its host table, building a per-host object '
                     'only for plugins written per host and for the hosts the claim and the '
                     'alternates use. Decisions are the same either way; False turns these '
                     'column-wise hooks off, so that every plugin judges host by host, as in '
                     'Nova (much slower at thousands of hosts; for comparing or diagnosing a '
                     'plugin).'),
    cfg.IntOpt('concurrent_decisions', default=1, min=0,
               help='How many of one worker\'s requests compute their decision at the same '
                    'time (matching the provider view, building hosts, filtering, weighing, '
                    'claiming); the others wait for a turn, in order of arrival. A request '
                    'gives its turn up while it waits for Placement\'s candidates, the '
                    'compute services\' state or a cell database, so those waits still '
                    'overlap. Deciding holds the '
                    'interpreter\'s lock, so two decisions at once in one process take as '
                    'long as one after the '
                    'other, while each holds its columns over every matching host: at '
                    '50,000 hosts with nested trees, a worker under 8 clients peaked at '
                    '192-222 MB without a limit and 173-190 MB with 1, at the same '
                    'throughput (doc/performance.md). '
                    '0: no limit, every request computes as soon as it arrives. Add workers, '
                    'not turns, to use more cores. A request\'s claims give the turn up '
                    'too; those on the provider view\'s hosts only while fewer than '
                    'view_claims_without_turn others of the worker\'s do.'),
    cfg.IntOpt('view_claims_without_turn', default=2, min=0,
               help='How many of one worker\'s claims on the provider view\'s hosts may wait '
                    'for Placement\'s answer without holding their request\'s turn to decide '
                    '(concurrent_decisions), so that another request decides meanwhile; a '
                    'claim beyond that keeps its turn while it is in flight. A request whose '
                    'claim gave its turn up builds its answer without taking one back, and '
                    'counts among these until it ends or computes again (another instance, '
                    'hosts ordered again after a refusal). Such a request still holds its '
                    'columns over every matching host, so each one is also a request\'s '
                    'worth of memory beside the one deciding. '
                    '0: every such claim keeps its turn (a worker then makes one claim at '
                    'a time at concurrent_decisions = 1). At 50,000 hosts with nested '
                    'trees, 2 made 6-10% more requests a second than 1, a worker peaking '
                    'at 178-186 MB against 173-182 MB (doc/performance.md).'),
    cfg.FloatOpt('heap_trim_interval', default=TRIM_INTERVAL, min=0.0, max=60.0,
                 help='Seconds between two hand-backs of a worker\'s free C heap pages to '
                      'the system once requests\' objects are freed (glibc\'s malloc_trim), '
                      'unless the worker has grown by more than a tenth since the last one: '
                      'it then hands them back after its request. A worker whose requests '
                      'stop hands back the pages of its last ones when the interval ends. '
                      'Between two, the pages one request freed are reused by the next ones '
                      'instead of being faulted in again. 0 trims after every request: at '
                      '50,000 nested providers a worker then peaked 3-7 MB lower (before '
                      'the trim on growth), for 7-10 ms more CPU a request '
                      'where the service had a core of its own and 1-2 ms where it shared '
                      'the machine\'s (doc/performance.md, "The heap trimmed once a '
                      'second" and "The trim made when a worker goes idle").'),
    cfg.FloatOpt('candidates_reuse_window', default=0.0, min=0.0, max=60.0,
                 help='Seconds during which a worker answers a request from the previous '
                      'Placement answer to the same query instead of asking Placement again '
                      '(with the usage of its own claims since added). Other schedulers\' '
                      'claims are only seen when the window ends; Placement still refuses '
                      'claims that do not fit, so a stale answer costs claim retries, never '
                      'an over-committed host. Moves and rebuild checks never reuse. 0 '
                      '(the default) asks Placement for every request; see '
                      'doc/performance.md for the measurement.'),
    cfg.FloatOpt('claim_retry_delay', default=0.2, min=0.0,
                 help='Base, in seconds, of the jittered back-off between claim attempts '
                      'after a generation conflict.'),
    cfg.FloatOpt('cleanup_retry_interval', default=5.0, min=0.1,
                 help='How often, in seconds, allocations whose roll-back failed (Placement '
                      'unreachable while undoing a partial request) are deleted again.'),
    cfg.StrOpt('metrics_listen', default=None,
               help='Where each worker serves Prometheus metrics (``host:port``, '
                    '``[addr]:port`` for IPv6) at ``/metrics``. Unset (the default): no '
                    'metrics endpoint. With several workers, worker N listens on port + N; '
                    'port 0 lets each worker take a free port (logged). The endpoint has no '
                    'authentication: bind it to an address only the monitoring system '
                    'reaches.'),
    cfg.StrOpt('rpc_topic', default='scheduler',
               help="The RPC topic to consume from. Nova's clients send to ``scheduler``; "
                    'change it only to run a second, separate scheduler.'),
    cfg.StrOpt('no_valid_host_reason', default='summary',
               choices=[('summary', 'which stage emptied the list, with counts and the '
                                    'filters\' reasons ("0/3 hosts available: '
                                    'RamFilter removed 2 (...)")'),
                        ('nova', 'nova-scheduler\'s own words: "There are not enough hosts '
                                 'available." (nothing when Placement had no candidates)')],
               help='What the NoValidHost reason sent to the caller says; Nova stores it in '
                    'the instance fault, which the server\'s owner reads. Either way it names '
                    'no host, node, provider or aggregate unless explain_host_names is on, '
                    'and a Placement outage is said as such. The log and '
                    '``scheduler-manage explain`` always have the whole story.'),
    cfg.BoolOpt('explain_host_names', default=False,
                help='Name the hosts a filter removed (a few per reason) in the NoValidHost '
                     'reason sent to the caller. Nova stores that reason in the instance '
                     'fault, which the user who asked may read: host names tell them about '
                     'the cloud\'s layout, so they are left out unless this is on. The log '
                     'and ``scheduler-manage explain`` name hosts either way.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # A new OptGroup for every ConfigOpts: oslo.config copies a registered group
    # shallowly, so registering the module-level object would share option state
    # (overrides, defaults) between all ConfigOpts instances of the process.
    conf.register_group(cfg.OptGroup(GROUP, title=scheduler_group.title, help=scheduler_group.help))
    conf.register_opts(nova_opts + service_opts, group=GROUP)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {scheduler_group: nova_opts + service_opts}


#: ``near_best_weight_tolerance`` when it is unset and the provider view is on.
VIEW_NEAR_BEST_TOLERANCE = 0.01


def provider_view_on(conf: cfg.ConfigOpts) -> bool:
    """``[scheduler] provider_view``, or, unset, whether Placement's database is known."""
    value = conf.scheduler.provider_view
    return bool(conf.placement_database.connection) if value is None else bool(value)


def near_best_tolerance(conf: cfg.ConfigOpts) -> float:
    """``[scheduler] near_best_weight_tolerance``, or, unset, the provider view's default."""
    value = conf.scheduler.near_best_weight_tolerance
    if value is not None:
        return float(value)
    return VIEW_NEAR_BEST_TOLERANCE if provider_view_on(conf) else 0.0
