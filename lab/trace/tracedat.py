"""Reading trace.dat with the real trace-cmd (libtraceevent does the decoding).

``trace-cmd report`` prints one line per event::

    numa01-123   [001]    12.345678: sched_move_numa:      pid=123 tgid=123 ...

Each analysis declares the events it needs (``REQUIRES``) and gets them as
:class:`Event` records.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError

_LINE = re.compile(
    r"^\s*(?P<comm>.*?)-(?P<pid>-?\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s*(?P<rest>.*)$"
)
_FIELD = re.compile(r"(\w+)=(\S+)")
_DROPPED = re.compile(r"CPU:(\d+) \[(\d+) EVENTS DROPPED\]")


@dataclass(frozen=True)
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
    events: list[Event]
    dropped: dict[int, int]  # cpu -> events dropped (ring buffer overruns)
    error: str | None = None  # set when trace-cmd could not read all of the file

    def counts(self) -> Counter:
        return Counter(e.name for e in self.events)


def _report(path: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            ["trace-cmd", "report", "-i", str(path)], capture_output=True, text=True, errors="replace"
        )
    except FileNotFoundError:
        raise LabError("trace-cmd: not found on the host; install trace-cmd (make setup)") from None


def read_trace(path: Path) -> TraceData:
    """All events in a trace.dat. A damaged file yields what could be read plus ``error``."""
    if not path.exists():
        raise LabError(f"{path}: no such trace file")
    res = _report(path)
    events: list[Event] = []
    dropped: dict[int, int] = {}
    for line in res.stdout.splitlines():
        m = _LINE.match(line)
        if m:
            events.append(
                Event(
                    float(m["ts"]),
                    int(m["cpu"]),
                    m["comm"].strip(),
                    int(m["pid"]),
                    m["event"],
                    dict(_FIELD.findall(m["rest"])),
                )
            )
            continue
        d = _DROPPED.search(line)
        if d:
            dropped[int(d.group(1))] = dropped.get(int(d.group(1)), 0) + int(d.group(2))
    error = None
    if res.returncode != 0:
        msg = [ln for ln in res.stderr.splitlines() if ln.strip()]
        error = f"trace-cmd report failed (exit {res.returncode}): {msg[-1] if msg else 'no message'}"
    return TraceData(events, dropped, error)


def record_overruns(log: Path) -> int:
    """Events lost while recording: the per-CPU 'overrun:' lines of tracefs' per_cpu/cpuN/stats."""
    if not log.exists():
        return 0
    return sum(int(n) for n in re.findall(r"^\s*overrun:\s*(\d+)", log.read_text(errors="replace"), re.M))


def iter_named(data: TraceData, names: tuple[str, ...]) -> Iterator[Event]:
    wanted = {n.split(":")[-1] for n in names}
    return (e for e in data.events if e.name in wanted)
