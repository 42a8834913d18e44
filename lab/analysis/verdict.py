"""A/B verdicts a user can paste, and the stopping rule of ``--repeat auto``.

A verdict is one metric's answer to "is B better or worse than A": its
word (:func:`lab.analysis.judgement.judge`: better, worse, changed, "same within ±1%" or undecided), %diff (+ is
better, as in ``numalab compare``), whether the difference is significant (by
:func:`lab.analysis.stats.significant`), the equivalence test behind a "same"
(:func:`lab.analysis.stats.equivalent`), how many runs each side had, the accelerator, and how many runs a side
the observed variance says a decision would need (:func:`lab.analysis.stats.power_of`,
:func:`lab.analysis.stats.repeats_for_equivalence`).

The stopping rule (:func:`should_stop`): keep adding A B pairs until every
chosen metric is decided: significant and at least its minimum effect (better, worse, changed), or shown
the same within ±its minimum effect by the equivalence test ("same within ±1%", :mod:`lab.min_effect`), or the
run budget (pairs or seconds) is spent; the reason says which. Stopping as soon as a test passes
looks at the data repeatedly, which makes a false "significant" more likely
than the test's own α (about 2-3x for 3..10 looks at α = 0.05); the verdict
line records the number of runs so a reader can judge, and a result that
matters should be confirmed with a fixed ``--repeat N``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from lab.analysis.ab_plan import WORKLOAD_FIGURE, ABPlan
from lab.analysis.caveats import free_remote, row_caveat
from lab.analysis.compare import Row, diff_text, included_text
from lab.analysis.judgement import DECIDED, moved, pct_better
from lab.analysis.metrics import Metric, declared_rates, get_metric, metric_values, metrics_of
from lab.analysis.scheduler_class import ext_names, fair_class_note
from lab.analysis.stats import MIN_REPEATS, Stats, ci_overlap_margin, significant
from lab.analysis.steady_state import phase_words
from lab.errors import LabError
from lab.min_effect import DEFAULT_PCT as DEFAULT_MIN_EFFECT
from lab.min_effect import effective
from lab.min_effect import text as effect_text
from lab.vm.tcg.machine_model import model_words
from lab.workloads.metric_declarations import MEMORY_FIGURES

# A built-in without a figure of its own decides on its run time as it reports it (lower is better): defined in
# every ok run whatever the scheduler, where NUMA balancing's tasks.convergence_s is n/a without balancing's
# decisions (and always under a sched_ext scheduler). --workload-cmd's numbers are named by the command, so it has
# no default: resolve_decide asks for --decide.
NO_FIGURE = "workload.elapsed_s"
# Built-ins that do no work: their gbps is 0 by construction, not a figure to decide on.
NO_WORK = frozenset({"idle"})


@dataclass(frozen=True)
class Verdict:
    metric: str
    better: str  # which way is better for the metric: "higher", "lower" or "neutral" (not judged)
    # lab.analysis.judgement's word: "better", "worse", "changed" (significant, a neutral metric), "same" (shown
    # within ±min_effect_pct by the equivalence test), "undecided" or "unknown" (fewer than 3 runs a side)
    direction: str
    pct_diff: float | None  # + is better
    significant: bool | None
    significance: str  # the significance rule it was judged by (its JSON's "rule")
    n_base: int
    n_new: int
    mean_base: float | None
    mean_new: float | None
    accelerator: str
    needed_per_side: int | None  # runs a side a decision would need, from the observed variance; None: no estimate
    ci_margin: float | None  # |Δ| / (1.96(σb+σn))
    base_label: str = "A"
    new_label: str = "B"
    context: str = ""  # the cell, e.g. "ring-4/pairs/default" (:func:`cell_label`)
    mean_name: str = "Amean"  # the mean %diff compares (compare.Row: the metric's own, Hmean for rates)
    # The minimum effect it was judged by (percent of the baseline's central value, lab.min_effect), and
    # whether the difference was significant but smaller: then it is not better or worse (the same where the
    # equivalence test shows it, else undecided).
    min_effect_pct: float = DEFAULT_MIN_EFFECT
    below_effect: bool = False
    # Runs counted although not marked ok, by status: (status, runs), e.g. bisect's topology-mismatch runs and
    # what --include-status asks for; the line says "includes 2 runs marked placement-broken".
    included: tuple[tuple[str, int], ...] = ()
    # What the verdict cannot mean in the runs' VM (lab.analysis.caveats.row_caveat), and where a side ran a
    # sched_ext scheduler, that a NUMA-balancing metric is the fair class's (scheduler_class), said in its line; "".
    caveat: str = ""
    # The equivalence test at ±min_effect_pct (lab.analysis.stats.equivalent, by the rule): its outcome, Welch's
    # TOST p whatever the rule, and the margin in the metric's units; None where not judged.
    equivalent: bool | None = None
    equivalence_p: float | None = None
    equivalence_margin: float | None = None
    words: str = ""  # the judgement's words ("same within ±1%", "undecided (3+3 runs; ~24 a side needed)")
    # Runs of the two sides not counted for their status, by status: (status, runs), e.g. a sched_ext run
    # ejected or a timeout; the line says "2 runs marked scheduler-ejected left out".
    left_out: tuple[tuple[str, int], ...] = ()

    @property
    def moved(self) -> str:
        """Which way the means moved, significant or not: better, worse, unchanged, or n/a (no means) (higher or
        lower for a neutral metric). An all-zero baseline has no %diff but still a direction."""
        if self.mean_base is None or self.mean_new is None:
            return "n/a"
        return moved(self.mean_base, self.mean_new, self.better)

    @property
    def diff(self) -> str:
        """The %diff as compare shows it: '+1.23%', or the absolute change 'Δ+12.5' on a near-zero baseline."""
        if self.mean_base is None or self.mean_new is None:
            return "n/a"
        return diff_text(self.mean_base, self.mean_new, self.better)

    @property
    def decided(self) -> bool:
        """Better, worse, changed, or the same by the equivalence test: a decision (``--repeat auto`` stops)."""
        return self.direction in DECIDED

    @property
    def decision(self) -> str:
        """The verdict as shown: the judgement's words ("same within ±1%", "undecided (3+3 runs; ...)")."""
        return self.words or self.direction

    def line(self) -> str:
        """One line to paste: metric, direction, %diff, significance, repeats, accelerator."""
        pct = self.diff
        if self.significant is None:
            sig = f"not judged (<{MIN_REPEATS} runs a side)" if min(self.n_base, self.n_new) < MIN_REPEATS else "n/a"
        else:
            sig = f"{'significant' if self.significant else 'not significant'} ({self.significance})"
        if self.direction == "same":  # (the test behind it)
            how = f"TOST p={self.equivalence_p:.2g}" if self.significance != "ci-overlap" else "ci-overlap"
            sig += f", equivalent within ±{effect_text(self.min_effect_pct)} ({how})"
        need = "" if self.needed_per_side is None else f", ~{self.needed_per_side}/side needed"
        ctx = f" [{self.context}]" if self.context else ""
        notes = [included_text(dict(self.included)), left_out_text(dict(self.left_out))]
        marked = f" ({'; '.join(n for n in notes if n)})" if any(notes) else ""
        small = f"below {effect_text(self.min_effect_pct)}, not shown within ±{effect_text(self.min_effect_pct)}"
        if self.decided:
            what = self.decision
        elif self.moved in ("better", "worse", "higher", "lower"):
            what = f"undecided ({self.moved} by the {self.mean_name}{', ' + small if self.below_effect else ''})"
        else:
            what = "undecided"
        caveat = f"; {self.caveat}" if self.caveat else ""
        return (
            f"{self.metric}: {self.new_label} vs {self.base_label}: {what}, {pct}, {sig}, "
            f"{self.n_base}+{self.n_new} runs{marked}{need}, {self.accelerator}{ctx}{caveat}"
        )

    def to_dict(self) -> dict:
        """Its fields, the significance rule under "rule" (as verdict.json, auto.json and bisect's state have always
        named it), and what is shown of it."""
        fields = {("rule" if k == "significance" else k): v for k, v in asdict(self).items()}
        return fields | {"decided": self.decided, "decision": self.decision, "moved": self.moved,
                         "diff": self.diff, "line": self.line(), "included": dict(self.included),
                         "left_out": dict(self.left_out)}  # fmt: skip


