"""numalab as an ordinary user (issue 36): developers run it as themselves, not as root, with Debian's user
PATH (no /usr/sbin: depmod and libvirtd live there) and their own cache. Every other test runs as root.

``numalab-test`` (made once per machine) runs the everyday commands from this checkout: ``run``, ``report`` and
``matrix run`` with a fresh cache of this module's own (the stock kernel is fetched for it), and ``kernel build``
with a cache that stays between suites, as a developer's own does (made once per machine, like the user). Its
first build on a machine starts from a copy of root's ccache, as a second checkout of the same files would (a cold
build as well would add ~15 min); later ones are ``--rebuild``s in the user's own tree and build directory, which
configure and run make as the user and compile what changed. What is proven is the user's path, not the compiler's
speed: a fresh private tree and build each time took 225 s, and 86 s more to delete (2026-11-27)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from common import REPO, as_user, numalab, ordinary_user

from lab.paths import cache_dir

pytestmark = [pytest.mark.vm, pytest.mark.kernel_build, pytest.mark.usefixtures("host_shared")]


@pytest.fixture(scope="module")
def user() -> Iterator[dict]:
    """The user, and a fresh home directory of its own for this module (its cache, its runs). Not under pytest's
    base temporary directory: every pytest session that starts on the machine sets /tmp/pytest-of-root back to
    0700, and a rehearsal's kernel build as this user died of 'Permission denied' half-way when one did."""
    name = ordinary_user()
    home = Path(tempfile.mkdtemp(prefix="numalab-ordinary-home-"))
    shutil.chown(home, name, name)
    home.chmod(0o755)
    # pytest's tmp dirs are 0700, a CI checkout may sit under /root, and the venv's interpreter may be root's own
    # (pyenv's, under /root): the user must reach its home, the checkout and the interpreter, as its own install
    # would be reachable (each directory above them gets o+x, enough to pass through, nothing to list)
    python = Path(os.path.realpath(sys.executable))
    for d in [*home.parents, REPO, *REPO.parents, *python.parents]:
        if d != Path("/") and not d.stat().st_mode & 0o001:
            d.chmod(d.stat().st_mode | 0o001)
    yield {"name": name, "home": home, "cache": home / "cache"}
    shutil.rmtree(home, ignore_errors=True)


def numalab_as(u: dict, *args: str, timeout: float = 900, cache: Path | None = None):
    cmd = ["env", f"NUMALAB_CACHE={cache or u['cache']}", sys.executable, "-m", "lab.cli", *args]
    return as_user(u["name"], *cmd, timeout=timeout, cwd=REPO)


def test_the_users_path_has_no_sbin(user) -> None:
    proc = as_user(user["name"], "sh", "-c", 'echo "$PATH"; id -u; command -v depmod || echo no-depmod')
    path, uid, depmod = proc.stdout.split()
    assert "sbin" not in path and uid != "0" and depmod == "no-depmod", proc.stdout


def test_run_report_and_matrix_as_an_ordinary_user(user) -> None:
    out = user["home"] / "ring2"
    proc = numalab_as(user, "run", "--topology", "ring-2", "--workload", "numa01", "--duration", "3",
                      "--out", str(out), "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok", (m["status"], m["reason"])
    assert m["kernel"]["name"] == "stock" and m["kernel"]["identity"] == "verified"
    assert sum(m["metrics"]["events"].values()) > 0
    assert (out / "manifest.json").stat().st_uid != 0
    assert Path(m["kernel"]["image"]).is_relative_to(user["cache"])  # fetched for the user, into its cache
    html = user["home"] / "report.html"
    report = numalab_as(user, "report", str(out), "--out", str(html))
    assert report.returncode == 0, report.stderr[-2000:]
    assert html.stat().st_size > 10_000 and html.with_suffix(".json").exists()
    spec = user["home"] / "m.yaml"
    spec.write_text("name: mine\ntopologies: [ring-2]\nkernels: [stock]\nworkloads: [{name: idle, duration: 1}]\n")
    shutil.chown(spec, user["name"], user["name"])
    mx = numalab_as(user, "matrix", "run", str(spec), "--out", str(user["home"] / "mx"), "--no-reports")
    assert mx.returncode == 0, mx.stderr[-3000:]
    cell = json.loads((user["home"] / "mx" / "runs" / "ring-2.stock.idle.default.r1" / "manifest.json").read_text())
    assert cell["status"] == "ok", (cell["status"], cell["reason"])


def test_kernel_build_and_its_run_as_an_ordinary_user(user) -> None:
    # Root's build of the same kernel first: a cache hit when warm; on a cold machine built here (or waited for,
    # under the source's lock, while another worker builds it), so that the copy of root's ccache holds its
    # objects. In a cold rehearsal the two ran side by side and neither hit (13.9 min for the user's).
    root_build = numalab("kernel", "build", "--name", "baseline", "--quiet", timeout=3600)
    assert root_build.returncode == 0, root_build.stderr[-3000:]
    kcache = Path(pwd.getpwnam(user["name"]).pw_dir) / ".cache" / "numalab-suite-kernel"  # (kept: see the docstring)
    made = as_user(user["name"], "mkdir", "-p", str(kcache))
    assert made.returncode == 0, made.stderr
    root_ccache = cache_dir("ccache")
    user_ccache = kcache / "ccache"
    if root_ccache.is_dir() and not user_ccache.exists():  # (the machine's first: a copy, made the user's)
        shutil.copytree(root_ccache, user_ccache, symlinks=True)
        for p in [user_ccache, *user_ccache.rglob("*")]:
            shutil.chown(p, user["name"], user["name"])
    # A developer's edit, as the user: fair.c newer in the private tree kept from the last suite, so make compiles
    # it and links again (on the machine's first build there is no tree yet, and everything compiles).
    for fair in kcache.glob("kernels/src/*/tree/kernel/sched/fair.c"):
        touched = as_user(user["name"], "touch", str(fair))
        assert touched.returncode == 0, touched.stderr
    build = numalab_as(user, "kernel", "build", "--name", "mine", "--rebuild", "--json", timeout=3600, cache=kcache)
    assert build.returncode == 0, build.stderr[-3000:]
    meta = json.loads(build.stdout)
    assert Path(meta["path"]).is_relative_to(kcache) and meta["build_id"] and not meta["cached"], meta
    built = json.loads((Path(meta["path"]) / "meta.json").read_text())
    assert built["objects_compiled"] >= 1, built
    assert Path(meta["path"]).stat().st_uid != 0
    out = user["home"] / "mine"
    proc = numalab_as(user, "run", "--topology", "ring-2", "--kernel", "mine", "--workload", "idle", "--duration", "1",
                      "--out", str(out), "--json", cache=kcache)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok" and m["kernel"]["name"] == "mine" and m["kernel"]["identity"] == "verified", m["reason"]
