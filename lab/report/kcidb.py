"""Run records and their A/B verdicts in KCIDB's I/O format (KernelCI's results database, schema v5.3), for
``numalab report --kcidb FILE``. Nothing is sent: the file is for a submitter (``kcidb-submit``).

What the file holds, all with origin ``numalab`` and ids ``numalab:<hash>`` of what the records say (so the same
records give the same ids on every rerun):

* a **checkout** per source: Debian's package for the stock kernel (its release), else one per kernel binary (the
  records do not name a source tree or commit; a numalab build's ``meta.json``, where this machine's kernel cache
  still has it beside the image, fills in its source, patches and fragments);
* a **build** per kernel binary the runs asked for (x86_64), with the build-id its guests showed;
* a **test** per run (``numalab.run``: its status) and per run and metric (``numalab.run.<metric>``: DONE with
  the figure as KCIDB's ``number``);
* a **test** per A/B verdict (``numalab.ab.<metric>``, on the new side's build): better and "same within" PASS,
  worse FAIL, changed DONE, undecided DONE (never PASS), not judged SKIP; a verdict whose row carries a caveat
  (remote memory costs nothing in that VM, runs still in balancing's start-up, the modelled machine named: only
  K1 validates it so far) or whose sides ran one binary with the same settings is DONE: not yet about the
  kernel. ``misc`` has the figures behind it (means, p-value, interval, runs).

The schema is kcidb-io's (its ``kcidb_io.schema.V5_3``); numalab does not import it (tests/unit/test_kcidb.py
validates the output with it).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

from lab.analysis.compare import PCT_SHOWN_MAX, Comparison, Row
from lab.analysis.metrics import metric_values, metrics_of
from lab.analysis.record import RunRecord
from lab.kernel.cache import read_meta
from lab.report.ab_table import to_dict
from lab.untrusted import finite_copy

ORIGIN = "numalab"
VERSION = {"major": 5, "minor": 3}
ARCH = "x86_64"
# A run's status as a test status: the kernel's fault (FAIL), the harness's (MISS), or the run's own (ERROR).
RUN_STATUS = {"ok": "PASS", "panic": "FAIL", "boot-failed": "FAIL", "kernel-mismatch": "MISS",
              "placement-broken": "MISS"}  # fmt: skip
VERDICT_STATUS = {"better": "PASS", "same": "PASS", "worse": "FAIL", "changed": "DONE", "undecided": "DONE",
                  "unknown": "SKIP"}  # fmt: skip
_PATH_PART = re.compile(r"[^A-Za-z0-9_-]+")


def kcidb_id(*key: object) -> str:
    """``numalab:`` and a hash of ``key`` (what the records say about the object)."""
    return f"{ORIGIN}:" + hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def kcidb_path(*parts: str) -> str:
    """A KCIDB test path: dot-separated parts of letters, digits, '_' and '-' (others become '_')."""
    return ".".join(_PATH_PART.sub("_", s).strip("_") or "_" for p in parts for s in p.split("."))


def _line(text: str) -> str:
    """A comment as KCIDB takes it: no NUL (a record's reason or name is a user's text)."""
    return text.replace("\0", "")


def _kernel(r: RunRecord) -> dict:
    k = r.manifest.get("kernel")
    return k if isinstance(k, dict) else {}


def _text(d: dict, key: str) -> str:
    v = d.get(key)
    return v if isinstance(v, str) else ""


def _build_key(r: RunRecord) -> tuple:
    """The binary a run asked for: its name, the image's hash and the build-id it should show."""
    k = _kernel(r)
    return ("build", r.kernel_name, _text(k, "sha256"), _text(k, "expected_build_id"))


def _checkout_key(r: RunRecord) -> tuple:
    k = _kernel(r)
    if r.kernel_name == "stock":  # Debian's package, named by its release
        return ("checkout", "stock", _text(k, "release"))
    return ("checkout", *_build_key(r)[1:])  # the records name no source: the source of this binary


def _build_meta(r: RunRecord) -> dict:
    """A numalab build's meta.json beside the run's image, if this machine still has it and it is that image's."""
    image = _text(_kernel(r), "image")
    meta = read_meta(Path(image).parent) if image else {}
    return meta if meta.get("bzimage_sha256") == _text(_kernel(r), "sha256") else {}


