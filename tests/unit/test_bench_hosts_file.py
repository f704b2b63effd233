"""A benchmark's hosts file describes the cloud it seeded, nested or not.

The service learns each host's name, zone and service from the hosts file; a file
that named other providers than the seeded roots left every host unknown, and the
service then asked Placement for every provider's name before each request (the
nested workload's first measurements, 2026-11-27).
"""
from __future__ import annotations

import json
import pathlib

import pytest

from bench import deploy
from bench.synthetic import make_cloud


@pytest.mark.parametrize('nested', [False, True])
@pytest.mark.parametrize('fill_mean', [None, 0.8])
def test_the_hosts_file_names_the_seeded_roots(tmp_path: pathlib.Path, nested, fill_mean):
    cloud = make_cloud(300, fill_mean=fill_mean, nested=nested)
    dep = deploy.Deployment(placement=None, cloud=cloud, workdir=tmp_path,  # type: ignore[arg-type]
                            seed_seconds=0.0, usage_consumers=0, fill_mean=fill_mean,
                            nested=nested)
    document = json.loads(dep.hosts_file().read_text())

    assert [h['provider_uuid'] for h in document['hosts']] == [h.root.uuid for h in cloud.hosts]
