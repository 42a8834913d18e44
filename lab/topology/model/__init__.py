"""The model: a topology (topology: Topology, Node; cpu_grid, tiers), the spec files that say one (spec, ref), a
real machine (machine: Machine, its nodes, SLIT, CPU groups and caches; numactl: read from numactl -H output;
sysfs_machine: read from sysfs, with a trust), and the one reader of sysfs's CPU and node files (sysfs)."""
