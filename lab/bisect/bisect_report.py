"""The bisect's report: a table of the steps with the metric per step and its confidence intervals
(``report.md``), the same as JSON (``report.json``), and a chart of the metric over the prefixes
(``report.svg``, :func:`lab.report.svg.line_chart`)."""

from __future__ import annotations

import statistics
from pathlib import Path

from lab.analysis.stats import Stats, mean_interval
from lab.bisect.engine import Config, Step, load_steps, ordered, read_config, read_state, result_text
from lab.bisect.step_rule import RULE_TEXT
from lab.paths import write_json_atomic, write_text_atomic
from lab.report.svg import Axes, line_chart


def _ci(values: list[float]) -> tuple[float, float] | None:
    return mean_interval(Stats.of(values)) if len(values) >= 2 else None


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _g(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def _ci_text(ci: tuple[float, float] | list[float] | None) -> str:
    return "n/a" if ci is None else f"{ci[0]:.4g} .. {ci[1]:.4g}"


def step_rows(cfg: Config, steps: dict[str, Step]) -> list[dict]:
    """One row per prefix measured: the endpoints (their own rows) and each step, in the order they ran."""
    rows = []
    for s in ordered(steps):
        if s.name == "endpoints":
            for prefix, vals, verdict in ((0, s.good_values, "good"), (s.prefix, s.step_values, "bad")):
                rows.append({"step": "endpoints", "prefix": prefix, "patch": cfg.patch_label(prefix),
                             "verdict": verdict if s.verdict == "differ" else "-", "runs": len(vals),
                             "mean": _mean(vals), "ci95": _ci(vals), "shift_pct": None, "shift_ci95_pct": None,
                             "wall_s": s.wall_s, "reason": s.reason})  # fmt: skip
            continue
        d = s.decision or {}
        mg = d.get("mean_good")

        def pct(v: float, mg: float | None = mg) -> float | None:
            return v * 100 / abs(mg) if mg else None

        shift_ci = d.get("shift_ci")
        rows.append({"step": s.name, "prefix": s.prefix, "patch": cfg.patch_label(s.prefix), "verdict": s.verdict,
                     "runs": len(s.step_values), "runs_good": len(s.good_values), "mean": _mean(s.step_values),
                     "ci95": _ci(s.step_values),
                     "shift_pct": pct(d["shift"]) if d.get("shift") is not None else None,
                     "shift_ci95_pct": [pct(shift_ci[0]), pct(shift_ci[1])] if shift_ci and mg else None,
                     "wall_s": s.wall_s, "reason": s.reason})  # fmt: skip
    return rows


def markdown(cfg: Config, rows: list[dict], result: dict, steps: list[Step]) -> str:
    lines = [f"# numalab bisect: {cfg.metric}", ""]
    lines += [f"- {k}: {v}" for k, v in cfg.what.items()]
    lines += [f"- patches: {len(cfg.patches)}", f"- result: {result_text(result).splitlines()[0].lstrip('# ')}",
              *([f"- confirmation (the blamed prefix against the one before, from the runs made): "
                 f"{result['confirmation']}"] if result.get("confirmation") else []),
              f"- wall time: {result.get('wall_s', 0):.0f} s, {result.get('runs', 0)} runs", ""]  # fmt: skip
    lines += ["| step | prefix | patch | verdict | runs | mean | 95% CI of the mean | shift toward bad vs good "
              "(95% CI) | wall s |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        shift = "-"
        if r["shift_pct"] is not None:
            ci = r["shift_ci95_pct"]
            shift = f"{r['shift_pct']:+.1f}%" + (f" ({ci[0]:+.1f}% .. {ci[1]:+.1f}%)" if ci else "")
        runs = f"{r['runs']}" + (f" (+{r['runs_good']} good)" if "runs_good" in r else "")
        lines.append(f"| {r['step']} | {r['prefix']} | {r['patch']} | {r['verdict']} | {runs} | {_g(r['mean'])} | "
                     f"{_ci_text(r['ci95'])} | {shift} | {r['wall_s']:.0f} |")  # fmt: skip
    lines += ["", "## Evidence", "", f"Rule: {RULE_TEXT}.", "", "```text"]
    for s in steps:
        what = "endpoints" if s.name == "endpoints" else f"prefix {s.prefix} ({cfg.patch_label(s.prefix)})"
        lines.append(f"{what}: {s.verdict}, {s.runs_good}+{s.runs_step} runs, {s.wall_s:.0f}s")
        lines += [f"  {ln}" for ln in (s.lines if s.verdict != "skip" else [s.reason])]
    lines.append("```")
    return "\n".join(lines) + "\n"


def chart(cfg: Config, rows: list[dict], result: dict) -> str:
    by_prefix = {r["prefix"]: r for r in rows}
    xs = list(range(len(cfg.patches) + 1))
    series: dict[str, list[float | None]] = {
        "mean": [by_prefix[k]["mean"] if k in by_prefix else None for k in xs],
        "95% CI low": [by_prefix[k]["ci95"][0] if k in by_prefix and by_prefix[k]["ci95"] else None for k in xs],
        "95% CI high": [by_prefix[k]["ci95"][1] if k in by_prefix and by_prefix[k]["ci95"] else None for k in xs],
    }
    marks = [(float(result["first_bad_patch"]), "first bad")] if result.get("status") == "found" else []
    return line_chart(xs, series, title=cfg.metric, axes=Axes(x_label="prefix (patches applied)", marks=marks))


def write_report(out: Path) -> dict[str, Path]:
    cfg = read_config(out / "bisect.json")
    steps = load_steps(out)
    result = read_state(out / "result.json") if (out / "result.json").exists() else {"status": "unfinished"}
    rows = step_rows(cfg, steps)
    paths = {"md": out / "report.md", "json": out / "report.json", "svg": out / "report.svg"}
    write_text_atomic(paths["md"], markdown(cfg, rows, result, ordered(steps)))
    write_json_atomic(paths["json"], {"config": cfg.to_dict(), "result": result, "steps": rows})
    write_text_atomic(paths["svg"], chart(cfg, rows, result))
    return paths


__all__ = ["step_rows", "write_report"]
