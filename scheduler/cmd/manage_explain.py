"""``scheduler-manage explain``: why a request would land where it lands.

Runs the scheduler's whole decision for one request as a dry run
(:meth:`SchedulerManager.explain`: nothing is claimed, nothing is written to
Placement) and prints every stage: the Placement query and its answer, each
filter with the hosts it removed grouped by reason, the weighed top hosts with
each weigher's share, and the host that would be chosen with its alternates.

The request comes from a RequestSpec JSON file (Nova's primitive, as in a
``spec_obj`` of ``select_destinations``, or the plain form of
:func:`spec_from_plain`) or from flavor/image/hint options. Placement is the
one in ``--config-file`` or, with ``--simulate``, an embedded one seeded with
the synthetic cloud of ``scheduler-manage simulate``.
"""
from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from scheduler import explain
from scheduler.objects.spec import Flavor, ImageMeta, ImageMetaProps, RequestSpec

if TYPE_CHECKING:
    from oslo_config import cfg

    from placement_client.api import PlacementAPI
    from scheduler.host_state import HostData
    from scheduler.manager import SchedulerManager

EXIT_PLACED = 0
EXIT_NO_VALID_HOST = 1
EXIT_USAGE = 2

DEFAULT_SIMULATED_HOSTS = 20
DEFAULT_SEED = 42
#: Host names printed per reason; --json carries all of them.
NAMES_PER_REASON = 10
#: The project a request built from options belongs to (tenant-aware request
#: filters and filters read it); --project-id overrides it.
DEFAULT_PROJECT = 'explain'
_PLAIN_KEYS = frozenset({
    'flavor', 'image', 'num_instances', 'availability_zone', 'scheduler_hints', 'project_id',
    'user_id', 'ignore_hosts', 'force_hosts', 'force_nodes', 'is_bfv'})


class SpecError(ValueError):
    """The request given on the command line or in the file cannot be used."""


