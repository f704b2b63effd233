"""``python -m tests.nova_differential.services [--cases N] [--seed S]``

The compute services' state read from a cell database's ``services`` rows
(scheduler/catalog/cell_services.py) against Nova 34's own code for the same
rows: ``ServiceController._get_service_detail`` (what ``GET /os-services``
answers at microversion 2.87) with the database servicegroup driver, at one
frozen ``utcnow``. Random rows: forced down or not, disabled with or without
a reason, heartbeats (``last_seen_up``, or none and only ``created_at``) from
well before ``service_down_time`` to ahead of now (a compute whose clock runs
fast), and right at the boundary. Exits 1 on any difference.
"""
from __future__ import annotations

import argparse
import datetime
import random
import sys

DOWN_TIME = 60


def random_row(rng: random.Random, n: int, now: datetime.datetime) -> tuple:
    def moment() -> datetime.datetime:
        offset = rng.choice([rng.uniform(-3 * DOWN_TIME, 2 * DOWN_TIME), -DOWN_TIME,
                             DOWN_TIME, -DOWN_TIME - 1e-6, 0.0])
        return (now + datetime.timedelta(seconds=offset)).replace(
            microsecond=rng.choice([0, rng.randrange(10**6)]))
    created = moment() - datetime.timedelta(seconds=rng.choice([0, 3600]))
    last_seen_up = moment() if rng.random() < 0.8 else None
    updated = last_seen_up if last_seen_up is not None and rng.random() < 0.7 else moment()
    disabled = rng.random() < 0.3
    reason = rng.choice([None, 'maintenance', '']) if disabled else rng.choice([None, None, 'x'])
    return (f'compute-{n}', disabled, reason, rng.random() < 0.2, last_seen_up, created,
            updated)


def nova_records(rows: list[tuple], now: datetime.datetime) -> list[dict]:
    from nova import config, context, objects, servicegroup
    from nova.api.openstack import api_version_request
    from nova.api.openstack.compute import services
    from oslo_utils import timeutils

    config.parse_args([], configure_db=False, init_rpc=False)
    config.CONF.set_override('service_down_time', DOWN_TIME)
    config.CONF.set_override('servicegroup_driver', 'db')
    objects.register_all()
    # Not its __init__ (it wants an RPC transport for APIs this method never uses).
    controller = services.ServiceController.__new__(services.ServiceController)
    controller.servicegroup_api = servicegroup.API()
    class Request:   # what _get_service_detail reads of one
        environ = {'nova.context': context.get_admin_context()}

        def is_legacy_v2(self) -> bool:
            return False

    request = Request()
    request.api_version_request = api_version_request.APIVersionRequest('2.87')
    ctxt = context.get_admin_context()
    records = []
    timeutils.set_time_override(now)
    try:
        for i, (host, disabled, reason, forced, last_seen_up, created, updated) in \
                enumerate(rows, start=1):
            service = objects.Service(
                ctxt, id=i, uuid=f'00000000-0000-0000-0000-{i:012d}', host=host,
                binary='nova-compute', topic='compute', report_count=1, disabled=disabled,
                disabled_reason=reason, forced_down=forced, last_seen_up=last_seen_up,
                created_at=created.replace(tzinfo=datetime.timezone.utc),
                updated_at=updated.replace(tzinfo=datetime.timezone.utc),
                availability_zone='nova')
            records.append(controller._get_service_detail(service, ['forced_down'], request))
    finally:
        timeutils.clear_time_override()
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--cases', type=int, default=2000)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args(argv)
    from scheduler.catalog.cell_services import service_keys
    from scheduler.catalog.nova_api import ServicesParser, parse_services

    rng = random.Random(args.seed)
    now = datetime.datetime(2026, 11, 27, 12, 0, 0, 250000)
    rows = [random_row(rng, n, now) for n in range(args.cases)]
    ours, _ = ServicesParser().parse_keys(service_keys(rows, now=now, down_time=DOWN_TIME))
    records = nova_records(rows, now)
    for record in records:
        # As the JSON body carries it.
        record['updated_at'] = (record['updated_at'].strftime('%Y-%m-%dT%H:%M:%S.%f')
                                if record['updated_at'] is not None else None)
    theirs, _ = parse_services({'services': records})
    differing = [(row, ours.get(row[0]), theirs.get(row[0])) for row in rows
                 if _seen(ours.get(row[0])) != _seen(theirs.get(row[0]))]
    up = sum(1 for s in theirs.values() if s.up)
    print(f'compute services: {len(rows)} rows ({up} up in Nova\'s verdict), '
          f'{len(differing)} differing')
    for row, mine, nova in differing[:5]:
        print(f'  {row}\n    ours: {mine}\n    nova: {nova}')
    return 1 if differing or len(ours) != len(rows) else 0


def _seen(state) -> tuple | None:
    # What the catalog takes from a state (ComputeFilter's verdict included).
    if state is None:
        return None
    return (state.host, state.up, state.disabled, state.disabled_reason, state.forced_down,
            state.last_seen_up)


if __name__ == '__main__':
    sys.exit(main())
