"""Seed 002's reproduction report: the group check and the nodes 1/3 imbalance, baseline against the bad patch.

The A/B tables (``lab.analysis.compare``) leave out runs that are not ``ok``,
and every run of the old-construction kernel is ``topology-mismatch`` by
design, so this report reads the run manifests itself::

    python3 -m lab.seeds.seed002.groups_report MATRIX_OUT [RUN_DIR...] --out reports/seed002-sched-groups.md [--json F]

Per topology and kernel: the runs and their status, whether the group check
passed, the first mismatch reason, and the busy CPU time of nodes 1 and 3
over the workload (``metrics.node_cpu``, from ``/proc/stat``) with the
workload's balance (100 x less busy / busier of the two). The verdict on the
imbalance uses the same significance rule as ``numalab compare``
(CI overlap, at least 3 runs a side).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from lab.analysis.record import load_manifest
from lab.analysis.stats import Stats, significant
from lab.errors import LabError
from lab.paths import json_text, write_text_atomic
from lab.record_files import MANIFEST

SEED_CLAIM = (
    "On a 4-node ring, groups built from one CPU's point of view put nodes 1 and 3 in both groups of the last "
    "NUMA level [(3,0,1)(1,2,3)], so the scheduler cannot move tasks directly between them: with tasks bound "
    "to nodes 1 and 3, just one node is used while the other remains idle. The 8-node mesh has the same "
    "problem between some nodes two hops apart. (Lauro Ramos Venancio, 2017; SPECjbb2005 on an 8-node mesh "
    "+19% to +63% with the fix.)"
)


def _runs(paths: list[Path]) -> list[dict]:
    dirs: list[Path] = []
    for p in paths:
        if (p / MANIFEST).is_file():
            dirs.append(p)
        elif (p / "runs").is_dir():
            dirs.extend(sorted(d for d in (p / "runs").iterdir() if (d / MANIFEST).is_file()))
        else:
            raise LabError(f"{p}: neither a run record nor a matrix output directory")
    out = []
    for d in dirs:
        out.append(load_manifest(d / MANIFEST) | {"_dir": str(d)})
    if not out:
        raise LabError("no run records found")
    return out


def _spread(result: dict) -> float | None:
    """100 x tasks ending on the less used of the two nodes / half the tasks: 100 when the balancer split
    them evenly, 0 when every task stayed on one node."""
    a, b = result.get("tasks_end_a"), result.get("tasks_end_b")
    if (a is None or b is None) and {"a_cpu", "b_cpu", "width"} <= result.keys() and result.get("per_task"):
        ends = [t.get("cpu_end") for t in result["per_task"]]
        a = sum(result["a_cpu"] <= c < result["a_cpu"] + result["width"] for c in ends if c is not None)
        b = sum(result["b_cpu"] <= c < result["b_cpu"] + result["width"] for c in ends if c is not None)
    if a is None or b is None or a + b == 0:
        return None
    return round(100 * min(a, b) / ((a + b) / 2), 1)


def _clock_ok(m: dict) -> bool:
    """False when the guest's clock ran faster than the host's: its workload took longer, by its own clock,
    than the whole VM lived. TCG on a loaded host can miscalibrate the guest's TSC at boot; such a run's
    seconds (and so its busy times) mean nothing and it is left out of the statistics."""
    t = m.get("timings") or {}
    ws, vm = t.get("workload_s"), t.get("vm_s")
    return ws is None or vm is None or ws <= vm + 0.5


def _row(m: dict) -> dict:
    gt = m.get("guest_topology") or {}
    groups = gt.get("sched_groups") or {}
    problems = [p for p in gt.get("problems", []) if "sched groups" in p]
    result = (m.get("workload") or {}).get("result") or {}
    busy = ((m.get("metrics") or {}).get("node_cpu") or {}).get("busy_s", {})
    return {
        "run": Path(m["_dir"]).name,
        "topology": m["topology"]["name"],
        "vcpus": m["topology"]["total_cpus"],
        "kernel": m["kernel"]["name"],
        "status": m["status"],
        "reason": m.get("reason", ""),
        "groups_checked": bool(groups.get("checked")),
        "group_problems": problems,
        "busy_node1_s": busy.get("1"),
        "busy_node3_s": busy.get("3"),
        "balance_pct": result.get("balance_pct"),
        "loops_per_s": result.get("loops_per_s"),
        "spread_pct": _spread(result),
        "clock_ok": _clock_ok(m),
        "accelerator": (m.get("accelerator") or {}).get("name"),
        "workload": (m.get("workload") or {}).get("name"),
        "duration_s": (m.get("workload") or {}).get("duration_s"),
    }


VERDICTS = (
    "reproduced",
    "reproduced (Welch p < 0.05; not by the CI-overlap rule)",
    "same direction, not significant",
    "not judged (fewer than 3 runs a side)",
    "not reproduced",
)


def _verdict(ab: dict) -> str:
    """The verdict on a metric that the bad kernel should lower."""
    if ab["diff"] >= 0:
        return VERDICTS[4]
    if ab["ci_overlap"] is None:
        return VERDICTS[3]
    return VERDICTS[0] if ab["ci_overlap"] else VERDICTS[1] if ab["welch"] else VERDICTS[2]


def summarise(rows: list[dict], baseline: str = "baseline") -> list[dict]:
    """One entry per topology: both kernels' group check and imbalance, and the verdicts."""
    out = []
    for topo in sorted({r["topology"] for r in rows}):
        sides: dict[str, dict] = {}
        for kernel in sorted({r["kernel"] for r in rows if r["topology"] == topo}):
            rs = [r for r in rows if r["topology"] == topo and r["kernel"] == kernel]
            good = [r for r in rs if r["clock_ok"]]
            bal = [r["balance_pct"] for r in good if r["balance_pct"] is not None]
            thr = [r["loops_per_s"] for r in good if r["loops_per_s"] is not None]
            spread = [r["spread_pct"] for r in good if r["spread_pct"] is not None]
            sides[kernel] = {
                "runs": len(rs),
                "statuses": {s: sum(r["status"] == s for r in rs) for s in sorted({r["status"] for r in rs})},
                "group_check_failed": sum(bool(r["group_problems"]) for r in rs),
                "group_check_passed": sum(r["groups_checked"] and not r["group_problems"] for r in rs),
                "first_problem": next((r["group_problems"][0] for r in rs if r["group_problems"]), None),
                "group_problems_per_run": max((len(r["group_problems"]) for r in rs), default=0),
                "clock_skewed": [r["run"] for r in rs if not r["clock_ok"]],
                "balance": Stats.of(bal).__dict__ if bal else None,
                "spread": Stats.of(spread).__dict__ if spread else None,
                "throughput": Stats.of(thr).__dict__ if thr else None,
                "busy_node1_s": [r["busy_node1_s"] for r in good],
                "busy_node3_s": [r["busy_node3_s"] for r in good],
                "vcpus": rs[0]["vcpus"],
            }
        entry = {"topology": topo, "kernels": sides}
        others = [k for k in sides if k != baseline]
        if baseline in sides and others:
            b, n = sides[baseline], sides[others[0]]
            entry["bad_kernel"] = others[0]
            entry["group_check_verdict"] = (
                "reproduced"
                if b["group_check_failed"] == 0 and b["group_check_passed"] == b["runs"]
                and n["group_check_failed"] == n["runs"]
                else "not reproduced"
            )  # fmt: skip
            verdicts = []
            for key in ("balance", "spread", "throughput"):
                if not b[key] or not n[key]:
                    continue
                sb, sn = Stats(**b[key]), Stats(**n[key])
                entry[key] = {
                    "diff": round(sn.amean - sb.amean, 1),
                    "diff_pct": round(100 * (sn.amean - sb.amean) / sb.amean, 1) if sb.amean else None,
                    "ci_overlap": significant(sb, sn, "ci-overlap"),
                    "welch": significant(sb, sn, "welch"),
                }
                if key != "throughput":  # the seed's direction: the bad kernel uses node 1 and 3 less evenly
                    verdicts.append(_verdict(entry[key]))
            if verdicts:
                entry["imbalance_verdict"] = min(verdicts, key=VERDICTS.index)
        out.append(entry)
    return out


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _stat(x: dict, digits: int) -> str:
    return f"{x['amean']:.{digits}f} ± {x['stddev']:.{digits}f} (n={x['n']})"


