"""numalab matrix lava: a matrix as LAVA jobs (the job's shape, pinned by a golden file with the run's token and
paths taken out), the pairing and order of A/B, the dispatcher's log read back, and one-line errors for what
LAVA cannot run. tests/vm/test_vm_lava.py runs a job set with the real lava-run."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from common import BOOT, HOST, REPO, assert_one_line_error, numalab

from lab.errors import LabError
from lab.kernel.resolve import Kernel
from lab.matrix import lava, lava_import
from lab.matrix.definition import parse_matrix
from lab.run import batch as batch_mod
from lab.run.manifest import GuestImage
from lab.run.prepare import Prepared
from lab.vm.qemu.qemu_argv import topology_args

GOLDEN = REPO / "tests" / "golden" / "lava" / "ring-2-ab.job.yaml"
TOKEN = "0123456789abcdef0123456789abcdef"
SPEC = {
    "name": "lava-two", "topologies": ["ring-2"], "kernels": ["a", "b"],
    "workloads": [{"name": "numa01", "duration": 5}], "repeats": 2,
}  # fmt: skip


@pytest.fixture
def fake_runs(monkeypatch, tmp_path: Path):
    """requests_from_options and prepare without a kernel, a QEMU or a guest image: the job's shape only."""
    image = tmp_path / "bzImage"
    image.write_bytes(b"kernel")
    monkeypatch.setattr(batch_mod, "resolve_kernel", lambda name: Kernel(name, image, None, None, "6.1"))
    fake = SimpleNamespace(name="qemu", emulator=None, firmware_rom=lambda _f: "/usr/share/qemu/qboot.rom",
                           check_machine=lambda _t: None,
                           emulator_version=lambda: "QEMU emulator version 7.2.22")  # fmt: skip
    monkeypatch.setattr(batch_mod, "backend_of", lambda _opts: fake)
    monkeypatch.setattr(lava, "read_inventory", lambda: HOST)

    def prepare(trip):
        initrd = trip.scratch / "initrd.cpio"
        initrd.write_bytes(b"initrd")
        (trip.scratch / "share").mkdir()
        boot = replace(BOOT, kernel=str(image), initrd=str(initrd), results_dir=str(trip.scratch / "share"),
                       cmdline="console=ttyS0 loglevel=4", firmware="/usr/share/qemu/qboot.rom",
                       stage_token=TOKEN, name=f"numalab-{trip.run_id}")  # fmt: skip
        return Prepared(boot, trip.scratch / "share", GuestImage((), ("numa01",), 6), "bzimage", "qboot", "", None)

    monkeypatch.setattr(lava, "prepare", prepare)
    return image


def _neutral(text: str, root: Path) -> str:
    return text.replace(str(root.resolve()), "DIR").replace(TOKEN, "TOKEN")


def test_a_run_is_a_job_of_lavas_qemu_device_type_with_numalabs_machine(fake_runs, tmp_path: Path) -> None:
    spec = parse_matrix(SPEC, str(tmp_path / "m.yaml"), "m")
    out = tmp_path / "jobs"
    jobs = lava.write_jobs(spec, out, {}, lava.JobSetOptions(accel="tcg"))
    first = out / jobs[0].directory / lava.JOB
    text = _neutral(first.read_text(), out)
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()
    job = yaml.safe_load(first.read_text())
    extra = job["context"]["extra_options"]
    # the topology is numalab's own (qemu_argv.topology_args), but its -m: LAVA's template has -m {{ memory }}
    topo = spec.runs[0].topology.load()
    want = topology_args(topo, lava.plan_placement(topo, HOST, batch_mod.Backing()))[4:]
    flat = [w for item in extra for w in item.split(" ", 1)]
    assert all(flat[i:i + len(want)] == want for i in [flat.index(want[0])])  # fmt: skip
    assert job["context"]["memory"] == topo.total_memory_mib and "-m" not in flat and "-display" not in flat
    assert "-serial stdio" in extra and job["context"]["no_kvm"] is True
    sidecar = json.loads((out / jobs[0].directory / lava.SIDECAR).read_text())
    assert sidecar["boot"]["stage_token"] == TOKEN and sidecar["options"]["accel"] == "tcg"


