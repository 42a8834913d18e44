"""The nested tier's outer QEMU (``numalab nested --qemu``, issue 47) and the reproduction knob that skips the
libvirt host's KVM hold: decided before any boot, so checked here without a VM (QEMU's runner is a stand-in)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from common import assert_one_line_error, numalab

from lab.host import nested
from lab.record_files import QEMU_ARGV
from lab.topology.model.ref import TopologyRef
from lab.vm import console
from lab.vm.qemu import emulator, qemu_backend

SYSTEM = shutil.which("qemu-system-x86_64")
needs_qemu = pytest.mark.skipif(SYSTEM is None, reason="no qemu-system-x86_64 (make setup installs it)")


def _backports(cache: Path) -> Path:
    """A QEMU unpacked as make setup-qemu10 lays it out, in ``cache``: the system's binary (an ELF that answers
    --version as QEMU) with the prefix's own data and module directories. (A copy finds its data directory from
    where it is, which Debian's backports build does not: so its -L directories are the real prefix's test.)"""
    prefix = cache / "qemu" / "10.0.2+ds-2+deb13u1_bpo12+1" / "usr"
    for d in ("bin", "share/qemu", "share/seabios", "lib/x86_64-linux-gnu/qemu"):
        (prefix / d).mkdir(parents=True)
    shutil.copy(SYSTEM, prefix / "bin" / "qemu-system-x86_64")
    (prefix.parent / ".complete").touch()
    return prefix


def _boot_nothing(tmp_path: Path, monkeypatch) -> dict:
    """run_nested up to QEMU's start, with the real backend and command line; QEMU itself is not started: what
    it would have run is in ``seen`` (argv, env), and the init's hold choice (outer_init's hold_kvm)."""
    seen: dict = {}
    real_init = nested.outer_init

    def outer_init(*a, **k):
        seen["hold_kvm"] = a[7] if len(a) > 7 else k.get("hold_kvm", True)
        return real_init(*a, **k)

    def run_vm(req, argv, env=None):
        seen["argv"], seen["env"] = argv, env
        return console.VmOutcome(exit_code=0, timed_out=False, wall_s=0.1)

    monkeypatch.setattr(nested, "resolve_kernel", lambda _spec: SimpleNamespace(image=tmp_path / "vmlinuz",
                                                                               modules_dir=None))  # fmt: skip
    monkeypatch.setattr(nested, "outer_initrd", lambda work, *_a, **_k: work / "initrd")
    monkeypatch.setattr(nested, "outer_init", outer_init)
    monkeypatch.setattr(qemu_backend, "run_vm", run_vm)
    return seen


@needs_qemu
def test_the_outer_guest_runs_on_the_qemu_chosen_as_runs_is(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("NUMALAB_QEMU", raising=False)
    prefix = _backports(tmp_path / "cache")
    seen = _boot_nothing(tmp_path, monkeypatch)
    topo = TopologyRef("ring-2", 1, "256M").load()
    found = emulator.resolve("backports")  # (run's --qemu resolution: the newest complete prefix)
    binary = str(prefix / "bin" / "qemu-system-x86_64")
    assert found.binary == binary
    # As the real backports QEMU answers: its built-in path is the system's, so its own directories go with -L.
    builtin = ("/usr/share/qemu", "/usr/share/seabios")
    chosen = emulator.Emulator(binary, found.version, builtin, emulator.prefix_data_dirs(binary, builtin))
    guest = nested.OuterGuest(cache_from=tmp_path / "none", emulator=chosen)
    res = nested.run_nested(topo, "true\n", tmp_path / "q10", guest, timeout_s=60)
    # Its binary first, its own firmware directories ahead of the system QEMU's, its own modules; TCG, -cpu max.
    assert seen["argv"][:5] == [binary, "-L", str(prefix / "share/qemu"), "-L", str(prefix / "share/seabios")]
    assert seen["env"] == {"QEMU_MODULE_DIR": str(prefix / "lib/x86_64-linux-gnu/qemu")}
    argv = seen["argv"]
    assert argv[argv.index("-cpu") + 1] == "max" and argv[argv.index("-accel") + 1].startswith("tcg")
    assert shlex.split((tmp_path / "q10" / ".outer" / QEMU_ARGV).read_text()) == argv
    assert res.qemu == {"binary": binary, "version": chosen.short_version}
    assert res.lines("ring-2")[0].startswith(f"outer guest: ring-2 (QEMU {chosen.short_version}), booted")
    # No choice: the default stays run's, $NUMALAB_QEMU else the PATH's QEMU.
    res = nested.run_nested(
        topo, "true\n", tmp_path / "q72", nested.OuterGuest(cache_from=tmp_path / "none"), timeout_s=60
    )
    assert seen["argv"][0] == os.path.realpath(SYSTEM) and seen["env"] == {}
    assert res.qemu == {"binary": os.path.realpath(SYSTEM), "version": emulator.resolve().short_version}
    monkeypatch.setenv("NUMALAB_QEMU", "backports")
    res = nested.run_nested(
        topo, "true\n", tmp_path / "env", nested.OuterGuest(cache_from=tmp_path / "none"), timeout_s=60
    )
    assert seen["argv"][0] == binary and res.qemu["binary"] == binary


@needs_qemu
def test_the_kvm_hold_is_skipped_only_by_the_reproduction_knob(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(nested.NO_KVM_HOLD_ENV, raising=False)
    seen = _boot_nothing(tmp_path, monkeypatch)
    topo = TopologyRef("ring-2", 1, "256M").load()
    nested.run_nested(topo, "true\n", tmp_path / "held", nested.OuterGuest(cache_from=tmp_path / "none"), timeout_s=60)
    assert seen["hold_kvm"] is True
    for value, held in (("0", True), ("", True), ("1", False)):
        monkeypatch.setenv(nested.NO_KVM_HOLD_ENV, value)
        nested.run_nested(
            topo, "true\n", tmp_path / f"knob{value}", nested.OuterGuest(cache_from=tmp_path / "none"), timeout_s=60
        )
        assert seen["hold_kvm"] is held, value
    # What the init does with it: the serving guest holds its VM, or says it does not; a plain guest neither.
    served = {hold: nested.outer_init("numalab-test", "--reuid=1001", "/c", "", ssh_port=40123, hold_kvm=hold)[0]
              for hold in (True, False)}  # fmt: skip
    assert "\nhold_kvm\n" in served[True] and "kvm-not-held" not in served[True]
    assert "\nhold_kvm\n" not in served[False] and "\nsay kvm-not-held\n" in served[False]
    assert (
        served[False].index("say script-exit")
        < served[False].index("say kvm-not-held")
        < served[False].index("say serving")
    )
    plain = nested.outer_init("numalab-test", "--reuid=1001", "/c", "", hold_kvm=False)[0]
    assert "kvm-not-held" not in plain and "\nhold_kvm\n" not in plain


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("/no/such/qemu", "--qemu /no/such/qemu: not found"),
        ("backports", "--qemu backports: no QEMU unpacked yet; run make setup-qemu10"),
        ("/bin/sh", "--qemu /bin/sh: '--version' printed nothing; not a QEMU"),
    ],
)
def test_a_bad_outer_qemu_is_one_line_before_anything_is_made(tmp_path: Path, value: str, words: str) -> None:
    out = tmp_path / "nested"
    proc = numalab("nested", "--qemu", value, "--out", str(out), "--", "true", timeout=120,
                   env={"NUMALAB_CACHE": str(tmp_path / "cache")})  # fmt: skip
    assert_one_line_error(proc, words)
    assert not out.exists()


@needs_qemu
def test_the_summary_names_the_outer_qemu(tmp_path: Path, monkeypatch, capsys) -> None:
    """``--qemu`` reaches the library as run's resolution makes it, and the JSON summary says which QEMU ran."""
    from lab.cli.main import build_parser

    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    prefix = _backports(tmp_path / "cache")
    seen = {}

    def fake_run_nested(topo, script, out, guest, *_rest):
        seen["emulator"] = guest.emulator
        out.mkdir(parents=True)
        (out / "console.log").touch()
        e = guest.emulator
        return nested.NestedResult(0, {"booted": "2", "done": ""}, 1.0, out, out / "console.log", False,
                                   qemu={"binary": e.binary, "version": e.short_version})  # fmt: skip

    monkeypatch.setattr(nested, "run_nested", fake_run_nested)
    args = build_parser().parse_args(["nested", "--qemu", "backports", "--json", "--out", str(tmp_path / "o"), "--",
                                      "true"])  # fmt: skip
    assert args.func(args) == 0
    binary = str(prefix / "bin" / "qemu-system-x86_64")
    assert seen["emulator"].binary == binary
    summary = json.loads(capsys.readouterr().out)
    assert summary["qemu"] == {"binary": binary, "version": seen["emulator"].short_version}


