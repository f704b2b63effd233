"""An out-of-tree filter, loaded by dotted path, that makes a call last a while.

It lets a test catch the service with a call in flight: it touches
``$SLOW_FILTER_MARKER`` when the call reaches it, then waits
``$SLOW_FILTER_SECONDS`` before passing every host. With
``$SLOW_FILTER_AFTER_CALLS=N`` the first N calls of the process pass at once:
a request's filters run once before its claims and once more for its
alternates, after them, so N=1 catches a request that holds claims and has not
answered yet. The marker then holds the pid of the worker that was caught.
"""
from __future__ import annotations

import os
import pathlib
import time

from scheduler import filters


class SlowFilter(filters.BaseHostFilter):
    calls = 0

    def filter_all(self, hosts, spec_obj):
        SlowFilter.calls += 1
        if SlowFilter.calls <= int(os.environ.get('SLOW_FILTER_AFTER_CALLS', '0')):
            return list(hosts)
        marker = os.environ.get('SLOW_FILTER_MARKER')
        if marker:
            pathlib.Path(marker).write_text(str(os.getpid()))
        time.sleep(float(os.environ.get('SLOW_FILTER_SECONDS', '0')))
        return list(hosts)

    def host_passes(self, host_state, spec_obj) -> bool:
        return True
