"""numalab matrix: spec validation, sharding, and real runs (ci-smoke, resume after SIGKILL, gates, merge)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from common import REPO, assert_one_line_error, numalab

from lab.errors import LabError
from lab.matrix.definition import load_matrix, parse_matrix, parse_shard
from lab.matrix.schedule import run_dir


def write(tmp_path: Path, text: str, name: str = "m.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# --- spec, no VMs --------------------------------------------------------------


def test_examples_are_valid() -> None:
    for name in ("ci-smoke", "ab-small-imbalance"):
        spec = load_matrix(name)
        assert spec.runs
    smoke = load_matrix("ci-smoke")
    assert {r.topology.name for r in smoke.runs} == {"ring-2", "ring-4", "ring-8", "mesh-2", "mesh-4", "mesh-8"}


def test_ids_are_stable_and_kernels_interleave() -> None:
    spec = load_matrix("ab-small-imbalance")
    again = load_matrix("ab-small-imbalance")
    assert [r.id for r in spec.runs] == [r.id for r in again.runs]
    assert spec.fingerprint() == again.fingerprint()
    assert len({r.id for r in spec.runs}) == len(spec.runs)
    kernels = [r.kernel.name for r in spec.runs[:4]]
    assert kernels == ["baseline", "seed003-revert", "baseline", "seed003-revert"]


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_shards_are_disjoint_and_cover(n: int) -> None:
    spec = load_matrix("ab-small-imbalance")
    shards = [spec.shard(i, n) for i in range(1, n + 1)]
    ids = [r.id for s in shards for r in s]
    assert sorted(ids) == sorted(r.id for r in spec.runs)
    assert len(ids) == len(set(ids))
    # Every shard holds whole A/B sets: each cell has both kernels.
    for s in shards:
        cells = {}
        for r in s:
            cells.setdefault((r.topology.label, r.workload.name, r.repeat), set()).add(r.kernel.name)
        assert all(v == {"baseline", "seed003-revert"} for v in cells.values())


def test_include_exclude() -> None:
    spec = parse_matrix(
        {
            "topologies": ["ring-2", "ring-4"],
            "workloads": ["numa01", "idle"],
            "include": [{"topology": "ring-4"}],
            "exclude": [{"workload": "idle"}],
        },
        "t",
        "t",
    )
    assert [r.id for r in spec.runs] == ["ring-4.stock.numa01.default.r1"]


@pytest.mark.parametrize(
    "text,needle",
    [
        ("topologies: [nosuch]\nworkloads: [numa01]\n", "topologies[0]"),
        ("topologies: [ring-2]\nworkloads: [nosuch]\n", "workloads[0]: unknown workload"),
        ("topologies: []\nworkloads: [numa01]\n", "topologies: empty"),
        ("topologies: [ring-2]\nworkloads: []\n", "workloads: empty"),
        (
            "topologies: [ring-2]\nworkloads: [numa01]\ngates: [{metric: nope, worse_than_baseline_pct: 5}]\n",
            "gates[0].metric: unknown metric",
        ),
        ("topologies: [ring-2]\nworkloads: [numa01]\nrepeats: 0\n", "repeats"),
        ("topologies: [ring-2]\nworkloads: [numa01]\nbaseline: {kernel: other}\n", "baseline.kernel"),
        ("topologies: [ring-2]\nworkloads: [numa01]\nsettings: [{name: x, knobs: {nope: 1}}]\n", "knobs.nope"),
        ("topologies: [ring-2]\nworkloads: [numa01]\nhosts: [{uri: nope}]\n", "hosts[0].uri"),
        (
            "topologies: [ring-2]\nworkloads: [numa01]\nhosts: [{uri: 'qemu:///system', capacity: 0}]\n",
            "hosts[0].capacity",
        ),
    ],
)
def test_bad_specs_are_one_line_errors(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(LabError, match=None) as err:
        load_matrix(str(path))
    assert needle in str(err.value) and str(path) in str(err.value)
    proc = numalab("matrix", "check", str(path))
    assert_one_line_error(proc, needle)


def test_bad_shard_spec() -> None:
    for bad in ("0/3", "4/3", "x", "1/0"):
        with pytest.raises(LabError):
            parse_shard(bad)
    assert_one_line_error(numalab("matrix", "list", "ci-smoke", "--shard", "4/3"), "--shard 4/3")


def test_github_workflow_uses_the_shards(tmp_path: Path) -> None:
    wf = tmp_path / "wf.yml"
    proc = numalab("matrix", "ci", "ci-smoke", "--github", str(wf), "--shards", "3")
    assert proc.returncode == 0, proc.stderr
    text = wf.read_text()
    assert "shard: [1, 2, 3]" in text and '--shard "$SHARD/3"' in text and "matrix merge" in text


# --- outputs: times carried through resume and merge, and an empty shard (real records, no VMs) ----------

RECORDED = """
name: recorded
topologies: [ring-4]
workloads: [{name: numa01, duration: 10}]
settings: [{name: on, numa_balancing: on}, {name: off, numa_balancing: off}]
repeats: 3
baseline: {setting: on}
"""


def _shard_dirs(tmp_path: Path) -> tuple[Path, object, list[Path], dict[str, tuple[float, float]]]:
    """Two shard directories as `matrix run --shard i/2` leaves them: tests/data/runs' real ring-4 numa01 records
    (on/off, r1..r3) as the runs, and the summaries written with the times the runner measured for each run."""
    from lab.matrix.outputs import write_outputs
    from lab.matrix.schedule import MatrixOutcome, RunResult, check_out_dir

    spec_file = write(tmp_path, RECORDED)
    spec = load_matrix(str(spec_file))
    times = {r.id: (30.0 + i * 1.25, 50.0 + i) for i, r in enumerate(spec.runs)}  # none is a record's total_s
    dirs = []
    for i in (1, 2):
        out = tmp_path / f"shard{i}"
        check_out_dir(out, spec, (i, 2))
        runs = spec.shard(i, 2)
        for r in runs:
            src = REPO / "tests/data/runs" / f"ring4-numa01-{r.setting.name}-{r.repeat}"
            shutil.copytree(src, run_dir(out, r))
        results = [RunResult(r.id, "ok", "", *times[r.id]) for r in runs]
        write_outputs(spec, runs, out, MatrixOutcome(results, 99.0, 150.0, 2), (i, 2))
        dirs.append(out)
    return spec_file, spec, dirs, times


def _junit_times(path: Path) -> dict[str, str]:
    return {c.get("name"): c.get("time") for c in ET.parse(path).getroot().iter("testcase") if "gates" not in
            c.get("classname")}  # fmt: skip


def test_merge_keeps_the_times_the_shards_measured(tmp_path: Path) -> None:
    spec_file, spec, dirs, times = _shard_dirs(tmp_path)
    assert _junit_times(dirs[0] / "junit.xml") == {
        r.id: f"{times[r.id][0]:.1f}" for r in spec.shard(1, 2)
    }  # the shard's own, as measured
    merged = tmp_path / "merged"
    proc = numalab("matrix", "merge", *map(str, dirs), "--spec", str(spec_file), "--out", str(merged))
    assert "merged 6 runs from 2 directories" in proc.stdout, proc.stdout + proc.stderr
    assert _junit_times(merged / "junit.xml") == {r.id: f"{times[r.id][0]:.1f}" for r in spec.runs}
    runs = json.loads((merged / "summary.json").read_text())["runs"]
    assert {r["id"]: (r["wall_s"], r["cpu_s"]) for r in runs} == times


def test_merge_without_a_shard_summary_takes_the_records_own_time(tmp_path: Path) -> None:
    """A shard whose summary is gone or forged: its runs' wall time is the record's total_s, their CPU unknown."""
    spec_file, spec, dirs, _times = _shard_dirs(tmp_path)
    (dirs[1] / "summary.json").unlink()
    forged = json.loads((dirs[0] / "summary.json").read_text())
    assert len(forged["runs"]) == 4
    for r, bad in zip(forged["runs"], [float("nan"), -1, "12", True]):
        r["wall_s"] = bad
    (dirs[0] / "summary.json").write_text(json.dumps(forged))  # NaN written as NaN
    merged = tmp_path / "merged"
    numalab("matrix", "merge", *map(str, dirs), "--spec", str(spec_file), "--out", str(merged))
    runs = {r["id"]: r for r in json.loads((merged / "summary.json").read_text())["runs"]}
    totals = {r.id: json.loads((run_dir(merged, r) / "manifest.json").read_text())["timings"]["total_s"]
              for r in spec.runs}  # fmt: skip
    assert {i: (r["wall_s"], r["cpu_s"]) for i, r in runs.items()} == {i: (t, None) for i, t in totals.items()}
    assert _junit_times(merged / "junit.xml") == {i: f"{t:.1f}" for i, t in totals.items()}


def test_a_resumed_shard_keeps_its_runs_times(tmp_path: Path) -> None:
    from lab.matrix.outputs import write_outputs
    from lab.matrix.schedule import MatrixOutcome, RunResult

    _spec_file, spec, dirs, times = _shard_dirs(tmp_path)
    runs = spec.shard(1, 2)
    resumed = [RunResult(r.id, "ok", "", resumed=True) for r in runs]  # as execute_matrix gives done runs
    outcome = MatrixOutcome(resumed, 0.0001, 0.6, 2)
    summary = write_outputs(spec, runs, dirs[0], outcome, (1, 2))
    assert {r["id"]: (r["wall_s"], r["cpu_s"]) for r in summary["runs"]} == {r.id: times[r.id] for r in runs}
    assert _junit_times(dirs[0] / "junit.xml") == {r.id: f"{times[r.id][0]:.1f}" for r in runs}
    # nothing started: no utilisation (0.6 s over 0.1 ms on 2 cores was 300000%)
    assert outcome.utilisation is None and summary["timing"]["utilisation"] is None


def test_an_empty_shard_has_no_utilisation(tmp_path: Path) -> None:
    """The real runner on a shard with no runs: no ratio over next to no wall time, and the CPU it reports is
    its own while the matrix ran (not the process's since it started)."""
    from lab.matrix.outputs import write_outputs
    from lab.matrix.schedule import execute_matrix

    spec = load_matrix(str(write(tmp_path, GATED)))
    assert spec.shard(2, 2) == []
    out = tmp_path / "out"
    outcome = execute_matrix(spec, [], out, {})
    assert outcome.results == [] and outcome.utilisation is None
    assert outcome.cpu_s < 0.5, outcome.cpu_s  # not the interpreter's start-up and imports
    summary = write_outputs(spec, [], out, outcome, (2, 2))
    assert summary["timing"]["utilisation"] is None and summary["totals"] == {"runs": 0}


def test_concurrent_local_runs_get_cpus_of_their_own() -> None:
    from lab.matrix.schedule import CpuShares

    shares = CpuShares((0, 1, 2, 3, 4, 5))
    a, b = shares.take(2), shares.take(3)
    assert a == (0, 1) and b == (2, 3, 4) and shares.free == [5]
    shares.give_back(a)
    assert shares.take(3) == (0, 1, 5)
    shares.give_back(b)
    assert shares.free == [2, 3, 4]
    # a run larger than the host (started only when alone) gets every CPU
    alone = CpuShares((0, 1))
    assert alone.take(4) == (0, 1)
    alone.give_back((0, 1))
    assert alone.free == [0, 1]


def test_a_virtual_clock_run_takes_one_host_cpu_and_two_fit_a_two_core_host(monkeypatch, tmp_path: Path) -> None:
    """Under the virtual clock QEMU runs every vCPU on one thread: an 8-vCPU model VM is packed as one host CPU, so
    two run at once on 2 cores, each on a CPU of its own; a plain TCG run of 8 vCPUs still takes the host alone."""
    from types import SimpleNamespace

    from lab.matrix import schedule

    monkeypatch.setattr(schedule, "read_inventory", lambda: SimpleNamespace(
        n_cpus=2, online_cpus=(0, 1), mem_available_mib=24000))  # fmt: skip
    spec = parse_matrix({"name": "m", "topologies": [{"name": "ring-4", "cpus_per_node": 2}], "kernels": ["stock"],
                         "workloads": [{"name": "numa01", "duration": 5}], "repeats": 2,
                         "settings": [{"name": "m1", "model": "m1"}, {"name": "tcg"}]},
                        str(tmp_path / "m.yaml"), "m")  # fmt: skip
    m1 = [r for r in spec.runs if r.setting.name == "m1"]
    tcg = [r for r in spec.runs if r.setting.name == "tcg"]
    assert [schedule.host_threads(r, 8) for r in m1 + tcg] == [1, 1, 8, 8]
    packer = schedule._Packer(spec, spec.runs, tmp_path / "out", {}, schedule.Packing(), lambda _m: None)
    packer.resume()
    running = {}
    for n, run in enumerate(m1):
        assert packer._fits(run)
        running[n] = SimpleNamespace(run=run)
        packer.running = running
    assert not packer._fits(tcg[0])  # (the launcher starts a run that does not fit only when nothing runs)
    assert [packer.cpus.take(packer.threads[r.id]) for r in m1] == [(0,), (1,)]


def test_a_run_process_starts_with_its_share_as_affinity() -> None:
    """The share is the child's CPU affinity, which numalab run's placement pins within."""
    from lab.matrix.schedule import _child_setup

    cpu = min(os.sched_getaffinity(0))
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
        capture_output=True, text=True, preexec_fn=_child_setup((cpu,)), check=True,
    )  # fmt: skip
    assert proc.stdout.strip() == f"[{cpu}]"


