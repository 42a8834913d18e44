#!/usr/bin/env python3
"""Host smoke test for the numalab guest workloads: python3 check.py BUILD_DIR"""

import json
import os
import subprocess
import sys
import time

COMMON_KEYS = {
    "workload": str,
    "elapsed_s": float,
    "threads": int,
    "processes": int,
    "mem_mib": int,
    "loops": int,
    "bytes_touched": int,
    "gbps": float,
}
TASK_KEYS = {"tid", "pid", "loops", "bytes_touched", "cpu_start", "cpu_end"}

RUNS = [
    ("numa01", ["--mem-mib", "8"], "numa01"),
    ("numa01", ["--mem-mib", "8", "--thread-alloc", "--threads", "2"], "numa01-thread-alloc"),
    ("numa01-thread-alloc", ["--mem-mib=8", "--threads=3"], "numa01-thread-alloc"),
    ("numa02", ["--mem-mib-per-thread", "4"], "numa02"),
    ("numa02", ["--mem-mib-per-thread", "4", "--smt"], "numa02"),
    ("pairs", ["--pairs", "2", "--mem-mib", "1", "--msg-bytes", "100000"], "pairs"),
    ("pairs", ["--pairs", "2", "--mem-mib", "1", "--start-node", "0"], "pairs"),
    ("idle", [], "idle"),
    ("nodes13", ["--a-cpu", "0", "--b-cpu", "1", "--tasks", "2"], "nodes13"),
    ("spin", ["--threads", "2"], "spin"),
    ("latency-matrix", ["--mem-mib", "4"], "latency-matrix"),
    (
        "latency-matrix",
        ["--mem-mib", "4", "--stream-mib", "1", "--migrate-mib", "1", "--migrate-huge-mib", "2"],
        "latency-matrix",
    ),
]
BAD_ARGS = [
    [],
    ["--duration"],
    ["--duration", "0"],
    ["--duration", "-1"],
    ["--duration", "x"],
    ["--duration", "nan"],
    ["--duration", "1", "--bogus"],
    ["--duration", "1", "extra"],
    ["--duration", "1", "--threads", "0"],
    ["--duration", "1", "--pairs", "1.5"],
]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(path, args, timeout=30):
    return subprocess.run([path] + args, capture_output=True, text=True, timeout=timeout)


def check_result(name, p, workload):
    if p.returncode != 0:
        fail(f"{name}: exit {p.returncode}: {p.stderr.strip()}")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("NUMALAB_RESULT ")]
    if len(lines) != 1 or len(p.stdout.splitlines()) != 1:
        fail(f"{name}: expected exactly one result line, got {p.stdout!r}")
    r = json.loads(lines[0].split(" ", 1)[1])
    for k, t in COMMON_KEYS.items():
        if not isinstance(r.get(k), t):
            fail(f"{name}: key {k} missing or not {t.__name__}: {r.get(k)!r}")
    if r["workload"] != workload:
        fail(f"{name}: workload {r['workload']!r} != {workload!r}")
    if workload == "spin" and not (
        r["insns"] > 0 and r["insns"] == sum(t["insns"] for t in r["per_task"]) and r["insn_per_s"] > 0
    ):
        fail(f"{name}: bad spin fields: {r}")
    if workload != "idle":
        if (r["bytes_touched"] <= 0 and workload != "spin") or len(r["per_task"]) != r["threads"]:
            fail(f"{name}: no work done or per_task length mismatch")
        for t in r["per_task"]:
            if not TASK_KEYS <= t.keys():
                fail(f"{name}: per_task entry lacks {TASK_KEYS - t.keys()}")
        if sum(t["loops"] for t in r["per_task"]) != r["loops"]:
            fail(f"{name}: loops total != sum of per_task")
    if workload == "pairs" and (r["round_trips"] <= 0 or len(r["per_pair"]) != r["pairs"]):
        fail(f"{name}: bad pairs fields")
    if workload == "pairs" and r.get("start_node") == 0 and not {t["cpu_start"] for t in r["per_task"]} <= node0_cpus():
        fail(f"{name}: a side started off node 0 ({node0_cpus()}): {r['per_task']}")
    if workload == "nodes13" and not (
        r["busy_a_s"] + r["busy_b_s"] > 0
        and 0 <= r["balance_pct"] <= 100
        and r["tasks_end_a"] + r["tasks_end_b"] == r["processes"]
    ):
        fail(f"{name}: bad nodes13 fields: {r}")
    return r


