"""``scheduler-manage simulate``: the options for capacity questions.

Where the cloud comes from (the synthetic one, ``--snapshot FILE``, or a
read-only ``--from-placement`` of the Placement in ``--config-file``), what
to send (``--workload FILE`` or ``--fill FLAVOR`` instead of the generated
stream) and ``--chart``. :func:`simulation_inputs` turns them into the
keyword arguments of :func:`scheduler.simulate.runner.run_simulation`.
"""
from __future__ import annotations

import argparse
from typing import Any

from scheduler.exceptions import ConfigurationError


def add_arguments(simulate: argparse.ArgumentParser) -> None:
    source = simulate.add_mutually_exclusive_group()
    source.add_argument('--from-placement', action='store_true',
                        help='simulate on a copy of the Placement named by --config-file '
                             '([placement] credentials); it is only read, never written')
    source.add_argument('--snapshot', metavar='PATH',
                        help='simulate on a snapshot saved by --save-snapshot')
    simulate.add_argument('--save-snapshot', metavar='PATH',
                          help='write the simulated cloud (before any request) as JSON to PATH')
    work = simulate.add_mutually_exclusive_group()
    work.add_argument('--workload', metavar='FILE',
                      help='YAML or JSON workload (flavors, requests, fill) instead of the '
                           'generated requests; answers how many fit and where they land')
    work.add_argument('--fill', metavar='FLAVOR', action='append',
                      help='boot FLAVOR (m1.small, m1.medium, m1.large, m1.xlarge) one at a '
                           'time until NoValidHost: "how many more fit?" (repeatable)')
    simulate.add_argument('--chart', action='store_true',
                          help='print a text utilisation chart (always on with --workload '
                               'and --fill)')


def simulation_inputs(args: argparse.Namespace, default_requests: int) -> dict[str, Any]:
    """The run_simulation keyword arguments of the options above, and ``requests``: as given,
    else ``default_requests`` for the synthetic cloud without a workload, else 0 (a copy of
    a real cloud or a workload file asks about exactly what it says)."""
    from scheduler.simulate.runner import CloudSource
    from scheduler.simulate.workload_file import load_workload, parse_workload

    if args.from_placement and not args.config_file:
        raise ConfigurationError('--from-placement reads the [placement] section of '
                                 '--config-file; give one')
    workload = None
    if args.workload:
        workload = load_workload(args.workload)
    elif args.fill:
        workload = parse_workload({'fill': list(args.fill)})
    requests = args.requests
    if requests is None:
        synthetic = not (args.from_placement or args.snapshot)
        requests = default_requests if synthetic and workload is None else 0
    return {'requests': requests,
            'source': CloudSource(snapshot_path=args.snapshot,
                                  from_placement=args.from_placement),
            'workload_file': workload, 'save_snapshot': args.save_snapshot,
            'chart': args.chart}
