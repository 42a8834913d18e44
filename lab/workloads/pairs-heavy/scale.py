"""pairs-heavy's number of pairs: pairs' own (lab/workloads/pairs/scale.py)."""

from __future__ import annotations

from lab.workloads.pairs.scale import scale

__all__ = ["scale"]
