"""Shared test fixtures and helpers (plain module: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from lab.placement.host_inventory import HostInventory, HostNode, NodeFree
from lab.topology.model.machine import CpuGroups, Machine, MachineNode
from lab.vm.backend import BootSpec

REPO = Path(__file__).resolve().parents[1]

BOOT = BootSpec(
    kernel="/srv/numalab/bzImage",
    initrd="/srv/numalab/initrd.cpio",
    cmdline="console=ttyS0 numa=on quiet",
    results_dir="/srv/numalab/results",
    console_log="/srv/numalab/console.log",
    qmp_socket="/srv/numalab/qmp.sock",
    name="numalab-test",
)


def host_inventory(
    *nodes: HostNode,
    online_cpus: tuple[int, ...] | None = None,
    distances: tuple[tuple[int, ...], ...] = (),
    llcs: tuple[tuple[int, ...], ...] = (),
) -> HostInventory:
    """A fabricated host: its nodes (each with its MemTotal and what is free on it), its SLIT and its L3s; every
    CPU usable unless ``online_cpus`` says, the memory available the nodes'."""
    groups = CpuGroups(llcs=tuple(frozenset(g) for g in llcs)) if llcs else None
    machine_nodes = tuple(MachineNode(n.id, n.cpus, n.mem_total_mib) for n in nodes)
    machine = Machine(machine_nodes, distances, "test", groups=groups)
    online = tuple(sorted(c for n in nodes for c in n.cpus)) if online_cpus is None else online_cpus
    free = tuple(NodeFree(n.mem_available_mib, n.hugepages_free) for n in nodes)
    return HostInventory(machine, online, sum(n.mem_available_mib for n in nodes), free)


# Two host nodes with plenty of memory and 2 MiB hugepages, so placements alternate 0, 1, 0, 1...
HOST = host_inventory(
    HostNode(0, (0, 1, 2, 3), 65536, 60000, {2048: 30000}),
    HostNode(1, (4, 5, 6, 7), 65536, 60000, {2048: 30000}),
)


def static_workload(tmp_path: Path, name: str, c_source: str, workload_yaml: str) -> Path:
    """A test's own C program built static (``tmp_path/name``) beside its workload file (``tmp_path/name.yaml``,
    returned): gcc is part of make setup, so its absence fails the test."""
    import shutil

    if shutil.which("gcc") is None:
        pytest.fail("gcc is part of make setup")
    src = tmp_path / f"{name}.c"
    src.write_text(c_source)
    subprocess.run(["gcc", "-static", "-O1", "-o", str(tmp_path / name), str(src)], check=True, timeout=120)
    (tmp_path / f"{name}.yaml").write_text(workload_yaml)
    return tmp_path / f"{name}.yaml"


def qemu10_binary() -> str:
    """The backports QEMU 10 (make setup-qemu10; fetched into numalab's cache if it is not there): fails the
    test on Debian when it cannot be had, skips it elsewhere."""
    from lab.errors import LabError
    from lab.host.qemu_prefix import fetch

    try:
        return str(fetch(say=lambda _m: None))
    except LabError as err:
        if debian_like():
            pytest.fail(f"make setup-qemu10 failed on Debian: {err}")
        pytest.skip(f"no backports QEMU here: {err}")


def guest_tar(path: Path, members: dict[str, bytes | None] | list[tuple[str, bytes | None]]) -> None:
    """A tar like the guest's busybox `tar -cf X -C dir .`: "./" first, then the members in order (None: a
    directory); a list may name a member twice, as a hostile guest's tar may."""
    import io
    import tarfile

    with tarfile.open(path, "w") as tf:
        for name, data in [("./", None), *(members.items() if isinstance(members, dict) else members)]:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            else:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))


