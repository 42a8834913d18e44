"""``numalab topo vng-args``: virtme-ng options for a topology, and a real vng boot with them."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from common import HOST, REPO, assert_one_line_error, numalab

from lab.placement.pinning import plan_placement
from lab.topology.model.spec import load_topology
from lab.vm.qemu.vng_args import vng_args

DATA = REPO / "tests" / "data" / "topologies"


def _pairs(args: list[str], opt: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == opt]


def test_ring4_options() -> None:
    topo = load_topology("ring-4")
    args, notes = vng_args(topo)
    assert args[:4] == ["--cpus", "8,sockets=4,cores=2,threads=1", "--memory", "2048M"]
    assert _pairs(args, "--numa") == ["512M,cpus=0-1", "512M,cpus=2-3", "512M,cpus=4-5", "512M,cpus=6-7"]
    # symmetric: one entry per pair, the values of the SLIT (ring: 1 hop 20, 2 hops 30)
    assert _pairs(args, "--numa-distance") == ["0,1=20", "0,2=30", "0,3=20", "1,2=20", "1,3=30", "2,3=20"]
    assert "--pin" not in args and any("not bound" in n for n in notes)


def test_cpuless_node_and_threads() -> None:
    args, _ = vng_args(load_topology(str(DATA / "valid-cpuless.yaml")))
    assert _pairs(args, "--numa") == ["512M,cpus=0-1", "512M,cpus=2-3", "256M"]
    args, _ = vng_args(load_topology("ring-4").with_overrides(cpus_per_node=4, threads=2))
    assert _pairs(args, "--cpus") == ["16,sockets=4,cores=2,threads=2"]


def test_asymmetric_slit_is_given_in_full() -> None:
    topo = load_topology("ring-2")
    topo = replace(topo, distances=((10, 20), (30, 10)))
    args, _ = vng_args(topo)
    assert _pairs(args, "--numa-distance") == ["0,1=20", "1,0=30"]


def test_pins_follow_the_placement() -> None:
    topo = load_topology("ring-2")  # 2 nodes x 2 vCPUs on the 2-node test host: one CPU each
    placement = plan_placement(topo, HOST, pinning="cpu")
    args, _ = vng_args(topo, placement)
    assert _pairs(args, "--pin") == [",".join(str(p[0]) for p in placement.vcpu_pins)]
    node = plan_placement(topo, HOST, pinning="node")
    args, notes = vng_args(topo, node)
    assert "--pin" not in args and any("no --pin" in n for n in notes)


def test_cli() -> None:
    proc = numalab("topo", "vng-args", "ring-4", "--no-pin")
    assert proc.returncode == 0, proc.stderr
    assert shlex.split(proc.stdout) == vng_args(load_topology("ring-4"))[0]
    assert "numalab: note:" in proc.stderr
    proc = numalab("topo", "vng-args", "mesh-2", "--json", "--cpus-per-node", "1")
    data = json.loads(proc.stdout)
    assert "--numa" in data["args"] and data["notes"]
    assert_one_line_error(numalab("topo", "vng-args", "nope"), "nope")
    assert_one_line_error(numalab("topo", "vng-args", str(DATA / "invalid-distance-256.yaml")), "256")


# --- a real vng boot ------------------------------------------------------------


def _vng() -> Path:
    exe = Path(sys.executable).parent / "vng"
    if not exe.exists():  # as make bench installs it (tests/bench/boot.sh)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "virtme-ng"], check=True, timeout=600)
    return exe


def _thread_affinity(stop: threading.Event, seen: dict[int, str], marker: str) -> None:
    """Poll the QEMU process with ``marker`` in its command line: each thread's allowed CPUs, by thread id."""
    while not stop.is_set():
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if (
                    marker not in Path(f"/proc/{pid}/cmdline").read_text()
                    or "qemu" not in Path(f"/proc/{pid}/comm").read_text()
                ):
                    continue
                for task in Path(f"/proc/{pid}/task").iterdir():
                    lines = (task / "status").read_text().splitlines()
                    seen[int(task.name)] = next(ln.split()[1] for ln in lines if ln.startswith("Cpus_allowed_list"))
            except (OSError, StopIteration):
                continue
        time.sleep(0.2)


@pytest.mark.vm
@pytest.mark.kernel_build
def test_vng_boots_the_topology(tmp_path: Path) -> None:
    """vng with our options boots a guest that sees our nodes, CPUs and SLIT, its vCPUs pinned as asked."""
    build = numalab("kernel", "build", "--quiet", "--name", "baseline", timeout=1800)
    assert build.returncode == 0, build.stderr[-2000:]
    from lab.host.accel import accel_verdict
    from lab.kernel.resolve import resolve_kernel

    kernel = resolve_kernel("baseline").image
    accel = accel_verdict(Path(kernel))["accel"]
    proc = numalab("topo", "vng-args", "ring-4", "--cpus-per-node", "1", "--mem-per-node", "256M",
                   "--pinning", "cpu", "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    opts = json.loads(proc.stdout)["args"]
    pins = _pairs(opts, "--pin")[0].split(",")
    assert len(pins) == 4

    out = tmp_path / "out"
    out.mkdir()
    script = (
        f"cd /sys/devices/system/node && for n in node*; do echo $n $(cat $n/cpulist) $(cat $n/distance) "
        f"$(sed -n 's/.*MemTotal: *\\([0-9]*\\) kB/\\1/p' $n/meminfo); done > {out}/nodes"
    )
    marker = str(out)  # in QEMU's command line (the --rwdir share)
    cmd = [str(_vng()), "-r", str(kernel), *(["--disable-kvm"] if accel == "tcg" else []), "--force-9p",
           "--rwdir", str(out), *opts, "--exec", script]  # fmt: skip
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    stop, seen = threading.Event(), {}
    poller = threading.Thread(target=_thread_affinity, args=(stop, seen, marker), daemon=True)
    poller.start()
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    finally:
        stop.set()
        poller.join(5)
    log = (run.stdout + run.stderr)[-3000:]
    assert (out / "nodes").exists(), f"vng did not run the script (exit {run.returncode}):\n{log}"
    rows = [ln.split() for ln in (out / "nodes").read_text().splitlines()]
    topo = load_topology("ring-4").with_overrides(cpus_per_node=1, mem_per_node_mib=256)
    assert [r[0] for r in rows] == [f"node{i}" for i in range(4)], rows
    for i, row in enumerate(rows):
        assert row[1] == str(i)  # one vCPU per node, in order
        assert [int(d) for d in row[2:6]] == list(topo.distances[i]), row
        assert 180 * 1024 < int(row[6]) <= 256 * 1024, row  # MemTotal of the node, in kB
    # vng pinned vCPU i to the i-th CPU of --pin (over QMP, once QEMU runs). QEMU does not name its threads
    # here (no debug-threads), but it starts the vCPU threads in vCPU order, and they alone leave the main
    # thread's affinity (the main thread's id is the process id, the lowest).
    assert len(seen) >= 5, seen
    main = seen[min(seen)]
    assert [cpus for tid, cpus in sorted(seen.items()) if cpus != main] == pins, seen
