"""Coherence by LLC on a real VM (issue 67's first known answer): genoa-nps2 with 4 CPUs a node (two LLCs of two
CPUs each), under the modelled machine with coherence on. A counter handed between CPU 0 and a CPU of its own LLC,
one of the other LLC of its node, and one of the other node: the load that sees the value the other CPU wrote takes
no transfer in one LLC, the spec's LLC-to-LLC cost (80 ns by default) between two LLCs of the node, and the pair's
miss cost (SLIT 12: 1.2 x 100 ns) between the nodes, each within 10 %. Then a streaming pair, CPU 0 writing 1 MiB
and the same three CPUs reading it: a line costs the reader the sweep's transfer price more on the other LLC than
on its own (the node's stream price, 6.4 ns a line at 10 GB/s), within 10 %; the throughput ratio follows.

The figures are the loads' medians by the guest's TSC (guest time under --clock virtual): an interrupt inside one
timed load would move a mean. Balancing is off and every thread is pinned, so nothing moves the threads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import numalab, static_workload

pytestmark = pytest.mark.vm

TOLERANCE = 0.10  # "the round trip differs by the configured transfer cost within 10 %" (issue 67)

HANDOFF_C = r"""
/* handoff: for each peer CPU P of 1, 2 and 4, CPU 0 and CPU P increment one counter (a line of its own) in turn,
 * TIMED turns each, each CPU timing (rdtsc) the load that sees the value the other wrote; then each CPU increments a
 * private counter PRIVATE times, timing its load the same way. Prints read_ns_P (the handed load's median over both
 * CPUs' turns) and private_ns (CPU 0's private load's median), in ns by the TSC's ticks a ns over a timed loop.
 * Then a streaming pair: for each P, ROUNDS times CPU 0 writes BUF (a word a line) and CPU P reads it once in
 * ascending order, timing its whole sweep; prints sweep_ns_P, the median sweep's ns a line. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

#define TIMED 2000
#define PRIVATE 20000
#define TICKS 4096
#define BUF (1 << 20)
#define ROUNDS 9
struct line { volatile long v; char pad[56]; };
static struct line counter[3] __attribute__((aligned(64)));
static struct line priv __attribute__((aligned(64)));
static unsigned hist[TICKS];
static volatile int phase = -1;
static volatile int done;
static char buf[BUF] __attribute__((aligned(64)));
static volatile int written, swept; /* rounds written by CPU 0, swept by the peer */
static double sweeps[ROUNDS];
static volatile long sink;

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof(s), &s)) exit(2);
}

static void count(unsigned long long ticks) {
    __atomic_fetch_add(&hist[ticks < TICKS - 1 ? ticks : TICKS - 1], 1, __ATOMIC_RELAXED);
}

static double median(void) {
    unsigned long long n = 0, seen = 0;
    for (int i = 0; i < TICKS; i++) n += hist[i];
    for (int i = 0; i < TICKS; i++)
        if ((seen += hist[i]) * 2 >= n) return i;
    return TICKS;
}

/* a side of the hand-off: it increments when the counter's parity is its own, TIMED times, timing the load */
static void turns(volatile long *c, long parity) {
    for (int i = 0; i < TIMED; i++) {
        unsigned long long a, b;
        long v;
        do { a = __rdtsc(); v = *c; b = __rdtsc(); } while (v % 2 != parity);
        if (v > 1) count(b - a); /* (the first turn's value was there before the other side's first write) */
        *c = v + 1;
    }
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *reader(void *arg) {
    static const int cpus[3] = {1, 2, 4};
    pin(cpus[(long)arg]);
    for (int r = 0; r < ROUNDS; r++) {
        while (written != r + 1) ;
        long s = 0;
        unsigned long long a = __rdtsc();
        for (const char *p = buf; p < buf + BUF; p += 64) s += *(const volatile long *)p;
        sweeps[r] = (double)(__rdtsc() - a);
        sink += s;
        swept = r + 1;
    }
    return NULL;
}

static void *peer(void *arg) {
    int k = (int)(long)arg;
    static const int cpus[3] = {1, 2, 4};
    pin(cpus[k]);
    while (phase != k) ;
    turns(&counter[k].v, 1);
    done = k + 1;
    return NULL;
}

static double ticks_a_ns(void) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long long c0 = __rdtsc();
    volatile long s = 0;
    for (long i = 0; i < 2000000; i++) s += i;
    unsigned long long c1 = __rdtsc();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (c1 - c0) / ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec));
}

