"""The model: a topology (topology: Topology, Node; cpu_grid, tiers), the spec files that say one (spec, ref), a
real machine's nodes (numactl: Machine), and the one reader of sysfs's CPU and node files (sysfs)."""