def test_a_and_b_of_a_pair_share_a_device_slot_interleaved(fake_runs, tmp_path: Path) -> None:
    spec = parse_matrix(SPEC | {"topologies": ["ring-2", "ring-4"]}, str(tmp_path / "m.yaml"), "m")
    jobs = lava.write_jobs(spec, tmp_path / "jobs", {}, lava.JobSetOptions(devices=2))
    order = [(j.slot, j.run_id) for j in jobs]
    assert order == [
        (1, "ring-2.a.numa01.default.r1"), (1, "ring-2.b.numa01.default.r1"),
        (2, "ring-2.a.numa01.default.r2"), (2, "ring-2.b.numa01.default.r2"),
        (1, "ring-4.a.numa01.default.r1"), (1, "ring-4.b.numa01.default.r1"),
        (2, "ring-4.a.numa01.default.r2"), (2, "ring-4.b.numa01.default.r2"),
    ]  # fmt: skip
    listed = (tmp_path / "jobs" / "jobs.txt").read_text().splitlines()
    assert [ln.split()[0] for ln in listed] == ["1", "1", "2", "2", "1", "1", "2", "2"]
    tags = [yaml.safe_load((tmp_path / "jobs" / j.directory / lava.JOB).read_text())["tags"] for j in jobs]
    assert tags[0] == tags[1] == ["numalab-slot-1"] and tags[2] == ["numalab-slot-2"]
    script = (tmp_path / "jobs" / "run-lava.sh").read_text()
    assert script.index("001-ring-2.a") < script.index("002-ring-2.b") < script.index("003-ring-2.a")


def test_a_shard_is_whole_cells_and_names_its_spec(fake_runs, tmp_path: Path) -> None:
    spec = parse_matrix(SPEC | {"topologies": ["ring-2", "ring-4"]}, str(tmp_path / "m.yaml"), "m")
    parts = [lava.write_jobs(spec, tmp_path / f"s{i}", {}, lava.JobSetOptions(shard=(i, 2))) for i in (1, 2)]
    ids = [[j.run_id for j in p] for p in parts]
    assert sorted(ids[0] + ids[1]) == sorted(r.id for r in spec.runs) and not set(ids[0]) & set(ids[1])
    assert ids == [[r.id for r in spec.shard(i, 2)] for i in (1, 2)]  # (matrix run's shards: A and B together)
    meta = json.loads((tmp_path / "s2" / lava.JOBSET).read_text())
    assert meta == {"spec": spec.name, "source": spec.source, "fingerprint": spec.fingerprint(), "shard": [2, 2]}


def test_run_lava_runs_again_only_the_jobs_whose_log_has_no_end(fake_runs, tmp_path: Path) -> None:
    """The runner's resume, with a stand-in lava-run on PATH that logs its job and ends it as LAVA does."""
    spec = parse_matrix(SPEC, str(tmp_path / "m.yaml"), "m")
    out = tmp_path / "jobs"
    jobs = lava.write_jobs(spec, out, {})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "lava-run"
    fake.write_text('#!/bin/sh\necho "ran $2" >> "$(dirname "$0")/calls"\n'
                    'echo \'{"lvl": "results", "msg": {"case": "job", "result": "pass"}}\' >&2\n')  # fmt: skip
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = out / jobs[0].directory
    (done / lava.LOG).write_text('{"lvl": "results", "msg": {"case": "job", "result": "fail"}}\n')  # a whole log
    half = out / jobs[1].directory
    (half / lava.LOG).write_text('{"lvl": "target", "msg": "booting"}\n')  # interrupted: no end
    subprocess.run([str(out / "run-lava.sh")], env=env, check=True, timeout=60)
    # the first job's log was whole: not run again; every other job ran once, in order (lava-run's --job-id N)
    calls = (bin_dir / "calls").read_text().split()
    assert calls == [w for n in range(2, len(jobs) + 1) for w in ("ran", str(n))] and len(jobs) >= 2
    assert lava_import.job_done(done) and lava_import.job_done(half) and "fail" in (done / lava.LOG).read_text()


