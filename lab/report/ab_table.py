"""The A/B table as it is shown: text (mmtests style, to paste into a mail), markdown, an HTML fragment, JSON.

:func:`lab.analysis.compare.compare_runs` makes the :class:`~lab.analysis.compare.Comparison`; this module only
renders it, the same way wherever it appears (``numalab compare``, the report, a matrix's index.html, the KCIDB
export). Each row's verdict words are :func:`lab.analysis.judgement.judge`'s, its %diff (or Δ on a near-zero
baseline) :func:`lab.analysis.compare.diff_text`'s.
"""

from __future__ import annotations

import html
from collections import Counter

from lab.analysis.compare import PCT_SHOWN_MAX, Comparison, near_zero_text
from lab.analysis.judgement import equivalence_test_text, pct_better, same_text
from lab.analysis.metrics import NEUTRAL
from lab.analysis.stats import ALPHA, Stats, welch_interval
from lab.min_effect import DEFAULT_PCT as DEFAULT_MIN_EFFECT
from lab.min_effect import text as effect_text
from lab.paths import json_text
from lab.untrusted import finite_copy

NEAR_ZERO_NOTE = (
    f"Δ: the absolute change (new - baseline), shown instead of a %diff where the baseline is 0 or tiny "
    f"(|%diff| > {PCT_SHOWN_MAX:g}%)"
)


def _num(v: float) -> str:
    if v == 0:
        return "0.00"
    a = abs(v)
    return f"{v:.2f}" if a < 1e6 else f"{v:.4g}"


def _pct(p: float | None, mark: bool, text: str | None = None) -> str:
    """A %diff cell of the text table: ``( 1.23%)``, starred ``* 1.23%*`` when significant; ``text``
    (the mean row's :func:`diff_text`) replaces the number, e.g. with Δ on a near-zero baseline."""
    if text is not None:
        s = f"{text:>8}"
    elif p is None:
        s = "   n/a  "
    else:
        s = f"{p:7.2f}%"
    return f"*{s}*" if mark else f"({s})"


NEUTRAL_NOTE = (
    "neutral: a mechanism counter (pages migrated, hint faults, AutoNUMA cost, sched_*_numa decisions): no better "
    "direction, its %diff is the plain change (+ means more) and a significant one is 'changed'"
)


def _has_neutral(c: Comparison) -> bool:
    return any(r.metric.better == NEUTRAL for r in c.rows)


def _has_delta(c: Comparison) -> bool:
    return any(near_zero_text(b, n, p) for r in c.rows for _stat, b, n, p, _m in r.lines())


def _significance_text(significance: str) -> str:
    return (
        "mmtests' CI-overlap rule |Δmean| > 1.96·(σ_base + σ_new), σ of the runs"
        if significance == "ci-overlap"
        else f"Welch's t-test, two-sided, α = {ALPHA:g}"
    )


def _effect_note(c: Comparison) -> str:
    """The minimum effect the verdicts used (one share for every row, or each metric's where they differ), and
    what the words mean."""
    counts = Counter(r.min_effect for r in c.rows)
    # (the share most rows have, the default on a tie)
    common = max(counts, key=lambda p: (counts[p], p == DEFAULT_MIN_EFFECT)) if counts else DEFAULT_MIN_EFFECT
    pct = effect_text(common)
    note = (f"better or worse takes a significant difference of at least {pct} of the baseline; "
            f"'{same_text(common)}' takes an equivalence test ({equivalence_test_text(c.significance)}); the rest is "
            "undecided")  # fmt: skip
    own = ", ".join(f"{r.metric.key} {effect_text(r.min_effect)}" for r in c.rows if r.min_effect != common)
    return f"{note} ({own})" if own else note


