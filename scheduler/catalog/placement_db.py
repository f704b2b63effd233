"""The optional, read-only source of the provider view: Placement's own database
(``[placement_database] connection``).

Placement's API has no bulk read of inventories, usages, traits or aggregates
(three or four requests a provider), so the view (:mod:`scheduler.provider_view`)
reads the tables those requests would read, in one read-only transaction: five
SELECTs, whatever the number of providers, and nothing else. Every connection
is read-only (:mod:`scheduler.catalog.readonly_db`); a database user with SELECT
on these tables is all it needs. Placement's schema is the one of Placement 16
(alembic head ``a082b8bb98d0``); a schema it cannot read fails the read (the
request goes to Placement's API) and is logged, never guessed around.
"""
from __future__ import annotations

import logging

from oslo_config import cfg

from scheduler.catalog.readonly_db import ReadOnlyDatabase, sqlalchemy_module
from scheduler.conf.placement_database import GROUP
from scheduler.exceptions import ConfigurationError
from scheduler.provider_view.snapshot import ProviderSnapshot
from scheduler.provider_view.view import ProviderView, ProviderViewError

LOG = logging.getLogger(__name__)

OPTION = f'[{GROUP}] connection'

#: The only statements ever sent (besides the read-only session setup).
QUERIES = (
    'SELECT id, uuid, generation, parent_provider_id FROM resource_providers',
    'SELECT i.resource_provider_id, c.name, i.total, i.reserved, i.min_unit, i.max_unit, '
    'i.step_size, i.allocation_ratio FROM inventories i '
    'JOIN resource_classes c ON c.id = i.resource_class_id',
    'SELECT a.resource_provider_id, c.name, SUM(a.used) FROM allocations a '
    'JOIN resource_classes c ON c.id = a.resource_class_id '
    'GROUP BY a.resource_provider_id, c.name',
    'SELECT p.resource_provider_id, t.name FROM resource_provider_traits p '
    'JOIN traits t ON t.id = p.trait_id',
    'SELECT p.resource_provider_id, a.uuid FROM resource_provider_aggregates p '
    'JOIN placement_aggregates a ON a.id = p.aggregate_id',
)


class PlacementDatabaseReader(ReadOnlyDatabase):
    """Reads every provider of one Placement database as a snapshot."""

    def __init__(self, url: str, *, connect_timeout: int = 5, query_timeout: int = 30):
        super().__init__(url, option=OPTION, error=ProviderViewError,
                         connect_timeout=connect_timeout, query_timeout=query_timeout)

    def read(self) -> ProviderSnapshot:
        sqlalchemy = sqlalchemy_module(OPTION)
        with self.connect() as connection:
            # One transaction: the five reads see one moment (repeatable read on
            # PostgreSQL and MySQL; SQLite's read transaction).
            if connection.dialect.name in ('postgresql', 'mysql'):
                connection = connection.execution_options(isolation_level='REPEATABLE READ')
            with connection.begin():
                providers, inventories, usages, traits, aggregates = (
                    connection.execute(sqlalchemy.text(query)).all() for query in QUERIES)
        return ProviderSnapshot.from_rows(
            [(r[0], r[1], r[2], r[3]) for r in providers],
            [(r[0], r[1], r[2], r[3], r[4], r[5], r[6], float(r[7])) for r in inventories],
            [(r[0], r[1], int(r[2] or 0)) for r in usages],
            [(r[0], r[1]) for r in traits],
            [(r[0], r[1]) for r in aggregates])


def provider_view_from_conf(conf: cfg.ConfigOpts) -> ProviderView | None:
    """The view ``[scheduler] provider_view`` asks for, or None when it is off.

    ConfigurationError when it is on without ``[placement_database] connection``, or
    when SQLAlchemy is missing or the URL cannot work.
    """
    if not conf.scheduler.provider_view:
        return None
    opts = conf[GROUP]
    if not opts.connection:
        raise ConfigurationError(f'[scheduler] provider_view needs {OPTION}')
    reader = PlacementDatabaseReader(opts.connection, connect_timeout=opts.connect_timeout,
                                     query_timeout=opts.query_timeout)
    LOG.info('provider view on, read-only from %s, at most %ss old', reader.label,
             conf.scheduler.provider_view_max_age)
    return ProviderView(reader.read, max_age=conf.scheduler.provider_view_max_age)