# ------------------------------------------------------------------ the request
def _pairs(values: Iterable[str] | None, option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values or ():
        key, sep, val = value.partition('=')
        if not sep or not key:
            raise SpecError(f'{option} takes KEY=VALUE, not {value!r}')
        pairs[key] = val
    return pairs


def _hints(values: Mapping[str, Any]) -> dict[str, list[Any]]:
    # Nova's hints are lists on the wire; a repeated --hint key adds to the list.
    return {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in values.items()}


def spec_from_options(args: argparse.Namespace) -> RequestSpec:
    hints: dict[str, list[Any]] = {}
    for value in args.hint or ():
        key, sep, val = value.partition('=')
        if not sep or not key:
            raise SpecError(f'--hint takes KEY=VALUE, not {value!r}')
        hints.setdefault(key, []).append(val)
    image_props = _pairs(args.image_prop, '--image-prop')
    flavor = Flavor(name='explain', flavorid='explain', vcpus=args.vcpus,
                    memory_mb=args.memory_mb, root_gb=args.disk_gb,
                    ephemeral_gb=args.ephemeral_gb, swap=args.swap_mb,
                    extra_specs=_pairs(args.extra_spec, '--extra-spec'))
    return RequestSpec(flavor=flavor, image=ImageMeta(properties=ImageMetaProps(image_props)),
                       num_instances=args.instances, project_id=args.project_id,
                       user_id=args.project_id, availability_zone=args.az,
                       scheduler_hints=hints)


def spec_from_plain(data: Mapping[str, Any]) -> RequestSpec:
    """The plain form: ``{"flavor": {Flavor fields}, "image": {"properties": {...}},
    "num_instances", "availability_zone", "scheduler_hints", "project_id", ...}``."""
    unknown = set(data) - _PLAIN_KEYS
    if unknown:
        raise SpecError(f'unknown key(s) in the request file: {", ".join(sorted(unknown))}; '
                        f'known: {", ".join(sorted(_PLAIN_KEYS))}')
    try:
        flavor = Flavor(**dict(data.get('flavor') or {}))
        image_data = dict(data.get('image') or {})
        image_data['properties'] = ImageMetaProps(image_data.get('properties') or {})
        image = ImageMeta(**image_data)
    except TypeError as e:
        raise SpecError(f'request file: {e}') from e
    return RequestSpec(flavor=flavor, image=image,
                       num_instances=int(data.get('num_instances', 1)),
                       project_id=data.get('project_id', DEFAULT_PROJECT),
                       user_id=data.get('user_id', data.get('project_id', DEFAULT_PROJECT)),
                       availability_zone=data.get('availability_zone'),
                       scheduler_hints=_hints(data.get('scheduler_hints') or {}),
                       ignore_hosts=data.get('ignore_hosts'), force_hosts=data.get('force_hosts'),
                       force_nodes=data.get('force_nodes'), is_bfv=bool(data.get('is_bfv')))


def _find_spec_obj(data: Any) -> Any:
    """The RequestSpec primitive in what an operator may have saved: the primitive
    itself, a call's ``args``, the oslo message, or a captured AMQP body."""
    if isinstance(data, dict):
        if 'nova_object.name' in data:
            return data
        body = data.get('amqp_body', data)
        if isinstance(body, dict) and isinstance(body.get('oslo.message'), str):
            return _find_spec_obj(json.loads(body['oslo.message']))
        for key in ('args', 'spec_obj'):
            if isinstance(data.get(key), dict):
                return _find_spec_obj(data[key])
    return None


def spec_from_file(path: str) -> RequestSpec:
    from scheduler.objects import codec

    try:
        with open(path, encoding='utf-8') as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise SpecError(f'cannot read the request file {path}: {e}') from e
    primitive = _find_spec_obj(data)
    if primitive is not None:
        return codec.decode_request_spec(primitive)
    if not isinstance(data, dict):
        raise SpecError(f'{path}: expected a JSON object (a RequestSpec primitive or the '
                        f'plain form)')
    return spec_from_plain(data)


# ------------------------------------------------------------------ the output
def _names(hosts: Sequence[str], limit: int = NAMES_PER_REASON) -> str:
    shown = ', '.join(hosts[:limit])
    more = len(hosts) - limit
    return shown + (f', +{more} more' if more > 0 else '')


def _describe_request(spec: RequestSpec) -> str:
    f = spec.flavor
    parts = [f'{f.vcpus} vCPU', f'{f.memory_mb} MB RAM', f'{f.root_gb} GB disk']
    if f.ephemeral_gb:
        parts.append(f'{f.ephemeral_gb} GB ephemeral')
    if f.swap:
        parts.append(f'{f.swap} MB swap')
    count = spec.num_instances
    text = f'{count} instance{"s" if count != 1 else ""} of ' + ', '.join(parts)
    extras = []
    if f.extra_specs:
        extras.append('extra specs ' + ', '.join(f'{k}={v}' for k, v in f.extra_specs.items()))
    if spec.image is not None and spec.image.properties:
        extras.append('image ' + ', '.join(f'{k}={v}'
                                           for k, v in spec.image.properties.items()))
    if spec.availability_zone:
        extras.append(f'zone {spec.availability_zone}')
    if spec.scheduler_hints:
        extras.append('hints ' + ', '.join(f'{k}={",".join(map(str, v))}'
                                           for k, v in spec.scheduler_hints.items()))
    return text + ('; ' + '; '.join(extras) if extras else '')


def _placement_lines(report: explain.ExplainReport) -> list[str]:
    p = report.placement
    lines = [f'Placement query: {p.query or "-"}']
    if p.error:
        return lines + [f'  -> {p.error}']
    if p.candidates is None:
        return lines
    limit = f'limit {p.limit}' if p.limit is not None else 'no limit'
    hosts = f' on {p.hosts} hosts' if p.hosts is not None else ''
    lines.append(f'  -> {p.candidates} allocation candidates{hosts} ({limit})')
    if p.truncated:
        lines.append('  -> the limit was reached: hosts beyond it were not considered '
                     '([scheduler] max_placement_results)')
    return lines


def _stage_lines(instance: explain.InstanceReport) -> list[str]:
    if instance.filters_skipped:
        return ['  Filters: skipped (the host is forced and no check type is set, as in Nova)']
    if not instance.stages:
        return ['  Filters: none configured']
    width = max(len(s.name) for s in instance.stages)
    lines = ['  Filters:']
    for s in instance.stages:
        label = s.name + (' (weigher)' if s.kind == 'weigher' else '')
        label = label.ljust(width + (10 if s.kind == 'weigher' else 0))
        if s.skipped is not None:
            lines.append(f'    {label}  not run ({s.skipped})')
            continue
        removed = s.hosts_in - s.hosts_out
        line = f'    {label}  {s.hosts_in:>5} -> {s.hosts_out:<5}'
        lines.append((line + (f' removed {removed}' if removed else '')).rstrip())
        for r in s.removed:
            count = len(r.hosts)
            lines.append(f'      - {count} host{"s" if count != 1 else ""}: {r.reason}')
            lines.extend(textwrap.wrap(_names(sorted(r.hosts)), width=96,
                                       initial_indent='          ',
                                       subsequent_indent='          '))
    return lines


def _weigh_lines(instance: explain.InstanceReport) -> list[str]:
    top = instance.weighed
    if not top:
        return []
    if instance.hosts_passed <= 1:
        return [f'  Weighed: 1 host, nothing to weigh against (as in Nova): {top[0].host}']
    names = list(dict.fromkeys(name for w in top for name in w.contributions))
    # A weigher that gave every host shown nothing would only add a row of zeros.
    weighers = [n for n in names if any(w.contributions.get(n) for w in top)]
    idle = [n for n in names if n not in weighers]
    head = f'  Weighed: {instance.hosts_passed} hosts, top {len(top)} (multiplier × ' \
           f'normalised value per weigher):'
    width = max([len(n) for n in weighers] + [len('total')])
    cols = [max(len(w.host), 8) for w in top]
    lines = [head, '    ' + ' ' * width + ''.join(f'  {w.host:>{c}}' for w, c in zip(
        top, cols, strict=True))]
    for name in weighers:
        lines.append(f'    {name:<{width}}' + ''.join(
            f'  {w.contributions.get(name, 0.0):>{c}.4f}' for w, c in zip(top, cols,
                                                                          strict=True)))
    lines.append(f'    {"total":<{width}}' + ''.join(
        f'  {w.weight:>{c}.4f}' for w, c in zip(top, cols, strict=True)))
    if idle:
        lines.extend(textwrap.wrap(f'0 for every host shown: {", ".join(idle)}', width=96,
                                   initial_indent='    ', subsequent_indent='      '))
    return lines


def render(report: explain.ExplainReport, spec: RequestSpec | None = None) -> str:
    """The report for a human, stage by stage."""
    lines = []
    if spec is not None:
        lines.append(f'Request: {_describe_request(spec)}')
    if report.request_filters:
        lines.append('Request filters applied: ' + ', '.join(report.request_filters))
    lines.extend(_placement_lines(report))
    if report.prefilter_removed:
        lines.append('Host restrictions: ' + ', '.join(
            f'{why}: {n} removed' for why, n in report.prefilter_removed.items()))
    for inst in report.instances:
        lines.append(f'Instance {inst.index + 1} of {report.num_instances}: '
                     f'{inst.hosts_in} hosts')
        lines.extend(_stage_lines(inst))
        lines.extend(_weigh_lines(inst))
        for why, n in inst.not_chosen.items():
            lines.append(f'  Passed but could not take it: {why}: {n}')
        if inst.chosen:
            node = (f' (node {inst.chosen_node})'
                    if inst.chosen_node and inst.chosen_node != inst.chosen else '')
            alts = ', '.join(inst.alternates) or 'none'
            lines.append(f'  Chosen: {inst.chosen}{node}; alternates: {alts}')
        else:
            lines.append('  Chosen: none')
    if report.placed:
        chosen = ', '.join(i.chosen or '-' for i in report.instances)
        lines.append(f'Result: would be placed on {chosen} (nothing was claimed)')
    else:
        lines.append(f'Result: {report.error}: {report.reason}')
    return '\n'.join(lines)


# ------------------------------------------------------------------ running it
def _manager(conf: cfg.ConfigOpts, placement: PlacementAPI,
             catalog: HostData) -> SchedulerManager:
    from scheduler import plugins
    from scheduler.manager import SchedulerManager
    from scheduler.request.filters import load_request_filters

    return SchedulerManager(conf, placement=placement, catalog=catalog,
                            filters=plugins.load_filters(conf),
                            weighers=plugins.load_weighers(conf),
                            request_filters=load_request_filters(conf.scheduler.request_filters))


def _explain(manager: SchedulerManager, spec: RequestSpec, top: int) -> explain.ExplainReport:
    from scheduler.context import RequestContext

    context = RequestContext(project_id=spec.project_id, user_id=spec.user_id)
    return manager.explain(context, spec, top=top)


def explain_live(conf, spec: RequestSpec, top: int) -> explain.ExplainReport:
    from scheduler.conf.placement import load_client
    from scheduler.service import build_catalog

    manager = _manager(conf, load_client(conf), build_catalog(conf))
    return _explain(manager, spec, top)


def explain_simulated(conf, spec: RequestSpec, top: int, *, hosts: int, seed: int,
                      err: IO[str]) -> explain.ExplainReport:
    from scheduler.catalog import HostCatalog
    from scheduler.conf.placement import load_client
    from scheduler.simulate.cloud import CloudSpec, generate_cloud, seed_cloud
    from scheduler.simulate.embedded_placement import EmbeddedPlacement
    from scheduler.simulate.runner import use_placement

    cloud = generate_cloud(CloudSpec(hosts=hosts, seed=seed))
    placement = EmbeddedPlacement().start()
    try:
        placement.wipe()   # one embedded database per process: start from an empty cloud
        use_placement(conf, placement.url)
        client = load_client(conf)
        seed_cloud(client, cloud)
        err.write(f'embedded Placement seeded with {hosts} hosts (seed {seed}, '
                  f'{len(cloud.availability_zones)} availability zones)\n')
        catalog = HostCatalog(default_cell_uuid=conf.scheduler.default_cell_uuid,
                              default_availability_zone=conf.default_availability_zone)
        catalog.update_aggregates(list(cloud.aggregates))
        return _explain(_manager(conf, client, catalog), spec, top)
    finally:
        placement.stop()


def run(args: argparse.Namespace, *, out: IO[str] | None = None,
        err: IO[str] | None = None) -> int:
    from oslo_config import cfg

    from scheduler.exceptions import ConfigurationError, InvalidInput
    from scheduler.simulate.runner import _stderr_logging, build_conf

    out = out or sys.stdout
    err = err or sys.stderr
    if not args.simulate and not args.config_file:
        err.write('scheduler-manage explain: error: give --config-file (a live Placement) '
                  'or --simulate\n')
        return EXIT_USAGE
    level = ('WARNING', 'INFO', 'DEBUG')[min(args.verbose, 2)]
    try:
        spec = spec_from_file(args.spec) if args.spec else spec_from_options(args)
        with _stderr_logging(level, err):
            conf = build_conf(args.config_file)
            if args.simulate:
                report = explain_simulated(conf, spec, args.top, hosts=args.hosts,
                                           seed=args.seed, err=err)
            else:
                report = explain_live(conf, spec, args.top)
    except (SpecError, InvalidInput, cfg.Error, ConfigurationError) as e:
        reason = getattr(e, 'reason', None) or str(e)
        err.write(f'scheduler-manage explain: error: {reason}\n')
        return EXIT_USAGE
    if args.json:
        out.write(json.dumps(report.to_dict(), indent=2, sort_keys=True) + '\n')
    else:
        out.write(render(report, spec) + '\n')
    return EXIT_PLACED if report.placed else EXIT_NO_VALID_HOST


def add_parser(commands: Any, at_least: Callable[[int], Callable[[str], int]]) -> None:
    """Register ``explain`` on ``scheduler-manage``'s subcommands."""
    p = commands.add_parser(
        'explain', help='show how the scheduler would place one request, without claiming',
        description='Run the whole scheduling decision for one request without claiming '
                    'anything and print every stage: the Placement query and its answer, '
                    'each filter with the hosts it removed and why, the weighed top hosts '
                    'with each weigher\'s share, and the host that would be chosen. Exit '
                    'status 0 when the request would be placed, 1 when it would get '
                    'NoValidHost, 2 for unusable input or configuration.')
    source = p.add_argument_group('the request (a file, or flavor/image/hints)')
    source.add_argument('--spec', metavar='PATH',
                        help='a RequestSpec as JSON: Nova\'s primitive (a spec_obj, also '
                             'inside a saved select_destinations message) or the plain form '
                             '{"flavor": {...}, "image": {"properties": {...}}, '
                             '"num_instances": N, "availability_zone": ..., '
                             '"scheduler_hints": {...}}; the options below are then ignored')
    source.add_argument('--vcpus', type=at_least(0), default=1, help='(default: %(default)s)')
    source.add_argument('--memory-mb', type=at_least(0), default=512,
                        help='(default: %(default)s)')
    source.add_argument('--disk-gb', type=at_least(0), default=1,
                        help='root disk (default: %(default)s)')
    source.add_argument('--ephemeral-gb', type=at_least(0), default=0)
    source.add_argument('--swap-mb', type=at_least(0), default=0)
    source.add_argument('--extra-spec', action='append', metavar='KEY=VALUE',
                        help='a flavor extra spec, e.g. trait:CUSTOM_SSD=required (repeatable)')
    source.add_argument('--image-prop', action='append', metavar='KEY=VALUE',
                        help='an image property, e.g. hw_architecture=x86_64 (repeatable)')
    source.add_argument('--hint', action='append', metavar='KEY=VALUE',
                        help='a scheduler hint (repeatable; a repeated key makes a list)')
    source.add_argument('--az', metavar='ZONE', help='the requested availability zone')
    source.add_argument('--instances', type=at_least(1), default=1,
                        help='instances in the request (default: %(default)s)')
    source.add_argument('--project-id', default=DEFAULT_PROJECT,
                        help='project of the request (default: %(default)s)')
    where = p.add_argument_group('where')
    where.add_argument('--config-file', metavar='PATH',
                       help='the scheduler configuration: its [placement] section is the '
                            'Placement asked (read only), its filters and weighers are used')
    where.add_argument('--simulate', action='store_true',
                       help='ask an embedded Placement seeded with the synthetic cloud of '
                            '"scheduler-manage simulate" instead ([placement] is replaced)')
    where.add_argument('--hosts', type=at_least(1), default=DEFAULT_SIMULATED_HOSTS,
                       help='with --simulate: hosts in the cloud (default: %(default)s)')
    where.add_argument('--seed', type=int, default=DEFAULT_SEED,
                       help='with --simulate: seed of the cloud (default: %(default)s)')
    show = p.add_argument_group('output')
    show.add_argument('--top', type=at_least(0), default=explain.DEFAULT_TOP,
                      help='weighed hosts shown per instance (default: %(default)s)')
    show.add_argument('--json', action='store_true', help='print the report as JSON')
    show.add_argument('--verbose', '-v', action='count', default=0,
                      help='log at INFO (-v) or DEBUG (-vv) to stderr')
    p.set_defaults(func=run)