int main(void) {
    static const int cpus[3] = {1, 2, 4};
    pin(0);
    double per_ns = ticks_a_ns();
    for (int k = 0; k < 3; k++) {
        pthread_t th;
        for (int i = 0; i < TICKS; i++) hist[i] = 0;
        if (pthread_create(&th, NULL, peer, (void *)(long)k)) return 1;
        phase = k;
        turns(&counter[k].v, 0);
        while (done != k + 1) ;
        pthread_join(th, NULL);
        printf("read_ns_%d %.2f\n", cpus[k], median() / per_ns);
    }
    for (int i = 0; i < TICKS; i++) hist[i] = 0;
    for (long i = 0; i < PRIVATE; i++) {
        unsigned long long a = __rdtsc();
        long c = priv.v;
        unsigned long long b = __rdtsc();
        priv.v = c + 1;
        count(b - a);
    }
    printf("private_ns %.2f\n", median() / per_ns);
    for (int k = 0; k < 3; k++) {
        pthread_t th;
        written = swept = 0;
        if (pthread_create(&th, NULL, reader, (void *)(long)k)) return 1;
        for (int r = 0; r < ROUNDS; r++) {
            for (char *p = buf; p < buf + BUF; p += 64) *(volatile long *)p = r;
            written = r + 1;
            while (swept != r + 1) ;
        }
        pthread_join(th, NULL);
        qsort(sweeps, ROUNDS, sizeof(double), by_value);
        printf("sweep_ns_%d %.3f\n", cpus[k], sweeps[ROUNDS / 2] / per_ns / (BUF / 64));
    }
    return 0;
}
"""

WORKLOAD = """\
name: handoff
description: a counter handed between CPU 0 and a CPU of its LLC, of its node's other LLC, and of the other node
command: ./handoff
files: [handoff]
results:
  regex:
    read_ns_1: '^read_ns_1 ([0-9.]+)$'
    read_ns_2: '^read_ns_2 ([0-9.]+)$'
    read_ns_4: '^read_ns_4 ([0-9.]+)$'
    private_ns: '^private_ns ([0-9.]+)$'
    sweep_ns_1: '^sweep_ns_1 ([0-9.]+)$'
    sweep_ns_2: '^sweep_ns_2 ([0-9.]+)$'
    sweep_ns_4: '^sweep_ns_4 ([0-9.]+)$'
metrics:
  - {name: read_ns_1, unit: ns, higher_is_better: false}
  - {name: read_ns_2, unit: ns, higher_is_better: false}
  - {name: read_ns_4, unit: ns, higher_is_better: false}
  - {name: private_ns, unit: ns, higher_is_better: false}
  - {name: sweep_ns_1, unit: ns, higher_is_better: false}
  - {name: sweep_ns_2, unit: ns, higher_is_better: false}
  - {name: sweep_ns_4, unit: ns, higher_is_better: false}
"""


def test_a_line_handed_between_two_llcs_of_a_node_costs_the_llc_transfer(tmp_path: Path, built_kernel) -> None:
    workload = static_workload(tmp_path, "handoff", HANDOFF_C, WORKLOAD)
    out = tmp_path / "run"
    proc = numalab("run", *built_kernel, "--topology", "genoa-nps2", "--cpus-per-node", "4", "--mem-per-node", "256M",
                   "--workload", str(workload), "--duration", "1", "--no-trace", "--numa-balancing", "off",
                   "--qemu", "charge", "--clock", "virtual", "--remote-latency", "slit", "--coherence", "on",
                   "--quantum", "2000", "--seed", "7", "--out", str(out), "--json", "--timeout", "900",
                   timeout=1200)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok", m.get("reason")
    coherence = m["remote_latency"]["model"]["coherence"]
    assert coherence["owners"] == "llc" and coherence["vcpu_llcs"] == [0, 0, 1, 1, 2, 2, 3, 3], coherence
    llc_ns, node_ns = coherence["llc_transfer_ns"][0], coherence["transfer_ns"][0][1]
    assert (llc_ns, node_ns) == (80.0, 120.0), coherence
    r = m["workload"]["result"]
    print(f"coherence by LLC on genoa-nps2: {r}; configured {llc_ns} ns between LLCs, {node_ns} ns between nodes")
    base = r["read_ns_1"]  # in one LLC: no transfer, the load's own instructions
    assert base < 0.25 * llc_ns and abs(base - r["private_ns"]) < 0.1 * llc_ns, r
    assert abs((r["read_ns_2"] - base) - llc_ns) <= TOLERANCE * llc_ns, r
    assert abs((r["read_ns_4"] - base) - node_ns) <= TOLERANCE * node_ns, r
    # known answer 2: a streaming pair. Read on one LLC, each line of the 1 MiB CPU 0 wrote costs the reader its
    # line-cache miss (a local stream miss: 6.4 ns at 10 GB/s); on the node's other LLC also a transfer, priced as a
    # sweep's (the node's own stream price: the same 6.4 ns; the sweep's first line 80 ns); on the other node the
    # miss is remote and so is the transfer (each 64 B at 10 / 1.2 GB/s: 7.68 ns)
    stream = m["remote_latency"]["model"]["streams"]["charge_ns"]  # [reader's node][memory's node]
    local, remote = stream[0][0], stream[1][0]
    assert (local, remote) == (6.4, 7.68), stream
    two_llcs, other_node = r["sweep_ns_2"] - r["sweep_ns_1"], r["sweep_ns_4"] - r["sweep_ns_1"]
    print(
        f"a line of the sweep: one LLC {r['sweep_ns_1']} ns, two LLCs {r['sweep_ns_2']} ns (+{two_llcs:.3f}, "
        f"configured {local}), the other node {r['sweep_ns_4']} ns (+{other_node:.3f}, configured "
        f"{remote - local + remote:.2f}); throughput one LLC / two: {r['sweep_ns_2'] / r['sweep_ns_1']:.3f}"
    )
    assert abs(two_llcs - local) <= TOLERANCE * local, r
    assert abs(other_node - (remote - local + remote)) <= TOLERANCE * (remote - local + remote), r
    window = m["remote_latency"]["window"]
    # each of the LLC phase's 2 x 2000 turns moved the line between the two LLCs of node 0
    assert window["llc_transfers"] >= 2 * 2000 - 2, window
    assert window["transfers"] - window["llc_transfers"] >= 2 * 2000 - 2, window  # the node phase's