def to_text(c: Comparison) -> str:
    """An mmtests-style table to paste into a mail."""
    w = max([len(r.metric.key) for r in c.rows] + [20])
    head = [
        f"numalab compare: {c.topology} / {c.workload}",
        *(f"  WARNING: {w}" for w in c.warnings),
        f"  baseline: {c.base_label} ({len(c.base_runs)} runs)   new: {c.new_label} ({len(c.new_runs)} runs)",
        f"  + means better; * marks significance ({_significance_text(c.significance)}); {_effect_note(c)}",
        *([f"  {NEUTRAL_NOTE}"] if _has_neutral(c) else []),
        *([f"  {NEAR_ZERO_NOTE}"] if _has_delta(c) else []),
        *(f"  note: {n}" for n in c.notes),
        *(f"  excluded: {e}" for e in c.excluded),
        "",
        f"{'':9}{'':{w}}  {c.base_label[:24]:>24}  {c.new_label[:24]:>24}",
    ]
    body = []
    for r in c.rows:
        for stat, b, n, p, is_mean in r.lines():
            mark = bool(is_mean and r.significant)
            text = near_zero_text(b, n, p)
            same = f"  {r.verdict_text()}" if is_mean and r.said else ""
            body.append(f"{stat:<9}{r.metric.key:<{w}}  {_num(b):>12} (   0.00%)  {_num(n):>12} {_pct(p, mark, text)}"
                        f"{same}")  # fmt: skip
    body += [f"{'n/a':<9}{key:<{w}}  {undefined_text(side, c, key)}" for key, side, _s in c.undefined]
    return "\n".join(head + body) + "\n"


def undefined_text(side: str, c: Comparison | None = None, key: str = "") -> str:
    """What a metric defined on one side only gets instead of a verdict (and, for NUMA balancing's where a side
    ran a sched_ext scheduler, whose figure it is)."""
    text = f"n/a: no {side} run has it (undefined there, or not measured): no verdict"
    return f"{text}; {c.fair_class_note}" if c is not None and c.fair_only(key) else text


