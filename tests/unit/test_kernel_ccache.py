"""A kernel build's ccache settings (lab.kernel.build.compile_env), with the real gcc and ccache: a second tree
with the same files at another path (an ordinary user's cache, a git tree made from the tarball) is answered
from the first tree's objects, though kbuild gives each compile its tree's absolute paths (-I, -include, the
source, -fmacro-prefix-map): CCACHE_BASEDIR makes them relative to the build directory."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from common import require_setup_package

from lab.kernel.build import compile_env
from lab.paths import cache_dir

SOURCE = '#include <x.h>\nconst char *where(void) { return __FILE__ ": " X; }\n'


def _compile(tree: Path, env: dict[str, str], log: Path, *extra: str) -> tuple[str, bytes]:
    """Compile ``tree``'s f.c as kbuild would (out of tree, absolute -I and source, the tree's prefix map,
    depend mode's -MMD): (ccache's result for it, the object)."""
    build = tree.parent / "build"
    build.mkdir(exist_ok=True)
    cmd = ["ccache", "gcc", "-Wp,-MMD,.f.o.d", "-nostdinc", f"-I{tree}/include", f"-fmacro-prefix-map={tree}/=",
           "-O2", *extra, "-c", "-o", "f.o", str(tree / "f.c")]  # fmt: skip
    log.unlink(missing_ok=True)
    proc = subprocess.run(cmd, cwd=build, env={**env, "CCACHE_LOGFILE": str(log)}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    results = [line.rsplit("Result: ", 1)[1] for line in log.read_text().splitlines() if "Result: " in line]
    return ("hit" if "direct_cache_hit" in results else "miss"), (build / "f.o").read_bytes()


def _tree(name: str) -> Path:
    tree = cache_dir("kernels", "src") / name / "tree"
    shutil.rmtree(tree.parent, ignore_errors=True)
    (tree / "include").mkdir(parents=True)
    (tree / "include" / "x.h").write_text('#define X "x"\n')
    (tree / "f.c").write_text(SOURCE)
    return tree


def test_a_tree_at_another_path_is_answered_from_the_first_trees_objects(tmp_path, monkeypatch) -> None:
    require_setup_package(shutil.which("ccache") is not None, "ccache", "ccache")
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    env, log = compile_env(), tmp_path / "ccache.log"
    assert env["CCACHE_DIR"] == str(tmp_path / "cache" / "ccache")
    first, obj_a = _compile(_tree("a" * 16), env, log)
    again, obj_b = _compile(_tree("b" * 16), env, log)
    assert (first, again) == ("miss", "hit")
    # the object is the one the second tree's compile makes: its __FILE__ is the tree-relative name either way
    assert obj_a == obj_b and b"f.c: x" in obj_b and str(tmp_path).encode() not in obj_b
    # without the base directory, a third tree misses: what the setting is there for
    absolute = {k: v for k, v in env.items() if k != "CCACHE_BASEDIR"}
    assert _compile(_tree("c" * 16), absolute, log)[0] == "miss"


def test_with_debug_information_too(tmp_path, monkeypatch) -> None:
    """-g (the sched-ext fragment's DWARF, for BTF): ccache would hash the build directory into the key
    (CCACHE_NOHASHDIR leaves it out), so a tree at another path missed every object."""
    require_setup_package(shutil.which("ccache") is not None, "ccache", "ccache")
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    env, log = compile_env(), tmp_path / "ccache.log"
    assert [_compile(_tree(n * 16), env, log, "-g")[0] for n in "ab"] == ["miss", "hit"]
    hashed = {k: v for k, v in env.items() if k != "CCACHE_NOHASHDIR"}
    assert _compile(_tree("c" * 16), hashed, log, "-g")[0] == "miss"
