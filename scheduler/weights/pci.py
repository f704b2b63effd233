"""PCIWeigher: keep hosts with free PCI devices for the requests that need them.

Nova's rule: a host weighs ``100 - min(free PCI devices, 99)``, so hosts with
fewer free devices win. Requests without PCI devices avoid PCI hosts; requests
with them stack on the hosts already in use and leave whole hosts free.

What this service knows: nothing yet. Nova reads the free devices from the PCI
pools nova-compute writes to its database; this service has no such source
(``HostState.pci_stats`` stays None), so every host counts as having no free
device, every host weighs the same, and the weigher does not change the order.
When a source fills ``pci_stats`` (an object with ``pools``, each a mapping
with a ``count``, like Nova's PciDeviceStats), the rule applies unchanged.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

# Nova's cap: 500 or 2000 free devices mean the same, no scarcity; only the
# hosts with few devices left are worth telling apart.
MAX_DEVS = 100


def free_pci_devices(host_state: HostState) -> int:
    pools = getattr(host_state.pci_stats, 'pools', None) or ()
    return sum(int(pool.get('count', 0) or 0) for pool in pools)


class PCIWeigher(BaseHostWeigher):
    def check_configuration(self) -> None:
        if self.require_conf().filter_scheduler.pci_weight_multiplier:
            LOG.info('PCIWeigher: this service knows no PCI device pools; every host counts '
                     'as having no free PCI device, so the weigher does not change the order')

    def weight_multiplier(self, host_state: HostState) -> float:
        return get_weight_multiplier(
            host_state, 'pci_weight_multiplier',
            self.require_conf().filter_scheduler.pci_weight_multiplier)

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        return MAX_DEVS - min(free_pci_devices(host_state), MAX_DEVS - 1)
