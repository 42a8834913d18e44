"""The arithmetic of issue 66's known answers: what each predicts from the runs it measures.

The fidelity tier (tests/fidelity/test_fidelity_k2.py) holds the modelled machine to these predictions, and
docs/throughput.md gives their figures. A plain module: pytest puts tests/ on sys.path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lab.events import MIGRATE_PAGES
from lab.trace.tracedat import read_trace

PAGE = 4096


@dataclass(frozen=True)
class LocalityPrediction:
    """K2, locality pays by the right amount: a task whose memory is on another node works at the remote rate
    until it and its memory meet, then at the local rate, less the time its page copies take at the remote rate.
    The prediction of a balancing-on run's throughput from three measured figures: the remote rate (the same run
    with balancing off), the local ceiling (the task started on its memory's node) and the moment they met."""

    remote_gbps: float
    local_gbps: float
    duration_s: float
    met_after_s: float
    how: str  # "the task moved" or "the memory moved"
    pages_copied: int

    @property
    def copy_s(self) -> float:
        return self.pages_copied * PAGE / (self.remote_gbps * 1e9)

    @property
    def gbps(self) -> float:
        local_s = max(0.0, self.duration_s - self.met_after_s - self.copy_s)
        return (self.remote_gbps * self.met_after_s + self.local_gbps * local_s) / self.duration_s


def _result(manifest: dict) -> dict:
    return manifest["workload"]["result"]


def _workload_start(manifest: dict) -> float:
    return next(s["uptime"] for s in manifest["stages"] if s["name"] == "workload-start")


def memory_moved_after(record: Path) -> tuple[float, int]:
    """When half of NUMA balancing's page migrations had succeeded, in seconds from the workload's start, from
    the record's trace (mm_migrate_pages, reason numa_misplaced), and how many pages moved in all."""
    manifest = json.loads((record / "manifest.json").read_text())
    t0 = _workload_start(manifest)
    moves = [(e.ts - t0, e.int("nr_succeeded"))
             for e in read_trace(record / "trace.dat", (MIGRATE_PAGES.full,)).events
             if e.name == MIGRATE_PAGES.name and e.fields.get("reason") == "numa_misplaced"]  # fmt: skip
    total = sum(n for _, n in moves)
    if not total:
        raise AssertionError(f"{record}: no page migrated")
    done = 0
    for t, n in sorted(moves):
        done += n
        if 2 * done >= total:
            return t, total
    raise AssertionError("unreachable")


def locality_prediction(off: dict, local: dict, on: Path) -> LocalityPrediction:
    """K2's prediction for the balancing-on record ``on`` (a record directory) from the manifests of the
    balancing-off run (the remote rate) and of the local control (``misplaced-local``: the ceiling)."""
    manifest = json.loads((on / "manifest.json").read_text())
    result = _result(manifest)
    if result.get("ended_on_mem_node") and result.get("reached_mem_node_after_s") is not None:
        met, how = float(result["reached_mem_node_after_s"]), "the task moved"
        pages = int(manifest["metrics"]["vmstat"].get("numa_pages_migrated", 0))
    else:
        (met, pages), how = memory_moved_after(on), "the memory moved"
    return LocalityPrediction(remote_gbps=float(_result(off)["gbps"]), local_gbps=float(_result(local)["gbps"]),
                              duration_s=float(result["elapsed_s"]), met_after_s=met, how=how,
                              pages_copied=pages)  # fmt: skip
