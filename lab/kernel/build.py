"""``numalab kernel build``: source + patches + fragments -> a cached bzImage.

The cache key hashes the source identity, the patch contents, the fragment
texts and the compiler version; an identical request is answered from
``<cache>/kernels/builds/<key>/`` without touching any tree. A miss resets the
source's private tree, applies the patches, merges the fragments with the
kernel's ``merge_config.sh`` (on allnoconfig) and ``olddefconfig``, checks
every requested symbol, then builds out of tree (one warm O= directory per
source and fragment set) with ccache and ``-j`` = host CPUs.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError
from lab.kernel import kconfig_deps
from lab.kernel.cache import builds_dir, link_name, read_meta, validate_name
from lab.kernel.fragments import (
    Fragment,
    check_config,
    kconfig_symbols,
    kernel_version,
    load_fragments,
    parse_config,
)
from lab.kernel.identity import file_build_id, image_identity
from lab.kernel.patches import Patch, apply_patches, load_patches
from lab.kernel.sched_ext import SCHEDULERS_DIR, build_examples, check_tools, key_part, wants_schedulers
from lab.kernel.source import Source, prepare_tree, reset_tree, resolve_source, source_root
from lab.paths import cache_dir, json_text, write_text_atomic

# Bump when the recipe below changes what a key's artefacts are. 3: builds before it could carry a stale
# payload (ccache served piggy.o across builds whose piggy.S was byte-identical) and recorded no build-id.
BUILD_VERSION = 3
ARTEFACTS = {"bzImage": "arch/x86/boot/bzImage", "config": ".config", "System.map": "System.map"}
_OBJECT = re.compile(r"^\s+(CC|AS)\s+\S+\.o$")
_PROGRESS_S = float(os.environ.get("NUMALAB_KERNEL_PROGRESS_S", "15"))

Progress = Callable[[str], None]


@dataclass
class BuildRequest:
    source: Source
    patches: list[Patch] = field(default_factory=list)
    fragments: list[Fragment] = field(default_factory=list)
    name: str | None = None
    jobs: int = 0
    rebuild: bool = False  # build even when the cache has the key (the new build replaces it)

    def default_name(self) -> str:
        if not self.patches:
            return "baseline"
        stem = Path(self.patches[0].name).name
        return re.sub(r"[^A-Za-z0-9._+-]", "-", stem.removesuffix(".patch").removesuffix(".diff")) or "patched"


@dataclass(frozen=True)
class BuildResult:
    name: str
    key: str
    path: Path
    cached: bool
    seconds: float
    meta: dict


def compiler_identity() -> str:
    try:
        out = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout
    except OSError:
        raise LabError("kernel build: gcc not found (make setup installs it)") from None
    return out.splitlines()[0].strip() if out else "gcc ?"


def fragments_key(fragments: list[Fragment]) -> str:
    h = hashlib.sha256()
    for f in fragments:
        h.update(hashlib.sha256(f.text.encode()).digest())
    return h.hexdigest()[:16]


def cache_key(req: BuildRequest) -> str:
    doc = (
        {
            "v": BUILD_VERSION,
            "target": "x86_64 bzImage",
            "source": req.source.identity,
            "patches": [[p.kind, p.strip, p.sha256()] for p in req.patches],
            "fragments": [hashlib.sha256(f.text.encode()).hexdigest() for f in req.fragments],
            "compiler": compiler_identity(),
        }
        | ({"recipe": "stale-test"} if _stale_recipe() else {})
        | key_part(req.fragments)
    )
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]


@contextmanager
def _locked(path: Path, progress: Progress | None = None) -> Iterator[None]:
    """``path`` locked (flock) while the block runs. When another numalab holds it, ``progress`` says so
    first, naming the holder: the holder writes its pid and command into the lock file."""
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress is not None:
                f.seek(0)
                holder = " ".join(f.read(300).split())
                who = f" (held by {holder})" if holder else ""
                progress(f"waiting for the source tree's build lock {path}{who}")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.truncate(0)
            f.write(f"pid {os.getpid()}: numalab {' '.join(sys.argv[1:])[:200]}\n")
            f.flush()
            yield
        finally:
            f.truncate(0)
            f.flush()
            fcntl.flock(f, fcntl.LOCK_UN)


def _fmt_s(s: float) -> str:
    return f"{int(s // 60)}m{int(s % 60):02d}s" if s >= 60 else f"{s:.1f}s"


def _cached(key: str) -> dict | None:
    """A finished build's meta.json; None for none, or for one that records no identity (it is redone)."""
    meta = read_meta(builds_dir() / key)
    if (builds_dir() / key / "bzImage").exists() and meta.get("build_id") and meta.get("bzimage_sha256"):
        return meta
    return None


