"""Issue 68's known answer 1: scx_layered's releases around its NUMA-node limit, on a guest of 9 nodes (one vCPU a
node; tests/data/scx/mesh-9.yaml), the schedulers built by numalab from their crates.io releases.

sched-ext/scx PR 3366 cut scx_layered's MAX_NUMA_NODES from 64 to 8 (issue 3384: a panic at start on a 24-node
EPYC), PR 3397 raised it to 32. No release has 8: 1.0.23 (64) is the last before 3366, 1.1.0 (32) the first after
3397; the state in between is 1.1.0 with 3397 reverted (tests/data/scx/scx_layered-1.1.0-revert-pr3397.patch).

- scx_layered@1.0.23 starts and runs a short workload (ok, enabled throughout, its ops name checked);
- 1.1.0 with 3397 reverted panics at start: ``scheduler-ejected``, the reason quoting the panic
  (``index out of bounds: the len is 8 but the index is 8``), its source ``crate:scx_layered@1.1.0+patch:...``;
- scx_layered@1.1.0 starts and runs.

On 6.12 (v6.12-scx). On 7.3.4 (v7.3-scx) 1.0.23 and 1.1.0 do not load (EINVAL from the skeleton's load, libbpf silent
even at --log-level debug) where 1.1.4 runs: the second test records it.

make test-scx; not in make test: the first run builds v6.12-scx and v7.3-scx (--fragment sched-ext --fragment scx) and
scx_layered four times (cargo: 8 to 20 minutes each cold here, the patched one 3 in the same target directory). Its
figures are in docs/sched-ext.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import REPO, numalab

from lab.paths import cache_dir, file_lock

pytestmark = [pytest.mark.scx, pytest.mark.vm, pytest.mark.kernel_build]

SPEC = REPO / "tests" / "data" / "scx" / "mesh-9.yaml"
REVERT_3397 = REPO / "tests" / "data" / "scx" / "scx_layered-1.1.0-revert-pr3397.patch"
KERNEL = "v6.12-scx"
KERNEL_ARGS = ("kernel", "build", "--json", "--source", "/usr/src/linux-source-6.12.tar.xz", "--fragment", "sched-ext",
               "--fragment", "scx", "--name", KERNEL)  # fmt: skip
KERNEL_73 = "v7.3-scx"
KERNEL_73_ARGS = ("kernel", "build", "--json", "--source", "debian:7.3", "--fragment", "sched-ext", "--fragment", "scx",
                  "--name", KERNEL_73)  # fmt: skip
LAYERED = "--run-example"  # scx_layered's built-in layer specs (else it takes a JSON file of them)


def _kernel(name: str, args: tuple[str, ...]) -> dict:
    with file_lock(cache_dir("test-trees") / f".{name}-build.lock"):
        proc = numalab(*args, timeout=5400)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def scx_kernel() -> dict:
    return _kernel(KERNEL, KERNEL_ARGS)


@pytest.fixture(scope="module")
def scx_kernel_73() -> dict:
    return _kernel(KERNEL_73, KERNEL_73_ARGS)


def _build(spec: str, *patches: Path) -> dict:
    args = [a for p in patches for a in ("--patch", str(p))]
    proc = numalab("scheduler", "build", spec, *args, "--json", timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _run(out: Path, scheduler: str, ok: bool, kernel: str = KERNEL) -> dict:
    proc = numalab("run", "--kernel", kernel, "--scheduler", scheduler, "--topology", str(SPEC), "--workload", "spin",
                   "--duration", "4", "--no-trace", "--out", str(out), "--json", timeout=900)  # fmt: skip
    assert proc.returncode == (0 if ok else 1), proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _ran_throughout(m: dict, version: str) -> None:
    s = m["scheduler"]
    assert m["status"] == "ok", (m["status"], m["reason"])
    ops = f"layered_{version}_x86_64_unknown_linux_gnu"
    assert s["ops_expected"] == ops and s["start"]["ops"] == s["end"]["ops"] == ops, s
    assert s["start"]["state"] == s["end"]["state"] == "enabled" and s["ejected"] is False, s
    if version == "1.1.4":  # the machine it said it built: 9 CPUs, 9 cores, topology awareness on (read in 1.1.4)
        said = s["topology"]
        assert said["agrees"] and said["seen"] == {"cpus": 9, "cores": 9, "several_llcs": True}, said


def test_scx_layered_on_nine_nodes_before_between_and_after_its_node_limit(tmp_path, scx_kernel) -> None:
    before = _build("scx_layered@1.0.23")
    assert before["source"] == "crate:scx_layered@1.0.23" and before["locked"] is True
    assert before["vcs_commit"].startswith("7298f797"), before["vcs_commit"]  # (the project's tag v1.0.20)
    m = _run(tmp_path / "1.0.23", f"scx_layered@1.0.23 {LAYERED}", ok=True)
    _ran_throughout(m, "1.0.23")
    assert m["scheduler"]["source"] == "crate:scx_layered@1.0.23"

    after = _build("scx_layered@1.1.0")
    between = _build("scx_layered@1.1.0", REVERT_3397)
    assert between["binary"] != after["binary"] and between["source"].startswith("crate:scx_layered@1.1.0+patch:")
    m = _run(tmp_path / "1.1.0-revert-3397", f"{between['binary']} {LAYERED}", ok=False)
    assert m["status"] == "scheduler-ejected", (m["status"], m["reason"])
    assert "panicked at src/main.rs:2108:22: index out of bounds: the len is 8 but the index is 8" in m["reason"]
    assert m["scheduler"]["source"] == between["source"]  # (a PATH into numalab's scx cache: recorded as its crate)

    m = _run(tmp_path / "1.1.0", f"scx_layered@1.1.0 {LAYERED}", ok=True)
    _ran_throughout(m, "1.1.0")

    # a second build of each is a cache hit, without the network or cargo
    again = _build("scx_layered@1.1.0", REVERT_3397)
    assert again["cached"] is True and again["seconds"] < 1.0 and again["binary"] == between["binary"]


def test_on_7_3_the_releases_before_1_1_4_fail_at_bpf_load_and_1_1_4_runs(tmp_path, scx_kernel_73) -> None:
    for version in ("1.0.23", "1.1.0"):
        _build(f"scx_layered@{version}")
        m = _run(tmp_path / version, f"scx_layered@{version} {LAYERED}", ok=False, kernel=KERNEL_73)
        assert m["status"] == "scheduler-ejected", (m["status"], m["reason"])
        assert "Error: Failed to load BPF program; Invalid argument (os error 22)" in m["reason"], m["reason"]
    _build("scx_layered@1.1.4")
    m = _run(tmp_path / "1.1.4", f"scx_layered@1.1.4 {LAYERED}", ok=True, kernel=KERNEL_73)
    _ran_throughout(m, "1.1.4")
