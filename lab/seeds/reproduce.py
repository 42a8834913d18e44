"""``numalab reproduce SEED``: run a seed's example matrix and check the seed's directions.

The matrix (``lab/seeds/seedNNN/seedNNN-*.yaml``) says what to run and, in
``expect:``, which way each metric went in the seed thread. The runs go
through the ``repeats: auto`` matrix runner; then every expectation is
checked in every comparison (:mod:`lab.analysis.expectations`) and a report
is written (markdown, HTML, JSON: :mod:`lab.seeds.reproduction_report`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from lab.analysis.expectations import Check, check
from lab.analysis.record import load_manifest
from lab.analysis.verdict import verdicts_of
from lab.datafile import load_json, load_yaml
from lab.errors import LabError
from lab.matrix.auto_cells import (
    cell_key,
    clock_problem_of,
    merged,
    run_auto_matrix,
    side_of,
    with_repeat,
    write_auto_json,
)
from lab.matrix.definition import MatrixRun, MatrixSpec, load_matrix
from lab.matrix.kernels import matrix_kernel_args
from lab.matrix.outputs import write_outputs
from lab.matrix.schedule import Packing, check_out_dir, run_dir
from lab.paths import json_text, write_text_atomic
from lab.record_files import MANIFEST


@dataclass(frozen=True)
class Seed:
    id: str
    title: str
    matrix: str  # the matrix in the seed's folder, by name
    default_matrix: str = ""  # seed.yaml's, when ``matrix`` is another of the folder's (--matrix)

    @property
    def stem(self) -> str:
        """The report's file name: ``seedNNN``, or the matrix's name when it is not the seed's default."""
        return self.matrix if self.default_matrix and self.matrix != self.default_matrix else f"seed{self.id}"


FOLDERS = Path(__file__).parent  # one folder per seed: seedNNN/seed.yaml, its matrices, any report part


def _seed_files() -> dict[str, dict]:
    """seedNNN/seed.yaml of every seed folder: ``title`` and ``matrix`` (a seed numalab reproduce runs) or
    ``elsewhere`` (why it does not)."""
    out = {}
    for f in sorted(FOLDERS.glob("seed[0-9][0-9][0-9]/seed.yaml")):
        data = load_yaml(f, "seed")
        if not isinstance(data, dict) or not isinstance(data.get("title"), str):
            raise LabError(f"{f}: expected a mapping with title: and matrix: or elsewhere:")
        out[f.parent.name.removeprefix("seed")] = data
    return out


SEEDS: dict[str, Seed] = {k: Seed(k, d["title"], str(d["matrix"])) for k, d in _seed_files().items() if "matrix" in d}
ELSEWHERE = {k: str(d["elsewhere"]) for k, d in _seed_files().items() if "elsewhere" in d}


def find_seed(text: str) -> Seed:
    raw = text.strip().lower().removeprefix("seed").lstrip("-_ ")
    key = raw.zfill(3) if raw.isdigit() else raw
    if key in SEEDS:
        return SEEDS[key]
    if key in ELSEWHERE:
        raise LabError(ELSEWHERE[key])
    raise LabError(f"SEED {text}: unknown seed (known: {', '.join(SEEDS)})")


def with_matrix(seed: Seed, name: str) -> Seed:
    """The seed with another matrix of its folder (``numalab reproduce SEED --matrix NAME``)."""
    folder = FOLDERS / f"seed{seed.id}"
    known = sorted(p.stem for p in folder.glob("*.yaml") if p.name != "seed.yaml")
    if name not in known:
        raise LabError(f"--matrix {name}: not a matrix of seed {seed.id} (its folder has: {', '.join(known)})")
    return replace(seed, matrix=name, default_matrix=seed.matrix)


def seed_spec(seed: Seed, max_pairs: int | None = None) -> MatrixSpec:
    """The seed's matrix; ``max_pairs`` (--max-pairs) replaces its A/B plan's."""
    spec = load_matrix(seed.matrix)
    if spec.auto is None:
        raise LabError(f"{spec.source}: repeats: a seed matrix must say repeats: auto")
    if max_pairs is not None:
        if max_pairs < spec.auto.min_pairs:
            raise LabError(
                f"--max-pairs: must be >= the matrix's auto.min_pairs ({spec.auto.min_pairs}), got {max_pairs}"
            )
        spec.auto = replace(spec.auto, max_pairs=max_pairs).check()
    return spec


