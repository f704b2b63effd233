"""``[placement_database]``: the optional, read-only source of the provider view in
Placement's own database (:mod:`scheduler.catalog.placement_db`)."""
from __future__ import annotations

from oslo_config import cfg

GROUP = 'placement_database'

placement_database_group = cfg.OptGroup(
    GROUP, title='Placement\'s database (read-only provider view)',
    help='Where the provider view (``[scheduler] provider_view``) reads Placement\'s '
         'providers: their inventories, usages, traits, aggregates and trees, in a few '
         'SELECTs. Nothing is ever written: every session is read-only, and a database user '
         'with SELECT on ``resource_providers``, ``inventories``, ``allocations``, '
         '``resource_classes``, ``traits``, ``resource_provider_traits``, '
         '``placement_aggregates`` and ``resource_provider_aggregates`` is all it needs. '
         'Needs a database driver (psycopg2, PyMySQL or mysqlclient; the ``celldb`` extra '
         'installs PyMySQL and psycopg2); read through the driver alone, without SQLAlchemy.')

placement_database_opts = [
    cfg.StrOpt('connection', default='', secret=True,
               help='SQLAlchemy-style URL of Placement\'s database (its ``[placement_database] '
                    'connection``, ideally with a read-only user), e.g. '
                    '``postgresql+psycopg2://scheduler:secret@db/placement``. Never logged '
                    'with its password.'),
    cfg.IntOpt('connect_timeout', default=5, min=1,
               help='Seconds to wait for a connection to Placement\'s database.'),
    cfg.IntOpt('query_timeout', default=30, min=1,
               help='Seconds one read of the providers may take (the driver\'s read '
                    'timeout on MySQL/MariaDB, ``statement_timeout`` on PostgreSQL).'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # A new OptGroup for every ConfigOpts (see scheduler.conf.workarounds).
    conf.register_group(cfg.OptGroup(GROUP, title=placement_database_group.title,
                                     help=placement_database_group.help))
    conf.register_opts(placement_database_opts, group=GROUP)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {placement_database_group: placement_database_opts}
