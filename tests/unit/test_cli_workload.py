"""``numalab workload list|show``: the registry as a user sees it (no VM): every built-in with the metrics its
entry declares, one workload's command on a topology, and a workload file checked without a boot."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from common import assert_one_line_error, numalab

from lab.analysis.metrics import METRIC_KEYS
from lab.workloads.registry import WORKLOADS


def test_list_gives_every_builtin_with_the_metrics_compare_knows() -> None:
    proc = numalab("workload", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == list(WORKLOADS)
    for r in rows:
        assert r["metrics"], r["name"]
        for m in r["metrics"]:
            known = METRIC_KEYS[m["metric"]]
            assert (known.better, known.mean, known.unit) == (m["better"], m["mean"], m["unit"]), m
    pairs = next(r for r in rows if r["name"] == "pairs")
    twin = next(m for m in pairs["metrics"] if m["metric"] == "workload.round_trips_per_vcpu_s")
    assert twin["twin_of"] == "workload.round_trips_per_s"
    text = numalab("workload", "list")
    assert text.returncode == 0 and all(name in text.stdout for name in WORKLOADS)
    assert "-cyclictest_max_us" in text.stdout and "+sysbench_mib_per_s" in text.stdout


def test_show_scales_the_command_to_the_topology() -> None:
    proc = numalab("workload", "show", "stress-ng-vm", "--topology", "ring-4", "--duration", "7", "--json")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    # ring-4: 4 nodes x 2 CPUs, one instance per CPU, for the duration
    assert rec["topology"] == "ring-4" and rec["tools"] == ["stress-ng"]
    assert rec["command"].startswith("stress-ng --vm 8 --vm-bytes ") and " -t 7s " in rec["command"]


def test_show_checks_a_workload_file_without_booting(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text('#!/bin/sh\necho "R {\\"ops\\": 1, \\"lat_us\\": 2}"\n')
    (tmp_path / "w.yaml").write_text(
        "name: mine\ncommand: ./run.sh {cpus}\nfiles: [run.sh]\nresults: {json-line: 'R '}\n"
        "metrics:\n  - {name: ops, unit: 1/s, higher_is_better: true, mean: hmean}\n"
        "  - {name: lat_us, unit: us, higher_is_better: false}\n"
    )
    proc = numalab("workload", "show", str(tmp_path / "w.yaml"), "--topology", "ring-2", "--json")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["kind"] == "user" and rec["files"] == ["run.sh"] and rec["source"] == str(tmp_path / "w.yaml")
    assert rec["command"].endswith("./run.sh 4")  # ring-2: 4 CPUs
    assert [(m["metric"], m["better"], m["mean"]) for m in rec["metrics"]] == [
        ("workload.ops", "higher", "hmean"),
        ("workload.ops_per_vcpu_s", "higher", "hmean"),  # a rate (1/s): its per-vCPU-second twin after it
        ("workload.lat_us", "lower", "amean"),
    ]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("show", "no-such-workload"), "--workload no-such-workload: unknown workload"),
        (("show", "numa01", "--duration", "0"), "--duration: must be 0.1 to 86400 seconds"),
        (("show", "numa01", "--topology", "no-such-topology"), "no-such-topology"),
        (("show", "/nonexistent/w.yaml"), "/nonexistent/w.yaml"),
        (("list", "--bogus"), "unrecognized arguments: --bogus"),
    ],
)
def test_bad_input_is_one_line(args: tuple[str, ...], needle: str) -> None:
    assert_one_line_error(numalab("workload", *args), needle)


def test_show_escapes_the_control_characters_of_a_workload_file(tmp_path: Path) -> None:
    """What a user's workload file says (its description, command, file names, metric units) reaches the terminal
    with its control characters escaped: an ESC or a BEL there could retitle the window or clear the screen."""
    script = "run\x1b[2J.sh"
    (tmp_path / script).write_text('#!/bin/sh\necho "R {\\"ops\\": 1}"\n')
    (tmp_path / "w.yaml").write_text(
        'name: mine\ndescription: "a \\x1b]0;pwned\\x07 title\\rand\\x9b2J"\ncommand: "./run\\x1b[2J.sh {cpus}"\n'
        'files: ["run\\x1b[2J.sh"]\nresults: {json-line: "R "}\n'
        'metrics:\n  - {name: ops, unit: "\\x1b[31m1/s", higher_is_better: true}\n'
    )
    proc = numalab("workload", "show", str(tmp_path / "w.yaml"), "--topology", "ring-2")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", out), repr(out)
    assert "mine: a \\x1b]0;pwned\\x07 title\\x0dand\\x9b2J" in out
    assert "./run\\x1b[2J.sh 4" in out  # the command
    assert "carries:  run\\x1b[2J.sh" in out  # the file it carries
    assert "\\x1b[31m1/s" in out  # the metric's unit
    # --json keeps the text as it is: JSON escapes it
    rec = json.loads(numalab("workload", "show", str(tmp_path / "w.yaml"), "--topology", "ring-2", "--json").stdout)
    assert rec["description"] == "a \x1b]0;pwned\x07 title\rand\x9b2J" and rec["files"] == [script]
