"""Real machines made specs: numactl -H and sysfs (topo_import, ``numalab topo import``), hwloc (hwloc), a
machine's CPU grid (machine_grid) and the spec written from it (imported_spec)."""
