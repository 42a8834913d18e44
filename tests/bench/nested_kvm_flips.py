"""The nested tier's int3 freeze, reproduced: libvirt KVM probe domains in a row on one serving outer guest.

    .venv/bin/python tests/bench/nested_kvm_flips.py [-n N] [--qemu system|backports|PATH] [--hold on|off]
                                                     [--out DIR] [--domain-bound S]

One outer guest (``numalab nested --libvirt-host``'s: ring-2, 2 CPUs and 3 GiB a node, no script, as the
nested tier's 2-node guest serves) boots on the chosen QEMU (``--qemu``, resolved as ``numalab run --qemu``;
default the system's). Once it serves, N KVM probe domains are started on it one after another, each the
probe ``numalab run --accel auto`` starts on a libvirt host (lab.host.accel.probe through
lab.vm.libvirt.libvirt_backend.LibvirtBackend over the guest's qemu+ssh URI): a 1-vCPU transient domain of type kvm
whose init prints a marker and powers off. Each domain's start and end are inner KVM's first VM and last, so KVM
flips its static keys (preempt_notifier_key in finish_task_switch, apic_sw_disabled) twice a domain, by
text_poke_bp, unless the guest holds a KVM VM of its own while it serves, as it does by default
(lab.host.nested hold_kvm). ``--hold off`` sets NUMALAB_NESTED_NO_KVM_HOLD=1, the reproduction knob that
skips that hold: not a user option, only for this (docs/tcg.md, "The cause, found").

Printed: each domain's start and end (UTC), its seconds and outcome, and at the end how many ended before a
freeze. A freeze: the outer console's "alive" mark (every 30 s from the init) missing for --frozen-after
seconds, or a domain that has not ended within --domain-bound seconds, or the outer guest ending by itself.
At a freeze the outer QEMU's threads are read from /proc (lab.host.nested.qemu_threads: each thread's state
and how busy it was; a vCPU at 1.0 is running, at 0 is waiting) into DIR/freeze-threads.json, the console's
soft-lockup lines are counted and the functions its backtraces name first are printed; the outer guest is then
stopped as at its timeout (its vCPUs read through QMP into DIR/outer/.outer/hang.json). Everything is bounded:
each domain, the outer guest's life (--outer-timeout), its stop. Figures, not a test: docs/tcg.md has the
runs and what they showed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # this checkout's lab, whatever the venv's editable install points at
sys.path.insert(0, str(REPO / "tests"))

from lab.host.nested import MARK  # noqa: E402  (after the path)
from lab.vm.console import LineFollower  # noqa: E402

ALIVE = f"{MARK} alive"


def utc(t: float | None = None) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t))


def say(msg: str) -> None:
    print(f"{utc()} {msg}", flush=True)


def probe_once(uri: str, kernel: str) -> int:
    """One KVM probe domain on the libvirt host ``uri`` (a child process, so a hung libvirt call can be killed)."""
    from lab.errors import LabError
    from lab.host.accel import probe
    from lab.vm.libvirt.libvirt_backend import LibvirtBackend

    t0 = time.monotonic()
    try:
        res = probe("kvm", Path(kernel), backend=LibvirtBackend(uri))
    except LabError as err:  # (the host unreachable before the domain: kvm_missing asks it first)
        res = {"ok": False, "seconds": round(time.monotonic() - t0, 2), "detail": str(err)}
    print(json.dumps(res), flush=True)
    return 0


class ConsoleWatch:
    """The outer console, read as it grows: when the init's last "alive" mark came, and the kernel's reports."""

    def __init__(self, console: Path) -> None:
        self.console = LineFollower(console, 1 << 22)
        self.last_alive = time.monotonic()
        self.lockups = 0  # "soft lockup" reports
        self.functions: Counter[str] = Counter()  # the first function of each backtrace's RIP line
        self.tail: list[str] = []

    def poll(self) -> None:
        for line in self.console.new_lines():
            if line.startswith(ALIVE):
                self.last_alive = time.monotonic()
            if "soft lockup" in line:
                self.lockups += 1
            m = re.search(r"RIP: 0010:([A-Za-z0-9_.]+\+0x[0-9a-f]+)", line)
            if m:
                self.functions[m.group(1)] += 1
            if not line.startswith("| ") and line.strip():
                self.tail = (self.tail + [line])[-40:]

    def silent_s(self) -> float:
        return time.monotonic() - self.last_alive


def run_domain(uri: str, kernel: str, bound_s: float, watch: ConsoleWatch, frozen_after_s: float, ended) -> dict:
    """One probe domain, in a child process: {"ok", "detail", "seconds", "freeze"}; ``freeze`` names why the
    outer guest was taken for frozen (then the child was killed), else None."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, __file__, "--probe", uri, kernel], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    freeze = None
    while proc.poll() is None:
        time.sleep(1.0)
        watch.poll()
        if watch.silent_s() > frozen_after_s:
            freeze = f"no 'alive' mark on the outer console for {watch.silent_s():.0f}s"
        elif time.monotonic() - t0 > bound_s:
            freeze = f"the domain had not ended after {bound_s:.0f}s"
        elif ended.is_set():
            freeze = "the outer guest ended by itself (its own silence check, or its timeout)"
        if freeze:
            os.killpg(proc.pid, signal.SIGKILL)  # (the child and its ssh)
            break
    out, err = proc.communicate(timeout=30)
    seconds = round(time.monotonic() - t0, 1)
    if freeze:
        return {"ok": False, "detail": freeze, "seconds": seconds, "freeze": freeze}
    try:
        res = json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        res = {"ok": False, "detail": f"the probe printed no verdict (exit {proc.returncode}): {err.strip()[-300:]}"}
    return {"ok": bool(res.get("ok")), "detail": res.get("detail", ""), "seconds": seconds, "freeze": None}