def _mean(vals: list) -> float | None:
    vals = [v for v in vals if v is not None]
    return statistics.fmean(vals) if vals else None


def _head(rows: list[dict]) -> list[str]:
    """The report's title, the seed's claim, what numalab checks and how, and the verdict table's header."""
    accel = sorted({r["accelerator"] or "?" for r in rows})
    return [
        "# Seed 002 reproduction: the sched-group construction bug",
        "",
        f"**The seed's claim.** {SEED_CLAIM}",
        "",
        "**What numalab checks.** On every run it predicts the groups of every NUMA sched domain from each CPU's "
        "point of view as Linux 6.1 builds them (`lab/topology/predictions/sched_groups.py`), reads the groups the "
        "guest built from its `sched_verbose` dump, and makes any difference the run status `topology-mismatch`, "
        "naming the CPU, the domain and the overlap. The bad kernel is 6.1 with "
        "`kernel-configs/patches/seed002-groups-from-one-cpu.patch` (the construction before the fix). The "
        "`nodes13` workload runs two CPU-bound tasks per CPU of nodes 1 and 3, bound to both nodes and all "
        "started on node 1; the busy CPU time of each node over the workload comes from `/proc/stat` "
        "(`metrics.node_cpu`).",
        "",
        f"Accelerator: {', '.join(accel)}. Runs: {len(rows)}. Significance: mmtests' CI-overlap rule "
        "(|Δmean| > 1.96·(σ_base + σ_new)) and Welch's t-test (p < 0.05), at least 3 runs a side.",
        "",
        "## Verdicts",
        "",
        "| topology | vCPUs | group check: baseline | group check: bad patch | group verdict | "
        "one node busy, the other idle (busy balance or task spread) |",
        "|---|---|---|---|---|---|",
    ]


