"""Numbers for people: the one place a stored (unrounded) figure is rounded.

Metrics are kept at full precision in manifests and report.json; they are
rounded once, here, when shown.
"""

from __future__ import annotations

import math


def percent(v: float | None, digits: int = 1) -> str:
    """'99.9' for 99.946: rounded once, and 100 or 0 only when exactly so (99.97 is '99.9', not '100.0')."""
    if v is None:
        return "-"
    scale = 10**digits
    text = f"{v:.{digits}f}"
    if float(text) == 100 and v < 100:
        text = f"{math.floor(v * scale) / scale:.{digits}f}"
    elif float(text) == 0 and v > 0:
        text = f"{math.ceil(v * scale) / scale:.{digits}f}"
    return text
