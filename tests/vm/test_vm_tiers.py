"""Memory tiers on real VMs: a tiered preset boots (direct QEMU and a real libvirtd) and its tiers read back
as predicted; a tiering run with kernel.numa_balancing=2 promotes and demotes where mode 0 does not.

The guest kernel is the stock Debian 6.1 one (the default; it loads dax_hmem and kmem as modules), and in the last
test the built baseline, whose default fragments include kernel-configs/tiering.config (ACPI_HMAT, HMEM_REPORTING,
EFI_SOFT_RESERVE, DEV_DAX_HMEM, DEV_DAX_KMEM and MEMORY_HOTPLUG built in).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from common import REPO, needs_setup_package, numalab

from lab.topology.model.spec import load_topology
from lab.topology.model.tiers import predict_tiers

pytestmark = [pytest.mark.vm, pytest.mark.usefixtures("host_shared")]  # (a real libvirtd)


def _run(tmp_path: Path, name: str, *args: str) -> dict:
    out = tmp_path / name
    proc = numalab("run", *args, "--out", str(out), "--json", "--timeout", "300", timeout=420)
    assert proc.stdout, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _check_tiers(manifest: dict, preset: str) -> None:
    assert manifest["status"] == "ok", (manifest["reason"], manifest["guest_topology"]["problems"])
    assert manifest["guest_topology_ok"] is True
    topo = load_topology(preset)
    want = predict_tiers(topo)
    assert manifest["topology"]["kernel_view"]["memory_tiers"]["tiers"] == want["tiers"]
    got = manifest["guest_topology"]["readback"]["memory_tiers"]
    assert got["tiers"] == want["tiers"]
    for node, hmat in want["hmat_access0"].items():
        for key in ("read_latency", "write_latency", "read_bandwidth", "write_bandwidth"):
            assert got["hmat_access0"][node][key] == hmat[key], (node, key)
    nodes = manifest["guest_topology"]["readback"]["nodes"]
    for node in topo.tiers.slow_nodes:
        assert nodes[str(node)]["cpus"] == []
        assert nodes[str(node)]["memtotal_mib"] == topo.nodes[node].memory_mib  # all of it, onlined by kmem


def test_tiered_2s_cxl_boots_and_reads_back_its_tiers(tmp_path):
    m = _run(tmp_path, "q", "--topology", "tiered-2s-cxl", "--workload", "idle", "--duration", "1", "--no-trace")
    _check_tiers(m, "tiered-2s-cxl")
    cmdline = (tmp_path / "q" / "cmdline.txt").read_text()
    # the slow nodes above 4 GiB, where the first one starts q35's RAM above it (lab.topology.model.tiers)
    assert "memmap=256M%4096M-1+0xefffffff" in cmdline and "memhp_default_state=online" in cmdline
    assert "-numa hmat-lb" not in cmdline
    assert "q35,hmat=on,max-ram-below-4g=1024M" in (tmp_path / "q" / "qemu-argv.txt").read_text()


@pytest.mark.libvirt
def test_tiered_2s_cxl_through_a_real_libvirtd(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "lab.host.libvirtd", "up", "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    m = _run(tmp_path, "lv", "--backend", "libvirt", "--accel", "tcg", "--topology", "tiered-2s-cxl",
             "--workload", "idle", "--duration", "1", "--no-trace")  # fmt: skip
    assert m["backend"]["name"] == "libvirt"
    _check_tiers(m, "tiered-2s-cxl")
    assert "<interconnects>" in (tmp_path / "lv" / "domain.xml").read_text()
    # max-ram-below-4g, which libvirt 9.0 has no element for: a second -machine, merged by QEMU
    assert "-machine max-ram-below-4g=1024M" in (tmp_path / "lv" / "qemu.log").read_text()


def test_tiering_mode_2_promotes_and_demotes_against_mode_0(tmp_path):
    common = ("--topology", "tiered-1s-far", "--workload", "tiering", "--duration", "12")
    tiering = _run(tmp_path, "mode2", *common, "--numa-balancing", "tiering")
    off = _run(tmp_path, "mode0", *common, "--numa-balancing", "off")
    for m in (tiering, off):
        _check_tiers(m, "tiered-1s-far")
    assert "numa_balancing 2" in tiering["settings"]["readback"]
    assert "demotion_enabled true" in tiering["settings"]["readback"]
    assert "numa_balancing 0" in off["settings"]["readback"]
    v2, v0 = tiering["metrics"]["vmstat"], off["metrics"]["vmstat"]
    assert v2["pgpromote_success"] > 0 and v2["pgpromote_candidate"] > 0
    assert v2["pgdemote_kswapd"] + v2["pgdemote_direct"] > 0
    assert v0["pgpromote_success"] == 0 and v0["pgpromote_candidate"] == 0
    # the traced migrations, by reason: promotions are NUMA balancing's numa_misplaced ones
    reasons = tiering["metrics"]["numa"]["migrate_pages"]
    # (the trace is on only around the workload, inside the vmstat window)
    # numa_misplaced is every NUMA-balancing migration: promotions, and the odd move between fast nodes
    # (seen: 10,359 traced = numa_pages_migrated, of which 10,356 were promotions)
    assert 0 < reasons["numa_misplaced"]["succeeded"] <= v2["numa_pages_migrated"]
    assert 0 < v2["pgpromote_success"] <= v2["numa_pages_migrated"]
    assert reasons["demotion"]["succeeded"] > 0

    proc = numalab("compare", "--baseline", str(tmp_path / "mode0"), "--new", str(tmp_path / "mode2"),
                   "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {r["metric"]: r for r in json.loads(proc.stdout)["metrics"]}
    assert rows["vmstat.pgpromote_success"]["baseline"]["amean"] == 0
    assert rows["vmstat.pgpromote_success"]["new"]["amean"] == v2["pgpromote_success"]
    assert rows["migrate.demotion"]["new"]["amean"] > 0
    text = numalab("compare", "--baseline", str(tmp_path / "mode0"), "--new", str(tmp_path / "mode2")).stdout
    assert "(balancing tiering)" in text and "vmstat.pgpromote_success" in text


LINUX_SOURCE = Path("/usr/src/linux-source-6.1.tar.xz")


@pytest.mark.kernel_build
@needs_setup_package(LINUX_SOURCE.exists(), str(LINUX_SOURCE), "linux-source-6.1")
def test_the_built_baseline_tiers_and_promotes(tmp_path):
    """kernel-configs/tiering.config is one of the default fragments: the baseline has HMAT, soft-reserved memory
    and dax kmem built in (so device_dax takes the dax device first, and the init moves it to kmem), and asking for
    the fragment again is the same build, not a second one. A cache hit of the suite's baseline, which another
    module may be building (the source's build lock waits for it)."""
    built = {}
    for name, extra in (("baseline", ()), ("tiering", ("--fragment", "tiering"))):
        proc = numalab("kernel", "build", "--name", name, *extra, "--json", "--quiet", timeout=2400)
        assert proc.returncode == 0, proc.stderr[-3000:]
        built[name] = json.loads(proc.stdout)
    assert built["tiering"]["key"] == built["baseline"]["key"] and built["tiering"]["cached"] is True
    config = (Path(built["baseline"]["path"]) / "config").read_text()
    assert "CONFIG_DEV_DAX_KMEM=y" in config and "CONFIG_ACPI_HMAT=y" in config
    m = _run(tmp_path, "boot", "--kernel", "baseline", "--topology", "tiered-2s-cxl", "--workload", "idle",
             "--duration", "1", "--no-trace")  # fmt: skip
    _check_tiers(m, "tiered-2s-cxl")
    m = _run(tmp_path, "mode2", "--kernel", "tiering", "--topology", "tiered-1s-far", "--workload", "tiering",
             "--duration", "10", "--numa-balancing", "tiering")  # fmt: skip
    _check_tiers(m, "tiered-1s-far")
    assert m["metrics"]["vmstat"]["pgpromote_success"] > 0
