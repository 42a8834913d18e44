"""The scheduler under test (``--scheduler NAME|PATH``): the kernel's own classes (``fair``: nothing is loaded)
or a sched_ext scheduler, one of the examples built with the kernel (lab.kernel.sched_ext) or a user's
binary, whose shared libraries travel with it into the guest. Resolved against the run's kernel before any
boot (one-line errors naming --scheduler); after the run, what the guest read back of
/sys/kernel/sched_ext (scheduler-state.txt) is the manifest's ``scheduler`` and, when the scheduler did not
run with its ops from the workload's start to its end, the run's status ``scheduler-ejected`` with the
kernel's reason (docs/sched-ext.md)."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.guest import image
from lab.kernel.bootable import Kernel
from lab.kernel.sched_ext import EXAMPLES, config_has_sched_ext, shipped
from lab.record_files import DMESG, SCHEDULER_OUT, SCHEDULER_STATE
from lab.untrusted import term_safe, to_int
from lab.workloads.elf import elf_interpreter, ldd_closure

FAIR = "fair"
STATUS = "scheduler-ejected"  # a run whose sched_ext scheduler was not enabled, with its ops, throughout
BUILD_HINT = ("numalab kernel build --source /usr/src/linux-source-6.12.tar.xz --fragment sched-ext --name v6.12 "
              "(docs/sched-ext.md)")  # fmt: skip


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
    source: str = ""  # "kernel:<kernel>" (an example built with it) or "path:<host path>"
    ops: str = ""  # the ops name /sys/kernel/sched_ext/root/ops must show ("" for a user's binary: any)

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


def resolve(spec: str, kernel: Kernel) -> Scheduler:
    """``--scheduler`` on ``kernel``: fair; an example scheduler built with it; or a user's executable ELF."""
    word, args = split(spec)
    if word == FAIR:
        return Scheduler(FAIR, FAIR)
    if not config_has_sched_ext(kernel.config):
        raise LabError(f"--scheduler {spec}: kernel {kernel.name} has no CONFIG_SCHED_CLASS_EXT (sched_ext came in "
                       f"6.12; build one with the sched-ext fragment: {BUILD_HINT})")  # fmt: skip
    if "/" in word or Path(word).exists():
        check_early(spec)
        path = Path(word).expanduser()
        if _interp(path):
            ldd_closure(str(path))  # a library missing on the host: one line, now
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
    lines = [ln.strip() for ln in _tail(record / SCHEDULER_OUT).splitlines() if ln.strip()]
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
    if "/" in word or Path(word).exists():
        path = Path(word).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise LabError(f"--scheduler {word}: not an executable file")
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                raise LabError(f"--scheduler {word}: not an ELF program")
    elif word not in EXAMPLES:
        raise LabError(f"--scheduler {word}: not fair, an example scheduler ({', '.join(EXAMPLES)}) or a path")


def fragments_for(spec: str, fragments: tuple[str, ...]) -> tuple[str, ...]:
    """The fragments of a kernel that must run ``spec``: ``fragments``, with sched-ext for a sched_ext scheduler."""
    if split(spec)[0] == FAIR or any(Path(f).name in ("sched-ext", "sched-ext.config") for f in fragments):
        return fragments
    return (*fragments, "sched-ext")
