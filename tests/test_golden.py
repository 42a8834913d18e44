"""Golden files: the QEMU argv and libvirt domain XML of every preset.

A change to either emitter shows up here as a diff to review. Regenerate
with ``make golden`` (UPDATE_GOLDEN=1) and commit the new files with the
change that explains them.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from common import BOOT, HOST

from lab.placement.plan import plan_placement
from lab.topology.spec import load_topology, preset_names
from lab.vm.libvirt_xml import domain_xml
from lab.vm.qemu_argv import qemu_argv

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def _argv_text(argv: list[str]) -> str:
    """One option per line with its value, shell-quoted: readable diffs."""
    lines = [shlex.quote(argv[0])]
    for arg in argv[1:]:
        if arg.startswith("-"):
            lines.append(arg)
        else:
            lines[-1] += " " + shlex.quote(arg)
    return "\n".join(lines) + "\n"


def _check(path: Path, text: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run 'make golden'"
    assert text == path.read_text(), f"{path} differs from the emitter's output: review, then 'make golden'"


@pytest.mark.parametrize("preset", preset_names())
def test_qemu_argv_golden(preset: str) -> None:
    topo = load_topology(preset)
    argv = qemu_argv(topo, plan_placement(topo, HOST), BOOT)
    _check(GOLDEN / "qemu" / f"{preset}.argv", _argv_text(argv))


@pytest.mark.parametrize("preset", preset_names())
def test_libvirt_xml_golden(preset: str) -> None:
    topo = load_topology(preset)
    _check(GOLDEN / "libvirt" / f"{preset}.xml", domain_xml(topo, plan_placement(topo, HOST), BOOT, "qemu"))


def test_every_golden_file_has_a_preset() -> None:
    names = set(preset_names())
    stale = [p for p in GOLDEN.glob("*/*") if p.stem not in names]
    assert not stale, f"golden files without a preset: {stale}"