@pytest.mark.parametrize(
    ("version", "noted"),
    [
        ("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18)", True),
        ("QEMU emulator version 8.0.4", True),
        ("QEMU emulator version 8.1.0", False),
        ("QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)", False),
        ("QEMU emulator version ?", False),  # (no number: nothing claimed either way)
    ],
)
def test_an_outer_qemu_before_8_1_is_named_with_its_freeze(version: str, noted: bool) -> None:
    """QEMU before 8.1 lacks upstream's fix for stale translations under multi-threaded TCG, which froze a 4-node
    outer guest on 7.2 (docs/tcg.md): the outer guest's start says so in one line, naming the way out."""
    e = emulator.Emulator("/usr/bin/qemu-system-x86_64", version, ())
    note = nested.stale_code_note(e)
    assert (note is not None) == noted, note
    if noted:
        assert "\n" not in note and e.short_version in note and "--qemu backports" in note


@needs_qemu
def test_an_outer_boot_that_never_reaches_init_is_kept_and_booted_once_more(tmp_path: Path, monkeypatch) -> None:
    """A QEMU 10 outer guest once stopped in its kernel's boot (CPU 1's timer never firing, RCU stall reports on
    the console until the 2,100 s timeout): a boot whose init has not said "booted" by OUTER_BOOT_DEADLINE_S is
    stopped, kept in .outer-stalled-1, and booted again; the second boot has no deadline. (QEMU's run is a
    stand-in here: it ticks the watch past the deadline, or writes the init's marks.)"""
    seen = _boot_nothing(tmp_path, monkeypatch)
    calls: list[bool] = []

    def run_vm(req, argv, env=None):
        seen["argv"] = argv
        console_log = Path(req.boot.console_log)
        if not calls:  # the first boot: only the kernel's stall reports, past the deadline
            console_log.write_text("[   31.0] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n")
            req.on_tick(nested.OUTER_BOOT_DEADLINE_S - 1)
            assert not req.cancel.is_set()
            req.on_tick(nested.OUTER_BOOT_DEADLINE_S + 1)
            calls.append(req.cancel.is_set())
            return console.VmOutcome(exit_code=None, timed_out=True, wall_s=nested.OUTER_BOOT_DEADLINE_S + 1)
        console_log.write_text(f"{nested.MARK} booted 4\n{nested.MARK} script-exit 0\n{nested.MARK} done\n")
        req.on_tick(nested.OUTER_BOOT_DEADLINE_S + 100)  # (no deadline on the last boot)
        calls.append(req.cancel.is_set())
        return console.VmOutcome(exit_code=0, timed_out=False, wall_s=1.0)

    monkeypatch.setattr(qemu_backend, "run_vm", run_vm)
    topo = TopologyRef("ring-2", 1, "256M").load()
    out = tmp_path / "stall"
    res = nested.run_nested(topo, "true\n", out, nested.OuterGuest(cache_from=tmp_path / "none"), timeout_s=900)
    assert calls == [True, False]  # stopped at the deadline once; the second boot ran to its end
    kept = out / ".outer-stalled-1"
    assert res.boot_stalls == ({"attempt": 1, "deadline_s": nested.OUTER_BOOT_DEADLINE_S, "kept": str(kept)},)
    assert "rcu_preempt" in (kept / "console.log").read_text() and (kept / QEMU_ARGV).is_file()
    assert res.exit_code == 0 and not res.timed_out and "booted" in res.marks
    lines = res.lines("ring-2")
    assert lines[0] == (f"outer guest: boot 1 stalled (no init's booted after {nested.OUTER_BOOT_DEADLINE_S:.0f}s; "
                        f"kept in {kept}); booted again")  # fmt: skip
    assert lines[1].startswith("outer guest: ring-2") and "exited 0" in lines[1]