def _checkout(r: RunRecord) -> dict:
    k, meta = _kernel(r), _build_meta(r)
    out: dict = {"id": kcidb_id(*_checkout_key(r)), "origin": ORIGIN, "valid": True}
    if r.kernel_name == "stock":
        out["comment"] = _line(f"Debian's kernel {_text(k, 'release')} (numalab's stock kernel)")
    elif meta:
        source = meta.get("source") if isinstance(meta.get("source"), dict) else {}
        patches = [p for p in meta.get("patches") or [] if isinstance(p, dict)]
        out["comment"] = _line(f"{source.get('spec', '?')} with {len(patches)} patch(es) (numalab kernel build)")
        kind, _, ident = str(source.get("identity", "")).partition(":")
        if kind == "git" and re.fullmatch(r"[0-9a-f]{40}", ident):
            out["git_commit_hash"] = ident
        if re.fullmatch(r"(https|git)://\S+", str(source.get("location", ""))):
            out["git_repository_url"] = source["location"]
        sums = [p.get("sha256") for p in patches]
        if all(isinstance(x, str) for x in sums):  # (KCIDB's: sha256 over each patch's sha256, a line each)
            out["patchset_hash"] = hashlib.sha256("".join(f"{x}\n" for x in sums).encode()).hexdigest() if sums else ""
        out["misc"] = {"source": source, "patches": patches}
    else:
        out["comment"] = _line(f"the source of kernel {r.kernel_name} (its records name no source tree or commit)")
    return out


def _build(r: RunRecord, runs: list[RunRecord]) -> dict:
    k, meta = _kernel(r), _build_meta(r)
    booted = sorted({b for x in runs if (b := _text(_kernel(x), "build_id"))})
    identities = sorted({_text(_kernel(x), "identity") or "unrecorded" for x in runs})
    out: dict = {
        "id": kcidb_id(*_build_key(r)),
        "checkout_id": kcidb_id(*_checkout_key(r)),
        "origin": ORIGIN,
        "architecture": ARCH,
        "status": "PASS",  # (a record names an image that was built: it boots or not in the runs' tests)
        "comment": _line(f"kernel {r.kernel_name} {_text(k, 'release')}".rstrip()),
        "misc": {
            "kernel": r.kernel_name,
            "release": _text(k, "release"),
            "image_sha256": _text(k, "sha256"),
            "expected_build_id": _text(k, "expected_build_id"),
            "booted_build_ids": booted,
            "identity": identities,
            "runs": len(runs),
        },
    }
    if r.kernel_name == "stock":
        out["config_name"] = "debian"
    if meta:
        fragments = [Path(str(f)).name for f in meta.get("fragments") or []]
        out["config_name"] = "+".join(["allnoconfig", *fragments])  # (lab.kernel.build merges them on allnoconfig)
        out["misc"]["fragments"] = fragments
        if isinstance(meta.get("compiler"), str):
            out["compiler"] = meta["compiler"]
        if isinstance(meta.get("built_at"), str):
            out["start_time"] = meta["built_at"]
        if isinstance(meta.get("build_s"), (int, float)):
            out["duration"] = meta["build_s"]
    return out


def _environment(r: RunRecord) -> dict:
    return {
        "comment": _line(f"{r.topology.name} / {r.workload_name} under {r.accelerator.upper()}"),
        "misc": {
            "topology": r.topology.name,
            "workload": r.workload_name,
            "accelerator": r.accelerator,
            "numa_balancing": r.numa_balancing,
            "scheduler": r.scheduler.label,
        },
    }


def _number(value: float, unit: str) -> dict:
    """KCIDB's number: the value in the unit numalab has (its prefix included: GB/s, ms); seconds scale."""
    return {"value": value} | ({"unit": unit} if unit else {}) | ({"prefix": "metric"} if unit == "s" else {})