def test_a_job_whose_boot_stalled_runs_once_more_and_its_stall_is_named(fake_runs, tmp_path: Path) -> None:
    """run-lava.sh: a job whose monitor timed out before the guest's booted mark (a TCG boot that stalled, as in
    stop 79's CI) runs once more, its log kept; one that timed out after the mark is a result, not run again. The
    monitor's own "Waiting for start message: ... booted" line in the log is not the mark. lava-import names the
    stalled attempt in the manifest's stalled_boots (the stand-in lava-run: a log as LAVA 2023.01 writes one)."""
    spec = parse_matrix(SPEC | {"kernels": ["a"], "repeats": 2}, str(tmp_path / "m.yaml"), "m")
    out = tmp_path / "jobs"
    jobs = lava.write_jobs(spec, out, {})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    boot = _line("04.000000", "info", "Boot command: /usr/bin/qemu-system-x86_64 -serial stdio")
    waiting = boot + "\n" + _line("04.012310", "info", f"Waiting for start message: NUMALAB-STAGE {TOKEN} booted")
    booted = _line("11.000000", "target", f"NUMALAB-STAGE {TOKEN} booted 7.37")
    stall = _line("28.290811", "target", "[   23.324549] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:")
    error = {"error_msg": "lava-test-monitor timed out after 136 seconds", "error_type": "Test"}
    timed_out = _line("59.100000", "results", {"case": "job", "definition": "lava", **error, "result": "fail"})
    passed = _line("20.000000", "results", {"case": "job", "definition": "lava", "result": "pass"})
    # job 1: its first attempt stalls, its second passes; job 2: booted, then its workload hangs
    (bin_dir / "lava-run").write_text(f"""#!/bin/sh
calls="$(dirname "$0")/calls"; echo "$2" >> "$calls"
echo '{waiting}' >&2
if [ "$2" = 1 ] && [ "$(grep -c '^1$' "$calls")" = 1 ]; then echo '{stall}' >&2; echo '{timed_out}' >&2; exit 1; fi
echo '{booted}' >&2
if [ "$2" = 2 ]; then echo '{timed_out}' >&2; exit 1; fi
echo '{passed}' >&2
""")  # fmt: skip
    (bin_dir / "lava-run").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    ran = subprocess.run([str(out / "run-lava.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1  # (job 2's hang is a result: the set did not all pass)
    assert (bin_dir / "calls").read_text().split() == ["1", "1", "2"]
    first, second = (out / j.directory for j in jobs)
    assert "the boot stalled before init; running the job once more" in ran.stderr
    assert "rcu_preempt" in (first / "output.stalled-1.yaml").read_text() and "pass" in (first / lava.LOG).read_text()
    assert not (second / "output.stalled-1.yaml").exists()
    (sb,) = lava_import.stalled_attempts(first, 136)
    assert sb["attempt"] == 1 and sb["deadline_s"] == 136 and sb["vm_at_timeout"] is None and sb["vm_s"] == 55.1
    assert sb["console_tail"][-1].endswith("detected stalls on CPUs/tasks:") and "timed out" in sb["lava_error"]
    assert lava_import.stalled_attempts(second, 136) == ()


def test_what_lava_cannot_run_is_a_one_line_error(tmp_path: Path) -> None:
    spec = tmp_path / "m.yaml"
    spec.write_text("topologies: [ring-2]\nkernels: [stock]\nworkloads: [numa01]\n"
                    "settings: [{name: q10, qemu: backports}]\n")  # fmt: skip
    proc = numalab("matrix", "lava", str(spec), "--out", str(tmp_path / "out"))
    assert_one_line_error(proc, "run ring-2.stock.numa01.q10.r1: settings q10: qemu: backports: LAVA's qemu device "
                          "type runs the worker's qemu-system-x86_64")  # fmt: skip
    assert not (tmp_path / "out").exists()
    spec.write_text("topologies: [ring-2]\nworkloads: [numa01]\nsettings: [{name: s, remote_latency: slit}]\n")
    assert_one_line_error(numalab("matrix", "lava", str(spec), "--out", str(tmp_path / "out")),
                          "remote_latency: slit: the TCG plugin does not run under LAVA")  # fmt: skip
    assert_one_line_error(numalab("matrix", "lava", str(tmp_path / "none.yaml"), "--out", str(tmp_path / "o")),
                          "no such file or example")  # fmt: skip
    assert_one_line_error(numalab("matrix", "lava-import", str(tmp_path), "--out", str(tmp_path / "runs")),
                          "no LAVA job of numalab's here")  # fmt: skip


def test_write_jobs_refuses_a_used_directory_and_a_wrong_device_types_dir(fake_runs, tmp_path: Path) -> None:
    spec = parse_matrix(SPEC, str(tmp_path / "m.yaml"), "m")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    with pytest.raises(LabError, match=r"^--out .*/used: not empty; give a new directory$"):
        lava.write_jobs(spec, tmp_path / "used", {})
    with pytest.raises(LabError, match=r"^--device-types .*: no qemu.jinja2 there"):
        lava.write_jobs(spec, tmp_path / "new", {}, lava.JobSetOptions(device_types=tmp_path))
    with pytest.raises(LabError, match=r"^--devices 0: at least 1$"):
        lava.write_jobs(spec, tmp_path / "new", {}, lava.JobSetOptions(devices=0))


def _line(t: str, lvl: str, msg) -> str:
    return json.dumps({"dt": f"2026-11-28T14:05:{t}", "lvl": lvl, "msg": msg})


LOG = [
    _line("38.000000", "info", "lava-dispatcher, installed at version: 2023.01"),
    _line("38.639000", "info", "Boot command: /usr/bin/qemu-system-x86_64 -nographic -m 1024 -serial stdio"),
    _line("41.510000", "target", f"NUMALAB-STAGE {TOKEN} booted 2.53"),
    _line("41.600000", "target", "NUMALAB-STAGE feedfacefeedfacefeedfacefeedface workload-end 0 3.00"),
    '{"dt": "2026-11-28T14:05:41.622654", "lvl": "results", "msg": {"case": "topology", "definition": "numalab", '
    '"measurement": ! "2.65", "result": "pass"}}',
    _line("41.622000", "target", f"NUMALAB-STAGE {TOKEN} topology 2.65"),
    # the guest's last line after the monitor ended: "feedback", as 2023.01 logged a done mark under load
    _line("47.060000", "feedback", f"NUMALAB-STAGE {TOKEN} done 8.09"),
    _line("47.293000", "results", {"case": "job", "definition": "lava", "result": "pass"}),
]


@pytest.mark.parametrize("form", ["lava-run", "server"])
def test_the_job_log_is_the_console_at_the_dispatchers_time(form: str) -> None:
    """lava-run's standard error (a JSON object a line) and a server's log (a YAML list of them) alike: the marks
    with the run's token at the dispatcher's time from QEMU's start, the others kept aside as forged."""
    text = "\n".join(LOG if form == "lava-run" else [f"- {ln}" for ln in LOG]) + "\n"
    log = lava_import.read_job_log(text)
    assert log.command.endswith("-serial stdio") and log.status == "Complete"
    assert [m["case"] for m in log.results] == ["topology", "job"] and float(log.results[0]["measurement"]) == 2.65
    outcome = lava_import.outcome_of(log, TOKEN)
    assert [(s.name, round(s.host_s, 2), s.guest_uptime) for s in outcome.stages] == [
        ("booted", 2.87, 2.53), ("topology", 2.98, 2.65), ("done", 8.42, 8.09)]  # fmt: skip
    assert outcome.forged_count == 1 and outcome.exit_code == 0 and not outcome.timed_out
    assert round(log.wall_s, 2) == 8.65


@pytest.mark.parametrize("where", ["beside", "extra"])
def test_a_job_that_ended_before_the_guest_did_is_a_vm_failure(where: str) -> None:
    # (lava-run 2023.01 writes the error beside the result, as stop 79's CI log has it)
    error = {"error_msg": "lava-test-monitor timed out after 136 seconds", "error_type": "Test"}
    failed = {"case": "job", "definition": "lava"} | (error if where == "beside" else {"extra": error})
    text = "\n".join([*LOG[:3], _line("59.0", "results", failed | {"result": "fail"})])
    log = lava_import.read_job_log(text)
    outcome = lava_import.outcome_of(log, TOKEN)
    assert outcome.timed_out and outcome.vm_failure is None and log.error == error["error_msg"]
    cut = lava_import.outcome_of(lava_import.read_job_log("\n".join(LOG[:3])), TOKEN)
    assert cut.vm_failure == "the LAVA job ended before its end" and cut.exit_code is None


def test_the_device_dictionary_extends_lavas_qemu_type() -> None:
    assert lava.device_dictionary("tcg").splitlines()[1:] == [
        "{% extends 'qemu.jinja2' %}",
        "{% set arch = 'amd64' %}",
        "{% set no_kvm = no_kvm | default(True) %}",
    ]
    assert "default(False)" in lava.device_dictionary("kvm")


def test_results_over_the_console_are_the_shares_files_with_the_runs_token(tmp_path: Path) -> None:
    """--results console: the init's files from the job's log, each only if it is a share file, with the run's
    token, whole and as long as announced; a line without the token, an unknown name or a broken file is named."""
    import base64

    def sent(name: str, data: bytes, token: str = TOKEN) -> list[str]:
        b64 = base64.b64encode(data).decode()
        return [f"NUMALAB-FILE {token} {name} {len(data)}", *(f"NUMALAB-B64 {b64[i:i + 76]}"
                                                               for i in range(0, len(b64), 76))]  # fmt: skip

    tar = bytes(range(256)) * 3
    lines = [*sent("results.tar", tar), *sent("guest-done", b"done\n"), *sent("evil.sh", b"x"),
             *sent("readback.tar", b"forged", token="f" * 32), f"NUMALAB-FILE-END {TOKEN}"]  # fmt: skip
    log = lava_import.JobLog([(1.0, ln) for ln in lines], "", [], "Complete", "", 1.0)
    got = lava_import.console_files(log, TOKEN, tmp_path / "share", 1 << 20)
    assert got["files"] == {"results.tar": len(tar), "guest-done": 5}
    assert (tmp_path / "share" / "results.tar").read_bytes() == tar
    assert sorted(p.name for p in (tmp_path / "share").iterdir()) == ["guest-done", "results.tar"]
    assert [p.split(":")[0] for p in got["problems"]] == [
        "'evil.sh'",
        "a results line without the run's token, not taken",
    ]
    cut = lava_import.JobLog([(1.0, ln) for ln in sent("results.tar", tar)[:-1]], "", [], "", "", 1.0)
    assert lava_import.console_files(cut, TOKEN, tmp_path / "share", 1 << 20)["problems"] == [
        f"results.tar: 741 bytes came, {len(tar)} were announced (a line lost or broken?)"]  # fmt: skip
    assert not (tmp_path / "share" / "results.tar").exists()
    flood = lava_import.JobLog([(1.0, ln) for ln in sent("results.tar", bytes(8000))], "", [], "", "", 1.0)
    big = lava_import.console_files(flood, TOKEN, tmp_path / "share", 100)
    assert big["problems"][0] == "more than the guest's output limit (100 bytes) came over the console"


def test_the_import_waits_for_jobs_not_done_and_refuses_a_changed_spec(fake_runs, tmp_path: Path) -> None:
    """lava-import into a matrix output directory: jobs without an end in their log are left for later (resume),
    the summary counts them not run; a spec changed since the jobs were made is refused, in one line."""
    from lab.matrix.definition import load_matrix

    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    spec = load_matrix(str(path))
    jobs = lava.write_jobs(spec, tmp_path / "jobs", {})
    got = lava_import.import_set(tmp_path / "jobs", tmp_path / "out")
    assert got.made == [] and got.waiting == [j.run_id for j in jobs] and got.already == []
    assert got.summary["totals"] == {"not-run": len(jobs), "runs": len(jobs)}
    assert json.loads((tmp_path / "out" / "matrix.json").read_text())["fingerprint"] == spec.fingerprint()
    proc = numalab("matrix", "lava-import", str(tmp_path / "jobs"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 1 and f"{len(jobs)} job(s) not done yet" in proc.stdout, proc.stdout + proc.stderr
    path.write_text(yaml.safe_dump(SPEC | {"repeats": 3}))
    assert_one_line_error(numalab("matrix", "lava-import", str(tmp_path / "jobs"), "--out", str(tmp_path / "o2")),
                          "has changed since the jobs were made")  # fmt: skip
