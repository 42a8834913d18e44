"""Fragments against kernels from 6.1 to mainline: a requested symbol the tree's Kconfig files do not define is
absent (a note, or an error when numalab needs it or a user's fragment asked for it), not an unmet dependency;
the tree's symbols are scanned once per state of its Kconfig files. Fake trees only: the real 6.12 build is
tests/kernel/test_kernel_612.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.kernel import fragments as fr
from lab.kernel.fragments import ESSENTIAL, check_config, kconfig_symbols, kernel_version, load_fragment, load_fragments
from lab.kernel.kconfig_deps import evaluate, explain


def _config(frags, drop: set[str] = frozenset()) -> str:
    """The .config that gives every symbol as asked, but those in ``drop`` (left unset)."""
    lines = []
    for sym, val in fr.requested(frags).items():
        if sym not in drop:
            lines.append(f"# {sym} is not set" if val[0] == "n" else f"{sym}={val[0]}")
    return "\n".join(lines) + "\n"


def _symbols_of(frags, without: set[str] = frozenset()):
    names = frozenset(s.removeprefix("CONFIG_") for s in fr.requested(frags)) - {
        s.removeprefix("CONFIG_") for s in without
    }
    return lambda: names


def test_a_symbol_missing_from_the_tree_is_a_note_not_an_unmet_dependency() -> None:
    frags = load_fragments()
    notes = check_config(frags, _config(frags, {"CONFIG_BASE_FULL"}), _symbols_of(frags, {"CONFIG_BASE_FULL"}),
                         "Linux 6.12.117")  # fmt: skip
    assert notes == ["kernel config: CONFIG_BASE_FULL=y (from base.config) does not exist in Linux 6.12.117: left out"]
    assert check_config(frags, _config(frags), lambda: pytest.fail("scanned with nothing to tell apart")) == []


def test_a_symbol_that_exists_but_did_not_end_up_set_stays_an_unmet_error() -> None:
    frags = load_fragments()
    with pytest.raises(LabError) as err:
        check_config(frags, _config(frags, {"CONFIG_PVPANIC_MMIO"}), _symbols_of(frags))
    msg = str(err.value)
    assert msg == ("kernel config: 1 fragment symbol(s) not set as requested (unmet dependencies?): "
                   "CONFIG_PVPANIC_MMIO=y (got unset, from base.config)")  # fmt: skip
    assert "\n" not in msg


def test_an_essential_symbol_missing_from_the_tree_fails_saying_it_does_not_exist() -> None:
    frags = load_fragments()
    gone = {"CONFIG_NUMA_BALANCING", "CONFIG_BASE_FULL"}
    with pytest.raises(LabError) as err:
        check_config(frags, _config(frags, gone), _symbols_of(frags, gone), "Linux 6.99.0")
    msg = str(err.value)
    assert "CONFIG_NUMA_BALANCING=y (from numa.config, numalab needs it)" in msg
    assert "do not exist in Linux 6.99.0" in msg and "unmet" not in msg
    assert "BASE_FULL" not in msg  # not needed: only the note would name it


def test_both_kinds_in_one_error() -> None:
    frags = load_fragments()
    with pytest.raises(LabError, match=r"unmet dependencies\?\): CONFIG_SMP=y .*; and 1 fragment symbol\(s\) do not "
                       r"exist in this kernel .*CONFIG_9P_FS=y \(from base.config, numalab needs it\)"):  # fmt: skip
        check_config(frags, _config(frags, {"CONFIG_SMP", "CONFIG_9P_FS"}), _symbols_of(frags, {"CONFIG_9P_FS"}))


def test_a_users_fragment_symbol_missing_from_the_tree_is_an_error(tmp_path) -> None:
    """The user asked for it by name (a typo, or the wrong kernel): never dropped with only a note."""
    mine = tmp_path / "mine.config"
    mine.write_text("CONFIG_NUMA_BALANCNG=y\n")
    frags = [*load_fragments(), load_fragment(mine)]
    with pytest.raises(LabError, match=r"do not exist in this kernel .*CONFIG_NUMA_BALANCNG=y \(from mine.config\)$"):
        check_config(frags, _config(frags, {"CONFIG_NUMA_BALANCNG"}), _symbols_of(frags, {"CONFIG_NUMA_BALANCNG"}))
    # numalab's own opt-in fragment is numalab's: its absent symbols are notes
    tiering = load_fragment("tiering")
    assert fr.is_numalab_fragment(tiering) and not fr.is_numalab_fragment(frags[-1])


def test_without_the_trees_symbols_everything_is_unmet_as_before() -> None:
    frags = load_fragments()
    with pytest.raises(LabError, match=r"unmet dependencies\?\): CONFIG_BASE_FULL=y \(got unset, from base.config\)$"):
        check_config(frags, _config(frags, {"CONFIG_BASE_FULL"}))


def test_what_numalab_needs_is_asked_for_and_sched_debug_is_not_needed() -> None:
    asked = fr.requested(load_fragments())
    assert ESSENTIAL <= {s for s, (v, _) in asked.items() if v == "y"}
    # gone upstream (BASE_FULL in 6.9, SCHED_DEBUG in 6.16: debugfs' sched/ is always there without it)
    assert "CONFIG_SCHED_DEBUG" not in ESSENTIAL and "CONFIG_BASE_FULL" not in ESSENTIAL
    for sym in ("NUMA_BALANCING", "TRACEPOINTS", "NET_9P_VIRTIO", "9P_FS", "VIRTIO_PCI", "SERIAL_8250_CONSOLE",
                "BLK_DEV_INITRD", "PVH", "ACPI_NUMA", "DEBUG_FS", "EVENT_TRACING"):  # fmt: skip
        assert f"CONFIG_{sym}" in ESSENTIAL, sym


# --- the tree's Kconfig symbols -----------------------------------------------------------


def _git(tree: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tree, check=True,
                   capture_output=True)  # fmt: skip


@pytest.fixture
def tree(tmp_path) -> Path:
    t = tmp_path / "linux"
    (t / "mm").mkdir(parents=True)
    (t / "arch" / "x86").mkdir(parents=True)
    (t / "arch" / "arm64").mkdir(parents=True)
    (t / "Makefile").write_text("# SPDX-License-Identifier: GPL-2.0\nVERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 57\n")
    (t / "Kconfig").write_text('mainmenu "Linux"\nsource "mm/Kconfig"\n')
    mm = "config NUMA_BALANCING\n\tbool\nmenuconfig MIGRATION # comment\n  config   INDENTED\n# config COMMENTED_OUT\n"
    (t / "mm" / "Kconfig").write_text(mm + "\thelp\n\t  config HELP_TEXT is prose\n")
    (t / "arch" / "x86" / "Kconfig.debug").write_text("config X86_ONLY\n")
    (t / "arch" / "arm64" / "Kconfig").write_text("config ARM64_ONLY\n")
    _git(t, "init", "-q")
    _git(t, "add", "-A")
    _git(t, "commit", "-qm", "base")
    return t


def test_the_trees_symbols_are_its_x86_config_entries(tree) -> None:
    assert fr.scan_kconfig(tree) == {"NUMA_BALANCING", "MIGRATION", "INDENTED", "X86_ONLY"}
    assert kernel_version(tree) == "Linux 6.12.57"
    (tree / "Makefile").write_text(
        "VERSION = 6\nPATCHLEVEL = 18\nSUBLEVEL = 0\nEXTRAVERSION = -rc3\nNAME = Baby Opossum\n"
    )
    assert kernel_version(tree) == "Linux 6.18.0-rc3"
    (tree / "Makefile").write_text("all:\n")
    assert kernel_version(tree) == "this kernel"


def test_the_scan_is_remembered_until_a_kconfig_file_changes(tree, monkeypatch) -> None:
    scans = []
    real = fr.scan_kconfig
    monkeypatch.setattr(fr, "scan_kconfig", lambda t: scans.append(t) or real(t))
    first = kconfig_symbols(tree)
    assert kconfig_symbols(tree) == first and len(scans) == 1
    # a patch that adds a symbol (and a Kconfig file it sources): seen at once
    (tree / "mm" / "Kconfig.numa").write_text("config NUMALAB_NEW\n")
    with open(tree / "mm" / "Kconfig", "a") as f:
        f.write('source "mm/Kconfig.numa"\n')
    assert "NUMALAB_NEW" in kconfig_symbols(tree) and len(scans) == 2
    # a damaged memo is scanned again, not trusted
    (tree / ".git" / "numalab-kconfig-symbols.json").write_text("{not json")
    assert "NUMALAB_NEW" in kconfig_symbols(tree) and len(scans) == 3


def test_a_tree_without_git_is_scanned_every_time(tmp_path) -> None:
    (tmp_path / "Kconfig").write_text("config A\n")
    assert kconfig_symbols(tmp_path) == {"A"}
    os.remove(tmp_path / "Kconfig")
    assert kconfig_symbols(tmp_path) == frozenset()


# --- why a symbol is not as asked: its dependencies, read from the tree's Kconfig -------------------------------

KCONFIG_73 = """\
config NUMA_MIGRATION
\tbool "NUMA page migration"
\tdefault y
\tdepends on NUMA && MMU

