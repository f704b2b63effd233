"""An out-of-tree filter, loaded by dotted path, that makes a call last a while.

It lets a test catch the service with a call in flight: it touches
``$SLOW_FILTER_MARKER`` when the call reaches it, then waits
``$SLOW_FILTER_SECONDS`` before passing every host.
"""
from __future__ import annotations

import os
import pathlib
import time

from scheduler import filters


class SlowFilter(filters.BaseHostFilter):
    def filter_all(self, hosts, spec_obj):
        marker = os.environ.get('SLOW_FILTER_MARKER')
        if marker:
            pathlib.Path(marker).touch()
        time.sleep(float(os.environ.get('SLOW_FILTER_SECONDS', '0')))
        return list(hosts)

    def host_passes(self, host_state, spec_obj) -> bool:
        return True
