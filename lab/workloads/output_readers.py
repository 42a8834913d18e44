"""The readers of the built-ins' output: those a workload.yaml names (``results: {reader: NAME}``, :data:`READERS`)
and what the folders' parse.py hooks share: numbers by a pattern, perf bench numa mem's summary, stress-ng's
metrics line. Every reader is given the guest's output, which is untrusted: it reads numbers with
:func:`lab.untrusted.to_float`, and output without what it expects is ``{"parse_error": why}``."""

from __future__ import annotations

import re
from collections.abc import Callable

from lab.untrusted import to_float


def numbers(pattern: re.Pattern[str], text: str) -> list[float]:
    """Every first group of ``pattern`` in ``text`` that is a finite number >= 0."""
    return [v for t in pattern.findall(text) if (v := to_float(t)) is not None and v >= 0]


def mean_of_runs(pattern: re.Pattern[str], text: str, name: str, what: str) -> dict:
    """A benchmark run again and again for the duration: ``{name: the mean of every number pattern finds,
    {name without _s}_runs: how many}``, or a parse error naming ``what`` was not found."""
    times = numbers(pattern, text)
    if not times:
        return {"parse_error": f"no {what} in the workload output"}
    return {name: sum(times) / len(times), f"{name.removesuffix('_s')}_runs": len(times)}


_PERF_LINE = re.compile(r"^\s*(\w+),\s+([-\d.]+),\s+([^,]+),\s+(\S+)\s*$")
_CONVERGED = re.compile(r"\(\s*([\d.]+)s converged\)")


def perf_numa_summary(stdout: str) -> dict:
    """perf bench numa mem's summary lines (``name, value, unit, key``), its convergence time (None when it
    did not converge), ``elapsed_s`` (runtime-max/thread) and ``gbps`` (total-speed)."""
    out: dict = {"summary": {}}
    for line in stdout.splitlines():
        m = _PERF_LINE.match(line)
        if m and (value := to_float(m.group(2))) is not None:
            out["summary"][m.group(4)[:64]] = {"value": value, "unit": m.group(3).strip()[:32]}
    conv = [v for c in _CONVERGED.findall(stdout) if (v := to_float(c)) is not None]
    out["converged_s"] = conv[-1] if conv else None
    s = out["summary"]
    if not s:
        out["parse_error"] = "no perf bench summary lines in the workload output"
    else:
        out["elapsed_s"] = s.get("runtime-max/thread", {}).get("value")
        out["gbps"] = s.get("total-speed", {}).get("value")
    return out


# stress-ng --metrics-brief: "stress-ng: metrc: [PID] numa  24  3.06  0.08  5.77  7.85  4.10"
# (stressor, bogo ops, real s, usr s, sys s, bogo ops/s real time, bogo ops/s usr+sys time)
_METRC = re.compile(r"metrc:\s*\[\d+\]\s+([a-z0-9-]+)" + r"\s+(\S+)" * 6 + r"\s*$", re.MULTILINE)
_SUCCESS = re.compile(r"\bsuccessful run completed")  # (not "unsuccessful run completed")


def stress_ng_metrics(stdout: str, stressor: str) -> dict:
    """stress-ng's last metrics line for ``stressor``: bogo ops, real seconds and the two rates. A run that
    completed no operation, or that stress-ng did not call successful, is a parse error, not a zero."""
    rows = [m for m in _METRC.finditer(stdout) if m.group(1) == stressor]
    if not rows:
        return {"parse_error": f"no stress-ng metrics line for the {stressor} stressor in the workload output"}
    vals = [to_float(g) for g in rows[-1].groups()[1:]]
    if any(v is None or v < 0 for v in vals):
        return {"parse_error": f"stress-ng's {stressor} metrics line has a value that is not a number"}
    ops, real_s, _usr, _sys, per_s, per_cpu_s = vals
    if not ops:
        why = f"stress-ng completed no {stressor} operation in {real_s:g}s: give a longer --duration"
        return {"parse_error": why}
    if not _SUCCESS.search(stdout):
        return {"parse_error": f"stress-ng did not report a successful {stressor} run"}
    return {"stressng_ops": ops, "stressng_real_s": real_s, "stressng_ops_per_s": per_s,
            "stressng_ops_per_cpu_s": per_cpu_s}  # fmt: skip


# The readers a built-in names under ``results: {reader: NAME}`` (lab.workloads.registry): one reader for the
# output several workloads' tool writes, instead of one parse.py copy a folder. Their names are the schema's
# enum too (lab/schemas/workload.schema.json, $defs.builtin; tests/unit/test_workload_folders.py).
READERS: dict[str, Callable[[str], dict]] = {
    "perf-bench-numa-mem": perf_numa_summary,  # perf-numa01..05: seed 000's perf bench numa mem lines
}