def _pairs(summary: list[dict]) -> list[tuple[dict, dict, dict]]:
    """(entry, baseline side, bad kernel side) of every topology that has both kernels."""
    pairs = []
    for e in summary:
        b, n = e["kernels"].get("baseline"), e["kernels"].get(e.get("bad_kernel", ""))
        if b and n:
            pairs.append((e, b, n))
    return pairs


def _group_check(s: dict) -> str:
    """A kernel's group check results: how many runs passed and failed."""
    return f"{s['group_check_passed']}/{s['runs']} pass, {s['group_check_failed']} fail"


def _verdict_rows(pairs: list[tuple[dict, dict, dict]]) -> list[str]:
    """One row of the verdict table per topology."""
    return [
        f"| {e['topology']} | {b['vcpus']} | {_group_check(b)} | {_group_check(n)} | {e['group_check_verdict']} | "
        f"{e.get('imbalance_verdict', '-')} |"
        for e, b, n in pairs
    ]


# The A/B sections of the report: (summary key, title, what the figure is, digits shown).
AB_TABLES = (
    ("balance", "Busy balance of nodes 1 and 3 (%)",
     "100 × busy CPU time of the less busy of nodes 1 and 3 / the busier, over the workload (`/proc/stat`).", 1),
    ("spread", "Where the tasks ended (the scheduler's decision)",
     "Spread = 100 × tasks that ended on the less used of nodes 1 and 3 / half the tasks: 100 when the "
     "balancer split them evenly, 0 when all stayed on one node. Unlike busy seconds, it does not depend on "
     "how much host CPU each vCPU got.", 0),
    ("throughput", "Throughput (nodes13 loops/s, all tasks together)",
     "Not the seed's direction to check (see the notes): under TCG an idle vCPU frees host CPU for the busy one.",
     0),
)  # fmt: skip


def _yes_no(v: bool | None) -> str:
    """A significance test's answer: yes, no, or - when it was not judged."""
    return "-" if v is None else "yes" if v else "no"


def _ab_table(key: str, title: str, text: str, digits: int, pairs: list[tuple[dict, dict, dict]]) -> list[str]:
    """The section of one A/B figure: baseline and bad patch per topology, their difference and significance."""
    lines = ["", f"## {title}", "", text, ""]
    lines += ["| topology | baseline | bad patch | Δ | %diff | CI overlap | Welch |"]
    lines += ["|---|---|---|---|---|---|---|"]
    for e, b, n in pairs:
        ab = e.get(key)
        if not ab:
            continue
        lines.append(
            f"| {e['topology']} | {_stat(b[key], digits)} | {_stat(n[key], digits)} | {_fmt(ab['diff'], digits)} | "
            f"{_fmt(ab['diff_pct'])} | {_yes_no(ab['ci_overlap'])} | {_yes_no(ab['welch'])} |"
        )
    return lines


