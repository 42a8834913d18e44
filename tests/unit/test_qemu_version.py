"""Which QEMU a run uses (lab.vm.qemu.emulator): facts asked of the binary itself, once per binary."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.vm.qemu import emulator
from lab.vm.qemu.firmware import find_qboot


def _fake_qemu(bindir: Path, calls: Path, version: str, dirs: str) -> Path:
    """A stand-in that answers --version and -L help (a script: only the cached layer reads it)."""
    fake = bindir / "qemu-system-x86_64"
    fake.write_text(f'#!/bin/sh\necho x >> {calls}\ncase "$1" in --version) echo "QEMU emulator version {version}"; '
                    f'echo Copyright;; -L) printf "{dirs}";; esac\n')  # fmt: skip
    fake.chmod(0o755)
    return fake


def test_version_and_data_dirs_are_asked_once_per_binary_until_it_changes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    fake = _fake_qemu(bindir, calls, "7.2.0", "/usr/share/qemu\\n/usr/share/seabios\\n")

    def ask() -> dict:
        emulator._facts.cache_clear()  # a new numalab process
        st = os.stat(fake)
        return emulator._facts(str(fake), st.st_size, st.st_mtime_ns)

    assert ask() == {"version": "QEMU emulator version 7.2.0", "dirs": ["/usr/share/qemu", "/usr/share/seabios"],
                     "charge": False, "quantum": False, "ipns": False, "vcpu_clock": False, "pause": False}  # fmt: skip
    assert ask()["version"] == "QEMU emulator version 7.2.0"
    assert calls.read_text().count("x") == 2  # --version and -L help, once: the second process read the cache
    fake.write_text(fake.read_text().replace("7.2.0", "10.0.2"))  # upgraded: new size and mtime
    assert ask()["version"] == "QEMU emulator version 10.0.2"
    assert calls.read_text().count("x") == 4


def test_a_qemu_that_charges_time_is_told_by_its_exported_symbol(tmp_path, monkeypatch) -> None:
    charge, quantum = emulator.CHARGE_SYMBOL + b"\0", emulator.QUANTUM_TEXT
    plain = tmp_path / "plain"
    plain.write_bytes(b"\x7fELF" + b"x" * 3_000_000 + b"qemu_plugin_update_ns\0qemu_plugin_charge_n\0icount: quantum")
    assert emulator._binary_has(str(plain), (charge, quantum)) == set()
    # the name across a 1 MiB read boundary, then at the very end; 0006's text likewise
    for at in ((1 << 20) - 7, 3 << 20):
        patched = tmp_path / f"patched{at}"
        body = bytearray(b"y" * at) + b"qemu_plugin_charge_ns\0"
        patched.write_bytes(bytes(body) + b"z" * 100)
        assert emulator._binary_has(str(patched), (charge, quantum)) == {charge}, at
        both = tmp_path / f"both{at}"
        both.write_bytes(b"y" * 5000 + charge + b"y" * (at - 5000 - len(quantum) // 2) + quantum + b"z")
        assert emulator._binary_has(str(both), (charge, quantum)) == {charge, quantum}, at
    assert emulator._binary_has(str(tmp_path / "missing"), (charge, quantum)) == set()
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(LabError, match=r"^--qemu charge: numalab's patched QEMU is not built yet; run make "
                       r"setup-qemu-charge$"):  # fmt: skip
        emulator.find_binary("charge")


def test_a_wrapper_script_or_a_missing_binary_is_a_one_line_error(tmp_path, monkeypatch) -> None:
    fake = _fake_qemu(tmp_path, tmp_path / "calls", "7.2.0", "")
    with pytest.raises(LabError, match=r"^--qemu .*: .* is not a QEMU binary \(a wrapper script\?\)"):
        emulator.find_binary(str(fake))
    with pytest.raises(LabError, match=r"^--qemu /no/such/qemu: not found$"):
        emulator.find_binary("/no/such/qemu")
    monkeypatch.setenv("NUMALAB_QEMU", "/no/such/qemu")
    with pytest.raises(LabError, match=r"^\$NUMALAB_QEMU /no/such/qemu: not found"):
        emulator.find_binary()


def test_the_system_qemu_is_the_default_and_needs_no_data_dirs(monkeypatch) -> None:
    monkeypatch.delenv("NUMALAB_QEMU", raising=False)
    system = shutil.which("qemu-system-x86_64")
    if system is None:
        pytest.skip("no qemu-system-x86_64 (make setup installs it)")
    e = emulator.resolve()
    assert e.binary == os.path.realpath(system)
    assert e.version.startswith("QEMU emulator version ") and e.version_tuple >= (5, 0, 0)
    assert e.data_dirs == () and e.argv_prefix() == [e.binary]  # its built-in path is its own
    assert e.firmware_dirs == e.builtin_dirs and e.builtin_dirs  # from -L help, not a fixed list


def test_a_private_prefix_puts_its_own_data_dirs_first(tmp_path) -> None:
    """A Debian QEMU unpacked into a prefix: its built-in path is the system's /usr/share/qemu, so its own
    directories go first with -L, and qboot is taken from there."""
    prefix = tmp_path / "qemu-10.0.2" / "usr"
    for d in ("share/qemu", "share/seabios", "bin"):
        (prefix / d).mkdir(parents=True)
    (prefix / "share/qemu/qboot.rom").write_bytes(b"\0")
    binary = str(prefix / "bin/qemu-system-x86_64")
    builtin = ("/usr/share/qemu", "/usr/share/seabios", "/usr/lib/ipxe/qemu")
    own = emulator.prefix_data_dirs(binary, builtin)
    assert own == (str(prefix / "share/qemu"), str(prefix / "share/seabios"))
    e = emulator.Emulator(binary, "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2)", builtin, own)
    assert e.argv_prefix() == [binary, "-L", own[0], "-L", own[1]]
    assert e.firmware_dirs[:2] == own and find_qboot(e.firmware_dirs) == str(prefix / "share/qemu/qboot.rom")
    assert e.short_version == "10.0.2" and e.version_tuple == (10, 0, 2)
    assert emulator.prefix_data_dirs("/usr/bin/qemu-system-x86_64", builtin) == ()  # installed: nothing added


def test_system_and_backports_name_the_two_qemus(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("NUMALAB_QEMU", raising=False)
    with pytest.raises(LabError, match=r"^--qemu backports: no QEMU unpacked yet; run make setup-qemu10$"):
        emulator.find_binary("backports")
    system = shutil.which("qemu-system-x86_64")
    if system:
        assert emulator.find_binary("system") == emulator.find_binary() == os.path.realpath(system)
    # Two unpacked versions: the newest by version number (10 after 9), and only complete ones.
    for version, complete in (("9.2.0+ds-1", True), ("10.0.2+ds-2", True), ("10.1.0+ds-1", False)):
        prefix = tmp_path / "cache" / "qemu" / version
        (prefix / "usr" / "bin").mkdir(parents=True)
        shutil.copy(system or "/bin/true", prefix / "usr" / "bin" / "qemu-system-x86_64")
        if complete:
            (prefix / ".complete").touch()
    assert [p.name for p in emulator.private_prefixes()] == ["10.0.2+ds-2", "9.2.0+ds-1"]
    assert emulator.find_binary("backports") == str(tmp_path / "cache/qemu/10.0.2+ds-2/usr/bin/qemu-system-x86_64")


def test_a_matrix_setting_chooses_the_qemu(tmp_path) -> None:
    from lab.matrix.definition import parse_matrix
    from lab.matrix.schedule import run_options

    spec = parse_matrix({"topologies": ["ring-2"], "workloads": ["idle"],
                         "settings": [{"name": "q72"}, {"name": "q10", "qemu": "backports"}],
                         "baseline": {"setting": "q72"}}, "inline", "qemus")  # fmt: skip
    assert [run_options(r, "stock", tmp_path, None, {}).vm.qemu for r in spec.runs] == ["", "backports"]
    settings = [{"name": "host"}, {"name": "virtual", "qemu": "backports", "clock": "virtual"}]
    clocked = parse_matrix({"topologies": ["ring-2"], "workloads": ["idle"], "settings": settings,
                            "baseline": {"setting": "host"}}, "inline", "clocks")  # fmt: skip
    assert [run_options(r, "stock", tmp_path, None, {}).guest_time.clock for r in clocked.runs] == ["host", "virtual"]
    with pytest.raises(LabError, match=r"settings\[0\]\.clock: expected one of host, virtual, got 'icount'"):
        parse_matrix({"topologies": ["ring-2"], "workloads": ["idle"], "settings": [{"name": "x", "clock": "icount"}]},
                     "inline", "bad")  # fmt: skip
    with pytest.raises(
        LabError, match=r"settings\[0\]\.qemu: expected system, backports, charge or a QEMU binary's path"
    ):
        parse_matrix({"topologies": ["ring-2"], "workloads": ["idle"], "settings": [{"name": "x", "qemu": 10}]},
                     "inline", "bad")  # fmt: skip


def test_what_apt_would_take_from_backports() -> None:
    """make setup-qemu10 downloads exactly the packages apt would take from backports (real apt output)."""
    from lab.apt import upgrade_set
    from lab.host.qemu_prefix import prefix_dir

    simulated = (
        "Inst qemu-system-x86 [1:7.2+dfsg-7+deb12u18+b3] (1:10.0.2+ds-2+deb13u1~bpo12+1 Debian Backports:"
        "oldstable-backports [amd64]) []\n"
        "Inst libvirglrenderer1 (0.10.4-1 Debian:12.15/oldstable [amd64])\n"
        "Inst seabios [1.16.2-1] (1.16.3-2~bpo12+1 Debian Backports:oldstable-backports [all])\n"
        "Conf seabios (1.16.3-2~bpo12+1 Debian Backports:oldstable-backports [all])\n"
    )
    assert upgrade_set(simulated, "qemu-system-x86", "bookworm-backports") == [
        ("qemu-system-x86", "1:10.0.2+ds-2+deb13u1~bpo12+1"),
        ("seabios", "1.16.3-2~bpo12+1"),
    ]
    with pytest.raises(LabError, match="^setup-qemu10: bookworm-backports has no newer qemu-system-x86"):
        upgrade_set("Inst seabios [1] (2 Debian Backports:x [all])\n", "qemu-system-x86", "bookworm-backports")
    assert prefix_dir("1:10.0.2+ds-2+deb13u1~bpo12+1").name == "10.0.2+ds-2+deb13u1_bpo12+1"


def test_the_patched_qemu_needs_the_backports_one_and_names_its_patches(tmp_path, monkeypatch) -> None:
    from lab.host import qemu_charge

    names = [p.name for p in qemu_charge.series()]
    assert names[0].startswith("0001-plugins-charge-ns") and all(p.is_file() for p in qemu_charge.series())
    assert names == sorted(names)
    name = qemu_charge.prefix_name("10.0.2")
    assert re.fullmatch(r"10\.0\.2\+numalab\.[0-9a-f]{10}", name)
    assert emulator._version_key(name) == (10, 0, 2)
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(LabError, match=r"^setup-qemu-charge: needs Debian's backports QEMU unpacked, whose version "
                       r"it builds and whose firmware it uses \(make setup-qemu10\)$"):  # fmt: skip
        qemu_charge.build(say=lambda _m: None)
