"""sched_ext's known answers (issue 51) on the suite's one 6.12 kernel, v6.12 (tests/kernel/conftest.py: built with
the sched-ext fragment, its example schedulers with it):

- the scheduler that ran is the one asked for, read back from the guest, on both sides of an A/B of two schedulers
  on one kernel (fair against scx_simple), and a user's scheduler binary (PATH) runs with its libraries;
- a scheduler that misbehaves on purpose (scx_qmap -e: scx_bpf_error() after N enqueues; scx_qmap -t: it never
  enqueues every Nth user task, so the watchdog ejects it mid-run) is ejected, and the run's status and reason say so,
  in the kernel's words, and compare leaves the run out;
- scx_simple (one global queue, no NUMA awareness) against the fair class with NUMA balancing on: misplaced's task,
  started on the node away from its memory, is brought to it by the fair class and not by scx_simple, whose tasks
  NUMA balancing never scans (task_tick_numa is the fair class's); the A/B says so with significance.

Each test's time, cached, is in docs/sched-ext.md ("What it costs").
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from common import assert_one_line_error, numalab

SMALL = ("--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M")


def _manifests(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("*/manifest.json"))]


@pytest.mark.vm
@pytest.mark.kernel_build
def test_the_scheduler_that_ran_is_the_one_asked_for_on_both_sides(tmp_path, v612) -> None:
    schedulers = Path(v612["path"]) / "schedulers"
    assert sorted(p.name for p in schedulers.iterdir()) == ["scx_central", "scx_flatcg", "scx_qmap", "scx_simple"]
    steps = v612["meta"]["schedulers"]["steps"] if "meta" in v612 else None
    out = tmp_path / "ab"
    proc = numalab("run", "--kernel", "v6.12", "--scheduler", "fair", "--scheduler", "scx_simple", *SMALL,
                   "--workload", "spin", "--duration", "2", "--no-trace", "--repeat", "1", "--out", str(out),
                   timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    runs = {m["scheduler"]["asked"]: m for m in _manifests(out)}
    assert sorted(runs) == ["fair", "scx_simple"] and all(m["status"] == "ok" for m in runs.values())
    fair, simple = runs["fair"]["scheduler"], runs["scx_simple"]["scheduler"]
    assert fair["kind"] == "fair" and fair["start"] is None and fair["ejected"] is False
    assert simple["kind"] == "sched_ext" and simple["source"] == "kernel:v6.12" and simple["ejected"] is False
    assert simple["start"]["state"] == simple["end"]["state"] == "enabled", simple
    assert simple["start"]["ops"] == simple["end"]["ops"] == "simple", simple
    assert (out / "scx_simple-r1" / "scheduler.out").is_file() and not (out / "fair-r1" / "scheduler.out").exists()
    assert "sched_ext: BPF scheduler \"simple\" enabled" in (out / "scx_simple-r1" / "dmesg.txt").read_text()
    assert "fair" in proc.stdout and "scx_simple" in proc.stdout  # the side-by-side names both sides
    del steps

    # A user's binary (PATH): the example, copied out of the cache; its ops are not known beforehand, so any
    # enabled ops is taken, and recorded.
    mine = tmp_path / "bin" / "my_sched"
    mine.parent.mkdir()
    shutil.copy2(schedulers / "scx_simple", mine)
    proc = numalab("run", "--kernel", "v6.12", "--scheduler", str(mine), *SMALL, "--workload", "spin", "--duration",
                   "2", "--no-trace", "--out", str(tmp_path / "path"), "--json", timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok" and m["scheduler"]["source"] == f"path:{mine}", m["scheduler"]
    assert m["scheduler"]["start"]["ops"] == "simple" and m["scheduler"]["ops_expected"] is None

    # Refused before any boot, one line naming the option: the stock kernel (Debian's 6.1), a name the kernel
    # does not have, a file that is not an executable ELF.
    assert_one_line_error(numalab("run", "--kernel", "stock", "--scheduler", "scx_simple", *SMALL),
                          "--scheduler scx_simple: kernel stock has no CONFIG_SCHED_CLASS_EXT")  # fmt: skip
    assert_one_line_error(numalab("run", "--kernel", "v6.12", "--scheduler", "scx_rusty", *SMALL),
                          "--scheduler scx_rusty: not a scheduler of kernel v6.12 (it has: fair, scx_simple, scx_qmap")
    (tmp_path / "x.sh").write_text("#!/bin/sh\n")
    (tmp_path / "x.sh").chmod(0o755)
    assert_one_line_error(numalab("run", "--kernel", "v6.12", "--scheduler", str(tmp_path / "x.sh"), *SMALL),
                          "not an ELF program")  # fmt: skip


@pytest.mark.vm
@pytest.mark.kernel_build
def test_a_scheduler_that_misbehaves_is_ejected_and_says_why(tmp_path, v612) -> None:
    # scx_qmap -e 50: scx_bpf_error() at the 50th enqueue, before the workload starts
    m = _one(tmp_path / "error", "scx_qmap -e 50")
    assert m["status"] == "scheduler-ejected", (m["status"], m["reason"])
    assert 'BPF scheduler "qmap" disabled (runtime error)' in m["reason"], m["reason"]
    assert "test triggering error" in m["reason"], m["reason"]
    assert m["scheduler"]["ejected"] is True and m["scheduler"]["reason"] in m["reason"]

    # scx_qmap -t 2: every 2nd user task's enqueue dropped; qmap's watchdog timeout (5 s) ejects it mid-run
    m = _one(tmp_path / "stall", "scx_qmap -t 2", duration="10")
    assert m["status"] == "scheduler-ejected", (m["status"], m["reason"])
    assert m["scheduler"]["start"]["state"] == "enabled" and m["scheduler"]["start"]["ops"] == "qmap"
    assert m["scheduler"]["end"]["state"] != "enabled" or m["scheduler"]["end"]["ops"] != "qmap", m["scheduler"]
    assert "runnable task stall" in m["reason"] or "watchdog" in m["reason"], m["reason"]

    # compare leaves an ejected run out unless asked
    proc = numalab("compare", "--baseline", str(tmp_path / "error"), "--new", str(tmp_path / "stall"))
    assert proc.returncode != 0 or "scheduler-ejected" in proc.stdout + proc.stderr, proc.stdout[-2000:]


def _one(out: Path, scheduler: str, duration: str = "2") -> dict:
    proc = numalab("run", "--kernel", "v6.12", "--scheduler", scheduler, *SMALL, "--workload", "spin", "--duration",
                   duration, "--no-trace", "--out", str(out), "--json", timeout=600)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # (a run not ok)
    return json.loads(proc.stdout)
