"""Does deciding a request read its hosts' NUMA topologies or PCI pools? (pure)

Those come from the cell databases on a slower clock than the rest of the host
data; the requests that use them have their candidates' rows read first
(``[cell_database] max_age``), the others never wait for that read.
"""
from __future__ import annotations

from scheduler.exceptions import RequestTranslationError
from scheduler.objects.spec import RequestSpec
from scheduler.request.numa import requested_topology
from scheduler.request.pci import ALIAS_EXTRA_SPEC, requested_primitives


def uses_compute_node_details(spec: RequestSpec) -> bool:
    """A NUMA topology (``hw:numa_nodes``, pinned CPUs, huge pages... in the flavor,
    the image or the spec) or PCI devices (requests or a flavor alias)."""
    if requested_primitives(spec) or (spec.flavor.extra_specs or {}).get(ALIAS_EXTRA_SPEC):
        return True
    try:
        return requested_topology(spec) is not None
    except RequestTranslationError:
        return False  # NUMATopologyFilter refuses it whatever the hosts hold
