"""Which object versions a calling nova-conductor can read, told from its own request.

nova-scheduler serves exactly one release: its replies are at that release's
object versions, and an older conductor that cannot read one asks for a
backport the scheduler never answers. This service serves several releases at
once (conductors of two releases call it during a Nova upgrade), so each reply
is written at versions its caller knows.

A caller never names its release, but the objects it sends do: every Nova
release sends RequestSpec and ImageMetaProps at its own versions, and
ImageMetaProps gains a minor version in most releases. :data:`RELEASES` records
what each supported release sends and reads (taken from the released wheels,
tests/interop runs them); :func:`caller_floor` finds the oldest release that
could have sent a request, and :func:`reply_versions` the versions to answer it
with, optionally capped by ``[upgrade_levels] reply_objects``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Version = tuple[int, int]


def parse_version(text: str) -> Version:
    major, minor = text.split('.')
    return int(major), int(minor)


def format_version(version: Version) -> str:
    return f'{version[0]}.{version[1]}'


@dataclass(frozen=True)
class NovaRelease:
    series: str                     # '2024.1'
    nova: int                       # the nova package's major version
    #: the versions of the objects its conductor sends in select_destinations
    sends: Mapping[str, Version]
    #: the newest versions of the reply objects it can deserialise
    reads: Mapping[str, Version]


_READS_SINCE_QUEENS = {'Selection': (1, 1), 'SchedulerLimits': (1, 0)}


def _release(series: str, nova: int, image_meta_props: Version) -> NovaRelease:
    return NovaRelease(series, nova, {'RequestSpec': (1, 15), 'ImageMetaProps': image_meta_props},
                       _READS_SINCE_QUEENS)


#: Oldest first. A row is added when a Nova release is proven in tests/interop.
RELEASES: tuple[NovaRelease, ...] = (
    _release('2024.1', 29, (1, 37)),
    _release('2024.2', 30, (1, 38)),
    _release('2025.1', 31, (1, 39)),
    _release('2025.2', 32, (1, 42)),
    _release('2026.1', 33, (1, 42)),
    _release('2026.2', 34, (1, 44)),
)

#: What any caller of select_destinations 4.5 reads: return_objects came with
#: Selection 1.0 and SchedulerLimits 1.0. A request older than every row gets these.
OLDEST_READS: Mapping[str, Version] = {'Selection': (1, 0), 'SchedulerLimits': (1, 0)}


def caller_floor(sent: Mapping[str, Version],
                 releases: Sequence[NovaRelease] = RELEASES) -> NovaRelease | None:
    """The oldest release that could have sent objects at ``sent``'s versions
    (object name -> version; objects the request lacks are left out), or None
    when the request is older than every release in ``releases``.

    Walking oldest first, a release replaces the floor only when the request
    carries something the floor could not have sent: two releases that send the
    same versions (2025.2 and 2026.1) are told apart by nothing, so the older
    one is assumed.
    """
    floor: NovaRelease | None = None
    for release in releases:
        shared = [name for name in sent if name in release.sends]
        if not shared or any(release.sends[name] > sent[name] for name in shared):
            continue
        if floor is None or any(release.sends[name] > floor.sends.get(name, (0, 0))
                                for name in shared):
            floor = release
    return floor


def release_named(series: str, releases: Sequence[NovaRelease] = RELEASES) -> NovaRelease:
    for release in releases:
        if release.series == series:
            return release
    raise ValueError(f'unknown Nova release {series!r}')


def reply_versions(sent: Mapping[str, Version], cap: str | None = None,
                   releases: Sequence[NovaRelease] = RELEASES) -> dict[str, Version]:
    """The version of each reply object for a request that sent ``sent``: what its
    caller's release reads, and never more than release ``cap`` reads."""
    floor = caller_floor(sent, releases)
    reads = dict(OLDEST_READS if floor is None else floor.reads)
    if cap is not None:
        for name, version in release_named(cap, releases).reads.items():
            reads[name] = min(reads.get(name, version), version)
    return reads
