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
import subprocess
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
    assert sorted(p.name for p in schedulers.iterdir()) == ["scx_central", "scx_qmap", "scx_simple"]
    # each step of their build timed, in kernel build --json and in the build's log
    assert [s["step"] for s in v612["schedulers"]["steps"]] == ["libbpf+bpftool+vmlinux.h", "scx_simple", "scx_qmap",
                                                               "scx_central"], v612["schedulers"]  # fmt: skip
    assert "numalab: sched_ext step scx_simple: exit 0 after " in (Path(v612["path"]) / "build.log").read_text()
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
    assert 'sched_ext: BPF scheduler "simple" enabled' in (out / "scx_simple-r1" / "dmesg.txt").read_text()
    assert "v6.12 [scx_simple]" in proc.stdout and "v6.12 [fair]" in proc.stdout  # the side by side, as compare

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
    assert_one_line_error(
        numalab("run", "--kernel", "v6.12", "--scheduler", "scx_flatcg", *SMALL),
        "--scheduler scx_flatcg: not a scheduler of kernel v6.12 (it has: fair, scx_simple, scx_qmap",
    )
    (tmp_path / "x.sh").write_text("#!/bin/sh\n")
    (tmp_path / "x.sh").chmod(0o755)
    assert_one_line_error(numalab("run", "--kernel", "v6.12", "--scheduler", str(tmp_path / "x.sh"), *SMALL),
                          "not an ELF program")  # fmt: skip


