"""The object versions a select_destinations request was sent with.

Read from a ``spec_obj`` primitive that :func:`decode_request_spec` has already
accepted: the RequestSpec's own version and its image's ImageMetaProps, the two
that tell Nova releases apart (scheduler/objects/nova_releases.py). An object
the request does not carry, or carries at a version that does not parse, is
left out, so it counts for no release.
"""
from __future__ import annotations

from typing import Any

from scheduler.objects.codec.bounded import DATA_KEY, NAME_KEY, VERSION_KEY, VERSION_RE
from scheduler.objects.nova_releases import Version


def _version(value: Any, name: str) -> Version | None:
    if not isinstance(value, dict) or value.get(NAME_KEY) != name:
        return None
    text = value.get(VERSION_KEY)
    match = VERSION_RE.match(text) if isinstance(text, str) else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def _data(value: Any) -> dict:
    data = value.get(DATA_KEY) if isinstance(value, dict) else None
    return data if isinstance(data, dict) else {}


def sent_versions(spec_obj: Any) -> dict[str, Version]:
    """``{'RequestSpec': (1, 15), 'ImageMetaProps': (1, 37)}`` for a nova 29 boot."""
    found: dict[str, Version] = {}
    image = _data(spec_obj).get('image')
    for name, value in (('RequestSpec', spec_obj),
                        ('ImageMetaProps', _data(image).get('properties'))):
        version = _version(value, name)
        if version is not None:
            found[name] = version
    return found
