"""Golden files of every built-in workload (``tests/golden/workloads/NAME.txt``): what numalab makes of it,
whatever file or folder it is defined in. Its description, the programs and tools the guest image carries
for it, its metrics with their direction, mean and per-vCPU-second twin, its command on every preset for a
few durations (rounding included), and what its output reader gives for the same canned outputs (each
tool's sample output, perf bench's summary, NUMALAB_RESULT lines good and bad, nothing at all).

A change to a workload shows up as a diff to review. Regenerate with ``make golden`` (UPDATE_GOLDEN=1) and
commit the new files with the change that explains them; a new built-in needs its file made the same way.
"""

from __future__ import annotations

import json

import pytest
from common import REPO
from test_golden import GOLDEN, _check

from lab.errors import LabError
from lab.topology.model.spec import load_topology, preset_names
from lab.workloads.registry import WORKLOADS
from lab.workloads.workload_output import parse_output

DIR = GOLDEN / "workloads"
DURATIONS = (0.4, 2.5, 5.4, 20)  # below a second, a half to round, a fraction, the usual
TOOL_OUTPUT = REPO / "tests" / "data" / "tool_output"
PERF_SUMMARY = (
    ' # Running numa01, "perf bench numa mem -p 2 -t 1 -P 100"\n'
    " threads initialized in 0.1 seconds ( 1.2s converged)\n"
    " numa01,  2.000, secs, runtime-max/thread\n"
    " numa01,  0.700, secs, runtime-min/thread\n"
    " numa01,  1.500, GB/sec, total-speed\n"
    " numa01,  x.5, GB/sec, thread-speed\n"
)
RESULT = {"elapsed_s": 1.5, "gbps": 2.5, "bytes_touched": 3.75e9, "round_trips": 40, "round_trips_per_s": 26.7,
          "balance_pct": 91.5, "insns": 1e9, "insn_per_s": 6.7e8, "remote_ratio": 1.4}  # fmt: skip
OUTPUTS = {
    "nothing": "",
    "NUMALAB_RESULT (every built-in figure)": f"noise\nNUMALAB_RESULT {json.dumps(RESULT)}\n",
    "NUMALAB_RESULT (elapsed_s and gbps)": 'NUMALAB_RESULT {"elapsed_s": 2, "gbps": 1}\n',
    "NUMALAB_RESULT (a list)": "NUMALAB_RESULT [1, 2]\n",
    "NUMALAB_RESULT (not JSON)": "NUMALAB_RESULT {\n",
    "NUMALAB_RESULT (a string figure)": 'NUMALAB_RESULT {"elapsed_s": "2", "gbps": 1}\n',
    "perf bench numa summary": PERF_SUMMARY,
    "hackbench": "Running in process mode with 2 groups\nTime: 0.50\nTime: 1.5\nTime: x\n",
    **{f"tool_output/{p.name}": p.read_text() for p in sorted(TOOL_OUTPUT.glob("*.txt"))},
}


def _metrics(w) -> list[str]:
    lines = []
    for m in w.metrics:
        twin = f"; twin {m.twin_key} = {m.twin.work} x {m.twin.scale:g} / vCPU-s ({m.twin.label})" if m.twin else ""
        lines.append(f"  {m.name}: {m.label} [{m.unit}] {m.better} is better, {m.mean}{twin}")
    return lines


def _command(w, preset: str, duration: float) -> str:
    try:
        return w.command(load_topology(preset), duration)
    except LabError as err:
        return f"error: {err}"


def golden_text(name: str) -> str:
    w = WORKLOADS[name]
    lines = [
        f"# numalab built-in workload {name} (tests/unit/test_golden_workloads.py; make golden)",
        f"description: {w.description}",
        f"programs: {' '.join(w.programs) or '-'}",
        f"tools: {' '.join(w.tools) or '-'}",
        "metrics:",
        *_metrics(w),
        "commands:",
        *(f"  {p} {d:g}s: {_command(w, p, d)}" for p in preset_names() for d in DURATIONS),
        "reads:",
        *(f"  {what}: {json.dumps(parse_output(w, text), sort_keys=True)}" for what, text in OUTPUTS.items()),
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_golden(name: str) -> None:
    _check(DIR / f"{name}.txt", golden_text(name))


def test_every_workload_golden_file_has_a_workload() -> None:
    assert sorted(p.stem for p in DIR.glob("*.txt")) == sorted(WORKLOADS)
