"""misplaced's placement of the task and its memory (lab/workloads/misplaced/scale.py)."""

from __future__ import annotations

from lab.workloads.misplaced.scale import scale

__all__ = ["scale"]
