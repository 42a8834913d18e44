"""Which QEMU runs a VM: the system's, or one chosen with ``--qemu PATH`` / ``$NUMALAB_QEMU``.

Everything numalab needs to know about an emulator comes from the binary
itself, never from a wrapper or a fixed path:

* its version, from ``BINARY --version`` (remembered per binary: path, size
  and mtime, so an upgraded binary is asked again);
* where it looks for firmware, from ``BINARY -L help`` (its built-in data
  directories);
* whether it can charge time to the guest's clock from a plugin
  (``qemu_plugin_charge_ns``, numalab's patch: ``make setup-qemu-charge``,
  lab.host.qemu_charge), from the binary's exported symbols, and whether it
  gives each vCPU its own time under ``-icount`` (``quantum=``, numalab's
  patch 0006) and runs several instructions a guest ns (``ipns=``, 0007),
  from the options' error texts in the binary, and whether a plugin can read
  a vCPU's own guest time (``qemu_plugin_vcpu_clock_ns``, 0008), from its
  exported symbols;
* for a QEMU unpacked into a private prefix (``make setup-qemu10``:
  ``<prefix>/usr/bin/qemu-system-x86_64``), the prefix's own data directories,
  passed with ``-L`` ahead of the built-in ones. A Debian binary's built-in
  path is ``/usr/share/qemu``, the system QEMU's files: without ``-L`` a
  QEMU 10 from a prefix would boot the system 7.2's firmware.

The access-matrix plugin's API and address map follow the version
(``lab.vm.tcg.access_plugin``); qboot is looked up in the directories QEMU itself
searches, in its order (``lab.vm.qemu.firmware``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.paths import TOOL_TEXT, cache_dir, json_text, write_text_atomic
from lab.vm.qemu.charge_series import is_current

DEFAULT_QEMU = "qemu-system-x86_64"
SYSTEM, BACKPORTS = "system", "backports"  # --qemu's names: the PATH's QEMU, make setup-qemu10's,
CHARGE = "charge"  # and make setup-qemu-charge's (lab.host.qemu_charge)
CHARGE_SYMBOL = b"qemu_plugin_charge_ns"
VCPU_CLOCK_SYMBOL = b"qemu_plugin_vcpu_clock_ns"  # (images/qemu/0008: a vCPU's own guest time for a plugin)
QUANTUM_TEXT = b"icount: quantum needs a fixed shift"  # (images/qemu/0006: -icount ...,quantum=NS)
IPNS_TEXT = b"icount: ipns must be 1..64"  # (images/qemu/0007: -icount shift=0,ipns=N)
PAUSE_TEXT = b"icount: pause must be 0..100000 ns"  # (images/qemu/0009: -icount ...,pause=NS)
ENV = "NUMALAB_QEMU"
# A prefix's data directories, as Debian's packages lay them out (qemu-system-data, seabios, ipxe-qemu),
# and its loadable modules (QEMU_MODULE_DIR: else a prefix's QEMU would look in the system QEMU's).
PREFIX_DATA_DIRS = ("share/qemu", "share/seabios", "lib/ipxe/qemu")
PREFIX_MODULE_DIR = "lib/x86_64-linux-gnu/qemu"
_VERSION = re.compile(r"version (\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Emulator:
    binary: str  # the real file, symlinks resolved
    version: str  # ``--version``'s first line
    builtin_dirs: tuple[str, ...]  # ``-L help``: where the binary looks by itself
    data_dirs: tuple[str, ...] = ()  # passed with -L, searched first (a private prefix's own)
    charges_time: bool = False  # exports qemu_plugin_charge_ns (numalab's patch): a plugin can add guest time
    parallel_time: bool = False  # takes -icount quantum=NS (numalab's patch): each vCPU its own guest time
    fast_cpu: bool = False  # takes -icount ipns=N (numalab's patch): N instructions a guest ns
    vcpu_clock: bool = False  # exports qemu_plugin_vcpu_clock_ns (numalab's patch): a plugin reads a vCPU's time
    pause_time: bool = False  # takes -icount pause=NS (numalab's patch): a PAUSE takes guest time

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        v = qemu_version_tuple(self.version)
        if v is None:
            raise LabError(f"{self.binary}: cannot tell the QEMU version from {self.version!r}")
        return v

    @property
    def short_version(self) -> str:
        """``10.0.2`` (``?`` when the version line says no number)."""
        m = _VERSION.search(self.version)
        return ".".join(g for g in m.groups() if g is not None) if m else "?"

    @property
    def firmware_dirs(self) -> tuple[str, ...]:
        """Every directory this QEMU searches for a ROM, in its order (the -L ones first)."""
        return tuple(dict.fromkeys([*self.data_dirs, *self.builtin_dirs]))

    def argv_prefix(self) -> list[str]:
        """The command line's start: the binary and its -L directories."""
        return [self.binary, *(a for d in self.data_dirs for a in ("-L", d))]

    def env(self) -> dict[str, str]:
        """What QEMU's environment needs on top of ours: a private prefix's module directory."""
        if not self.data_dirs:
            return {}
        modules = Path(self.binary).parent.parent / PREFIX_MODULE_DIR
        return {"QEMU_MODULE_DIR": str(modules)} if modules.is_dir() else {}

    def identity(self) -> str:
        """What cache keys use: the real binary, its size and mtime."""
        st = os.stat(self.binary)
        return f"{self.binary}:{st.st_size}:{st.st_mtime_ns}"

    def to_dict(self) -> dict:
        return {"binary": self.binary, "version": self.short_version, "version_line": self.version,
                "data_dirs": list(self.data_dirs), "env": self.env(), "charges_time": self.charges_time,
                "parallel_time": self.parallel_time, "fast_cpu": self.fast_cpu,
                "vcpu_clock": self.vcpu_clock, "pause_time": self.pause_time}  # fmt: skip