def left_out_text(counts: dict[str, int]) -> str:
    """'2 runs marked scheduler-ejected and 1 run marked timeout left out' ("" for none): the runs a verdict did
    not count for their status, so a reader sees how many runs a side really made."""
    parts = [f"{n} run{'s' if n != 1 else ''} marked {status}" for status, n in sorted(counts.items()) if n]
    return f"{' and '.join(parts)} left out" if parts else ""


def workload_figure(workload, clock: str = "host") -> str | None:
    """The metric ``--decide`` defaults to for ``workload`` (lab.workloads.workload_type.Workload): its own figure, the
    first it declares beyond the memory workloads' common elapsed_s and gbps (pairs' round trips, nodes13's
    balance, perf bench's convergence; gbps for numa01 and the others that have only those), as its
    per-vCPU-second twin where it has one (steadier under TCG on a shared host: numa01's
    workload.gbps_per_vcpu_s); a user's workload file's first declared metric, its twin too if it is a rate;
    for a built-in that does no work (:data:`NO_WORK`) :data:`NO_FIGURE`; None for ``--workload-cmd`` (its
    result's names are the command's: nothing is defined in every run). Under ``clock`` "virtual" never a twin
    (it measures the host there, and runs have none: lab.analysis.metrics.per_vcpu_second), the rate itself:
    the guest's clock already follows the work."""
    twins = clock != "virtual"
    metrics = getattr(workload, "metrics", ()) or ()
    user = getattr(workload, "user", None)
    if user is not None:
        decls = [d for d in user.declarations(None) if isinstance(d, dict) and d.get("name")]
        if not decls:
            return None
        twin = dict(declared_rates(decls[:1])).get(decls[0]["name"]) if twins else None
        return f"workload.{twin or decls[0]['name']}"
    own = [m for m in metrics if m.name not in MEMORY_FIGURES] or [m for m in metrics if m.name != "elapsed_s"]
    if not own or getattr(workload, "name", "") in NO_WORK:
        return NO_FIGURE
    m = own[0]
    return f"workload.{m.twin_key}" if twins and m.twin is not None and m.twin_key else f"workload.{m.name}"