config NUMA_BALANCING
\tbool "Memory placement aware NUMA scheduler"
\tdepends on ARCH_SUPPORTS_NUMA_BALANCING
\tdepends on SMP && NUMA_MIGRATION && !PREEMPT_RT
\thelp
\t  This option adds support for automatic NUMA aware memory/task placement,
\t  if the machine has more than one node (a help text's "if" is not a block).

if X86
config SCHED_CLUSTER
\tbool "Cluster scheduler support"
\tdepends on SMP && (ARCH_SUPPORTS_SCHED_CLUSTER || COMPILE_TEST)
endif
"""


def test_an_unmet_symbol_names_the_dependency_that_is_off(tmp_path) -> None:
    """7.3's NUMA_BALANCING on 6.x's fragments (issue 65): the error names the line and the term that is n."""
    (tmp_path / "Kconfig").write_text(KCONFIG_73)
    final = {"CONFIG_SMP": "y", "CONFIG_NUMA": "y", "CONFIG_ARCH_SUPPORTS_NUMA_BALANCING": "y", "CONFIG_X86": "y",
             "CONFIG_SCHED_CLUSTER": "n"}  # fmt: skip
    assert explain(tmp_path, "CONFIG_NUMA_BALANCING", final) == (
        "Kconfig:9 'depends on SMP && NUMA_MIGRATION && !PREEMPT_RT' is n (NUMA_MIGRATION=n)"
    )
    assert explain(tmp_path, "CONFIG_SCHED_CLUSTER", final) == (
        "Kconfig:17 'depends on SMP && (ARCH_SUPPORTS_SCHED_CLUSTER || COMPILE_TEST)' is n "
        "(ARCH_SUPPORTS_SCHED_CLUSTER=n, COMPILE_TEST=n)"
    )
    assert explain(tmp_path, "CONFIG_SCHED_CLUSTER", final | {"CONFIG_X86": "n"}).startswith("Kconfig:14 'if X86' is n")
    assert explain(tmp_path, "CONFIG_NUMA_MIGRATION", final | {"CONFIG_MMU": "y"}) == ""  # every dependency holds


def test_check_config_with_a_reason_says_it_instead_of_a_guess() -> None:
    frags = load_fragments()
    with pytest.raises(LabError) as err:
        check_config(frags, _config(frags, {"CONFIG_PVPANIC_MMIO"}), _symbols_of(frags), "Linux 7.3.4",
                     lambda sym: f"{sym} depends on X (X=n)")  # fmt: skip
    assert str(err.value) == ("kernel config: 1 fragment symbol(s) not set as requested: CONFIG_PVPANIC_MMIO=y (got "
                              "unset, from base.config): CONFIG_PVPANIC_MMIO depends on X (X=n)")  # fmt: skip


def test_kconfig_expressions_follow_kconfig_tristate_logic() -> None:
    vals = {"CONFIG_A": "y", "CONFIG_B": "m", "CONFIG_S": '"x"'}
    assert [evaluate(e, vals) for e in ("A && B", "A || C", "!B", "!(A && !C)", "S = \"x\"", "S != \"x\"", "C")] == [
        1, 2, 1, 0, 2, 0, 0]  # fmt: skip
    assert evaluate("PAHOLE_VERSION >= 122", vals) is None  # (numbers are not read: no guess)