def _run_logged(cmd: list[str], cwd: Path, log, env: dict | None = None) -> int:
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    return subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode


def _first_error(lines: list[str]) -> str:
    for pat in (r": (fatal )?error: ", r"undefined reference", r"(?i)\berror\b", r"\*\*\* "):
        for ln in lines:
            if re.search(pat, ln):
                return ln.strip()
    return lines[-1].strip() if lines else "no output"


def _configure(tree: Path, out: Path, fragments: list[Fragment], log) -> list[str]:
    """merge_config.sh + olddefconfig, then the check of every requested symbol: raises on an unmet one or an
    essential one the tree does not have; returns one note per symbol of numalab's fragments that does not
    exist in this tree (also written to the log), for the build's output and meta.json."""
    frag_dir = out.parent / f"{out.name}.fragments"
    frag_dir.mkdir(exist_ok=True)
    paths = []
    for i, f in enumerate(fragments):
        p = frag_dir / f"{i:02d}-{f.name}"
        p.write_text(f.text)
        paths.append(str(p))
    merge = ["bash", str(tree / "scripts/kconfig/merge_config.sh"), "-n", "-O", str(out), *paths]
    if _run_logged(merge, tree, log) != 0 or _run_logged(["make", f"O={out}", "olddefconfig"], tree, log) != 0:
        raise LabError(f"kernel config: merge_config.sh/olddefconfig failed (log: {log.name})")
    config = (out / ".config").read_text()
    notes = check_config(fragments, config, lambda: kconfig_symbols(tree), kernel_version(tree),
                         lambda sym: kconfig_deps.explain(tree, sym, parse_config(config)))  # fmt: skip
    for note in notes:
        log.write(f"numalab: note: {note}\n")
    log.flush()
    return notes


# The compiler numalab gives the kernel's make: ccache, except for a source that pulls in another file with
# .incbin. ccache in depend mode hashes a source and the headers the compiler listed, not what the assembler
# includes, so arch/x86/boot/compressed/piggy.S (byte-identical whenever the compressed kernel keeps its size)
# would be answered with the previous build's piggy.o and its old kernel inside. ccache's preprocessor mode
# refuses such sources itself, but costs a preprocessor pass per object; this check costs a grep.
CC_WRAPPER = """#!/bin/sh
# numalab's kernel compiler (lab/kernel/build.py): ccache, but never for a source with .incbin
for a; do
  case $a in
    *.S|*.s|*.c) [ -f "$a" ] && grep -qF .incbin "$a" && exec gcc "$@" ;;
  esac
done
exec ccache gcc "$@"
"""
STALE_TEST_ENV = "NUMALAB_TEST_STALE_CCACHE"  # tests only: the recipe before BUILD_VERSION 3, unchecked


def _stale_recipe() -> bool:
    return os.environ.get(STALE_TEST_ENV) == "1"


def compiler_command() -> str:
    """The ``CC=`` of a kernel build: the wrapper above, written once into the cache."""
    if _stale_recipe():
        return "ccache gcc"
    path = cache_dir("kernels") / "numalab-cc"
    if not path.is_file() or path.read_text() != CC_WRAPPER:
        write_text_atomic(path, CC_WRAPPER, 0o755)  # (a concurrent build may exec it at once)
    return str(path)