def resolve_decide(keys, workload, clock: str = "host") -> list[str]:
    """``keys`` (--decide, an ABPlan's ``decide``) with :data:`lab.analysis.ab_plan.WORKLOAD_FIGURE` replaced by
    the workload's figure, each once; a one-line LabError where the workload has none (``--workload-cmd``)."""
    out = []
    for k in keys:
        figure = workload_figure(workload, clock) if k == WORKLOAD_FIGURE else k
        if figure is None:
            raise LabError(f"--decide: {getattr(workload, 'description', 'the workload')} has no figure of its own "
                           "to decide on by default; give --decide METRIC (workload.NAME: a number its "
                           "NUMALAB_RESULT line prints)")  # fmt: skip
        out.append(figure)
    return list(dict.fromkeys(out))


def cell_label(topology: str, workload: str, other: str) -> str:
    """The one name of a comparison's cell in verdict lines, auto.json and the reproduction reports:
    topology/workload/the axis that is not compared (the setting's name when kernels are compared, else the
    kernel's), e.g. "ring-2/pairs/default"."""
    return f"{topology}/{workload}/{other}"


@dataclass(frozen=True)
class Sides:
    """What a verdict says of the runs beside the numbers: the accelerator they ran under, the two sides' names
    (base, new) and the cell they belong to (:func:`cell_label`); one value, so a verdict's caller passes them
    together and ``verdict_of`` keeps to a few parameters."""

    accelerator: str = "?"
    labels: tuple[str, str] = ("A", "B")
    context: str = ""


