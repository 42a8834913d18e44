"""The libvirt backend against a real libvirtd: parity with direct QEMU, cleanup, two hosts, bad input.

The daemons are started the way a user without systemd starts them
(``python3 -m lab.host.libvirtd up``, behind ``make libvirt-up``): the
system daemon (qemu:///system) and a second, unprivileged session daemon
run as the system user ``numalab-session``, which plays the second host.
Both go through the storage API for images and results, as a remote host does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from common import REPO, assert_one_line_error, numalab

from lab.host import libvirtd
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import plan_placement
from lab.topology.model.spec import load_topology
from lab.vm.backend import BootSpec, VmRequest

pytestmark = [pytest.mark.vm, pytest.mark.libvirt, pytest.mark.usefixtures("host_shared")]

SYSTEM = "qemu:///system"
SESSION_USER = "numalab-session"
SESSION = libvirtd.session_uri(SESSION_USER)


@pytest.fixture(scope="module")
def daemons() -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "lab.host.libvirtd", "up", "--session-user", SESSION_USER, "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    uris = json.loads(proc.stdout)["uris"]
    # Start from clean daemons: an earlier test run that was killed can leave numalab-* domains behind
    # (the daemons outlive it), and the tests below count what is there.
    for uri in uris:
        clean = numalab("doctor", "--connect", uri, "--clean", timeout=300)
        assert clean.returncode == 0, clean.stderr
    return uris


def numalab_domains(uri: str) -> list[str]:
    import libvirt

    conn = libvirt.open(uri)
    try:
        return sorted(d.name() for d in conn.listAllDomains(0) if d.name().startswith("numalab-"))
    finally:
        conn.close()


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def test_daemons_up_gives_both_uris(daemons) -> None:
    assert daemons == [SYSTEM, SESSION]


def test_parity_with_direct_qemu(daemons, tmp_path: Path) -> None:
    lv = tmp_path / "libvirt"
    # One vCPU a node: the 2 host cores run 4 vCPU threads, not 8, so the guest's 15 s hold twice the work. With
    # two a node each vCPU got 1.9 s of CPU in the 15 s, and one run of a cold rehearsal (2026-11-28) made no NUMA
    # decision at all (37 pages migrated; another run of the same: 18 decisions).
    proc = numalab("run", "--backend", "libvirt", "--connect", SYSTEM, "--topology", "ring-4", "--cpus-per-node", "1",
                   "--workload", "numa01", "--duration", "15", "--out", str(lv), timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    m = manifest(lv)
    assert m["status"] == "ok" and m["guest_topology_ok"] is True
    assert m["backend"]["name"] == "libvirt" and m["backend"]["domain_type"] == m["accelerator"]["name"].replace(
        "tcg", "qemu"
    )
    events = m["metrics"]["events"]
    assert sum(events.get(f"sched_{k}_numa", 0) for k in ("move", "swap", "stick")) > 0, events
    report = subprocess.run(["trace-cmd", "report", "-i", str(lv / "trace.dat")], capture_output=True, text=True)
    assert report.returncode == 0 and "_numa:" in report.stdout
    # Pinning and binding went through <cputune>/<numatune>: libvirt reports the planned CPUs back.
    assert m["backend"]["vcpu_pin_info"] == {str(i): str(c) for i, c in enumerate(m["placement"]["vcpu_pins"])}
    assert numalab_domains(SYSTEM) == []

    q = tmp_path / "qemu"
    proc = numalab("run", "--topology", "ring-4", "--cpus-per-node", "1", "--workload", "idle", "--duration", "1",
                   "--out", str(q))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert manifest(q)["guest_topology"]["readback"] == m["guest_topology"]["readback"]


def test_a_machine_with_two_llcs_a_node_through_libvirt(daemons, tmp_path: Path) -> None:
    """spr-2s-2llc as a libvirt domain (<topology dies='2'>, <model vendor_id='GenuineIntel'>qemu64</model>): the
    guest's LLCs, package ids and MC/DIE domains are the prediction (the run's own CPU check), as on direct QEMU;
    a memoryless node and clusters, which libvirt 9.0 cannot start or say, are one-line refusals."""
    proc = numalab("run", "--backend", "libvirt", "--connect", SYSTEM, "--topology", "spr-2s-2llc", "--workload",
                   "idle", "--duration", "1", "--no-trace", "--out", str(tmp_path / "r"), timeout=400)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = manifest(tmp_path / "r")
    assert m["status"] == "ok" and m["guest_topology_ok"] is True, m["guest_topology"]["problems"]
    assert [d["name"] for d in m["guest_topology"]["sched_domains"]["0"]] == ["MC", "DIE", "NUMA"]
    # its Sapphire Rapids X CPUID (cpu_model 6/143), which <model> cannot say: QEMU's -global through
    # <qemu:commandline>, beside libvirt's own -cpu
    cpus = m["guest_topology"]["readback"]["cpus"]
    assert (cpus["vendor"], cpus["family"], cpus["model"]) == ("GenuineIntel", 6, 143)
    log = (tmp_path / "r" / "qemu.log").read_text()
    assert "-cpu qemu64,vendor=GenuineIntel" in log and "-global qemu64-x86_64-cpu.model=143" in log
    for topo, needle in (("memoryless-3", "node 1 is memoryless"), ("srf-2s-modules", "has no clusters")):
        proc = numalab("run", "--backend", "libvirt", "--connect", SYSTEM, "--topology", topo, "--workload", "idle",
                       "--duration", "1", "--out", str(tmp_path / topo), timeout=120)  # fmt: skip
        assert_one_line_error(proc, needle)
    assert numalab_domains(SYSTEM) == []


def test_an_uneven_machine_through_libvirt(daemons, tmp_path: Path) -> None:
    """nps2-uneven-llc (node 0 with two LLCs, node 1 with one) as a libvirt domain: <topology dies='3'> and a
    <cell cpus=> a node, which libvirt 9.0 passes as -numa node,cpus= (cpu indexes, the same mapping as
    numalab's -numa cpu): the guest's LLCs and domains are the prediction (the run's own CPU check)."""
    proc = numalab("run", "--backend", "libvirt", "--connect", SYSTEM, "--topology", "nps2-uneven-llc", "--workload",
                   "idle", "--duration", "1", "--no-trace", "--out", str(tmp_path / "r"), timeout=400)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = manifest(tmp_path / "r")
    assert m["status"] == "ok" and m["guest_topology_ok"] is True, m["guest_topology"]["problems"]
    domains = m["guest_topology"]["sched_domains"]
    assert [(d["name"], d["cpus"]) for d in domains["0"]] == [("MC", "0-1"), ("NODE", "0-3"), ("NUMA", "0-5")]
    assert [(d["name"], d["cpus"]) for d in domains["4"]] == [("MC", "4-5"), ("NUMA", "0-5")]
    assert numalab_domains(SYSTEM) == []


def test_vcpu_time_from_the_domains_vcpu_stats(daemons, tmp_path: Path) -> None:
    """Issue 26: the libvirt backend's vcpu_time comes from libvirt's vCPU statistics (vcpu.N.time and
    vcpu.N.delay), through the connection, as for a remote host; the same checks as direct QEMU's."""
    from test_vm_vcpu_time import check_vcpu_time

    out = tmp_path / "run"
    proc = numalab("run", "--backend", "libvirt", "--connect", SYSTEM, "--topology", "ring-2", "--workload",
                   "numa01", "--duration", "6", "--no-trace", "--out", str(out), timeout=400)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    m = manifest(out)
    assert m["status"] == "ok" and m["backend"]["name"] == "libvirt", m["reason"]
    vt = check_vcpu_time(m, "libvirt")
    assert vt["vcpus"][0]["slices"] is None  # libvirt does not give timeslices


def test_a_hanging_guest_times_out_with_where_it_was(daemons, tmp_path: Path) -> None:
    """A timeout through libvirt records the domain's state and every vCPU's RIP (QEMU's human monitor
    through libvirt), like direct QEMU, and leaves no domain behind. (Stop 76's CI found no vCPU halted, once; the
    guest reaches its hang in about 6 s of the 30, so the record's stages and vCPUs are in the messages now.)"""
    out = tmp_path / "hang"
    proc = numalab("run", "--backend", "libvirt", "--connect", SYSTEM, "--topology", "ring-2", "--workload", "idle",
                   "--duration", "1", "--test-fault", "hang", "--timeout", "30", "--out", str(out), "--json",
                   timeout=300)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "timeout"
    at = m["vm_at_timeout"]
    # the guest reached its hang before the timeout (else the vCPUs below are a boot's, not a hang's)
    assert "fault-hang" in [s["name"] for s in m["stages"]], (m["stages"], at)
    assert at["status"] == "running" and [v["cpu"] for v in at["vcpus"]] == list(range(4))
    assert all(v["rip"].startswith("ffffffff") for v in at["vcpus"]), at
    assert any(v["halted"] for v in at["vcpus"]), at
    assert "at the timeout: QEMU running; vCPUs: " in proc.stderr
    # libvirt's vCPU times, read twice a second apart, sort the hang as the guest's (lab.vm.hang.kind)
    assert all(0.0 <= v["busy"] <= 1.0 for v in at["vcpus"]), at
    assert at["kind"] in ("guest-idle", "guest-spinning") and "; the guest was " in m["reason"], at
    assert m["backend"]["domain"] not in numalab_domains(SYSTEM)


def test_a_panic_is_the_crashed_domain_and_a_printed_one_is_only_a_hint(daemons, tmp_path: Path) -> None:
    """libvirt's <panic model='isa'/>: the guest kernel's panic leaves the domain "crashed" (on_crash preserve),
    which makes the run a panic; the domain is gone afterwards."""
    out = tmp_path / "panic"
    proc = numalab("run", "--backend", "libvirt", "--connect", SYSTEM, "--topology", "ring-2", "--workload", "idle",
                   "--duration", "1", "--test-fault", "panic", "--out", str(out), "--json", timeout=300)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "panic", m["reason"]
    assert m["backend"]["exit"].startswith("crashed")
    assert '<panic model="isa"' in (out / "domain.xml").read_text()
    assert m["backend"]["domain"] not in numalab_domains(SYSTEM)


def test_sigterm_leaves_no_domain(daemons, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "lab.cli", "run", "--backend", "libvirt", "--connect", SESSION,
           "--topology", "ring-2", "--workload", "idle", "--duration", "60", "--out", str(out)]  # fmt: skip
    p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = ""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and "running idle" not in seen:
        line = p.stderr.readline()
        if not line:
            break
        seen += line
    assert "running idle" in seen, seen
    assert len(numalab_domains(SESSION)) == 1
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)  # (reaps it and closes its pipe)
    assert p.returncode == 143
    assert numalab_domains(SESSION) == []
    assert not out.exists()


# A second URI to the system daemon (not qemu:///system's spelling): a host numalab has no verdict for.
SYSTEM_AGAIN = "qemu+unix:///system?socket=/run/libvirt/libvirt-sock"


def _forget_verdict(uri: str) -> None:
    from lab.host.accel import _cache_file
    from lab.vm.libvirt.libvirt_backend import LibvirtBackend

    _cache_file(LibvirtBackend(uri).probe_host()["key"]).unlink(missing_ok=True)


def test_accel_auto_probes_the_libvirt_host(daemons, tmp_path: Path) -> None:
    """--accel auto on a libvirt host probes that host's daemon (its QEMU runs as its own user, with its
    own access to KVM), not this machine: the session daemon's user has no KVM here, so the run falls back
    to TCG, says why, and completes."""
    _forget_verdict(SESSION)
    out = tmp_path / "run"
    t0 = time.monotonic()
    proc = numalab("run", "--backend", "libvirt", "--connect", SESSION, "--accel", "auto", "--topology", "ring-2",
                   "--workload", "idle", "--duration", "1", "--out", str(out), timeout=600)  # fmt: skip
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    m = manifest(out)
    assert m["status"] == "ok" and m["accelerator"]["name"] == "tcg" and m["backend"]["domain_type"] == "qemu"
    reason = m["accelerator"]["reason"]
    assert "KVM is unusable on the libvirt host" in reason and SESSION in reason, reason
    assert "warning: KVM is unusable" in proc.stderr
    assert took < 300, f"the probe and the run took {took:.0f}s"
    assert numalab_domains(SESSION) == []
    # The verdict is cached for that host: the next run asks no probe.
    from lab.host.accel import accel_verdict
    from lab.vm.libvirt.libvirt_backend import LibvirtBackend

    assert accel_verdict(Path("/nonexistent"), LibvirtBackend(SESSION))["cached"] is True


def test_the_kvm_probe_boots_a_kvm_domain_on_the_host(daemons) -> None:
    """The system daemon offers KVM domains, so the probe really starts a transient <domain type='kvm'>
    there; on this machine KVM guests abort or hang, so it fails (within the probe's timeout), and a TCG
    domain boots instead. Nothing is left on the host."""
    from lab.host.accel import PROBE_TIMEOUT_S, accel_verdict
    from lab.kernel.stock import fetch_stock
    from lab.vm.libvirt.libvirt_backend import LibvirtBackend

    backend = LibvirtBackend(SYSTEM_AGAIN)
    assert backend.kvm_missing() == ""
    verdict = accel_verdict(fetch_stock() / "vmlinuz", backend, refresh=True)
    assert verdict["cached"] is False and verdict["uri"] == SYSTEM_AGAIN and verdict["host"]
    if verdict["accel"] == "kvm":
        assert verdict["kvm"]["ok"] is True
    else:
        kvm = verdict["kvm"]
        assert kvm["ok"] is False and kvm["seconds"] < PROBE_TIMEOUT_S + 30, verdict
        assert "numalab-probe-kvm-" in kvm["detail"] or "hung" in kvm["detail"], kvm  # a domain was started
        assert verdict["tcg"]["ok"] is True, verdict
        assert SYSTEM_AGAIN in verdict["warning"]
    assert numalab_domains(SYSTEM) == []


TWO_HOSTS = f"""
name: two-hosts
topologies: [ring-2]
workloads: [{{name: idle, duration: 1}}]
repeats: 4
hosts:
  - {{uri: "{SYSTEM}", capacity: 1}}
  - {{uri: "{SESSION}", capacity: 1}}
"""


def test_two_host_matrix_spreads_and_merges(daemons, tmp_path: Path) -> None:
    spec = tmp_path / "two.yaml"
    spec.write_text(TWO_HOSTS)
    outs = []
    for i in (1, 2):
        out = tmp_path / f"shard{i}"
        proc = numalab("matrix", "run", str(spec), "--shard", f"{i}/2", "--out", str(out), "--no-reports",
                       timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
        outs.append(out)
    merged = tmp_path / "merged"
    proc = numalab("matrix", "merge", *map(str, outs), "--out", str(merged))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((merged / "summary.json").read_text())
    assert summary["totals"] == {"ok": 4, "runs": 4}
    hosts = [r["host"] for r in summary["runs"]]
    assert set(hosts) == {SYSTEM, SESSION}, hosts
    for r in summary["runs"]:
        assert manifest(merged / r["dir"])["backend"]["uri"] == r["host"]


def test_doctor_lists_and_cleans_leftovers(daemons) -> None:
    import libvirt

    name = "numalab-leftover-test"
    xml = (f"<domain type='qemu'><name>{name}</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>"
           "<os><type arch='x86_64' machine='pc'>hvm</type></os></domain>")  # fmt: skip
    conn = libvirt.open(SYSTEM)
    try:
        conn.defineXML(xml)
    finally:
        conn.close()
    proc = numalab("doctor", "--connect", SYSTEM)
    assert proc.returncode == 0, proc.stderr
    assert f"leftover domain {name}" in proc.stdout and "--clean" in proc.stdout
    proc = numalab("doctor", "--connect", SYSTEM, "--clean", "--json")
    assert proc.returncode == 0, proc.stderr
    assert name in json.loads(proc.stdout)["libvirt"]["cleaned"]["domains"]
    assert numalab_domains(SYSTEM) == []


def test_clean_keeps_the_domain_of_a_live_owner_only(daemons, tmp_path: Path) -> None:
    """A domain's owner is the exact process that made it (pid and start time in its metadata): this
    process is alive, so its domain is kept; a process that has exited (its pid may be reused) is not."""
    import libvirt

    from lab.vm.libvirt.libvirt_leftovers import with_metadata

    gone = subprocess.Popen(["sleep", "0"])
    gone.wait()
    xml = ("<domain type='qemu'><name>{}</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>"
           "<os><type arch='x86_64' machine='pc'>hvm</type></os></domain>")  # fmt: skip
    live_xml = with_metadata(xml.format("numalab-owner-live"), tmp_path)
    dead_xml = with_metadata(xml.format("numalab-owner-gone"), tmp_path).replace(
        f'pid="{os.getpid()}"', f'pid="{gone.pid}"')  # fmt: skip
    # An older numalab recorded no start time: kept while its pid runs.
    old_xml = re.sub(r' pid_start="[^"]*"', "", with_metadata(xml.format("numalab-owner-old"), tmp_path))
    conn = libvirt.open(SESSION)
    try:
        live, dead, old = conn.defineXML(live_xml), conn.defineXML(dead_xml), conn.defineXML(old_xml)
        proc = numalab("doctor", "--connect", SESSION, "--clean", "--json")
        assert proc.returncode == 0, proc.stderr
        cleaned = json.loads(proc.stdout)["libvirt"]["cleaned"]
        assert "numalab-owner-gone" in cleaned["domains"] and "numalab-owner-live" in cleaned["kept"], cleaned
        assert set(numalab_domains(SESSION)) >= {"numalab-owner-live", "numalab-owner-old"}
        assert "numalab-owner-gone" not in numalab_domains(SESSION)
    finally:
        live.undefine()
        old.undefine()
        try:
            dead.undefine()
        except libvirt.libvirtError:
            pass
        conn.close()


def test_domain_name_clash_is_one_line(daemons, tmp_path: Path) -> None:
    import libvirt

    from lab.errors import LabError
    from lab.vm.libvirt.libvirt_backend import LibvirtBackend

    name = "numalab-clash-test"
    xml = (f"<domain type='qemu'><name>{name}</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>"
           "<os><type arch='x86_64' machine='pc'>hvm</type></os></domain>")  # fmt: skip
    conn = libvirt.open(SESSION)
    dom = conn.defineXML(xml)
    try:
        topo = load_topology("ring-2")
        boot = BootSpec(kernel="/nonexistent", initrd="/nonexistent", cmdline="", results_dir=str(tmp_path),
                        console_log=str(tmp_path / "console.log"), qmp_socket="", name=name)  # fmt: skip
        with pytest.raises(LabError, match="already exists") as err:
            LibvirtBackend(SESSION).run(VmRequest(topo, plan_placement(topo, read_inventory()), boot, tmp_path, 30))
        assert "\n" not in str(err.value) and "--clean" in str(err.value)
    finally:
        dom.undefine()
        conn.close()


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--connect", "qemu+tcp://127.0.0.1:1/system"], ["qemu+tcp://127.0.0.1:1/system", "unreachable"]),
        (["--connect", "qemu+unix:///system?socket=/nonexistent/libvirt-sock"], ["not running", "libvirtd up"]),
        (["--connect", "no-scheme"], ["--connect", "not a libvirt URI"]),
    ],
)
def test_bad_hosts_are_one_line(daemons, args, needles) -> None:
    proc = numalab("run", "--backend", "libvirt", *args, "--workload", "idle", "--duration", "1")
    assert_one_line_error(proc, *needles)


