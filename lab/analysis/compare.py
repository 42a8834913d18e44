"""A/B comparison across repeats, in the style of mmtests' compare-kernels.

For each metric: Min, the mean (Amean or Hmean: see below), Stddev, CoeffVar
and Max of each side, and %diff signed so that **+ always means better**. Mechanism counters (pages migrated,
hint faults, AutoNUMA cost, the sched_*_numa decisions: ``Metric.better == "neutral"``) have no better direction: fewer
migrations is not better in itself. Their %diff is the plain change (+ means more) and a significant
difference is "changed", never better or worse.

Which mean: a metric declares its mean (``Metric.mean``), Hmean for rates only, Amean otherwise, and every row
names the mean it used (lab.analysis.stats says why).

Significance is marked ``*  1.55%*`` on the mean row, as mmtests does, by one of two rules, ``welch`` (the
default) or mmtests' ``ci-overlap``; with fewer than 3 runs on a side it is not judged. The statistics
themselves, the rules and the equivalence test included, are :mod:`lab.analysis.stats`'s; each row's verdict
word (better, worse, changed, "same within ±1%", undecided) is :func:`lab.analysis.judgement.judge`'s. The
reading settings (the significance rule and the minimum effect) come as one :class:`lab.analysis.ab_plan.ABPlan`.
The table is rendered (text, markdown, HTML, JSON) by :mod:`lab.report.ab_table`.

Runs whose trace lost more than 1% of its records (``trace_incomplete``,
lab.analysis.lost) are left out, with a note, unless asked for. So are runs whose status is not ``ok``
(implausible, placement-broken, kernel-mismatch...), unless their status is asked for (``--include-status``):
then they count, and each row and verdict they count in says so ("includes 2 runs marked placement-broken",
:func:`included_text`), in every rendering.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.analysis.ab_plan import ABPlan
from lab.analysis.caveats import caveat_note, free_remote, row_caveat
from lab.analysis.cpu_sides import cpu_identity, cpu_identity_warning
from lab.analysis.judgement import Judgement, judge, pct_better
from lab.analysis.lost import describe as describe_lost
from lab.analysis.lost import of_record as lost_of_record
from lab.analysis.metrics import METRIC_KEYS, Metric, metric_values, metrics_of
from lab.analysis.record import RunRecord
from lab.analysis.scheduler_class import ext_names, fair_class_note, pair_labels, scheduler_of, side_schedulers
from lab.analysis.stats import (
    DEFAULT_SIGNIFICANCE,
    MIN_REPEATS,
    SIGNIFICANCES,
    Stats,
    significant,
    welch_interval,
    welch_p,
)
from lab.analysis.steady_state import phase_words
from lab.errors import LabError
from lab.min_effect import DEFAULT_PCT as DEFAULT_MIN_EFFECT
from lab.min_effect import below, effective
from lab.vm.tcg.machine_model import model_words

# A baseline mean this small beside the change makes a %diff meaningless (-33331% from a baseline of 0.003):
# past this many percent, or from a baseline of 0, the absolute change is shown instead.
PCT_SHOWN_MAX = 1000.0


def diff_text(base: float, new: float, better: str) -> str:
    """The %diff as shown everywhere (compare, the report, verdict lines): '+1.23%' (+ is better), or, on a
    near-zero baseline (0, or |%diff| > PCT_SHOWN_MAX), the absolute change of the mean: 'Δ+12.5'
    (its sign is the value's, not better/worse)."""
    return near_zero_text(base, new, pct_better(base, new, better)) or f"{pct_better(base, new, better):+.2f}%"


def near_zero_text(base: float, new: float, p: float | None) -> str | None:
    """'Δ+12.5' where a %diff ``p`` would mislead (a 0 or tiny baseline), else None (show ``p``)."""
    return None if p is not None and abs(p) <= PCT_SHOWN_MAX else f"Δ{new - base:+.4g}"


def _mean_name(metric: Metric, base: Stats, new: Stats) -> str:
    return "Hmean" if metric.mean == "hmean" and base.hmean is not None and new.hmean is not None else "Amean"


INCLUDED_MARK = "†"  # a row (or verdict) whose figures include runs not marked ok (--include-status)


def included_text(counts: dict[str, int]) -> str:
    """'includes 2 runs marked placement-broken and 1 run marked implausible' ("" for none): the mark every row
    and verdict carries whose figures include runs of a status other than ok (--include-status)."""
    parts = [f"{n} run{'s' if n != 1 else ''} marked {status}" for status, n in sorted(counts.items()) if n]
    return f"includes {' and '.join(parts)}" if parts else ""


def status_counts(runs: list[RunRecord], key: str | None = None) -> dict[str, int]:
    """How many of ``runs`` have each status other than ok (those with the metric ``key`` only, if given)."""
    out: dict[str, int] = {}
    for r in runs:
        if r.status != "ok" and (key is None or key in metric_values(r.manifest)):
            out[r.status] = out.get(r.status, 0) + 1
    return out


@dataclass
class Row:
    metric: Metric
    base: Stats
    new: Stats
    significant: bool | None
    min_effect: float = DEFAULT_MIN_EFFECT  # percent of the baseline's central value (lab.min_effect)
    # The runs not marked ok among its figures, by status (asked for: --include-status); {} for none.
    included: dict[str, int] = field(default_factory=dict)
    # What its verdict cannot mean, in its own words (lab.analysis.caveats.row_caveat); "" for nothing.
    caveat: str = ""
    # A NUMA-balancing row where a side ran a sched_ext scheduler: whose figure it is (lab.analysis.scheduler_class.
    # fair_class_note); "" for none.
    class_note: str = ""
    significance: str = DEFAULT_SIGNIFICANCE  # the significance rule ``significant`` was judged by (and equivalence is)

    @property
    def marked(self) -> str:
        """'includes 1 run marked placement-broken' when its figures include runs not marked ok, else ""."""
        return included_text(self.included)

    @property
    def below_effect(self) -> bool:
        """Significant, but the mean row's %diff is smaller than the minimum effect: not better or worse (the
        same only where the equivalence test shows it, else undecided)."""
        return bool(self.significant) and below(self.pct_diff(), self.min_effect)

    @property
    def judgement(self) -> Judgement:
        """Its verdict, decided by :func:`lab.analysis.judgement.judge`."""
        return judge(self.metric.better, self.base, self.new, self.significant, self.significance, self.min_effect,
                     self.mean_name.lower())  # fmt: skip

    def pct_diff(self) -> float | None:
        """The mean row's %diff (+ is better; a neutral metric's: + is more)."""
        return pct_better(self.mean(self.base), self.mean(self.new), self.metric.better)

    def verdict_text(self) -> str:
        """The verdict as shown: its judgement's words ("better", "same within ±1%", "undecided (3+3 runs; ~24 a
        side needed)"); with runs not marked ok among its figures, "better † (includes 2 runs marked
        placement-broken)"; then its caveat and class note."""
        text = self.judgement.text
        text = f"{text} {INCLUDED_MARK} ({self.marked})" if self.included else text
        text = f"{text}: {self.caveat}" if self.caveat else text
        return f"{text}; {self.class_note}" if self.class_note else text

    @property
    def said(self) -> bool:
        """Its verdict needs its words beside the figures of the text table: "same within ±1%" (no mark says it),
        a significant row that is not better or worse (below the minimum effect), runs not marked ok among them,
        a caveat, a row of the fair class's where a sched_ext scheduler ran. An unmarked row without words is
        undecided (the header says so)."""
        j = self.judgement
        return bool(j.word == "same" or (self.significant and not j.decided) or self.included or self.caveat
                    or self.class_note)  # fmt: skip

    @property
    def mean_name(self) -> str:
        """'Hmean' for a rate whose values are all positive on both sides, else 'Amean'."""
        return _mean_name(self.metric, self.base, self.new)

    def mean(self, s: Stats) -> float:
        return s.mean_of(self.mean_name.lower())

    def stddev(self, s: Stats) -> float:
        """The spread about the row's mean (mmtests' stddev-hmean on Hmean rows)."""
        return s.stddev_of(self.mean_name.lower())

    def coeffvar(self, s: Stats) -> float | None:
        m = self.mean(s)
        return self.stddev(s) * 100 / m if m else None

    def lines(self) -> list[tuple[str, float, float, float | None, bool]]:
        """(stat, base, new, %better, is_mean_row)."""
        b, n, better = self.base, self.new, self.metric.better
        rows = [("Min", b.min, n.min, pct_better(b.min, n.min, better), False)]
        rows.append((self.mean_name, self.mean(b), self.mean(n), pct_better(self.mean(b), self.mean(n), better), True))
        sb, sn = self.stddev(b), self.stddev(n)
        rows.append(("Stddev", sb, sn, pct_better(sb, sn, "lower"), False))
        cb, cn = self.coeffvar(b), self.coeffvar(n)
        if cb is not None and cn is not None:
            rows.append(("CoeffVar", cb, cn, pct_better(cb, cn, "lower"), False))
        rows.append(("Max", b.max, n.max, pct_better(b.max, n.max, better), False))
        return rows

    def verdict(self) -> str:
        """Its judgement's word: 'better', 'worse', 'changed' (significant, on a neutral metric), 'same' (shown
        within ±min_effect by the equivalence test), 'undecided' or 'unknown' (fewer than 3 runs a side)."""
        return self.judgement.word

    def p_value(self) -> float | None:
        """Welch's two-sided p for the difference of the arithmetic means (whatever the rule); None with
        fewer than MIN_REPEATS runs a side."""
        return welch_p(self.base, self.new)

    def ci95_diff(self) -> tuple[float, float] | None:
        """The 95% confidence interval of new - baseline (arithmetic means, Welch); None with too few runs."""
        return welch_interval(self.base, self.new)

    def diff_text(self) -> str:
        """The mean row's %diff (or Δ on a near-zero baseline: :func:`diff_text`)."""
        return diff_text(self.mean(self.base), self.mean(self.new), self.metric.better)


@dataclass
class Comparison:
    base_label: str
    new_label: str
    topology: str
    workload: str
    significance: str  # the significance rule its rows were judged by
    rows: list[Row]
    base_runs: list[str]
    new_runs: list[str]
    excluded: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # shown first and loudly
    same_kernel: bool = False  # both sides booted one binary under the same settings (a warning says so)
    # The runs' ids (manifest run_id), in the order of base_runs and new_runs: the names above are folder
    # names, which two runs in two parents can share (r1, r2, ...).
    base_ids: list[str] = field(default_factory=list)
    new_ids: list[str] = field(default_factory=list)
    # The runs counted although not marked ok (--include-status): (folder name, status), baseline first.
    included: list[tuple[str, str]] = field(default_factory=list)
    # Metrics defined on one side only (convergence with balancing off on the other): (key, the side without
    # it: "baseline" or "new", the other side's figures). No verdict: there is nothing to compare with.
    undefined: list[tuple[str, str, Stats]] = field(default_factory=list)
    # Each side's schedulers ("fair", "scx_simple", lab.analysis.scheduler_class.side_schedulers), and the sched_ext
    # ones among both sides' runs ([]: a fair-class A/B, where NUMA balancing's rows carry no mark).
    schedulers: tuple[str, str] = ("fair", "fair")
    ext: list[str] = field(default_factory=list)

    @property
    def fair_class_note(self) -> str:
        """What a NUMA-balancing row carries here ("" in a fair-class A/B)."""
        return fair_class_note(self.ext)

    def fair_only(self, key: str) -> bool:
        """Whether the metric ``key`` is NUMA balancing's and this A/B has a sched_ext side."""
        return bool(self.ext) and key in METRIC_KEYS and METRIC_KEYS[key].fair_only

    def row(self, key: str) -> Row | None:
        return next((r for r in self.rows if r.metric.key == key), None)


def side_labels(base: list[RunRecord], new: list[RunRecord]) -> tuple[str, str]:
    """The two sides' labels: each one's kernels and NUMA-balancing setting (:func:`_label`), and where either
    side ran a sched_ext scheduler, or the two ran different schedulers, each side's schedulers too:
    "stock [fair]" against "stock [scx_simple]". A fair-class A/B is labelled as before schedulers were chosen."""
    schedulers = (side_schedulers([r.manifest for r in base]), side_schedulers([r.manifest for r in new]))
    a, b = pair_labels((_kernels(base), _kernels(new)), schedulers)
    return a + _balancing(base), b + _balancing(new)


def _kernels(runs: list[RunRecord]) -> str:
    return "+".join(sorted({r.kernel_name for r in runs}))


def _balancing(runs: list[RunRecord]) -> str:
    """A side's NUMA-balancing setting where it is one and not on: " (balancing off)", " (balancing tiering)"."""
    settings = sorted({str(r.numa_balancing) for r in runs})
    if len(settings) == 1 and settings[0] == "0":
        return " (balancing off)"
    if len(settings) == 1 and settings[0] == "2":
        return " (balancing tiering)"
    return ""


def _check_same_setup(runs: list[RunRecord]) -> tuple[str, str]:
    topo = {(r.topology.name, r.topology.distances, tuple(n.cpus for n in r.topology.nodes)) for r in runs}
    if len(topo) > 1:
        raise LabError(
            f"runs mix topologies ({', '.join(sorted({t[0] for t in topo}))}): compare one topology at a time"
        )
    loads = {r.workload_name for r in runs}
    if len(loads) > 1:
        raise LabError(f"runs mix workloads ({', '.join(sorted(loads))}): compare one workload at a time")
    return runs[0].topology.name, loads.pop()


def kernel_identity(manifest: dict) -> str | None:
    """The binary a run booted: the build-id its guest showed, else the build-id asked for, else the image's
    hash (records made before numalab checked identities)."""
    k = manifest.get("kernel") if isinstance(manifest.get("kernel"), dict) else {}
    for key, prefix in (("build_id", "build-id "), ("expected_build_id", "build-id "), ("sha256", "sha256 ")):
        if isinstance(k.get(key), str) and k[key]:
            return prefix + k[key][:16]
    return None


def _settings(r: RunRecord) -> tuple:
    """What besides the kernel makes the two sides of an A/B differ."""
    s = r.settings
    clock = (r.manifest.get("accelerator") or {}).get("clock")
    knobs = tuple(sorted(r.knobs.items()))
    # what the run traced and sampled: its own cost (--lean, --node-maps, --event; docs/reports.md)
    traced = (tuple(sorted(map(str, s.get("trace_events") or ()))), s.get("node_samples", True) is not False,
              s.get("node_maps") is True)  # fmt: skip
    return (r.numa_balancing, knobs, r.access_matrix is not None, str(s.get("kernel_args")), str(s.get("demotion")),
            _latency_model(r), str(clock), scheduler_of(r.manifest).label, cpu_identity(r), traced)  # fmt: skip


def same_kernel_warning(base: list[RunRecord], new: list[RunRecord]) -> str | None:
    """A loud line when both sides booted one and the same kernel binary under the same settings: such an
    A/B compares a kernel with itself, and any 'significant' difference in it is noise or the host's."""
    ids_b = {kernel_identity(r.manifest) for r in base}
    ids_n = {kernel_identity(r.manifest) for r in new}
    if None in ids_b | ids_n or ids_b != ids_n or len(ids_b) != 1:
        return None
    if {_settings(r) for r in base} != {_settings(r) for r in new}:
        return None  # one kernel, two settings (balancing on against off): an A/B of the settings
    names = sorted({r.kernel_name for r in base + new})
    return (
        f"both sides ran the same kernel binary ({ids_b.pop()}; {' and '.join(names)}) with the same settings: "
        "this compares a kernel with itself, so any difference below is noise, not a patch"
    )


def _loss(r: RunRecord) -> dict:
    return lost_of_record(r.path, r.metrics)


def _trace_incomplete(r: RunRecord) -> bool:
    return r.marked_incomplete or bool(_loss(r)["trace_incomplete"])


def _trace_problem(r: RunRecord) -> str:
    problems = r.metrics.get("trace_problems") or []
    return str(problems[0])[:200] if problems else "unreadable"


def compare_runs(
    base: list[RunRecord],
    new: list[RunRecord],
    plan: ABPlan | None = None,
    labels: tuple[str, str] | None = None,
    include_incomplete: bool = False,
    include_statuses: tuple[str, ...] = (),
) -> Comparison:
    """Compare the ok runs of two sides, and those whose status is in ``include_statuses`` (--include-status:
    they count, and every row and verdict they count in says so). Runs whose trace is incomplete are left out
    (with a note) unless ``include_incomplete``. ``plan`` holds how the rows are read: its ``significance``
    rule (--significance) and its ``min_effect`` (percent, --min-effect), which overrides every metric's
    minimum effect (lab.min_effect; None: each metric's own, else the default); its other fields are not
    read here (None: the defaults)."""
    plan = plan or ABPlan()
    significance = plan.significance
    if significance not in SIGNIFICANCES:
        raise LabError(f"--significance {significance}: not one of {', '.join(SIGNIFICANCES)}")
    if not base or not new:
        raise LabError("compare: give at least one baseline run and one new run")
    topology, workload = _check_same_setup(base + new)
    base_ok, new_ok, excluded, notes = _counted_runs(base, new, include_incomplete, include_statuses)
    rows, undefined = _rows(base_ok, new_ok, plan)
    notes += _setup_notes(base_ok, new_ok)
    manifests = [r.manifest for r in base_ok + new_ok]
    if note := apply_caveats(rows, manifests):
        notes.append(note)
    ext, note = mark_fair_class(rows, manifests)
    notes += [note] if note else []
    same = same_kernel_warning(base_ok, new_ok)
    warnings = [w for w in (same, cpu_identity_warning(base_ok, new_ok)) if w]
    bl, nl = labels or side_labels(base_ok, new_ok)
    return Comparison(
        bl,
        nl,
        topology,
        workload,
        significance,
        rows,
        [r.path.name for r in base_ok],
        [r.path.name for r in new_ok],
        excluded,
        notes,
        warnings,
        same is not None,
        [r.run_id for r in base_ok],
        [r.run_id for r in new_ok],
        [(r.path.name, r.status) for r in base_ok + new_ok if r.status != "ok"],
        undefined,
        (side_schedulers([r.manifest for r in base_ok]), side_schedulers([r.manifest for r in new_ok])),
        ext,
    )


def _counted_runs(
    base: list[RunRecord], new: list[RunRecord], include_incomplete: bool, include_statuses: tuple[str, ...]
) -> tuple[list[RunRecord], list[RunRecord], list[str], list[str]]:
    """Each side's runs that count (status ok or one of ``include_statuses``; a complete trace unless
    ``include_incomplete``), the runs left out ("r2 (placement-broken)") and the notes that say why; a
    LabError when a side has none left."""
    counted = ("ok", *include_statuses)
    excluded = [f"{r.path.name} ({r.status})" for r in base + new if r.status not in counted]
    incomplete = [r for r in base + new if r.status in counted and _trace_incomplete(r)]
    notes = []
    if left := sorted({r.status for r in base + new if r.status not in counted}):
        notes.append(f"{len(excluded)} run(s) left out for their status (--include-status {','.join(left)} counts "
                     f"them, marked {INCLUDED_MARK})")  # fmt: skip
    if incomplete and include_incomplete:
        notes.append(
            f"{len(incomplete)} run(s) with an incomplete trace are included (asked for): their event counts are low"
        )
    elif incomplete:
        excluded += [
            f"{r.path.name} (trace incomplete: {describe_lost(_loss(r)) or _trace_problem(r)})" for r in incomplete
        ]
        notes.append(
            f"{len(incomplete)} run(s) left out: their trace lost more than 1% of its records or could not be read, "
            "so their event counts are low (--include-incomplete to count them)"
        )
    keep = [r for r in base + new if r.status in counted and (include_incomplete or r not in incomplete)]
    base_ok = [r for r in base if r in keep]
    new_ok = [r for r in new if r in keep]
    statuses = "status " + " or ".join(counted)
    if not base_ok or not new_ok:
        why = f"{statuses} and a complete trace" if incomplete and not include_incomplete else statuses
        raise LabError(f"compare: no run with {why} on one side; nothing to compare")
    if text := included_text(status_counts(base_ok + new_ok)):
        notes.append(f"the comparison {text} (asked for: --include-status); {INCLUDED_MARK} marks each row they "
                     "count in")  # fmt: skip
    return base_ok, new_ok, excluded, notes


def _rows(
    base_ok: list[RunRecord], new_ok: list[RunRecord], plan: ABPlan
) -> tuple[list[Row], list[tuple[str, str, Stats]]]:
    """A row for each metric both sides have, judged by ``plan``'s rule and minimum effect; and the metrics
    one side only has (key, the side without it, the other side's figures)."""
    bv = [metric_values(r.manifest) for r in base_ok]
    nv = [metric_values(r.manifest) for r in new_ok]
    rows, undefined = [], []
    for m in metrics_of([r.manifest for r in base_ok + new_ok]):
        b = [v[m.key] for v in bv if m.key in v]
        n = [v[m.key] for v in nv if m.key in v]
        if bool(b) != bool(n):
            undefined.append((m.key, "new" if b else "baseline", Stats.of(b or n)))
        if b and n:
            bs, ns = Stats.of(b), Stats.of(n)
            sig = significant(bs, ns, plan.significance, _mean_name(m, bs, ns).lower())
            marked = status_counts(base_ok + new_ok, m.key)
            rows.append(Row(m, bs, ns, sig, effective(plan.min_effect, m.min_effect), marked,
                            significance=plan.significance))  # fmt: skip
    return rows, undefined


def _setup_notes(base_ok: list[RunRecord], new_ok: list[RunRecord]) -> list[str]:
    """What the runs' setup says of the whole table: too few runs to judge, different remote-latency models,
    TCG's times."""
    notes = []
    if len(base_ok) < MIN_REPEATS or len(new_ok) < MIN_REPEATS:
        notes.append(
            f"significance cannot be judged with fewer than {MIN_REPEATS} runs per side "
            f"(baseline {len(base_ok)}, new {len(new_ok)})"
        )
    models = {_latency_model(r) for r in base_ok + new_ok}
    if len(models) > 1:
        notes.append(
            "the runs were recorded under different remote-latency models ("
            + "; ".join(sorted(models))
            + "): their throughput and times measure different machines, not a kernel change"
        )
    accels = {r.accelerator for r in base_ok + new_ok}
    if "tcg" in accels:
        notes.append("runs used TCG software emulation: absolute times are not comparable with real hardware")
    return notes


EXT_NOTE = (
    "NUMA balancing's rows (hint faults and their locality, pages it migrated, its task moves, swaps and sticks, "
    "its convergence) are the fair class's, whose tick starts its scans, and are marked so; where the tasks ran, "
    "how they moved and when they settled (tasks.settled_s, tasks.migrations_*, tasks.pingpong) are read from "
    "the generic scheduler events, for any scheduler"
)


def mark_fair_class(rows: list[Row], manifests: list[dict]) -> tuple[list[str], str | None]:
    """Where a run ran a sched_ext scheduler, mark NUMA balancing's rows as the fair class's
    (lab.analysis.scheduler_class); the sched_ext schedulers, and the note that says so (None: none ran)."""
    ext = ext_names(manifests)
    for r in rows:
        r.class_note = fair_class_note(ext) if r.metric.fair_only else ""
    return ext, (f"{' and '.join(ext)} (sched_ext) ran the workload on a side: {EXT_NOTE}" if ext else None)


def apply_caveats(rows: list[Row], manifests: list[dict]) -> str | None:
    """Mark each row whose verdict the runs' VM cannot support (lab.analysis.caveats), and return the note that
    says why and which command can; None when no row needs one."""
    why = free_remote(manifests)
    model, phase = model_words(manifests), phase_words(manifests)
    for r in rows:
        r.caveat = row_caveat(r.metric.key, r.metric.unit, why, model, phase)
    return caveat_note(why) if any(r.caveat for r in rows) else None


def _latency_model(r: RunRecord) -> str:
    """A run's --remote-latency model in a few words: "off", or its source, L and ratios."""
    m = (r.manifest.get("remote_latency") or {}).get("model")
    if not isinstance(m, dict):
        return "off"
    ratios = m.get("ratios")
    rows = [row for row in ratios if isinstance(row, list)] if isinstance(ratios, list) else []
    flat = sorted({x for row in rows for x in row if isinstance(x, (int, float))})
    return f"{m.get('source', '?')}, L {m.get('local_ns', '?')} ns, ratios {'/'.join(f'{x:g}' for x in flat)}"