def verdict_of(
    metric_key: str,
    base: list[float],
    new: list[float],
    plan: ABPlan | None = None,
    sides: Sides | None = None,
    metric: Metric | None = None,
    included: dict[str, int] | None = None,
) -> Verdict:
    """The verdict for one metric from its values on each side (runs without the metric left out); ``plan``
    (None: the default) gives the significance rule and the minimum effect (percent, --min-effect, overriding the
    metric's own: lab.min_effect); ``sides`` the accelerator, the sides' labels and the cell; ``metric`` for one a
    user's workload declared (lab.analysis.metrics.declared_metrics), else a built-in by its key; ``included``:
    the runs among the values whose status is not ok, by status (the line names them)."""
    plan, sides = plan or ABPlan(), sides or Sides()
    significance, min_effect = plan.significance, plan.min_effect
    accelerator, labels, context = sides.accelerator, sides.labels, sides.context
    metric = metric if metric is not None and metric.key == metric_key else get_metric(metric_key)
    effect = effective(min_effect, metric.min_effect)
    marked = tuple(sorted((s, n) for s, n in (included or {}).items() if n))
    if not base or not new:
        return Verdict(metric.key, metric.better, "unknown", None, None, significance, len(base), len(new), None, None,
                       accelerator, None, None, *labels, context, min_effect_pct=effect, included=marked)  # fmt: skip
    bs, ns = Stats.of(base), Stats.of(new)
    row = Row(metric, bs, ns, None, effect, significance=significance)
    row.significant = significant(bs, ns, significance, row.mean_name.lower())  # (the row's mean, as compare judges it)
    mb, mn = row.mean(bs), row.mean(ns)
    # The word and the runs a decision needs (lab.analysis.judgement). A runs-needed estimate from the spread of
    # 1 or 2 runs a side says nothing ("~5860/side" after 1+1): given only from MIN_REPEATS runs a side, where
    # significance is judged too.
    j = row.judgement
    return Verdict(
        metric.key, metric.better, j.word, pct_better(mb, mn, metric.better), row.significant, significance,
        bs.n, ns.n, mb, mn, accelerator, j.needed, ci_overlap_margin(base, new), *labels,
        context,
        row.mean_name,
        effect,
        row.below_effect,
        marked,
        equivalent=j.equivalent,
        equivalence_p=j.equivalence_p,
        equivalence_margin=j.margin,
        words=j.text,
    )  # fmt: skip


def values(manifests: list[dict], metric_key: str, statuses: tuple[str, ...] = ("ok",)) -> list[float]:
    """The metric's value in every run that has it and whose status is one of ``statuses`` (ok runs only,
    unless a caller counts more: ``numalab bisect`` counts topology-mismatch runs too)."""
    return [v[metric_key] for m in manifests if m.get("status") in statuses and metric_key in (v := metric_values(m))]