def compile_env() -> dict[str, str]:
    """The environment of a kernel build's make: ccache's settings and kbuild's fixed names."""
    return {**os.environ, "CCACHE_DIR": str(cache_dir("ccache")), "CCACHE_DEPEND": "1", "LC_ALL": "C",
           # Paths under the sources' root hashed relative to the build directory: a second source with the same
           # files (a git tree made from the tarball) is answered from the first one's objects.
           "CCACHE_BASEDIR": str(cache_dir("kernels", "src")),
           # ... and with -g (the sched-ext fragment's debug information, for BTF) ccache would hash the build
           # directory too, so a second source's build missed every object; the paths it leaves in the DWARF
           # (DW_AT_comp_dir) are then the first build's, which nothing numalab reads (BTF has none).
           "CCACHE_NOHASHDIR": "1",
           "KBUILD_BUILD_USER": "numalab", "KBUILD_BUILD_HOST": "numalab",
           # uname -v's "#N" would count numalab's builds in its private directory: always #1
           "KBUILD_BUILD_VERSION": os.environ.get("KBUILD_BUILD_VERSION", "1")}  # fmt: skip


def _compile(
    tree: Path, out: Path, jobs: int, log, progress: Progress, expected: int | None
) -> tuple[int, int, list[str]]:
    """make bzImage, with a progress line every few seconds: (exit code, objects compiled, last lines)."""
    # ccache's depend mode: a miss compiles once, without ccache's own preprocessor
    # pass to hash the result; the kernel's -Wp,-MMD output lists the headers for
    # later direct hits. Measured on mm/ + kernel/sched/: cold 32.6 s by default,
    # 26.1 s in depend mode, 25.3 s without ccache.
    env = compile_env()
    cmd = ["make", f"O={out}", f"-j{jobs}", f"CC={compiler_command()}", "LOCALVERSION=", "bzImage"]
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    t0 = time.monotonic()
    count = [0]
    tail: list[str] = []
    done = threading.Event()

    def ticker() -> None:
        while not done.wait(_PROGRESS_S):
            of = f"/~{expected}" if expected and count[0] <= expected else ""
            progress(f"building… {count[0]}{of} objects, {_fmt_s(time.monotonic() - t0)} elapsed")

    proc = subprocess.Popen(cmd, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            errors="replace", start_new_session=True)  # fmt: skip
    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            if _OBJECT.match(line):
                count[0] += 1
            tail.append(line.rstrip("\n"))
            del tail[:-400]
        rc = proc.wait()
    except BaseException:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        raise
    finally:
        done.set()
        log.flush()
    return rc, count[0], tail


def _stats(out: Path) -> dict:
    try:
        return json.loads((out.parent / f"{out.name}.stats.json").read_text())
    except (OSError, ValueError):
        return {}


def _check_payload(out: Path, log_path: Path) -> dict:
    """The build's identity: the build-id of ``vmlinux`` (what the sources made) and the bzImage's hash,
    after checking that the bzImage carries that very vmlinux (a stale payload is a failed build)."""
    want = file_build_id(out / "vmlinux")
    got = image_identity(out / ARTEFACTS["bzImage"])
    if want is None:
        raise LabError(f"kernel build: {out / 'vmlinux'} has no GNU build-id note (log: {log_path})")
    if got["build_id"] != want and not _stale_recipe():
        raise LabError(
            f"kernel build: the bzImage carries build-id {got['build_id'] or '(unreadable payload)'}, but vmlinux "
            f"is {want}: a stale compressed payload; numalab kernel prune --sources resets the tree (log: {log_path})"
        )
    piggy = out / "arch/x86/boot/compressed/piggy.S"  # the payload's wrapper: the same bytes for a same-size payload
    return {
        "build_id": want,
        "bzimage_sha256": got["sha256"],
        "payload_build_id": got["build_id"],
        "piggy_sha256": hashlib.sha256(piggy.read_bytes()).hexdigest() if piggy.is_file() else None,
        "recipe": "stale-test" if _stale_recipe() else "checked",
    }


def _build_locked(req: BuildRequest, key: str, name: str, progress: Progress) -> BuildResult:
    t0 = time.monotonic()
    tree = prepare_tree(req.source, progress)
    reset_tree(tree)
    try:
        apply_patches(tree, req.patches)
        return _build_patched(req, key, name, progress, tree, t0)
    finally:  # the private tree pristine for the next request, a failed build's too (its log keeps the error)
        reset_tree(tree)