@pytest.mark.vm
@pytest.mark.kernel_build
def test_a_scheduler_that_misbehaves_is_ejected_and_says_why(tmp_path, v612) -> None:
    # scx_qmap -e 150: scx_bpf_error() at its 150th enqueue, a few seconds into the workload (here: the wait for it
    # took 20-30 enqueues a second, and the error came 3.7 s into an 8 s workload): enabled at the start, not at the
    # end, mid-run
    m = _one(tmp_path / "error", "scx_qmap -e 150", duration="8")
    assert m["status"] == "scheduler-ejected", (m["status"], m["reason"])
    s = m["scheduler"]
    assert (s["start"]["state"], s["start"]["ops"], s["end"]["state"]) == ("enabled", "qmap", "disabled"), s
    assert m["reason"].startswith("the sched_ext scheduler did not run throughout: no longer enabled at the "
                                  "workload's end"), m["reason"]  # fmt: skip
    assert 'kernel: BPF scheduler "qmap" disabled (scx_bpf_error): qmap: test triggering error' in m["reason"]
    assert s["ejected"] is True and s["reason"] in m["reason"]
    assert "EXIT: scx_bpf_error (test triggering error)" in (tmp_path / "error" / "scheduler.out").read_text()

    # scx_qmap -t 2: every 2nd user task's enqueue dropped: the guest init's own sleep never runs, and the watchdog
    # (qmap's timeout: 5 s) ejects it before the workload
    m = _one(tmp_path / "stall", "scx_qmap -t 2", duration="2")
    assert m["status"] == "scheduler-ejected", (m["status"], m["reason"])
    assert 'BPF scheduler "qmap" disabled (runnable task stall)' in m["reason"], m["reason"]
    assert "failed to run for 5." in m["reason"], m["reason"]

    # a host --timeout before the workload's end: a timeout, naming the scheduler it ran under (issue 71; here the
    # scheduler is well, so the kernel said nothing of it, and the line says what a watchdog could have cut off)
    proc = numalab("run", "--kernel", "v6.12", "--scheduler", "scx_simple", *SMALL, "--workload", "spin", "--duration",
                   "300", "--timeout", "60", "--no-trace", "--out", str(tmp_path / "timeout"), "--json",
                   timeout=600)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "timeout", (m["status"], m["reason"])
    assert "; under the sched_ext scheduler scx_simple, enabled at the workload's start (ops simple)" in m["reason"]

    # compare leaves the ejected run out: against a fair run, nothing is left to compare on its side
    fair = tmp_path / "fair"
    proc = numalab("run", "--kernel", "v6.12", *SMALL, "--workload", "spin", "--duration", "2", "--no-trace", "--out",
                   str(fair), timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_one_line_error(numalab("compare", "--baseline", str(fair), "--new", str(tmp_path / "error")),
                          "compare: no run with status ok on one side")  # fmt: skip
    counted = numalab("compare", "--baseline", str(fair), "--new", str(tmp_path / "error"), "--include-status",
                      "scheduler-ejected")  # fmt: skip
    assert counted.returncode == 0, counted.stderr[-2000:]
    assert "includes 1 run marked scheduler-ejected" in counted.stdout, counted.stdout[-2000:]
    assert "v6.12 [scx_qmap -e 150 (ejected)]" in counted.stdout  # the side: the kernel and its scheduler


def _one(out: Path, scheduler: str, duration: str = "2") -> dict:
    proc = numalab("run", "--kernel", "v6.12", "--scheduler", scheduler, *SMALL, "--workload", "spin", "--duration",
                   duration, "--no-trace", "--out", str(out), "--json", timeout=600)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # (a run not ok)
    return json.loads(proc.stdout)


@pytest.mark.vm
@pytest.mark.kernel_build
def test_the_fair_class_brings_a_task_to_its_memory_and_scx_simple_does_not(tmp_path, v612) -> None:
    """The slow one (an A/B until it decides): misplaced on ring-2 with two CPUs a node, NUMA balancing on, fair
    against scx_simple, deciding on the task's memory on its node at the end (local_pct), as the tutorial's
    known answer does (tests/kernel/test_tutorial.py).

    At most 10 pairs: scx_simple's global queue lets the task end on its memory's node by chance (it never moves
    it there for its memory), and the fair side always ends there (100 every run, no spread), so the A/B decides
    unless chance took scx_simple's task there in 7 or more of 10 runs (Welch, p < 0.05 up to 6 of 10). With at
    most 6 pairs it stopped undecided when 3 of 6 did (-50%, p = 0.075: the rehearsal of 2026-11-28 02:10, its one
    failure seen); it decides in 3 pairs when none do (the usual case: 72-118 s)."""
    out = tmp_path / "ab"
    proc = numalab("run", "--kernel", "v6.12", "--scheduler", "fair", "--scheduler", "scx_simple", "--topology",
                   "ring-2", "--cpus-per-node", "2", "--mem-per-node", "256M", "--workload", "misplaced", "--duration",
                   "8", "--repeat", "auto", "--decide", "workload.local_pct", "--max-pairs", "10", "--out", str(out),
                   "--json", timeout=1800)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert (result["baseline"], result["new"]) == ("v6.12 [fair]", "v6.12 [scx_simple]"), result
    (v,) = result["verdicts"]
    assert v["direction"] == "worse" and v["significant"] is True, v["line"]
    runs = _manifests(out)
    fair = [m for m in runs if m["scheduler"]["kind"] == "fair"]
    scx = [m for m in runs if m["scheduler"]["kind"] == "sched_ext"]
    assert fair and scx and all(m["status"] == "ok" for m in runs)
    # The mechanism: the fair class's NUMA balancing scanned the task's memory (hint faults by the thousand) and the
    # task ended on it; under scx_simple the workload's task was never scanned (task_tick_numa is the fair class's
    # tick's): a handful of hint faults (the fair-class tasks around it), no NUMA move or swap. Who moved the fair
    # side's task is not asserted: in a rehearsal all three fair runs got there by the load balancer with no NUMA
    # decision (as in test_kernel_612's misplaced run, 4 of 10 on this kernel).
    faults = {id(m): m["metrics"]["vmstat"]["numa_hint_faults"] for m in runs}
    assert all(m["workload"]["result"]["ended_on_mem_node"] for m in fair)
    # (summed by side: one fair run whose task the load balancer moved before the first scan had 14, the others
    # 16,396 and 32,787; scx_simple's 3, 1, 0)
    assert sum(faults[id(m)] for m in fair) > 10 * sum(faults[id(m)] for m in scx), [faults[id(m)] for m in runs]
    assert all(m["metrics"]["events"][e] == 0 for m in scx for e in ("sched_move_numa", "sched_swap_numa")), [
        m["metrics"]["events"] for m in scx]  # fmt: skip
    assert all(m["scheduler"]["end"]["ops"] == "simple" for m in scx)


PATCHED_LINE = "numalab: the ab test's patched kernel"


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.vm
@pytest.mark.kernel_build
def test_ab_of_a_tree_runs_the_scheduler_on_both_kernels(kernel_repo_612, tmp_path) -> None:
    """docs/sched-ext.md's ``numalab ab ~/linux --base v6.12 --scheduler scx_simple``, on a clone of the 6.12 test
    tree with a commit that says so at boot: both kernels are built with the sched-ext fragment (the base cold, 7 min
    here the first time; the patched one incremental, 29 s) and both runs ran scx_simple throughout. Cached: 49 s."""
    tree = tmp_path / "linux"
    subprocess.run(["git", "clone", "-q", "--shared", str(kernel_repo_612), str(tree)], check=True)
    _git(tree, "tag", "v6.12", "v6.12-debian")
    _git(tree, "switch", "-q", "-c", "says-so", "v6.12")
    ext = tree / "kernel" / "sched" / "ext.c"
    ext.write_text(ext.read_text() + f'\nstatic int __init numalab_says_so(void)\n{{\n\tpr_info("{PATCHED_LINE}\\n");\n'
                   "\treturn 0;\n}\nlate_initcall(numalab_says_so);\n")  # fmt: skip
    _git(tree, "commit", "-q", "-am", "sched_ext: say so at boot")
    out = tmp_path / "ab"
    proc = numalab("ab", str(tree), "--base", "v6.12", "--scheduler", "scx_simple", *SMALL, "--workload", "spin",
                   "--duration", "2", "--no-trace", "--repeat", "1", "--out", str(out), timeout=5400)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    runs = _manifests(out)
    assert len(runs) == 2 and all(m["status"] == "ok" for m in runs), [(m["status"], m["reason"]) for m in runs]
    names = sorted(m["kernel"]["name"] for m in runs)
    assert all(n.startswith("ab-") and n.endswith("-scx") for n in names), names
    for m in runs:
        s = m["scheduler"]
        assert (s["asked"], s["start"]["ops"], s["end"]["ops"], s["ejected"]) == ("scx_simple", "simple", "simple",
                                                                                  False), s  # fmt: skip
    patched = next(p for p in sorted(out.glob("*/")) if (p / "manifest.json").is_file() and
                   json.loads((p / "manifest.json").read_text())["kernel"]["name"] == max(names, key=len))  # fmt: skip
    assert PATCHED_LINE in (patched / "dmesg.txt").read_text()
