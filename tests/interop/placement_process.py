"""The embedded Placement as a process of its own, for a caller env without it.

``python -m tests.interop.placement_process DB_DIR`` (run by the service side's
Python, which has openstack-placement) prints Placement's URL on one line and
serves until its standard input closes, so it never outlives the test run
that started it.
"""
from __future__ import annotations

import sys

from scheduler.simulate.embedded_placement import EmbeddedPlacement


def main(argv: list[str]) -> int:
    [db_dir] = argv
    with EmbeddedPlacement(db_dir=db_dir) as placement:
        print(placement.url, flush=True)
        sys.stdin.read()
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
