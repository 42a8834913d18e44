"""The nested tier: numalab run inside a numalab guest, the path real users take.

The outer guest is a numalab topology booted under TCG with ``-cpu max`` (SVM with nested paging), so it
has KVM, and two or four NUMA nodes: a laptop and a two-socket workstation, on a host with neither
(lab.host.nested). The host's root is its read-only overlay root; numalab runs in it as an ordinary user
(``numalab-test``, group kvm, an ordinary PATH without /usr/sbin) with ``--accel auto``, and the records
come back. What each outer boot runs is one script, so one boot serves several checks:

* 2 host nodes: ``doctor`` finds KVM through the real probe (which boots the stock kernel under KVM); ring-4
  (2 guest nodes a host node) with numalab's own kernel under KVM (the stock one's boot took 51 of the step's 142
  s), traced, its topology and groups checked, its placement read from outside QEMU;
  a TCG-only option's one-line error under KVM (``--clock virtual``; the others' in tests/unit); a ring-2 run
  (numalab's own kernel, which boots in a fraction of the stock one's time) whose memory is moved from host node 0
  to node 1 mid-run (migrate_pages(2)), which must come out ``placement-broken``;
* 4 host nodes: ring-4 with numalab's own kernel (``baseline``), one guest node a host node, each vCPU
  on its node's CPU;
* a second libvirt host: after its script, the 2-node outer guest serves ``qemu:///system`` over ssh on a
  loopback port (lab.host.nested.libvirt_host; no boot of its own), and a matrix on this host spreads its
  runs over this host's libvirtd and the outer guest, one report for both.

The inner guests run at TCG speed (KVM over TCG), so the runs are short; each outer boot has a timeout. The outer
guests run on QEMU 10 (``--qemu backports``): on the system's 7.2 a 4-node outer guest froze for good, every CPU
taking an int3 in ``__schedule`` as its first inner KVM VM started (a stale translation under 7.2's multi-threaded
TCG, fixed in QEMU 8.1; docs/tcg.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from common import REPO, numalab, ordinary_user

from lab.host.nested import STALE_CODE_FIXED, NotServing, OuterGuest, libvirt_host
from lab.topology.model.ref import TopologyRef
from lab.vm.hang import describe
from lab.vm.qemu.emulator import qemu_version_tuple
from lab.vm.qemu.emulator import resolve as resolve_emulator

pytestmark = [pytest.mark.vm, pytest.mark.nested, pytest.mark.usefixtures("host_shared")]

USER = "numalab-test"
OUTER_TIMEOUT_S = 2100  # (11-12 min at a host load of 10; CI's host is quieter)
OUTER_QEMU = "backports"  # (make test runs make setup-qemu10 first)
INNER = "--timeout 600 --accel auto --json"  # (nested KVM boots at TCG's speed: 30-60 s for ring-4)

SCRIPT_2 = f"""
N=".venv/bin/python -m lab.cli"  # (this checkout's lab, whichever the venv was installed from)
step() {{ echo "== $1 $(date +%s)"; }}
step doctor
$N doctor --json > $NESTED_OUT/doctor.json 2> $NESTED_OUT/doctor.err; echo "doctor rc=$?"
step ring4
$N run --topology ring-4 --cpus-per-node 1 --mem-per-node 256M --kernel baseline --workload numa01 --duration 4 \\
  {INNER} --out $NESTED_OUT/ring4 > $NESTED_OUT/ring4.json 2> $NESTED_OUT/ring4.err; echo "ring4 rc=$?"
step tcg-only
for opt in "--clock virtual"; do  # (--remote-latency and --access-matrix: the same refusal, in tests/unit)
  $N run --accel kvm $opt --workload idle --duration 1 --out $NESTED_OUT/never > /dev/null 2>> $NESTED_OUT/tcg-only.err
  echo "$opt rc=$?" >> $NESTED_OUT/tcg-only.rc
done
step moved
$N run --topology ring-2 --cpus-per-node 1 --mem-per-node 256M --kernel baseline --workload idle --duration 20 \\
  {INNER} --out $NESTED_OUT/moved > $NESTED_OUT/moved.json 2> $NESTED_OUT/moved.err &
