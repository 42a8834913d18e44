"""numalab: a QEMU/KVM lab for Linux NUMA-balancing and topology work.

The package follows the pipeline: topology -> placement -> vm -> guest ->
trace -> analysis -> report.  ``lab.cli.main`` is a thin front end over it.
"""

__version__ = "0.1.0"
