"""docs/sched-ext.md's "Your patch under scx_bpfland": ``numalab ab TREE --base v7.3-debian --patch P --scheduler
scx_bpfland`` on a git tree of Debian's 7.3.4 (the kernel tier's, tests/kernel_repos.py), one run a side on
genoa-nps2. Both kernels are built with the sched-ext and scx fragments (``ab-...-scx-crates``, incrementally in
v7.3-scx's private tree), are the kernels asked for (their build-ids), and ran scx_bpfland 1.1.4 from numalab's
cache throughout, which said it saw the machine numalab built. One run a side decides nothing: the path works.

make test-scx; not in make test (v7.3-scx cold is about 20 minutes, scx_bpfland cold 8 to 20). With both cached:
4m28s beside test_scx_numa.py, two incremental kernel builds in it (2026-11-29).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import REPO, numalab
from kernel_repos import kernel_repo
from test_scx_layered import KERNEL_73, KERNEL_73_ARGS, _kernel

pytestmark = [pytest.mark.scx, pytest.mark.vm, pytest.mark.kernel_build]

PATCH = REPO / "kernel-configs" / "patches" / "known-answer-sched-cache-no-aggregation.patch"
OPS = "bpfland_1.1.4_x86_64_unknown_linux_gnu"


def test_ab_of_a_73_tree_runs_scx_bpfland_on_both_kernels(tmp_path: Path) -> None:
    v73_scx = _kernel(KERNEL_73, KERNEL_73_ARGS)  # (first: the tree's kernels build in its private tree)
    repo = kernel_repo("linux-7.3-git", Path(v73_scx["source"]["location"]), "v7.3-debian")
    built = numalab("scheduler", "build", "scx_bpfland", "--json", timeout=3600)
    assert built.returncode == 0, built.stderr[-3000:]
    out = tmp_path / "ab"
    proc = numalab("ab", str(repo), "--base", "v7.3-debian", "--patch", str(PATCH), "--scheduler", "scx_bpfland",
                   "--topology", "genoa-nps2", "--workload", "pairs", "--duration", "4", "--repeat", "1",
                   "--out", str(out), timeout=5400)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    runs = [json.loads(p.read_text()) for p in sorted(out.glob("*/manifest.json"))]
    assert len(runs) == 2 and all(m["status"] == "ok" for m in runs), [(m["status"], m["reason"]) for m in runs]
    names = sorted(m["kernel"]["name"] for m in runs)
    assert names[0] != names[1] and all(n.startswith("ab-") and n.endswith("-scx-crates") for n in names), names
    for m in runs:
        assert m["kernel"]["identity"] == "verified", m["kernel"]
        s = m["scheduler"]
        assert s["source"] == "crate:scx_bpfland@1.1.4" and s["ejected"] is False, s
        assert s["start"]["ops"] == s["end"]["ops"] == OPS, s
        said = s["topology"]
        assert said["agrees"] and said["seen"] == {"nodes": 2, "primary": "0-7", "smt": False}, said
        print(f"{m['kernel']['name']}: {m['metrics']['per_vcpu_s']['round_trips_per_vcpu_s']:.0f} round trips a "
              f"vCPU-second; the scheduler enabled {s.get('waited_s')} s after its start")  # fmt: skip
