"""Differential test: this service's filters and weighers against Nova 34's own code.

``tox -e nova-differential`` (``python -m tests.nova_differential``) installs
``nova==34.*`` and, for seeded random clouds and requests, runs every filter
and weigher on both sides and compares what each decides:

* :mod:`.cloud` draws a cloud (hosts with NUMA cells, SMT siblings, page pools,
  PCI pools, guests already running, services, aggregates with metadata,
  metrics) and a request (flavor extra specs, image properties, hints, server
  group, several instances) as plain data, without Nova.
* :mod:`.compute` turns each host into what nova-compute writes: its
  ``compute_nodes`` and ``services`` rows, the usage of the guests already
  running computed by Nova's own ``numa_fit_instance_to_host`` and
  ``numa_usage_from_instance_numa`` (the resource tracker's arithmetic), and
  the Placement inventories and usages it reports. The request becomes what
  nova-api builds (``RequestSpec.from_components`` with
  ``numa_get_constraints`` and ``get_pci_requests_from_flavor``; flavors Nova's
  extra-spec validators refuse are drawn again), serialised as the conductor
  sends it.
* :mod:`.nova_side` reads those rows through Nova's input path
  (``ComputeNode._from_db_object``, ``HostState.update``) and runs Nova's
  filters and weighers; :mod:`.our_side` reads them through this service's
  (the cell-database row parser, the hosts file, the casts, Placement's JSON
  answer, the RPC codec) and runs ours.
* :mod:`.compare` compares each filter's verdict per host, each weigher's
  weight per host, and, for a request of several instances, the NUMA cells and
  PCI pools each side leaves after consuming the first instance;
  :mod:`.known` holds the rules that recognise a documented difference
  (doc/nova-compatibility.md) and nothing else.
"""
