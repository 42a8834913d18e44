"""Hostile guest data for the fuzz tests: shell scripts for the guest init's mutation hook (test fault
``mutate``, lab/guest/settings.py), made here from a seed.

The script's ``numalab_mutate PHASE DIR`` runs in the guest after the real work of each phase: ``readback``
(DIR is the readback directory, before readback.tar is sent), ``results`` (the results directory, before
results.tar) and ``share`` (the results share, after both tars, before guest-done). Contents are carried as
base64 (busybox's base64 -d), so any byte reaches the guest's files exactly.
"""

from __future__ import annotations

import base64
import io
import random
import tarfile

ESC_LINES = (
    b"\x1b]0;pwned title\x07",  # OSC: the window title
    b"\x1b[2J\x1b[H",  # clear the screen
    b"ok\roverwritten",
    b"\x1b]8;;http://example.invalid\x1b\\link\x1b]8;;\x1b\\",
    b"\x9b31m",  # a one-byte CSI
)
HOSTILE_LINES = (
    b"\xff\xfe\xc3(",  # not UTF-8
    b"\x00\x00\x00",
    b"9" * 5000,
    b"-" + b"1" * 5000,
    b"nan",
    b"inf",
    b"1e999",
    b"\xd9\xa1\xd9\xa2",  # Arabic-Indic digits (str.isdigit() says yes)
    b"\xc2\xb2",  # a superscript two (isdigit too)
    b"[" * 100000,
    b"{" * 3000 + b"}" * 3000,
    b"x" * 70000,
    *ESC_LINES,
)
# Lines shaped like each file's own, with values that are not.
SHAPED = {
    "topology.txt": (
        b"/sys/devices/system/node/node1/distance:10 abc",
        b"/sys/devices/system/node/node0/cpulist:0-4294967295",
        b"/sys/devices/system/node/node" + b"7" * 5000 + b"/cpulist:0",
        b"/sys/devices/system/node/node0/meminfo:Node 0 MemTotal: " + b"9" * 5000 + b" kB",
        b"/sys/devices/system/cpu/online:\x1b]0;t\x07",
        b"node 1 distance 10 -5",
        b"node x cpulist 0",
    ),
    "schedstat.txt": (b"domain0 zzz", b"cpu" + b"9" * 5000, b"cpu0 1 2", b"domain99999 ff", b"domain0 " + b"f" * 9000),
    "sched-domains.txt": (b"/sys/kernel/debug/sched/domains/cpu0/domain0/name:\x1b[2J",),
    "tiers.txt": (
        b"/sys/devices/virtual/memory_tiering/memory_tier4/nodelist:0-99999999",
        b"/sys/devices/system/node/node0/access0/initiators/read_latency:\xc2\xb2",
    ),  # fmt: skip
    "dmesg-boot.txt": (
        b"[    0.1] CPU" + b"9" * 5000 + b" attaching sched-domain(s):",
        b"[    0.1] CPU0 attaching sched-domain(s):",
        b"[    0.1]  domain-0: span=0-999999999 level=NUMA",
        b"[    0.1]   groups: 0:{ span=0-4294967295 }, 1:{ span=zz }",
        b"[    0.2] Calibrating delay loop (skipped), value calculated using timer frequency.. 1.0 BogoMIPS"
        b" (lpj=99999999999)",
        b"[    0.2] tsc: Refined TSC clocksource calibration: " + b"9" * 400 + b".0 MHz",
        b"[    0.2] tsc: PIT calibration deviates from HPET: " + b"1" * 5000 + b" 2",
    ),
    "vmstat.start": (b"numa_hint_faults " + b"9" * 5000, b"numa_pages_migrated \xc2\xb2", b"nr_free_pages nan"),
    "vmstat.end": (b"numa_hint_faults -1", b"numa_hint_faults_local 99999999999999999999999999999"),
    "vmstat.series": (b"@ nan", b"@ inf", b"@ " + b"1" * 5000, b"@ 1e999", b"numa_hint_faults zz"),
    "stat.start": (b"cpu" + b"9" * 5000 + b" 1 2 3", b"cpu\xc2\xb2 1 2 3", b"cpu0 " + b"9" * 5000),
    "stat.end": (b"cpu0 x y z", b"cpu1 -1 -1 -1 -1"),
    "trace-stats.txt": (
        b"/sys/kernel/tracing/per_cpu/cpu0/stats:entries: " + b"9" * 5000,
        b"cpu" + b"9" * 5000,
        b"overrun: -1",
    ),  # fmt: skip
    "workload.out": (
        b"NUMALAB_RESULT " + b"[" * 100000,
        b"NUMALAB_RESULT " + b"1" * 5000,
        b"NUMALAB_RESULT [1,2,3]",
        b'NUMALAB_RESULT {"elapsed_s": NaN, "gbps": Infinity}',
        b'NUMALAB_RESULT {"elapsed_s": "fast", "gbps": 1}',
        b'NUMALAB_RESULT {"elapsed_s": 1e999, "gbps": 1}',
        b"Kernel panic - not syncing: a workload said so",
    ),
    "workload.rc": (b"\xc2\xb2", b"9" * 5000),
    "trace-record.rc": (b"0x0", b"9" * 5000),
    "uname.txt": (b"6.1.0\x1b]0;pwned\x07\x1b[2J",),
}
READBACK_FILES = ("uname.txt", "cmdline.txt", "kernel-notes.bin", "topology.txt", "cpus.txt", "tiers.txt",
                  "schedstat.txt", "dmesg-boot.txt", "sched-domains.txt", "knobs.txt")  # fmt: skip
