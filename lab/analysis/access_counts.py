"""The access-matrix plugin's counts -> a CPU-node x memory-node matrix, its time series, local %.

The plugin (``images/plugins/access_matrix.c``) writes cumulative per-vCPU counts
every few hundred milliseconds, stamped with the host's CLOCK_MONOTONIC; the
run stamps the workload's start and end with the same clock when the console
shows them. The matrix is cut to the workload window: the last snapshot at or
before the start to the first at or after the end (so it spans at most one
snapshot period more than the workload on either side).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lab.analysis.stats import hmean
from lab.errors import LabError

# A correct map leaves only firmware and ROM reads outside the nodes (none were seen
# here); a wrong one puts whole nodes there. More than this share fails the run.
OUTSIDE_LIMIT = 0.001
EXTRA_COLS = ("outside", "io", "unresolved")


@dataclass
class AccessLog:
    sample: int
    interval_ms: int
    vcpus: int
    nodes: int
    ranges: list[tuple[int, int, int]] = field(default_factory=list)
    snaps: list[tuple[int, list[int]]] = field(default_factory=list)  # (mono ns, flat counts)
    ended: bool = False
    outside_first: int | None = None

    @property
    def width(self) -> int:
        return self.nodes + len(EXTRA_COLS)


def read_log(path: Path) -> AccessLog:
    """Parse the plugin's output. A missing or malformed file is a LabError naming it."""
    head: dict[str, int] = {}
    log: AccessLog | None = None
    ranges = []

    def counts() -> int:  # the header is read by the first snapshot
        nonlocal log
        if log is None:
            log = AccessLog(head["sample"], head["interval_ms"], head["vcpus"], head["nodes"], ranges)
        return log.vcpus * log.width

    def header(words: list[str]) -> None:
        if words[0] in ("api", "sample", "interval_ms", "vcpus", "nodes"):
            head[words[0]] = int(words[1])
        elif words[0] == "range":
            ranges.append((int(words[1]), int(words[2], 16), int(words[3], 16)))
        elif words[0] == "outside-first" and log is not None:
            log.outside_first = int(words[1], 16)

    snaps, ended = read_plugin_file(path, "numalab-access-matrix 1", "access-matrix", header, counts)
    assert log is not None  # (a snapshot was read)
    log.snaps, log.ended = snaps, ended
    return log


def read_plugin_file(
    path: Path, magic: str, what: str, header: Callable[[list[str]], None], counts: Callable[[], int]
) -> tuple[list[tuple[int, list[int]]], bool]:
    """A file the plugin writes (the access matrix's, --remote-latency's): ``magic`` as its first line, then
    words per line: ``snap``/``end`` lines are snapshots of ``counts()`` numbers (snapshot_line), every other
    line goes to ``header``. Returns the snapshots and whether the plugin wrote its ``end`` line. A missing or
    malformed file is a LabError naming it (``what`` names the kind); a ValueError, IndexError or KeyError of
    ``header`` or ``counts`` is a malformed line."""
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise LabError(f"{path}: cannot read the {what} counts ({err.strerror})") from None
    if not lines or lines[0] != magic:
        raise LabError(f"{path}: not {'an' if what[0] in 'aeiou' else 'a'} {what} file "
                       f"(first line {lines[0] if lines else ''!r})")  # fmt: skip
    snaps: list[tuple[int, list[int]]] = []
    ended = False
    for n, line in enumerate(lines[1:], 2):
        words = line.split()
        if not words:
            continue
        try:
            if words[0] in ("snap", "end"):
                snap = snapshot_line(words, counts(), n == len(lines))
                if snap is None:
                    break
                snaps.append(snap)
                ended = ended or words[0] == "end"
            else:
                header(words)
        except (ValueError, IndexError, KeyError) as err:
            raise LabError(f"{path}:{n}: malformed line ({err})") from None
    if not snaps:
        raise LabError(f"{path}: no counts (the plugin wrote no snapshot)")
    return snaps, ended


def snapshot_line(words: list[str], expected: int, last: bool) -> tuple[int, list[int]] | None:
    """A plugin file's ``snap``/``end`` line: its time stamp and its ``expected`` counts. A short last line
    is None (QEMU was killed while it was written); a short line elsewhere is a ValueError."""
    counts = [int(w) for w in words[2:]]
    if len(counts) != expected:
        if last:
            return None
        raise ValueError(f"{len(counts)} counts, expected {expected}")
    return int(words[1]), counts


def _vcpu_matrix(log: AccessLog, a: list[int], b: list[int]) -> list[list[int]]:
    """b - a, per vCPU: [node counts..., outside, io, unresolved]."""
    w = log.width
    return [[b[v * w + c] - a[v * w + c] for c in range(w)] for v in range(log.vcpus)]


def node_matrix(log: AccessLog, vcpu_rows: list[list[int]], vcpu_nodes: list[int]) -> list[list[int]]:
    """Per-vCPU rows -> CPU node x memory node."""
    n = log.nodes
    m = [[0] * n for _ in range(n)]
    for v, row in enumerate(vcpu_rows):
        if v < len(vcpu_nodes):
            cpu_node = vcpu_nodes[v]
            for j in range(n):
                m[cpu_node][j] += row[j]
    return m


