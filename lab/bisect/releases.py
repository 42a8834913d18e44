"""The bisect over a scheduler's releases on one kernel (``numalab bisect --scheduler-releases
'scx_layered@1.0.23..1.1.0 --run-example' --kernel v6.12-scx``): which release of an scx scheduler first stopped
running (or first ran) on a machine, each release built from crates.io (lab.host.scx_release, cached) and run in a
VM with the bisect's run settings.

A release is *good* when its runs' scheduler ran from the workload's start to its end (status ``ok``) and *bad*
when one of them was ejected (``scheduler-ejected``: the verifier refused it, it panicked at start, the watchdog
ejected it: lab.run.scheduler's readback). Every other outcome (the release does not build, the VM times out or
crashes) is a *skip*, stepped around as ``git bisect skip``. No statistics: whether a scheduler runs is a fact
of each run, not a distribution; ``--step-runs N`` makes each release N runs, bad when any of them is ejected and
good only when all ran.

The two ends are run first. Old good and new bad is a regression: the search names the first bad release. Old bad
and new good is a fix: it names the first release that runs (what a bisect over a kernel calls the first "new"
commit). Two ends that agree leave nothing to bisect, and say so. The versions between are the registry's
(``numalab scheduler versions``), oldest first, without yanked releases and pre-releases.

The state directory (``--out``) is like a kernel bisect's: ``bisect.json`` (kind ``scheduler-releases``; a resume
must ask for the same), ``runs/<version>-r<i>/``, ``steps/<version>.json``, ``log.jsonl`` and ``result.json``. A
killed bisect resumes: concluded steps are read back and a release's finished runs are kept.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from lab.analysis.record import load_manifest
from lab.bisect.engine import next_prefix, read_state
from lab.errors import LabError
from lab.host import scx_release
from lab.paths import json_text, write_json_atomic, write_text_atomic
from lab.record_files import MANIFEST
from lab.run.scheduler import STATUS as EJECTED

KIND = "scheduler-releases"
STATE_VERSION = 1
_RANGE = re.compile(r"^([A-Za-z0-9_]+)@([^.\s][^\s]*?)\.\.([^\s]+)$")


@dataclass(frozen=True)
class ReleaseRange:
    """``CRATE@OLD..NEW [ARGS...]``: the crate, its two ends (oldest first) and the scheduler's arguments."""

    crate: str
    old: str
    new: str
    args: tuple[str, ...] = ()

    def spec(self, version: str) -> str:
        """The ``--scheduler`` word of one release, with the range's arguments."""
        return shlex.join([f"{self.crate}@{version}", *self.args])


def parse_range(text: str, label: str = "--scheduler-releases") -> ReleaseRange:
    """``'scx_layered@1.0.23..1.1.0 --run-example'`` -> a ReleaseRange, or a one-line error naming ``label``."""
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise LabError(f"{label} {text}: {err}") from None
    m = _RANGE.match(words[0]) if words else None
    if not m:
        raise LabError(f"{label} {text!r}: expected CRATE@OLD..NEW [ARGS...] (e.g. 'scx_layered@1.0.23..1.1.0 "
                       "--run-example')")  # fmt: skip
    crate, old, new = m.groups()
    for v in (old, new):
        scx_release.parse(f"{crate}@{v}", label)  # (the crate's name and MAJOR.MINOR.PATCH: one line each)
    if scx_release.version_key(old) >= scx_release.version_key(new):
        raise LabError(f"{label} {words[0]}: the older release comes first (OLD..NEW), got {old} after {new}")
    return ReleaseRange(crate, old, new, tuple(words[1:]))


def versions_in(rng: ReleaseRange, known: list[scx_release.Release]) -> list[str]:
    """The releases from ``rng.old`` to ``rng.new``, both included, oldest first: the registry's, without the yanked
    ones and the pre-releases between the ends (an end is kept whatever it is). A one-line error when an end is
    not on crates.io (with the nearest versions)."""
    for v in (rng.old, rng.new):
        try:
            scx_release.pick(rng.crate, v, known)
        except LabError as err:
            raise LabError(f"--scheduler-releases {err}") from None
    lo, hi = scx_release.version_key(rng.old), scx_release.version_key(rng.new)
    between = [r.version for r in known if lo < scx_release.version_key(r.version) < hi
               and not r.yanked and "-" not in r.version]  # fmt: skip
    return [rng.old, *between, rng.new]


