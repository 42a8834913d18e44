"""Reading trace.dat with the real trace-cmd (libtraceevent does the decoding).

``trace-cmd report`` prints one line per event::

    numa01-123   [001]    12.345678: sched_move_numa:      pid=123 tgid=123 ...

and the field names come from the event's format in the file. Its output is
streamed and parsed as it arrives. ``trace-cmd report`` says nothing about a
truncated file (it prints fewer events and exits 0), so :func:`check_file`
asks ``trace-cmd dump`` for the file's sections and per-CPU data and checks
them against the file size.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError
from lab.events import WAKEUP, WAKEUP_NEW
from lab.untrusted import read_guest_text

_LINE = re.compile(r"^\s*(.*?)-(-?\d+)\s+\[(\d+)\]\s+(?:\S+\s+)?(\d+\.\d+):\s+(\w+):\s*(.*)$")
_FIELD = re.compile(r"(\w+)=(\S*)")
# trace-cmd's sched plugin prints sched_wakeup and sched_wakeup_new in its own way, not as name=value
# (sched_waking as the kernel's format has it):
# "numa01:179 [120] CPU:001" (older trace-cmd: "... success=1 CPU:001")
_WAKEUP = re.compile(r"^(.*):(-?\d+) \[(-?\d+)\](?: success=\d)? CPU:(\d+)")
_PLUGIN_PRINTED = frozenset({WAKEUP.name, WAKEUP_NEW.name})
_DROPPED = re.compile(r"CPU:(\d+) \[(\d+) EVENTS DROPPED\]")
_CPU_DATA = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+\[id, data offset and size\]", re.M)


@dataclass(frozen=True, slots=True)
class Event:
    ts: float
    cpu: int
    comm: str
    pid: int
    name: str
    fields: dict[str, str]

    def int(self, key: str, default: int = 0) -> int:
        try:
            return int(self.fields.get(key, default))
        except ValueError:
            return default


@dataclass
class TraceData:
    events: list[Event]  # decoded events (those asked for)
    counts: Counter = field(default_factory=Counter)  # every event in the file, by name
    dropped: dict[int, int] = field(default_factory=dict)  # cpu -> events the tracer dropped
    problems: list[str] = field(default_factory=list)  # what could not be read
    # event name -> the field names its print format shows, from the formats trace.dat carries ({}: unknown)
    formats: dict[str, frozenset[str]] = field(default_factory=dict)

    def named(self, *names: str) -> list[Event]:
        wanted = {n.split(":")[-1] for n in names}
        return [e for e in self.events if e.name in wanted]


def _trace_cmd(args: list[str], **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["trace-cmd", *args], capture_output=True, text=True, errors="replace", **kw)
    except FileNotFoundError:
        raise LabError("trace-cmd: not found on the host; install trace-cmd (make setup)") from None


def check_file(path: Path) -> list[str]:
    """Structural problems of a trace.dat (truncation, unreadable sections); [] if sound."""
    size = path.stat().st_size
    res = _trace_cmd(["dump", "--flyrecord", "-i", str(path)])
    problems = []
    if res.returncode != 0:
        msg = [ln.strip() for ln in (res.stderr + res.stdout).splitlines() if "cannot" in ln or "error" in ln.lower()]
        problems.append(f"{path.name}: damaged or truncated ({msg[-1] if msg else 'trace-cmd dump failed'})")
    for cpu, off, length in _CPU_DATA.findall(res.stdout):
        if int(off) + int(length) > size:
            problems.append(f"{path.name}: CPU {cpu} data is cut off ({int(off) + int(length) - size} bytes missing)")
    return problems


# A print format's "name=%..." conversions: the field names trace-cmd report prints, and so the ones the
# analyses read (they can differ from the format's own fields: mm_migrate_pages prints its "succeeded"
# as nr_succeeded).
_PRINTED_FIELD = re.compile(r"(\w+)=%")


def read_formats(path: Path) -> dict[str, frozenset[str]]:
    """Event name -> the field names its print format shows, from the event formats a trace.dat carries (trace-cmd
    record and extract copy every event's ``format`` file into it, raw mode the enabled ones: the guest needs no
    extra step). {} when trace-cmd cannot list them."""
    res = _trace_cmd(["dump", "--events", "-i", str(path)])
    if res.returncode != 0:
        return {}
    out: dict[str, frozenset[str]] = {}
    for block in re.split(r"^name: ", res.stdout, flags=re.M)[1:]:
        name, _, rest = block.partition("\n")
        out[name.strip()] = frozenset(_PRINTED_FIELD.findall(rest.partition("print fmt:")[2]))
    return out


def _parse_report(lines, wanted: set[str] | None, events: list[Event], counts: Counter, dropped: dict) -> None:
    for line in lines:
        _, sep, rest = line.partition(": ")
        if not sep:
            d = _DROPPED.search(line)
            if d:
                dropped[int(d.group(1))] = dropped.get(int(d.group(1)), 0) + int(d.group(2))
            continue
        name = rest.partition(":")[0]
        counts[name] += 1
        if wanted is not None and name not in wanted:
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        comm, pid, cpu, ts, name, fields = m.groups()
        decoded = dict(_FIELD.findall(fields))
        if name in _PLUGIN_PRINTED and "pid" not in decoded and (w := _WAKEUP.match(fields.strip())):
            decoded = dict(zip(("comm", "pid", "prio", "target_cpu"), w.groups(), strict=True))
        events.append(Event(float(ts), int(cpu), comm.strip(), int(pid), name, decoded))


def read_trace(path: Path, names: tuple[str, ...] | None = None) -> TraceData:
    """Count every event in a trace.dat and decode those in ``names`` (all if None).

    Counting costs a string split per line; only the decoded events pay for
    the regex and the field dictionary, so reading a large trace for a few
    NUMA events stays close to trace-cmd's own speed. Damage is reported in
    ``problems``.
    """
    if not path.is_file():
        raise LabError(f"{path}: no such trace file")
    wanted = {n.split(":")[-1] for n in names} if names is not None else None
    problems = check_file(path)
    events: list[Event] = []
    counts: Counter = Counter()
    dropped: dict[int, int] = {}
    # stderr goes to a file: a pipe read only after stdout could fill and stall trace-cmd. The with-block
    # closes both ends and reaps trace-cmd however the loop ends.
    with tempfile.TemporaryFile("w+", errors="replace") as err_file:
        try:
            proc = subprocess.Popen(
                ["trace-cmd", "report", "-i", str(path)],
                stdout=subprocess.PIPE, stderr=err_file, text=True, errors="replace", bufsize=1 << 20,
            )  # fmt: skip
        except FileNotFoundError:
            raise LabError("trace-cmd: not found on the host; install trace-cmd (make setup)") from None
        with proc:
            try:
                _parse_report(proc.stdout, wanted, events, counts, dropped)
            finally:
                if proc.poll() is None and proc.stdout is not None and not proc.stdout.closed:
                    proc.stdout.close()
            rc = proc.wait()
        if rc != 0:
            err_file.seek(0)
            msg = [ln for ln in err_file.read(1 << 16).splitlines() if ln.strip()]
            problems.append(f"trace-cmd report failed: {msg[-1] if msg else 'exit ' + str(rc)}")
    return TraceData(events, counts, dropped, problems, read_formats(path))


STAT_KEYS = ("entries", "overrun", "commit overrun", "dropped events")
_STAT_LINE = re.compile(r"^(?:\S*/cpu(\d{1,5})/stats:)?\s*([a-z ]+?):\s*(\d{1,20})\s*$")


def stats_per_cpu(stats: Path) -> dict[int, dict[str, int]]:
    """cpu -> {"entries", "overrun", "commit overrun", "dropped events"} from the guest's per_cpu stats dump
    ("cpuN" headers and bare lines in older records, grep -H's ".../cpuN/stats:key: N" lines now)."""
    out: dict[int, dict[str, int]] = {}
    cpu: int | None = None
    for line in (read_guest_text(stats) or "").splitlines():
        head = re.fullmatch(r"cpu(\d{1,5})", line.strip())
        if head:
            cpu = int(head.group(1))
            continue
        m = _STAT_LINE.match(line)
        if not m or m.group(2) not in STAT_KEYS:
            continue
        c = int(m.group(1)) if m.group(1) is not None else cpu
        if c is not None:
            out.setdefault(c, dict.fromkeys(STAT_KEYS, 0))[m.group(2)] = int(m.group(3))
    return out


def stats_lost(stats: Path) -> dict[str, int]:
    """From the guest's per_cpu/cpuN/stats dump: events lost (overrun) and left for extraction (entries).
    Lines are "entries: N" (older records) or grep -H's ".../cpuN/stats:entries: N"."""
    out = {"overrun": 0, "entries": 0}
    if (text := read_guest_text(stats)) is not None:
        for key in out:
            out[key] = sum(int(n) for n in re.findall(rf"^(?:\S*/stats:)?\s*{key}:\s*(\d{{1,20}})", text, re.M))
    return out
