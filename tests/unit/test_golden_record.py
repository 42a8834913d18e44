"""Golden files for the run record, as tuxrun keeps them for whole jobs: what the guest is told to do
(its kernel command line and /plan/plan.sh) for a few representative ``numalab run`` command lines, and
the manifest's shape (key paths and value types, not values).

A change to any of them shows up as a diff to review. Regenerate with ``make golden`` (UPDATE_GOLDEN=1)
and commit the new files with the change that explains them.
"""

from __future__ import annotations

import json

import pytest
from common import REPO
from test_golden import GOLDEN, _check

from lab.analysis.record import RunRecord
from lab.cli.main import build_parser, run_options_from_args
from lab.record_files import MANIFEST
from lab.run.batch import settings_of
from lab.run.prepare import kernel_cmdline
from lab.workloads.registry import get_workload

# name -> numalab run's options. The TCG kernel arguments depend on the host (lab.vm.tcg.tcg_boot): left out.
RUNS = {
    "ring4-numa01": ["--topology", "ring-4", "--workload", "numa01", "--duration", "20"],
    "ring4-idle-no-trace": ["--topology", "ring-4", "--workload", "idle", "--duration", "1", "--no-trace"],
    "tiered-2s-cxl-tiering": ["--topology", "tiered-2s-cxl", "--workload", "tiering", "--duration", "20",
                              "--numa-balancing", "tiering"],
}  # fmt: skip
# A checked-in record with the current manifest layout (tests/data/runs/README.md); re-record it when the
# layout changes on purpose, then regenerate.
SHAPE_RECORD = REPO / "tests" / "data" / "runs" / "ring2-idle"


def _settings(options: list[str]):
    opts = run_options_from_args(build_parser().parse_args(["run", *options]))
    topo = opts.topology.load()
    return settings_of(opts, get_workload(opts.workload), topo), topo


@pytest.mark.parametrize("name", RUNS)
def test_guest_plan_and_kernel_cmdline_golden(name: str) -> None:
    settings, topo = _settings(RUNS[name])
    _check(GOLDEN / "guest" / f"{name}.cmdline", kernel_cmdline(settings, topo) + "\n")
    _check(GOLDEN / "guest" / f"{name}.plan.sh", settings.to_shell())


def test_the_access_matrix_changes_neither_settings_nor_cmdline() -> None:
    """--access-matrix is QEMU's (a TCG plugin on the host): the guest is told the same as without it."""
    plain, topo = _settings(RUNS["ring4-numa01"])
    counted, _ = _settings([*RUNS["ring4-numa01"], "--access-matrix", "--accel", "tcg"])
    assert counted == plain and kernel_cmdline(counted, topo) == kernel_cmdline(plain, topo)
    # (and settings that do change show up: the comparison can fail)
    assert _settings([*RUNS["ring4-numa01"], "--no-trace"])[0] != plain


def _shape(value, path: str, out: dict[str, set[str]]) -> None:
    """Every key path of ``value`` with the JSON types found there. Lists are ``path[]``; keys that are
    numbers (node, CPU ids) are ``<n>``, so a bigger machine has the same shape."""
    kind = {dict: "object", list: "array", str: "string", bool: "bool", int: "int", float: "float"}
    out.setdefault(path, set()).add("null" if value is None else kind[type(value)])
    if isinstance(value, dict):
        for k, v in value.items():
            key = "<n>" if k.lstrip("-").isdigit() else k
            _shape(v, f"{path}.{key}" if path else key, out)
    elif isinstance(value, list):
        for v in value:
            _shape(v, f"{path}[]", out)


def shape_text(manifest: dict) -> str:
    out: dict[str, set[str]] = {}
    _shape(manifest, "", out)
    return "".join(f"{p or '.'}: {'|'.join(sorted(t))}\n" for p, t in sorted(out.items()))


def test_manifest_shape_golden() -> None:
    manifest = json.loads((SHAPE_RECORD / MANIFEST).read_text())
    _check(GOLDEN / "record" / "manifest.shape", shape_text(manifest))
    RunRecord.load(SHAPE_RECORD)  # and the analyses take it


def test_the_shape_sees_a_changed_layout() -> None:
    """The golden comparison can fail: a value of another type, a new key, a key gone all change the text."""
    manifest = json.loads((SHAPE_RECORD / MANIFEST).read_text())
    text = shape_text(manifest)
    assert "timings.boot_s: float\n" in text and "guest_topology.sched_domains.<n>[].cpus: string\n" in text
    assert "timings.boot_s: string\n" in shape_text(manifest | {"timings": manifest["timings"] | {"boot_s": "4.2"}})
    assert "extra[]: int\n" in shape_text(manifest | {"extra": [1]})
    assert "firmware" not in shape_text({k: v for k, v in manifest.items() if k != "firmware"})