# --- real VMs -------------------------------------------------------------------


@pytest.mark.vm
def test_ci_smoke_matrix(tmp_path: Path) -> None:
    out = tmp_path / "smoke"
    proc = numalab("matrix", "run", "ci-smoke", "--out", str(out), "--no-reports", timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"] == {"ok": 6, "runs": 6}
    suite = ET.parse(out / "junit.xml").getroot()
    assert suite.get("tests") == "6" and suite.get("failures") == "0"
    for run in summary["runs"]:
        m = json.loads((out / run["dir"] / "manifest.json").read_text())
        assert m["guest_topology_ok"] is True
    assert (out / "index.html").read_text().count('class="ok"') >= 6


SMALL = """
name: small
topologies: [ring-2]
workloads: [{name: idle, duration: 1}]
repeats: 3
"""


@pytest.mark.vm
def test_resume_after_sigkill(tmp_path: Path) -> None:
    spec = write(tmp_path, SMALL)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lab.cli", "matrix", "run", str(spec), "--out", str(out), "--no-reports"]
    p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = ""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        seen += line
        if "start ring-2.stock.idle.default.r2" in line or not line:
            break
    assert "[1/3] ok" in seen, seen

    def qemus() -> list[str]:
        ps = subprocess.run(["pgrep", "-af", "qemu-system"], capture_output=True, text=True).stdout
        return [ln for ln in ps.splitlines() if str(out) in ln]

    # Killed while r2's QEMU runs (a fixed sleep once let r2 finish first: a TCG boot here takes 1.5-20 s).
    until = time.monotonic() + 120
    while not qemus() and time.monotonic() < until and p.poll() is None:
        time.sleep(0.05)
    assert qemus(), "r2's QEMU never started"
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=30)  # (reaps it and closes its pipe)
    time.sleep(1)
    assert not qemus(), "QEMU outlived the killed runner"
    done = out / "runs" / "ring-2.stock.idle.default.r1" / "manifest.json"
    before = (done.stat().st_mtime_ns, done.stat().st_ino)
    assert not (out / "runs" / "ring-2.stock.idle.default.r2" / "manifest.json").exists()

    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming: 1 of 3 runs already done" in proc.stderr
    assert (done.stat().st_mtime_ns, done.stat().st_ino) == before
    assert "start ring-2.stock.idle.default.r1" not in proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"] == {"ok": 3, "runs": 3}
    assert [r["id"] for r in summary["runs"]] == [f"ring-2.stock.idle.default.r{i}" for i in (1, 2, 3)]
    assert not list((out / "runs").glob(".*.partial"))

    # The same --out with a changed spec is refused.
    changed = write(tmp_path, SMALL.replace("repeats: 3", "repeats: 4"))
    proc = numalab("matrix", "run", str(changed), "--out", str(out))
    assert_one_line_error(proc, "different matrix spec")


