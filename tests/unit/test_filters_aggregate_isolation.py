"""Hosts reserved by aggregate metadata: AggregateMultiTenancyIsolation (projects),
AggregateTypeAffinityFilter (flavors), AvailabilityZoneFilter (zones); and the
metadata readers they share."""
from __future__ import annotations

import logging

import pytest

from scheduler.filters.aggregate_isolation import (
    AggregateMultiTenancyIsolation,
    AggregateTypeAffinityFilter,
    AvailabilityZoneFilter,
)
from scheduler.filters.aggregate_metadata import (
    AggregateLimit,
    aggregate_int_limit,
    aggregate_list,
    aggregate_values,
)
from scheduler.objects.spec import Flavor
from tests.builders import make_aggregate, make_conf, make_host, make_spec

P1, P2, P3 = 'project-one', 'project-two', 'project-three'


def host_in(*metadata: dict[str, str]):
    return make_host('cn1', aggregates=[make_aggregate(f'agg{i}', metadata=m, id=i)
                                        for i, m in enumerate(metadata)])


def verdict(filter_, host, spec):
    result = filter_.filter_result(host, spec)
    return result.passed, result.reason


RESERVED = (False, 'host is reserved for other projects (aggregate filter_tenant_id)')

# (aggregate metadata of the host, requesting project) -> (passed, reason)
TENANCY_CASES = [
    pytest.param([], P1, (True, None), id='host in no aggregate takes every project'),
    pytest.param([{'other': 'x'}], P1, (True, None),
                 id='aggregates without the key do not restrict'),
    pytest.param([{'filter_tenant_id': P1}], P1, (True, None), id='the listed project passes'),
    pytest.param([{'filter_tenant_id': P1}], P2, RESERVED, id='another project fails'),
    pytest.param([{'filter_tenant_id': f'{P1}, {P2}'}], P2, (True, None),
                 id='a comma-separated list, spaces ignored'),
    pytest.param([{'filter_tenant_id': P1}, {'filter_tenant_id': P2}], P2, (True, None),
                 id='projects of all the host aggregates count'),
    pytest.param([{'filter_tenant_id': P1}, {'other': 'x'}], P2, RESERVED,
                 id='an unrestricted aggregate does not lift the restriction of another'),
    pytest.param([{'filter_tenant_id': P1, 'filter_tenant_id2': P3}], P3, (True, None),
                 id='suffixed keys list more projects'),
    pytest.param([{'filter_tenant_id_more': P3}], P1, RESERVED,
                 id='a suffixed key alone restricts the host too'),
    pytest.param([{'filter_tenant_id': ''}], P1, RESERVED,
                 id='an empty list reserves the host for nobody'),
    pytest.param([{'filter_tenant_id': P1}], None, RESERVED,
                 id='a request without a project fails a restricted host'),
]


@pytest.mark.parametrize('metadata,project,expected', TENANCY_CASES)
def test_aggregate_multi_tenancy_isolation(metadata, project, expected):
    host = host_in(*metadata)

    assert verdict(AggregateMultiTenancyIsolation(), host, make_spec(project_id=project)) == (
        expected)


def test_the_tenancy_reason_never_names_the_projects_the_host_is_reserved_for():
    host = host_in({'filter_tenant_id': 'secret-customer-project'})

    result = AggregateMultiTenancyIsolation().filter_result(host, make_spec(project_id=P1))

    assert 'secret-customer-project' not in result.reason


NOT_ALLOWED = (False, 'flavor m1.small is not allowed on this host (aggregate instance_type)')

# (aggregate metadata of the host, flavor name) -> (passed, reason)
TYPE_CASES = [
    pytest.param([], 'm1.small', (True, None), id='host in no aggregate takes every flavor'),
    pytest.param([{'instance_type': 'm1.small'}], 'm1.small', (True, None),
                 id='the listed flavor passes'),
    pytest.param([{'instance_type': 'm1.large'}], 'm1.small', NOT_ALLOWED,
                 id='another flavor fails'),
    pytest.param([{'instance_type': 'm1.large , m1.small'}], 'm1.small', (True, None),
                 id='a comma-separated list, spaces ignored'),
    pytest.param([{'instance_type': 'm1.large'}, {'instance_type': 'm1.small'}], 'm1.small',
                 (True, None), id='flavors of all the host aggregates count'),
    pytest.param([{'instance_type': 'm1.small.x'}], 'm1.small', NOT_ALLOWED,
                 id='names match exactly, not by prefix'),
    pytest.param([{'instance_type': 'm1.large'}], None,
                 (False, 'flavor (unnamed) is not allowed on this host (aggregate '
                         'instance_type)'), id='a flavor without a name fails'),
]


