"""Kconfig fragments: parse them, and check a final .config against what they asked for.

A fragment is a .config excerpt: ``CONFIG_FOO=y``, ``CONFIG_BAR="text"``,
``# CONFIG_BAZ is not set``; other comments and blank lines are ignored.
Later fragments override earlier ones, as in ``merge_config.sh``.

One set of fragments serves every kernel from 6.1 to mainline, and Kconfig symbols come and go
between versions (``BASE_FULL`` went around 6.9, ``SCHED_DEBUG`` in 2025). A requested symbol that did
not end up as asked is therefore one of two things, told apart by the tree's own Kconfig files
(:func:`kconfig_symbols`): *unmet* (it exists; a dependency or a typo'd value kept it out: always an
error) or *absent* (no ``config SYM`` in that tree). An absent symbol from numalab's own fragments is
a note unless numalab cannot work without it (:data:`ESSENTIAL`); one from a user's fragment is an
error, since the user asked for it by name.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.paths import REPO_ROOT, read_text_file, write_text_atomic

CONFIGS_DIR = REPO_ROOT / "kernel-configs"
# tiering.config is a default since 2026-11-27: the memory tiers of the CXL machines numalab builds (tiered-*)
# boot on every built kernel, and the suite builds one 6.1 kernel fewer (about 6% more objects a build).
DEFAULT_FRAGMENTS = ("base.config", "numa.config", "trace.config", "tiering.config")

_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


@dataclass(frozen=True)
class Fragment:
    path: Path
    text: str
    values: dict[str, str]  # symbol -> value ("n" for "is not set")

    @property
    def name(self) -> str:
        return self.path.name


def parse_values(text: str, where: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        m = _SET.match(line) or _UNSET.match(line)
        if m:
            values[m.group(1)] = m.group(2) if m.re is _SET else "n"
        elif not line.startswith("#"):
            raise LabError(f"{where}:{n}: not a Kconfig line (CONFIG_X=value or '# CONFIG_X is not set'): {line}")
    return values


def load_fragment(spec: str | Path) -> Fragment:
    """A fragment by path, or by name in kernel-configs/ (``numa`` or ``numa.config``)."""
    path = Path(spec)
    if not path.exists():
        for cand in (CONFIGS_DIR / str(spec), CONFIGS_DIR / f"{spec}.config"):
            if cand.is_file():
                path = cand
                break
    if not path.is_file():
        raise LabError(f"--fragment {spec}: no such file (nor in {CONFIGS_DIR})")
    text = read_text_file(path, "--fragment")
    return Fragment(path.resolve(), text, parse_values(text, str(spec)))


def load_fragments(extra: list[str] | None = None, defaults: bool = True) -> list[Fragment]:
    """The defaults (unless not asked for), then the extra ones in order; a file named twice (``--fragment tiering``
    beside the defaults that hold it) is merged once, where it first comes, so that it is the same build."""
    names: list[str | Path] = [CONFIGS_DIR / n for n in DEFAULT_FRAGMENTS] if defaults else []
    out: list[Fragment] = []
    for spec in [*names, *(extra or [])]:
        f = load_fragment(spec)
        if all(f.path != seen.path for seen in out):
            out.append(f)
    return out


def requested(fragments: list[Fragment]) -> dict[str, tuple[str, str]]:
    """symbol -> (value, fragment name); the last fragment to name a symbol wins."""
    out: dict[str, tuple[str, str]] = {}
    for f in fragments:
        for sym, val in f.values.items():
            out[sym] = (val, f.name)
    return out


def parse_config(text: str) -> dict[str, str]:
    """A .config as symbol -> value; "is not set" reads as "n"."""
    return parse_values("\n".join(ln for ln in text.splitlines() if _SET.match(ln) or _UNSET.match(ln)), ".config")


# What numalab cannot do without, by what depends on it. A symbol of these that does not exist in a
# tree fails the build, saying so; numalab's other symbols (BASE_FULL, SCHED_DEBUG, the EXPERT
# trimmings...) may be absent from a version that dropped or renamed them: a note, and the build goes on.
ESSENTIAL: frozenset[str] = frozenset(
    f"CONFIG_{s}"
    for s in (
        # the guest boots: 64-bit SMP, PVH entry, ACPI, PCI + virtio-pci, serial console, initramfs
        "64BIT", "SMP", "PVH", "ACPI", "PCI", "VIRTIO_PCI", "TTY", "SERIAL_8250", "SERIAL_8250_CONSOLE",
        "PRINTK", "BLK_DEV_INITRD", "BINFMT_ELF", "BINFMT_SCRIPT", "PROC_FS", "SYSCTL", "SYSFS", "DEVTMPFS", "TMPFS",
        # the results share: virtio-9p; pvpanic, which a run's panic status is decided on (lab.run.status)
        "NET", "NET_9P", "NET_9P_VIRTIO", "9P_FS", "PVPANIC",
        # what is measured: NUMA (ACPI SRAT/SLIT) and NUMA balancing, the sched-domain levels, /proc/vmstat's
        # counters, /proc/schedstat, the tracepoints and tracefs, debugfs (sched domains, knobs), perf bench
        "NUMA", "ACPI_NUMA", "X86_64_ACPI_NUMA", "NUMA_BALANCING", "MIGRATION", "SCHED_MC", "VM_EVENT_COUNTERS",
        "SCHEDSTATS", "TRACEPOINTS", "FTRACE", "TRACING", "EVENT_TRACING", "DEBUG_FS", "PERF_EVENTS",
    )
)  # fmt: skip
# The same, for what an opt-in fragment of numalab's is for: sched-ext's class (a kernel before 6.12 has none,
# and a build that left it out would be a kernel that cannot run a --scheduler).
ESSENTIAL_WHEN_ASKED: frozenset[str] = frozenset({"CONFIG_SCHED_CLASS_EXT"})


@dataclass(frozen=True)
class Mismatch:
    """A requested symbol that did not end up as asked."""

    symbol: str
    want: str
    got: str  # "unset" when the .config does not name it
    fragment: Fragment

    def __str__(self) -> str:
        return f"{self.symbol}={self.want} (got {self.got}, from {self.fragment.name})"


def mismatches(fragments: list[Fragment], config_text: str) -> list[Mismatch]:
    """Every requested symbol that did not end up as asked (the last fragment to name it is its source)."""
    final = parse_config(config_text)
    owner: dict[str, Fragment] = {}
    for f in fragments:
        for sym in f.values:
            owner[sym] = f
    bad = []
    for sym, f in owner.items():
        want, got = f.values[sym], final.get(sym, "n")
        if got != want:
            bad.append(Mismatch(sym, want, "unset" if sym not in final else got, f))
    return bad


def unmet(fragments: list[Fragment], config_text: str) -> list[str]:
    """Every requested symbol that did not end up as asked, as 'CONFIG_X=want (got G, from F)'."""
    return [str(m) for m in mismatches(fragments, config_text)]


def is_numalab_fragment(f: Fragment) -> bool:
    """One of kernel-configs/ (the defaults or an opt-in like tiering), as opposed to a user's own file."""
    return f.path.parent == CONFIGS_DIR.resolve()


