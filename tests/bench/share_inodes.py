"""Reproducer: the host's inode numbers reach a seeded run through the results share (images/qemu/0010).

    sudo .venv/bin/python tests/bench/share_inodes.py [--qemu PATH] [K ...]    (default K: 0..11)

For each K: a fresh tmpfs (mounted here, so root only) holding K empty files becomes the run's TMPDIR, so numalab's
scratch directory, and with it the 9p share's files, get inode numbers that depend on K alone; then one seeded run of
known answer 6's program (tests/vm/test_vm_parallel_time.py: ring-2, one vCPU a node, --clock virtual --quantum
2000, the remote-latency model, coherence off, seed 5). Prints K, a hash of the workload's figures (all but the
guest's inode number of the share's root, printed beside it) and the guest's "Refined TSC" line (where the runs
first part). With a QEMU whose 9p gives the guest the host's inode numbers (the series before 0010), the inode
number follows K and, for some builds of the program, one K in twelve gave another run every time (measured
2026-11-27 with the test's own build: K=6, 4 of 4); with 0010, every K gives the same run and the same inode
number. Not part of make bench (it mounts); a diagnosis, not a figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "vm"))
from test_vm_parallel_time import PAR_C, QUANTUM_NS, WORKLOAD  # noqa: E402


def one(qemu: str, workload: Path, k: int, out: Path, mnt: Path) -> str:
    """One run with K files already in a fresh tmpfs that is its TMPDIR: "hash refined-line" or why there is none."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2g", "tmpfs", str(mnt)], check=True)
    try:
        for j in range(k):
            (mnt / f"file{j}").touch()
        cmd = [sys.executable, "-m", "lab.cli", "run", "--kernel", "baseline", "--topology", "ring-2",
               "--cpus-per-node", "1", "--mem-per-node", "256M", "--workload", str(workload), "--duration", "3",
               "--no-trace", "--numa-balancing", "off", "--qemu", qemu, "--clock", "virtual",
               "--remote-latency", "slit", "--coherence", "off", "--quantum", str(QUANTUM_NS), "--seed", "5",
               "--out", str(out), "--json", "--timeout", "600"]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=900,
                              env={**os.environ, "TMPDIR": str(mnt)})  # fmt: skip
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
    try:
        m = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return f"no record: {proc.stderr.strip()[-200:]}"
    if m.get("status") != "ok":
        return f"{m.get('status')}: {m.get('reason')}"
    result = dict(m["workload"]["result"])
    ino = result.pop("share_ino", None)  # (the guest's inode number of the share's root: the host's, before 0010)
    figures = json.dumps(result, sort_keys=True).encode()
    dmesg = (out / "dmesg.txt").read_text(errors="replace").splitlines()
    refined = next((ln.strip() for ln in dmesg if "Refined TSC" in ln), "(no Refined TSC line)")
    return f"{hashlib.sha256(figures).hexdigest()[:10]}  share_ino {ino:.0f}  {refined}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qemu", default="charge", help="numalab's --qemu (default: charge, the current series)")
    ap.add_argument("k", nargs="*", type=int, default=list(range(12)), help="files made first (default 0..11)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("share_inodes.py mounts a tmpfs for each run: run it as root", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="numalab-share-inodes-") as d:
        tmp = Path(d)
        (tmp / "par.c").write_text(PAR_C)
        subprocess.run(["gcc", "-static", "-O1", "-o", str(tmp / "par"), str(tmp / "par.c")], check=True)
        (tmp / "par.yaml").write_text(WORKLOAD)
        mnt = tmp / "mnt"
        mnt.mkdir()
        print(f"QEMU {args.qemu}; K, a hash of the figures, the guest's inode number of the share, its refined TSC "
              "line", flush=True)  # fmt: skip
        for k in args.k:
            print(f"K={k:<3} {one(args.qemu, tmp / 'par.yaml', k, tmp / f'run-{k}', mnt)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