GATED = """
name: gated
topologies: [ring-2]
workloads: [{name: numa01, duration: 6}]
settings: [{name: on, numa_balancing: on}, {name: off, numa_balancing: off}]
baseline: {setting: on}
gates:
  - {metric: vmstat.numa_hint_faults_local, worse_than_baseline_pct: 50, significant: false}
"""


@pytest.mark.vm
def test_failing_gate_fails_the_matrix_and_shards_merge(tmp_path: Path) -> None:
    spec = write(tmp_path, GATED)
    outs = []
    for i in (1, 2):
        out = tmp_path / f"shard{i}"
        proc = numalab("matrix", "run", str(spec), "--out", str(out), "--shard", f"{i}/2", "--no-reports", timeout=900)
        outs.append(out)
        # Shard 1 holds the whole on/off cell (one cell), shard 2 is empty.
        if i == 1:
            assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
            assert "gate FAIL" in proc.stdout
    merged = tmp_path / "merged"
    proc = numalab("matrix", "merge", *map(str, outs), "--out", str(merged))
    assert proc.returncode == 1  # the gate still fails after merging
    summary = json.loads((merged / "summary.json").read_text())
    assert summary["totals"]["ok"] == 2 and summary["gates_failed"] == 1
    gate = summary["gates"][0]
    assert gate["verdict"] == "fail" and "-100.00%" in gate["detail"]
    suite = ET.parse(merged / "junit.xml").getroot()
    failures = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert len(failures) == 1 and "gates" in failures[0].get("classname")
    assert os.path.exists(merged / "runs" / "ring-2.stock.numa01.off.r1" / "manifest.json")


def test_the_merged_summary_carries_the_caveat_and_the_finding(tmp_path: Path) -> None:
    """The recorded runs ran under plain TCG: the matrix's summary.json and index.html say, in each throughput
    row, that remote memory costs nothing here, and each comparison has its finding."""
    from lab.analysis.caveats import FREE_REMOTE

    spec_file, _spec, dirs, _times = _shard_dirs(tmp_path)
    merged = tmp_path / "merged"
    numalab("matrix", "merge", *map(str, dirs), "--spec", str(spec_file), "--out", str(merged))
    (comp,) = json.loads((merged / "summary.json").read_text())["comparisons"]
    rows = {m["metric"]: m for m in comp["metrics"]}
    assert FREE_REMOTE in rows["workload.gbps"]["caveat"] and rows["vmstat.numa_pages_migrated"]["caveat"] == ""
    assert comp["finding"]["cannot_show"] and comp["finding"]["mechanism"]
    assert FREE_REMOTE in (merged / "index.html").read_text()