@pytest.mark.parametrize('metadata,flavor_name,expected', TYPE_CASES)
def test_aggregate_type_affinity(metadata, flavor_name, expected):
    spec = make_spec(flavor=Flavor(name=flavor_name, vcpus=1, memory_mb=512))

    assert verdict(AggregateTypeAffinityFilter(), host_in(*metadata), spec) == expected


def az_filter(default_zone='nova'):
    f = AvailabilityZoneFilter()
    f.conf = make_conf(default={'default_availability_zone': default_zone})
    return f


# (aggregate metadata, requested zone, default zone) -> (passed, reason)
AZ_CASES = [
    pytest.param([{'availability_zone': 'az1'}], None, 'nova', (True, None),
                 id='a request without a zone takes every host'),
    pytest.param([{'availability_zone': 'az1'}], 'az1', 'nova', (True, None),
                 id='a host in the zone passes'),
    pytest.param([{'availability_zone': 'az2'}], 'az1', 'nova',
                 (False, 'host is not in availability zone az1'),
                 id='a host in another zone fails'),
    pytest.param([], 'nova', 'nova', (True, None),
                 id='a host in no zone aggregate is in the default zone'),
    pytest.param([], 'az1', 'nova', (False, 'host is not in availability zone az1'),
                 id='a host in no zone aggregate is in no other zone'),
    pytest.param([], 'internal', 'internal', (True, None),
                 id='the default zone is configurable'),
    pytest.param([{'availability_zone': 'az2'}], 'nova', 'nova',
                 (False, 'host is not in availability zone nova'),
                 id='a host in a named zone is not in the default zone'),
    pytest.param([{'availability_zone': 'az1'}, {'availability_zone': 'az2'}], 'az2', 'nova',
                 (True, None), id='every zone of the host aggregates counts'),
]


@pytest.mark.parametrize('metadata,zone,default_zone,expected', AZ_CASES)
def test_availability_zone_filter(metadata, zone, default_zone, expected):
    spec = make_spec(availability_zone=zone)

    assert verdict(az_filter(default_zone), host_in(*metadata), spec) == expected


def test_enabling_the_availability_zone_filter_says_nova_removed_it(caplog):
    with caplog.at_level(logging.INFO, logger='scheduler.filters.aggregate_isolation'):
        AvailabilityZoneFilter()

    assert 'Nova removed it in 29.0.0' in caplog.text


@pytest.mark.parametrize('cls', [AggregateMultiTenancyIsolation, AggregateTypeAffinityFilter,
                                 AvailabilityZoneFilter])
def test_aggregate_isolation_filters_run_once_per_request_and_not_on_rebuild(cls):
    assert (cls.run_filter_once_per_request, cls.RUN_ON_REBUILD) == (True, False)


# ---------------------------------------------------------------- the metadata readers

def test_aggregate_values_are_the_distinct_raw_values_of_the_key():
    host = host_in({'k': '1, 2'}, {'k': '1, 2'}, {'k': '3'}, {'other': '4'})

    assert aggregate_values(host, 'k') == {'1, 2', '3'}


def test_aggregate_list_merges_entries_and_says_whether_the_key_is_set():
    assert aggregate_list(host_in({'k': 'a, b'}, {'k2': 'c'}), 'k') == (
        aggregate_list(host_in({'k': 'b,a'}), 'k'))
    assert aggregate_list(host_in({'k': 'a'}, {'k2': 'c'}), 'k', prefix=True).values == {
        'a', 'c'}
    assert not aggregate_list(host_in({'other': 'a'}), 'k').present
    assert aggregate_list(host_in({'k': ' , '}), 'k').present
    assert aggregate_list(host_in({'k': ' , '}), 'k').values == frozenset()


@pytest.mark.parametrize('values,expected', [
    ([], AggregateLimit(8, False)),
    (['3'], AggregateLimit(3, True)),
    (['30', '3', '10'], AggregateLimit(3, True)),
    (['x'], AggregateLimit(8, False, ('x',))),
    (['x', '5', '1.5'], AggregateLimit(5, True, ('1.5', 'x'))),
    (['-1'], AggregateLimit(-1, True)),
], ids=['none: the option', 'one', 'the smallest', 'unparsable: the option',
        'unparsable ones ignored', 'negative values are Nova-legal'])
def test_aggregate_int_limit(values, expected):
    host = host_in(*({'limit': v} for v in values))

    assert aggregate_int_limit(host, 'limit', 8) == expected


def test_a_limit_says_where_it_comes_from():
    assert AggregateLimit(8, False).describe('max_io_ops_per_host') == 'max_io_ops_per_host 8'
    assert AggregateLimit(2, True).describe('max_io_ops_per_host') == (
        'aggregate max_io_ops_per_host 2')
