"""Shared fixtures; each family lives in tests/fixtures/."""
from tests.fixtures.placement import (  # noqa: F401 - pytest finds fixtures by name
    embedded_placement,
    placement,
    placement_client,
    placement_conf,
)
from tests.fixtures.postgres_placement import postgres_placement  # noqa: F401,E402
from tests.fixtures.service import start_scheduler, transport_url  # noqa: F401,E402