def main() -> int:
    p = argparse.ArgumentParser(description="libvirt KVM probe domains in a row on one serving outer guest")
    p.add_argument("-n", "--domains", type=int, default=20, help="domains to start, one after another (default 20)")
    p.add_argument("--qemu", default="", help="the outer guest's QEMU: system, backports or a path (as run's)")
    p.add_argument("--hold", choices=("on", "off"), default="on",
                   help="the serving guest holds a KVM VM (on: numalab's default) or not (off)")  # fmt: skip
    p.add_argument("--out", type=Path, help="where the outer guest's records and flips.json go (default: a new dir)")
    p.add_argument("--domain-bound", type=float, default=420.0, help="seconds a domain may take (default 420)")
    p.add_argument("--frozen-after", type=float, default=150.0,
                   help="seconds without the console's 'alive' mark taken for a freeze (default 150)")  # fmt: skip
    p.add_argument("--outer-timeout", type=float, default=0.0,
                   help="the outer guest's whole life (default: 1800 s and every domain's bound)")  # fmt: skip
    p.add_argument("--user", default="numalab-test", help="the ordinary user the libvirt host serves (as the tests)")
    p.add_argument("--probe", nargs=2, metavar=("URI", "KERNEL"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.probe:
        return probe_once(*args.probe)

    from common import ordinary_user

    from lab.host import nested
    from lab.kernel.resolve import resolve_kernel
    from lab.paths import json_text
    from lab.topology.model.ref import TopologyRef
    from lab.vm.qemu.emulator import resolve

    if args.hold == "off":
        os.environ[nested.NO_KVM_HOLD_ENV] = "1"
    else:
        os.environ.pop(nested.NO_KVM_HOLD_ENV, None)
    emulator = resolve(args.qemu)
    kernel = str(resolve_kernel("stock").image)
    user = ordinary_user(args.user)
    out = args.out or Path(f"nested-flips-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    out.mkdir(parents=True, exist_ok=False)
    topo = TopologyRef("ring-2", cpus_per_node=2, mem_per_node="3G").load()
    outer_timeout = args.outer_timeout or 1800.0 + args.domains * args.domain_bound
    say(f"outer QEMU {emulator.short_version} ({emulator.binary}), hold {args.hold}, {args.domains} domains, "
        f"domain bound {args.domain_bound:.0f}s, freeze after {args.frozen_after:.0f}s without 'alive'")  # fmt: skip
    record: dict = {"qemu": emulator.short_version, "qemu_binary": emulator.binary, "hold": args.hold,
                    "domains_asked": args.domains, "started_at": utc(), "domains": [], "freeze_at": None}  # fmt: skip

    def write() -> None:
        (out / "flips.json").write_text(json_text(record, indent=2) + "\n")

    guest = nested.OuterGuest(user=user, emulator=emulator, progress=say, echo=lambda line: say(f"  {line}"))
    with nested.libvirt_host(topo, out / "outer", "", guest, outer_timeout) as host:
        watch = ConsoleWatch(out / "outer" / "console.log")
        watch.poll()
        marks = nested.parse_marks((out / "outer" / "console.log").read_text(errors="replace"))
        record["ready_s"], record["held"] = host.ready_s, "kvm-held" in marks
        say(f"serving after {host.ready_s:.0f}s: {host.uri.split('?')[0]}; KVM VM held: {record['held']} "
            f"(marks: {', '.join(k for k in marks if k.startswith('kvm-'))})")  # fmt: skip
        for i in range(1, args.domains + 1):
            start = time.time()
            res = run_domain(host.uri, kernel, args.domain_bound, watch, args.frozen_after, host.ended)
            end = time.time()
            res |= {"domain": i, "start": utc(start), "end": utc(end)}
            record["domains"].append(res)
            outcome = "ok" if res["ok"] else ("FREEZE" if res["freeze"] else "failed")
            say(f"domain {i}/{args.domains}: start {res['start']} end {res['end']} ({res['seconds']:.0f}s) {outcome}: "
                f"{res['detail']}")  # fmt: skip
            write()
            if res["freeze"]:
                record["freeze_at"] = i
                threads = nested.qemu_threads(nested.outer_name())
                if threads is not None:
                    (out / "freeze-threads.json").write_text(json_text(threads, indent=2) + "\n")
                    cpus = [t for t in threads["threads"] if t["name"].startswith("CPU ")]
                    say("outer vCPU threads: " + ", ".join(f"{t['name']} {t['state']} busy {t['busy']}" for t in cpus))
                time.sleep(5.0)
                watch.poll()
                say(f"outer console: {watch.lockups} soft-lockup reports; RIPs in backtraces: "
                    f"{dict(watch.functions.most_common(5))}")  # fmt: skip
                record["freeze"] = {"lockups": watch.lockups, "rips": dict(watch.functions.most_common(10)),
                                    "console_tail": watch.tail[-20:]}  # fmt: skip
                nested.STOP_WAIT_S = 30.0  # (a frozen guest will not end at the stop: no 240 s wait for it)
                break
        record["ended_at"] = utc()
        write()
    res = host.result
    record["outer"] = None if res is None else {"timed_out": res.timed_out, "records": res.records,
                                                "wall_s": res.wall_s, "done": "done" in res.marks}  # fmt: skip
    write()
    ok = sum(1 for d in record["domains"] if d["ok"])
    started = len(record["domains"])
    freeze = f"froze at domain {record['freeze_at']}" if record["freeze_at"] else "no freeze"
    print(f"\nQEMU {emulator.short_version}, hold {args.hold}: {started} domains started, {ok} ok, "
          f"{started - ok - bool(record['freeze_at'])} failed otherwise, {freeze}; "
          f"{started if not record['freeze_at'] else record['freeze_at'] - 1} ended before any freeze "
          f"({out / 'flips.json'})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