run=$!
for i in $(seq 400); do grep -qs workload-start $NESTED_OUT/.moved.partial/console.log && break; sleep 1; done
sleep 4
qemu=$(pgrep -u "$(id -u)" -f 'qemu-system.*-name numalab-' | head -1)
python3 tests/nested/move_memory.py "$qemu" 0 1 > $NESTED_OUT/move.txt 2>&1; echo "move rc=$?"
wait $run; echo "moved rc=$?"
step end
"""

SCRIPT_4 = f"""
N=".venv/bin/python -m lab.cli"  # (this checkout's lab, whichever the venv was installed from)
$N run --topology ring-4 --cpus-per-node 1 --mem-per-node 256M --kernel baseline --workload numa01 --duration 4 \\
  {INNER} --out $NESTED_OUT/ring4 > $NESTED_OUT/ring4.json 2> $NESTED_OUT/ring4.err; echo "ring4 rc=$?"
"""


@pytest.fixture(scope="module")
def user() -> str:
    """An ordinary user of this host (made once per machine): the inner numalab runs as it."""
    return ordinary_user(USER)


@pytest.fixture(scope="module")
def baseline_kernel() -> None:
    """numalab's own kernel (the kernel tier's ``baseline``; a cache hit when that tier ran first)."""
    proc = numalab("kernel", "build", "--name", "baseline", "-q", timeout=3600)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory, user, baseline_kernel):
    """The 2-node host; after its script, the same outer guest serves libvirt over ssh for a matrix over two
    hosts (test_a_matrix_over_two_libvirt_hosts_one_over_ssh): one boot for both. A failure of the serving
    part is that test's, not this fixture's."""
    base = tmp_path_factory.mktemp("nested-ring-2")
    out = base / "out"
    topo = TopologyRef("ring-2", cpus_per_node=2, mem_per_node="3G").load()
    ssh = SimpleNamespace(error=None, host=None, login=None, proc=None, out=base / "matrix")
    try:
        guest = OuterGuest(user=user, emulator=resolve_emulator(OUTER_QEMU), echo=print)
        with libvirt_host(topo, out, SCRIPT_2, guest, OUTER_TIMEOUT_S) as host:
            ssh.host = host
            print(f"the outer guest serves libvirt after {host.ready_s:.0f}s: {host.uri}")
            try:
                _matrix_over_ssh(ssh, base, host)
            except Exception as err:  # (the ssh test's failure; the script's records still come back)
                ssh.error = err
        res = host.result
    except NotServing as err:
        res, ssh.error = err.result, err
    assert res is not None, ssh.error
    log = (out / "script.log").read_text() if (out / "script.log").exists() else ""
    assert res.marks.get("script-exit") is not None, _why(res, log)
    return SimpleNamespace(out=res.out, result=res, ssh=ssh), log


def _why(res, log: str) -> str:
    """A failed outer guest, for the test's message: what became of it and where its vCPUs were first (pytest cuts
    a long message, and the stop 75 CI's showed only the result's repr), then its script's log and console."""
    head = [*res.lines("ring-2"), f"its vCPUs when stopped: {describe(res.hang)}", f"marks: {res.marks}"]
    return "\n".join([*head, "script log (end):", log[-1500:], "console (end):", res.console.read_text()[-3000:]])


@pytest.fixture(scope="module")
def four_nodes(tmp_path_factory, user, baseline_kernel):
    """The 4-node host through the command users have: numalab nested."""
    out = tmp_path_factory.mktemp("nested-ring-4") / "out"
    proc = numalab("nested", "--topology", "ring-4", "--cpus-per-node", "1", "--mem-per-node", "1536M", "--user", user,
                   "--qemu", OUTER_QEMU, "--timeout", str(OUTER_TIMEOUT_S), "--out", str(out), "--", "bash", "-c",
                   SCRIPT_4, timeout=OUTER_TIMEOUT_S + 300)  # fmt: skip
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "can freeze as inner KVM VMs" not in proc.stderr and "(QEMU 10." in proc.stderr, proc.stderr[-3000:]
    assert "[outer] booted 4 svm npt /dev/kvm" in proc.stdout and "[outer] done" in proc.stdout, proc.stdout[-3000:]
    assert "[outer] kvm-held" not in proc.stdout, proc.stdout[-3000:]  # (held only by a guest that serves)
    return SimpleNamespace(out=out), proc.stdout


def _manifest(res, name: str) -> dict:
    text = (res.out / f"{name}.json").read_text()
    assert text.strip(), (res.out / f"{name}.err").read_text()[-3000:]
    return json.loads(text)


def _outer_ended_well(res) -> None:
    assert not res.timed_out and res.marks.get("done") is not None and res.records == "all", (res, res.hang)
    assert qemu_version_tuple(f"QEMU emulator version {res.qemu['version']}") >= STALE_CODE_FIXED, res.qemu
    # KVM's static keys held still while it served (lab.host.nested: the freeze it prevents)
    assert "kvm-held" in res.marks, res.marks


