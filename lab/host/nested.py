"""numalab inside a numalab guest: a machine with KVM and several NUMA nodes, made on one that has neither.

TCG emulates AMD SVM with nested paging (``-cpu max``), so a guest booted under TCG can run KVM. The
*outer* guest is a numalab topology (its nodes are the NUMA nodes the inner numalab sees as its host's),
booted with Debian's stock kernel, which loads ``kvm_amd``. Inside it:

* the host's root filesystem is shared read-only over virtio-9p (tag ``hostroot``) and made the outer
  guest's root through an overlay whose upper layer is the guest's own tmpfs: numalab's checkout, its
  venv, QEMU and trace-cmd are the host's own files, every write stays in the guest's memory, and
  nothing on the host changes except what comes back through the results share;
* ``/dev/kvm`` belongs to group ``kvm`` (0660, as Debian's udev rule makes it) and the user is added to
  that group (in the overlay's ``/etc/group``);
* the script runs as that user through ``setpriv --reset-env``: an ordinary user's PATH
  (``/usr/local/bin:/bin:/usr/bin``, no ``/usr/sbin``), its own HOME and groups;
* what the script writes to ``$NESTED_OUT`` comes back as ``nested.tar``, unpacked into ``out``.

A ``cache_from`` directory (the calling user's numalab cache, by default) is laid under the inner
user's cache: each of its entries is a link there, read-only, so the stock kernel and built kernels
are not fetched or built again inside; whatever the inner numalab makes anew is its own. The inner
guest runs at TCG speed (KVM over TCG), so the tier proves paths, not speed.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from lab.errors import LabError
from lab.host import nested_ssh, sshd_prefix
from lab.host.nested_init import MARK, NESTED_OUT, PARTIAL, STOP, TAR, closed_to_others, outer_init, outer_initrd
from lab.kernel.resolve import resolve_kernel
from lab.paths import cache_root, json_text
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import Placement, plan_placement
from lab.record_files import CONSOLE_LOG, QEMU_LOG
from lab.topology.model.topology import Topology
from lab.vm.backend import BootSpec, VmRequest
from lab.vm.console import LineFollower, VmOutcome
from lab.vm.qemu.emulator import Emulator, qemu_version_tuple
from lab.vm.qemu.emulator import resolve as resolve_emulator
from lab.vm.qemu.qemu_backend import QemuBackend
from lab.vm.share import ShareLimits, make_share

# A console silent this long (8 "alive" marks missed) is an outer guest that has stopped: every CPU trapping, or
# none woken (a freeze of TCG running KVM, docs/tcg.md). It is stopped as at its timeout, its state read first,
# instead of holding the caller until the timeout (35 min in the nested tests).
SILENT_S = 240.0
# The outer guest's init says "booted" within 5-60 s (a quiet host; a host at load 7-8). One that has not by then
# is stopped and booted once more, as a run's TCG boot is (lab.run.boot): once a QEMU 10 outer guest of ring-2 stopped
# early in its kernel's boot (2026-11-29, make test), CPU 1's timer never firing (RCU stall reports every 21 s, the
# console never silent), until its 2,100 s timeout. The stalled boot is kept (``boot_stalls``, .outer-stalled-N).
OUTER_BOOT_DEADLINE_S = 300.0
OUTER_BOOT_ATTEMPTS = 2
OUTPUT_LIMIT = 1 << 30  # what the outer guest may send back
# A reproduction knob, not a user option (tests/bench/nested_kvm_flips.py, docs/tcg.md): set to 1, a libvirt host's
# outer guest does not hold its KVM VM while it serves (hold_kvm below), so KVM's static keys flip again at each
# inner domain's first VM and last, as they did before the int3 freeze was found.
NO_KVM_HOLD_ENV = "NUMALAB_NESTED_NO_KVM_HOLD"
# A QEMU before 8.1 can go on running, under its multi-threaded TCG, a translation of guest code that another vCPU
# has just rewritten (upstream's fix: "accel/tcg: Always lock pages before translation", in 8.1.0). An outer guest
# patches its kernel's code at each inner KVM VM's first start and last end (a jump label in __schedule: by our
# reading KVM's preempt_notifier_key), and on QEMU 7.2 every CPU of one then took an int3 at that site for good
# (docs/tcg.md, "The outer guest's int3 freeze").
STALE_CODE_FIXED = (8, 1, 0)


@dataclass(frozen=True)
class NestedResult:
    exit_code: int | None  # the script's, None when it never ran to its end
    marks: dict[str, str]  # the outer init's marks, by name (booted, prepared, script-exit, done, failed)
    wall_s: float
    out: Path
    console: Path
    timed_out: bool
    records: str = "all"  # what came back: "all" (the guest sent them at its end), "partial" (its last copy), "none"
    hang: dict | None = None  # at a timeout: the outer QEMU's state (lab.vm.hang), also in .outer/hang.json
    silent_s: float | None = None  # stopped because its console had been silent this long (SILENT_S), else None
    # QEMU itself failed (did not start, exited with an error, was killed: lab.vm.console.VmOutcome.vm_failure),
    # with what it said in ``qemu_log``; None when it ran and ended as a VM does
    vm_failure: str | None = None
    qemu_log: Path | None = None
    qemu: dict | None = None  # the outer QEMU: {"binary", "version"} (lab.vm.qemu.emulator)
    # boots given up at OUTER_BOOT_DEADLINE_S before the one above, each {"attempt", "deadline_s", "kept"}
    boot_stalls: tuple[dict, ...] = ()

    def lines(self, topology: str) -> list[str]:
        """What became of the outer guest, for a person: a QEMU that failed says so and why, in one line (the
        guest never booted, so there is no command's exit to give), else the boot, the command's exit and
        where its records are, then a failure mark or the stop at a timeout."""
        where = f" (QEMU's output: {self.qemu_log})" if self.qemu_log else ""
        if self.qemu:
            topology = f"{topology} (QEMU {self.qemu.get('version', '?')})"
        if self.vm_failure and "booted" not in self.marks:
            return [f"outer guest: {topology}: its QEMU failed before the guest booted: {self.vm_failure}{where}; "
                    "the command never ran"]  # fmt: skip
        exited = "never ran to its end" if self.exit_code is None else f"exited {self.exit_code}"
        lines = [f"outer guest: boot {st['attempt']} stalled (no init's booted after {st['deadline_s']:.0f}s; kept "
                 f"in {st['kept']}); booted again" for st in self.boot_stalls]  # fmt: skip
        lines += [f"outer guest: {topology}, booted ({self.marks.get('booted', '?')}); the command {exited} after "
                 f"{self.wall_s:.0f}s in all; what it wrote to $NESTED_OUT is in {self.out}"]  # fmt: skip
        if self.vm_failure:
            lines.append(f"outer guest: its QEMU failed: {self.vm_failure}{where}")
        if self.marks.get("failed"):
            lines.append(f"outer guest failed: {self.marks['failed']} (its console: {self.console})")
        if self.timed_out:
            at = f"; its QEMU's state in {self.out / '.outer' / 'hang.json'}" if self.hang else ""
            got = {"partial": "its last copy of its records", "all": "all its records"}.get(self.records, "no records")
            silent = self.silent_s is not None
            why = f"after its console was silent for {self.silent_s:.0f}s" if silent else "at its timeout"
            lines.append(f"outer guest stopped {why}; {got} came back{at}")
        return lines


def _user(name: str | None) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name) if name else pwd.getpwuid(os.getuid())
    except KeyError:
        raise LabError(f"--user {name}: no such user on this host") from None


def parse_marks(console: str) -> dict[str, str]:
    """The outer init's ``NUMALAB-NESTED name value...`` lines, the last of each name."""
    marks: dict[str, str] = {}
    for line in console.splitlines():
        if line.startswith(MARK + " "):
            name, _, rest = line[len(MARK) + 1 :].partition(" ")
            marks[name] = rest.strip()
    return marks


class _ConsoleTail:
    """An on_tick that passes the console's new script lines ("| ...") and marks to ``echo``."""

    def __init__(self, console: Path, echo) -> None:
        self.console, self.echo = LineFollower(console, 1 << 20), echo

    def __call__(self, _now: float) -> None:
        for line in self.console.new_lines():
            if line.startswith("| "):
                self.echo(line[2:])
            elif line.startswith(MARK + " ") and line != f"{MARK} alive":
                self.echo(f"[outer] {line[len(MARK) + 1 :]}")


class _Silence:
    """An on_tick that sets ``stop`` once the console has not grown for ``silent_s`` (the init's "alive" mark
    comes every ALIVE_S while the guest runs at all); ``silent_s`` is then how long it had been."""

    def __init__(self, console: Path, stop: threading.Event, say=None, silent_s: float = SILENT_S) -> None:
        self.console, self.stop, self.say, self.limit = console, stop, say, silent_s
        self.size, self.since, self.silent_s = -1, 0.0, None

    def __call__(self, now: float) -> None:
        try:
            size = self.console.stat().st_size
        except OSError:
            size = 0
        if size != self.size:
            self.size, self.since = size, now
        elif self.silent_s is None and now - self.since > self.limit:
            self.silent_s = round(now - self.since, 1)
            if self.say:
                self.say(f"outer guest: its console silent for {self.silent_s:.0f}s: it has stopped; stopping it")
            self.stop.set()


def outer_name() -> str:
    """The outer QEMU's ``-name`` (one outer guest a numalab process)."""
    return f"numalab-nested-{os.getpid()}"


def qemu_threads(name: str, window_s: float = 1.0) -> dict | None:
    """The threads of the QEMU whose ``-name`` is ``name``, as this host sees them: each one's name, state,
    where in the kernel it waits (``wchan``) and the share of ``window_s`` it ran. What the guest cannot say
    when it hangs: whether QEMU's main loop (9p, user networking, the monitor) still runs. None: no such QEMU."""
    want = f"\0-name\0{name}\0".encode()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if want in (proc / "cmdline").read_bytes():
                break
        except OSError:
            continue
    else:
        return None

    def ticks() -> dict[str, tuple[str, str, int]]:
        out = {}
        for task in (proc / "task").glob("*"):
            try:
                stat = (task / "stat").read_text()
                comm = stat[stat.index("(") + 1 : stat.rindex(")")]
                fields = stat[stat.rindex(")") + 2 :].split()
                out[task.name] = (comm, fields[0], int(fields[11]) + int(fields[12]))
            except (OSError, ValueError, IndexError):
                continue
        return out

    hz = os.sysconf("SC_CLK_TCK")
    before = ticks()
    time.sleep(window_s)
    after = ticks()
    threads = []
    for tid, (comm, state, t) in sorted(after.items(), key=lambda kv: int(kv[0])):
        try:
            wchan = (proc / "task" / tid / "wchan").read_text().strip()
        except OSError:
            wchan = ""
        ran = (t - before[tid][2]) / hz / window_s if tid in before else None
        threads.append({"tid": int(tid), "name": comm, "state": state, "wchan": wchan,
                        "busy": None if ran is None else round(ran, 2)})  # fmt: skip
    return {"pid": int(proc.name), "threads": threads}


def unpack_records(share: Path, out: Path, progress=None) -> str:
    """The guest's records from its share into ``out``: "all" (the tar it sent at its end), else "partial"
    (its last copy), else "none"; both tars are removed."""
    records = "none"
    for name, kind in ((TAR, "all"), (PARTIAL, "partial")):
        tar = share / name
        if records == "none" and tar.exists():
            try:
                with tarfile.open(tar) as tf:
                    tf.extractall(out, filter="data")
                records = kind
            except (tarfile.TarError, OSError) as err:  # (a copy cut short: the other one may do)
                if progress:
                    progress(f"outer guest: {name}: {err}")
        tar.unlink(missing_ok=True)
    return records


@dataclass(frozen=True)
class OuterGuest:
    """Who the outer guest's script runs as and what it is booted with, for :func:`run_nested` and
    :func:`libvirt_host`: ``user`` (default: the caller), ``cache_from`` (the numalab cache laid under the inner
    user's, read-only; default: the caller's), ``emulator`` (the outer QEMU; default: as ``numalab run``'s,
    $NUMALAB_QEMU else the system's: lab.vm.qemu.emulator); ``progress`` hears what a person is told, ``echo``
    each line of the script's output as the console shows it, and the outer init's marks."""

    user: str | None = None
    cache_from: Path | None = None
    emulator: Emulator | None = None
    progress: Callable[[str], None] | None = None
    echo: Callable[[str], None] | None = None


def run_nested(
    topo: Topology,
    script: str,
    out: Path,
    guest: OuterGuest = OuterGuest(),
    timeout_s: float = 900.0,
    ssh: nested_ssh.SshHost | None = None,
    cancel: threading.Event | None = None,
) -> NestedResult:
    """Boot ``topo`` under TCG with SVM, run ``script`` (bash, in the repository) inside it as ``guest.user``,
    and unpack what it wrote to ``$NESTED_OUT`` into ``out`` (:class:`OuterGuest` says who hears what). With
    ``ssh`` (lab.host.nested_ssh, made for the same user) the guest is also a libvirt host, served until
    ``out/.outer/share/stop`` exists (:func:`libvirt_host` does this). ``cancel``, once set, stops the guest as
    its timeout would. The inner numalab chooses its own QEMU among the host's files (its environment is reset:
    the system QEMU unless the script asks for another).

    A guest stopped at its timeout (or by ``cancel``) brings back its last copy of the records
    (``records`` "partial"), and the outer QEMU's state at the stop (``hang``: its vCPUs' instruction
    pointers and how busy their threads were, lab.vm.hang)."""
    who = _user(guest.user)
    emulator = guest.emulator or resolve_emulator()
    progress = guest.progress
    if ssh is not None and ssh.user != who.pw_name:
        raise LabError(f"nested: the ssh keys are for {ssh.user}, the script runs as {who.pw_name}")
    out.mkdir(parents=True, exist_ok=False)
    work = out / ".outer"
    placement = plan_placement(topo, read_inventory(), pinning="node")
    if progress:
        progress(
            f"outer guest: {topo.name}, {topo.n_nodes} nodes, {topo.total_cpus} vCPUs under TCG with SVM "
            f"(QEMU {emulator.short_version}, {emulator.binary})"
        )
        if note := stale_code_note(emulator):
            progress(note)
    t0 = time.monotonic()
    guest = replace(guest, emulator=emulator)  # (each boot the same QEMU)
    stalls: list[dict] = []
    for attempt in range(1, OUTER_BOOT_ATTEMPTS + 1):
        boot = _outer_boot(who, script, out, guest.cache_from, ssh, progress)
        deadline = OUTER_BOOT_DEADLINE_S if attempt < OUTER_BOOT_ATTEMPTS else None
        outcome, silence, stalled = _run_outer(topo, placement, boot, work, timeout_s, guest, cancel, deadline)
        if not stalled:
            break
        kept = out / f".outer-stalled-{attempt}"
        work.rename(kept)
        Path(boot.console_log).rename(kept / CONSOLE_LOG)
        stalls.append({"attempt": attempt, "deadline_s": deadline, "kept": str(kept)})
        if progress:
            progress(f"outer guest: boot {attempt} stalled (no init after {deadline:.0f}s; kept in {kept}); "
                     "booting again")  # fmt: skip
    wall = time.monotonic() - t0
    console = Path(boot.console_log)
    marks = parse_marks(console.read_text(errors="replace") if console.exists() else "")
    records = unpack_records(Path(boot.results_dir), out, progress)
    if outcome.hang_state is not None:
        (work / "hang.json").write_text(json_text(outcome.hang_state, indent=2))
    code = marks.get("script-exit")
    return NestedResult(int(code) if code and code.isdigit() else None, marks, round(wall, 1), out, console,
                        outcome.timed_out, records, outcome.hang_state, silence.silent_s, outcome.vm_failure,
                        work / QEMU_LOG, {"binary": emulator.binary, "version": emulator.short_version},
                        tuple(stalls))  # fmt: skip


def _run_outer(topo: Topology, placement: Placement, boot: BootSpec, work: Path, timeout_s: float, guest: OuterGuest,
               cancel: threading.Event | None,
               boot_deadline_s: float | None) -> tuple[VmOutcome, _Silence, bool]:  # fmt: skip
    """One boot of the outer guest to its end: its outcome, its silence watch, and whether it was stopped at
    ``boot_deadline_s`` (None: no deadline) with its init never having said "booted" (the caller boots again)."""
    console = Path(boot.console_log)
    tail = _ConsoleTail(console, guest.echo) if guest.echo else None
    stop = threading.Event()  # (this boot's: a stall stops it, not the caller's cancel)
    silence = _Silence(console, stop, guest.progress)
    booted = [False]
    stalled = [False]

    def tick(now: float) -> None:
        if tail:
            tail(now)
        silence(now)
        if cancel is not None and cancel.is_set():
            stop.set()
        if boot_deadline_s is not None and not booted[0]:
            try:
                booted[0] = f"{MARK} booted" in console.read_text(errors="replace")
            except OSError:
                pass
            if not booted[0] and now > boot_deadline_s:
                stalled[0] = True
                stop.set()

    limits = ShareLimits(output_bytes=OUTPUT_LIMIT)
    req = VmRequest(topo, placement, boot, work, timeout_s, limits=limits, on_tick=tick, cancel=stop)
    outcome, _info = QemuBackend(guest.emulator or resolve_emulator()).run(req)
    if tail:
        tail(0.0)
    return outcome, silence, stalled[0]


def _outer_boot(
    who: pwd.struct_passwd,
    script: str,
    out: Path,
    cache_from: Path | None,
    ssh: nested_ssh.SshHost | None,
    progress: Callable[[str], None] | None,
) -> BootSpec:
    """The outer guest's boot: Debian's stock kernel, an initrd with the outer init and ``script`` (run as
    ``who``, its cache over ``cache_from``'s entries), the results share and the console in ``out``, QMP and the
    initrd in ``out/.outer``; the host's root shared read-only, and with ``ssh`` the loopback forward."""
    work = out / ".outer"
    stock = resolve_kernel("stock")
    inner_cache = f"{who.pw_dir}/.cache/numalab" if who.pw_uid else "/root/.cache/numalab"
    cache_src = cache_from if cache_from is not None else cache_root()
    setpriv = f"--reuid={who.pw_uid} --regid={who.pw_gid} --init-groups"  # (root too: setpriv wants a groups option)
    env = f"export NESTED_OUT={NESTED_OUT} NUMALAB_CACHE={shlex.quote(inner_cache)}\n"
    sshd = sshd_prefix.find() if ssh else None
    if ssh and sshd is None:
        raise LabError("nested --libvirt-host: no sshd in numalab's cache (make setup-sshd)")
    hold = os.environ.get(NO_KVM_HOLD_ENV, "") != "1"
    if ssh and not hold and progress:
        progress(f"outer guest: no KVM VM held while it serves (${NO_KVM_HOLD_ENV}=1, a reproduction knob)")
    init, prepare = outer_init(who.pw_name, setpriv, inner_cache, str(cache_src) if cache_src.is_dir() else "",
                               ssh.port if ssh else 0, str(sshd / sshd_prefix.SSHD) if sshd else "",
                               sshd_prefix.library_path(sshd) if sshd else "", hold)  # fmt: skip
    work.mkdir(mode=0o700)  # (the initrd holds the guest's ssh host key)
    closed = closed_to_others(cache_src) if who.pw_uid else []  # (root reads everything)
    initrd = outer_initrd(work, init, prepare, env + script, stock.modules_dir, ssh, closed)
    return BootSpec(
        kernel=str(stock.image),
        initrd=str(initrd),
        # (loglevel=5: warnings and backtraces on the console; a soft lockup there backtraces every CPU)
        cmdline="console=ttyS0 panic=-1 loglevel=5 softlockup_all_cpu_backtrace=1",
        results_dir=str(make_share(work)),
        console_log=str(out / CONSOLE_LOG),
        qmp_socket=str(work / "qmp.sock"),
        accel="tcg",
        name=outer_name(),
        cpu="max",
        host_share="/",
        ssh_port=ssh.port if ssh else 0,
    )


@dataclass
class LibvirtHost:
    """The outer guest serving as a libvirt host: ``ssh`` while it serves, ``result`` once it has ended."""

    ssh: nested_ssh.SshHost
    out: Path
    uri: str
    qemu: dict = field(default_factory=dict)  # the outer QEMU: binary, version
    ready_s: float = 0.0  # host seconds from the boot to libvirtd's socket accepting in the guest
    result: NestedResult | None = None
    # (set when the outer guest's thread ends: an Event, as Python 3.11's Thread.join interrupted by Ctrl-C
    # can take the thread for ended, and the process would then leave, killing QEMU with it)
    ended: threading.Event = field(default_factory=threading.Event, repr=False)

    def wait(self) -> None:
        """Until the outer guest ends (its script's end does not end it: the host's ``stop`` does, or its
        timeout)."""
        while not self.ended.wait(1.0):
            pass


STOP_WAIT_S = 240.0  # from "stop" to the outer guest's end (its records tarred and sent; seconds measured)
CANCEL_WAIT_S = 60.0  # from giving up on it to QEMU's end (its state read, the process killed)


class NotServing(LabError):
    """The outer guest never served libvirt; ``result`` is what it brought back, once it ended."""

    result: NestedResult | None = None


def stale_code_note(emulator: Emulator) -> str | None:
    """One line when ``emulator`` predates the fix of the stale-translation freeze (STALE_CODE_FIXED), else None."""
    version = qemu_version_tuple(emulator.version)
    if version is None or version >= STALE_CODE_FIXED:
        return None
    return (f"note: the outer guest's QEMU {emulator.short_version} can freeze as inner KVM VMs start and end "
            "(its multi-threaded TCG runs stale kernel code; fixed in QEMU 8.1): --qemu backports is QEMU 10 "
            "(make setup-qemu10)")  # fmt: skip


@contextmanager
def libvirt_host(
    topo: Topology, out: Path, script: str = "", guest: OuterGuest = OuterGuest(), timeout_s: float = 3600.0
) -> Iterator[LibvirtHost]:
    """The outer guest booted (as :func:`run_nested`) with sshd and libvirtd inside, yielded once it serves:
    ``uri`` is its ``qemu+ssh://user@127.0.0.1:PORT/system`` with this session's keys and pinned host key
    (lab.host.nested_ssh). ``script`` runs inside as usual first; the guest serves from its end. On
    leaving, the guest is told to stop, its records come back into ``out`` and ``result`` is set; a guest
    that has not ended ``STOP_WAIT_S`` later is stopped, and brings back its last copy of them. The keys
    are deleted. A guest that never serves is :class:`NotServing`. ``guest``: who runs the script and what
    boots the guest (as :func:`run_nested`'s)."""
    who = _user(guest.user)
    emulator = guest.emulator or resolve_emulator()  # (a bad $NUMALAB_QEMU: one line, before any key is made)
    progress = guest.progress
    nested_ssh.check_guest_tools()
    sshd_prefix.fetch(say=progress or (lambda _line: None))  # (once per machine: make setup-sshd does it too)
    keys = Path(tempfile.mkdtemp(prefix="numalab-nested-ssh-"))  # (0700)
    try:
        ssh = nested_ssh.make_ssh_host(keys / "ssh", who.pw_name, nested_ssh.free_loopback_port())
        host = LibvirtHost(ssh, out, ssh.uri(), {"binary": emulator.binary, "version": emulator.short_version})
        outcome: dict = {}
        cancel = threading.Event()

        def boot() -> None:
            try:
                same = replace(guest, user=who.pw_name, emulator=emulator)
                outcome["result"] = run_nested(topo, script, out, same, timeout_s, ssh, cancel)
            except BaseException as err:  # (handed to the caller's thread)
                outcome["error"] = err
            finally:
                host.ended.set()

        thread = threading.Thread(target=boot, name="numalab-nested-libvirt-host", daemon=True)
        t0 = time.monotonic()
        thread.start()
        console = out / CONSOLE_LOG
        try:
            while True:
                marks = parse_marks(console.read_text(errors="replace")) if console.exists() else {}
                if "serving" in marks:
                    host.ready_s = round(time.monotonic() - t0, 1)
                    break
                if "failed" in marks or host.ended.is_set():
                    host.ended.wait(STOP_WAIT_S)  # (a failed guest sends its records and powers off)
                    if "error" in outcome:
                        raise outcome["error"]
                    res = outcome.get("result")
                    qemu = f"its QEMU failed: {res.vm_failure}" if res is not None and res.vm_failure else ""
                    why = marks.get("failed") or qemu or "it ended"
                    err = NotServing(f"nested: the outer guest did not serve libvirt: {why} (its console: {console})")
                    err.result = res
                    raise err
                time.sleep(1.0)
            yield host
        finally:
            share = out / ".outer" / "share"
            if share.is_dir():
                (share / STOP).touch()
            if not host.ended.wait(STOP_WAIT_S):
                if progress:
                    progress(f"outer guest: no end {STOP_WAIT_S:.0f}s after the stop; stopping it")
                seen = qemu_threads(outer_name())
                if seen is not None and (out / ".outer").is_dir():
                    (out / ".outer" / "qemu-threads.json").write_text(json_text(seen, indent=2))
                cancel.set()
                host.ended.wait(CANCEL_WAIT_S)
            host.result = outcome.get("result")
        if "error" in outcome:
            raise outcome["error"]
    finally:
        shutil.rmtree(keys, ignore_errors=True)
