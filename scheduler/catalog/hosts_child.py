"""Reading the hosts file: a large one in a short-lived child process.

:func:`read_hosts_file` is the entry point: a file up to :data:`CHILD_PARSE_BYTES`
is parsed in this process (:func:`scheduler.catalog.hosts_file.read_hosts_in_process`),
a larger one by a child.

Parsing builds the whole document in memory (about 0.3 GB for 50,000 hosts)
and frees it again, but a long-running worker keeps the fragmented heap: its
resident size stayed at 270 MB for a catalog whose live objects take ~25 MB.
So :func:`read_in_child` runs ``python -m scheduler.catalog.hosts_child`` to
parse and validate the file, and receives only the result.

How the result travels matters as much (doc/performance.md). Unpickling keeps
every object it builds in its memo until the load ends: records pickled as
objects (each with its state list, each timestamp with its argument tuple)
left ~35 MB of garbage spread between the records the worker keeps, and the
whole pickle read into one ``bytes`` was another 12 MB. So the child sends the
records as columns, one list of plain values per field, and the worker reads
them straight from the pipe and builds each record from its row: the only
transient objects are the columns themselves, a few large blocks that go back
to the system as a whole. Values the child shares between hosts (one
``cpu_info`` per CPU model, one string per node name in the records and the
aggregates) stay shared through the pickle's memo.

What the child writes: ``(False, message)`` for an error in the file, else
``(True, cells, aggregates, field names, columns)``.
"""
from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import tempfile
from typing import IO

from scheduler.catalog.hosts_file import HostsFileContent, interned, read_hosts_in_process
from scheduler.exceptions import CatalogError
from scheduler.host_state import HostRecord

# The constructor's fields, in order: a record travels as its values.
_FIELDS = tuple(f.name for f in dataclasses.fields(HostRecord))
_NAMES = ('nodename', 'service_host', 'provider_uuid')
#: What :func:`read_in_child` runs, as ``python -m``.
_CHILD_MODULE = 'scheduler.catalog.hosts_child'
#: How long a child that stopped sending gets to exit before it is killed.
_EXIT_TIMEOUT = 10.0


#: Hosts files larger than this are parsed in a short-lived child process, so
#: that the worker only ever allocates what it keeps (doc/performance.md).
CHILD_PARSE_BYTES = 4 * 1024 * 1024


def read_hosts_file(path: str, *, default_cell_uuid: str) -> HostsFileContent:
    """Read and validate ``path``; :class:`CatalogError` naming the file on any problem."""
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise CatalogError(f'{path}: cannot read the hosts file: {e.strerror or e}') from e
    if size > CHILD_PARSE_BYTES:
        return read_in_child(path, default_cell_uuid)
    return read_hosts_in_process(path, default_cell_uuid=default_cell_uuid)


def read_in_child(path: str, default_cell_uuid: str) -> HostsFileContent:
    """What :func:`read_hosts_file` returns, parsed by
    a child process; :class:`CatalogError` for a problem in the file (the child's
    message, naming the file and the entry) or with the child itself."""
    # stderr goes to a file: nothing reads it while the records stream in, and
    # a full pipe would block the child.
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(
            [sys.executable, '-m', _CHILD_MODULE, path, default_cell_uuid],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors)
        assert child.stdout is not None  # stdout=PIPE: Popen opened it
        try:
            with child.stdout:  # closed on the way out: a child still writing stops
                # Our own child's output, never the file's.
                answer = pickle.load(child.stdout)
        except Exception as e:  # the child died, or sent something else
            _reap(child)
            raise _child_failed(path, child.returncode, errors, e) from None
        _reap(child)
    if not answer[0]:
        raise CatalogError(answer[1])
    _, cells, aggregates, fields, columns = answer
    if tuple(fields) != _FIELDS:
        # Only when the code on disk changed under a running worker.
        raise CatalogError(f'{path}: the process reading the hosts file runs other code '
                           f'(host fields {", ".join(fields)}); restart the service')
    return HostsFileContent(cells=cells, aggregates=aggregates, hosts=_records(columns))


def _records(columns: tuple[list, ...]) -> tuple[HostRecord, ...]:
    # Pickle shares strings, dicts and timestamps, never ints: without this,
    # every host would get its own copy of its hypervisor version.
    ints: dict[int, int] = {}
    for column in columns:
        for i, value in enumerate(column):
            if type(value) is int:
                column[i] = ints.setdefault(value, value)
    # The names the other sources intern too (hosts_file.interned), as the child did.
    for name in _NAMES:
        column = columns[_FIELDS.index(name)]
        for i, value in enumerate(column):
            column[i] = interned(value)
    return tuple(HostRecord(*row) for row in zip(*columns, strict=True))


def _reap(child: subprocess.Popen) -> None:
    try:
        child.wait(_EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _child_failed(path: str, returncode: int | None, errors: IO[bytes],
                  error: Exception) -> CatalogError:
    errors.seek(0)
    tail = errors.read().decode(errors='replace').strip().splitlines()[-1:]
    return CatalogError(f'{path}: the process reading the hosts file failed '
                        f'(exit status {returncode}): {" ".join(tail) or error}')


def send(content: HostsFileContent, out: IO[bytes]) -> None:
    """Write ``content`` the way :func:`read_in_child` reads it."""
    columns = tuple([getattr(r, name) for r in content.hosts] for name in _FIELDS)
    pickle.dump((True, content.cells, content.aggregates, _FIELDS, columns), out,
                protocol=pickle.HIGHEST_PROTOCOL)


def _child_main(argv: list[str]) -> int:
    """``python -m scheduler.catalog.hosts_child PATH CELL``, run by :func:`read_in_child`."""
    path, default_cell_uuid = argv
    out = sys.stdout.buffer
    try:
        content = read_hosts_in_process(path, default_cell_uuid=default_cell_uuid)
    except CatalogError as e:
        pickle.dump((False, str(e)), out, protocol=pickle.HIGHEST_PROTOCOL)
        return 0
    send(content, out)
    return 0


if __name__ == '__main__':
    # Through the package's module, so that the classes pickle under their real
    # names rather than __main__'s.
    from scheduler.catalog.hosts_child import _child_main as child_main
    sys.exit(child_main(sys.argv[1:]))