def to_markdown(c: Comparison) -> str:
    lines = [
        f"### {c.topology} / {c.workload}: {c.base_label} vs {c.new_label}",
        "",
        *(f"> **WARNING: {w}**\n" for w in c.warnings),
        f"+ means better; **bold** = significant ({_significance_text(c.significance)}); {_effect_note(c)}. "
        f"Baseline {len(c.base_runs)} runs, new {len(c.new_runs)} runs.",
        *([f"\n> {NEAR_ZERO_NOTE}"] if _has_delta(c) else []),
        *([f"\n> {NEUTRAL_NOTE}"] if _has_neutral(c) else []),
        *(f"\n> {n}" for n in c.notes),
        *(f"\n> excluded: {e}" for e in c.excluded),
        "",
        f"| metric | better | stat | {c.base_label} | {c.new_label} | %diff | base Stddev | new Stddev "
        "| base CoeffVar | new CoeffVar | verdict |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in c.rows:
        mb, mn = r.mean(r.base), r.mean(r.new)
        ps = r.diff_text()
        if r.significant:
            ps = f"**{ps}**"  # as the text table stars it, whatever the %diff (n/a, Δ) reads
        cvb, cvn = r.coeffvar(r.base), r.coeffvar(r.new)
        lines.append(
            f"| {r.metric.key} | {r.metric.better} | {r.mean_name} | {_num(mb)} | {_num(mn)} | {ps} | "
            f"{_num(r.stddev(r.base))} | {_num(r.stddev(r.new))} | "
            f"{'-' if cvb is None else _num(cvb) + '%'} | {'-' if cvn is None else _num(cvn) + '%'} | "
            f"{r.verdict_text()} |"
        )
    lines += [f"| {key} | | | | | n/a | | | | | {undefined_text(side, c, key)} |" for key, side, _s in c.undefined]
    return "\n".join(lines) + "\n"


def to_html(c: Comparison) -> str:
    """A table fragment; significant cells are classed 'better' (green) or 'worse' (red)."""
    e = html.escape
    rows = []
    for r in c.rows:
        verdict = r.verdict()
        for i, (stat, b, n, p, is_mean) in enumerate(r.lines()):
            cls = f' class="{verdict}"' if is_mean and verdict in ("better", "worse", "changed") else ""
            ps = near_zero_text(b, n, p) or f"{p:+.2f}%"
            metric = ""
            if i == 0:
                how = "shown, not judged" if r.metric.better == NEUTRAL else f"{r.metric.better} is better"
                metric = f'<td rowspan="{len(r.lines())}">{e(r.metric.key)}'
                metric += f"<br><small>{e(how)}</small></td>"
            same = f"<br><small>{e(r.verdict_text())}</small>" if is_mean and r.said else ""
            rows.append(
                f"<tr>{metric}<td>{stat}</td><td>{_num(b)}</td><td>{_num(n)}</td><td{cls}>{ps}"
                f"{' *' if is_mean and r.significant else ''}{same}</td></tr>"
            )
    rows += [f'<tr><td>{e(key)}</td><td>n/a</td><td colspan="3">{e(undefined_text(side, c, key))}</td></tr>'
             for key, side, _s in c.undefined]  # fmt: skip
    notes = "".join(f'<p class="note warning"><strong>WARNING: {e(w)}</strong></p>' for w in c.warnings)
    notes += f'<p class="note">{e(NEAR_ZERO_NOTE)}</p>' if _has_delta(c) else ""
    notes += f'<p class="note">{e(NEUTRAL_NOTE)}</p>' if _has_neutral(c) else ""
    notes += "".join(f'<p class="note">{e(n)}</p>' for n in c.notes)
    notes += "".join(f'<p class="note">excluded: {e(x)}</p>' for x in c.excluded)
    return (
        f'<div class="compare"><h3>{e(c.topology)} / {e(c.workload)}: {e(c.base_label)} vs {e(c.new_label)}</h3>'
        f"<p>+ means better; * = significant ({e(_significance_text(c.significance))}); {e(_effect_note(c))}. "
        f"Baseline {len(c.base_runs)} runs, "
        f"new {len(c.new_runs)} runs.</p>{notes}"
        f'<table class="ab"><thead><tr><th>metric</th><th>stat</th><th>{e(c.base_label)}</th><th>{e(c.new_label)}</th>'
        f"<th>%diff</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def to_dict(c: Comparison) -> dict:
    def st(s: Stats) -> dict:
        return {k: getattr(s, k) for k in ("n", "min", "max", "amean", "hmean", "stddev", "coeffvar", "hstddev")}

    return {
        "topology": c.topology,
        "workload": c.workload,
        "baseline": c.base_label,
        "new": c.new_label,
        "significance_rule": c.significance,
        "baseline_runs": c.base_runs,
        "new_runs": c.new_runs,
        "excluded": c.excluded,
        "notes": c.notes,
        "warnings": c.warnings,
        "same_kernel": c.same_kernel,
        # runs counted although not marked ok (--include-status), and the rows they count in (included_statuses)
        "included": [{"run": name, "status": status} for name, status in c.included],
        # metrics defined on one side only, and the side without them: no verdict
        "undefined": [
            {"metric": key, "missing_on": side, "verdict": "n/a", "fair_class_only": c.fair_only(key)}
            for key, side, _s in c.undefined
        ],
        # each side's schedulers, and the sched_ext ones ([]: NUMA balancing's rows are about every side's tasks)
        "schedulers": {"baseline": c.schedulers[0], "new": c.schedulers[1], "sched_ext": c.ext},
        "metrics": [
            {
                "metric": r.metric.key,
                "better": r.metric.better,
                "unit": r.metric.unit,
                "baseline": st(r.base),
                "new": st(r.new),
                "mean": r.mean_name,
                "baseline_mean": r.mean(r.base),
                "new_mean": r.mean(r.new),
                "pct_diff": pct_better(r.mean(r.base), r.mean(r.new), r.metric.better),
                "abs_diff": r.mean(r.new) - r.mean(r.base),
                "diff_text": r.diff_text(),
                "significant": r.significant,
                "verdict": r.verdict(),
                "verdict_text": r.verdict_text(),
                "included_statuses": r.included,
                # what the verdict cannot mean here ("remote memory costs nothing here (plain TCG, ...)"; "" none)
                "caveat": r.caveat,
                # NUMA balancing's row where a side ran a sched_ext scheduler: the fair class's, and why ("" none)
                "fair_class_only": bool(r.class_note),
                "class_note": r.class_note,
                # the minimum effect it was judged by (percent of the baseline's mean), and whether a
                # significant difference was smaller (then not better or worse: lab.min_effect)
                "min_effect_pct": r.min_effect,
                "below_min_effect": r.below_effect,
                # Welch's, on the arithmetic means, whatever the rule (None with too few runs a side)
                "p_value": r.p_value(),
                "ci95_diff": list(ci) if (ci := r.ci95_diff()) is not None else None,
                # the equivalence test at ±min_effect behind a "same" (lab.analysis.stats.equivalent): its margin,
                # Welch's TOST p whatever the rule, and the 90% interval of new - baseline that TOST tests
                "equivalence": r.judgement.to_dict()
                | {"ci90_diff": list(ci) if (ci := welch_interval(r.base, r.new, 0.90)) is not None else None},
                # runs a side a decision would need, from the observed spread (None: no estimate)
                "runs_needed_per_side": r.judgement.needed,
            }
            for r in c.rows
        ],
    }


def to_json(c: Comparison) -> str:
    return json_text(finite_copy(to_dict(c))[0], indent=2) + "\n"  # (NaN, from an old record: null)
