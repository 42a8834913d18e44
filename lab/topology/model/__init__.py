"""The model: a topology (topology: Topology, Node; cpu_grid, tiers), the spec files that say one (spec, ref), a
real machine (machine: Machine, its nodes, SLIT and CPU groups; numactl: read from numactl -H output), and the one
reader of sysfs's CPU and node files (sysfs)."""
