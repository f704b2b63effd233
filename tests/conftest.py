"""Shared fixtures; each family lives in tests/fixtures/."""
import os

from tests.fixtures.cell_databases import cell_db, mariadb_cell, postgres_cell  # noqa: F401,E402
from tests.fixtures.fake_nova import fake_nova  # noqa: F401,E402
from tests.fixtures.placement import (  # noqa: F401 - pytest finds fixtures by name
    embedded_placement,
    placement,
    placement_client,
    placement_conf,
)
from tests.fixtures.postgres_placement import postgres_placement  # noqa: F401,E402
from tests.fixtures.service import (  # noqa: F401,E402
    rabbit_url,
    start_scheduler,
    transport_url,
)

# tests/interop drives the service with Nova's own client and needs Nova installed:
# `tox -e interop` sets SCHEDULER_TEST_INTEROP=1; other runs do not collect it.
if os.environ.get('SCHEDULER_TEST_INTEROP') != '1':
    collect_ignore = ['interop']
