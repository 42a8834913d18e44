"""The outer guest as a libvirt host (lab.host.nested_ssh): fresh keys, the pinned host key, the one forward.

The nested tier boots it and runs a matrix over it (tests/nested/test_nested.py); these check
what is decided before any boot."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from lab.host import nested, nested_init, nested_ssh, sshd_prefix
from lab.host.nested_init import outer_init
from lab.topology.model.ref import TopologyRef
from lab.vm.backend import BootSpec
from lab.vm.libvirt.libvirt_conn import is_local_uri, uri_parts
from lab.vm.qemu.qemu_argv import qemu_argv


@pytest.fixture
def host(tmp_path: Path) -> nested_ssh.SshHost:
    return nested_ssh.make_ssh_host(tmp_path / "ssh", "numalab-test", 40123)


def test_keys_are_fresh_private_and_the_host_key_is_pinned(host, tmp_path: Path) -> None:
    assert stat.S_IMODE(host.dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(host.key.stat().st_mode) == 0o600 and stat.S_IMODE(host.host_key.stat().st_mode) == 0o600
    pub = host.host_key.with_suffix(".pub").read_text().split()
    assert host.known_hosts.read_text().split() == ["[127.0.0.1]:40123", pub[0], pub[1]]
    other = nested_ssh.make_ssh_host(tmp_path / "ssh2", "numalab-test", 40123)
    assert other.key.read_bytes() != host.key.read_bytes()  # a session's keys are its own
    assert other.host_key.read_bytes() != host.host_key.read_bytes()


def test_ssh_reads_only_the_sessions_config_and_checks_the_host_key_strictly(host) -> None:
    conf = host.ssh_config.read_text()
    assert "StrictHostKeyChecking yes" in conf and "StrictHostKeyChecking no" not in conf
    assert f"UserKnownHostsFile {host.known_hosts}" in conf and "GlobalKnownHostsFile /dev/null" in conf
    assert f"IdentityFile {host.key}" in conf and "IdentitiesOnly yes" in conf and "BatchMode yes" in conf
    wrapper = host.ssh_wrapper.read_text()
    assert f"-F {host.ssh_config} " in wrapper and stat.S_IMODE(host.ssh_wrapper.stat().st_mode) == 0o700
    # What ssh makes of it, for the forward and for anything else (ssh -G prints the settings, connects nowhere).
    got = subprocess.run([str(host.ssh_wrapper), "-G", "-p", "40123", "127.0.0.1"], capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    settings = dict(line.split(" ", 1) for line in got.stdout.splitlines() if " " in line)
    assert settings["stricthostkeychecking"] == "true" and settings["userknownhostsfile"] == str(host.known_hosts)
    assert settings["identityfile"] == str(host.key) and settings["user"] == "numalab-test"
    assert "proxycommand" not in settings
    elsewhere = subprocess.run([str(host.ssh_wrapper), "-G", "example.org"], capture_output=True, text=True)
    assert "proxycommand /bin/false" in elsewhere.stdout


def test_the_uri_is_ssh_to_the_loopback_port_through_the_wrapper(host) -> None:
    uri = host.uri()
    assert uri.startswith("qemu+ssh://numalab-test@127.0.0.1:40123/system?")
    assert f"command={host.ssh_wrapper}" in uri and "no_verify" not in uri
    parts = uri_parts(uri)
    assert parts["transport"] == "ssh" and parts["host"] == "127.0.0.1" and parts["path"] == "/system"
    assert not is_local_uri(uri)  # a forwarded port is another machine


@pytest.mark.parametrize(
    ("uri", "local"),
    [
        ("qemu:///system", True),
        ("qemu+unix:///session?socket=/run/x/libvirt-sock", True),
        ("qemu+ssh://localhost/system", True),
        ("qemu+ssh://lab@127.0.0.1:22/system", True),
        ("qemu+ssh://lab@127.0.0.1:2222/system", False),
        ("qemu+tcp://localhost:16509/system", True),
        ("qemu+tcp://localhost:16600/system", False),
        ("qemu+ssh://lab@box2.example.org/system", False),
    ],
)
def test_which_uris_are_this_machine(uri: str, local: bool) -> None:
    assert is_local_uri(uri) is local


def _boot(port: int) -> BootSpec:
    return BootSpec("bzImage", "initrd", "console=ttyS0", "/r", "/c.log", accel="tcg", cpu="max", ssh_port=port)


def test_the_only_network_is_the_loopback_forward() -> None:
    topo = TopologyRef("ring-2").load()
    from lab.placement.host_inventory import read_inventory  # (the test's host, for a placement)
    from lab.placement.pinning import plan_placement  # (as above)

    placement = plan_placement(topo, read_inventory())
    argv = qemu_argv(topo, placement, _boot(40123))
    nets = [argv[i + 1] for i, a in enumerate(argv) if a == "-netdev"]
    assert nets == ["user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:40123-:22"]
    assert "-nodefaults" in argv and sum(a.startswith("virtio-net-pci") for a in argv) == 1
    plain = qemu_argv(topo, placement, _boot(0))
    assert "-netdev" not in plain and not any("virtio-net" in a for a in plain)


def test_the_outer_init_serves_only_when_asked() -> None:
    init, prepare = outer_init("numalab-test", "--reuid=1001", "/c", "", ssh_port=40123,
                               sshd="/c/tools/openssh-server/9.2/usr/sbin/sshd", sshd_libs="/c/lib")  # fmt: skip
    assert "say serving 40123" in init
    assert "LD_LIBRARY_PATH=/c/lib /c/tools/openssh-server/9.2/usr/sbin/sshd -f /nested/sshd_config" in init
    assert "libvirtd -d -f /nested/libvirtd.conf" in init and "/results/stop" in init
    assert "mount -o loop $R/run/numalab-pool.img $R$P" in init and "seek=1024" in init
    # The script first, its records into the share, then the serving; the records once more at the end.
    assert init.index("say prepared") < init.index("script.sh") < init.index("say script-exit")
    assert init.index("say script-exit") < init.index("partial\n") < init.index("say serving")
    assert init.index("say serving") < init.index("/results/stop") < init.rindex("send\n") < init.index("say done")
    assert 'echo "127.0.1.1 numalab-nested" >> $R/etc/hosts' in init
    assert "^libvirt:" in prepare and "^sshd:" in prepare  # (sshd's own user: the host need not have it)
    plain_init, plain_prepare = outer_init("numalab-test", "--reuid=1001", "/c", "")
    assert "serving" not in plain_init and "sshd" not in plain_init and "/results/stop" not in plain_init
    # KVM's static keys held still from the serving's start only (the script's VMs run as they always had)
    assert init.index("say script-exit") < init.index("\nhold_kvm\n") < init.index("say serving")
    assert "\nhold_kvm\n" not in plain_init
    assert "libvirt" not in plain_prepare
    # Either way: a copy of the records every PARTIAL_S while the guest runs, and a failure sends them.
    for text in (init, plain_init):
        assert (
            f"while sleep {nested_init.PARTIAL_S}; do partial; done" in text
            and f"/results/{nested_init.PARTIAL}" in text
        )
        assert "fail() { say failed" in text and "send; poweroff -f; }" in text


def test_the_guest_sshd_takes_one_users_key_and_no_password(host) -> None:
    files = {e.path: e.data for e in nested_ssh.guest_files(host, "/nested-out")}
    assert files["nested/authorized_keys"] == host.key.with_suffix(".pub").read_bytes()
    assert files[f"nested/{nested_ssh.HOST_KEY}"] == host.host_key.read_bytes()
    conf = files["nested/sshd_config"].decode()
    for line in ("AllowUsers numalab-test", "PermitRootLogin no", "PasswordAuthentication no",
                 "AuthorizedKeysFile /nested/authorized_keys", f"HostKey /nested/{nested_ssh.HOST_KEY}"):  # fmt: skip
        assert line in conf.splitlines(), line
    libvirtd = files["nested/libvirtd.conf"].decode()
    assert 'unix_sock_group = "libvirt"' in libvirtd and 'unix_sock_rw_perms = "0770"' in libvirtd


def test_a_missing_server_is_one_line_before_any_boot(tmp_path: Path) -> None:
    from lab.errors import LabError

    for path in nested_ssh.GUEST_TOOLS:
        (tmp_path / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path.lstrip("/")).touch()
    nested_ssh.check_guest_tools(tmp_path)
    assert "/usr/sbin/sshd" not in nested_ssh.GUEST_TOOLS  # (the cache's: lab.host.sshd_prefix)
    (tmp_path / "usr/sbin/libvirtd").unlink()
    with pytest.raises(LabError, match=r"/usr/sbin/libvirtd: not found; install libvirt-daemon-system \(make setup\)"):
        nested_ssh.check_guest_tools(tmp_path)


def test_libvirt_host_on_the_command_line_needs_no_command_but_a_real_user() -> None:
    from common import REPO, assert_one_line_error, numalab

    before = set(REPO.glob("numalab-nested-*"))
    proc = numalab("nested", "--libvirt-host", "--user", "no-such-user-here", timeout=120)
    assert_one_line_error(proc, "--user no-such-user-here: no such user on this host")
    assert set(REPO.glob("numalab-nested-*")) == before  # (no empty default --out left behind)


def test_the_records_come_back_whole_or_as_the_last_copy(tmp_path: Path) -> None:
    import io
    import tarfile

    def tar(path: Path, files: dict[str, bytes]) -> None:
        with tarfile.open(path, "w") as tf:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))

    share, out = tmp_path / "share", tmp_path / "out"
    share.mkdir()
    out.mkdir()
    assert nested.unpack_records(share, out) == "none"
    tar(share / nested_init.PARTIAL, {"./script.log": b"half"})
    assert nested.unpack_records(share, out) == "partial" and (out / "script.log").read_bytes() == b"half"
    tar(share / nested_init.PARTIAL, {"./script.log": b"half"})
    tar(share / nested_init.TAR, {"./script.log": b"all", "./sshd.log": b"x"})
    assert nested.unpack_records(share, out) == "all" and (out / "script.log").read_bytes() == b"all"
    assert not list(share.iterdir())  # (both copies taken away)
    (share / nested_init.TAR).write_bytes(b"cut short")  # a final tar cut short: the last copy does
    tar(share / nested_init.PARTIAL, {"./libvirtd.log": b"y"})
    assert nested.unpack_records(share, out) == "partial" and (out / "libvirtd.log").read_bytes() == b"y"


def test_the_sshd_prefix_is_the_newest_complete_one_with_its_libraries_first(tmp_path: Path) -> None:
    assert sshd_prefix.find(tmp_path) is None
    half = tmp_path / "9.2p1-1"
    (half / "usr/sbin").mkdir(parents=True)
    (half / "usr/sbin/sshd").touch()
    assert sshd_prefix.find(tmp_path) is None  # (no .complete: an unpack cut short)
    (half / ".complete").touch()
    assert sshd_prefix.find(tmp_path) == half
    assert sshd_prefix.library_path(half) == f"{half}/lib/x86_64-linux-gnu:{half}/usr/lib/x86_64-linux-gnu"
    assert sshd_prefix.PACKAGES == ("openssh-server", "libwrap0")


def test_a_qemus_threads_as_the_host_sees_them() -> None:
    import os
    import sys

    name = f"numalab-nested-test-{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-name", name])
    try:
        seen = None
        for _ in range(50):  # (until the child has exec'd)
            seen = nested.qemu_threads(name, window_s=0.2)
            if seen is not None:
                break
        assert seen is not None and seen["pid"] == proc.pid
        main = seen["threads"][0]
        assert main["tid"] == proc.pid and main["state"] in "SR" and main["busy"] is not None and main["busy"] < 0.5
    finally:
        proc.kill()
        proc.wait()
    assert nested.qemu_threads(name, window_s=0.0) is None


def test_nested_without_out_leaves_its_default_directory_to_the_library(tmp_path: Path, monkeypatch) -> None:
    """The default --out (a new numalab-nested-* here) is free when the library makes it: it stopped on
    FileExistsError when the CLI had made it first."""
    import os

    from lab.cli.main import build_parser

    seen = {}

    def fake_run_nested(topo, script, out, *_rest):
        seen["existed"] = out.exists()
        out.mkdir(parents=True, exist_ok=False)  # (as the real one does)
        (out / "console.log").touch()
        return nested.NestedResult(0, {"booted": "4", "done": ""}, 1.0, out, out / "console.log", False)

    monkeypatch.setattr(nested, "run_nested", fake_run_nested)
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["nested", "--json", "--", "true"])
    assert args.func(args) == 0
    made = [p for p in os.listdir(tmp_path) if p.startswith("numalab-nested-")]
    assert seen == {"existed": False} and len(made) == 1, (seen, made)


def test_a_silent_outer_console_stops_the_guest_once(tmp_path: Path) -> None:
    """The init marks "alive" every ALIVE_S; a console that stops growing for SILENT_S is a guest that has
    stopped (every CPU trapping, or none woken): the watch sets the stop once, and says how long it waited."""
    console = tmp_path / "console.log"
    stop, said = nested.threading.Event(), []
    watch = nested._Silence(console, stop, said.append, silent_s=100.0)
    watch(0.0)  # (no console yet: silent from here)
    console.write_text("booting\n")
    watch(50.0)  # grew: the silence starts again
    watch(149.0)
    assert not stop.is_set() and watch.silent_s is None
    with console.open("a") as f:
        f.write(f"{nested_init.MARK} alive\n")
    watch(160.0)
    watch(259.0)
    assert not stop.is_set()
    watch(261.0)
    assert stop.is_set() and watch.silent_s == 101.0 and len(said) == 1 and "silent for 101s" in said[0]
    watch(400.0)
    assert len(said) == 1 and watch.silent_s == 101.0  # once


def test_the_outer_init_marks_it_is_alive_and_the_tail_leaves_that_out(tmp_path: Path) -> None:
    init, _prepare = outer_init("u", "--reuid=1000", "/c", "")
    assert f"while sleep {nested_init.ALIVE_S}; do say alive; done" in init
    console = tmp_path / "console.log"
    console.write_text(f"{nested_init.MARK} booted 2\n{nested_init.MARK} alive\n| hello\n{nested_init.MARK} done\n")
    heard: list[str] = []
    nested._ConsoleTail(console, heard.append)(0.0)
    assert heard == ["[outer] booted 2", "hello", "[outer] done"]


def test_root_in_its_own_cache_hides_only_this_hosts_verdicts_and_calibrations() -> None:
    _init, prepare = outer_init("root", "--reuid=0", "/root/.cache/numalab", "/root/.cache/numalab")
    assert nested_init.HOST_OWN == ("accel", "tcg-lpj.json", "tcg-tsc.json")
    assert 'for e in accel tcg-lpj.json tcg-tsc.json; do rm -rf "$C/$e"; done' in prepare
    assert '[ -n "$OWN" ] || chown -R "$U:" "$C"' in prepare  # (no copy-up of root's whole cache)


def test_the_host_lists_what_the_guests_user_cannot_read_and_prepare_opens_those(tmp_path: Path) -> None:
    """The cache entries the outer guest's user gets are opened from a list the host made (a walk over 9p took
    27 of the 44 s of a whole outer run): closed directories and files of complete entries, links followed."""
    c = tmp_path / "cache"
    done = c / "kernels" / "builds" / "b1"
    (done / "sub").mkdir(parents=True)
    (done / "meta.json").write_text("{}")
    (done / "sub" / "bzImage").write_text("x")
    (done / "sub" / "bzImage").chmod(0o600)
    done.chmod(0o700)
    half = c / "kernels" / "builds" / "b2"  # (no meta.json: not linked, so not opened)
    half.mkdir()
    half.chmod(0o700)
    (c / "images").mkdir()
    (c / "images" / "a.cpio").write_text("x")
    (c / "images" / "a.cpio").chmod(0o640)
    (c / "images" / "open.cpio").write_text("x")
    (c / "workloads" / "w").mkdir(parents=True)
    (c / "workloads" / "w" / ".complete").write_text("")
    (c / "workloads" / "w" / "in-build").symlink_to(done / "sub")  # (followed, as find -L did)
    (done / "sub" / "up").symlink_to(done)  # (a loop: walked once, not for ever)
    closed = nested_init.closed_to_others(c)
    link = c / "workloads" / "w" / "in-build"  # (each link to the closed b1 is listed: chmod follows it there)
    want = [done, done / "sub" / "bzImage", done / "sub" / "up", c / "images" / "a.cpio", link / "bzImage", link / "up"]
    assert sorted(closed) == sorted(map(str, want)), closed
    assert nested_init.closed_to_others(None) == [] and nested_init.closed_to_others(tmp_path / "none") == []
    _init, prepare = outer_init("u", "--reuid=1000", "/c", str(c))
    assert f"xargs -0 -r chmod o+rX < /nested/{nested_init.CLOSED}" in prepare and "find -L" not in prepare
    initrd = nested_init.outer_initrd(tmp_path, "#!/bin/sh\n", prepare, "true\n", None, closed=closed)
    assert b"\0".join(p.encode() for p in closed) in initrd.read_bytes()