def verdicts_of(
    base: list[dict],
    new: list[dict],
    metrics: list[str] | tuple[str, ...],
    plan: ABPlan | None = None,
    labels: tuple[str, str] = ("A", "B"),
    context: str = "",
    statuses: tuple[str, ...] = ("ok",),
) -> list[Verdict]:
    """Verdicts for each metric from two lists of run manifests (the runs whose status is in ``statuses``; each
    line names those counted whose status is not ok), read by ``plan`` as :func:`verdict_of` reads them: its
    significance rule and its minimum effect (percent, the command line's; None: each metric's own or the
    default); its other fields are not read here (None: the defaults)."""
    accels = sorted({(m.get("accelerator") or {}).get("name", "?") for m in base + new if m.get("status") in statuses})
    sides = Sides("+".join(accels) or "?", labels, context)
    known = {m.key: m for m in metrics_of(base + new)}  # (with the metrics the runs' user workloads declared)

    def marked(key: str) -> dict[str, int]:  # the counted runs not marked ok that have the metric, by status
        out: dict[str, int] = {}
        for m in base + new:
            if m.get("status") != "ok" and m.get("status") in statuses and key in metric_values(m):
                out[m["status"]] = out.get(m["status"], 0) + 1
        return out

    left: dict[str, int] = {}
    for m in base + new:  # (every run not counted for its status, whatever metrics it has)
        if m.get("status") not in statuses:
            left[str(m.get("status"))] = left.get(str(m.get("status")), 0) + 1
    why = free_remote([m for m in base + new if m.get("status") in statuses])
    model = model_words([m for m in base + new if m.get("status") in statuses])
    phase = phase_words([m for m in base + new if m.get("status") in statuses])
    # NUMA balancing's metrics where a side ran a sched_ext scheduler: the fair class's (lab.analysis.scheduler_class)
    fair = fair_class_note(ext_names([m for m in base + new if m.get("status") in statuses]))

    def caveat(k: str) -> str:
        metric = known[k] if k in known else get_metric(k)
        return "; ".join(
            c for c in (row_caveat(k, metric.unit, why, model, phase), fair if metric.fair_only else "") if c
        )

    return [
        replace(
            verdict_of(
                k,
                values(base, k, statuses),
                values(new, k, statuses),
                plan,
                sides,
                known.get(k),
                marked(k),
            ),
            caveat=caveat(k),
            left_out=tuple(sorted(left.items())),
        )  # fmt: skip
        for k in metrics
    ]


@dataclass(frozen=True)
class Stop:
    stop: bool
    reason: str  # "decided", "max-repeats", "time-budget", "no-data", "" (go on)
    detail: str


def should_stop(
    verdicts: list[Verdict],
    pairs: int,
    plan: ABPlan | None = None,
    elapsed_s: float = 0.0,
    pair_s: float | None = None,
) -> Stop:
    """After ``pairs`` A B pairs: stop (and why) or run another pair, by the ``plan``'s ``min_pairs``,
    ``max_pairs`` and ``time_budget`` (None: the default plan).

    Metrics without values on a side (e.g. hint-local percent with no hint
    faults) cannot decide and do not hold the loop; with every chosen metric
    absent (or every run failed) the loop stops at ``min_pairs`` ("no-data"). ``pair_s`` (the last pair's
    duration) keeps the loop from starting a pair that would overrun
    the time budget.
    """
    plan = plan or ABPlan()
    min_pairs, max_pairs, budget_s = plan.min_pairs, plan.max_pairs, plan.time_budget
    if pairs < min_pairs:
        return Stop(False, "", f"{pairs} of at least {min_pairs} pairs")
    judged = [v for v in verdicts if v.n_base and v.n_new]
    if not judged:
        names = ", ".join(v.metric for v in verdicts)
        return Stop(True, "no-data", f"after {pairs} pairs no ok run on one side has {names}: nothing to decide on")
    if all(v.decided for v in judged):
        which = ", ".join(f"{v.metric} {v.decision}" for v in judged)
        return Stop(True, "decided", f"after {pairs} pairs: {which}")
    undecided = ", ".join(v.metric for v in judged if not v.decided)
    if pairs >= max_pairs:
        return Stop(True, "max-repeats", f"{max_pairs} pairs spent, still undecided: {undecided}")
    if budget_s is not None and elapsed_s + (pair_s or 0.0) > budget_s:
        return Stop(True, "time-budget", f"{elapsed_s:.0f}s of the {budget_s:g}s budget spent after {pairs} pairs, "
                    f"still undecided: {undecided}")  # fmt: skip
    return Stop(False, "", f"after {pairs} pairs still undecided: {undecided}")
