"""numalab kernel build: fragments, patches (all or nothing), cache keys, one-line errors, and the
known-answer test (a kernel whose task_numa_migrate() never moves a task shows no move/swap events).

The fast tests use tiny fake trees and a private cache. The ``kernel_build`` tests use the real cache
(``NUMALAB_CACHE`` or ~/.cache/numalab), so the source extraction, the warm O= build directory and ccache
survive between CI runs: cold, the trimmed baseline takes about 6 minutes on 2 cores; warm, seconds.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from common import REPO, assert_one_line_error, needs_setup_package, numalab

from lab.errors import LabError
from lab.kernel import build as kbuild
from lab.kernel.cache import find_built, link_name, validate_name
from lab.kernel.fragments import load_fragment, load_fragments, parse_values, unmet
from lab.kernel.patches import apply_patches, describe_failure, is_mbox, load_patches, read_series
from lab.kernel.source import BASE_REF, Source, reset_tree, resolve_source, source_root

PATCHES = REPO / "kernel-configs" / "patches"
KNOWN_ANSWER = PATCHES / "known-answer-no-numa-migrate.patch"
SCAN_DELAY_S = 1.0  # kernel.numa_balancing_scan_delay_ms's default: no NUMA decision before the first scan
HAVE_SOURCE = Path("/usr/src/linux-source-6.1.tar.xz").is_file()

# --- fragments ------------------------------------------------------------------


def test_fragment_lines_parse() -> None:
    vals = parse_values('CONFIG_A=y\n# CONFIG_B is not set\n# a comment\n\nCONFIG_C="x y"\nCONFIG_D=0x10\n', "f")
    assert vals == {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_C": '"x y"', "CONFIG_D": "0x10"}
    with pytest.raises(LabError, match=r"f:2: not a Kconfig line"):
        parse_values("CONFIG_A=y\nNUMA=y\n", "f")


def test_default_fragments_ask_for_what_the_lab_needs() -> None:
    frags = load_fragments()
    assert [f.name for f in frags] == ["base.config", "numa.config", "trace.config", "tiering.config"]
    asked = {k: v for f in frags for k, v in f.values.items()}
    for sym in ("NUMA", "NUMA_BALANCING", "NUMA_BALANCING_DEFAULT_ENABLED", "SCHED_MC", "SCHED_SMT",
                "TRANSPARENT_HUGEPAGE", "MIGRATION", "FTRACE", "TRACEPOINTS", "EVENT_TRACING", "DEBUG_FS",
                "SCHED_DEBUG", "VIRTIO_PCI", "NET_9P_VIRTIO", "9P_FS", "SERIAL_8250_CONSOLE", "ACPI_NUMA",
                "BLK_DEV_INITRD", "DEVTMPFS", "PERF_EVENTS", "PVH", "TMPFS", "ACPI_HMAT", "EFI_SOFT_RESERVE",
                "DEV_DAX_HMEM", "DEV_DAX_KMEM", "MEMORY_HOTPLUG"):  # fmt: skip
        assert asked.get(f"CONFIG_{sym}") == "y", sym
    assert asked["CONFIG_MODULES"] == "n"
    assert load_fragment("numa").name == "numa.config"
    # a default named again (--fragment tiering) is merged once: the same request, so the same build
    assert [f.name for f in load_fragments(["tiering", "numa.config"])] == [f.name for f in frags]
    assert [f.name for f in load_fragments(["tiering"], defaults=False)] == ["tiering.config"]


def test_unmet_symbols_are_listed_with_their_fragment(tmp_path) -> None:
    f = tmp_path / "x.config"
    f.write_text('CONFIG_A=y\nCONFIG_B=y\n# CONFIG_C is not set\nCONFIG_D="v"\n')
    frag = load_fragment(f)
    assert unmet([frag], 'CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_D="v"\n') == ["CONFIG_B=y (got n, from x.config)"]
    assert unmet([frag], "CONFIG_A=y\nCONFIG_C=y\n") == [
        "CONFIG_B=y (got unset, from x.config)",
        "CONFIG_C=n (got y, from x.config)",
        'CONFIG_D="v" (got unset, from x.config)',
    ]


# --- patches on a tiny fake tree ---------------------------------------------------


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tree, check=True,
                          capture_output=True, text=True).stdout  # fmt: skip


@pytest.fixture
def tree(tmp_path) -> Path:
    t = tmp_path / "tree"
    (t / "kernel").mkdir(parents=True)
    (t / "kernel" / "a.c").write_text("".join(f"line {i}\n" for i in range(1, 41)))
    (t / "b.c").write_text("one\ntwo\nthree\n")
    _git(t, "init", "-q")
    _git(t, "add", "-A")
    _git(t, "commit", "-qm", "base")
    _git(t, "update-ref", BASE_REF, "HEAD")
    return t


def _diff(path: str, old: str, new: str, at: int = 1) -> str:
    return f"--- a/{path}\n+++ b/{path}\n@@ -{at},1 +{at},1 @@\n-{old}\n+{new}\n"


def _write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_plain_and_mbox_patches_apply(tree, tmp_path) -> None:
    plain = _write(tmp_path, "p1.patch", "A paragraph explaining the change.\n\n" + _diff("b.c", "one", "ONE"))
    mbox = _write(tmp_path, "p2.patch", "From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001\n"
                  "From: T <t@t>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\nSubject: [PATCH] two\n\n---\n"
                  + "--- a/b.c\n+++ b/b.c\n@@ -1,3 +1,3 @@\n ONE\n-two\n+TWO\n three\n-- \n2.39\n")  # fmt: skip
    patches = load_patches([plain, mbox], None)
    assert [p.kind for p in patches] == ["diff", "mbox"]
    apply_patches(tree, patches)
    assert (tree / "b.c").read_text() == "ONE\nTWO\nthree\n"
    assert "two" in _git(tree, "log", "-1", "--format=%s")  # went through git am
    reset_tree(tree)
    assert (tree / "b.c").read_text() == "one\ntwo\nthree\n"


def test_failing_patch_names_patch_file_and_hunk_and_leaves_nothing_applied(tree, tmp_path) -> None:
    good = _write(tmp_path, "good.patch", _diff("b.c", "one", "ONE"))
    bad = _write(tmp_path, "bad.patch", _diff("b.c", "three", "THREE", 3)
                 + "--- a/kernel/a.c\n+++ b/kernel/a.c\n@@ -30,1 +30,1 @@\n-no such line\n+x\n")  # fmt: skip
    with pytest.raises(LabError) as err:
        apply_patches(tree, load_patches([good, bad], None))
    assert str(err.value) == f"patch {bad} does not apply: kernel/a.c: hunk #1 FAILED at line 30"
    assert (tree / "b.c").read_text() == "one\ntwo\nthree\n"  # neither the good patch nor bad.patch's first file
    assert _git(tree, "status", "--porcelain") == ""


def test_failing_mbox_is_diagnosed_with_its_hunk(tree, tmp_path) -> None:
    mbox = _write(tmp_path, "m.patch", "From: T <t@t>\nSubject: [PATCH] x\n\n---\n"
                  + _diff("kernel/a.c", "nope", "x", 12))  # fmt: skip
    with pytest.raises(LabError, match=r"^patch .*m.patch does not apply: kernel/a.c: hunk #1 FAILED at line 12$"):
        apply_patches(tree, load_patches([mbox], None))
    assert _git(tree, "status", "--porcelain") == ""
    assert not (tree / ".git" / "rebase-apply").exists()


def test_patch_failure_messages() -> None:
    missing = "can't find file to patch at input line 3\n|--- a/kernel/gone.c\n|+++ b/kernel/gone.c\nNo file to patch."
    assert describe_failure("p", missing) == (
        "patch p does not apply: kernel/gone.c: no such file in the source tree (wrong -p level?)"
    )
    assert "already applied" in describe_failure("p", "checking file x.c\nReversed (or previously applied) patch "
                                                 "detected!  Skipping patch.")  # fmt: skip
    assert describe_failure("p", "patch: **** Only garbage was found in the patch input.") == (
        "patch p: Only garbage was found in the patch input."
    )
    two = "checking file a.c\nHunk #2 FAILED at 7.\nHunk #3 FAILED at 9.\n2 out of 3 hunks FAILED"
    assert describe_failure("p", two) == (
        "patch p does not apply: a.c: hunk #2 FAILED at line 7 (and 1 more failed hunk(s))"
    )


def test_series_files(tmp_path) -> None:
    d = tmp_path / "q"
    d.mkdir()
    (d / "one.patch").write_text(_diff("b.c", "one", "ONE"))
    (d / "two.diff").write_text(_diff("b.c", "two", "TWO", 2))
    (d / "series").write_text("# quilt\none.patch\n\ntwo.diff -p1  # trailing comment\n")
    assert [p.name for p in read_series(str(d))] == ["one.patch", "two.diff"]
    (d / "series").write_text("one.patch\nmissing.patch\n")
    with pytest.raises(LabError, match=r"series:2: missing.patch: no such patch"):
        read_series(str(d))
    (d / "series").write_text("one.patch -R\n")
    with pytest.raises(LabError, match=r"unsupported option '-R'"):
        read_series(str(d))


def test_mbox_detection() -> None:
    assert is_mbox(b"From abc Mon Sep 17 00:00:00 2001\nFrom: x\n")
    assert is_mbox(b"From: A <a@b>\nSubject: [PATCH] y\n\nbody\n")
    assert not is_mbox(KNOWN_ANSWER.read_bytes())
    assert not is_mbox(b"--- a/x\n+++ b/x\n")


# --- cache keys and names -------------------------------------------------------------


def test_cache_key_covers_source_patches_fragments_not_names(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(kbuild, "compiler_identity", lambda: "gcc 12")
    src = Source("tarball", "t", "/t", "tar:aaaa")
    frags = load_fragments()
    p1 = _write(tmp_path, "one.patch", _diff("b.c", "one", "ONE"))
    (tmp_path / "copy").mkdir()
    p1_copy = _write(tmp_path / "copy", "renamed.patch", _diff("b.c", "one", "ONE"))
    p2 = _write(tmp_path, "two.patch", _diff("b.c", "one", "UNO"))

    def key(source=src, patches=(p1,), fragments=frags) -> str:
        return kbuild.cache_key(kbuild.BuildRequest(source, load_patches(list(patches), None), fragments))

    assert key() == key() == key(patches=(p1_copy,))
    assert len({key(), key(patches=(p2,)), key(patches=()), key(patches=(p1, p2)), key(patches=(p2, p1)),
                key(source=Source("tarball", "t", "/t", "tar:bbbb")), key(fragments=frags[:2])}) == 7  # fmt: skip


def test_compiler_version_is_in_the_key(monkeypatch) -> None:
    src = Source("tarball", "t", "/t", "tar:aaaa")
    req = kbuild.BuildRequest(src, [], load_fragments())
    monkeypatch.setattr(kbuild, "compiler_identity", lambda: "gcc 12")
    k12 = kbuild.cache_key(req)
    monkeypatch.setattr(kbuild, "compiler_identity", lambda: "gcc 13")
    assert kbuild.cache_key(req) != k12


def test_names_and_links(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    for bad in ("stock", "a/b", "", "-x", "x" * 65):
        with pytest.raises(LabError, match="--name"):
            validate_name(bad)
    build = tmp_path / "kernels" / "builds" / "0123456789abcdef0123"
    build.mkdir(parents=True)
    (build / "bzImage").write_bytes(b"x")
    (build / "release").write_text("6.1.0-numalab\n")
    (build / "meta.json").write_text(
        json.dumps({"build_id": "ab" * 20, "bzimage_sha256": hashlib.sha256(b"x").hexdigest()})
    )
    link_name("mine", build.name)
    k = find_built("mine")
    assert k is not None and k.release == "6.1.0-numalab" and k.image == (build / "bzImage").resolve()
    assert k.build_id == "ab" * 20 and k.expected_build_id() == ("ab" * 20, "vmlinux")
    assert find_built("01234567") is not None  # key prefix
    assert find_built("nothere") is None


def test_a_build_is_served_only_with_its_identity(tmp_path, monkeypatch) -> None:
    """A build that records no build-id (an older numalab's, possibly with a stale payload) or whose bzImage is not
    the one it recorded is refused by name, with a one-line error saying what to do."""
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    build = tmp_path / "kernels" / "builds" / "0123456789abcdef0123"
    build.mkdir(parents=True)
    (build / "bzImage").write_bytes(b"x")
    link_name("old", build.name)
    (build / "meta.json").write_text(json.dumps({"key": build.name, "release": "r"}))
    with pytest.raises(LabError, match="records no build-id .* build it again"):
        find_built("old")
    (build / "meta.json").write_text(json.dumps({"build_id": "ab" * 20, "bzimage_sha256": "0" * 64}))
    with pytest.raises(LabError, match="is not the bzImage its build recorded"):
        find_built("old")


def test_cache_hit_returns_at_once_without_touching_sources(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    req = kbuild.BuildRequest(Source("tarball", "t", "/nonexistent", "tar:cafe"), [], load_fragments())
    key = kbuild.cache_key(req)
    d = tmp_path / "kernels" / "builds" / key
    d.mkdir(parents=True)
    (d / "bzImage").write_bytes(b"x")
    (d / "meta.json").write_text(json.dumps({"key": key, "release": "r", "build_id": "ab" * 20,
                                             "bzimage_sha256": hashlib.sha256(b"x").hexdigest()}))  # fmt: skip
    res = kbuild.build_kernel(req, lambda m: pytest.fail(f"progress on a cache hit: {m}"))
    assert res.cached and res.seconds < 1 and res.name == "baseline"
    assert find_built("baseline") is not None


# --- CLI one-line errors (no build) -------------------------------------------------------


def _fake_source(tmp_path: Path) -> Path:
    src = tmp_path / "linux"
    (src / "kernel" / "sched").mkdir(parents=True)
    (src / "Makefile").write_text("all:\n")
    (src / "Kconfig").write_text("")
    (src / "kernel" / "sched" / "fair.c").write_text("".join(f"int x{i};\n" for i in range(100)))
    return src


def test_cli_missing_source(tmp_path) -> None:
    env = {"NUMALAB_CACHE": str(tmp_path / "cache")}
    assert_one_line_error(numalab("kernel", "build", "--source", str(tmp_path / "nope"), env=env),
                          "--source", "no such file or directory")  # fmt: skip
    assert_one_line_error(numalab("kernel", "build", "--source", f"{tmp_path}@v6.1", env=env),
                          "--source", "not a git repository")  # fmt: skip


def test_cli_missing_patch_and_fragment(tmp_path) -> None:
    env = {"NUMALAB_CACHE": str(tmp_path / "cache")}
    src = str(_fake_source(tmp_path))
    assert_one_line_error(numalab("kernel", "build", "--source", src, "--patch", "nope.patch", env=env),
                          "patch nope.patch: no such file")  # fmt: skip
    assert_one_line_error(numalab("kernel", "build", "--source", src, "--fragment", "nope", env=env),
                          "--fragment nope: no such file")  # fmt: skip
    assert_one_line_error(numalab("kernel", "build", "--name", "stock", "--source", src, env=env), "--name stock")


def test_cli_patch_that_does_not_apply(tmp_path) -> None:
    """Against a fake source dir: the error names patch, file and hunk; the user's tree is untouched."""
    env = {"NUMALAB_CACHE": str(tmp_path / "cache")}
    src = _fake_source(tmp_path)
    before = (src / "kernel" / "sched" / "fair.c").read_text()
    proc = numalab("kernel", "build", "--quiet", "--source", str(src), "--patch", str(KNOWN_ANSWER), env=env)
    assert_one_line_error(proc, "known-answer-no-numa-migrate.patch", "kernel/sched/fair.c", "hunk #1 FAILED")
    assert (src / "kernel" / "sched" / "fair.c").read_text() == before
    assert sorted(p.name for p in src.rglob("*")) == ["Kconfig", "Makefile", "fair.c", "kernel", "sched"]


@pytest.mark.parametrize("kind", ["git", "tarball"])
def test_cli_git_and_tarball_sources_get_a_private_tree(tmp_path, kind) -> None:
    """GIT@REV and TARBALL sources: patches go to a private copy; the repository is left as it was."""
    env = {"NUMALAB_CACHE": str(tmp_path / "cache")}
    src = _fake_source(tmp_path)
    if kind == "git":
        _git(src, "init", "-q")
        _git(src, "add", "-A")
        _git(src, "commit", "-qm", "v1")
        spec = f"{src}@HEAD"
    else:
        spec = str(tmp_path / "linux.tar.gz")
        subprocess.run(["tar", "-czf", spec, "-C", str(tmp_path), "linux"], check=True)
    proc = numalab("kernel", "build", "--quiet", "--source", spec, "--patch", str(KNOWN_ANSWER), env=env)
    assert_one_line_error(proc, "known-answer-no-numa-migrate.patch does not apply", "kernel/sched/fair.c")
    trees = list((tmp_path / "cache" / "kernels" / "src").glob("*/tree"))
    assert len(trees) == 1 and (trees[0] / "kernel" / "sched" / "fair.c").is_file()
    if kind == "git":
        assert _git(src, "status", "--porcelain") == ""
        assert _git(src, "worktree", "list").count("\n") == 1
        assert_one_line_error(numalab("kernel", "build", "--source", f"{src}@nosuchrev", env=env),
                              "no commit 'nosuchrev'")  # fmt: skip


def test_cli_kernel_list_json(tmp_path) -> None:
    proc = numalab("kernel", "list", "--json", env={"NUMALAB_CACHE": str(tmp_path)})
    assert proc.returncode == 0 and json.loads(proc.stdout) == []


def test_prune_removes_unnamed_builds_old_logs_and_on_request_sources(tmp_path) -> None:
    import os
    import time

    env = {"NUMALAB_CACHE": str(tmp_path)}
    kernels = tmp_path / "kernels"
    for key in ("aaaa", "bbbb"):
        (kernels / "builds" / key).mkdir(parents=True)
        (kernels / "builds" / key / "bzImage").write_bytes(b"x" * 1000)
    (kernels / "logs").mkdir()
    old = time.time() - 3 * 86400
    for key in ("aaaa", "bbbb", "cccc"):  # cccc: a failed build, no artefacts
        (kernels / "logs" / f"{key}.log").write_text("log\n")
        os.utime(kernels / "logs" / f"{key}.log", (old, old))
    (kernels / "logs" / "dddd.log").write_text("a failure from a minute ago\n")
    (kernels / "src" / "s1" / "tree").mkdir(parents=True)
    (kernels / "src" / "s1" / "tree" / "Makefile").write_text("all:\n")
    (kernels / "built").mkdir()
    (kernels / "built" / "mine").symlink_to(Path("..") / "builds" / "aaaa")

    dry = numalab("kernel", "prune", "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    listed = {(i["what"], Path(i["path"]).name) for i in json.loads(dry.stdout)["removed"]}
    assert listed == {("unnamed build", "bbbb"), ("build log", "bbbb.log"), ("build log", "cccc.log")}
    assert (kernels / "builds" / "bbbb").exists()  # a dry run removes nothing

    proc = numalab("kernel", "prune", env=env)
    assert proc.returncode == 0 and "freed" in proc.stdout, proc.stderr
    assert sorted(p.name for p in (kernels / "builds").iterdir()) == ["aaaa"]
    assert sorted(p.name for p in (kernels / "logs").iterdir()) == ["aaaa.log", "dddd.log"]
    assert (kernels / "built" / "mine" / "bzImage").exists()  # the named build stays bootable
    assert (kernels / "src" / "s1").exists()

    proc = numalab("kernel", "prune", "--sources", env=env)
    assert proc.returncode == 0 and "source tree" in proc.stdout
    assert list((kernels / "src").iterdir()) == []
    assert numalab("kernel", "prune", env=env).stdout.strip() == "nothing to prune"
    assert_one_line_error(numalab("kernel", "prune", "--log-age-days", "-1", env=env), "--log-age-days")


# --- real builds ---------------------------------------------------------------------

needs_source = needs_setup_package(HAVE_SOURCE, "/usr/src/linux-source-6.1.tar.xz", "linux-source-6.1")


def _build(*args: str, timeout: float = 1800) -> dict:
    proc = numalab("kernel", "build", "--json", *args, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def baseline() -> dict:
    return _build("--name", "baseline")


@needs_source
@pytest.mark.kernel_build
def test_patch_that_does_not_apply_to_the_real_source(tmp_path) -> None:
    bad = _write(tmp_path, "stale.patch", KNOWN_ANSWER.read_text().replace("\tint nid, ret, dist;", "\tint nid;"))
    proc = numalab("kernel", "build", "--quiet", "--patch", bad, timeout=900)
    assert_one_line_error(proc, "stale.patch does not apply", "kernel/sched/fair.c", "hunk #1 FAILED at line 2169")


@needs_source
@pytest.mark.kernel_build
def test_fragment_symbol_that_cannot_be_set(tmp_path) -> None:
    frag = _write(tmp_path, "gpu.config", "CONFIG_DRM_I915=y\n")
    proc = numalab("kernel", "build", "--quiet", "--fragment", frag, timeout=900)
    assert_one_line_error(proc, "kernel config", "CONFIG_DRM_I915=y (got unset, from gpu.config)")


@needs_source
@pytest.mark.kernel_build
def test_baseline_artefacts_and_cache_hit(baseline) -> None:
    d = Path(baseline["path"])
    for f in ("bzImage", "config", "System.map", "build.log", "release", "meta.json"):
        assert (d / f).is_file(), f
    assert baseline["release"].endswith("-numalab")
    config = (d / "config").read_text()
    assert "CONFIG_NUMA_BALANCING=y" in config and "# CONFIG_MODULES is not set" in config
    again = _build("--name", "baseline")
    assert again["cached"] and again["seconds"] < 1 and again["key"] == baseline["key"]
    k = find_built("baseline")
    assert k is not None and k.image == (d / "bzImage").resolve()
    listed = json.loads(numalab("kernel", "list", "--json").stdout)
    assert any(b["key"] == baseline["key"] and "baseline" in b["names"] for b in listed)


@needs_source
@pytest.mark.kernel_build
def test_build_failure_keeps_the_log_and_names_the_error(tmp_path, baseline) -> None:
    """A syntax error injected through a patch; the warm build directory recompiles only fair.c."""
    broken = _write(tmp_path, "broken.patch", "--- a/kernel/sched/fair.c\n+++ b/kernel/sched/fair.c\n"
                    "@@ -1069,4 +1069,5 @@\n #ifdef CONFIG_NUMA\n #define NUMA_IMBALANCE_MIN 2\n"
                    "+static int numalab_injected = numalab_injected_syntax_error;\n"
                    " \n static inline long\n")  # fmt: skip
    proc = numalab("kernel", "build", "--quiet", "--patch", broken, timeout=1200)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("numalab: error: kernel build failed: ") and "fair.c" in lines[0], lines[0]
    log = Path(lines[0].rsplit("(log: ", 1)[1].rstrip(")"))
    assert log.is_file() and "numalab_injected_syntax_error" in log.read_text()
    assert "last lines" in proc.stdout  # the tail of the log is shown
    # The private tree of the default source is back at its pristine commit, not left at the broken one (issue 71:
    # the next user of the cache found the tree patched), and nothing of the patch is left in it.
    tree = source_root(resolve_source(None)) / "tree"
    head = subprocess.run(["git", "rev-parse", "HEAD", BASE_REF], cwd=tree, capture_output=True, text=True)
    assert head.returncode == 0 and len(set(head.stdout.split())) == 1, head.stdout
    assert subprocess.run(["git", "status", "--porcelain"], cwd=tree, capture_output=True, text=True).stdout == ""
    assert "numalab_injected" not in (tree / "kernel" / "sched" / "fair.c").read_text()
    # The baseline is still a cache hit, and nothing of the broken build is cached under a name.
    assert _build("--name", "baseline")["cached"]
    assert find_built("broken") is None


@needs_source
@pytest.mark.vm
@pytest.mark.kernel_build
def test_known_answer_patched_kernel_never_moves_or_swaps(tmp_path, baseline) -> None:
    """misplaced on ring-2, 2 CPUs a node (one task on node 1, its memory bound to node 0 and still scanned; with 1 CPU
    a node the load balancer brought the task there first in 1 of 8 runs, with no NUMA decision): the baseline
    brings the task to its memory by a NUMA move or swap (or the load balancer does, before the first scan: seen
    once with 2 CPUs a node); the patched kernel, whose task_numa_migrate() never
    moves a task, makes none, though balancing ran (hint faults). ring-4 numa01 for 20 s did the same in 48 s,
    with 0 baseline decisions possible; this is 2 x 8 s and the baseline's answer is fixed by theworkload."""
    patched = _build("--patch", str(KNOWN_ANSWER), "--name", "known-answer")
    assert patched["key"] != baseline["key"]
    runs = {}
    for name in ("baseline", "known-answer"):
        out = tmp_path / name
        proc = numalab("run", "--topology", "ring-2", "--cpus-per-node", "2", "--kernel", name, "--workload",
                       "misplaced", "--duration", "8", "--out", str(out), "--json", timeout=900)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        m = json.loads(proc.stdout)
        assert m["status"] == "ok", m.get("reason")
        assert m["kernel"]["guest_release"] == (baseline if name == "baseline" else patched)["release"]
        runs[name] = m
    ev = runs["known-answer"]["metrics"]["events"]
    assert ev.get("sched_move_numa", 0) == 0 and ev.get("sched_swap_numa", 0) == 0, ev
    assert runs["known-answer"]["metrics"]["vmstat"].get("numa_hint_faults", 0) > 0  # balancing did run
    ev, result = runs["baseline"]["metrics"]["events"], runs["baseline"]["workload"]["result"]
    assert result["task_node_start"] == 1 and result["ended_on_mem_node"], result
    # The baseline brings the task to its memory by a NUMA move or swap, unless the load balancer took it there
    # before the first scan could decide (the scan delay is 1 s): a CI rehearsal's baseline was on its memory
    # 0.27 s in (an idle CPU of node 0 pulled it), with no NUMA decision left to make.
    decided = ev.get("sched_move_numa", 0) + ev.get("sched_swap_numa", 0)
    assert decided > 0 or result.get("reached_mem_node_after_s", SCAN_DELAY_S) < SCAN_DELAY_S, (ev, result)


def test_first_error_of_a_failed_build() -> None:
    tail = ["  CC      kernel/sched/core.o", "  CC      kernel/sched/fair.o",
            "/src/kernel/sched/fair.c:1071:1: error: expected identifier or '(' before '}' token",
            "make[3]: *** [scripts/Makefile.build:250: kernel/sched/fair.o] Error 1",
            "make: *** [Makefile:2012: .] Error 2"]  # fmt: skip
    assert kbuild._first_error(tail).startswith("/src/kernel/sched/fair.c:1071:1: error: expected identifier")
    assert kbuild._first_error(["ld: fair.o: undefined reference to `x'", "make: *** [x] Error 2"]).startswith("ld:")
    assert kbuild._first_error(["make: *** [x] Error 2"]) == "make: *** [x] Error 2"


def test_recipe_paths_are_relative_to_the_spec(tmp_path, monkeypatch) -> None:
    seen = {}
    monkeypatch.setattr(kbuild, "build_kernel", lambda req, progress: seen.setdefault("req", req))
    monkeypatch.setattr(kbuild, "resolve_source", lambda spec: Source("tarball", "t", "/t", "tar:0"))
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "x.patch").write_text(_diff("b.c", "one", "ONE"))
    assert kbuild.build_from_recipe("rev", {"patches": ["p/x.patch"]}, tmp_path, print) == "rev"
    assert [p.path for p in seen["req"].patches] == [(tmp_path / "p" / "x.patch").resolve()]
    with pytest.raises(LabError, match=r"kernels: rev: build.patch: unknown field"):
        kbuild.build_from_recipe("rev", {"patch": ["p/x.patch"]}, tmp_path, print)


@needs_source
@pytest.mark.vm
@pytest.mark.kernel_build
def test_matrix_kernel_recipe_is_built_and_booted(tmp_path, baseline) -> None:
    """A matrix kernel given as a build recipe goes through the kernel cache and boots under its name."""
    spec = tmp_path / "recipe.yaml"
    spec.write_text(f"""
name: recipe
topologies: [ring-2]
kernels:
  - {{name: base, build: {{}}}}
  - {{name: ka, build: {{patches: [{KNOWN_ANSWER}]}}}}
workloads: [{{name: idle, duration: 1}}]
""")
    out = tmp_path / "out"
    proc = numalab("matrix", "run", str(spec), "--out", str(out), "--no-reports", timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    releases = {}
    for kernel in ("base", "ka"):
        m = json.loads((out / "runs" / f"ring-2.{kernel}.idle.default.r1" / "manifest.json").read_text())
        assert m["status"] == "ok" and m["kernel"]["name"] == kernel
        releases[kernel] = m["kernel"]["sha256"]
    assert releases["base"] != releases["ka"]  # two different images were booted
    assert find_built("base").image == Path(baseline["path"], "bzImage").resolve()
