"""--scheduler without a VM: its words, the refusals that need no boot, what the guest's scheduler-state.txt and
the kernel's log make of a run (lab.run.scheduler), the status, the plan and the matrix's scheduler axis."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from lab.analysis.scheduler_class import side_names
from lab.errors import LabError
from lab.guest.settings import GuestSettings
from lab.kernel.bootable import Kernel
from lab.kernel.fragments import load_fragments
from lab.kernel.sched_ext import key_part, wants_schedulers
from lab.matrix.definition import parse_matrix
from lab.run.options import RunOptions
from lab.run.scheduler import Scheduler, check_early, fragments_for, readback, resolve, split
from lab.run.status import STATUSES, Evidence, classify

ENABLED = """before disabled -
before_enable_seq 0
before_nr_rejected 0
waited_ds 3
start enabled simple
start_enable_seq 1
start_nr_rejected 0
end {end}
end_enable_seq {seq}
end_nr_rejected 0
end_alive {alive}
exit 0
after disabled -
after_enable_seq 1
after_nr_rejected 0
"""
ASKED = {"asked": "scx_simple", "kind": "sched_ext", "binary_sha256": "ab", "source": "kernel:v6.12"}


def _record(tmp_path: Path, end: str = "enabled simple", seq: int = 1, alive: int = 1, dmesg: str = "") -> Path:
    (tmp_path / "scheduler-state.txt").write_text(ENABLED.format(end=end, seq=seq, alive=alive))
    (tmp_path / "dmesg.txt").write_text(dmesg)
    (tmp_path / "scheduler.out").write_text("local=10 global=3\n")
    return tmp_path


def test_a_scheduler_enabled_throughout_is_not_ejected(tmp_path) -> None:
    got, reason = readback(_record(tmp_path), ASKED, "simple")
    assert reason is None and got["ejected"] is False
    assert got["start"] == {"state": "enabled", "ops": "simple", "enable_seq": 1, "nr_rejected": 0}
    assert got["end"]["ops"] == "simple" and got["exit"] == 0 and got["waited_s"] == 0.3


def test_an_ejected_scheduler_says_why_in_the_kernels_words(tmp_path) -> None:
    dmesg = ('[    9.1] sched_ext: BPF scheduler "qmap" disabled (scx_bpf_error)\n'
             "[    9.1] sched_ext: qmap: test triggering error\n")  # fmt: skip
    got, reason = readback(_record(tmp_path, end="disabled -", alive=0, dmesg=dmesg), ASKED, "simple")
    assert got["ejected"] is True and got["reason"] == reason
    assert reason.startswith("no longer enabled at the workload's end (state disabled, ops None)"), reason
    assert 'kernel: BPF scheduler "qmap" disabled (scx_bpf_error): qmap: test triggering error' in reason


def test_another_ops_or_a_reenable_or_an_exited_program_is_ejected(tmp_path) -> None:
    assert "expected other" in str(readback(_record(tmp_path), ASKED, "other")[1])
    assert "disabled and enabled again" in str(readback(_record(tmp_path, seq=2), ASKED, "simple")[1])
    reason = readback(_record(tmp_path, alive=0), ASKED, "simple")[1]
    assert "exited before the workload's end" in str(reason) and "local=10" in str(reason)  # its own output


def test_no_state_file_is_ejected_and_fair_is_never(tmp_path) -> None:
    assert "no scheduler-state.txt" in str(readback(tmp_path, ASKED, "simple")[1])
    fair, reason = readback(tmp_path, {"asked": "fair", "kind": "fair"}, "")
    assert reason is None and (fair["asked"], fair["kind"], fair["start"], fair["ejected"]) == ("fair", "fair", None,
                                                                                              False)  # fmt: skip


def test_the_status_and_old_records() -> None:
    assert "scheduler-ejected" in STATUSES
    ev = Evidence("", False, True, True, 0, 0, (), scheduler_problem="not enabled")
    assert classify(ev) == ("scheduler-ejected", "the sched_ext scheduler did not run throughout: not enabled")
    assert side_names([{"kernel": {"name": "v6.12"}}]) == ["v6.12"]  # no scheduler key: the fair class


def test_the_runs_sides_are_named_as_compare_names_them() -> None:
    """run --scheduler A --scheduler B (its verdict lines, verdict.json, the side by side) and compare label the
    sides alike: "v6.12 [fair]" against "v6.12 [scx_simple]"; a fair-class A/B by its kernels alone."""
    from types import SimpleNamespace

    from lab.analysis.compare import side_labels
    from lab.analysis.record import RunRecord
    from lab.run.auto_pairs import side_labels_of

    def proto(kernel: str, asked: str) -> SimpleNamespace:
        return SimpleNamespace(
            kernel=SimpleNamespace(name=kernel), scheduler=Scheduler(asked, "sched_ext" if asked != "fair" else "fair")
        )

    def record(kernel: str, scheduler: dict | None) -> RunRecord:
        m = {"kernel": {"name": kernel}, "settings": {}} | ({"scheduler": scheduler} if scheduler else {})
        return RunRecord(Path(kernel), m)

    fair = {"asked": "fair", "kind": "fair"}
    mine = ASKED | {"asked": "/home/me/scx/scx_mine"}
    for (ka, sa, ra), (kb, sb, rb), want in (
        (("v6.12", "fair", fair), ("v6.12", "scx_simple", ASKED), ("v6.12 [fair]", "v6.12 [scx_simple]")),
        (("v6.12", "fair", None), ("v6.13", "fair", fair), ("v6.12", "v6.13")),
        (("base", "scx_simple", ASKED), ("new", "scx_simple", ASKED), ("base [scx_simple]", "new [scx_simple]")),
        (("v6.12", "fair", fair), ("v6.12", mine["asked"], mine), ("v6.12 [fair]", "v6.12 [scx_mine]")),
    ):
        assert side_labels_of([proto(ka, sa), proto(kb, sb)]) == want
        assert side_labels([record(ka, ra)], [record(kb, rb)]) == want
        runs = [r.manifest for r in (record(ka, ra), record(kb, rb))]
        assert tuple(side_names(runs)) == want


def _kernel(tmp_path: Path, sched_ext: bool, shipped: tuple[str, ...] = ()) -> Kernel:
    entry = tmp_path / f"entry-{sched_ext}"
    (entry / "schedulers").mkdir(parents=True, exist_ok=True)
    (entry / "config").write_text("CONFIG_SCHED_CLASS_EXT=y\n" if sched_ext else "CONFIG_NUMA=y\n")
    for n in shipped:
        (entry / "schedulers" / n).write_bytes(b"\x7fELF" + b"\0" * 60)
        os.chmod(entry / "schedulers" / n, 0o755)
    return Kernel("k", entry / "bzImage", None, entry / "config")


def test_refusals_name_the_option(tmp_path) -> None:
    with pytest.raises(LabError, match=r"^--scheduler scx_simple: kernel k has no CONFIG_SCHED_CLASS_EXT"):
        resolve("scx_simple", _kernel(tmp_path, False))
    k = _kernel(tmp_path, True, ("scx_simple",))
    with pytest.raises(LabError, match=r"^--scheduler scx_flatcg: not a scheduler of kernel k \(it has: fair, scx_"):
        resolve("scx_flatcg", k)
    text = tmp_path / "notelf"
    text.write_text("#!/bin/sh\n")
    os.chmod(text, 0o755)
    with pytest.raises(LabError, match="not an ELF program"):
        resolve(str(text), k)
    os.chmod(text, stat.S_IRUSR)
    with pytest.raises(LabError, match="not an executable file"):
        resolve(str(text), k)
    with pytest.raises(LabError, match="fair takes no arguments"):
        split("fair -x")
    with pytest.raises(LabError, match="--scheduler"):
        split("scx_qmap 'unclosed")
    with pytest.raises(LabError, match="not fair, an example scheduler"):
        check_early("scx_nope")
    assert resolve("fair", _kernel(tmp_path, False)).kind == "fair"
    s = resolve("scx_simple", k)
    assert (s.ops, s.source, s.guest_command()) == ("simple", "kernel:k", "/scheduler/scx_simple")


def test_run_options_take_one_ab_axis_at_a_time() -> None:
    RunOptions(kernels=("a",), schedulers=("fair", "scx_simple"))
    with pytest.raises(LabError, match="^--scheduler: two schedulers make an A/B on one kernel"):
        RunOptions(kernels=("a", "b"), schedulers=("fair", "scx_simple"))
    with pytest.raises(LabError, match="^--scheduler: the schedulers must differ"):
        RunOptions(schedulers=("scx_simple", "scx_simple"))


def test_the_guest_settings_say_nothing_of_a_scheduler_unless_one_is_asked_for() -> None:
    plain = GuestSettings("true", 1.0, trace_events=())
    assert "SCHEDULER" not in plain.to_shell() and "scheduler_cmd" not in plain.to_dict()
    settings = GuestSettings("true", 1.0, trace_events=(), scheduler_cmd="/scheduler/scx_qmap -e 100",
                             scheduler_ops="qmap")  # fmt: skip
    assert "export SCHEDULER='/scheduler/scx_qmap -e 100'" in settings.to_shell()
    assert "export SCHEDULER_OPS=qmap" in settings.to_shell() and "export SCHEDULER_WAIT=100" in settings.to_shell()


def test_the_fragment_asks_for_the_examples_and_only_it_changes_the_key() -> None:
    assert not wants_schedulers(load_fragments()) and key_part(load_fragments()) == {}
    assert wants_schedulers(load_fragments(["sched-ext"]))
    assert fragments_for("scx_simple", ()) == ("sched-ext",) and fragments_for("fair", ("x",)) == ("x",)
    assert fragments_for("scx_simple", ("sched-ext",)) == ("sched-ext",)


def test_the_matrix_scheduler_axis() -> None:
    data = {"topologies": ["ring-2"], "kernels": ["v6.12"], "workloads": ["idle"],
            "scheduler": ["fair", "scx_qmap -e 100"]}  # fmt: skip
    spec = parse_matrix(data, "m.yaml", "m")
    assert [(r.setting.name, r.setting.scheduler) for r in spec.runs] == [
        ("fair", "fair"),
        ("scx_qmap-e-100", "scx_qmap -e 100"),
    ]
    plain = parse_matrix({k: v for k, v in data.items() if k != "scheduler"}, "m.yaml", "m")
    assert "scheduler" not in plain.runs[0].params()["setting"]  # (old matrices keep their fingerprint)
    with pytest.raises(LabError, match="scheduler"):
        parse_matrix(data | {"settings": [{"name": "x", "scheduler": "scx_simple"}]}, "m.yaml", "m")


def test_a_verifier_refusal_is_said_in_the_schedulers_own_words(tmp_path) -> None:
    """What scx_simple printed on a 6.12 kernel without BPF_EVENTS (seen on a real boot: libbpf rewrote a helper
    the verifier then refused in a struct_ops program); the kernel logged nothing of it."""
    state = "waited_ds 8\nstart disabled -\nend disabled -\nend_alive 0\nexit 1\n"
    (tmp_path / "scheduler-state.txt").write_text(state)
    (tmp_path / "scheduler.out").write_text(
        "libbpf: prog 'simple_exit': BPF program load failed: Invalid argument\n"
        "libbpf: prog 'simple_exit': -- BEGIN PROG LOAD LOG --\n"
        "8: (85) call bpf_probe_read_str#45\nprogram of this type cannot use helper bpf_probe_read_str#45\n"
        "[SCX_BUG] scx_simple.c:88 (Invalid argument)\nFailed to load skel\n"
    )
    got, reason = readback(tmp_path, ASKED, "simple")
    assert got["ejected"] and got["exit"] == 1 and got["start"]["state"] == "disabled"
    assert reason == (
        "not enabled at the workload's start (state disabled, ops None, expected simple); scheduler's output: "
        "libbpf: prog 'simple_exit': BPF program load failed: Invalid argument; program of this type cannot use "
        "helper bpf_probe_read_str#45; Failed to load skel"
    )


def test_what_a_hostile_guest_writes_is_checked(tmp_path) -> None:
    (tmp_path / "scheduler-state.txt").write_text(
        "start enabled \x1b[2Jevil\nstart_enable_seq 1e9\nend enabled " + "x" * 500 + "\n"
    )
    (tmp_path / "scheduler.out").write_text("error: \x1b]0;title\x07" + "y" * 5000 + "\n")
    got, reason = readback(tmp_path, ASKED, "")
    assert got["start"]["ops"] == "?" and got["end"]["ops"] == "?" and got["start"]["enable_seq"] is None
    assert got["ejected"] and "\x1b" not in str(reason) and len(str(reason)) <= 1000


def test_kernel_list_shows_the_sched_ext_schedulers_a_build_carries(tmp_path: Path) -> None:
    """numalab kernel list (text and --json) names the example schedulers in a build's cache entry
    (schedulers/), which --scheduler NAME can run with it; a build without them says "-" ([] in JSON)."""
    import json

    from common import numalab

    cache = tmp_path / "cache"
    builds, built = cache / "kernels" / "builds", cache / "kernels" / "built"
    built.mkdir(parents=True)
    for key, name, at, shipped in (("k-ext", "v6.12", "2026-01-02", ("scx_simple", "scx_qmap")),
                                   ("k-plain", "stock", "2026-01-01", ())):  # fmt: skip
        entry = builds / key
        (entry / "schedulers").mkdir(parents=True)
        (entry / "meta.json").write_text(json.dumps({"key": key, "release": "6.x", "built_at": at}))
        for s in shipped:
            (entry / "schedulers" / s).write_bytes(b"\x7fELF")
        (built / name).symlink_to(entry)
    env = {"NUMALAB_CACHE": str(cache)}
    proc = numalab("kernel", "list", env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    header, ext, plain = proc.stdout.splitlines()
    assert header.split() == ["NAME", "KEY", "RELEASE", "BUILT", "SCHEDULERS", "PATCHES"]
    assert ext.split() == ["v6.12", "k-ext", "6.x", "2026-01-02", "scx_simple,scx_qmap", "-"]
    assert plain.split() == ["stock", "k-plain", "6.x", "2026-01-01", "-", "-"]
    listed = json.loads(numalab("kernel", "list", "--json", env=env, timeout=60).stdout)
    assert [(b["names"], b["sched_ext_schedulers"]) for b in listed] == [(["v6.12"], ["scx_simple", "scx_qmap"]),
                                                                         (["stock"], [])]  # fmt: skip


def test_a_rust_schedulers_panic_is_the_reason(tmp_path) -> None:
    """scx_layered 1.1.0 with sched-ext/scx PR 3397 reverted (MAX_NUMA_NODES 8) on a 9-node guest, 6.12 (a real
    guest's scheduler.out, issue 68): it panics before its BPF load, and the reason quotes the panic, not Rust's
    closing note about RUST_BACKTRACE."""
    out = (
        Path(__file__).resolve().parent.parent
        / "data"
        / "scheduler_out"
        / "scx_layered-1.1.0-pr3397-reverted-mesh-9.out"
    )
    (tmp_path / "scheduler-state.txt").write_text("waited_ds 100\nstart disabled -\nend disabled -\nend_alive 0\n"
                                                  "exit 101\n")  # fmt: skip
    (tmp_path / "scheduler.out").write_bytes(out.read_bytes())
    _, reason = readback(tmp_path, ASKED, "")
    assert reason is not None and reason.endswith(
        "scheduler's output: thread 'main' (131) panicked at src/main.rs:2108:22: index out of bounds: the len is 8 "
        "but the index is 8"
    ), reason


def test_a_schedulers_coloured_log_is_quoted_in_words(tmp_path) -> None:
    """scx_lavd 1.1.4 on genoa-nps2 under v7.3-scx when the init waited 60 s (a real guest's files, issue 68): still
    loading its BPF (it took 89 s), killed at the stop. Its tracing log colours every field; the reason quotes its
    words without the colour codes (before: ``\\x1b[2m2026-11-29T...\\x1b[0m``)."""
    data = Path(__file__).resolve().parent.parent / "data" / "scheduler_out"
    (tmp_path / "scheduler-state.txt").write_bytes(
        (data / "scx_lavd-1.1.4-genoa-nps2-loading-at-60s.state").read_bytes()
    )
    (tmp_path / "scheduler.out").write_bytes((data / "scx_lavd-1.1.4-genoa-nps2-loading-at-60s.out").read_bytes())
    got, reason = readback(tmp_path, ASKED, "lavd_1.1.4_x86_64_unknown_linux_gnu")
    assert got["ejected"] and got["waited_s"] == 60.0 and got["exit"] == 137
    assert reason is not None and "\\x1b" not in reason, reason
    assert "its program was still running, not enabled, when the init stopped waiting after 60 s" in reason, reason
    assert "INFO ThreadId(01) scx_utils::libbpf_logger" in reason, reason
