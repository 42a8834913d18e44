"""pytest configuration shared by every test module.

Under CI (``CI`` set, as .ci/run has it) hypothesis runs derandomized: the same examples every run, so a
landing is judged on the code, not on which random inputs came up. Locally it explores new ones each run
(what found PyYAML's IndexError on an empty ``!!float``); a failure it finds is kept in
``.hypothesis/`` and replayed first next time.

The tiers' folders (unit, vm, kernel, libvirt) are on ``sys.path`` from the start, so a test module may
import another tier's helpers whichever folder pytest collects first (or alone)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import settings

for _tier in ("unit", "vm", "kernel", "libvirt"):
    sys.path.insert(0, str(Path(__file__).parent / _tier))

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