def test_host_lacking_the_image_is_one_line(daemons, tmp_path: Path) -> None:
    pool = f"/var/tmp/numalab-empty-{tmp_path.name}"
    proc = numalab(
        "run",
        "--backend",
        "libvirt",
        "--connect",
        SYSTEM,
        "--pool-dir",
        pool,
        "--no-upload",
        "--topology",
        "ring-2",
        "--workload",
        "idle",
        "--duration",
        "1",
        "--out",
        str(tmp_path / "r"),
    )
    # Found when the run stages its files, after the progress lines: the error itself is one line, and last.
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("numalab: error:")]
    assert len(errors) == 1 and proc.stderr.splitlines()[-1] == errors[0], proc.stderr
    assert all(n in errors[0] for n in (SYSTEM, "lacks the kernel image", pool)), errors[0]
    assert not (tmp_path / "r").exists()
    assert numalab_domains(SYSTEM) == []
    import libvirt

    from lab.vm.libvirt.libvirt_hostspec import HostSpec

    conn = libvirt.open(SYSTEM)
    try:
        conn.storagePoolLookupByName(HostSpec(SYSTEM, pool_dir=pool).pool_name).destroy()
    finally:
        conn.close()


def test_a_hostile_guest_through_libvirt(daemons, tmp_path: Path) -> None:
    """The same attack as tests/vm/test_vm_guest_isolation.py, on the session daemon (the second host):
    accessmode='mapped' keeps the guest's links and setuid bits as metadata, only the files the guest
    init sends are downloaded, and the run stops at the output limit."""
    target = tmp_path / "host-file"
    target.write_text("a host file\n")
    out = tmp_path / "run"
    proc = numalab("run", "--backend", "libvirt", "--connect", SESSION, "--accel", "tcg", "--topology", "ring-2",
                   "--workload", "idle", "--duration", "1", "--test-fault", f"hostile={target}",
                   "--guest-output-limit", "16M", "--out", str(out), "--json", timeout=600)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "limit-exceeded", m["reason"]
    assert target.read_text() == "a host file\n"
    assert m["guest_share"]["special"] == []
    assert not any("suid" in f or f == "link" for f in m["files"])
    assert numalab_domains(SESSION) == []