def _build_patched(req: BuildRequest, key: str, name: str, progress: Progress, tree: Path, t0: float) -> BuildResult:
    stale = "-stale-test" if _stale_recipe() else ""  # (its own warm directory: CC= differs)
    out = source_root(req.source) / f"build-{fragments_key(req.fragments)}{stale}"
    cold = not (out / "vmlinux").exists()
    out.mkdir(exist_ok=True)
    log_path = cache_dir("kernels", "logs") / f"{key}.log"
    with open(log_path, "w") as log:
        config_notes = _configure(tree, out, req.fragments, log)
        for note in config_notes:
            progress(f"note: {note}")
        jobs = req.jobs or len(os.sched_getaffinity(0))
        stats = _stats(out)
        progress(f"building {name} ({'cold' if cold else 'incremental'}, -j{jobs}, log {log_path})")
        rc, objects, tail = _compile(tree, out, jobs, log, progress, stats.get("objects") if cold else None)
    if rc != 0:
        print(f"--- last lines of {log_path} ---")
        print("\n".join(tail[-25:]))
        raise LabError(f"kernel build failed: {_first_error(tail)} (log: {log_path})")
    if cold:
        (out.parent / f"{out.name}.stats.json").write_text(json_text({"objects": objects}) + "\n")
    release = subprocess.run(["make", "-s", f"O={out}", "LOCALVERSION=", "kernelrelease"], cwd=tree,
                             capture_output=True, text=True).stdout.strip()  # fmt: skip
    identity = _check_payload(out, log_path)
    kernel_s = round(time.monotonic() - t0, 1)
    schedulers, sched_meta = {}, None
    if wants_schedulers(req.fragments):
        with open(log_path, "a") as log:
            schedulers, steps = build_examples(tree, out, jobs, log, progress)
        sched_meta = {"built": sorted(schedulers), "steps": steps,
                      "seconds": round(sum(s["seconds"] for s in steps), 1)}  # fmt: skip
        progress(f"sched_ext examples built in {_fmt_s(sched_meta['seconds'])}: "
                 + ", ".join(f"{s['step']} {_fmt_s(s['seconds'])}" for s in steps))  # fmt: skip
    seconds = round(time.monotonic() - t0, 1)
    meta = {
        "key": key,
        "release": release,
        "source": req.source.to_dict(),
        "patches": [p.to_dict() for p in req.patches],
        "fragments": [str(f.path) for f in req.fragments],
        "compiler": compiler_identity(),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_s": seconds,
        "kernel_s": kernel_s,  # up to the checked bzImage; build_s adds the sched_ext examples (schedulers)
        "objects_compiled": objects,
        "incremental": not cold,
        "config_notes": config_notes,  # fragment symbols this kernel does not have (lab.kernel.fragments)
        **identity,
    } | ({"schedulers": sched_meta} if sched_meta else {})
    stage = builds_dir() / f".{key}.tmp-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    for dest, rel in ARTEFACTS.items():
        shutil.copy2(out / rel, stage / dest)
    if schedulers:
        (stage / SCHEDULERS_DIR).mkdir()
        for sname, binary in schedulers.items():
            shutil.copy2(binary, stage / SCHEDULERS_DIR / sname)
    shutil.copy2(log_path, stage / "build.log")
    (stage / "release").write_text(release + "\n")
    (stage / "meta.json").write_text(json_text(meta, indent=2) + "\n")
    final = builds_dir() / key
    shutil.rmtree(final, ignore_errors=True)
    os.rename(stage, final)
    return BuildResult(name, key, final, False, seconds, meta)


def check_patches(req: BuildRequest, progress: Progress) -> None:
    """That ``req``'s patches apply, in order, to its source's private tree, as its build would apply them (then
    the tree is reset): a patch that does not apply is the build's one-line error naming it, before any build
    starts (numalab ab checks its patched side before the baseline's build). Nothing to do without patches, or
    for a build the cache has."""
    if not req.patches or (not req.rebuild and _cached(cache_key(req)) is not None):
        return
    with _locked(source_root(req.source) / ".lock", progress):
        tree = prepare_tree(req.source, progress)
        progress(f"checking that {len(req.patches)} patch(es) apply to {req.source.spec}")
        reset_tree(tree)
        apply_patches(tree, req.patches)  # (on a failure: the tree reset, a LabError naming the patch and hunk)
        reset_tree(tree)