def test_doctor_finds_kvm_through_the_real_probe_as_an_ordinary_user(two_nodes) -> None:
    res, log = two_nodes
    assert "doctor rc=0" in log, log
    doc = json.loads((res.out / "doctor.json").read_text())
    verdict = doc["accelerator"] if "accelerator" in doc else doc
    assert verdict["accel"] == "kvm", verdict
    assert verdict["kvm"]["ok"] is True
    assert len(doc["host"]["nodes"]) == 2, doc["host"]


def test_a_kvm_run_as_an_ordinary_user_on_a_two_node_host(two_nodes) -> None:
    res, log = two_nodes
    m = _manifest(res, "ring4")
    assert "ring4 rc=0" in log, (res.out / "ring4.err").read_text()[-3000:]
    assert m["status"] == "ok" and m["accelerator"]["name"] == "kvm", (m["status"], m["reason"])
    argv = m["backend"]["argv"]
    assert argv[argv.index("-accel") + 1] == "kvm" and argv[argv.index("-cpu") + 1] == "host"
    assert m["guest_topology_ok"] and m["kernel"]["identity"] == "verified"
    assert sum(m["metrics"]["events"].values()) > 0, m["metrics"]["events"]
    # Guest nodes 0 and 2 on host node 0, 1 and 3 on host node 1 (round-robin), each vCPU on its node's CPUs.
    p = m["placement"]
    assert p["memory_host_nodes"] == [0, 1, 0, 1] and p["host_nodes"] == 2
    assert p["check"]["held"] is True and p["check"]["samples"] >= 2, p["check"]
    mem = p["check"]["memory_by_host_node"]
    assert mem["0"]["bound_mib"] == 512 and mem["1"]["bound_mib"] == 512, mem
    assert set(mem["0"]["resident_mib"]) == {"0"} and set(mem["1"]["resident_mib"]) == {"1"}, mem
    assert [p["pinned"][str(v)] for v in range(4)] == p["vcpu_pins"]
    assert any("only partly real" in n for n in p["notes"]), p["notes"]
    # What differs from TCG, in the record: kvm-clock, no TCG delay-loop preset.
    assert "kvm-clock" in (res.out / "ring4" / "dmesg-boot.txt").read_text()
    assert " lpj=" not in (res.out / "ring4" / "cmdline.txt").read_text()


def test_tcg_only_options_are_one_line_errors_under_kvm(two_nodes) -> None:
    res, _log = two_nodes
    rcs = (res.out / "tcg-only.rc").read_text().splitlines()
    assert rcs == ["--clock virtual rc=2"], rcs  # (one of them: each call takes ~9 s in the outer guest)
    errors = [ln for ln in (res.out / "tcg-only.err").read_text().splitlines() if ln.startswith("numalab: error:")]
    assert len(errors) == 1 and all("TCG" in e for e in errors), errors
    assert "Traceback" not in (res.out / "tcg-only.err").read_text()


def test_memory_moved_mid_run_is_placement_broken(two_nodes) -> None:
    res, log = two_nodes
    assert "move rc=0" in log, (res.out / "move.txt").read_text()
    m = _manifest(res, "moved")
    assert m["accelerator"]["name"] == "kvm" and m["kernel"]["name"] == "baseline"
    assert m["status"] == "placement-broken", (m["status"], m["reason"])
    check = m["placement"]["check"]
    assert check["held"] is False
    assert any("bound to host node 0 has" in p and "on node 1" in p for p in check["problems"]), check
    assert "moved rc=1" in log  # a run that is not ok is exit 1


def test_four_host_nodes_one_guest_node_each_with_numalabs_kernel(four_nodes) -> None:
    res, log = four_nodes
    m = _manifest(res, "ring4")
    assert "ring4 rc=0" in log, (res.out / "ring4.err").read_text()[-3000:]
    assert m["status"] == "ok" and m["accelerator"]["name"] == "kvm", (m["status"], m["reason"])
    assert m["kernel"]["name"] == "baseline" and m["kernel"]["identity"] == "verified"
    p = m["placement"]
    assert p["memory_host_nodes"] == [0, 1, 2, 3] and p["host_nodes"] == 4
    assert p["pinning"] == "cpu" and p["vcpu_pins"] == ["0", "1", "2", "3"], p
    assert [p["pinned"][str(v)] for v in range(4)] == ["0", "1", "2", "3"]
    mem = p["check"]["memory_by_host_node"]
    assert p["check"]["held"] is True, p["check"]
    for node in "0123":
        assert mem[node]["bound_mib"] == 256 and set(mem[node]["resident_mib"]) == {node}, mem
    assert not [n for n in p["notes"] if "partly real" in n or "one NUMA node" in n], p["notes"]