def numalab(*args: str, timeout: float = 600, env: dict | None = None, cwd: Path | None = None):
    """Run the real CLI in a subprocess (as a user would)."""
    return subprocess.run(
        [sys.executable, "-m", "lab.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or REPO,
        env={**os.environ, **(env or {})},
    )


def assert_one_line_error(proc, *needles: str) -> None:
    """Exit != 0, exactly one line on stderr, no traceback, naming what is wrong."""
    assert proc.returncode != 0, proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def os_release(path: Path = Path("/etc/os-release")) -> dict[str, str]:
    """/etc/os-release as a dict ({} where there is none)."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    pairs = (ln.partition("=") for ln in text.splitlines() if "=" in ln)
    return {k.strip(): v.strip().strip('"') for k, _, v in pairs}


def debian_like(release: dict[str, str] | None = None) -> bool:
    """Debian or a derivative: where ``make setup`` installs numalab's packages (Makefile APT_PACKAGES)."""
    rel = os_release() if release is None else release
    return "debian" in {rel.get("ID", ""), *rel.get("ID_LIKE", "").split()}


def platform_ships_qboot(release: dict[str, str] | None = None) -> bool:
    """Whether this platform's QEMU comes with qboot.rom: Debian's does (``make setup`` installs
    qemu-system-x86, and its qemu-system-data has /usr/share/qemu/qboot.rom), and so its derivatives'.
    Where this is True, a QEMU run that did not boot qboot is a broken setup, not a fallback."""
    return debian_like(release)


def require_setup_package(present: bool, what: str, package: str) -> None:
    """For a test that needs what ``make setup`` installs: on Debian its absence is a broken setup and
    fails the test, loudly; elsewhere the test is skipped, saying what is missing (never a silent pass)."""
    if present:
        return
    if debian_like():
        pytest.fail(f"{what} is missing, but make setup installs it on Debian (package {package}): the setup is broken")
    pytest.skip(f"{what} is missing (Debian package {package}; this is not Debian, where make setup installs it)")


def needs_setup_package(present: bool, what: str, package: str) -> Callable:
    """:func:`require_setup_package` as a test decorator."""

    def decorate(test: Callable) -> Callable:
        @functools.wraps(test)
        def wrapper(*args, **kwargs):
            require_setup_package(present, what, package)
            return test(*args, **kwargs)

        return wrapper

    return decorate


@contextlib.contextmanager
def host_hogs(n: int | None = None):
    """A busy process on every host core (or on n): the host load that moves throughput under the host clock
    and must not move anything measured in guest time."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n or os.cpu_count() or 2)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


ORDINARY_USER = "numalab-test"
ORDINARY_PATH = "/usr/local/bin:/usr/bin:/bin"  # Debian's for a user: no /usr/sbin (depmod, libvirtd)


def ordinary_user(name: str = ORDINARY_USER) -> str:
    """An ordinary user of this host, made once per machine (useradd; the tests run as root)."""
    import pwd

    from lab.paths import cache_dir, file_lock

    with file_lock(cache_dir() / ".useradd.lock"):  # (two test workers: one useradd)
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True)
    return name


def as_user(user: str, *argv: str, timeout: float = 600, cwd: Path | None = None):
    """``argv`` run as ``user`` with a login's bare environment: its HOME, Debian's user PATH, no root."""
    import pwd

    home = pwd.getpwnam(user).pw_dir
    env = ["env", "-i", f"HOME={home}", f"USER={user}", f"PATH={ORDINARY_PATH}", "LANG=C.UTF-8"]
    return subprocess.run(["runuser", "-u", user, "--", *env, *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or REPO)  # fmt: skip


def ring4_numa01_repeats(tmp: Path, balancing: str, repeats: int, *extra: str) -> list[Path]:
    """``repeats`` runs of numa01 on ring-4 (6 s each) with NUMA balancing ``balancing``, in ``tmp/balancing``:
    the run records, sorted (the report and views VM tests' A/B sides)."""
    out = tmp / balancing
    proc = numalab(
        "run", "--topology", "ring-4", "--workload", "numa01", "--duration", "6",
        "--numa-balancing", balancing, "--repeat", str(repeats), "--out", str(out), *extra,
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    runs = sorted(p for p in out.iterdir() if (p / "manifest.json").exists())
    assert len(runs) == repeats, [p.name for p in out.iterdir()]
    return runs