def node0_cpus():
    """Node 0's CPUs from sysfs (the host's, where check runs)."""
    with open("/sys/devices/system/node/node0/cpulist") as f:
        cpus = set()
        for part in f.read().strip().split(","):
            a, _, b = part.partition("-")
            cpus.update(range(int(a), int(b or a) + 1))
    return cpus


def check_misplaced(out):
    """misplaced needs two nodes: on a one-node host its --task-node 1 is one error line; on more, a real run."""
    mp = os.path.join(out, "misplaced")
    if not os.path.exists("/sys/devices/system/node/node1"):
        p = run(mp, ["--duration", "1"])
        if p.returncode != 2 or p.stdout or p.stderr.strip() != "misplaced: error: --task-node 1: not a node with CPUs":
            fail(f"misplaced on one node: rc={p.returncode} err={p.stderr!r}")
        print("ok  misplaced on one node -> " + p.stderr.strip())
    else:
        r = check_result("misplaced", run(mp, ["--duration", "1", "--mem-mib", "8"]), "misplaced")
        if r["task_node_start"] != 1 or not 0 <= r["local_pct"] <= 100:
            fail(f"misplaced: bad fields: {r}")
        print(f"ok  misplaced on {r['task_node_start']}->{r['task_node_end']}, local {r['local_pct']:.0f}%")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build"
    for prog in sorted({r[0] for r in RUNS} | {"misplaced"}):
        path = os.path.join(out, prog)
        desc = subprocess.run(["file", "-L", path], capture_output=True, text=True).stdout
        if "statically linked" not in desc and "static-pie linked" not in desc:
            fail(f"{prog}: not statically linked: {desc.strip()}")
        h = run(path, ["--help"])
        if h.returncode != 0 or "--duration" not in h.stdout:
            fail(f"{prog}: --help broken")
        for bad in BAD_ARGS:
            p = run(path, bad)
            err = p.stderr.splitlines()
            if p.returncode != 2 or len(err) != 1 or not err[0].startswith(prog + ": error: ") or p.stdout:
                fail(f"{prog} {bad}: want exit 2 + one error line, got {p.returncode} {p.stderr!r}")
    for prog, args, workload in RUNS:
        r = check_result(f"{prog} {' '.join(args)}", run(os.path.join(out, prog), ["--duration", "1"] + args), workload)
        if not 1.0 <= r["elapsed_s"] < 2.0:
            fail(f"{prog}: elapsed_s {r['elapsed_s']} out of range")
        print(f"ok  {prog:20} {' '.join(args):45} loops={r['loops']} gbps={r['gbps']:.2f}")
    check_misplaced(out)
    p = run(os.path.join(out, "pairs"), ["--duration", "1", "--start-node", "63"])
    if p.returncode != 2 or p.stdout or p.stderr.strip() != "pairs: error: --start-node 63: not a node with CPUs":
        fail(f"pairs --start-node 63: rc={p.returncode} err={p.stderr!r}")
    print("ok  pairs on no node -> " + p.stderr.strip())
    # A child that dies must make the parent fail (and print no result line).
    p = subprocess.Popen(
        [os.path.join(out, "pairs"), "--duration", "5", "--pairs", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)
    kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    if kids:
        os.kill(int(kids[0]), 9)
    so, se = p.communicate(timeout=10)
    if not kids or p.returncode == 0 or "NUMALAB_RESULT" in so or len(se.splitlines()) != 1:
        fail(f"child failure not propagated: rc={p.returncode} out={so!r} err={se!r}")
    print("ok  child failure -> " + se.strip())
    # Allocation failure: one error line, exit 1, no result (only safe without overcommit=1).
    with open("/proc/sys/vm/overcommit_memory") as f:
        if f.read().strip() != "1":
            for prog, opt in (("numa01", "--mem-mib"), ("numa02", "--mem-mib-per-thread")):
                p = run(os.path.join(out, prog), ["--duration", "1", opt, "1048576"])
                if p.returncode != 1 or p.stdout or len(p.stderr.splitlines()) != 1:
                    fail(f"{prog}: alloc failure: rc={p.returncode} err={p.stderr!r}")
                print("ok  alloc failure -> " + p.stderr.strip())
    # idle ends early on SIGTERM and still reports.
    p = subprocess.Popen([os.path.join(out, "idle"), "--duration", "30"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    p.terminate()
    so, _ = p.communicate(timeout=5)
    r = json.loads(so.split(" ", 1)[1])
    if p.returncode != 0 or not r["interrupted"] or r["elapsed_s"] > 5:
        fail(f"idle SIGTERM: rc={p.returncode} out={so!r}")
    print(f"ok  idle SIGTERM -> interrupted after {r['elapsed_s']:.2f}s")
    print("all checks passed")


if __name__ == "__main__":
    main()