def qemu_version_tuple(version_line: str) -> tuple[int, int, int] | None:
    """``QEMU emulator version 10.0.2 (...)`` -> (10, 0, 2); None when the line names no version."""
    m = _VERSION.search(version_line)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def find_binary(choice: str = "") -> str:
    """The real QEMU binary for ``choice`` (a path or a command name; "system": the PATH's qemu-system-x86_64;
    "backports": the newest one make setup-qemu10 unpacked; "" is $NUMALAB_QEMU, then "system"), or a one-line
    error naming where the choice came from."""
    source = "--qemu"
    if not choice:
        choice, source = os.environ.get(ENV, ""), f"${ENV}"
    if choice == BACKPORTS:
        prefixes = private_prefixes()
        if not prefixes:
            raise LabError(f"{source} {BACKPORTS}: no QEMU unpacked yet; run make setup-qemu10")
        choice = str(prefixes[0] / "usr" / "bin" / DEFAULT_QEMU)
    elif choice == CHARGE:
        built = private_prefixes("qemu-charge")
        prefixes = [p for p in built if is_current(p)]  # (a build of another series may lack a patch: no guess)
        if not prefixes:
            other = " of this patch series (images/qemu; the cache has builds of others)" if built else ""
            raise LabError(f"{source} {CHARGE}: numalab's patched QEMU{other} is not built yet; "
                           "run make setup-qemu-charge")  # fmt: skip
        choice = str(prefixes[0] / "usr" / "bin" / DEFAULT_QEMU)
    if not choice or choice == SYSTEM:
        choice, source = DEFAULT_QEMU, "qemu-system-x86_64"
    found = shutil.which(choice) if "/" not in choice else (choice if os.path.exists(choice) else None)
    if found is None:
        hint = " (make setup installs the system's; make setup-qemu10 fetches QEMU 10)" if source != "--qemu" else ""
        raise LabError(f"{source} {choice}: not found{hint}")
    real = os.path.realpath(found)
    if not os.path.isfile(real) or not os.access(real, os.X_OK):
        raise LabError(f"{source} {choice}: not an executable file")
    if not _is_elf(real):
        raise LabError(f"{source} {choice}: {real} is not a QEMU binary (a wrapper script?); numalab reads the "
                       "version and firmware path from the binary itself: give its path")  # fmt: skip
    return real


def resolve(choice: str = "") -> Emulator:
    """The emulator a run uses (see find_binary), with its version and firmware directories."""
    binary = find_binary(choice)
    st = os.stat(binary)
    facts = _facts(binary, st.st_size, st.st_mtime_ns)
    check_answers_as_qemu(f"--qemu {choice}" if choice else binary, facts["version"])
    builtin = tuple(os.path.normpath(d) for d in facts["dirs"])  # 7.2 says /usr/bin/../share/qemu
    return Emulator(
        binary,
        facts["version"],
        builtin,
        prefix_data_dirs(binary, builtin),
        charges_time=bool(facts["charge"]),
        parallel_time=bool(facts["quantum"]),
        fast_cpu=bool(facts["ipns"]),
        vcpu_clock=bool(facts["vcpu_clock"]),
        pause_time=bool(facts["pause"]),
    )


