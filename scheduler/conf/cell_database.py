"""``[cell_database]``: the optional, read-only source of host NUMA topologies and PCI
pools in Nova's cell databases (:mod:`scheduler.catalog.cell_db`)."""
from __future__ import annotations

from oslo_config import cfg

GROUP = 'cell_database'

cell_database_group = cfg.OptGroup(
    GROUP, title='Nova cell databases (read-only host data)',
    help='Where the scheduler reads what no Nova API exposes: each compute node\'s NUMA '
         'topology and free PCI device pools (the ``compute_nodes`` columns '
         '``numa_topology`` and ``pci_stats``, with its allocation ratios). Only '
         'NUMATopologyFilter, PciPassthroughFilter and PCIWeigher use them. Off while '
         '``connections`` is empty. Nothing is ever written: every session is read-only, '
         'and a database user with SELECT on ``compute_nodes`` is all it needs. Needs '
         'the ``celldb`` extra (the drivers: PyMySQL, psycopg2).')

cell_database_opts = [
    cfg.MultiStrOpt('connections', default=[], secret=True,
                    help='URL of each cell database to read, as SQLAlchemy writes it, one '
                         'value per cell (the ``[database] connection`` of that cell\'s '
                         'conductor, ideally '
                         'with a read-only user), e.g. '
                         '``mysql+pymysql://scheduler:secret@db1/nova_cell1``. Prefixed '
                         'with ``CELL_UUID=`` (the cell mapping\'s uuid, '
                         '``nova-manage cell_v2 list_cells``), the compute nodes read there '
                         'are scheduled in that cell; a bare URL leaves the cell to the '
                         'hosts file and ``[scheduler] default_cell_uuid``. Never '
                         'logged with its password.'),
    cfg.IntOpt('sync_interval', default=60, min=1,
               help='Seconds between two reads of every cell database. A failed read keeps '
                    'that cell\'s last good data and is tried again at the next interval.'),
    cfg.FloatOpt('max_age', default=0.0, min=-1.0,
                 help='How old, in seconds, a candidate compute node\'s NUMA topology and '
                      'PCI pools may be when a request that asks for NUMA (a NUMA topology, '
                      'pinned CPUs) or PCI devices is decided; older, the request first '
                      'reads just its candidates\' rows (one SELECT per cell, ``uuid IN '
                      '(...)``). 0, the default: before every such request, as '
                      'nova-scheduler reads its candidates\' compute nodes per request, so '
                      'an instance that nova-compute has claimed is never fitted again '
                      'into the same NUMA cell or PCI device. -1: only with the periodic '
                      'sync. Requests without NUMA or PCI never wait for a read.'),
    cfg.BoolOpt('service_states', default=True,
                help='Read the nova-compute services\' state that ``[nova] '
                     'service_state_max_age`` asks for before a request from the '
                     '``services`` table of these databases, as nova-scheduler does, instead '
                     'of ``GET /os-services``; so does the periodic ``[nova]`` sync while '
                     'these databases hold every compute node (checked once an hour: '
                     'doc/host-data.md). The states are what the compute API would answer when '
                     'Nova keeps heartbeats in the database (``[DEFAULT] servicegroup_driver '
                     '= db``, the default), with ``[DEFAULT] service_down_time`` set as '
                     'Nova\'s. With another servicegroup driver (memcache) the rows say the '
                     'services are down: when a read finds most of them down for want of a '
                     'heartbeat and the compute API finds most of those up, the reads go to '
                     'the compute API from then on, with an ERROR; turn this off to say so '
                     'from the start. Needs ``SELECT`` on ``services``. It spares nova-api '
                     'building the whole services list for every request, which takes Nova '
                     '34\'s about half a millisecond per compute service; the read here took '
                     '14-18 ms at 10,000 services on PostgreSQL (doc/performance.md, "The '
                     'cell databases in place of nova-api\'s lists").'),
    cfg.FloatOpt('service_scan_interval', default=10.0, min=0.0,
                 help='With ``service_states``: how often, at most, the read before a request '
                      'reads every row of the ``services`` tables (seconds). Between two such '
                      'scans a request reads, by host (the table\'s unique key), only the rows '
                      'of the services last seen disabled, forced down or without a recent '
                      'heartbeat, so that one enabled or back up counts at once; and the host '
                      'it is about to claim, or to offer as an alternate, is read the same '
                      'way and passed over when its service is now disabled or down. So no '
                      'request is answered with a host whose service was disabled or down '
                      'when it was answered, as with nova-scheduler; what the scans add is '
                      'the services that are new or deleted, and those of the hosts not '
                      'chosen, which only the weighers\' normalisation and a NoValidHost\'s '
                      'counts see. A scan costs the database a pass over every row (5 ms at '
                      '10,000 services on PostgreSQL), a read by host a few index look-ups. '
                      '0: a scan before every request, as nova-scheduler reads its services.'),
    cfg.FloatOpt('startup_sync_timeout', default=10.0, min=0.0,
                 help='At start-up, seconds to wait for the first read before taking calls; '
                      'the service starts anyway when it takes longer. 0: do not wait.'),
    cfg.IntOpt('connect_timeout', default=5, min=1,
               help='Seconds to wait for a connection to a cell database.'),
    cfg.IntOpt('query_timeout', default=30, min=1,
               help='Seconds a read of one cell database may take (the driver\'s read '
                    'timeout on MySQL/MariaDB, ``statement_timeout`` on PostgreSQL).'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # A new OptGroup for every ConfigOpts (see scheduler.conf.workarounds).
    conf.register_group(cfg.OptGroup(GROUP, title=cell_database_group.title,
                                     help=cell_database_group.help))
    conf.register_opts(cell_database_opts, group=GROUP)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {cell_database_group: cell_database_opts}
