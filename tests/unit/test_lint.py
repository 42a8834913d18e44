"""The gates people use, in the suite: ruff's rules (with C901's complexity limit) and ruff format."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from common import REPO

RUFF = Path(sys.executable).with_name("ruff")
PATHS = ["lab", "tests", "docs/tools", "images"]


def test_ruff_check_is_clean() -> None:
    proc = subprocess.run([RUFF, "check", *PATHS], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_clean() -> None:
    proc = subprocess.run([RUFF, "format", "--check", *PATHS], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
