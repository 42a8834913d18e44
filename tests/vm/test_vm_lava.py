"""The matrix on LAVA with the real dispatcher (issue #70): a two-run job set (one A/B pair: NUMA balancing on and
off, ring-2, the stock kernel) made by numalab matrix lava, run by Debian's lava-run on this machine's QEMU
(TCG), imported as run records, and compared with the same two runs made directly by numalab matrix run: the same
topology readback and kernel identity, figures within their usual spread, and compare and report take them; and
one job with --results console, whose results come back in its log alone.
lava-dispatcher and LAVA's device-type templates come from make setup-lava (make test's)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from common import numalab

pytestmark = pytest.mark.vm

SPEC = """name: lava-two
topologies: [ring-2]
kernels: [stock]
workloads: [{name: numa01, duration: 5}]
settings:
  - {name: on, numa_balancing: "on"}
  - {name: off, numa_balancing: "off"}
repeats: 1
baseline: {setting: on}
"""

# The workload's figures that are not timings: a LAVA run's must be the direct run's. Its GB/s is a timing (TCG on the
# host's clock, a 2-core host shared with other work, the two runs a minute apart: it went 0.23x between them in
# stop 77's CI), so it is printed, not asserted; under LAVA the virtual clock is not open (the worker's QEMU 7.2).
SAME = ("workload", "duration_s", "online_cpus", "threads", "processes", "mem_mib", "threads_per_process")


def _same_work(lw: dict, dw: dict, what: str) -> None:
    assert {k: lw.get(k) for k in SAME} == {k: dw.get(k) for k in SAME}, what
    assert len(lw["per_task"]) == lw["threads"] and all(t["bytes_touched"] > 0 for t in lw["per_task"]), what
    print(f"{what}: GB/s lava {lw['gbps']:.3f}, direct {dw['gbps']:.3f}")


def _manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def test_a_job_set_run_by_lava_run_gives_the_records_numalab_run_gives(tmp_path: Path) -> None:
    assert shutil.which("lava-run"), "lava-run is not installed: make setup-lava"
    spec = tmp_path / "lava-two.yaml"
    spec.write_text(SPEC)
    jobs = tmp_path / "jobs"
    made = numalab("matrix", "lava", str(spec), "--out", str(jobs))
    assert made.returncode == 0, made.stderr[-2000:]
    dirs = sorted((jobs / "jobs").iterdir())
    assert [d.name for d in dirs] == ["001-ring-2.stock.numa01.on.r1", "002-ring-2.stock.numa01.off.r1"]
    assert all((d / "device.yaml").is_file() for d in dirs), "no device.yaml: LAVA's templates (make setup-lava)"
    started = time.monotonic()
    ran = subprocess.run([str(jobs / "run-lava.sh")], capture_output=True, text=True, timeout=900)
    lava_s = time.monotonic() - started
    assert ran.returncode == 0, [(d / "output.yaml").read_text()[-3000:] for d in dirs]
    for d in dirs:  # LAVA's own judgement: the job passed, its monitor saw the guest's marks as cases
        log = (d / "output.yaml").read_text()
        assert '"case": "job", "definition": "lava", "result": "pass"' in log, log[-2000:]
        assert '"case": "workload_end", "definition": "numalab"' in log, log[-2000:]
    imported = numalab("matrix", "lava-import", str(jobs), "--out", str(tmp_path / "lava-runs"))
    assert imported.returncode == 0, imported.stdout + imported.stderr[-2000:]
    # a matrix output directory, as numalab matrix run writes one; again, nothing new to import (resume)
    summary = json.loads((tmp_path / "lava-runs" / "summary.json").read_text())
    assert summary["totals"] == {"ok": 2, "runs": 2}, summary["totals"]
    again = numalab("matrix", "lava-import", str(jobs), "--out", str(tmp_path / "lava-runs"))
    assert again.returncode == 0 and "2 run(s) imported before: kept" in again.stdout, again.stdout
    direct = numalab("matrix", "run", str(spec), "--out", str(tmp_path / "direct"), "--max-vms", "1", "--no-reports")
    assert direct.returncode == 0, direct.stderr[-2000:]
    for setting in ("on", "off"):
        lrec = tmp_path / "lava-runs" / "runs" / f"ring-2.stock.numa01.{setting}.r1"
        drec = tmp_path / "direct" / "runs" / f"ring-2.stock.numa01.{setting}.r1"
        lm, dm = _manifest(lrec), _manifest(drec)
        assert lm["status"] == dm["status"] == "ok", (lm["reason"], lm.get("data_problems"))
        assert lm["backend"]["name"] == "lava" and dm["backend"]["name"] == "qemu"
        # the guest's own view of its machine, every part of it, as the direct run's
        assert lm["guest_topology_ok"] and lm["guest_topology"] == dm["guest_topology"]
        # the same kernel, verified by its build-id in both
        for key in ("build_id", "expected_build_id", "release", "identity", "sha256"):
            assert lm["kernel"][key] == dm["kernel"][key], key
        assert lm["kernel"]["identity"] == "verified"
        assert [s["name"] for s in lm["stages"]] == [s["name"] for s in dm["stages"]]
        assert not lm.get("data_problems"), lm.get("data_problems")
        lw, dw = lm["workload"]["result"], dm["workload"]["result"]
        assert lw["elapsed_s"] >= lw["duration_s"] and dw["elapsed_s"] >= dw["duration_s"]  # it ran its 5 s
        assert lm["workload"]["command"] == dm["workload"]["command"]
        _same_work(lw, dw, setting)
        hint_l = lm["metrics"]["vmstat"]["numa_hint_faults"]
        hint_d = dm["metrics"]["vmstat"]["numa_hint_faults"]
        assert (hint_l == 0) == (hint_d == 0) == (setting == "off"), (hint_l, hint_d)
    cmp = numalab("compare", "--baseline", str(tmp_path / "direct" / "runs" / "ring-2.stock.numa01.on.r1"),
                  "--new", str(tmp_path / "lava-runs" / "runs" / "ring-2.stock.numa01.on.r1"))  # fmt: skip
    assert cmp.returncode == 0 and "workload.gbps" in cmp.stdout, cmp.stderr[-2000:]
    report = numalab("report", *map(str, sorted((tmp_path / "lava-runs" / "runs").iterdir())),
                     "--out", str(tmp_path / "report.html"))  # fmt: skip
    assert report.returncode == 0 and (tmp_path / "report.html").stat().st_size > 0, report.stderr[-2000:]
    # --results console: no share, the guest's files in the job's log (a LAVA worker elsewhere sends back only that)
    console = tmp_path / "console-jobs"
    made = numalab("matrix", "lava", str(spec), "--out", str(console), "--results", "console")
    assert made.returncode == 0, made.stderr[-2000:]
    job = console / "jobs" / "001-ring-2.stock.numa01.on.r1"
    assert "-fsdev" not in (job / "job.yaml").read_text()
    (job / "lava").mkdir()
    with open(job / "output.yaml", "w") as log:
        ran = subprocess.run(["lava-run", "--job-id", "3", "--output-dir", str(job / "lava"), "--device",
                              str(job / "device.yaml"), str(job / "job.yaml")], stdout=subprocess.DEVNULL,
                             stderr=log, timeout=600)  # fmt: skip
    assert ran.returncode == 0, (job / "output.yaml").read_text()[-3000:]
    assert not any((job / "share").iterdir())  # (nothing came through a share)
    imported = numalab("matrix", "lava-import", str(job), "--out", str(tmp_path / "console-runs"))
    assert imported.returncode == 0, imported.stdout + imported.stderr[-2000:]
    cm = _manifest(tmp_path / "console-runs" / "runs" / "ring-2.stock.numa01.on.r1")
    dm = _manifest(tmp_path / "direct" / "runs" / "ring-2.stock.numa01.on.r1")
    assert cm["status"] == "ok" and cm["guest_topology"] == dm["guest_topology"], cm["reason"]
    assert cm["kernel"]["build_id"] == dm["kernel"]["build_id"] and cm["kernel"]["identity"] == "verified"
    carried = cm["backend"]["lava"]["console_results"]
    assert sorted(carried["files"]) == ["guest-done", "readback.tar", "results.tar"] and not carried["problems"]
    _same_work(cm["workload"]["result"], dm["workload"]["result"], "console")
    print(f"lava-run: 2 jobs in {lava_s:.1f} s")
