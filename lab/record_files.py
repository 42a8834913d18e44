"""Every file of a run record, named once: the record is a contract between the guest init, the
host and the analyses that read it back later (perhaps years later, from another numalab).

Two sides write a record. The host writes its own files (the manifest, the console, QEMU's
command line and log, the libvirt domain, the access-matrix counts). The guest init
(``images/guest/init``) writes the guest's view of itself into ``/tmp/readback`` and everything
measured around the workload into ``/tmp/out``; it sends each directory to the host as one tar,
which the host unpacks into the record (:mod:`lab.analysis.results`). ``tests/unit/test_record_files.py``
parses the init for the files it writes and compares them with :data:`GUEST_READBACK` and
:data:`GUEST_RESULTS`, so a file added on one side only fails a test.

The names are plain strings (``run_dir / WORKLOAD_OUT``); :data:`ALL` has a short description of each.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RecordFile:
    name: str
    side: str  # "host", "readback" (the guest, before the workload) or "results" (the guest, after it)
    about: str


# The manifest's "format": what a reader of records reads (lab.analysis.record refuses any other).
RUN_FORMAT = "numalab-run/1"

# The host's files.
MANIFEST = "manifest.json"
CONSOLE_LOG = "console.log"
QEMU_ARGV = "qemu-argv.txt"
QEMU_LOG = "qemu.log"
DOMAIN_XML = "domain.xml"
DOMAIN_LIVE_XML = "domain-live.xml"
ACCESS_MATRIX_TXT = "access-matrix.txt"
ACCESS_MATRIX_JSON = "access-matrix.json"
REMOTE_LATENCY_TXT = "remote-latency.txt"
REMOTE_LATENCY_JSON = "remote-latency.json"

# The guest's view of itself (readback.tar).
UNAME = "uname.txt"
CMDLINE = "cmdline.txt"
KERNEL_NOTES = "kernel-notes.bin"
TOPOLOGY = "topology.txt"
CPUS = "cpus.txt"
TIERS = "tiers.txt"
SCHEDSTAT = "schedstat.txt"
DMESG_BOOT = "dmesg-boot.txt"
SCHED_DOMAINS = "sched-domains.txt"
KNOBS = "knobs.txt"

# What the guest measured around the workload (results.tar).
VMSTAT_START = "vmstat.start"
VMSTAT_SERIES = "vmstat.series"
VMSTAT_END = "vmstat.end"
LLC_BALANCING_END = "llc-balancing.end"
NUMA_NODES_SERIES = "numa-nodes.series"
STAT_START = "stat.start"
STAT_END = "stat.end"
WORKLOAD_OUT = "workload.out"
WORKLOAD_ERR = "workload.err"
WORKLOAD_RC = "workload.rc"
TRACE_DAT = "trace.dat"
TRACE_RAW = "trace-raw"
TRACE_RECORD_LOG = "trace-record.log"
TRACE_RECORD_RC = "trace-record.rc"
TRACE_STATS = "trace-stats.txt"
DMESG = "dmesg.txt"
SCHEDULER_OUT = "scheduler.out"
SCHEDULER_STATE = "scheduler-state.txt"

# The guest init's transport on the results share: never part of the record (lab.vm.share).
READBACK_TAR = "readback.tar"
RESULTS_TAR = "results.tar"
GUEST_DONE = "guest-done"
SHARE_FILES = (READBACK_TAR, RESULTS_TAR, GUEST_DONE)

ALL: tuple[RecordFile, ...] = (
    RecordFile(MANIFEST, "host", "the run: status, settings, placement, timings, metrics (lab.run.manifest)"),
    RecordFile(CONSOLE_LOG, "host", "the guest's serial console, with the NUMALAB-STAGE marks"),
    RecordFile(QEMU_ARGV, "host", "the QEMU command line (direct QEMU only)"),
    RecordFile(QEMU_LOG, "host", "QEMU's own stderr (direct QEMU) or libvirt's log of the domain"),
    RecordFile(DOMAIN_XML, "host", "the libvirt domain XML as defined (libvirt only)"),
    RecordFile(DOMAIN_LIVE_XML, "host", "the libvirt domain XML as it ran (libvirt only)"),
    RecordFile(ACCESS_MATRIX_TXT, "host", "the TCG plugin's raw access counts (--access-matrix)"),
    RecordFile(ACCESS_MATRIX_JSON, "host", "the access matrix summarized, as in the manifest (--access-matrix)"),
    RecordFile(REMOTE_LATENCY_TXT, "host", "the TCG plugin's raw remote-latency counts (--remote-latency)"),
    RecordFile(REMOTE_LATENCY_JSON, "host", "remote-latency charges summarized, as in the manifest (--remote-latency)"),
    RecordFile(UNAME, "readback", "the guest kernel's release (uname -r)"),
    RecordFile(CMDLINE, "readback", "the kernel command line the guest booted with"),
    RecordFile(KERNEL_NOTES, "readback", "/sys/kernel/notes: the guest kernel's build id"),
    RecordFile(TOPOLOGY, "readback", "nodes, CPUs, SLIT and memory as the guest sees them (grep -H of sysfs)"),
    RecordFile(CPUS, "readback", "each CPU's package, die, cluster and core ids, thread siblings and caches (sysfs)"),
    RecordFile(TIERS, "readback", "memory tiers, demotion_enabled and HMAT access values"),
    RecordFile(SCHEDSTAT, "readback", "/proc/schedstat: the sched domains' CPU masks"),
    RecordFile(DMESG_BOOT, "readback", "the boot log, with the sched_verbose dump of domains and groups"),
    RecordFile(SCHED_DOMAINS, "readback", "the sched domains' names and flags (debugfs)"),
    RecordFile(KNOBS, "readback", "NUMA-balancing settings read back after the plan set them"),
    RecordFile(VMSTAT_START, "results", "/proc/vmstat before the workload"),
    RecordFile(VMSTAT_SERIES, "results", "/proc/vmstat every VMSTAT_INTERVAL seconds, each after an '@ uptime' line"),
    RecordFile(VMSTAT_END, "results", "/proc/vmstat after the workload"),
    RecordFile(
        LLC_BALANCING_END,
        "results",
        "7.x's cache-aware scheduling knobs (sched/llc_balancing/) after the "
        "workload (their start values are in knobs.txt)",
    ),
    RecordFile(
        NUMA_NODES_SERIES,
        "results",
        "with each vmstat sample, after an '@ uptime' line: every node's meminfo, each workload process's "
        "stat line, status, numa_maps and status again, then the nodes' meminfo again",
    ),
    RecordFile(STAT_START, "results", "the cpu lines of /proc/stat before the workload"),
    RecordFile(STAT_END, "results", "the cpu lines of /proc/stat after the workload"),
    RecordFile(WORKLOAD_OUT, "results", "the workload's stdout, parsed into the manifest's workload.result"),
    RecordFile(WORKLOAD_ERR, "results", "the workload's stderr"),
    RecordFile(WORKLOAD_RC, "results", "the workload's exit code"),
    RecordFile(TRACE_DAT, "results", "the trace (trace-cmd extract/record; in raw mode the host assembles it)"),
    RecordFile(TRACE_RAW, "results", "raw mode: the ring buffers and formats; removed once trace.dat is assembled"),
    RecordFile(TRACE_RECORD_LOG, "results", "what the trace tools said (the host appends the assembly's outcome)"),
    RecordFile(TRACE_RECORD_RC, "results", "the trace step's exit code (the host writes 1 if assembly fails)"),
    RecordFile(TRACE_STATS, "results", "the per-CPU ring buffer stats: entries, overruns (lost events)"),
    RecordFile(DMESG, "results", "the kernel log after the workload"),
    RecordFile(SCHEDULER_OUT, "results", "--scheduler: the sched_ext scheduler's stdout and stderr"),
    RecordFile(
        SCHEDULER_STATE,
        "results",
        "--scheduler: /sys/kernel/sched_ext's state and ops (with enable_seq and nr_rejected) before it was "
        "started, at the workload's start and end and after it was stopped; its exit code (lab.run.scheduler)",
    ),
)
BY_NAME: dict[str, RecordFile] = {f.name: f for f in ALL}
HOST: tuple[str, ...] = tuple(f.name for f in ALL if f.side == "host")
GUEST_READBACK: tuple[str, ...] = tuple(f.name for f in ALL if f.side == "readback")
GUEST_RESULTS: tuple[str, ...] = tuple(f.name for f in ALL if f.side == "results")
GUEST: tuple[str, ...] = GUEST_READBACK + GUEST_RESULTS
