"""The HostCatalog: what Placement does not know about hosts (doc/design.md, D3)."""
from __future__ import annotations

from scheduler.catalog.catalog import HostCatalog
from scheduler.catalog.hosts_child import read_hosts_file
from scheduler.catalog.hosts_file import HostsFileContent, parse_hosts

__all__ = ['HostCatalog', 'HostsFileContent', 'parse_hosts', 'read_hosts_file']