def _busy_table(summary: list[dict]) -> list[str]:
    """The section of the mean busy CPU time of nodes 1 and 3 per topology and kernel, naming the runs left out."""
    lines = ["", "## Busy CPU time of nodes 1 and 3 (mean seconds over the workload)", ""]
    lines += ["| topology | kernel | runs | status | node 1 busy s | node 3 busy s |", "|---|---|---|---|---|---|"]
    for e in summary:
        for k, s in e["kernels"].items():
            status = ", ".join(f"{v} {st}" for st, v in s["statuses"].items())
            lines.append(
                f"| {e['topology']} | {k} | {s['runs']} | {status} | {_fmt(_mean(s['busy_node1_s']), 2)} | "
                f"{_fmt(_mean(s['busy_node3_s']), 2)} |"
            )
    skewed = [r for e in summary for s in e["kernels"].values() for r in s["clock_skewed"]]
    if skewed:
        lines += [
            "",
            f"Left out of the statistics (guest clock ran faster than the host's, see `_clock_ok`): "
            f"{', '.join(skewed)}.",
        ]
    return lines


def _group_messages(summary: list[dict]) -> list[str]:
    """The section of the group check's first message per topology and kernel."""
    lines = ["", "## The group check's messages (first per topology and kernel)", ""]
    for e in summary:
        for k, s in e["kernels"].items():
            msg = s["first_problem"] or "(no group mismatch)"
            more = s["group_problems_per_run"]
            lines.append(f"- **{e['topology']} / {k}** ({more} mismatching CPU domains per run): `{msg}`")
    return lines


def _runs_table(rows: list[dict]) -> list[str]:
    """The section of every run's figures, by topology, kernel and run."""
    lines = ["", "## Runs", ""]
    lines += ["| run | topology | kernel | status | balance % | spread % | node 1 s | node 3 s | loops/s | clock |"]
    lines += ["|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["topology"], r["kernel"], r["run"])):
        lines.append(
            f"| {r['run']} | {r['topology']} | {r['kernel']} | {r['status']} | {_fmt(r['balance_pct'])} | "
            f"{_fmt(r['spread_pct'], 0)} | {_fmt(r['busy_node1_s'], 2)} | {_fmt(r['busy_node3_s'], 2)} | "
            f"{_fmt(r['loops_per_s'], 0)} | {'ok' if r['clock_ok'] else 'skewed'} |"
        )
    return lines


def to_markdown(summary: list[dict], rows: list[dict], notes: str = "") -> str:
    """The report as markdown: verdicts, the A/B tables, busy times, the group check's messages, every run."""
    pairs = _pairs(summary)
    lines = _head(rows) + _verdict_rows(pairs)
    for key, title, text, digits in AB_TABLES:
        lines += _ab_table(key, title, text, digits, pairs)
    lines += _busy_table(summary) + _group_messages(summary) + _runs_table(rows)
    if notes:
        lines += ["", notes.strip()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python3 -m lab.seeds.seed002.groups_report", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("paths", nargs="+", type=Path, help="matrix output directories or run records")
    ap.add_argument("--out", type=Path, required=True, help="the markdown report")
    ap.add_argument("--json", type=Path, help="also write the summary as JSON")
    ap.add_argument("--notes", type=Path, help="markdown appended to the report (conditions, what does not reproduce)")
    args = ap.parse_args(argv)
    try:
        rows = []
        for m in _runs(args.paths):
            try:
                rows.append(_row(m))
            except (KeyError, TypeError, AttributeError) as err:
                raise LabError(f"{m['_dir']}/manifest.json: not a numalab run record (missing {err})") from None
        notes = args.notes.read_text() if args.notes else ""
    except LabError as err:
        print(f"numalab: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"numalab: error: {err.filename}: {err.strerror}", file=sys.stderr)
        return 2
    summary = summarise(rows)
    write_text_atomic(args.out, to_markdown(summary, rows, notes))
    if args.json:
        write_text_atomic(args.json, json_text({"summary": summary, "runs": rows}, indent=2) + "\n")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
