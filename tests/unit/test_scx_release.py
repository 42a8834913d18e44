"""The scx schedulers from crates.io (lab.host.scx_release, --scheduler NAME[@VERSION], numalab scheduler): what is
decided before cargo runs. The registry and the toolchain are faked at their edges (the index's JSON lines, the
tools found on the PATH); the real builds and runs are tests/scx (make test-scx)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import assert_one_line_error, numalab

from lab.errors import LabError
from lab.host import scx_release
from lab.kernel.bootable import Kernel
from lab.kernel.sched_ext import EXAMPLES
from lab.run import scheduler

INDEX = "\n".join(
    json.dumps(
        {
            "name": "scx_layered",
            "vers": v,
            "cksum": "0" * 64,
            "rust_version": rv,
            "pubtime": t,
            "yanked": False,
            "deps": [],
        }
    )  # fmt: skip
    for v, rv, t in [
        ("1.0.22", None, "2025-12-04T00:00:00Z"),
        ("1.0.23", None, "2026-02-07T08:12:15Z"),
        ("1.1.0", None, "2026-03-07T04:31:46Z"),
        ("1.1.4", "1.91", "2026-10-15T20:22:20Z"),
    ]  # fmt: skip
)


def _fetch(url: str, what: str) -> bytes:
    assert url == "https://index.crates.io/sc/x_/scx_layered", url
    return INDEX.encode()


def _tools(rust=(1, 95, 0), clang=19) -> scx_release.Toolchain:
    return scx_release.Toolchain("/usr/bin/cargo", f"rustc {'.'.join(map(str, rust))} (x 2026-04-14)", rust,
                                 "x86_64-unknown-linux-gnu", f"/usr/bin/clang-{clang}", f"clang version {clang}.1.7",
                                 clang)  # fmt: skip


def test_the_crate_names_are_not_the_kernel_examples_so_a_bare_name_is_never_ambiguous() -> None:
    assert not set(scx_release.CRATES) & set(EXAMPLES)
    assert scheduler.is_crate("scx_bpfland") and scheduler.is_crate("scx_layered@1.0.23")
    assert not scheduler.is_crate("scx_simple") and not scheduler.is_crate("fair")
    assert not scheduler.is_crate("./bin/scx_bpfland")  # a path is a path


def test_a_spec_is_a_crate_and_its_own_version_or_the_pinned_one() -> None:
    assert scx_release.parse("scx_layered@1.0.23") == ("scx_layered", "1.0.23")
    assert scx_release.parse("scx_bpfland") == ("scx_bpfland", None)
    with pytest.raises(LabError, match=r"^--scheduler scx_foo@9\.9: not a scx scheduler numalab builds"):
        scx_release.parse("scx_foo@9.9")
    with pytest.raises(LabError, match=r"^--scheduler scx_lavd@1\.1: the version must be MAJOR\.MINOR\.PATCH"):
        scx_release.parse("scx_lavd@1.1")
    with pytest.raises(LabError, match=r"^--scheduler scx_lavd@: the version must be"):
        scheduler.split("scx_lavd@ --verbose")  # (before any kernel is built: run's and ab's option checks)


def test_the_ops_name_is_the_bpf_sources_with_scx_utils_suffix() -> None:
    # what a 1.1.4 release build shows in /sys/kernel/sched_ext/root/ops (seen in the research's guests)
    assert scx_release.ops_name("scx_bpfland", "1.1.4", "x86_64-unknown-linux-gnu") == (
        "bpfland_1.1.4_x86_64_unknown_linux_gnu")  # fmt: skip
    assert scx_release.ops_name("scx_layered", "1.0.23", "x86_64-unknown-linux-gnu") == (
        "layered_1.0.23_x86_64_unknown_linux_gnu")  # fmt: skip


def test_an_unknown_version_names_the_nearest_ones() -> None:
    known = scx_release.releases("scx_layered", _fetch)
    assert [r.version for r in known] == ["1.0.22", "1.0.23", "1.1.0", "1.1.4"]
    assert scx_release.pick("scx_layered", "1.1.0", known).pubtime == "2026-03-07T04:31:46Z"
    with pytest.raises(LabError, match=r"^scx_layered@1\.0\.99: no such version on crates\.io \(nearest: 1\.0\.22, "
                       r"1\.0\.23, 1\.1\.0, 1\.1\.4;"):  # fmt: skip
        scx_release.pick("scx_layered", "1.0.99", known)


def test_a_rustc_older_than_the_crate_asks_is_refused() -> None:
    r = scx_release.pick("scx_layered", "1.1.4", scx_release.releases("scx_layered", _fetch))
    scx_release.check_rust("scx_layered", r, _tools())
    with pytest.raises(LabError, match=r"^scx_layered@1\.1\.4: needs rustc >= 1\.91, this is rustc 1\.85\.0"):
        scx_release.check_rust("scx_layered", r, _tools(rust=(1, 85, 0)))


def test_missing_tools_are_one_line_each(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("BPF_CLANG", raising=False)
    with pytest.raises(LabError, match=r"^scx schedulers: cargo not found \(install Rust with rustup"):
        scx_release.toolchain()
    for tool, script in (("cargo", ""), ("rustc", "echo 'release: 1.95.0'; echo 'host: x86_64-unknown-linux-gnu'"),
                         ("clang-16", "echo 'Debian clang version 16.0.6 (15~deb12u1)'")):  # fmt: skip
        (tmp_path / tool).write_text(f"#!/bin/sh\n{script}\n")
        (tmp_path / tool).chmod(0o755)
    with pytest.raises(LabError, match=r"^scx schedulers: clang >= 18 missing for the BPF code \(the newest found is "
                       r"Debian clang version 16\.0\.6.*make setup-scx"):  # fmt: skip
        scx_release.toolchain()


def test_the_network_refused_is_one_line() -> None:
    def refused(url: str, what: str) -> bytes:
        return scx_release._get("https://127.0.0.1:9/sc/x_/scx_layered", what)

    with pytest.raises(LabError, match=r"^scx_layered: the crates.io index: cannot reach 127\.0\.0\.1:9 .*a cached "
                       r"build needs no network"):  # fmt: skip
        scx_release.releases("scx_layered", refused)


def test_the_key_moves_with_each_input_and_not_the_kernel() -> None:
    base = scx_release.build_key("scx_layered", "1.1.0", [], _tools())
    assert base == scx_release.build_key("scx_layered", "1.1.0", [], _tools())
    others = {scx_release.build_key("scx_layered", "1.1.1", [], _tools()),
              scx_release.build_key("scx_layered", "1.1.0", [("p", b"x")], _tools()),
              scx_release.build_key("scx_layered", "1.1.0", [("p", b"y")], _tools()),
              scx_release.build_key("scx_layered", "1.1.0", [], _tools(rust=(1, 96, 0))),
              scx_release.build_key("scx_layered", "1.1.0", [], _tools(clang=20))}  # fmt: skip
    assert base not in others and len(others) == 5


def test_a_patch_that_does_not_apply_is_named(tmp_path) -> None:
    src = tmp_path / "scx_layered-1.1.0"
    (src / "src" / "bpf").mkdir(parents=True)
    (src / "src" / "bpf" / "intf.h").write_text("\tMAX_NUMA_NODES\t\t= 64,\n")
    patch = Path(__file__).parents[1] / "data" / "scx" / "scx_layered-1.1.0-revert-pr3397.patch"
    with pytest.raises(LabError, match=r"^--patch .*scx_layered-1\.1\.0-revert-pr3397\.patch: does not apply to "
                       r"scx_layered 1\.1\.0 \(patch -p1 from the crate's root\): "):  # fmt: skip
        scx_release._apply(src, [(str(patch), patch.read_bytes())], "scx_layered 1.1.0")


def test_a_cached_build_is_found_without_the_network(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    monkeypatch.setattr(scx_release, "toolchain", _tools)
    key = scx_release.build_key("scx_bpfland", "1.1.4", [], _tools())
    d = tmp_path / "scx" / "bin" / f"scx_bpfland-1.1.4-{key}"
    d.mkdir(parents=True)
    (d / "scx_bpfland").write_bytes(b"\x7fELF")
    meta = {"crate": "scx_bpfland", "version": "1.1.4", "source": "crate:scx_bpfland@1.1.4", "ops": "bpfland_1.1.4_x"}
    (d / "meta.json").write_text(json.dumps(meta))
    (d / ".complete").touch()

    def offline(url: str, what: str) -> bytes:
        raise AssertionError("a cache hit asked the network")

    built = scx_release.build("scx_bpfland", None, [], fetch=offline)
    assert built.cached and built.binary == d / "scx_bpfland" and built.seconds < 1.0
    assert scx_release.meta_of_binary(built.binary)["source"] == "crate:scx_bpfland@1.1.4"
    assert scx_release.meta_of_binary(tmp_path / "elsewhere") is None


def test_a_crate_scheduler_needs_the_scx_fragments_options(tmp_path) -> None:
    config = tmp_path / "config"
    config.write_text("CONFIG_SCHED_CLASS_EXT=y\nCONFIG_IKCONFIG_PROC=y\nCONFIG_CGROUPS=y\n")
    kernel = Kernel("v6.12", tmp_path / "bzImage", config=config)
    with pytest.raises(LabError, match=r"^--scheduler scx_bpfland@1\.1\.4: kernel v6\.12 lacks CONFIG_FUNCTION_TRACER, "
                       r"CONFIG_DYNAMIC_FTRACE, CONFIG_KALLSYMS_ALL, which the scx schedulers need \(build it with "
                       r"--fragment sched-ext --fragment scx"):  # fmt: skip
        scheduler.resolve("scx_bpfland@1.1.4 -v", kernel)
    # scx_lavd's own need (its cpufreq_cpu_data ksym), on a kernel that has the others'
    config.write_text("CONFIG_SCHED_CLASS_EXT=y\n" + "".join(f"{s}=y\n" for s in scheduler.SCX_NEEDS))
    with pytest.raises(LabError, match=r"^--scheduler scx_lavd: kernel v6\.12 lacks CONFIG_CPU_FREQ, which scx_lavd "
                       r"needs \(build it with --fragment sched-ext --fragment scx"):  # fmt: skip
        scheduler.resolve("scx_lavd", kernel)
    assert scheduler.fragments_for("scx_bpfland", ()) == ("sched-ext", "scx")
    assert scheduler.fragments_for("scx_simple", ()) == ("sched-ext",)
    assert scheduler.fragments_for("scx_lavd@1.1.4", ("sched-ext", "scx.config")) == ("sched-ext", "scx.config")
    assert scheduler.Scheduler("scx_simple", "sched_ext").wait_s == 10.0  # (the examples' guest plans as they were)


def test_the_cli_says_bad_input_in_one_line() -> None:
    assert_one_line_error(numalab("scheduler", "build", "scx_foo@9.9"),
                          "scheduler build scx_foo@9.9: not a scx scheduler numalab builds from crates.io")  # fmt: skip
    assert_one_line_error(numalab("scheduler", "versions", "scx_simple"),
                          "scheduler versions scx_simple: not a scx scheduler")  # fmt: skip
    assert_one_line_error(numalab("run", "--scheduler", "scx_layered@1.0", "--workload", "spin"),
                          "--scheduler scx_layered@1.0: the version must be MAJOR.MINOR.PATCH")  # fmt: skip
    for sub in ("build", "versions"):
        proc = numalab("scheduler", sub, "--help")
        assert proc.returncode == 0 and "NAME" in proc.stdout


def test_a_cargo_failure_is_one_line_naming_its_log(tmp_path) -> None:
    cargo = tmp_path / "cargo"
    cargo.write_text("#!/bin/sh\necho '   Compiling scx_utils v1.1.0'\necho 'error: could not compile `scx_utils`'\n"
                     "exit 101\n")  # fmt: skip
    cargo.chmod(0o755)
    log = tmp_path / "build.log"
    with pytest.raises(LabError, match=r"^scx_layered 1\.1\.0: cargo build failed: error: could not compile "
                       rf"`scx_utils` \(log: {log}\)$"):  # fmt: skip
        scx_release._cargo([str(cargo), "build"], tmp_path, {"PATH": "/usr/bin:/bin"}, log, "scx_layered 1.1.0",
                           lambda _m: None)  # fmt: skip
    assert "Compiling scx_utils" in log.read_text()  # (kept: the whole output)


def test_the_scx_fragment_gives_every_option_a_scheduler_is_refused_without() -> None:
    repo = Path(__file__).resolve().parents[2] / "kernel-configs"
    given = {line.split("=")[0] for f in ("sched-ext.config", "scx.config", "trace.config", "base.config")
             for line in (repo / f).read_text().splitlines() if line.endswith("=y")}  # fmt: skip
    needs = {*scheduler.SCX_NEEDS, *(s for own in scheduler.CRATE_NEEDS.values() for s in own)}
    assert needs <= given, needs - given
