"""The compute services' state read before a request is read while its candidates are
found, and is what its hosts are built from.

``[nova] service_state_max_age`` asks for a read begun after the request arrived and
applied before its hosts are built; nothing in between needs it, so the read runs in
the background while Placement (or the provider view) answers, instead of after.
"""
from __future__ import annotations

import threading

from scheduler.catalog import HostCatalog
from scheduler.catalog.nova_api import ServiceState
from tests.builders import CELL, boot_spec, compute_filtered_manager, select, uuids


def test_the_read_begins_before_the_candidates_are_asked_for_and_decides_the_hosts(fake):
    fake.add_compute('cn0', ram_mb=65536)      # the better host, until the read disables it
    fake.add_compute('cn1')
    catalog = HostCatalog(default_cell_uuid=CELL)
    began = threading.Event()

    def read_services() -> None:
        began.set()
        catalog.apply_service_states({'cn0': ServiceState('cn0', up=True, disabled=True),
                                      'cn1': ServiceState('cn1', up=True)}, [])

    # Placement answers only once the read has begun: in the background, not after.
    fake.script('get_allocation_candidates', lambda call: _wait(began))
    with compute_filtered_manager(fake, catalog,
                                  refresh_service_states=read_services) as manager:
        [selection] = select(manager, boot_spec(), uuids(1))

    assert selection[0].service_host == 'cn1'


def _wait(event: threading.Event) -> None:
    assert event.wait(10), 'the services read had not begun when the candidates were asked'