def local_pct(m: list[list[int]]) -> float | None:
    total = sum(map(sum, m))
    return round(100.0 * sum(m[i][i] for i in range(len(m))) / total, 2) if total else None


def bracket(snaps: list[tuple[int, list[int]]], t0: int | None, t1: int | None) -> tuple[int, int]:
    """Indices of the last snapshot <= t0 and the first >= t1 (the whole log without stamps)."""
    i0 = 0
    if t0 is not None:
        for i, (t, _) in enumerate(snaps):
            if t <= t0:
                i0 = i
    i1 = len(snaps) - 1
    if t1 is not None:
        for i, (t, _) in enumerate(snaps):
            if t >= t1:
                i1 = i
                break
    return i0, max(i0, i1)


def summarize(log: AccessLog, vcpu_nodes: list[int], start_ns: int | None, end_ns: int | None) -> dict:
    """The run record's ``access_matrix`` section (without the plugin setup, which the run adds)."""
    snaps = log.snaps
    i0, i1 = bracket(snaps, start_ns, end_ns)
    origin = start_ns if start_ns is not None else snaps[0][0]
    window = _vcpu_matrix(log, snaps[i0][1], snaps[i1][1])
    whole = _vcpu_matrix(log, [0] * len(snaps[0][1]), snaps[-1][1])
    n = log.nodes
    matrix = node_matrix(log, window, vcpu_nodes)
    counted_all = sum(sum(r[: n + 1]) for r in whole)
    outside_all = sum(r[n] for r in whole)
    series = []
    for k in range(i0, i1):
        (_, a), (tb, b) = snaps[k], snaps[k + 1]
        m = node_matrix(log, _vcpu_matrix(log, a, b), vcpu_nodes)
        series.append({"t": round((tb - origin) / 1e9, 3), "local_pct": local_pct(m), "matrix": m})
    return {
        "matrix": matrix,  # [cpu node][memory node], sampled accesses in the workload window
        "local_pct": local_pct(matrix),
        "accesses": sum(map(sum, matrix)),
        "estimated_accesses": sum(map(sum, matrix)) * log.sample,
        "per_vcpu": [r[:n] for r in window],
        "outside": sum(r[n] for r in window),
        "io": sum(r[n + 1] for r in window),
        "unresolved": sum(r[n + 2] for r in window),
        "outside_whole_run": outside_all,
        "outside_share": round(outside_all / counted_all, 6) if counted_all else 0.0,
        "outside_first": hex(log.outside_first) if log.outside_first is not None else None,
        "window_s": [round((snaps[i0][0] - origin) / 1e9, 3), round((snaps[i1][0] - origin) / 1e9, 3)],
        "window_from_stages": start_ns is not None and end_ns is not None,
        "complete": log.ended,
        "interval_ms": log.interval_ms,
        "series": series,
    }


def self_check(summary: dict) -> str | None:
    """Why the counts cannot be trusted (a reason for the run's status), or None."""
    if summary["accesses"] == 0:
        return "access matrix: no guest memory access was counted in the workload window"
    if summary["outside_share"] > OUTSIDE_LIMIT:
        return (
            f"access matrix: {summary['outside_share']:.1%} of the sampled accesses fell outside every node's "
            f"memory (first at {summary['outside_first']}): the plugin's address map does not fit this QEMU"
        )
    return None


def prefault_unfinished(result: dict | None) -> str | None:
    """Why a run's GB/s is not the workload's memory traffic, or None.

    numa01-thread-alloc's threads each touch the whole process area first (the prefault), then loop over
    their own slice until the deadline. Under a slow (instrumented, loaded) TCG guest a thread can still be
    in the prefault at the deadline: it does no pass over its slice (0 loops), and the run's GB/s measures
    page faults (0.02-0.11 GB/s against about 1 for a run that finished: the workload is bimodal). Such a
    run says nothing about a slowdown and is left out of it."""
    if not result or not result.get("prefault"):
        return None
    tasks = [t for t in result.get("per_task") or [] if isinstance(t, dict)]
    stuck = [t for t in tasks if t.get("loops") == 0]
    return f"{len(stuck)} of {len(tasks)} threads never finished the prefault (0 passes)" if stuck else None


def slowdown(plain_gbps: list[float], instrumented_gbps: list[float]) -> float | None:
    """The plugin's slowdown, the one definition of the report and tests/bench/access_matrix.sh: the harmonic
    mean of the plain runs' GB/s divided by that of the instrumented runs (one run, or a configuration's
    runs), both of the same setup and both without runs that never finished the prefault
    (:func:`prefault_unfinished`). Rates are averaged harmonically, as numalab compare does (Hmean)."""
    base, inst = hmean(plain_gbps), hmean(instrumented_gbps)
    return base / inst if base and inst else None
