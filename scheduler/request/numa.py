"""The NUMA topology a request asks for (the instance side of NUMATopologyFilter).

Nova's API builds it when the server is created or resized
(``nova.virt.hardware.numa_get_constraints``) and sends it as the RequestSpec's
``numa_topology`` (an ``InstanceNUMATopology`` primitive): that is what
:func:`requested_topology` reads first. A spec without one (a hand-built spec,
a simulation) gets the same topology derived here from the flavor and image:

* ``hw:numa_nodes`` / ``hw_numa_nodes``; one node when only CPU pinning
  (``hw:cpu_policy`` dedicated or mixed), a page size (``hw:mem_page_size``) or
  persistent memory (``hw:pmem``) asks for a topology;
* vCPUs and memory split evenly, or as ``hw:numa_cpus.N`` / ``hw:numa_mem.N``
  (image ``hw_numa_cpus`` / ``hw_numa_mem``) say;
* per cell, the pinned vCPUs (``pcpuset``: all for dedicated, the
  ``hw:cpu_dedicated_mask`` ones for mixed) and the shared ones (``cpuset``),
  the page size, the CPU and thread policies; ``hw:emulator_threads_policy``.

Invalid combinations raise RequestTranslationError, as Nova's API refuses them.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oslo_utils import strutils

from scheduler.exceptions import RequestTranslationError
from scheduler.objects.codec import unwrap
from scheduler.objects.spec import Flavor, ImageMetaProps, RequestSpec
from scheduler.request import cpu_policy, hardware

#: Nova's symbolic page sizes (``nova.virt.hardware.MEMPAGES_*``).
PAGES_SMALL, PAGES_LARGE, PAGES_ANY = -1, -2, -3
_SYMBOLIC_PAGES = {'small': PAGES_SMALL, 'large': PAGES_LARGE, 'any': PAGES_ANY}


@dataclass(frozen=True)
class InstanceCell:
    id: int
    cpuset: frozenset[int] = frozenset()   # vCPUs on shared host CPUs
    pcpuset: frozenset[int] = frozenset()  # vCPUs on dedicated host CPUs
    memory: int = 0                        # MB
    pagesize: int | None = None            # KiB, or PAGES_SMALL / _LARGE / _ANY
    cpu_policy: str | None = None
    cpu_thread_policy: str | None = None

    @property
    def pinned(self) -> bool:
        return self.cpu_policy in (cpu_policy.DEDICATED, cpu_policy.MIXED)

    @property
    def shared(self) -> bool:
        return self.cpu_policy in (None, cpu_policy.SHARED, cpu_policy.MIXED)


@dataclass(frozen=True)
class InstanceTopology:
    cells: tuple[InstanceCell, ...]
    emulator_threads_policy: str | None = None

    @property
    def emulator_threads_isolated(self) -> bool:
        return self.emulator_threads_policy == 'isolate'

    def describe(self) -> str:
        """For reasons: what was asked, without host data."""
        nodes = len(self.cells)
        parts = [f'{nodes} NUMA node{"" if nodes == 1 else "s"}']
        pinned = sum(len(c.pcpuset) for c in self.cells)
        if pinned:
            parts.append(f'{pinned} pinned vCPU{"" if pinned == 1 else "s"}')
        return ', '.join(parts)


def requested_topology(spec: RequestSpec) -> InstanceTopology | None:
    """The topology ``spec`` asks for, or None when it asks for none."""
    if spec.numa_topology:
        return topology_from_primitive(spec.numa_topology)
    image_props = spec.image.properties if spec.image is not None else ImageMetaProps()
    return topology_from_flavor(spec.flavor, image_props)


def topology_from_primitive(primitive: Mapping[str, Any]) -> InstanceTopology | None:
    """An ``InstanceNUMATopology`` primitive (the codec checked its field types)."""
    data = unwrap(primitive)
    cells = []
    for raw in data.get('cells') or ():
        cpuset = frozenset(raw.get('cpuset') or ())
        pcpuset = frozenset(raw.get('pcpuset') or ())
        policy = raw.get('cpu_policy')
        if policy == cpu_policy.DEDICATED and not pcpuset:
            # Before InstanceNUMACell 1.5 a pinned cell listed its vCPUs in cpuset.
            cpuset, pcpuset = frozenset(), cpuset
        cells.append(InstanceCell(
            id=int(raw.get('id') or 0), cpuset=cpuset, pcpuset=pcpuset,
            memory=int(raw.get('memory') or 0), pagesize=raw.get('pagesize'),
            cpu_policy=policy, cpu_thread_policy=raw.get('cpu_thread_policy')))
    if not cells:
        return None
    return InstanceTopology(tuple(cells), data.get('emulator_threads_policy'))


def topology_from_flavor(flavor: Flavor, image_props: Mapping[str, Any]
                         ) -> InstanceTopology | None:
    extra_specs = flavor.extra_specs or {}
    nodes = _nodes(extra_specs, image_props)
    pagesize = page_size(flavor, image_props)
    policies = cpu_policy.resolve_policies(flavor, image_props)
    pinning = policies.cpu_policy in (cpu_policy.DEDICATED, cpu_policy.MIXED)
    if not (nodes or pagesize or hardware.pmem_labels(flavor) or pinning):
        return None
    nodes = nodes or 1
    if policies.emulator_threads_policy == 'isolate' and not pinning:
        raise RequestTranslationError(
            'hw:emulator_threads_policy=isolate needs pinned CPUs (hw:cpu_policy dedicated '
            'or mixed)')
    cpu_lists = _per_node_cpus(flavor, image_props)
    mem_list = _per_node_memory(flavor, image_props)
    if cpu_lists is None and mem_list is None:
        cpu_lists, mem_list = _split_evenly(flavor, nodes)
    elif cpu_lists is None or mem_list is None:
        raise RequestTranslationError(
            'hw:numa_cpus.N and hw:numa_mem.N (or hw_numa_cpus and hw_numa_mem) must be set '
            'together')
    else:
        _check_manual(flavor, nodes, cpu_lists, mem_list)
    pinned = policies.pinned_vcpus
    cells = tuple(
        InstanceCell(id=node, cpuset=cpus - pinned, pcpuset=cpus & pinned, memory=memory,
                     pagesize=pagesize, cpu_policy=policies.cpu_policy,
                     cpu_thread_policy=policies.thread_policy if pinning else None)
        for node, (cpus, memory) in enumerate(zip(cpu_lists, mem_list, strict=True)))
    return InstanceTopology(cells, policies.emulator_threads_policy)


def page_size(flavor: Flavor, image_props: Mapping[str, Any]) -> int | None:
    """``hw:mem_page_size`` (the image may only narrow ``large`` or ``any``), in KiB or
    one of the symbolic values; None when neither asks."""
    flavor_value = (flavor.extra_specs or {}).get('hw:mem_page_size') or None
    image_value = image_props.get('hw_mem_page_size') or None
    if flavor_value is None:
        if image_value is not None:
            raise RequestTranslationError(
                f'the image asks for hw_mem_page_size={image_value!r} but the flavor sets no '
                f'hw:mem_page_size (it must be large or any for the image to choose)')
        return None
    size = _page_size_value(flavor_value, 'hw:mem_page_size')
    if image_value is None:
        return size
    if size not in (PAGES_LARGE, PAGES_ANY):
        raise RequestTranslationError(
            f'the image asks for hw_mem_page_size={image_value!r} but the flavor fixes '
            f'hw:mem_page_size={flavor_value!r}')
    return _page_size_value(str(image_value), 'hw_mem_page_size')


def _page_size_value(text: str, key: str) -> int:
    symbolic = _SYMBOLIC_PAGES.get(text.strip().lower())
    if symbolic is not None:
        return symbolic
    try:
        size = int(text)  # a bare number is KiB, as in Nova
    except ValueError:
        try:
            size = strutils.string_to_bytes(text, return_int=True) // 1024
        except ValueError:
            raise RequestTranslationError(
                f'{key}={text!r} is not small, large, any or a page size') from None
    if size <= 0:
        raise RequestTranslationError(f'{key}={text!r} is not a valid page size')
    return size


def _nodes(extra_specs: Mapping[str, str], image_props: Mapping[str, Any]) -> int | None:
    flavor_value = extra_specs.get('hw:numa_nodes')
    image_value = image_props.get('hw_numa_nodes')
    if flavor_value is not None and image_value is not None:
        raise RequestTranslationError(
            'the image sets hw_numa_nodes but the flavor already sets hw:numa_nodes')
    value = flavor_value if flavor_value is not None else image_value
    if value is None:
        return None
    try:
        nodes = int(value)
    except (TypeError, ValueError):
        raise RequestTranslationError(f'hw:numa_nodes={value!r} is not a number') from None
    if nodes < 1:
        raise RequestTranslationError(f'hw:numa_nodes={value!r} must be at least 1')
    return nodes


def _indexed(extra_specs: Mapping[str, str], prefix: str) -> dict[int, str]:
    found = {}
    for key, value in extra_specs.items():
        if key.startswith(prefix):
            index = key[len(prefix):]
            if not index.isdigit():
                raise RequestTranslationError(f'flavor extra spec {key!r}: not {prefix}N')
            found[int(index)] = value
    return found


def _per_node_cpus(flavor: Flavor, image_props: Mapping[str, Any]
                   ) -> list[frozenset[int]] | None:
    from_flavor = _indexed(flavor.extra_specs or {}, 'hw:numa_cpus.')
    from_image = image_props.get('hw_numa_cpus')
    if from_flavor and from_image:
        raise RequestTranslationError(
            'the image sets hw_numa_cpus but the flavor already sets hw:numa_cpus.N')
    if from_flavor:
        return [frozenset(cpu_policy.parse_cpu_spec(from_flavor[i]))
                if i in from_flavor else frozenset() for i in range(max(from_flavor) + 1)]
    if from_image:
        return [frozenset(cpu_policy.parse_cpu_spec(c)) if isinstance(c, str)
                else frozenset(int(x) for x in c) for c in _sequence(from_image, 'hw_numa_cpus')]
    return None


def _per_node_memory(flavor: Flavor, image_props: Mapping[str, Any]) -> list[int] | None:
    from_flavor = _indexed(flavor.extra_specs or {}, 'hw:numa_mem.')
    from_image = image_props.get('hw_numa_mem')
    if from_flavor and from_image:
        raise RequestTranslationError(
            'the image sets hw_numa_mem but the flavor already sets hw:numa_mem.N')
    try:
        if from_flavor:
            return [int(from_flavor[i]) if i in from_flavor else -1
                    for i in range(max(from_flavor) + 1)]
        if from_image:
            return [int(m) for m in _sequence(from_image, 'hw_numa_mem')]
    except (TypeError, ValueError):
        raise RequestTranslationError('hw:numa_mem.N values must be numbers (MB)') from None
    return None


def _sequence(value: Any, key: str) -> Sequence[Any]:
    if not isinstance(value, (list, tuple)):
        raise RequestTranslationError(f'image property {key} must be a list')
    return value


def _split_evenly(flavor: Flavor, nodes: int) -> tuple[list[frozenset[int]], list[int]]:
    if flavor.vcpus % nodes or flavor.memory_mb % nodes:
        raise RequestTranslationError(
            f'{flavor.vcpus} vCPUs and {flavor.memory_mb} MB cannot be split evenly over '
            f'{nodes} NUMA nodes; set hw:numa_cpus.N and hw:numa_mem.N')
    per_node = flavor.vcpus // nodes
    return ([frozenset(range(n * per_node, (n + 1) * per_node)) for n in range(nodes)],
            [flavor.memory_mb // nodes] * nodes)


def _check_manual(flavor: Flavor, nodes: int, cpu_lists: list[frozenset[int]],
                  mem_list: list[int]) -> None:
    if len(cpu_lists) != nodes or len(mem_list) != nodes:
        raise RequestTranslationError(
            f'hw:numa_cpus.N and hw:numa_mem.N must be set for each of the {nodes} NUMA nodes '
            f'(0 to {nodes - 1})')
    seen: set[int] = set()
    for node, cpus in enumerate(cpu_lists):
        if not cpus or cpus & seen:
            raise RequestTranslationError(
                f'hw:numa_cpus.{node} must name vCPUs that no other node names')
        seen |= cpus
    if seen != set(range(flavor.vcpus)):
        raise RequestTranslationError(
            f'hw:numa_cpus.N must assign each of the {flavor.vcpus} vCPUs (0 to '
            f'{flavor.vcpus - 1}) to one node')
    if any(m <= 0 for m in mem_list) or sum(mem_list) != flavor.memory_mb:
        raise RequestTranslationError(
            f'hw:numa_mem.N must be positive and add up to the flavor memory '
            f'({flavor.memory_mb} MB)')