@dataclass(frozen=True)
class ReleaseConfig:
    """What is bisected: the range, its versions, the kernel and the runs a release gets; ``what``: the run
    settings (topology, workload...), recorded and compared on resume."""

    range: ReleaseRange
    versions: tuple[str, ...]
    kernel: str
    step_runs: int = 1
    what: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"crate": self.range.crate, "old": self.range.old, "new": self.range.new,
                "args": list(self.range.args), "versions": list(self.versions), "kernel": self.kernel,
                "step_runs": self.step_runs, "what": self.what}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict) -> ReleaseConfig:
        rng = ReleaseRange(d["crate"], d["old"], d["new"], tuple(d.get("args") or ()))
        return cls(rng, tuple(d["versions"]), d["kernel"], int(d.get("step_runs") or 1), d.get("what") or {})

    def check(self) -> None:
        if self.step_runs < 1:
            raise LabError(f"--step-runs: at least 1, got {self.step_runs}")
        if len(self.versions) < 2 or self.versions[0] != self.range.old or self.versions[-1] != self.range.new:
            raise LabError("--scheduler-releases: the versions must run from its OLD to its NEW")


class ReleaseRunner(Protocol):
    """What the bisect needs from the world: a release built, and runs of it."""

    def build(self, version: str) -> float:
        """Build (or find in the cache) the release; its seconds. A LabError when it does not build."""
        ...

    def run(self, version: str, out: Path) -> dict:
        """One run of the release on the bisect's kernel, its record made at ``out``; returns the manifest."""
        ...


@dataclass
class ReleaseStep:
    """A concluded release (steps/<version>.json): ``verdict`` good (ran throughout), bad (ejected) or skip."""

    version: str
    index: int
    verdict: str
    reason: str
    statuses: list[str]
    reasons: list[str]
    build_s: float
    wall_s: float
    finished_at: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ReleaseStep:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


def judge(runs: list[dict]) -> tuple[str, str]:
    """A release's verdict from its runs' manifests, and why: bad when a run's scheduler was ejected (its
    reason), good when every run's ran throughout, else skip (the first other status and its reason)."""
    for m in runs:
        if m.get("status") == EJECTED:
            return "bad", str(m.get("reason") or EJECTED)
    if runs and all(m.get("status") == "ok" for m in runs):
        return "good", "the scheduler ran throughout" + (f" ({len(runs)} runs)" if len(runs) > 1 else "")
    other = next((m for m in runs if m.get("status") != "ok"), None)
    if other is None:
        return "skip", "no run"
    return "skip", f"{other.get('status')}: {str(other.get('reason') or '')[:300]}".rstrip(": ")


