"""The scheduler under test (``--scheduler NAME|PATH``): the kernel's own classes (``fair``: nothing is loaded)
or a sched_ext scheduler, one of the examples built with the kernel (lab.kernel.sched_ext), one of the scx
project's schedulers from its crates.io release (``scx_bpfland``, ``scx_layered@1.0.23``: lab.host.scx_release,
built or found in numalab's cache) or a user's binary, whose shared libraries travel with it into the guest.
Resolved against the run's kernel before any boot (one-line errors naming --scheduler); after the run, what the
guest read back of /sys/kernel/sched_ext (scheduler-state.txt) is the manifest's ``scheduler`` and, when the
scheduler did not run with its ops from the workload's start to its end, the run's status ``scheduler-ejected``
with the kernel's reason (docs/sched-ext.md)."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from lab.analysis.scx_topology import scheduler_topology
from lab.errors import LabError
from lab.guest import image
from lab.host import scx_release
from lab.kernel.bootable import Kernel
from lab.kernel.fragments import parse_config
from lab.kernel.sched_ext import EXAMPLES, config_has_sched_ext, shipped
from lab.record_files import DMESG, SCHEDULER_OUT, SCHEDULER_STATE
from lab.topology.model.topology import Topology
from lab.untrusted import strip_colours, term_safe, to_int
from lab.workloads.elf import elf_interpreter, ldd_closure

FAIR = "fair"
STATUS = "scheduler-ejected"  # a run whose sched_ext scheduler was not enabled, with its ops, throughout
BUILD_HINT = ("numalab kernel build --source /usr/src/linux-source-6.12.tar.xz --fragment sched-ext --name v6.12 "
              "(docs/sched-ext.md)")  # fmt: skip
# kernel-configs/scx.config's symbols that a scheduler's load needs (the others serve some of them, or 7.3's examples)
SCX_NEEDS = ("CONFIG_IKCONFIG_PROC", "CONFIG_CGROUPS", "CONFIG_FUNCTION_TRACER", "CONFIG_DYNAMIC_FTRACE",
             "CONFIG_KALLSYMS_ALL")  # fmt: skip
# ... and what one of them needs beyond the others: scx_lavd's extern per-CPU cpufreq_cpu_data (without CPU_FREQ
# "libbpf: extern (var ksym) 'cpufreq_cpu_data': not found in kernel BTF", EINVAL at load)
CRATE_NEEDS = {"scx_lavd": ("CONFIG_CPU_FREQ",)}
WAIT_S = 10.0  # how long the guest's init waits for a scheduler to be enabled (guest seconds): the examples' 0.5-0.8 s
# An scx scheduler's: scx_layered's load and verification took 7-12 s under TCG on 9 vCPUs (more under load). The init
# stops waiting as soon as it is enabled or its program exits, so only a scheduler still loading waits this long.
CRATE_WAIT_S = 60.0
# scx_lavd's is longer: its BPF took 89 s of guest time to load and verify under TCG on genoa-nps2's 8 vCPUs (v7.3-scx,
# 2026-11-29, the host loaded); after 60 s it was not yet enabled, and the run was scheduler-ejected
CRATE_WAITS_S = {"scx_lavd": 300.0}


def split(spec: str) -> tuple[str, tuple[str, ...]]:
    """``NAME|PATH [ARGS...]`` -> (NAME|PATH, ARGS): one printable line of shell words."""
    if not spec.strip() or not spec.isprintable() or len(spec) > 1024:
        raise LabError(f"--scheduler {spec!r}: expected NAME|PATH [ARGS...] on one printable line")
    try:
        words = shlex.split(spec)
    except ValueError as err:
        raise LabError(f"--scheduler {spec}: {err}") from None
    if words[0] == FAIR and len(words) > 1:
        raise LabError(f"--scheduler {spec}: fair takes no arguments (it is the kernel's own classes)")
    if is_crate(words[0]):
        scx_release.parse(words[0])  # (NAME@VERSION's words: one line now, not after a kernel build)
    return words[0], tuple(words[1:])


def label_of(spec: str) -> str:
    """--scheduler as a short name for a side, a directory or a matrix setting: fair, scx_simple, scx_qmap-e-100
    (a path's file name)."""
    word, args = split(spec)
    words = [word.rsplit("/", 1)[-1], *(a.lstrip("-") for a in args)]
    return re.sub(r"[^A-Za-z0-9._+]+", "-", "-".join(w for w in words if w)).strip("-")[:60] or FAIR


@dataclass(frozen=True)
class Scheduler:
    """One side's scheduler, resolved against its kernel."""

    asked: str  # as given: "fair", "scx_simple", "scx_qmap -e 100", "/path/to/scx_x --flag"
    kind: str  # "fair" or "sched_ext"
    name: str = FAIR  # the binary's name (the guest's /scheduler/NAME); "fair"
    args: tuple[str, ...] = ()
    binary: Path | None = None
    source: str = ""  # "kernel:<kernel>" (an example), "crate:<crate>@<version>[+patch:<sha12>...]" or "path:<path>"
    ops: str = ""  # the ops name /sys/kernel/sched_ext/root/ops must show ("" for a user's binary: any)
    wait_s: float = WAIT_S  # the guest init's wait for it to be enabled

    @property
    def sched_ext(self) -> bool:
        return self.kind == "sched_ext"

    @property
    def label(self) -> str:
        """A short name for an A/B's side and a record's directory: fair, scx_simple, scx_qmap-e-100."""
        return label_of(self.asked)

    def guest_command(self) -> str:
        return shlex.join([f"/{image.SCHEDULER_DIR}/{self.name}", *self.args]) if self.sched_ext else ""

    def layer(self) -> Path | None:
        """Its binary and shared libraries as a guest image layer (None for fair)."""
        if self.binary is None:
            return None
        libs = ldd_closure(str(self.binary)) if _interp(self.binary) else []
        return image.scheduler_image(self.binary, self.name, tuple(dict.fromkeys(libs)))

    def to_dict(self) -> dict:
        """The manifest's ``scheduler`` before the guest's word is added (:func:`readback`)."""
        sha = hashlib.sha256(self.binary.read_bytes()).hexdigest() if self.binary else None
        return {"asked": self.asked, "kind": self.kind, "binary_sha256": sha, "source": self.source or None,
                "ops_expected": self.ops or None}  # fmt: skip


def _interp(path: Path) -> str | None:
    with open(path, "rb") as f:
        return elf_interpreter(f.read(1 << 20))


def _check_scx_kernel(word: str, kernel: Kernel, crate: str = "") -> None:
    """What the scx schedulers need of a kernel beyond sched_ext (kernel-configs/scx.config), and what ``crate``
    needs of its own, checked in its saved .config before any build or boot: without it each fails at load in its
    own words."""
    config = parse_config(kernel.config.read_text(errors="replace")) if kernel.config else {}
    missing = [s for s in SCX_NEEDS if config.get(s) != "y"]
    own = [s for s in CRATE_NEEDS.get(crate, ()) if config.get(s) != "y"]
    if missing or own:
        needs = [f"{', '.join(missing)}, which the scx schedulers need"] if missing else []
        needs += [f"{', '.join(own)}, which {crate} needs"] if own else []
        raise LabError(f"--scheduler {word}: kernel {kernel.name} lacks {'; and '.join(needs)} (build it with "
                       "--fragment sched-ext --fragment scx: docs/sched-ext.md)")  # fmt: skip


def is_path(word: str) -> bool:
    return "/" in word or Path(word).exists()


def is_crate(word: str) -> bool:
    """``scx_bpfland``, ``scx_layered@1.0.23``: one of the scx project's schedulers from crates.io. The names are
    not the kernel's examples' (scx_simple, scx_qmap, scx_central), so a bare name is never ambiguous; ``@`` is the
    crate's own version (scx_layered's 1.0.23, not the project's tag v1.0.20)."""
    return not is_path(word) and ("@" in word or word in scx_release.CRATES)


def resolve(spec: str, kernel: Kernel, say=None) -> Scheduler:
    """``--scheduler`` on ``kernel``: fair; an example scheduler built with it; an scx scheduler's release (built
    now, with progress through ``say``, or found in the cache); or a user's executable ELF (one numalab built
    into its scx cache, ``numalab scheduler build --patch``, is recorded as the crate it was built from)."""
    word, args = split(spec)
    if word == FAIR:
        return Scheduler(FAIR, FAIR)
    if not config_has_sched_ext(kernel.config):
        raise LabError(f"--scheduler {spec}: kernel {kernel.name} has no CONFIG_SCHED_CLASS_EXT (sched_ext came in "
                       f"6.12; build one with the sched-ext fragment: {BUILD_HINT})")  # fmt: skip
    if is_crate(word):
        crate, version = scx_release.parse(word)
        _check_scx_kernel(word, kernel, crate)
        try:
            built = scx_release.build(crate, version, say=say or (lambda _m: None))
        except LabError as err:  # (named once: "--scheduler scx_layered@1.0.99: no such version ...")
            msg = str(err)
            raise LabError(f"--scheduler {word}: {msg.split(': ', 1)[1] if msg.startswith(crate) else msg}") from None
        return Scheduler(spec, "sched_ext", crate, args, built.binary, built.meta["source"], built.meta["ops"],
                         CRATE_WAITS_S.get(crate, CRATE_WAIT_S))  # fmt: skip
    if is_path(word):
        check_early(spec)
        path = Path(word).expanduser()
        if _interp(path):
            ldd_closure(str(path))  # a library missing on the host: one line, now
        meta = scx_release.meta_of_binary(path)
        if meta:  # (built by numalab from a crate, patched perhaps: recorded as such, its ops name checked)
            return Scheduler(spec, "sched_ext", meta["crate"], args, path.resolve(), meta["source"], meta["ops"],
                             CRATE_WAITS_S.get(meta["crate"], CRATE_WAIT_S))  # fmt: skip
        name = re.sub(r"[^A-Za-z0-9._+-]", "-", path.name)[:64] or "scheduler"
        return Scheduler(spec, "sched_ext", name, args, path.resolve(), f"path:{path.resolve()}")
    have = shipped(kernel.config)
    if word not in have:
        known = ", ".join([FAIR, *have]) if have else f"{FAIR} (no example schedulers were built with it)"
        raise LabError(f"--scheduler {word}: not a scheduler of kernel {kernel.name} (it has: {known}; or give "
                       "the path of a scheduler binary)")  # fmt: skip
    return Scheduler(spec, "sched_ext", word, args, have[word], f"kernel:{kernel.name}", EXAMPLES[word])


# --- after the run: what the guest read back -----------------------------------------------------------------

_DISABLED = re.compile(r"sched_ext: BPF scheduler \"([^\"]*)\" disabled \(([^)]*)\)")
_ERROR_LINE = re.compile(r"sched_ext: (.*(?:error|stall|failed|reject).*)", re.I)


_WORD = re.compile(r"[\w.-]{1,64}")  # a state or an ops name, as the guest wrote it (anything else: "?")


def _word(text: str) -> str:
    return text if _WORD.fullmatch(text) else "?"


def _states(text: str) -> dict[str, dict]:
    """scheduler-state.txt (the guest's: every value checked, nothing taken as it came)."""
    out: dict[str, dict] = {}
    for line in text.splitlines()[:64]:
        words = line.split()
        if len(words) == 3 and words[0] in ("before", "start", "end", "after"):
            out.setdefault(words[0], {})
            out[words[0]] |= {"state": _word(words[1]), "ops": None if words[2] == "-" else _word(words[2])}
        elif len(words) == 2 and "_" in words[0] and words[0].split("_", 1)[0] in ("before", "start", "end", "after"):
            when, what = words[0].split("_", 1)
            if what in ("enable_seq", "nr_rejected", "alive"):
                out.setdefault(when, {})[what] = to_int(words[1])
        elif len(words) == 2 and words[0] in ("exit", "waited_ds"):
            out[words[0]] = to_int(words[1])  # type: ignore[assignment]
        elif words[:2] == ["stop", "killed"]:
            out["killed"] = True  # type: ignore[assignment]
    return out


def _tail(path: Path, n: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _kernel_reason(record: Path) -> str | None:
    """The kernel's word on why a BPF scheduler stopped: its 'disabled (...)' line with the next one (the
    error's text), from dmesg.txt."""
    lines = _tail(record / DMESG, 200_000).splitlines()
    for i, line in enumerate(lines):
        m = _DISABLED.search(line)
        if m and m.group(2) != "unregistered from user space":  # (its program's own exit: its words say more)
            detail = next((ln.split("sched_ext: ", 1)[1].strip() for ln in lines[i + 1 : i + 4]
                           if "sched_ext: " in ln and not _DISABLED.search(ln)), "")  # fmt: skip
            return f'BPF scheduler "{m.group(1)}" disabled ({m.group(2)})' + (f": {detail}" if detail else "")
    for line in lines:
        m = _ERROR_LINE.search(line)
        if m:
            return m.group(1).strip()[:200]
    return None


def at_timeout(console: str, label: str, started: str | None) -> str:
    """At a timeout, the run's sched_ext scheduler named with what is known of it: whether the guest saw it
    enabled at the workload's start (the init's ``scheduler`` stage: its ops, or none), and the kernel's last
    word on it from the console. The watchdog ejects a scheduler that stalls a task only after its timeout (30 s
    unless the scheduler asked for less: ``ops.timeout_ms``), so a host --timeout that ends the run first is
    said to be the cause it may be."""
    said = None
    for line in reversed(console.splitlines()[-2000:]):
        m = _DISABLED.search(line)
        if m:
            said = f'BPF scheduler "{m.group(1)}" disabled ({m.group(2)})'
            break
        e = _ERROR_LINE.search(line)
        if e and said is None:
            said = e.group(1).strip()[:200]
    if started is None:
        seen = "not yet started"
    elif started in ("", "none"):
        seen = "not enabled at the workload's start"
    else:
        seen = f"enabled at the workload's start (ops {started})"
    out = f"under the sched_ext scheduler {label}, {seen}"
    if said:
        return term_safe(f"{out}; kernel: {said}")[:400]
    if started not in (None, "", "none"):
        out += ("; the kernel said nothing of it on the console: a scheduler that stalls a task is ejected only "
                "after its watchdog (up to 30 s), which a shorter --timeout cuts off")  # fmt: skip
    return term_safe(out)[:400]


_KEY_LINE = re.compile(r"load failed|cannot use|invalid|not allowed|unknown func|not supported|EXIT:|error", re.I)


_PANIC = re.compile(r"^thread '[^']{0,64}'(?: \(\d+\))? panicked at ")  # a Rust scheduler's panic (scx's)


def _own_words(record: Path) -> str:
    """The scheduler's own account of its end: a Rust scheduler's panic (its 'panicked at FILE:LINE:COL:' line
    and its message: what scx_layered says on a machine of more nodes than it was built for), else its last line,
    after the first lines that name the failure (a libbpf load failure and the verifier's reason, an exit
    message), at most three, in its order."""
    lines = [ln.strip() for ln in strip_colours(_tail(record / SCHEDULER_OUT)).splitlines() if ln.strip()]
    if not lines:
        return ""
    for i, ln in enumerate(lines):
        if _PANIC.match(ln):
            message = lines[i + 1][:200] if i + 1 < len(lines) else ""
            return f"scheduler's output: {ln[:160]} {message}".rstrip()
    key = [ln for ln in lines[:-1] if _KEY_LINE.search(ln)][:2]
    return "scheduler's output: " + "; ".join(ln[:160] for ln in [*key, lines[-1]])


def readback(record: Path, asked: dict, ops_expected: str) -> tuple[dict, str | None]:
    """The manifest's ``scheduler`` with what the guest read back, and the reason it was ejected (None when
    it ran with its ops from the workload's start to its end, and for fair)."""
    if asked.get("kind") != "sched_ext":
        return fair_record(), None
    text = _tail(record / SCHEDULER_STATE, 8000)
    st = _states(text)
    start, end = st.get("start") or {}, st.get("end") or {}

    def ran(s: dict) -> bool:
        ops = s.get("ops")
        return s.get("state") == "enabled" and ops not in (None, "?") and (not ops_expected or ops == ops_expected)

    ejected = not (ran(start) and ran(end) and start.get("enable_seq") == end.get("enable_seq")
                   and end.get("alive") != 0)  # fmt: skip
    reason = None
    if ejected:
        why = []
        if not text:
            why.append("the guest wrote no scheduler-state.txt")
        elif not ran(start):
            why.append(f"not enabled at the workload's start (state {start.get('state')}, ops {start.get('ops')}"
                       + (f", expected {ops_expected}" if ops_expected else "") + ")")  # fmt: skip
            if end.get("alive") == 1 and st.get("killed") and isinstance(st.get("waited_ds"), int):
                why.append(f"its program was still running, not enabled, when the init stopped waiting after "
                           f"{st['waited_ds'] / 10:g} s (still loading?)")  # fmt: skip
        elif not ran(end):
            why.append(f"no longer enabled at the workload's end (state {end.get('state')}, ops {end.get('ops')})")
        elif start.get("enable_seq") != end.get("enable_seq"):
            why.append("it was disabled and enabled again during the workload")
        elif end.get("alive") == 0:
            why.append("its program had exited before the workload's end")
        kernel = _kernel_reason(record)
        why.append(f"kernel: {kernel}" if kernel else _own_words(record))
        reason = term_safe("; ".join(w for w in why if w))[:1000]  # (the guest's words: escaped, bounded)
    out = asked | {
        "start": {k: start.get(k) for k in ("state", "ops", "enable_seq", "nr_rejected")},
        "end": {k: end.get(k) for k in ("state", "ops", "enable_seq", "nr_rejected")},
        "exit": st.get("exit"),
        "waited_s": st["waited_ds"] / 10 if isinstance(st.get("waited_ds"), int) else None,
        "ejected": ejected,
        "reason": reason,
    }
    return out, reason


MACHINE_SAID_BYTES = 256 * 1024  # of scheduler.out's start read for the machine it built (printed at its start)


def machine_said(record: Path, topo: Topology) -> dict | None:
    """The manifest's ``scheduler.topology``: the machine the scheduler said it built against numalab's
    (lab.analysis.scx_topology), None when it said nothing of it."""
    try:
        with open(record / SCHEDULER_OUT, "rb") as f:
            text = f.read(MACHINE_SAID_BYTES).decode(errors="replace")
    except FileNotFoundError:
        return None
    return scheduler_topology(text, topo)


def fair_record() -> dict:
    """The manifest's ``scheduler`` of a run on the kernel's own classes (and how records without one read)."""
    return {"asked": FAIR, "kind": FAIR, "binary_sha256": None, "source": None, "ops_expected": None,
            "start": None, "end": None, "ejected": False, "reason": None}  # fmt: skip


def check_early(spec: str) -> None:
    """What can be said of --scheduler before its kernel exists (numalab ab, a matrix check): the words; an
    example's name that no kernel ships; a PATH that is not an executable ELF."""
    word, _args = split(spec)
    if word == FAIR:
        return
    if is_crate(word):
        scx_release.parse(word)
        return
    if is_path(word):
        path = Path(word).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise LabError(f"--scheduler {word}: not an executable file")
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                raise LabError(f"--scheduler {word}: not an ELF program")
    elif word not in EXAMPLES:
        raise LabError(f"--scheduler {word}: not fair, an example scheduler ({', '.join(EXAMPLES)}), an scx "
                       f"scheduler from crates.io ({', '.join(scx_release.CRATES)}, NAME@VERSION) "
                       "or a path")  # fmt: skip


def fragments_for(spec: str, fragments: tuple[str, ...]) -> tuple[str, ...]:
    """The fragments of a kernel that must run ``spec``: ``fragments``, with sched-ext for a sched_ext scheduler,
    and scx too for one of the scx project's from crates.io."""
    word = split(spec)[0]
    if word == FAIR:
        return fragments
    names = {Path(f).name.removesuffix(".config") for f in fragments}
    out = fragments if "sched-ext" in names else (*fragments, "sched-ext")
    return out if not is_crate(word) or "scx" in names else (*out, "scx")