def _run_tests(r: RunRecord) -> list[dict]:
    """The run's test (its status) and one per metric it has (DONE, with the figure, where the run is ok)."""
    build_id = kcidb_id(*_build_key(r))
    status = RUN_STATUS.get(r.status, "ERROR")
    env = _environment(r)
    run = {
        "id": kcidb_id("run", r.run_id),
        "build_id": build_id,
        "origin": ORIGIN,
        "path": "numalab.run",
        "status": status,
        "comment": _line(f"run {r.run_id}: {r.status}" + (f" ({r.reason})" if r.reason else "")),
        "environment": env,
        "misc": {"run_id": r.run_id, "status": r.status, "label": r.label},
    }
    duration = (r.manifest.get("timings") or {}).get("total_s")
    if isinstance(duration, (int, float)) and math.isfinite(duration):
        run["duration"] = duration
    units = {m.key: m.unit for m in metrics_of([r.manifest])}
    return [run] + [
        {
            "id": kcidb_id("run", r.run_id, key),
            "build_id": build_id,
            "origin": ORIGIN,
            "path": kcidb_path("numalab.run", key),
            "status": "DONE" if r.status == "ok" else status,
            "number": _number(value, units.get(key, "")),
            "environment": env,
            "misc": {"run_id": r.run_id, "metric": key, "run_status": r.status},
        }
        for key, value in metric_values(r.manifest).items()
    ]


def _verdict_status(row: Row, c: Comparison) -> str:
    word = row.verdict()
    if word in ("better", "worse", "same") and (row.caveat or c.same_kernel):
        return "DONE"  # about the VM (or noise), not the kernel: a measurement, not a pass or a fail
    return VERDICT_STATUS.get(word, "DONE")


def _ab_tests(c: Comparison, build_of: dict[str, str]) -> list[dict]:
    """A test per verdict of ``c``, on its new side's build; ``misc``: compare's JSON of its row, and the A/B."""
    data = to_dict(c)
    context = {k: data[k] for k in ("topology", "workload", "significance_rule", "warnings")} | {
        "baseline_label": c.base_label,
        "new_label": c.new_label,
        "baseline_runs": c.base_ids,
        "new_runs": c.new_ids,
        "baseline_builds": sorted({build_of[i] for i in c.base_ids}),
        "new_builds": sorted({build_of[i] for i in c.new_ids}),
    }
    out = []
    for row, figures in zip(c.rows, data["metrics"], strict=True):
        status = _verdict_status(row, c)
        test: dict = {
            "id": kcidb_id("ab", sorted(c.base_ids), sorted(c.new_ids), row.metric.key, c.significance, row.min_effect),
            "build_id": build_of[c.new_ids[0]],
            "origin": ORIGIN,
            "path": kcidb_path("numalab.ab", row.metric.key),
            "status": status,
            "comment": _line(
                f"{c.topology} / {c.workload}: {row.metric.key} {c.new_label} vs {c.base_label}: "
                f"{row.verdict_text()} ({row.diff_text()})"
            ),
            "misc": context | figures,
        }
        pct, diff = figures["pct_diff"], figures["abs_diff"]
        if status != "SKIP" and pct is not None and math.isfinite(pct) and abs(pct) <= PCT_SHOWN_MAX:
            test["number"] = _number(pct, "%")  # (+ is better; a neutral metric's: + is more)
        elif status != "SKIP" and math.isfinite(diff):
            test["number"] = _number(diff, row.metric.unit)  # (a 0 or tiny baseline: the change itself, as Δ shows)
        out.append(test)
    return out


def kcidb_data(runs: list[RunRecord], comparisons: list[Comparison]) -> dict:
    """The KCIDB I/O data of ``runs`` and the A/B ``comparisons`` made of them (a verdict's id: its runs on each
    side, its metric, its rule and its minimum effect)."""
    by_build: dict[str, list[RunRecord]] = {}
    for r in runs:
        by_build.setdefault(kcidb_id(*_build_key(r)), []).append(r)
    checkouts = {(c := _checkout(group[0]))["id"]: c for group in by_build.values()}
    data = {
        "version": VERSION,
        "checkouts": list(checkouts.values()),
        "builds": [_build(group[0], group) for group in by_build.values()],
        "tests": [t for r in runs for t in _run_tests(r)],
    }
    build_of = {r.run_id: kcidb_id(*_build_key(r)) for r in runs}
    data["tests"] += [t for c in comparisons for t in _ab_tests(c, build_of)]
    return finite_copy(data)[0]  # (NaN in misc, from an old record: null; a number's value is finite above)