SYSTEM = "qemu:///system"
TWO_HOSTS = """
name: two-hosts-ssh
topologies: [{{name: ring-2, cpus_per_node: 1, mem_per_node: 256M}}]
kernels: [baseline]
workloads: [{{name: idle, duration: 1}}]
repeats: 2
timeout: 600
hosts:
  - {{uri: "{local}", capacity: 1}}
  - {{uri: "{ssh}", capacity: 1}}
"""
MATRIX_TIMEOUT_S = 1500  # (two runs at once: ring-2 under TCG here, under nested KVM in the outer guest)


def _matrix_over_ssh(ssh: SimpleNamespace, base, host) -> None:
    """A matrix over two libvirt hosts: this host's system daemon (started as a host without systemd starts
    it, make libvirt-up), and the outer guest's over ssh through a port forwarded on 127.0.0.1 (fresh keys,
    its host key pinned)."""
    up = subprocess.run([sys.executable, "-m", "lab.host.libvirtd", "up", "--json"], cwd=REPO,
                        capture_output=True, text=True, timeout=120)  # fmt: skip
    assert up.returncode == 0, up.stderr
    clean = numalab("doctor", "--connect", SYSTEM, "--clean", timeout=300)
    assert clean.returncode == 0, clean.stderr
    ssh.login = subprocess.run(host.ssh.ssh_argv("id -nG; hostname"), capture_output=True, text=True, timeout=300)
    spec = base / "two-hosts.yaml"
    spec.write_text(TWO_HOSTS.format(local=SYSTEM, ssh=host.uri))
    ssh.proc = numalab("matrix", "run", str(spec), "--out", str(ssh.out), timeout=MATRIX_TIMEOUT_S)


def test_the_two_node_outer_guest_ended_and_sent_its_records(two_nodes) -> None:
    res = two_nodes[0].result
    _outer_ended_well(res)
    assert res.exit_code == 0, two_nodes[1][-3000:]


def test_a_matrix_over_two_libvirt_hosts_one_over_ssh(two_nodes) -> None:
    ssh = two_nodes[0].ssh
    if ssh.error is not None:
        raise ssh.error
    login, proc, out, host = ssh.login, ssh.proc, ssh.out, ssh.host
    # The login: the session's key, the pinned host key, the ordinary user in groups libvirt and kvm.
    assert login.returncode == 0, login.stderr
    groups, hostname = login.stdout.split("\n")[:2]
    assert {"libvirt", "kvm"} <= set(groups.split()) and hostname == "numalab-nested", login.stdout
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"] == {"ok": 2, "runs": 2}, summary["totals"]
    by_host = {r["host"]: r for r in summary["runs"]}
    assert set(by_host) == {SYSTEM, host.uri}, list(by_host)
    local = json.loads((out / by_host[SYSTEM]["dir"] / "manifest.json").read_text())
    remote = json.loads((out / by_host[host.uri]["dir"] / "manifest.json").read_text())
    assert local["backend"]["uri"] == SYSTEM and local["backend"]["local"] is True
    # The outer guest ran its run: its host name, nested KVM (this host has none), its two NUMA nodes.
    assert remote["backend"]["uri"] == host.uri and remote["backend"]["local"] is False
    assert remote["backend"]["hostname"] == "numalab-nested", remote["backend"]
    assert remote["accelerator"]["name"] == "kvm" and remote["backend"]["domain_type"] == "kvm", remote["accelerator"]
    # (placed by the backend against the guest's own inventory: its two nodes, one guest node each)
    placed = remote["backend"]["placement"]
    assert placed["host_nodes"] == 2 and placed["memory_host_nodes"] == [0, 1], placed
    # and that plan is the record's (the report's placement section), not this one-node host's
    assert {k: remote["placement"][k] for k in placed} == placed, remote["placement"]
    assert remote["backend"]["memnodes"] == {"0": "0", "1": "1"}, remote["backend"]["memnodes"]
    assert local["kernel"]["name"] == remote["kernel"]["name"] == "baseline"
    # One report for both: junit and the overview name every run.
    junit = (out / "junit.xml").read_text()
    html = (out / "index.html").read_text()
    for r in summary["runs"]:
        assert r["id"] in junit and r["id"] in html, r["id"]
    # The guest's sshd saw only this session's key; the guest's records came back.
    sshd = (host.out / "sshd.log").read_text()
    assert "Accepted publickey for numalab-test" in sshd and "Failed" not in sshd, sshd[-2000:]
