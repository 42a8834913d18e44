"""Moved to :mod:`lab.kernel.git_tree` (``numalab ab`` reads a tree's range too); this name stays until the
command-line modules import it from there."""

from lab.kernel.git_tree import range_series

__all__ = ["range_series"]
