"""pytest configuration shared by every test module.

Under CI (``CI`` set, as .ci/run has it) hypothesis runs derandomized: the same examples every run, so a
landing is judged on the code, not on which random inputs came up. Locally it explores new ones each run
(what found PyYAML's IndexError on an empty ``!!float``); a failure it finds is kept in
``.hypothesis/`` and replayed first next time."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
