"""``tox -e bench``: the performance benchmark (doc/performance.md)."""
