"""Property: any RequestSpec the codec accepts either translates to a query the REAL
Placement 16 accepts, or is refused with RequestTranslationError before it leaves.

A malformed query must never reach Placement: it would answer 400 (or, for an
amount beyond 64 bits, fail with a 500 that looks like an outage) and the
caller would get an unexplained NoValidHost. Hypothesis builds specs from
Nova's extra spec grammar, request groups, request-level parameters and
destinations, mixing valid names with malformed ones; every translated query
is sent to the embedded Placement. Names Placement does not know (a custom
trait nobody created) are a different, legitimate 400 with Placement's own
words, covered by test_hostile_input.py; here every well-formed name exists.

The number of examples is bounded (each one is a real HTTP request).
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import requests
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from scheduler.exceptions import InvalidInput, RequestTranslationError
from scheduler.objects import codec
from scheduler.objects.codec import encode_request_spec
from scheduler.objects.spec import (
    Destination,
    Flavor,
    ImageMeta,
    ImageMetaProps,
    RequestGroup,
    RequestLevelParams,
    RequestSpec,
)
from scheduler.request.translate import build_query
from scheduler.simulate.embedded_placement import EmbeddedPlacement

EXAMPLES = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

CN = str(uuid.uuid5(uuid.NAMESPACE_URL, 'prop-cn'))
CN_GPU = str(uuid.uuid5(uuid.NAMESPACE_URL, 'prop-cn-gpu'))
AGG = str(uuid.uuid5(uuid.NAMESPACE_URL, 'prop-agg'))
OTHER_AGG = str(uuid.uuid5(uuid.NAMESPACE_URL, 'prop-other-agg'))
CUSTOM_CLASS = 'CUSTOM_PROP_GOLD'
CUSTOM_TRAIT = 'CUSTOM_PROP_FAST'


class Api:
    def __init__(self, url: str):
        self.url = url
        self.session = requests.Session()
        self.session.headers.update({'X-Auth-Token': 'admin', 'Accept': 'application/json',
                                     'OpenStack-API-Version': 'placement 1.36'})

    def ok(self, method: str, path: str, body=None) -> requests.Response:
        response = self.session.request(method, self.url + path, json=body, timeout=30)
        assert response.status_code < 300, (method, path, response.text)
        return response

    def provider(self, name: str, rp: str, inventories: dict[str, int], *,
                 parent: str | None = None, traits=(), aggregates=()) -> None:
        self.ok('POST', '/resource_providers',
                {'name': name, 'uuid': rp, 'parent_provider_uuid': parent})
        for path, body in (('inventories', {'inventories': {
                rc: {'total': n} for rc, n in inventories.items()}}),
                ('traits', {'traits': list(traits)}),
                ('aggregates', {'aggregates': list(aggregates)})):
            generation = self.ok('GET', f'/resource_providers/{rp}').json()['generation']
            self.ok('PUT', f'/resource_providers/{rp}/{path}',
                    dict(body, resource_provider_generation=generation))


@pytest.fixture(scope='module')
def api(embedded_placement: EmbeddedPlacement) -> Iterator[Api]:
    embedded_placement.wipe()
    api = Api(embedded_placement.url)
    api.ok('PUT', f'/resource_classes/{CUSTOM_CLASS}')
    api.ok('PUT', f'/traits/{CUSTOM_TRAIT}')
    api.provider('prop-cn', CN, {'VCPU': 16, 'PCPU': 8, 'MEMORY_MB': 32768, 'DISK_GB': 500},
                 traits=('HW_CPU_X86_AVX2', 'HW_CPU_HYPERTHREADING'), aggregates=(AGG,))
    api.provider('prop-cn-gpu', CN_GPU, {'VGPU': 4, 'SRIOV_NET_VF': 8, CUSTOM_CLASS: 2},
                 parent=CN, traits=(CUSTOM_TRAIT,))
    yield api
    embedded_placement.wipe()


# ------------------------------------------------------------------ strategies

GOOD_CLASSES = ['VCPU', 'PCPU', 'MEMORY_MB', 'DISK_GB', 'VGPU', 'SRIOV_NET_VF', CUSTOM_CLASS]
BAD_CLASSES = ['vcpu', 'CUSTOM_', 'CUSTOM_lower', 'NOT_A_CLASS', 'VCPU ', '']
GOOD_TRAITS = ['HW_CPU_X86_AVX2', 'HW_CPU_HYPERTHREADING', 'COMPUTE_STATUS_DISABLED',
               CUSTOM_TRAIT]
BAD_TRAITS = ['fast', 'CUSTOM_a', 'HW_NOT_A_TRAIT', 'CUSTOM_X,CUSTOM_Y', '!HW_CPU_X86_AVX2']




def mostly(good: list[str], bad: list[str]) -> st.SearchStrategy[str]:
    """Mostly well-formed values, so that most specs get as far as Placement."""
    return st.sampled_from(good * 15 + bad)


def sometimes(strategy: st.SearchStrategy, empty) -> st.SearchStrategy:
    """``strategy`` in one draw of four, ``empty`` otherwise."""
    return st.sampled_from([0, 1, 2, 3]).flatmap(
        lambda n: strategy if n == 0 else st.just(empty))


classes = mostly(GOOD_CLASSES, BAD_CLASSES)
traits = mostly(GOOD_TRAITS, BAD_TRAITS)
suffixes = mostly(['', '', '1', '2', '_NET'], ['bad suffix', 'a' * 65])
aggregate_ids = mostly([AGG, OTHER_AGG], ['not-a-uuid', ''])
# Amounts are where Placement breaks worst (beyond 64 bits it answers 500): more edges.
amounts = st.sampled_from(['0', '1', '2', ' 3 ', '+4', '2147483647'] * 3
                          + ['-1', 'abc', '1.5', '2147483648', '9' * 25])


@st.composite
def extra_spec(draw: st.DrawFn) -> tuple[str, str]:
    kind = draw(st.sampled_from(['resources', 'resources', 'trait', 'trait', 'group_policy',
                                 'cpu']))
    if kind == 'resources':
        return (f'resources{draw(suffixes)}:{draw(classes)}',
                draw(amounts | st.integers(0, 64).map(str)))
    if kind == 'trait':
        return (f'trait{draw(suffixes)}:{draw(traits)}',
                draw(st.sampled_from(['required', 'forbidden', 'required', 'maybe'])))
    if kind == 'group_policy':
        return 'group_policy', draw(st.sampled_from(['none', 'isolate', 'bogus']))
    return draw(st.sampled_from([
        ('hw:cpu_policy', 'dedicated'), ('hw:cpu_policy', 'dedicated'),
        ('hw:cpu_policy', 'mixed'), ('hw:cpu_policy', 'bogus'),
        ('hw:cpu_thread_policy', 'require'), ('hw:cpu_thread_policy', 'isolate'),
        ('hw:emulator_threads_policy', 'isolate'), ('hw:cpu_dedicated_mask', '^0-1'),
        ('hw:cpu_dedicated_mask', 'garbage'), ('hw:mem_page_size', 'large')]))


@st.composite
def request_group(draw: st.DrawFn) -> RequestGroup:
    return RequestGroup(
        requester_id=draw(mostly(['port-a', 'port-b', 'x-y'], ['bad id!', None])),
        resources=draw(st.dictionaries(classes, st.integers(0, 2**31 - 1) | st.integers(0, 4),
                                       max_size=3)),
        required_traits=draw(st.sets(traits, max_size=2)),
        forbidden_traits=draw(st.sets(traits, max_size=2)),
        aggregates=draw(st.lists(st.lists(aggregate_ids, min_size=1, max_size=2), max_size=2)),
        forbidden_aggregates=draw(sometimes(st.sets(aggregate_ids, max_size=1), set())),
        in_tree=draw(st.none() | mostly([CN, CN_GPU], ['not-a-uuid'])))


@st.composite
def request_specs(draw: st.DrawFn) -> RequestSpec:
    amount = st.integers(0, 8) | st.sampled_from([0, 2**31 - 1])
    flavor = Flavor(id=1, flavorid='p', name='prop', vcpus=draw(amount),
                    memory_mb=draw(amount), root_gb=draw(amount),
                    ephemeral_gb=draw(st.integers(0, 2) | st.just(2**31 - 1)),
                    swap=draw(st.sampled_from([0, 1, 1024, 1025, 2**31 - 1])),
                    extra_specs=dict(draw(st.lists(extra_spec(), max_size=4))))
    props = ImageMetaProps()
    props['traits_required'] = draw(sometimes(st.lists(traits, max_size=2), []))
    if draw(st.booleans()):
        props['hw_cpu_policy'] = draw(st.sampled_from(['dedicated', 'shared']))
    destination = None
    if draw(st.booleans()):
        destination = Destination(
            aggregates=draw(st.lists(st.lists(aggregate_ids, min_size=1, max_size=2)
                                     .map(','.join), max_size=2)) or None,
            forbidden_aggregates=draw(sometimes(st.sets(aggregate_ids, max_size=2), set())))
    return RequestSpec(
        flavor=flavor,
        image=ImageMeta(id=str(uuid.uuid4()), name='img', properties=props),
        project_id='p', user_id='u', is_bfv=draw(st.booleans()),
        requested_destination=destination,
        requested_resources=draw(sometimes(st.lists(request_group(), max_size=2), [])),
        request_level_params=RequestLevelParams(
            root_required=draw(sometimes(st.sets(traits, max_size=2), set())),
            root_forbidden=draw(sometimes(st.sets(traits, max_size=1), set())),
            same_subtree=draw(sometimes(st.lists(st.lists(
                mostly(['1', '_NET', 'port-a', 'port-b'], ['', 'bad suffix']), min_size=1,
                max_size=2), max_size=1), []))),
        scheduler_hints=draw(st.sampled_from([{}, {}, {'group': [str(uuid.uuid4())]}])))


def _known_trap(extra_specs: dict[str, str], **fields) -> RequestSpec:
    return RequestSpec(flavor=Flavor(id=1, flavorid='p', name='trap', vcpus=1, memory_mb=512,
                                     root_gb=1, extra_specs=extra_specs),
                       project_id='p', user_id='u', **fields)


ALL_GRANULAR = {'resources:VCPU': '0', 'resources:MEMORY_MB': '0', 'resources:DISK_GB': '0',
                'resources1:VGPU': '1'}


# -------------------------------------------------------------------- property


@EXAMPLES
# Traps found before, always tried: an amount beyond 64 bits (Placement: 500), and
# groups without resources (Nova's literal query: 400).
@example(spec=_known_trap({'resources:VCPU': '9' * 25}), limit=1000, in_tree=None)
@example(spec=_known_trap({'resources1:VGPU': '2147483648', 'group_policy': 'none'}),
         limit=None, in_tree=None)
@example(spec=_known_trap(ALL_GRANULAR, requested_destination=Destination(aggregates=[AGG])),
         limit=1000, in_tree=CN)
@example(spec=_known_trap({'trait1:CUSTOM_PROP_FAST': 'required'}), limit=1, in_tree=None)
@example(spec=_known_trap({**ALL_GRANULAR, 'trait:HW_CPU_X86_AVX2': 'forbidden'}), limit=1,
         in_tree=None)
@given(spec=request_specs(), limit=st.sampled_from([None, 1, 1000]),
       in_tree=st.sampled_from([None, None, CN, CN_GPU, str(uuid.uuid4())]))
def test_a_decoded_spec_translates_to_a_query_placement_accepts_or_is_refused_first(
        api: Api, spec: RequestSpec, limit: int | None, in_tree: str | None) -> None:
    try:
        decoded = codec.decode_request_spec(encode_request_spec(spec))
    except InvalidInput:
        event('refused by the codec')
        return
    try:
        query = build_query(decoded, limit=limit, in_tree=in_tree).query
    except RequestTranslationError:
        event('refused by the translation')
        return

    response = api.session.get(f'{api.url}/allocation_candidates?{query.to_querystring()}',
                               timeout=30)

    assert response.status_code == 200, (query.describe(), response.text[:500])
    event('accepted; candidates' if response.json()['allocation_requests']
          else 'accepted; none')