def check_config(
    fragments: list[Fragment],
    config_text: str,
    symbols: Callable[[], frozenset[str]] | None = None,
    kernel: str = "this kernel",
    explain: Callable[[str], str] | None = None,
) -> list[str]:
    """Check a final .config against the fragments: raise on what matters, return notes on the rest.

    ``symbols`` gives the tree's Kconfig symbols (:func:`kconfig_symbols`); it is called only when a
    symbol did not end up as asked. Without it every such symbol is unmet, as before numalab told the
    two apart. ``explain`` says why an unmet symbol is not as asked (:func:`lab.kernel.kconfig_deps.explain`: its
    dependencies that are off, read from the tree's Kconfig). The notes (one line each) are for the build's
    output and its meta.json."""
    bad = mismatches(fragments, config_text)
    if not bad:
        return []
    known = symbols() if symbols is not None else None
    absent = [m for m in bad if known is not None and m.symbol.removeprefix("CONFIG_") not in known]
    unmet_ = [m for m in bad if m not in absent]
    needed = ESSENTIAL | ESSENTIAL_WHEN_ASKED
    fatal_absent = [m for m in absent if m.symbol in needed or not is_numalab_fragment(m.fragment)]
    problems = []
    if unmet_ and explain is None:
        problems.append(
            f"{len(unmet_)} fragment symbol(s) not set as requested (unmet dependencies?): "
            + "; ".join(map(str, unmet_))
        )
    elif unmet_:
        problems.append(
            f"{len(unmet_)} fragment symbol(s) not set as requested: "
            + "; ".join(_with_reason(m, explain) for m in unmet_)
        )
    if fatal_absent:
        why = [
            f"{m.symbol}={m.want} (from {m.fragment.name}" + (", numalab needs it)" if m.symbol in needed else ")")
            for m in fatal_absent
        ]
        problems.append(
            f"{len(fatal_absent)} fragment symbol(s) do not exist in {kernel} (no 'config' entry in its Kconfig "
            "files: removed or renamed in this version, or a typo): " + "; ".join(why)
        )
    if problems:
        raise LabError("kernel config: " + "; and ".join(problems))
    return [
        f"kernel config: {m.symbol}={m.want} (from {m.fragment.name}) does not exist in {kernel}: left out"
        for m in absent
    ]