def runs_present(spec: MatrixSpec, out: Path) -> list[MatrixRun]:
    """The spec's runs plus every further repeat that has a run record in ``out``."""
    runs = list(spec.runs)
    last = max(r.repeat for r in spec.runs)
    extra = [r for r in spec.runs if r.repeat == last]
    n = last + 1
    while extra:
        extra = [with_repeat(r, n) for r in extra if (run_dir(out, with_repeat(r, n)) / MANIFEST).exists()]
        runs += extra
        n += 1
    return runs


@dataclass
class Reproduction:
    seed: Seed
    spec: MatrixSpec
    out: Path
    checks: list[tuple[str, Check]]  # (cell, check)
    cells: list[dict]  # per cell: repeats, stop reason, runs ok/failed
    context: dict = field(default_factory=dict)


def _manifests(out: Path, runs: list[MatrixRun], excluded: list[str]) -> list[dict]:
    """The runs' manifests, leaving out (and naming in ``excluded``) runs whose guest clock was wrong."""
    ms = []
    for r in runs:
        mf = run_dir(out, r) / MANIFEST
        if not mf.exists():
            continue
        problem = clock_problem_of(out, r)
        if problem:
            excluded.append(f"{r.id}: {problem}")
            continue
        ms.append(load_manifest(mf))
    return ms


def _run_span(out: Path, runs: list[MatrixRun]) -> dict:
    """When the runs used ran (from their run ids, UTC) and how long they took together (host time)."""
    stamps, total = [], 0.0
    for r in runs:
        mf = run_dir(out, r) / MANIFEST
        if not mf.exists():
            continue
        m = load_manifest(mf)
        stamp = str(m.get("run_id", ""))[:15]
        if len(stamp) == 15:
            stamps.append(stamp)
        total += float((m.get("timings") or {}).get("total_s") or 0)
    if not stamps:
        return {}
    fmt = "{0}-{1}-{2} {3}:{4} UTC"
    first, last = min(stamps), max(stamps)
    return {"runs_used": len(stamps), "run_time_s": round(total, 1),
            "first_run_utc": fmt.format(first[:4], first[4:6], first[6:8], first[9:11], first[11:13]),
            "last_run_utc": fmt.format(last[:4], last[4:6], last[6:8], last[9:11], last[11:13])}  # fmt: skip


def evaluate(seed: Seed, spec: MatrixSpec, out: Path, context: dict | None = None) -> Reproduction:
    runs = runs_present(spec, out)
    auto = spec.auto
    assert auto is not None
    stops = {}
    auto_json = out / "auto.json"
    if auto_json.exists():
        cells = load_json(auto_json)
        cells = cells.get("cells") if isinstance(cells, dict) else None
        if not isinstance(cells, list) or not all(isinstance(c, dict) and "cell" in c for c in cells):
            raise LabError(f"{auto_json}: not a numalab auto.json (no list of cells)")
        stops = {c["cell"]: c for c in cells}
    cells: dict[str, list[MatrixRun]] = {}
    for r in runs:
        cells.setdefault(cell_key(spec, r), []).append(r)
    base = next(iter(spec.baseline.values()))
    checks: list[tuple[str, Check]] = []
    cell_rows = []
    for key, rs in cells.items():
        by_side: dict[str, list[MatrixRun]] = {}
        for r in rs:
            by_side.setdefault(side_of(spec, r), []).append(r)
        excluded: list[str] = []
        ms = {s: _manifests(out, v, excluded) for s, v in by_side.items()}
        ok = sum(m.get("status") == "ok" for v in ms.values() for m in v)
        total = sum(len(v) for v in ms.values())
        failed = sorted({f"{m.get('status')}" for v in ms.values() for m in v if m.get("status") != "ok"})
        st = stops.get(key, {})
        cell_rows.append({"cell": key, "repeats": max(r.repeat for r in rs), "runs": total, "ok": ok,
                          "failed_statuses": failed, "stopped": st.get("stopped", ""),
                          "detail": st.get("detail", ""), "excluded": excluded})  # fmt: skip
        workload = rs[0].workload.name
        for side in by_side:
            if side == base:
                continue
            for e in spec.expect:
                if e.workloads and workload not in e.workloads:
                    continue
                (v,) = verdicts_of(ms.get(base, []), ms[side], [e.metric], auto, (base, side), key)
                checks.append((key, check(e, v)))
    ctx = {
        "generated_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        **(context or {}),
        **_run_span(out, runs),
    }
    return Reproduction(seed, spec, out, checks, cell_rows, ctx)