def check_answers_as_qemu(where: str, version_line: str) -> None:
    """A one-line error unless ``--version`` answered as QEMU does (``QEMU emulator version X.Y.Z``): any other
    ELF binary (``--qemu /bin/true``, which prints its own version or nothing) is refused before any run."""
    if not version_line:
        raise LabError(f"{where}: '--version' printed nothing; not a QEMU")
    if "QEMU" not in version_line or qemu_version_tuple(version_line) is None:
        shown = version_line if len(version_line) <= 80 else version_line[:80] + "..."
        raise LabError(f"{where}: '--version' answered {shown!r}, not 'QEMU emulator version X.Y'; not a QEMU")


def prefix_data_dirs(binary: str, builtin: tuple[str, ...]) -> tuple[str, ...]:
    """For a binary in ``<prefix>/bin`` whose built-in data path is not its prefix's (a Debian QEMU unpacked
    somewhere else): the prefix's data directories that exist, to pass with -L. () for an installed QEMU."""
    prefix = Path(binary).parent.parent
    own = [str(prefix / d) for d in PREFIX_DATA_DIRS if (prefix / d).is_dir()]
    if not own or own[0] in builtin:
        return ()
    return tuple(own)


@functools.cache
def _facts(binary: str, size: int, mtime_ns: int) -> dict:
    """``--version``'s first line and ``-L help``'s directories, remembered per binary (path, size, mtime) in
    the cache: asking costs two QEMU starts, 20-60 ms each. An upgraded binary is asked again."""
    key = f"{binary}:{size}:{mtime_ns}"
    store = cache_dir() / "qemu-emulators.json"
    try:
        known = json.loads(store.read_text())
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    facts = known.get(key)
    if (isinstance(facts, dict) and isinstance(facts.get("version"), str) and isinstance(facts.get("dirs"), list)
            and isinstance(facts.get("charge"), bool) and isinstance(facts.get("quantum"), bool)
            and isinstance(facts.get("ipns"), bool) and isinstance(facts.get("vcpu_clock"), bool)
            and isinstance(facts.get("pause"), bool)):  # fmt: skip
        return facts
    lines = _ask(binary, "--version")
    found = _binary_has(binary, (CHARGE_SYMBOL + b"\0", QUANTUM_TEXT, IPNS_TEXT, VCPU_CLOCK_SYMBOL + b"\0", PAUSE_TEXT))
    facts = {
        "version": lines[0] if lines else "",
        "dirs": _ask(binary, "-L", "help"),
        "charge": CHARGE_SYMBOL + b"\0" in found,
        "quantum": QUANTUM_TEXT in found,
        "ipns": IPNS_TEXT in found,
        "vcpu_clock": VCPU_CLOCK_SYMBOL + b"\0" in found,
        "pause": PAUSE_TEXT in found,
    }
    if qemu_version_tuple(facts["version"]):  # (a binary that is not QEMU is asked again, and refused again)
        known = {k: v for k, v in known.items() if not k.startswith(f"{binary}:")}
        known[key] = facts
        write_text_atomic(store, json_text(known, indent=1, sort_keys=True) + "\n")
    return facts


def _binary_has(binary: str, needles: tuple[bytes, ...]) -> set[bytes]:
    """Which of ``needles`` the binary holds: qemu_plugin_charge_ns's name (an exported plugin API symbol, in the
    dynamic string table; a stock QEMU has no such string anywhere) and 0006's error text. Read in 1 MiB pieces,
    overlapping."""
    found: set[bytes] = set()
    tail = b""
    keep = max(len(n) for n in needles)
    try:
        with open(binary, "rb") as f:
            while piece := f.read(1 << 20):
                found.update(n for n in needles if n in tail + piece)
                if len(found) == len(needles):
                    break
                tail = piece[-keep:]
    except OSError:
        return set()
    return found


def _ask(binary: str, *args: str) -> list[str]:
    try:
        res = subprocess.run([binary, *args], capture_output=True, **TOOL_TEXT, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [ln.strip() for ln in res.stdout.splitlines() if ln.strip()]


def private_prefixes(kind: str = "qemu") -> list[Path]:
    """The QEMUs unpacked into numalab's cache (``make setup-qemu10``: qemu; ``make setup-qemu-charge``:
    qemu-charge), newest version first."""
    root = cache_dir(kind)
    found = [p for p in root.iterdir() if (p / "usr" / "bin" / DEFAULT_QEMU).is_file() and (p / ".complete").exists()]
    return sorted(found, key=lambda p: _version_key(p.name), reverse=True)


def _version_key(name: str) -> tuple[int, ...]:
    """``10.0.2+ds-2...`` -> (10, 0, 2): newest first, 10 after 9."""
    return tuple(int(n) for n in re.findall(r"\d+", name.split("+", 1)[0].split("-", 1)[0]))