def _with_reason(m: Mismatch, explain: Callable[[str], str]) -> str:
    why = explain(m.symbol)
    return f"{m}: " + (
        why
        or "no dependency of it is off in its Kconfig entry (a value it cannot take, a choice, "
        "or a dependency numalab cannot read)"
    )


# --- the symbols a tree defines ---------------------------------------------------------------------

_KCONFIG_ENTRY = re.compile(rb"^[ \t]*(?:menu)?config[ \t]+([A-Za-z0-9_]+)[ \t]*(?:#.*)?$", re.M)
_SYMBOLS_CACHE = "numalab-kconfig-symbols.json"
_SYMBOLS_FORMAT = 1


def _kconfig_files(tree: Path) -> list[Path]:
    """The Kconfig files an x86 build can read: every ``Kconfig*`` but those of the other architectures."""
    out = []
    for root, dirs, files in os.walk(tree):
        rel = os.path.relpath(root, tree)
        if rel == ".":
            dirs[:] = [d for d in dirs if d != ".git"]
        elif rel == "arch":
            dirs[:] = [d for d in dirs if d == "x86"]
        out += [Path(root, f) for f in files if f.startswith("Kconfig")]
    return sorted(out)


def scan_kconfig(tree: Path) -> frozenset[str]:
    """Every symbol some ``config SYM`` or ``menuconfig SYM`` line of the tree's Kconfig files defines."""
    found: set[str] = set()
    for path in _kconfig_files(tree):
        try:
            found.update(m.decode() for m in _KCONFIG_ENTRY.findall(path.read_bytes()))
        except OSError:
            continue
    return frozenset(found)


def _stamp(tree: Path) -> str | None:
    """The state of the tree's tracked Kconfig files (names, sizes, mtimes; git's index lists them, so no
    walk), or None when the tree is not a git tree. A patch that edits one changes it; a patch can add a
    Kconfig file only by editing one that sources it, so the full walk (:func:`scan_kconfig`) sees it."""
    proc = subprocess.run(["git", "ls-files", "-z", "--", ":(glob)**/Kconfig*"], cwd=tree, capture_output=True)
    if proc.returncode != 0:
        return None
    h = hashlib.sha256()
    for name in sorted(proc.stdout.split(b"\0")):
        if not name:
            continue
        try:
            st = os.stat(tree / os.fsdecode(name))
        except OSError:
            h.update(name + b"\0gone\n")
            continue
        h.update(b"%s\0%d\0%d\n" % (name, st.st_size, st.st_mtime_ns))
    return h.hexdigest()


def kconfig_symbols(tree: Path) -> frozenset[str]:
    """The tree's Kconfig symbols (without ``CONFIG_``), remembered in the tree's ``.git`` under the state of
    its Kconfig files: builds of the same source scan once, until a patch touches a Kconfig file (that build, and
    the next, whose reset gives the file a new time, scan again; measured: docs/kernels.md)."""
    stamp = _stamp(tree)
    memo = tree / ".git" / _SYMBOLS_CACHE
    if stamp is not None:
        try:
            doc = json.loads(memo.read_text())
            if doc.get("format") == _SYMBOLS_FORMAT and doc.get("stamp") == stamp:
                return frozenset(doc["symbols"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    symbols = scan_kconfig(tree)
    if stamp is not None:
        doc = {"format": _SYMBOLS_FORMAT, "stamp": stamp, "symbols": sorted(symbols)}
        try:
            write_text_atomic(memo, json.dumps(doc, separators=(",", ":")))
        except OSError:
            pass
    return symbols


def kernel_version(tree: Path) -> str:
    """'Linux 6.12.57' or 'Linux 6.18.0-rc3', from the top Makefile's VERSION, PATCHLEVEL, SUBLEVEL and
    EXTRAVERSION (or 'this kernel')."""
    try:
        head = (tree / "Makefile").read_text(errors="replace")[:2000]
    except OSError:
        return "this kernel"
    parts = dict(re.findall(r"^(VERSION|PATCHLEVEL|SUBLEVEL)\s*=\s*(\d+)\s*$", head, re.M))
    if "VERSION" not in parts or "PATCHLEVEL" not in parts:
        return "this kernel"
    sub = f".{parts['SUBLEVEL']}" if parts.get("SUBLEVEL") else ""
    extra = re.search(r"^EXTRAVERSION\s*=\s*(-[A-Za-z0-9.]{1,20})\s*$", head, re.M)
    return f"Linux {parts['VERSION']}.{parts['PATCHLEVEL']}{sub}{extra.group(1) if extra else ''}"
