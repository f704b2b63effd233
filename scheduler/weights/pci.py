"""PCIWeigher: keep hosts with free PCI devices for the requests that need them.

Nova's rule: a host weighs ``100 - min(free PCI devices, 99)``, so hosts with
fewer free devices win. Requests without PCI devices avoid PCI hosts; requests
with them stack on the hosts already in use and leave whole hosts free.

The free devices are the ``count`` of each pool in ``HostState.pci_stats``
(Nova's PciDeviceStats shape), which come from the PCI pools nova-compute
writes to its cell database (``[cell_database] connections``) or from the
hosts file (``pci_pools``). A host with no pools known counts as having no
free device, as a host without PCI devices does in Nova.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
from oslo_config import cfg

from scheduler.objects.pci import free_devices
from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec

LOG = logging.getLogger(__name__)

# Nova's cap: 500 or 2000 free devices mean the same, no scarcity; only the
# hosts with few devices left are worth telling apart.
MAX_DEVS = 100


def free_pci_devices(host_state: HostState) -> int:
    return free_devices(host_state.pci_stats)


class PCIWeigher(BaseHostWeigher):
    def check_configuration(self) -> None:
        conf = self.require_conf()
        try:
            cell_databases = list(conf.cell_database.connections or ())
        except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
            cell_databases = []
        if conf.filter_scheduler.pci_weight_multiplier and not cell_databases:
            LOG.info('PCIWeigher: [cell_database] connections is empty, so PCI device pools '
                     'come only from the hosts file (pci_pools); a host without them counts '
                     'as having no free PCI device')

    def weight_multiplier(self, host_state: HostState) -> float:
        return get_weight_multiplier(
            host_state, 'pci_weight_multiplier',
            self.require_conf().filter_scheduler.pci_weight_multiplier)

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        return MAX_DEVS - min(free_pci_devices(host_state), MAX_DEVS - 1)

    def multipliers(self, table: HostTable, rows: np.ndarray) -> np.ndarray | float:
        config_value = self.require_conf().filter_scheduler.pci_weight_multiplier
        return table.multiplier('pci_weight_multiplier', config_value, rows)

    def raw_weights(self, table: HostTable, rows: np.ndarray,
                    weight_properties: RequestSpec) -> np.ndarray:
        free = table.pci_free[rows]
        return (MAX_DEVS - np.minimum(free, MAX_DEVS - 1)).astype(np.float64)
