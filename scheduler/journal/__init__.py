"""A write-ahead journal that outlives the process writing it.

A claim a worker makes in Placement belongs to the request that made it until
the request's reply is handed to the transport; if the worker (or the whole
service, or the machine) dies before that, nobody but this service knows the
claim must be given back. :mod:`scheduler.journal.log` keeps such records on
disk, one file per worker; :mod:`scheduler.journal.requests` ties them to the
request being served. What a record holds, and how it is undone, is the
request flow's business (:mod:`scheduler.pipeline.recovery`): this package
stores JSON objects and knows nothing of claims.
"""