def set_aside_clock_failures(spec: MatrixSpec, out: Path) -> list[str]:
    """Move every run whose guest clock was wrong, with the other side(s) of its pair, to OUT/clock-excluded/.

    The runner then redoes the whole pair back to back, so A and B stay contemporaneous (the host's speed
    drifts: redoing only the bad side would compare it with a partner run at another time).
    """
    runs = runs_present(spec, out)
    bad = {(cell_key(spec, r), r.repeat) for r in runs if clock_problem_of(out, r)}
    moved = []
    for r in runs:
        if (cell_key(spec, r), r.repeat) in bad and run_dir(out, r).exists():
            dest = out / "clock-excluded" / r.id
            if dest.exists():
                shutil.rmtree(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            problem = clock_problem_of(out, r)
            run_dir(out, r).rename(dest)
            moved.append(f"{r.id}: {problem or 'the other side of a pair with a wrong guest clock'}")
    return moved


def run_reproduction(
    seed: Seed,
    spec: MatrixSpec,
    out: Path,
    progress: Callable[[str], None],
    jobs: int | None = None,
) -> dict:
    """Build the kernels, run the matrix with repeats: auto; returns timing context for the report."""
    check_out_dir(out, spec, None)
    moved = set_aside_clock_failures(spec, out)
    for m in moved:
        progress(f"redoing the pair of {m}")
    kernel_args = matrix_kernel_args(spec, progress)
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    progress(f"seed {seed.id}: {len(spec.runs)} runs to start with, more where undecided -> {out}")
    auto = run_auto_matrix(spec, out, kernel_args, progress, packing=Packing(jobs=jobs))
    write_auto_json(out, auto)

    write_outputs(spec, auto.runs, out, merged(auto))
    if auto.interrupted:
        again = f"numalab reproduce {seed.id}" + (f" --matrix {seed.matrix}" if seed.default_matrix else "")
        raise LabError(f"interrupted: run {again} --out {out} again to resume")
    this = {
        "wall_s": round(time.monotonic() - t0, 1),
        "loadavg_start": round(load0, 2),
        "loadavg_end": round(os.getloadavg()[0], 2),
        "host_cpus": os.cpu_count(),
        "started_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(time.time() - (time.monotonic() - t0))),
        "set_aside": moved,
        "max_pairs": spec.auto.max_pairs if spec.auto else None,
    }
    ran = any(not r.resumed for o in auto.outcomes for r in o.results)
    sessions = load_sessions(out) + ([this] if ran or moved else [])  # an invocation that ran nothing: not a session

    write_text_atomic(out / "reproduce.json", json_text({"sessions": sessions}, indent=2) + "\n")
    return context_of(sessions)  # fmt: skip


def load_sessions(out: Path) -> list[dict]:
    """Every `numalab reproduce` invocation that ran this reproduction's runs (a resumed one adds one)."""
    try:
        return list(json.loads((out / "reproduce.json").read_text()).get("sessions", []))
    except (OSError, ValueError, AttributeError):
        return []


def context_of(sessions: list[dict]) -> dict:
    if not sessions:
        return {}
    return {"wall_s": round(sum(x["wall_s"] for x in sessions), 1), "sessions": len(sessions),
            "loadavg_start": min(x["loadavg_start"] for x in sessions),
            "loadavg_end": max(x["loadavg_end"] for x in sessions), "host_cpus": sessions[-1]["host_cpus"],
            "started_utc": sessions[0].get("started_utc", "?"),
            "set_aside": [m for x in sessions for m in x.get("set_aside", [])],
            "max_pairs": sorted({x["max_pairs"] for x in sessions if x.get("max_pairs")})}  # fmt: skip
