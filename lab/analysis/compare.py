"""A/B comparison across repeats, in the style of mmtests' compare-kernels.

For each metric: Min, Amean (Hmean when higher is better), Stddev, CoeffVar
and Max of each side, and %diff signed so that **+ always means better**.

Significance (marked ``*  1.55%*`` on the mean row, as mmtests does) uses,
by default, the CI-overlap rule: the difference of the means is significant
when |Δmean| > 1.96 · (σ_base + σ_new). ``welch`` instead runs Welch's
two-sided t-test at α = 0.05. With fewer than 3 runs on a side significance
is not judged.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field

from lab.analysis.metrics import METRICS, Metric, metric_values
from lab.analysis.record import RunRecord
from lab.errors import LabError

MIN_REPEATS = 3
RULES = ("ci-overlap", "welch")


@dataclass(frozen=True)
class Stats:
    n: int
    min: float
    max: float
    amean: float
    hmean: float | None
    stddev: float
    coeffvar: float | None

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        n = len(values)
        mean = sum(values) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
        hmean = n / sum(1 / v for v in values) if all(v > 0 for v in values) else None
        cv = sd * 100 / mean if mean else None
        return cls(n, min(values), max(values), mean, hmean, sd, cv)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-12

    def guard(v: float) -> float:
        return v if abs(v) > tiny else tiny

    c, d = 1.0, 1 / guard(1.0 - (a + b) * x / (a + 1))
    h = d
    for m in range(1, 300):
        num = m * (b - m) * x / ((a - 1 + 2 * m) * (a + 2 * m))
        d, c = 1 / guard(1 + num * d), guard(1 + num / c)
        h *= d * c
        num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1 + 2 * m))
        d, c = 1 / guard(1 + num * d), guard(1 + num / c)
        h *= d * c
        if abs(d * c - 1) < eps:
            break
    return h


def _t_two_sided_p(t: float, dof: float) -> float:
    if t == 0:
        return 1.0
    x = dof / (dof + t * t)
    a, b = dof / 2, 0.5
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1 - math.exp(ln) * _betacf(b, a, 1 - x) / b


def significant(base: Stats, new: Stats, rule: str = "ci-overlap") -> bool | None:
    if base.n < MIN_REPEATS or new.n < MIN_REPEATS:
        return None
    diff = abs(new.amean - base.amean)
    if rule == "ci-overlap":
        return diff > 1.96 * (base.stddev + new.stddev)
    se2 = base.stddev**2 / base.n + new.stddev**2 / new.n
    if se2 == 0:
        return diff > 0
    t = diff / math.sqrt(se2)
    dof = se2**2 / ((base.stddev**2 / base.n) ** 2 / (base.n - 1) + (new.stddev**2 / new.n) ** 2 / (new.n - 1))
    return _t_two_sided_p(t, dof) < 0.05


def pct_better(base: float, new: float, better: str) -> float | None:
    """Signed % change, + meaning better."""
    if base == 0:
        return 0.0 if new == 0 else None
    change = (new - base) * 100 / abs(base)
    return change if better == "higher" else -change


@dataclass
class Row:
    metric: Metric
    base: Stats
    new: Stats
    significant: bool | None

    @property
    def mean_name(self) -> str:
        return "Hmean" if self.metric.better == "higher" and self.base.hmean and self.new.hmean else "Amean"

    def mean(self, s: Stats) -> float:
        return s.hmean if self.mean_name == "Hmean" and s.hmean is not None else s.amean

    def lines(self) -> list[tuple[str, float, float, float | None, bool]]:
        """(stat, base, new, %better, is_mean_row)."""
        b, n, better = self.base, self.new, self.metric.better
        rows = [("Min", b.min, n.min, pct_better(b.min, n.min, better), False)]
        rows.append((self.mean_name, self.mean(b), self.mean(n), pct_better(self.mean(b), self.mean(n), better), True))
        rows.append(("Stddev", b.stddev, n.stddev, pct_better(b.stddev, n.stddev, "lower"), False))
        if b.coeffvar is not None and n.coeffvar is not None:
            rows.append(("CoeffVar", b.coeffvar, n.coeffvar, pct_better(b.coeffvar, n.coeffvar, "lower"), False))
        rows.append(("Max", b.max, n.max, pct_better(b.max, n.max, better), False))
        return rows

    def verdict(self) -> str:
        """'better', 'worse', 'same' (not significant) or 'unknown'."""
        if self.significant is None:
            return "unknown"
        if not self.significant:
            return "same"
        pct = pct_better(self.mean(self.base), self.mean(self.new), self.metric.better)
        return "better" if (pct or 0) > 0 else "worse"


@dataclass
class Comparison:
    base_label: str
    new_label: str
    topology: str
    workload: str
    rule: str
    rows: list[Row]
    base_runs: list[str]
    new_runs: list[str]
    excluded: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def row(self, key: str) -> Row | None:
        return next((r for r in self.rows if r.metric.key == key), None)


def _label(runs: list[RunRecord]) -> str:
    names = sorted({r.kernel_name for r in runs})
    settings = sorted({str(r.manifest.get("settings", {}).get("numa_balancing")) for r in runs})
    label = "+".join(names)
    if len(settings) == 1 and settings[0] == "0":
        label += " (balancing off)"
    return label


def _check_same_setup(runs: list[RunRecord]) -> tuple[str, str]:
    topo = {(r.topology.name, r.topology.distances, tuple(n.cpus for n in r.topology.nodes)) for r in runs}
    if len(topo) > 1:
        raise LabError(
            f"runs mix topologies ({', '.join(sorted({t[0] for t in topo}))}): compare one topology at a time"
        )
    loads = {r.manifest["workload"]["name"] for r in runs}
    if len(loads) > 1:
        raise LabError(f"runs mix workloads ({', '.join(sorted(loads))}): compare one workload at a time")
    return runs[0].topology.name, loads.pop()


def compare_runs(
    base: list[RunRecord], new: list[RunRecord], rule: str = "ci-overlap", labels: tuple[str, str] | None = None
) -> Comparison:
    if rule not in RULES:
        raise LabError(f"--significance {rule}: not one of {', '.join(RULES)}")
    if not base or not new:
        raise LabError("compare: give at least one baseline run and one new run")
    topology, workload = _check_same_setup(base + new)
    excluded = [f"{r.path.name} ({r.status})" for r in base + new if r.status != "ok"]
    base_ok = [r for r in base if r.status == "ok"]
    new_ok = [r for r in new if r.status == "ok"]
    if not base_ok or not new_ok:
        raise LabError("compare: no run with status ok on one side; nothing to compare")
    bv = [metric_values(r.manifest) for r in base_ok]
    nv = [metric_values(r.manifest) for r in new_ok]
    rows = []
    for m in METRICS:
        b = [v[m.key] for v in bv if m.key in v]
        n = [v[m.key] for v in nv if m.key in v]
        if b and n:
            bs, ns = Stats.of(b), Stats.of(n)
            rows.append(Row(m, bs, ns, significant(bs, ns, rule)))
    notes = []
    if len(base_ok) < MIN_REPEATS or len(new_ok) < MIN_REPEATS:
        notes.append(
            f"significance cannot be judged with fewer than {MIN_REPEATS} runs per side "
            f"(baseline {len(base_ok)}, new {len(new_ok)})"
        )
    accels = {r.manifest["accelerator"]["name"] for r in base_ok + new_ok}
    if "tcg" in accels:
        notes.append("runs used TCG software emulation: absolute times are not comparable with real hardware")
    bl, nl = labels or (_label(base_ok), _label(new_ok))
    return Comparison(
        bl,
        nl,
        topology,
        workload,
        rule,
        rows,
        [r.path.name for r in base_ok],
        [r.path.name for r in new_ok],
        excluded,
        notes,
    )


# --- rendering ----------------------------------------------------------------


def _num(v: float) -> str:
    if v == 0:
        return "0.00"
    a = abs(v)
    return f"{v:.2f}" if a < 1e6 else f"{v:.4g}"


def _pct(p: float | None, mark: bool) -> str:
    if p is None:
        return "(   n/a )"
    s = f"{p:7.2f}%"
    return f"*{s}*" if mark else f"({s})"


def _rule_text(rule: str) -> str:
    return (
        "CI-overlap rule |Δmean| > 1.96·(σ_base + σ_new)"
        if rule == "ci-overlap"
        else "Welch's t-test, two-sided, α = 0.05"
    )


def to_text(c: Comparison) -> str:
    """An mmtests-style table to paste into a mail."""
    w = max([len(r.metric.key) for r in c.rows] + [20])
    head = [
        f"numalab compare: {c.topology} / {c.workload}",
        f"  baseline: {c.base_label} ({len(c.base_runs)} runs)   new: {c.new_label} ({len(c.new_runs)} runs)",
        f"  + means better; * marks significance ({_rule_text(c.rule)})",
        *(f"  note: {n}" for n in c.notes),
        *(f"  excluded: {e}" for e in c.excluded),
        "",
        f"{'':9}{'':{w}}  {c.base_label[:24]:>24}  {c.new_label[:24]:>24}",
    ]
    body = []
    for r in c.rows:
        for stat, b, n, p, is_mean in r.lines():
            mark = bool(is_mean and r.significant)
            body.append(f"{stat:<9}{r.metric.key:<{w}}  {_num(b):>12} (   0.00%)  {_num(n):>12} {_pct(p, mark)}")
    return "\n".join(head + body) + "\n"


def to_markdown(c: Comparison) -> str:
    lines = [
        f"### {c.topology} / {c.workload}: {c.base_label} vs {c.new_label}",
        "",
        f"+ means better; **bold** = significant ({_rule_text(c.rule)}). "
        f"Baseline {len(c.base_runs)} runs, new {len(c.new_runs)} runs.",
        *(f"\n> {n}" for n in c.notes),
        "",
        f"| metric | better | {c.base_label} mean | {c.new_label} mean | %diff | base sd | new sd | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in c.rows:
        mb, mn = r.mean(r.base), r.mean(r.new)
        p = pct_better(mb, mn, r.metric.better)
        ps = "n/a" if p is None else f"{p:+.2f}%"
        if r.significant:
            ps = f"**{ps}**"
        lines.append(
            f"| {r.metric.key} | {r.metric.better} | {_num(mb)} | {_num(mn)} | {ps} | {_num(r.base.stddev)} | "
            f"{_num(r.new.stddev)} | {r.verdict()} |"
        )
    return "\n".join(lines) + "\n"


def to_html(c: Comparison) -> str:
    """A table fragment; significant cells are classed 'better' (green) or 'worse' (red)."""
    e = html.escape
    rows = []
    for r in c.rows:
        verdict = r.verdict()
        for i, (stat, b, n, p, is_mean) in enumerate(r.lines()):
            cls = f' class="{verdict}"' if is_mean and verdict in ("better", "worse") else ""
            ps = "n/a" if p is None else f"{p:+.2f}%"
            metric = ""
            if i == 0:
                metric = f'<td rowspan="{len(r.lines())}">{e(r.metric.key)}'
                metric += f"<br><small>{e(r.metric.better)} is better</small></td>"
            rows.append(
                f"<tr>{metric}<td>{stat}</td><td>{_num(b)}</td><td>{_num(n)}</td><td{cls}>{ps}"
                f"{' *' if is_mean and r.significant else ''}</td></tr>"
            )
    notes = "".join(f'<p class="note">{e(n)}</p>' for n in c.notes)
    return (
        f'<div class="compare"><h3>{e(c.topology)} / {e(c.workload)}: {e(c.base_label)} vs {e(c.new_label)}</h3>'
        f"<p>+ means better; * = significant ({e(_rule_text(c.rule))}). Baseline {len(c.base_runs)} runs, "
        f"new {len(c.new_runs)} runs.</p>{notes}"
        f'<table class="ab"><thead><tr><th>metric</th><th>stat</th><th>{e(c.base_label)}</th><th>{e(c.new_label)}</th>'
        f"<th>%diff</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def to_dict(c: Comparison) -> dict:
    def st(s: Stats) -> dict:
        return {k: getattr(s, k) for k in ("n", "min", "max", "amean", "hmean", "stddev", "coeffvar")}

    return {
        "topology": c.topology,
        "workload": c.workload,
        "baseline": c.base_label,
        "new": c.new_label,
        "significance_rule": c.rule,
        "baseline_runs": c.base_runs,
        "new_runs": c.new_runs,
        "excluded": c.excluded,
        "notes": c.notes,
        "metrics": [
            {
                "metric": r.metric.key,
                "better": r.metric.better,
                "unit": r.metric.unit,
                "baseline": st(r.base),
                "new": st(r.new),
                "mean": r.mean_name,
                "pct_diff": pct_better(r.mean(r.base), r.mean(r.new), r.metric.better),
                "significant": r.significant,
                "verdict": r.verdict(),
            }
            for r in c.rows
        ],
    }


def to_json(c: Comparison) -> str:
    return json.dumps(to_dict(c), indent=2) + "\n"
