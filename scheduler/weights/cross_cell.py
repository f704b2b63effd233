"""CrossCellWeigher: during a cross-cell move, hosts in the instance's own cell win.

Only when the request spec allows a cross-cell move and names the source cell
(``requested_destination.cell``): +1 for hosts in that cell, -1 for the others.
Every other request weighs 0 everywhere, which changes nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier

if TYPE_CHECKING:
    from scheduler.host_state import HostState
    from scheduler.host_table import HostTable
    from scheduler.objects.spec import RequestSpec


class CrossCellWeigher(BaseHostWeigher):
    def weight_multiplier(self, host_state: HostState) -> float:
        return get_weight_multiplier(
            host_state, 'cross_cell_move_weight_multiplier',
            self.require_conf().filter_scheduler.cross_cell_move_weight_multiplier)

    def _weigh_object(self, host_state: HostState, weight_properties: RequestSpec) -> float:
        dest = weight_properties.requested_destination
        if dest is None or dest.cell is None or not dest.allow_cross_cell_move:
            return 0
        return 1 if host_state.cell_uuid == dest.cell.uuid else -1

    def multipliers(self, table: HostTable, rows: np.ndarray) -> np.ndarray | float:
        config_value = self.require_conf().filter_scheduler.cross_cell_move_weight_multiplier
        return table.multiplier('cross_cell_move_weight_multiplier', config_value, rows)

    def raw_weights(self, table: HostTable, rows: np.ndarray,
                    weight_properties: RequestSpec) -> np.ndarray:
        dest = weight_properties.requested_destination
        if dest is None or dest.cell is None or not dest.allow_cross_cell_move:
            return np.zeros(len(rows))
        cells, wanted = table.cells, dest.cell.uuid
        return np.array([1 if cells[r] == wanted else -1 for r in rows.tolist()])