def outcome(versions: tuple[str, ...], old_verdict: str, verdicts: dict[int, str]) -> dict:
    """The answer from the step verdicts (index -> good/bad/skip; the ends are implied): the first release that
    behaves as the new end does, or the releases it is among when only skipped ones are left."""
    n = len(versions) - 1
    # next_prefix's "good" is the old end's behaviour, its "bad" the new end's
    as_ends = {k: ("skip" if v == "skip" else "good" if v == old_verdict else "bad") for k, v in verdicts.items()}
    nxt, last_old, first_new = next_prefix(n, as_ends)
    sense = "regression" if old_verdict == "good" else "fix"
    out: dict = {"sense": sense}
    if nxt is not None:
        return out | {"status": "unfinished", "last_old": versions[last_old], "first_new": versions[first_new],
                      "next": versions[nxt]}  # fmt: skip
    if first_new == last_old + 1:
        key = "first_bad" if sense == "regression" else "first_good"
        return out | {"status": "found", key: versions[first_new], "last_old": versions[last_old],
                      "first_new": versions[first_new]}  # fmt: skip
    return out | {"status": "undetermined", "last_old": versions[last_old], "first_new": versions[first_new],
                  "candidates": list(versions[last_old + 1 : first_new + 1])}  # fmt: skip


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ReleaseBisect:
    """One bisect over releases in its state directory; :meth:`run` starts or resumes it."""

    def __init__(self, out: Path, cfg: ReleaseConfig, runner: ReleaseRunner, progress: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        cfg.check()
        self.out, self.cfg, self.runner, self.progress, self.clock = out, cfg, runner, progress, clock

    def _open_state(self) -> None:
        meta = self.out / "bisect.json"
        if meta.exists():
            state = read_state(meta)
            if state.get("kind") != KIND:
                raise LabError(f"--out {self.out}: holds a bisect over kernels, not over releases; give a new "
                               "directory")  # fmt: skip
            was, now = state.get("config") or {}, self.cfg.to_dict()
            diff = next((k for k in now if was.get(k) != now[k]), None)
            if diff is not None:
                raise LabError(f"--out {self.out}: holds a bisect with another {diff}; give a new directory or "
                               "the same options to resume it")  # fmt: skip
            self.progress(f"resuming the bisect in {self.out}")
        elif self.out.exists() and any(self.out.iterdir()):
            raise LabError(f"--out {self.out}: exists and is not a bisect state directory; give a new directory")
        (self.out / "steps").mkdir(parents=True, exist_ok=True)
        (self.out / "runs").mkdir(exist_ok=True)
        if not meta.exists():
            write_json_atomic(meta, {"version": STATE_VERSION, "kind": KIND, "config": self.cfg.to_dict(),
                                     "started_at": _now()})  # fmt: skip

    def steps(self) -> dict[str, ReleaseStep]:
        return load_release_steps(self.out)

    def runs_of(self, version: str) -> list[dict]:
        """The finished runs of a release, in order (their manifests)."""
        found = []
        for d in (self.out / "runs").glob(f"{version}-r*"):
            tail = d.name[len(version) + 2 :]
            if tail.isdigit() and (d / MANIFEST).is_file():
                found.append((int(tail), load_manifest(d / MANIFEST)))
        return [m for _, m in sorted(found, key=lambda t: t[0])]

    def step(self, index: int) -> ReleaseStep:
        """Build release ``index`` and run it until its verdict is known (a bad run ends it early)."""
        version = self.cfg.versions[index]
        done = self.steps().get(version)
        if done is not None:
            return done
        t0 = self.clock()
        spec = self.cfg.range.spec(version)
        try:
            build_s = self.runner.build(version)
        except LabError as err:
            self.progress(f"{version}: skip: does not build: {err}")
            spent = round(self.clock() - t0, 1)  # (a failed cargo build's minutes count as building)
            return self._save(ReleaseStep(version, index, "skip", f"does not build: {err}", [], [], spent, spent))
        runs = self.runs_of(version)
        while len(runs) < self.cfg.step_runs and not any(m.get("status") == EJECTED for m in runs):
            n = len(list((self.out / "runs").glob(f"{version}-r*")))
            out = self.out / "runs" / f"{version}-r{n + 1}"
            self.progress(f"run {out.name}: {spec} on {self.cfg.kernel}")
            try:
                self.runner.run(version, out)
            except LabError as err:
                self.progress(f"{version}: skip: {err}")
                return self._save(ReleaseStep(version, index, "skip", str(err), [m.get("status") for m in runs],
                                              [], round(build_s, 1), round(self.clock() - t0, 1)))  # fmt: skip
            runs = self.runs_of(version)
            if not (out / MANIFEST).is_file():
                break  # (a runner that left no record: judged on what there is)
        verdict, reason = judge(runs)
        self.progress(f"{version}: {verdict} ({reason})")
        statuses = [str(m.get("status")) for m in runs]
        reasons = [str(m.get("reason") or "") for m in runs]
        return self._save(ReleaseStep(version, index, verdict, reason, statuses, reasons, round(build_s, 1),
                                      round(self.clock() - t0, 1)))  # fmt: skip

    def _save(self, step: ReleaseStep) -> ReleaseStep:
        step.finished_at = _now()
        write_json_atomic(self.out / "steps" / f"{step.version}.json", step.to_dict())
        write_release_log(self.out, self.cfg, self.steps())
        return step

    def run(self) -> dict:
        """Start or resume; returns the result (also in result.json)."""
        self._open_state()
        versions, n = self.cfg.versions, len(self.cfg.versions) - 1
        old, new = self.step(0), self.step(n)
        if "skip" in (old.verdict, new.verdict):
            end = old if old.verdict == "skip" else new
            result = {"status": "ends-unusable", "reason": f"{end.version} (an end) gave no verdict: {end.reason}"}
        elif old.verdict == new.verdict:
            how = "ran throughout" if old.verdict == "good" else "was ejected"
            result = {"status": "nothing-to-bisect",
                      "reason": f"both ends behave alike: the scheduler {how} with {versions[0]} and with "
                      f"{versions[n]}"}  # fmt: skip
        else:
            while True:
                verdicts = {s.index: s.verdict for s in self.steps().values() if s.index not in (0, n)}
                result = outcome(versions, old.verdict, verdicts)
                if result["status"] != "unfinished":
                    break
                self.progress(f"bisecting: {result['last_old']} {old.verdict}, {result['first_new']} {new.verdict}: "
                              f"testing {result['next']}")  # fmt: skip
                self.step(versions.index(result["next"]))
        steps = self.steps()
        result |= {"crate": self.cfg.range.crate, "kernel": self.cfg.kernel,
                   "wall_s": round(sum(s.wall_s for s in steps.values()), 1),
                   "builds_s": round(sum(s.build_s for s in steps.values()), 1),
                   "runs": sum(len(s.statuses) for s in steps.values()), "tested": len(steps)}  # fmt: skip
        write_json_atomic(self.out / "result.json", result)
        write_release_log(self.out, self.cfg, steps, result)
        return result


def load_release_steps(out: Path) -> dict[str, ReleaseStep]:
    return {p.stem: ReleaseStep.from_dict(read_state(p)) for p in sorted((out / "steps").glob("*.json"))}


def is_release_state(out: Path) -> bool:
    """A state directory of a bisect over releases (its bisect.json's kind)."""
    try:
        return read_state(out / "bisect.json").get("kind") == KIND
    except LabError:
        return False


def read_release_config(out: Path) -> ReleaseConfig:
    raw = read_state(out / "bisect.json").get("config")
    try:
        return ReleaseConfig.from_dict(raw)  # type: ignore[arg-type]
    except (TypeError, KeyError, ValueError, AttributeError) as err:
        raise LabError(f"bisect state {out / 'bisect.json'}: config: {err}") from None


def write_release_log(out: Path, cfg: ReleaseConfig, steps: dict[str, ReleaseStep], result: dict | None = None) -> None:
    entries: list[dict] = [{"event": "start", "kind": KIND, **cfg.to_dict()}]
    for s in sorted(steps.values(), key=lambda s: (s.finished_at, s.index)):
        entries.append({"event": "step", "version": s.version, "verdict": s.verdict, "reason": s.reason,
                        "statuses": s.statuses, "build_s": s.build_s, "wall_s": s.wall_s})  # fmt: skip
    if result is not None:
        entries.append({"event": "result", **result})
    write_text_atomic(out / "log.jsonl", "".join(json_text(e) + "\n" for e in entries))


def release_log_text(entries: list[dict]) -> str:
    """The log as ``git bisect log`` shows one, with a release's version where git has a commit."""
    out: list[str] = []
    for e in entries:
        ev = e.get("event")
        if ev == "start":
            out.append(f"# numalab bisect over {e.get('crate')}'s releases {e.get('old')}..{e.get('new')} on kernel "
                       f"{e.get('kernel')}: {', '.join(e.get('versions') or [])}")  # fmt: skip
            out.append("numalab bisect start")
        elif ev == "step":
            out.append(f"# {e['verdict']}: {e['version']} ({', '.join(e.get('statuses') or []) or 'no run'}, "
                       f"{e.get('wall_s', 0):.0f}s): {e.get('reason', '')}")  # fmt: skip
            out.append(f"numalab bisect {e['verdict']} {e['version']}")
        elif ev == "result":
            out.append(release_result_text(e))
    return "\n".join(out)


def release_result_text(r: dict) -> str:
    status = r.get("status")
    if status == "found":
        if r.get("sense") == "regression":
            return f"# first bad release: {r['first_bad']} (the last good: {r['last_old']})"
        return f"# first release that runs: {r['first_good']} (the last ejected: {r['last_old']})"
    if status == "undetermined":
        return f"# only skipped releases left to test: the change is in one of {', '.join(r['candidates'])}"
    if status in ("nothing-to-bisect", "ends-unusable"):
        return f"# nothing to bisect: {r.get('reason', '')}"
    return f"# unfinished: {r.get('last_old')} as the old end, {r.get('first_new')} as the new"
