"""``numalab matrix list|check|run|merge|ci|lava|lava-import``."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from lab.cli.common import debug, progress, warn
from lab.cli.shared_options import (
    connect_option,
    include_status_option,
    json_option,
    max_vms_of,
    max_vms_option,
    min_effect_option,
    out_option,
    schema_command,
)
from lab.datafile import load_json
from lab.errors import LabError
from lab.matrix.definition import load_matrix as load
from lab.matrix.definition import parse_shard as parse
from lab.matrix.kernels import check_recipes, matrix_kernel_args
from lab.paths import json_text, write_text_atomic
from lab.record_files import MANIFEST
from lab.vm.libvirt.libvirt_hostspec import HostSpec, check_host

if TYPE_CHECKING:
    from lab.matrix.definition import MatrixSpec


def load_matrix(path):
    """lab.matrix.definition.load_matrix, imported on use: building the CLI parser stays cheap for every command."""
    return load(path)


def parse_shard(text: str) -> tuple[int, int]:
    return parse(text)


def _selected(spec: MatrixSpec, shard: str | None):
    return spec.shard(*parse_shard(shard)) if shard else spec.runs


def cmd_list(args: argparse.Namespace) -> int:
    spec = load_matrix(args.file)
    runs = _selected(spec, args.shard)
    if args.json:
        print(json_text([{"id": r.id, **r.axes(), "repeat": r.repeat, "duration": r.workload.duration} for r in runs],
                         indent=2))  # fmt: skip
        return 0
    for r in runs:
        print(r.id)
    progress(f"{len(runs)} runs (of {len(spec.runs)} in {spec.source}), fingerprint {spec.fingerprint()}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from lab.kernel.resolve import resolve_kernel  # (on use: start-up time)

    spec = load_matrix(args.file)
    check_recipes(spec)
    for k in spec.kernels:
        if k.build is None and k.spec != "stock":
            try:
                resolve_kernel(k.spec)
            except LabError as err:
                raise LabError(f"{spec.source}: kernels: {k.name}: {err}") from None
    _check_qemus(spec)
    axes = {a: sorted({r.axes()[a] for r in spec.runs}) for a in ("topology", "kernel", "workload", "setting")}
    plural = {"topology": "topologies", "kernel": "kernels", "workload": "workloads", "setting": "settings"}
    print(f"{spec.source}: ok ({len(spec.runs)} runs; "
          + "; ".join(f"{plural[a]}: {', '.join(v)}" for a, v in axes.items())
          + f"; {len(spec.gates)} gates)")  # fmt: skip
    return 0


def _check_qemus(spec) -> None:
    """A settings' qemu given as a path must answer as QEMU, as numalab run --qemu checks it (system, backports
    and charge are named choices: a CI machine may check a matrix it will fetch them for)."""
    from lab.vm.qemu.emulator import resolve  # (on use: start-up time)

    for setting in {r.setting.name: r.setting for r in spec.runs}.values():
        if "/" in setting.qemu:
            try:
                resolve(setting.qemu)
            except LabError as err:
                raise LabError(f"{spec.source}: settings {setting.name}: {err}") from None


def _reports(out: Path, runs) -> None:
    from lab.matrix.schedule import run_dir  # (on use: start-up time)
    from lab.report.report_model import build_report  # (on use: start-up time)

    for r in runs:
        d = run_dir(out, r)
        if (d / MANIFEST).exists() and not (d / "report.html").exists():
            try:
                build_report([d], d / "report.html")
            except LabError as err:
                warn(f"report for {r.id}: {err}")


def _hosts(spec: MatrixSpec, args: argparse.Namespace) -> tuple[list, dict]:
    """(libvirt hosts to spread over, the runs' backend options): the spec's hosts, or --backend/--connect."""
    if spec.hosts:
        if args.backend == "qemu" or args.connect:
            raise LabError(f"{spec.source}: hosts: the spec lists libvirt hosts; drop --backend qemu/--connect")
        for h in spec.hosts:
            info = check_host(h)  # reachable, or a one-line error naming the URI
            progress(f"host {h.uri}: {info['hostname']}, libvirt {info['libvirt']}, capacity {h.capacity}")
        return spec.hosts, {}
    if args.backend == "libvirt":
        uri = args.connect or "qemu:///system"

        check_host(HostSpec(uri))
        return [], {"backend": "libvirt", "connect": uri}
    if args.connect:
        raise LabError("--connect: only with --backend libvirt")
    return [], {}


def cmd_run(args: argparse.Namespace) -> int:
    from lab.matrix.outputs import write_outputs  # (on use: start-up time)
    from lab.matrix.schedule import (  # (on use: start-up time)
        Packing,
        check_inputs,
        check_out_dir,
        execute_matrix,
        input_hashes,
    )

    spec = load_matrix(args.file)
    shard = parse_shard(args.shard) if args.shard else None
    runs = _selected(spec, args.shard)
    max_vms = max_vms_of(args)
    default = f"runs/matrix-{spec.name}" + (f"-shard{shard[0]}of{shard[1]}" if shard else "")
    out = args.out or Path(default)
    check_out_dir(out, spec, shard)
    hosts, backend = _hosts(spec, args)
    debug(f"matrix {spec.name}: at most {max_vms or 'as many VMs as fit'} at once, backend {backend or 'qemu'}, "
          f"fail-fast {args.fail_fast}, overcommit {args.overcommit}")  # fmt: skip
    kernel_args = matrix_kernel_args(spec, progress)
    check_inputs(out, input_hashes(spec, kernel_args))
    progress(f"{len(runs)} runs -> {out}" + (f" on {len(hosts)} libvirt hosts" if hosts else ""))
    packing = Packing(max_vms, args.fail_fast, args.overcommit, backend, hosts)
    if spec.auto is not None and not shard:
        from lab.matrix.auto_cells import merged, run_auto_matrix, write_auto_json  # (on use: start-up time)

        auto = run_auto_matrix(spec, out, kernel_args, progress, args.min_effect, args.include_status, packing)
        runs, outcome = auto.runs, merged(auto)
        for c in auto.cells:
            for v in (v for vs in c.verdicts.values() for v in vs):
                print(f"verdict: {v.line()} ({c.stop.reason})")
        progress(f"auto verdicts: {write_auto_json(out, auto)}")
    else:
        outcome = execute_matrix(spec, runs, out, kernel_args, packing, progress)
    if not args.no_reports:
        _reports(out, runs)
    summary = write_outputs(spec, runs, out, outcome, shard, min_effect=args.min_effect,
                            include_statuses=args.include_status)  # fmt: skip
    t = summary.get("timing", {})
    totals = ", ".join(f"{v} {k}" for k, v in summary["totals"].items() if k != "runs")
    print(f"matrix {spec.name}: {summary['totals']['runs']} runs: {totals}")
    if t:
        use = "n/a (no run started)" if t["utilisation"] is None else f"{t['utilisation'] * 100:.0f}%"
        print(f"  wall {t['wall_s']}s, run CPU {t['cpu_s']}s on {t['cores']} cores: utilisation {use}")
    for g in summary["gates"]:
        print(f"  gate {g['verdict'].upper():<12} {g['gate']} [{g['group']}]: {g['detail']}")
    print(f"  overview: {out / 'index.html'}\n  junit: {out / 'junit.xml'}\n  summary: {out / 'summary.json'}")
    if outcome.interrupted:
        return 143
    failed = any(r.status != "ok" for r in outcome.results) or summary["gates_failed"]
    return 1 if failed else 0


def cmd_merge(args: argparse.Namespace) -> int:
    from lab.matrix.outputs import write_outputs  # (on use: start-up time)
    from lab.matrix.schedule import check_out_dir  # (on use: start-up time)

    metas = []
    for d in args.dirs:
        meta = d / "matrix.json"
        if not meta.exists():
            raise LabError(f"{d}: not a matrix output directory (no matrix.json)")
        data = load_json(meta)
        if not isinstance(data, dict) or not isinstance(data.get("fingerprint"), str):
            raise LabError(f"{meta}: not a numalab matrix record (no 'fingerprint')")
        metas.append(data)
    prints = {m["fingerprint"] for m in metas}
    if len(prints) > 1:
        raise LabError(f"merge: the directories come from different specs (fingerprints {', '.join(sorted(prints))})")
    spec = load_matrix(args.spec or metas[0]["source"])
    if spec.fingerprint() not in prints:
        raise LabError(f"merge: {spec.source} is not the spec these shards were run from (it has changed)")
    check_out_dir(args.out, spec, None)
    (args.out / "runs").mkdir(parents=True, exist_ok=True)
    copied = 0
    for d in args.dirs:
        if not (d / "runs").is_dir():
            continue  # a shard with no runs
        for run in (d / "runs").iterdir():
            if (run / MANIFEST).exists() and not (args.out / "runs" / run.name).exists():
                shutil.copytree(run, args.out / "runs" / run.name, symlinks=True)
                copied += 1
    summary = write_outputs(spec, spec.runs, args.out, None, sources=list(args.dirs),
                            include_statuses=args.include_status)  # fmt: skip
    print(f"merged {copied} runs from {len(args.dirs)} directories into {args.out}: "
          + ", ".join(f"{v} {k}" for k, v in summary["totals"].items()))  # fmt: skip
    return 1 if summary["gates_failed"] or summary["totals"].get("ok", 0) < len(spec.runs) else 0


def _write_ci_file(dest: str, text: str, what: str) -> None:
    if dest == "-":
        sys.stdout.write(text)
        return

    try:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(Path(dest), text)
    except OSError as err:
        raise LabError(f"{dest}: cannot write the {what}: {err.strerror or err}") from None
    print(f"wrote {dest}")


def cmd_ci(args: argparse.Namespace) -> int:
    from lab.matrix.ci import ci_spec_path, github_workflow  # (on use: start-up time)
    from lab.matrix.gitlab import check_runner_tag, gitlab_pipeline  # (on use: start-up time)

    if not args.github and not args.gitlab:
        raise LabError("matrix ci: give --github FILE and/or --gitlab FILE")
    if args.github == "-" and args.gitlab == "-":
        raise LabError("matrix ci: only one of --github and --gitlab can be '-' (stdout)")
    if args.gitlab_tag is not None:
        if not args.gitlab:
            raise LabError("--gitlab-tag: only with --gitlab (it picks the runners of the GitLab shard jobs)")
        check_runner_tag(args.gitlab_tag)
    if args.shards < 1:
        raise LabError(f"--shards: must be >= 1, got {args.shards}")
    if args.shards > 200:
        raise LabError(f"--shards: at most 200 (GitLab's parallel: limit), got {args.shards}")
    spec = load_matrix(args.file)
    spec_path, tracked = ci_spec_path(args.file, spec)
    if not tracked:
        warn(f"{args.file} is not committed ({spec_path} is not tracked by git): commit it, "
             "or the CI checkout will not have it")  # fmt: skip
    if args.github:
        _write_ci_file(args.github, github_workflow(spec, spec_path, args.shards), "GitHub workflow")
    if args.gitlab:
        _write_ci_file(args.gitlab, gitlab_pipeline(spec, spec_path, args.shards, args.gitlab_tag), "GitLab pipeline")
    if "-" not in (args.github, args.gitlab):
        print(f"{args.shards} shards over {len(spec.runs)} runs")
    return 0


def cmd_lava(args: argparse.Namespace) -> int:
    from lab.matrix.lava import JobSetOptions, check_lava_settings, write_jobs  # (on use: start-up time)

    spec = load_matrix(args.file)
    check_lava_settings(spec)  # (before a kernel is built or fetched)
    kernel_args = matrix_kernel_args(spec, progress)
    opts = JobSetOptions(args.accel, args.devices, args.url_base, args.device_types, args.results,
                         parse_shard(args.shard) if args.shard else None)  # fmt: skip
    jobs = write_jobs(spec, args.out, kernel_args, opts, progress=progress)
    slots = len({j.slot for j in jobs})
    print(f"{len(jobs)} LAVA jobs in {args.out} on {slots} device slot(s): {args.out}/README.md; "
          f"lava-run here: {args.out}/run-lava.sh")  # fmt: skip
    return 0


def cmd_lava_import(args: argparse.Namespace) -> int:
    from lab.matrix.lava_import import import_set  # (on use: start-up time)

    got = import_set(args.dir, args.out, progress)
    for record, status, reason in got.made:
        print(f"{record}: {status} ({reason})")
    if got.already:
        print(f"{len(got.already)} run(s) imported before: kept")
    if got.waiting:
        print(f"{len(got.waiting)} job(s) not done yet (no end in their log): import again when they are "
              f"({', '.join(got.waiting[:3])}{', ...' if len(got.waiting) > 3 else ''})")  # fmt: skip
    totals = got.summary.get("totals", {})
    print(f"{args.out}: " + ", ".join(f"{v} {k}" for k, v in totals.items() if k != "runs"))
    bad = any(status != "ok" for _, status, _ in got.made) or got.summary.get("gates_failed")
    return 1 if bad or got.waiting else 0


def add_parser(sub) -> None:
    m = sub.add_parser("matrix", help="CI VM matrices: topologies x kernels x workloads x settings x repeats",
                       description="Declarative VM matrices (YAML): preview, validate, run (resumable, shardable), "
                       "merge shard results, and emit a GitHub Actions workflow or a GitLab CI pipeline.")  # fmt: skip
    ms = m.add_subparsers(dest="matrix_command", metavar="SUBCOMMAND", required=True)

    p = ms.add_parser("list", help="the expanded runs with their stable ids", description="List the expanded runs.")
    p.add_argument("file", metavar="FILE", help="matrix spec (or the name of an example in lab/matrix/examples)")
    p.add_argument("--shard", metavar="i/N", help="only shard i of N")
    json_option(p)
    p.set_defaults(func=cmd_list)

    p = ms.add_parser("check", help="validate a matrix spec", description="Validate a matrix spec (one-line errors).")
    p.add_argument("file", metavar="FILE", help="matrix spec")
    p.set_defaults(func=cmd_check)
    _run_parsers(ms)
    _ci_parser(ms)
    _lava_parsers(ms)
    schema_command(ms, "matrix", "matrix specs")


def _run_parsers(ms) -> None:
    """matrix run and matrix merge."""
    p = ms.add_parser("run", help="run the matrix (again: resume)",
                      description="Run every run not done yet in OUT, packing VMs onto the host's cores and memory. "
                      "Run the same command again to resume after an interruption. Exit 1 if a run is not ok or a "
                      "gate fails.")  # fmt: skip
    p.add_argument("file", metavar="FILE", help="matrix spec")
    out_option(p, "DIR", "output directory (default runs/matrix-<name>[-shard])")
    max_vms_option(p)
    p.add_argument("--shard", metavar="i/N", help="run only shard i of N (deterministic)")
    p.add_argument("--fail-fast", action="store_true", help="start no further runs after the first failure")
    p.add_argument("--overcommit", action="store_true",
                   help="pack VMs by memory only, letting vCPU threads exceed host cores")  # fmt: skip
    p.add_argument("--no-reports", action="store_true", help="skip the per-run HTML reports")
    min_effect_option(p)
    include_status_option(p)
    p.add_argument(
        "--backend",
        choices=("qemu", "libvirt"),
        help="qemu (default) or libvirt; a spec with hosts: uses libvirt on those hosts",
    )
    connect_option(p)
    p.set_defaults(func=cmd_run)

    p = ms.add_parser("merge", help="join shard results", description="Merge shard output directories into one.")
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="shard output directories")
    out_option(p, "DIR", "merged output directory", required=True)
    p.add_argument("--spec", metavar="FILE", help="the matrix spec (default: the path recorded in the shards)")
    include_status_option(p)
    p.set_defaults(func=cmd_merge)


def _ci_parser(ms) -> None:
    """matrix ci: a GitHub Actions workflow and/or a GitLab CI pipeline of the matrix's shards."""
    p = ms.add_parser(
        "ci",
        help="emit a CI workflow/pipeline that runs the matrix in shards",
        description="Write a GitHub Actions workflow and/or a GitLab CI pipeline: shard jobs in a debian:12 "
        "container (with /dev/kvm when the runner has it) plus a merge job whose exit code carries the gates.",
    )
    p.add_argument("file", metavar="FILE",
                   help="matrix spec in this git repository (the CI files name it relative to the repository root), "
                   "or the name of an example in lab/matrix/examples")  # fmt: skip
    p.add_argument("--github", metavar="FILE", help="GitHub Actions workflow to write ('-' for stdout)")
    p.add_argument("--gitlab", metavar="FILE", help="GitLab CI pipeline to write ('-' for stdout)")
    p.add_argument("--gitlab-tag", metavar="TAG",
                   help="runner tag for the GitLab shard jobs (e.g. one with /dev/kvm; not empty)")  # fmt: skip
    p.add_argument("--shards", type=int, default=4, metavar="N", help="number of shards (default 4)")
    p.set_defaults(func=cmd_ci)


def _lava_parsers(ms) -> None:
    """matrix lava (the jobs) and matrix lava-import (their records)."""
    p = ms.add_parser(
        "lava",
        help="write the matrix as LAVA jobs (one a run) with a numalab host's device dictionary",
        description="Write one LAVA job a run of the matrix (LAVA's qemu device type: the run's kernel and initramfs "
        "deployed to tmpfs, numalab's machine in the job context's extra_options, a monitor on the guest's stage "
        "marks), in the order and on the device slots A/B timing needs, with the device dictionary of a numalab "
        "host, run-lava.sh (lava-run on this host) and a README. docs/lava.md.",
    )
    p.add_argument("file", metavar="FILE", help="matrix spec (or the name of an example in lab/matrix/examples)")
    out_option(p, "DIR", "the job set's directory (new or empty)", required=True)
    p.add_argument("--accel", choices=("tcg", "kvm"), default="tcg", help="the LAVA device's accelerator (tcg)")
    p.add_argument("--devices", type=int, default=1, metavar="N",
                   help="device slots to spread the pairs over (tags numalab-slot-1..N; default 1)")  # fmt: skip
    p.add_argument("--url-base", default="", metavar="URL",
                   help="where the worker downloads DIR's files (default: file:// paths on this host)")  # fmt: skip
    p.add_argument("--device-types", type=Path, metavar="DIR",
                   help="LAVA's device-type templates, to render each job's device.yaml for lava-run "
                   "(default: a LAVA server's, if installed)")  # fmt: skip
    p.add_argument("--results", choices=("share", "console"), default="share",
                   help="how the guest's results come back: share (a virtio-9p directory on the worker, default) or "
                   "console (base64 in the job's log, for a worker elsewhere)")  # fmt: skip
    p.add_argument("--shard", metavar="i/N", help="only shard i of N's runs (deterministic, whole A/B cells)")
    p.set_defaults(func=cmd_lava)

    p = ms.add_parser(
        "lava-import",
        help="make run records of LAVA jobs' logs and results",
        description="Make a numalab run record of each job in DIR (made by numalab matrix lava, run by LAVA: each "
        "job's log in its output.yaml), checked as every record is, into OUT as numalab matrix run writes its "
        "output (runs/<run id>/, summary.json, junit.xml, index.html). Again: the jobs done since (resume); "
        "numalab matrix merge joins the outputs of a set's shards. Exit 1 if a run is not ok or a job not done.",
    )
    p.add_argument("dir", type=Path, metavar="DIR", help="the job set (or one job's directory)")
    out_option(p, "OUT", "the matrix output directory (new, or this set's: resume)", required=True)
    p.set_defaults(func=cmd_lava_import)