def build_kernel(req: BuildRequest, progress: Progress) -> BuildResult:
    t0 = time.monotonic()
    name = validate_name(req.name or req.default_name())
    key = cache_key(req)
    meta = None if req.rebuild else _cached(key)
    if meta is None:
        if wants_schedulers(req.fragments):
            check_tools()
        with _locked(source_root(req.source) / ".lock", progress):
            meta = None if req.rebuild else _cached(key)  # another numalab may have built it meanwhile
            if meta is None:
                result = _build_locked(req, key, name, progress)
                link_name(name, key)
                return result
    link_name(name, key)
    return BuildResult(name, key, builds_dir() / key, True, round(time.monotonic() - t0, 2), meta)


@dataclass(frozen=True)
class BuildInputs:
    """What a kernel is built from, as the user names it (files and words, not yet read): the source (None: the
    default), patches and a quilt series, config fragments and whether numalab's default fragments come first.
    :func:`make_request` reads and checks them; ``numalab kernel build``, a tree A/B and a matrix's ``build:``
    each fill one."""

    source: str | None = None
    patches: list[str] | None = None
    series: str | None = None
    fragments: list[str] | None = None
    default_fragments: bool = True


def make_request(inputs: BuildInputs, name: str | None = None, jobs: int = 0, rebuild: bool = False,
                 progress: Progress | None = None) -> BuildRequest:  # fmt: skip
    """``inputs`` read and checked (one-line errors) into a request: built as ``name`` (None: the default) with
    ``make -j jobs`` (0: the host's CPUs), ``rebuild`` even when cached."""
    # Cheap checks first, so bad input fails before anything is hashed or extracted.
    loaded_patches = load_patches(inputs.patches, inputs.series)
    loaded_fragments = load_fragments(inputs.fragments, inputs.default_fragments)
    if not loaded_fragments:
        raise LabError("--no-default-fragments: give at least one --fragment")
    if name is not None:
        validate_name(name)
    if jobs < 0 or jobs > 4096:  # (0: the host's CPUs, the default)
        raise LabError(f"--make-jobs: must be 1..4096, or 0 for the host's CPUs, got {jobs}")
    found = resolve_source(inputs.source) if progress is None else resolve_source(inputs.source, progress)
    return BuildRequest(found, loaded_patches, loaded_fragments, name, jobs, rebuild)


def recipe_request(name: str, recipe: dict, base_dir: Path) -> BuildRequest:
    """A matrix spec's ``build: {source, patches, series, fragments}`` as a build request: every file it
    names read and checked (``numalab matrix check`` calls it, so a missing patch is found before any run)."""

    def rel(p: str) -> str:
        cand = base_dir / p
        return str(cand) if not Path(p).is_absolute() and cand.exists() else p

    unknown = set(recipe) - {"source", "patches", "series", "fragments"}
    if unknown:
        raise LabError(f"kernels: {name}: build.{sorted(unknown)[0]}: unknown field")
    for key in ("patches", "fragments"):
        if not isinstance(recipe.get(key) or [], list):
            raise LabError(f"kernels: {name}: build.{key}: expected a list of files")
    src = recipe.get("source")
    try:
        inputs = BuildInputs(
            rel(str(src)) if src and "@" not in str(src) else (None if src is None else str(src)),
            [rel(str(p)) for p in recipe.get("patches") or []],
            rel(str(recipe["series"])) if recipe.get("series") else None,
            [rel(str(f)) for f in recipe.get("fragments") or []],
        )
        return make_request(inputs, name)
    except LabError as err:
        raise LabError(f"kernels: {name}: build: {err}") from None


def build_from_recipe(name: str, recipe: dict, base_dir: Path, progress: Progress) -> str:
    """A matrix spec's ``build: {source, patches, series, fragments}``, built (or found in the cache);
    returns the name to boot."""
    req = recipe_request(name, recipe, base_dir)
    build_kernel(req, progress)
    return name
