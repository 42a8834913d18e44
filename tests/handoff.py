"""Issue 66's K4, hand-offs: two processes pinned to two CPUs hand a token back and forth, over two pipes
(``pipe``: each side sleeps until woken, an IPI) or through one shared counter (``counter``: each side spins until
the other has incremented it). The program is built here (static); its result gives the round trips and the mean
round-trip time in guest ns. tests/bench/handoffs.py runs it on ring-2 under the modelled machine (make bench)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from common import numalab, static_workload

HANDOFF_C = r"""
/* handoff MODE CPU_A CPU_B SECONDS: a token handed between two processes pinned to CPU_A and CPU_B, over two
 * pipes (MODE pipe) or a shared counter each side waits to see odd or even (MODE counter); prints
 * NUMALAB_RESULT {"round_trips":..,"rtt_ns":..}. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set)) { perror("sched_setaffinity"); _exit(2); }
}

struct shared { volatile long counter; volatile int stop; long trips; double seconds; };

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: handoff pipe|counter CPU_A CPU_B SECONDS\n"); return 2; }
    int counter = strcmp(argv[1], "counter") == 0, a = atoi(argv[2]), b = atoi(argv[3]);
    double seconds = atof(argv[4]);
    struct shared *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int to_b[2], to_a[2];
    if (sh == MAP_FAILED || pipe(to_b) || pipe(to_a)) return 1;
    memset(sh, 0, sizeof(*sh));
    if (fork() == 0) {  /* B: answers */
        pin(b);
        close(to_b[1]);  /* A's ends: B sees EOF when A closes its write end */
        close(to_a[0]);
        char c;
        if (counter) {
            for (long k = 1; !sh->stop; k += 2) {
                while (sh->counter != k && !sh->stop)
                    ;
                sh->counter = k + 1;
            }
        } else {
            while (read(to_b[0], &c, 1) == 1)
                if (write(to_a[1], &c, 1) != 1) _exit(1);
        }
        _exit(0);
    }
    close(to_b[0]);
    close(to_a[1]);
    pin(a);
    char c = 't';
    long trips = 0;
    double t0 = now(), end = t0 + seconds;
    if (counter) {
        for (long k = 0; now() < end; k += 2, trips++) {
            sh->counter = k + 1;
            while (sh->counter != k + 2)
                ;
        }
        sh->stop = 1;
    } else {
        for (; now() < end; trips++)
            if (write(to_b[1], &c, 1) != 1 || read(to_a[0], &c, 1) != 1) return 1;
        close(to_b[1]);
    }
    double elapsed = now() - t0;
    wait(NULL);
    printf("NUMALAB_RESULT {\"round_trips\":%ld,\"elapsed_s\":%.6f,\"round_trips_per_s\":%.3f,\"rtt_ns\":%.1f}\n",
           trips, elapsed, trips / elapsed, elapsed * 1e9 / (trips ? trips : 1));
    return 0;
}
"""

WORKLOAD = """\
name: handoff
description: a token handed between two pinned processes (issue 66's K4)
command: ./handoff {mode} {cpu_a} {cpu_b} {duration}
files: [handoff]
results:
  json-line: "NUMALAB_RESULT "
metrics:
  - {name: rtt_ns, unit: ns, higher_is_better: false}
"""


def handoff_workload(tmp_path: Path, mode: str, cpu_a: int, cpu_b: int) -> Path:
    """The hand-off program built static, and a workload file that runs it in ``mode`` between the two CPUs."""
    yaml = WORKLOAD.replace("{mode} {cpu_a} {cpu_b}", f"{mode} {cpu_a} {cpu_b}")
    yaml = yaml.replace("name: handoff", f"name: handoff-{mode}-{cpu_a}-{cpu_b}")
    return static_workload(tmp_path, "handoff", HANDOFF_C, yaml)


def handoff_run(work: Path, mode: str, cpus: tuple[int, int], quantum: int, *extra: str):
    """One K4 run: ``mode`` between ``cpus`` on ring-2 under m1 with coherence on, balancing off, 1 guest s, at
    ``quantum`` ns (``extra``: more run options, e.g. ``--qemu PATH``). Returns the process and, when it ran, the
    record's status and reason, the round-trip time (guest ns), the line transfers charged a round trip and their
    time (ns), and the host seconds."""
    d = work / f"{mode}-{cpus[0]}{cpus[1]}-q{quantum}"
    d.mkdir()
    workload = handoff_workload(d, mode, *cpus)
    proc: subprocess.CompletedProcess = numalab(
        "run", "--topology", "ring-2", "--workload", str(workload), "--duration", "1", "--model", "m1", "--coherence",
        "on", "--quantum", str(quantum), "--numa-balancing", "off", "--no-trace", "--out", str(d / "run"), "--json",
        *extra, timeout=1800)  # fmt: skip
    if proc.returncode != 0:
        return proc, None
    m = json.loads(proc.stdout)
    result, window = m["workload"].get("result") or {}, (m.get("remote_latency") or {}).get("window") or {}
    trips = result.get("round_trips") or 0
    return proc, {
        "status": m["status"], "reason": m.get("reason"), "rtt_ns": result.get("rtt_ns"),
        "transfers": window.get("transfers", 0) / trips if trips else None,
        "transfer_ns": window.get("transfer_s", 0) * 1e9 / trips if trips else None,
        "host_s": m["timings"]["total_s"],
    }  # fmt: skip
