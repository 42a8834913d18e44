"""``numalab workload``: the built-in workloads and what each reports (list), and one workload, built-in or a
user's file, as numalab reads it (show): its command on a topology, what the guest image carries for it, and
its metrics with their direction and mean. A workload file is checked as ``numalab run`` checks it (files,
programs' libraries, packages), with nothing booted."""

from __future__ import annotations

import argparse

from lab.cli.shared_options import duration_option, json_option, schema_command, topology_options, topology_ref
from lab.guest.settings import check_duration
from lab.paths import json_text
from lab.untrusted import escape_surrogates, term_safe
from lab.workloads.metric_declarations import twin_unit_of
from lab.workloads.registry import WORKLOADS
from lab.workloads.user_workload import resolve_workload


def _metric_rows(workload) -> list[dict]:
    """Its metrics as compare knows them (``workload.<name>``), each rate's per-vCPU-second twin after it."""
    if workload.user is not None:
        if workload.user.all_numeric:
            return [{"metric": "workload.<every number of the JSON line>", "unit": "", "better": "higher",
                     "mean": "amean"}]  # fmt: skip
        rows = []
        for m in workload.user.metrics:
            better = "higher" if m.higher_is_better else "lower"
            effect = {} if m.min_effect is None else {"min_effect_pct": m.min_effect}
            rows.append({"metric": f"workload.{m.name}", "unit": m.unit, "better": better, "mean": m.mean} | effect)
            if m.twin_key is not None:  # a rate: its twin per vCPU CPU-second (host clock; lab.analysis.metrics)
                rows.append({"metric": f"workload.{m.twin_key}", "unit": twin_unit_of(m.unit), "better": better,
                             "mean": "hmean", "twin_of": f"workload.{m.name}"} | effect)  # fmt: skip
        return rows
    rows = []
    for m in workload.metrics:
        rows.append({"metric": f"workload.{m.name}", "unit": m.unit, "better": m.better, "mean": m.mean})
        if m.twin is not None:
            rows.append({"metric": f"workload.{m.twin_key}", "unit": m.twin_unit, "better": "higher", "mean": "hmean",
                         "twin_of": f"workload.{m.name}"})  # fmt: skip
    return rows


def _record(workload, topo=None, duration: float | None = None) -> dict:
    user = workload.user
    out = {
        "name": workload.name,
        "description": workload.description,
        "kind": workload.kind,
        "programs": list(workload.programs),
        "tools": list(user.tools if user else workload.tools),
        "metrics": _metric_rows(workload),
    }
    if user is not None:
        # (a path or a file's name may have bytes that are not UTF-8: shown as \xNN, never printed raw)
        shown = escape_surrogates
        out |= {"description": shown(workload.description), "tools": [shown(t) for t in user.tools],
                "source": shown(user.source), "files": [shown(g) for _, g in user.files],
                "packages": list(user.packages)}  # fmt: skip
    elif workload.folder:
        out["folder"] = workload.folder
    if topo is not None and duration is not None:
        out |= {"topology": topo.name, "duration_s": duration, "command": workload.command(topo, duration)}
    return out


def cmd_workload_list(args: argparse.Namespace) -> int:
    rows = [_record(w) for w in WORKLOADS.values()]
    if args.json:
        print(json_text(rows, indent=2))
        return 0
    width = max(len(r["name"]) for r in rows) + 2
    print(f"{'NAME':<{width}}{'METRICS (+ higher is better, - lower)':<58}DESCRIPTION")
    for r in rows:
        own = [m for m in r["metrics"] if "twin_of" not in m]
        metrics = " ".join(f"{'+' if m['better'] == 'higher' else '-'}{m['metric'].removeprefix('workload.')}"
                           for m in own)  # fmt: skip
        print(f"{r['name']:<{width}}{metrics:<58}{r['description']}")
    return 0


def cmd_workload_show(args: argparse.Namespace) -> int:
    check_duration(args.duration)
    workload = resolve_workload(args.workload)
    topo = topology_ref(args).load()
    rec = _record(workload, topo, args.duration)
    if args.json:
        print(json_text(rec, indent=2))
        return 0
    # (a workload file is a user's text: its control characters are shown escaped, never sent to the terminal)
    print(f"{rec['name']}: {term_safe(rec['description'])}")
    if "source" in rec:
        print(f"  file:     {term_safe(rec['source'])}")
    if "folder" in rec:
        print(f"  folder:   {term_safe(rec['folder'])}")
    command = term_safe(rec["command"], newlines=True).replace("\n", "\n    ")
    print(f"  command on {rec['topology']} for {rec['duration_s']:g} s:\n    {command}")
    carried = [*rec["programs"], *rec["tools"], *rec.get("files", [])]
    print(f"  carries:  {', '.join(map(term_safe, carried)) or '-'}")
    if rec.get("packages"):
        print(f"  packages: {', '.join(map(term_safe, rec['packages']))}")
    print("  metrics:")
    # (a metric's name is at most 64 characters, a unit 32, more escaped: the columns fit them, never run together)
    units = [term_safe(m["unit"]) for m in rec["metrics"]]
    name_width = max([40, *(len(m["metric"]) + 2 for m in rec["metrics"])])
    width = max([12, *(len(u) + 2 for u in units)])
    for m, unit in zip(rec["metrics"], units):
        twin = f"  (per vCPU CPU-second: {m['twin_of']})" if "twin_of" in m else ""
        effect = f"  min effect {m['min_effect_pct']:g}%" if "min_effect_pct" in m else ""
        print(f"    {m['metric']:<{name_width}}{unit:<{width}}{m['better']:<7}{m['mean']}{twin}{effect}")
    return 0


def add_parser(sub) -> None:
    w = sub.add_parser(
        "workload",
        help="workloads: list the built-ins and their metrics, show one (or check your workload file)",
        description="The workloads numalab runs in the guest: built-ins and your own workload files "
        "(docs/workloads.md).",
    )
    wsub = w.add_subparsers(dest="workload_command", metavar="SUBCOMMAND", required=True)
    p = wsub.add_parser("list", help="the built-ins and their metrics", description="List the built-in workloads.")
    json_option(p)
    p.set_defaults(func=cmd_workload_list)
    p = wsub.add_parser(
        "show",
        help="one workload as a run would use it (a workload file is checked, nothing is booted)",
        description="Show a workload's command on a topology, what it carries into the guest and its metrics. "
        "A workload file is read and checked as numalab run reads it.",
    )
    p.add_argument("workload", metavar="NAME|FILE.yaml", help="a built-in (numalab workload list) or a workload file")
    topology_options(p, "the topology its command is scaled to")
    duration_option(p, "the duration its command is given")
    json_option(p)
    p.set_defaults(func=cmd_workload_show)
    schema_command(wsub, "workload", "workload files")
