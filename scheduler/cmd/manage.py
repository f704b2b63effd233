"""``scheduler-manage``: operator commands.

``simulate`` runs the whole service on an embedded default (a real Placement
in-process, a synthetic cloud, the in-process message transport) and reports
how a stream of boot requests was placed.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

# Defaults sized so that a default run takes well under a minute on 2 cores: the
# embedded Placement serves one request at a time (~60 ms per candidates query at 100
# providers, ~50 ms per claim) and seeding costs 4 requests per host.
DEFAULT_HOSTS = 100
DEFAULT_REQUESTS = 200
DEFAULT_SEED = 42
DEFAULT_CONCURRENCY = 4

EXIT_OK = 0
EXIT_INCONSISTENT = 1
EXIT_USAGE = 2


def _at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'not an integer: {text!r}') from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f'must be at least {minimum}, not {value}')
        return value
    return parse


def _log_level(verbosity: int) -> str:
    return ('WARNING', 'INFO')[verbosity] if verbosity < 2 else 'DEBUG'


def _simulate(args: argparse.Namespace) -> int:
    from oslo_config import cfg

    from scheduler.cmd import manage_simulate
    from scheduler.exceptions import ConfigurationError
    from scheduler.simulate import runner

    try:
        inputs = manage_simulate.simulation_inputs(args, DEFAULT_REQUESTS)
        summary = runner.run_simulation(hosts=args.hosts, seed=args.seed,
                                        concurrency=args.concurrency,
                                        json_path=args.json, log_level=_log_level(args.verbose),
                                        config_file=args.config_file, **inputs)
    except (cfg.Error, ConfigurationError) as e:
        print(f'scheduler-manage simulate: error: {e}', file=sys.stderr)
        return EXIT_USAGE
    return EXIT_INCONSISTENT if summary.problems() else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    from scheduler.cmd import manage_simulate

    parser = argparse.ArgumentParser(
        prog='scheduler-manage', description='Operator commands of placement-scheduler.')
    commands = parser.add_subparsers(dest='command', metavar='COMMAND')

    simulate = commands.add_parser(
        'simulate', help='run the service on an embedded Placement and a synthetic cloud',
        description='Start a real Placement in-process, seed a synthetic cloud, run the '
                    'scheduler service on the in-process transport (fake://), send a '
                    'stream of boot requests through the RPC client and summarise the '
                    'outcome as Placement records it. Exit status 1 when Placement and '
                    'the answers disagree or calls failed with errors other than '
                    'NoValidHost.')
    simulate.add_argument('--hosts', type=_at_least(1), default=DEFAULT_HOSTS,
                          help='compute hosts in the synthetic cloud (default: %(default)s)')
    simulate.add_argument('--requests', type=_at_least(0), default=None,
                          help=f'generated boot requests to send (default: {DEFAULT_REQUESTS} '
                               'on the synthetic cloud; 0 with --workload, --fill, '
                               '--snapshot or --from-placement)')
    simulate.add_argument('--seed', type=int, default=DEFAULT_SEED,
                          help='seed of the cloud and the workload (default: %(default)s)')
    simulate.add_argument('--concurrency', type=_at_least(1), default=DEFAULT_CONCURRENCY,
                          help='client threads sending requests (default: %(default)s)')
    simulate.add_argument('--json', metavar='PATH',
                          help='also write the summary as JSON to PATH')
    simulate.add_argument('--config-file', metavar='PATH',
                          help='scheduler configuration to simulate (filters, weighers, '
                               'limits); its transport and [placement] settings are '
                               'replaced by the embedded ones')
    simulate.add_argument('--verbose', '-v', action='count', default=0,
                          help='log the service at INFO (-v) or DEBUG (-vv) to stderr')
    manage_simulate.add_arguments(simulate)
    simulate.set_defaults(func=_simulate)

    from scheduler.cmd import manage_explain
    manage_explain.add_parser(commands, _at_least)

    from scheduler.cmd import manage_status
    manage_status.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as e:   # --help, or a usage error argparse has already explained
        return int(e.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return args.func(args)


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