RESULTS_FILES = ("vmstat.start", "vmstat.series", "vmstat.end", "stat.start", "stat.end", "workload.out",
                 "workload.err", "trace-stats.txt", "trace-record.log", "trace-record.rc", "dmesg.txt")  # fmt: skip


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def put(path: str, data: bytes, append: bool = False) -> str:
    """A shell line writing (or appending) ``data`` to ``path`` in the guest."""
    return f"echo {_b64(data)} | base64 -d {'>>' if append else '>'} {path}"


def mutations(rng: random.Random, directory: str, name: str) -> list[str]:
    """One random mutation of the file ``name`` in ``directory`` (shell lines)."""
    path = f"{directory}/{name}"
    pool = SHAPED.get(name, ()) + HOSTILE_LINES
    op = rng.choice(("append", "append", "replace", "sed-number", "sed-garbage", "truncate", "random", "dir", "rm"))
    if op == "append":
        lines = b"\n".join(rng.choice(pool) for _ in range(rng.randint(1, 4)))
        return [put(path, b"\n" + lines + b"\n", append=True)]
    if op == "replace":
        return [put(path, b"\n".join(rng.choice(pool) for _ in range(rng.randint(1, 3))) + b"\n")]
    if op == "sed-number":
        return [f"sed -i 's/[0-9][0-9]*/{'9' * rng.choice((30, 5000))}/{rng.choice(('', 'g'))}' {path}"]
    if op == "sed-garbage":
        return [f"sed -i 's/[0-9]/{rng.choice(('zz', '-', '.', ','))}/{rng.randint(1, 5)}' {path}"]
    if op == "truncate":
        return [f"head -c {rng.randint(0, 300)} {path} > /tmp/.m && cat /tmp/.m > {path}"]
    if op == "random":
        return [put(path, bytes(rng.randrange(256) for _ in range(rng.randint(1, 2000))))]
    if op == "dir":
        return [f"rm -rf {path}; mkdir -p {path}/x"]
    return [f"rm -rf {path}"]


def tar_bytes(members: list[tuple[str, bytes | None]]) -> bytes:
    """A tar as busybox writes it ("./" first), members in this order, duplicates allowed (None: a directory)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in [("./", None), *members]:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tf.addfile(info)
            else:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def script(phases: dict[str, list[str]]) -> str:
    """The body of numalab_mutate: each phase's lines, then `:` (an empty case arm is not valid sh)."""
    arms = "\n".join(
        f"  {phase})\n" + "".join(f"    {ln}\n" for ln in lines) + "    : ;;" for phase, lines in phases.items()
    )
    return f'case "$1" in\n{arms}\nesac\n'


def console_lines() -> list[str]:
    """What a hostile guest prints on its console: escapes, a fake panic, forged stage marks."""
    text = b"\n".join([*ESC_LINES, b"Kernel panic - not syncing: printed by guest userspace",
                       b"NUMALAB-STAGE \x1b]0;stage\x07 nan", b"NUMALAB-STAGE failed \x1b[2J 1e999"])  # fmt: skip
    return [put("/dev/console", text + b"\n")]


def readback_script(seed: int, n: int = 12) -> str:
    """The readback family: the exact inputs of issue 21, then ``n`` random mutations of readback files."""
    rng = random.Random(seed)
    rand = [ln for _ in range(n) for ln in mutations(rng, "$2", rng.choice(READBACK_FILES))]
    fixed = [
        "for f in topology.txt schedstat.txt uname.txt; do [ -f $2/$f ] || rm -rf $2/$f; done",
        put("$2/topology.txt", b"\n/sys/devices/system/node/node1/distance:10 abc\n", append=True),
        put("$2/topology.txt", b"\xff\xfe bad utf-8 \xc3(\n", append=True),
        put("$2/schedstat.txt", b"\ncpu0 0 0\ndomain0 zzz\n", append=True),
        put("$2/uname.txt", SHAPED["uname.txt"][0] + b"\n"),
    ]
    return script({"readback": rand + fixed + console_lines()})


def results_script(seed: int, n: int = 14) -> str:
    """The results family (with the console's): a result line of 100,000 '[', trace-raw/kallsyms as a
    directory, then ``n`` random mutations of the other results files (workload.rc stays the workload's)."""
    rng = random.Random(seed)
    fixed = [
        put("$2/workload.out", b"Kernel panic - not syncing: printed by the workload\n\x1b]0;t\x07\n", append=True),
        put("$2/workload.out", b"NUMALAB_RESULT " + b"[" * 100000 + b"\n", append=True),
        "[ -d $2/trace-raw ] && rm -f $2/trace-raw/kallsyms && mkdir -p $2/trace-raw/kallsyms/x",
    ]
    others = [f for f in RESULTS_FILES if f != "workload.out"]
    rand = [ln for _ in range(n) for ln in mutations(rng, "$2", rng.choice(others))]
    return script({"results": fixed + rand + console_lines()})


def tar_script(readback: bytes | None, results: bytes | None) -> str:
    """The share phase: the tars the guest sent, replaced by these (None: left as sent)."""
    lines = [put(f"$2/{name}", data) for name, data in (("readback.tar", readback), ("results.tar", results)) if data]
    return script({"share": lines})
