/*
 * numalab access-matrix plugin: counts the guest's memory accesses by
 * (accessing vCPU, NUMA node owning the accessed guest-physical page).
 *
 * With lat_out=, it also charges remote memory latency (numalab run --remote-latency; below).
 *
 * Arguments (-plugin file=access_matrix.so,KEY=VALUE,...):
 *   out=PATH          where the counts go (text, one line per snapshot; see below); optional with lat_out=
 *   sample=N          look up every Nth access of each vCPU (1: every access)
 *   interval_ms=MS    snapshot period (default 250)
 *   range=NODE:START:END   an address range [START, END) (hex) of NODE, as this QEMU's
 *                     qemu_plugin_hwaddr_phys_addr reports it; repeatable
 *
 * Output (lab/vm/tcg/access_plugin.py reads it):
 *   numalab-access-matrix 1
 *   api A / sample N / vcpus V / nodes K / range NODE START END   (header)
 *   snap MONO_NS c...   cumulative counts, V rows of K+3 numbers: per node, then
 *                       outside (RAM that is in no node's range), io (MMIO), unresolved
 *   end MONO_NS c...    the same at exit
 *   outside-first ADDR  the first address outside every range (when there was one)
 * MONO_NS is CLOCK_MONOTONIC in nanoseconds, the host clock numalab stamps stages with.
 *
 * Remote latency (lab/vm/tcg/latency_model.py makes the arguments, lab/run/remote_latency.py reads the file):
 *   lat_out=PATH      where the latency counts go
 *   vnode=FIRST:LAST:NODE   vCPUs FIRST..LAST belong to NODE; repeatable
 *   cost=CPU_NODE:MEM_NODE:PS   picoseconds charged for one line miss of a CPU_NODE vCPU to MEM_NODE; repeatable
 *   lines=N           lines of the modelled per-vCPU cache (power of two; default 4096: 256 KiB of 64 B lines)
 *   ways=W            its associativity (power of two, default 1: direct-mapped; numalab passes 8): a set holds W
 *                     lines, the least recently used one leaves on a miss
 *   lat_sample=N      model 1 set in N (power of two, default 16) and charge N misses for each miss seen
 *   chunk_ns=NS       hold the vCPU once its debt passes this (default 20000)
 *   lat_clock=virtual pay the debt in the guest's time instead (under -icount, with a QEMU that has
 *                     qemu_plugin_charge_ns: numalab's patch, images/qemu): the virtual clock moves on by it
 *   stream=1          detect streams: a miss to line X whose neighbour X-1 or X+1 (virtual line numbers) is
 *                     among the vCPU's last STREAM_RECENT lines touched continues a stream, and costs the
 *                     pair's bw= price instead of its cost= one (memory-level parallelism: a prefetched line
 *                     costs its transfer at the pair's bandwidth, not the latency). Every access, sampled set
 *                     or not, moves the vCPU's recent lines; a page copy's lines after its first are streams.
 *                     A miss to a line that is itself among those recent lines counts as a hit (it would be in
 *                     any real cache; the model's conflicts, e.g. direct-mapped, a copy's source and destination
 *                     a multiple of the cache's size apart, would otherwise miss on every access)
 *   bw=CPU_NODE:MEM_NODE:PS   picoseconds charged for one stream miss (with stream=1); repeatable
 *   share_ns=NS       (with stream=1 and lat_clock=virtual, a QEMU with numalab's qemu_plugin_vcpu_clock_ns:
 *                     images/qemu/0008) a node's bandwidth is shared by the vCPUs streaming from it in the same
 *                     stretch of guest time. Each vCPU's stream misses to a node are counted in bytes (lat_sample
 *                     lines each) per window of NS of its own guest time; at a stream miss, the other vCPUs that
 *                     had one to the node within 2 NS of this vCPU's time are its sharers, and their bytes in
 *                     their last whole window what they take. The miss is charged the line at the larger of
 *                     what they leave of the node's total and an equal share of it (the total over the sharers
 *                     and this vCPU), when that is slower than the pair's bw= price. Guest time only, in the
 *                     order the one round-robin thread runs the vCPUs: a run still repeats exactly
 *   node_bw=NODE:PS   picoseconds a line at NODE's total bandwidth (with share_ns=); a node without one is not
 *                     shared; repeatable
 *   coherence=1       a line written by a vCPU of one node and then read or written by a vCPU of another node is
 *                     a transfer between the two nodes, charged the pair's cost= (the reader's or writer's node to
 *                     the node that wrote it); a line only read stays shared, a private line costs nothing. A
 *                     directory over every line of the ranges (not sampled), by node: the node that wrote the line
 *                     last (its owner) and the nodes holding a current copy. A read by a node without a copy of a
 *                     line another node owns is a transfer (then it has a copy); a write by a node without a copy
 *                     is one too (a read for ownership); either way a write makes the writer's node the owner and
 *                     the only holder (invalidating the others' copies is not charged). With stream=1 a transfer
 *                     of a line next to one of the vCPU's last COH_RECENT transfers (a sweep over lines another
 *                     node wrote) is charged the pair's bw= instead: such transfers overlap as a stream's misses
 *                     do; a hot line handed back and forth stays at cost=. Under lat_clock=virtual a
 *                     transfer's charge is paid at once, so the access that makes it takes it in guest time. With
 *                     the line callback, an access the callback would skip can change the directory, so the plugin
 *                     makes the next access call back (qemu_plugin_u64_set on the line entry): its own after a
 *                     read of a line its node does not own (a store may follow), the other vCPUs' after a change
 *                     of a line's state. Exact and in the one thread's order under -icount; under MTTCG the
 *                     directory's entries change by compare-and-swap, in whatever order the threads run
 *   coh_node=NODE:N   (with coherence=1) NODE's caches hold N lines instead of coh_lines= (a node of several LLCs:
 *                     their total); repeatable; not with vllc=
 *   vllc=FIRST:LAST:LLC   (with coherence=1) vCPUs FIRST..LAST share last-level cache LLC (numbered from 0 over the
 *                     machine, at most 24, each within one node); repeatable. Then a line's owner and holders are
 *                     LLCs, not nodes: a line one LLC wrote, used by another LLC of the same node, is a transfer
 *                     charged that node's llc_cost= (with stream=1 a sweep's the node's own bw=), by an LLC of
 *                     another node the pair's cost= as before; coh_lines= is each LLC's caches, coh_llc= one's own
 *   llc_cost=NODE:PS  (with vllc=) picoseconds a line moved between two LLCs of NODE; repeatable (default 0)
 *   coh_llc=LLC:N     (with vllc=) LLC's caches hold N lines instead of coh_lines=; repeatable
 *   coh_lines=N       (with coherence=1) each node's caches hold N lines (0, the default: no limit). A node counts
 *                     the lines it brings in (a line it writes that it held no current copy of, a copy of a line
 *                     another node owns, its own line again once aged out); a line's entry keeps that count as
 *                     its owner took it. Once the owner has brought in N lines since, the line has left its caches
 *                     (written back): memory holds it, nobody owns it, and the next access by any node is no
 *                     transfer (the miss model charges it as memory). Reads of lines no node owns are not counted
 *                     (no entry records them). The count is 32 bits: a line untouched for 2^32 of its owner's
 *                     fills may look owned again (at 64 B a line, 256 GiB brought into one node)
 *   arm=mark          (a QEMU of plugin API version 3 or more) instrument nothing until a vCPU executes numalab's
 *                     mark, a 15-byte NOP whose displacement is "NUMA" (66 66 66 66 66 66 2e 0f 1f 84 00 4e 55 4d 41:
 *                     images/workloads/model_start.c, which the guest init runs just before the workload); then
 *                     reset (qemu_plugin_reset: QEMU flushes the translated code once no vCPU runs) and instrument
 *                     every block translated from then on. The boot runs without the memory callbacks (it
 *                     translates tens of thousands of blocks, each dearer with them), and every count and charge
 *                     starts at the mark; snapshots before it are zero. The mark is an instruction, so under
 *                     -icount it falls at the same guest instruction in every run of a seed. Only 15-byte
 *                     instructions are read (the longest x86 encoding, which assemblers do not emit for padding)
 *   line_cb=0|1       (default 1) with a QEMU that has numalab's qemu_plugin_register_vcpu_mem_line_cb
 *                     (images/qemu/0005) and no out=: the callback is made only when a vCPU's access is to
 *                     another line than its last one; the translated code compares inline and skips the
 *                     rest. The model sees the same lines in the same order (a repeated access to the line
 *                     just touched is a hit either way), so misses and charges are the same; looked-up
 *                     accesses and hits then count changes of line only. The header says line_cb 1 when on
 * The modelled cache has lines/ways sets of ways lines each (least recently used out), its set chosen by the
 * virtual address's line number and its lines tagged with the physical address (as the address map reports
 * it). With one way (direct-mapped), two processes' buffers at the same virtual address (as forked workers'
 * often are) or a hot line whose set a buffer shares (the vDSO's data) evict each other on every pass: a
 * chance of the guest's address-space layout decided the run's misses (issue 66's K1). Set sampling: only accesses to a fixed pseudo-random
 * 1/N of the sets are looked up, but every access to those sets is, so their hits and misses are exact.
 * A miss to a node with a cost adds cost * N to the vCPU's debt; past chunk_ns the vCPU's own thread spins
 * on its CPU clock (CLOCK_THREAD_CPUTIME_ID) until the debt is paid (an overshoot is credited); with
 * lat_clock=virtual the debt is charged to the virtual clock instead, and "held" counts what was charged.
 *   numalab-remote-latency 6 / lines L / ways Y / modelled_sets M / lat_sample N / chunk_ns C / stream S /
 *                       line_cb F / share_ns W / coherence H / coh_lines C / arm_mark A / vcpus V / nodes K /
 *                       llcs D (0: owners are nodes)
 *                       (header; then vnode, vllc, cost, bw, node_bw, coh_node, llc_cost and coh_llc lines)
 *   snap MONO_NS c... / end MONO_NS c...   cumulative, V rows of K+12 numbers: looked-up accesses, hits,
 *                       misses by memory node (K), misses to RAM outside every node or unresolved, debt
 *                       charged (ns), ns spent holding the vCPU, MMIO accesses (not cached, not charged:
 *                       a LAPIC write for every IPI under TCG's xAPIC counts here), stream misses (charged
 *                       bw=, among the misses by node), shared stream misses (among those: charged the
 *                       node's share, slower than the pair's bw=), coherence transfers (exact: every line,
 *                       not sampled), their charge (ns; among the debt charged), the transfers between two LLCs
 *                       of one node (among the transfers; 0 without vllc=), their charge (ns; among theirs)
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "numalab_qemu_plugin.h"

#ifndef NUMALAB_PLUGIN_API
#define NUMALAB_PLUGIN_API 1
#endif

NL_EXPORT int qemu_plugin_version = NUMALAB_PLUGIN_API;

#define MAX_RANGES 256
#define ROW_ALIGN 8 /* uint64s per 64-byte cache line: no two vCPUs share one */

struct range {
    uint64_t start, end;
    int node;
};

static struct range ranges[MAX_RANGES];
static int n_ranges;
static int n_nodes;
static int n_vcpus;
static uint64_t sample = 64;
static unsigned interval_ms = 250;
static FILE *out;

/* Per vCPU: [0] countdown to the next sampled access, [1..K] per node, then outside, io, unresolved. */
static uint64_t *rows;
static size_t stride;
static uint64_t outside_first;
static int outside_seen;

/* Remote latency (lat_out=): off unless lat_out is given. */
#define LAT_MAX_SETS (1u << 20)
#define LAT_FIXED 12 /* columns besides the K per-node misses: accesses, hits, other, charged ns, held ns, io,
                      * stream misses, shared stream misses, coherence transfers, their charge, those between
                      * two LLCs of one node, their charge */
#define STREAM_RECENT 8 /* lines a vCPU touched last (a power of two) */
#define COH_RECENT 4    /* lines of a vCPU's last transfers (a power of two) */
struct lat_vcpu { /* one cache line each: vCPU threads write their own only */
    uint64_t *tags;   /* the modelled sets' line tags (physical line number + 1; 0: empty) */
    int64_t debt_ps;  /* charged but not yet paid (negative: an overshoot, credited) */
    uint64_t *cols;   /* accesses, hits, misses per node (K), other misses, charged ns, held ns, MMIO, streams */
    int node;
    int dom;                         /* coherence's unit: its LLC (vllc=), else its node; -1: none */
    uint32_t recent_pos;
    uint64_t line;                   /* the virtual line of the last access */
    uint64_t recent[STREAM_RECENT];  /* the lines before it, each time the line changed */
    int live;                        /* has made a callback (QEMU has started it: its line entry exists) */
    uint32_t coh_pos;
    uint64_t coh_recent[COH_RECENT]; /* the virtual lines of its last transfers, + 1 (0: none) */
} __attribute__((aligned(64)));
static FILE *lat_out;
static struct lat_vcpu *lat;
static int32_t *lat_slot; /* per set of the whole cache: its index among the modelled sets, or -1 */
static uint32_t lat_lines = 4096;
static uint32_t lat_ways = 1;
static uint32_t lat_sets = 4096; /* lat_lines / lat_ways */
static uint32_t lat_sample = 16;
static uint64_t chunk_ps = 20000ull * 1000;
static uint64_t cost_ps[MAX_RANGES][MAX_RANGES];
static uint64_t bw_ps[MAX_RANGES][MAX_RANGES]; /* a stream miss's price (stream=1) */
static int lat_stream;                          /* stream=1 */
/* A node's bandwidth shared in guest time (share_ns=): per (memory node, vCPU), its stream bytes to the node in
 * its current window of guest time and in its last whole one, and when it last streamed from it. Under -icount
 * every vCPU runs on the one round-robin thread, so these are read and written by one thread at a time. */
struct share {
    int64_t win;      /* the window (guest ns / share_ns) of acc */
    int64_t last_ns;  /* the vCPU's guest time at its last stream miss to the node */
    uint64_t acc;     /* bytes in window win */
    uint64_t prev;    /* bytes in window win - 1 (0 if it had none) */
    int seen;
};
static uint64_t share_ns;                 /* 0: not shared */
static uint64_t node_bw_ps[MAX_RANGES];   /* a line at the node's total bandwidth */
static struct share *shares;              /* [node * n_vcpus + vcpu] */
static int vnode_first[MAX_RANGES], vnode_last[MAX_RANGES], vnode_node[MAX_RANGES];
static int n_vnodes;
static int lat_width;
static int lat_virtual;             /* lat_clock=virtual */
static const void *time_handle; /* qemu_plugin_request_time_control's */
/* Coherence (coherence=1): per line of the ranges, the unit (a node, or an LLC with vllc=) that wrote it last + 1
 * (0: none since the start) in the low byte, a bit per unit that holds a current copy above it (bits 8-31), and in
 * the high 32 bits the owner's count of lines brought in when it took the line (coh_lines=). */
#define COH_OWNER 0xffull
#define COH_HOLDERS 0xffffff00ull
#define COH_MAX_NODES 24
static uint64_t *coh_dir;
static uint32_t coh_lines;               /* coh_lines=: a unit's caches, in lines (0: no limit) */
static uint32_t coh_cap[COH_MAX_NODES];  /* per unit: coh_lines, or its own coh_node= / coh_llc= */
static int coh_capped;                   /* some unit's caches have a limit */
static int coh_node_set[COH_MAX_NODES];  /* coh_node= gave the node's own */
static int coh_llc_set[COH_MAX_NODES];   /* coh_llc= gave the LLC's own */
static uint32_t coh_llc_cap[COH_MAX_NODES];
static uint32_t coh_fill[COH_MAX_NODES]; /* per unit: lines brought in (with coh_lines) */
static int vllc_first[MAX_RANGES], vllc_last[MAX_RANGES], vllc_llc[MAX_RANGES];
static int n_vllcs;                      /* vllc= lines */
static int n_llcs;                       /* LLCs (the largest vllc= LLC + 1); 0: coherence's units are nodes */
static int dom_node[COH_MAX_NODES];      /* a unit's node */
static uint64_t llc_cost_ps[MAX_RANGES]; /* per node: a line moved between two of its LLCs (llc_cost=) */
static uint64_t coh_base[MAX_RANGES]; /* per range: the index of its first line */
static int lat_coherence;             /* coherence=1 */
static int lat_line_cb = 1;     /* line_cb= (wanted) */
static int line_cb;             /* used: the QEMU has it, and no out= needs every access */
static qemu_plugin_u64 line_entry;

/* arm=mark: the callbacks wait for the mark (MARK) before instrumenting anything */
static const unsigned char MARK[15] = {0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x2e, 0x0f,
                                       0x1f, 0x84, 0x00, 0x4e, 0x55, 0x4d, 0x41};
static int arm_at_mark;
static int arming; /* set once, by the first vCPU to execute the mark */
static qemu_plugin_id_t plugin_id;

static pthread_t snapper;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int stopping;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The range that holds guest-physical address pa, or -1. */
static int range_of(uint64_t pa)
{
    for (int i = 0; i < n_ranges; i++)
        if (pa >= ranges[i].start && pa < ranges[i].end)
            return i;
    return -1;
}

static int node_of(uint64_t pa)
{
    int i = range_of(pa);
    return i < 0 ? -1 : ranges[i].node;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Hold this vCPU (we are on its thread) until its debt is paid, by its own CPU clock: host preemption
 * while spinning does not count as paid. */
static void pay(struct lat_vcpu *l)
{
    if (lat_virtual) { /* the guest's clock moves on instead; the vCPU goes on at once */
        int64_t ns = l->debt_ps / 1000;
        if (qemu_plugin_charge_ns(time_handle, ns)) {
            l->debt_ps -= ns * 1000;
            __atomic_store_n(&l->cols[4 + n_nodes], l->cols[4 + n_nodes] + (uint64_t)ns, __ATOMIC_RELAXED);
        }
        return;
    }
    uint64_t start = thread_cpu_ns(), now = start, want = (uint64_t)l->debt_ps / 1000;
    while (now - start < want)
        now = thread_cpu_ns();
    l->debt_ps -= (int64_t)(now - start) * 1000;
    __atomic_store_n(&l->cols[4 + n_nodes], l->cols[4 + n_nodes] + (now - start),
                     __ATOMIC_RELAXED);
}

/* A miss to line: 2 if the line itself is among the lines this vCPU touched last (it would be in any real
 * cache: a conflict of the model, such as direct-mapped a copy's source and destination 256 KiB apart, costs
 * nothing), 1 if it continues a stream (its neighbour below, an ascending stream, or above, a descending one,
 * is among them), 0 if neither. */
static int recent_kind(const struct lat_vcpu *l, uint64_t line)
{
    int kind = 0;
    for (int i = 0; i < STREAM_RECENT; i++) {
        if (l->recent[i] == line)
            return 2;
        if (l->recent[i] + 1 == line || l->recent[i] == line + 1)
            kind = 1;
    }
    return kind;
}

/* A stream miss of vcpu to node, whose pair costs pair_ps a line: the price of the line at the vCPU's part of the
 * node's bandwidth in this stretch of its guest time, if slower. The others that streamed from the node within
 * two windows of this vCPU's time share it; what they take is their bytes in their last whole window (a vCPU
 * runs at most a quantum ahead of the others, so the window is chosen larger than the quantum). The vCPU gets
 * what they leave of the node's total, and never less than an equal share: a stream slower than its share
 * (a remote one, or one whose instructions take most of its time) leaves the rest to the others. */
static uint64_t share_price(unsigned int vcpu, int node, uint64_t pair_ps)
{
    int64_t t = qemu_plugin_vcpu_clock_ns();
    if (t < 0)
        return pair_ps;
    struct share *row = shares + (size_t)node * (size_t)n_vcpus, *s = row + vcpu;
    int64_t w = t / (int64_t)share_ns;
    if (!s->seen || w != s->win) {
        s->prev = s->seen && w == s->win + 1 ? s->acc : 0;
        s->acc = 0;
        s->win = w;
    }
    s->acc += 64ull * lat_sample;
    s->last_ns = t;
    s->seen = 1;
    uint64_t others = 0, n = 1;
    int64_t near = 2 * (int64_t)share_ns;
    for (int u = 0; u < n_vcpus; u++) {
        if (u == (int)vcpu || !row[u].seen || row[u].last_ns < t - near || row[u].last_ns > t + near)
            continue;
        n++;
        others += row[u].prev;
    }
    if (n == 1)
        return pair_ps;
    uint64_t cap = share_ns * 1000 * 64 / node_bw_ps[node]; /* the node's bytes in a window */
    uint64_t left = others < cap ? cap - others : 0, fair = cap / n;
    uint64_t got = left > fair ? left : fair;
    uint64_t ps = share_ns * 1000 * 64 / (got ? got : 1);
    return ps > pair_ps ? ps : pair_ps;
}

/* The line entry of a vCPU back to no line: its next access is passed on even if to the line it saw last. */
static void recall(unsigned int vcpu)
{
    if (line_cb)
        qemu_plugin_u64_set(line_entry, vcpu, ~0ull);
}

/* Every vCPU but this one (that QEMU has started) passes its next access on: a line's state changed. */
static void recall_others(unsigned int vcpu)
{
    for (int u = 0; line_cb && u < n_vcpus; u++)
        if (u != (int)vcpu && __atomic_load_n(&lat[u].live, __ATOMIC_RELAXED))
            recall((unsigned)u);
}

static uint64_t *coh_entry(uint64_t pa)
{
    int i = range_of(pa);
    return i < 0 ? NULL : coh_dir + coh_base[i] + ((pa >> 6) - (ranges[i].start >> 6));
}

/* Whether a transfer of line continues a sweep of transfers: a line next to one of the vCPU's last transfers and not
 * itself among them (hot lines handed back and forth, one or several side by side, come back: they are no sweep,
 * however near other lines they sit). Remembers the line. */
static int coh_sweep(struct lat_vcpu *l, uint64_t line)
{
    int next = 0, again = 0;
    for (int i = 0; i < COH_RECENT; i++) {
        uint64_t r = l->coh_recent[i]; /* (a line + 1: 0 is none) */
        next |= r == line || r == line + 2;
        again |= r == line + 1;
    }
    l->coh_recent[l->coh_pos++ & (COH_RECENT - 1)] = line + 1;
    return next && !again;
}

/* The directory's entry e set to nw where it still holds *old (else *old is what it holds, and 0). Under the virtual
 * clock QEMU runs every vCPU on one thread (round-robin TCG: -icount has no other), so nothing else writes the
 * entry between this vCPU's load and its store, and a plain store does what the compare-and-swap MTTCG's vCPU
 * threads need does, without its lock (the locked instructions held half of on_access's samples with coherence on;
 * without them such a run took 14% less host time, 2026-11-29). */
static int coh_swap(uint64_t *e, uint64_t *old, uint64_t nw)
{
    if (lat_virtual) {
        *e = nw;
        return 1;
    }
    return __atomic_compare_exchange_n(e, old, nw, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* One more line brought into unit dom's caches (coh_lines=): a plain add on one thread, as coh_swap. */
static void coh_filled(int dom)
{
    if (lat_virtual)
        coh_fill[dom]++;
    else
        __atomic_fetch_add(&coh_fill[dom], 1, __ATOMIC_RELAXED);
}

/* An access of vcpu (of node l->node) to the line whose directory entry is e: a transfer from the node that owns
 * it when this node has no current copy and the line has not left the owner's caches since (coh_lines=): charged
 * the pair's cost=, or with stream=1 its bw= when it continues a sweep of transfers (a sweep over lines another
 * node wrote: the transfers overlap as a stream's misses do), paid at once under the virtual clock. */
static void coherent(unsigned int vcpu, struct lat_vcpu *l, uint64_t *e, int store, uint64_t line)
{
    uint64_t bit = 1ull << (8 + l->dom), me = (uint64_t)l->dom + 1;
    uint64_t old = __atomic_load_n(e, __ATOMIC_RELAXED), nw;
    uint32_t fill = coh_capped ? __atomic_load_n(&coh_fill[l->dom], __ATOMIC_RELAXED) : 0;
    int from, fills;
    for (;;) { /* until the entry changes as this access finds it (compare-and-swap: MTTCG's vCPU threads) */
        uint64_t cur = old, owner = cur & COH_OWNER;
        if (owner && coh_cap[owner - 1] &&
            __atomic_load_n(&coh_fill[owner - 1], __ATOMIC_RELAXED) - (uint32_t)(cur >> 32) >= coh_cap[owner - 1])
            cur = owner = 0; /* aged out of its owner's caches: in memory, nobody's */
        from = -1;
        fills = !(cur & bit);
        if (store) {
            if (owner == me && (cur & COH_HOLDERS) == bit)
                return; /* private: this node's alone (and not aged out: cur == old) */
            if (owner && owner != me && !(cur & bit))
                from = (int)owner - 1; /* a read for ownership of a line another node wrote */
            /* the owner's count as it took the line (kept when it already had the line, this node's copy) */
            nw = me | bit | (fills || owner != me ? (uint64_t)fill << 32 : cur & ~(COH_OWNER | COH_HOLDERS));
        } else {
            if ((cur & bit) || !owner) { /* a current copy, or a line no node owns: nothing to move */
                if (cur != old && !coh_swap(e, &old, cur))
                    continue; /* (changed meanwhile: old is the entry now) */
                if (owner != me)
                    recall(vcpu); /* a store to the line may follow: see it */
                return;
            }
            from = (int)owner - 1;
            nw = cur | bit;
        }
        if (coh_swap(e, &old, nw))
            break;
    }
    if (coh_capped && fills)
        coh_filled(l->dom);
    recall_others(vcpu);
    if (!store)
        recall(vcpu);
    if (from < 0)
        return;
    int node = dom_node[from], sweep = coh_sweep(l, line) && lat_stream;
    uint64_t cost;
    if (node == l->node) { /* another LLC of this node (vllc=): the node's own price */
        cost = sweep ? bw_ps[node][node] : llc_cost_ps[node];
        l->cols[10 + n_nodes]++;
        l->cols[11 + n_nodes] += cost;
    } else {
        cost = sweep ? bw_ps[l->node][node] : cost_ps[l->node][node];
    }
    l->cols[8 + n_nodes]++;
    l->cols[9 + n_nodes] += cost;
    if (!cost)
        return;
    l->cols[3 + n_nodes] += cost;
    l->debt_ps += (int64_t)cost;
    if ((lat_virtual && l->debt_ps >= 1000) || l->debt_ps >= (int64_t)chunk_ps)
        pay(l);
}

static void latency_access(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr)
{
    uint64_t line = vaddr >> 6;
    struct lat_vcpu *l = &lat[vcpu];
    if (lat_stream && line != l->line) { /* every access, sampled set or not: the stream detector's history */
        l->recent[l->recent_pos++ & (STREAM_RECENT - 1)] = l->line;
        l->line = line;
    }
    int32_t slot = lat_slot[line & (lat_sets - 1)];
    struct qemu_plugin_hwaddr *hw = NULL;
    if (coh_dir) { /* every line, sampled set or not */
        if (!l->live)
            __atomic_store_n(&l->live, 1, __ATOMIC_RELAXED);
        hw = qemu_plugin_get_hwaddr(info, vaddr);
        uint64_t *e;
        if (hw && l->dom >= 0 && !qemu_plugin_hwaddr_is_io(hw) &&
            (e = coh_entry(qemu_plugin_hwaddr_phys_addr(hw))))
            coherent(vcpu, l, e, qemu_plugin_mem_is_store(info), line);
    }
    if (slot < 0)
        return;
    uint64_t *c = l->cols;
    c[0]++;
    if (!coh_dir)
        hw = qemu_plugin_get_hwaddr(info, vaddr);
    if (!hw) {
        c[2 + n_nodes]++;
        return;
    }
    if (qemu_plugin_hwaddr_is_io(hw)) {
        c[5 + n_nodes]++;
        return;
    }
    uint64_t tag = (qemu_plugin_hwaddr_phys_addr(hw) >> 6) + 1;
    uint64_t *set = l->tags + (size_t)slot * lat_ways; /* most recently used first */
    uint32_t w = 0;
    while (w < lat_ways && set[w] != tag)
        w++;
    int hit = w < lat_ways;
    if (!hit)
        w = lat_ways - 1; /* the least recently used leaves */
    memmove(set + 1, set, w * sizeof(*set));
    set[0] = tag;
    if (hit) {
        c[1]++;
        return;
    }
    int kind = lat_stream ? recent_kind(l, line) : 0;
    if (kind == 2) { /* just touched: a hit in any real cache */
        c[1]++;
        return;
    }
    int node = node_of((tag - 1) << 6);
    if (node < 0) {
        c[2 + n_nodes]++;
        return;
    }
    c[2 + node]++;
    int stream = kind == 1;
    c[6 + n_nodes] += (uint64_t)stream;
    uint64_t cost = l->node < 0 ? 0 : stream ? bw_ps[l->node][node] : cost_ps[l->node][node];
    if (stream && shares && cost && node_bw_ps[node]) {
        uint64_t shared = share_price(vcpu, node, cost);
        c[7 + n_nodes] += shared > cost;
        cost = shared;
    }
    if (!cost)
        return;
    cost *= lat_sample;
    c[3 + n_nodes] += cost;
    l->debt_ps += (int64_t)cost;
    if (l->debt_ps >= (int64_t)chunk_ps)
        pay(l);
}

static void on_access(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    (void)udata;
    if ((int)vcpu >= n_vcpus)
        return;
    if (lat)
        latency_access(vcpu, info, vaddr);
    if (!out)
        return;
    uint64_t *row = rows + (size_t)vcpu * stride;
    if (++row[0] < sample)
        return;
    row[0] = 0;
    struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
    if (!hw) {
        row[1 + n_nodes + 2]++;
        return;
    }
    if (qemu_plugin_hwaddr_is_io(hw)) {
        row[1 + n_nodes + 1]++;
        return;
    }
    uint64_t pa = qemu_plugin_hwaddr_phys_addr(hw);
    for (int i = 0; i < n_ranges; i++) {
        if (pa >= ranges[i].start && pa < ranges[i].end) {
            row[1 + ranges[i].node]++;
            return;
        }
    }
    row[1 + n_nodes]++;
    if (!__atomic_exchange_n(&outside_seen, 1, __ATOMIC_RELAXED))
        __atomic_store_n(&outside_first, pa, __ATOMIC_RELAXED);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (line_cb)
            qemu_plugin_register_vcpu_mem_line_cb(insn, on_access, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                                  line_entry, 6, NULL);
        else
            qemu_plugin_register_vcpu_mem_cb(insn, on_access, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, NULL);
    }
}

static void on_exit_cb(qemu_plugin_id_t id, void *udata);

/* After the reset (no vCPU runs, the translated code is flushed): instrument every block from now on. */
static void on_armed(qemu_plugin_id_t id)
{
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
}

static void on_mark(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    (void)udata;
    if (!__atomic_exchange_n(&arming, 1, __ATOMIC_RELAXED))
        qemu_plugin_reset(plugin_id, on_armed);
}

/* arm=mark, before the mark: no memory callback; a callback on the mark, wherever a block holds it. */
static void on_translate_waiting(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        unsigned char b[sizeof(MARK)];
        if (qemu_plugin_insn_size(insn) == sizeof(MARK) && qemu_plugin_insn_data(insn, b, sizeof(b)) == sizeof(b) &&
            !memcmp(b, MARK, sizeof(b)))
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
    }
}

static void write_latency(const char *tag)
{
    fprintf(lat_out, "%s %" PRIu64, tag, mono_ns());
    for (int v = 0; v < n_vcpus; v++)
        for (int c = 0; c < lat_width; c++) {
            uint64_t x = __atomic_load_n(&lat[v].cols[c], __ATOMIC_RELAXED);
            int ps = c == 3 + n_nodes || c == 9 + n_nodes || c == 11 + n_nodes;
            fprintf(lat_out, " %" PRIu64, ps ? x / 1000 : x); /* ps -> ns */
        }
    fputc('\n', lat_out);
    fflush(lat_out);
}

static void write_counts(const char *tag)
{
    if (lat_out)
        write_latency(tag);
    if (!out)
        return;
    fprintf(out, "%s %" PRIu64, tag, mono_ns());
    for (int v = 0; v < n_vcpus; v++) {
        const uint64_t *row = rows + (size_t)v * stride;
        for (int c = 1; c <= n_nodes + 3; c++)
            fprintf(out, " %" PRIu64, __atomic_load_n(&row[c], __ATOMIC_RELAXED));
    }
    fputc('\n', out);
    fflush(out);
}

static void *snapshots(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    while (!stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += (long)(interval_ms % 1000) * 1000000L;
        until.tv_sec += interval_ms / 1000 + until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&wake, &lock, &until);
        if (!stopping)
            write_counts("snap");
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void on_exit_cb(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    pthread_join(snapper, NULL);
    write_counts("end");
    if (lat_out)
        fclose(lat_out);
    if (!out)
        return;
    if (__atomic_load_n(&outside_seen, __ATOMIC_RELAXED))
        fprintf(out, "outside-first 0x%" PRIx64 "\n", __atomic_load_n(&outside_first, __ATOMIC_RELAXED));
    fclose(out);
}

static int fail(const char *what, const char *arg)
{
    fprintf(stderr, "numalab access_matrix plugin: %s: %s\n", what, arg);
    return -1;
}

static int pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

/* The latency arguments; 1 if a is one, 0 if not, -1 (after a message) if it is one and bad. */
static int latency_arg(const char *a, const char **lat_path)
{
    char tail, *end;
    if (!strncmp(a, "lat_out=", 8)) {
        *lat_path = a + 8;
    } else if (!strncmp(a, "vnode=", 6)) {
        int f, l, n;
        if (n_vnodes == MAX_RANGES || sscanf(a + 6, "%d:%d:%d%c", &f, &l, &n, &tail) != 3 || f < 0 || l < f ||
            n < 0 || n >= MAX_RANGES)
            return fail("bad vnode (want FIRST:LAST:NODE)", a);
        vnode_first[n_vnodes] = f, vnode_last[n_vnodes] = l, vnode_node[n_vnodes++] = n;
    } else if (!strncmp(a, "cost=", 5)) {
        int i, j;
        uint64_t ps;
        if (sscanf(a + 5, "%d:%d:%" SCNu64 "%c", &i, &j, &ps, &tail) != 3 || i < 0 || j < 0 || i >= MAX_RANGES ||
            j >= MAX_RANGES || ps > 1000000000ull)
            return fail("bad cost (want CPU_NODE:MEM_NODE:PICOSECONDS, at most 1 ms)", a);
        cost_ps[i][j] = ps;
    } else if (!strncmp(a, "bw=", 3)) {
        int i, j;
        uint64_t ps;
        if (sscanf(a + 3, "%d:%d:%" SCNu64 "%c", &i, &j, &ps, &tail) != 3 || i < 0 || j < 0 || i >= MAX_RANGES ||
            j >= MAX_RANGES || ps > 1000000000ull)
            return fail("bad bw (want CPU_NODE:MEM_NODE:PICOSECONDS, at most 1 ms)", a);
        bw_ps[i][j] = ps;
    } else if (!strncmp(a, "node_bw=", 8)) {
        int j;
        uint64_t ps;
        if (sscanf(a + 8, "%d:%" SCNu64 "%c", &j, &ps, &tail) != 2 || j < 0 || j >= MAX_RANGES || !ps ||
            ps > 1000000000ull)
            return fail("bad node_bw (want NODE:PICOSECONDS, more than 0 and at most 1 ms)", a);
        node_bw_ps[j] = ps;
    } else if (!strncmp(a, "share_ns=", 9)) {
        uint64_t v = strtoull(a + 9, &end, 10);
        if (*end || v < 100 || v > 10000000)
            return fail("bad share_ns (want 100..10000000)", a);
        share_ns = v;
    } else if (!strncmp(a, "stream=", 7)) {
        if (strcmp(a + 7, "0") && strcmp(a + 7, "1"))
            return fail("bad stream (want 0 or 1)", a);
        lat_stream = a[7] == '1';
    } else if (!strncmp(a, "lines=", 6)) {
        uint64_t v = strtoull(a + 6, &end, 10);
        if (*end || !pow2(v) || v > LAT_MAX_SETS)
            return fail("bad lines (want a power of two up to 1048576)", a);
        lat_lines = (uint32_t)v;
    } else if (!strncmp(a, "ways=", 5)) {
        uint64_t v = strtoull(a + 5, &end, 10);
        if (*end || !pow2(v) || v > 64)
            return fail("bad ways (want a power of two up to 64)", a);
        lat_ways = (uint32_t)v;
    } else if (!strncmp(a, "lat_sample=", 11)) {
        uint64_t v = strtoull(a + 11, &end, 10);
        if (*end || !pow2(v) || v > 4096)
            return fail("bad lat_sample (want a power of two up to 4096)", a);
        lat_sample = (uint32_t)v;
    } else if (!strncmp(a, "lat_clock=", 10)) {
        if (strcmp(a + 10, "virtual") && strcmp(a + 10, "host"))
            return fail("bad lat_clock (want virtual or host)", a);
        lat_virtual = !strcmp(a + 10, "virtual");
    } else if (!strncmp(a, "coherence=", 10)) {
        if (strcmp(a + 10, "0") && strcmp(a + 10, "1"))
            return fail("bad coherence (want 0 or 1)", a);
        lat_coherence = a[10] == '1';
    } else if (!strncmp(a, "coh_lines=", 10)) {
        uint64_t v = strtoull(a + 10, &end, 10);
        if (*end || !a[10] || v > 0x7fffffffull)
            return fail("bad coh_lines (want 0..2147483647)", a);
        coh_lines = (uint32_t)v;
    } else if (!strncmp(a, "coh_node=", 9)) {
        unsigned node;
        uint64_t v;
        char tail;
        if (sscanf(a + 9, "%u:%" SCNu64 "%c", &node, &v, &tail) != 2 || node >= COH_MAX_NODES || v > 0x7fffffffull)
            return fail("bad coh_node (want NODE:LINES, LINES 0..2147483647)", a);
        coh_node_set[node] = 1;
        coh_cap[node] = (uint32_t)v;
    } else if (!strncmp(a, "vllc=", 5)) {
        int f, l, n;
        if (n_vllcs == MAX_RANGES || sscanf(a + 5, "%d:%d:%d%c", &f, &l, &n, &tail) != 3 || f < 0 || l < f || n < 0 ||
            n >= COH_MAX_NODES)
            return fail("bad vllc (want FIRST:LAST:LLC, LLC 0..23)", a);
        vllc_first[n_vllcs] = f, vllc_last[n_vllcs] = l, vllc_llc[n_vllcs++] = n;
        if (n + 1 > n_llcs)
            n_llcs = n + 1;
    } else if (!strncmp(a, "llc_cost=", 9)) {
        int j;
        uint64_t ps;
        if (sscanf(a + 9, "%d:%" SCNu64 "%c", &j, &ps, &tail) != 2 || j < 0 || j >= MAX_RANGES || ps > 1000000000ull)
            return fail("bad llc_cost (want NODE:PICOSECONDS, at most 1 ms)", a);
        llc_cost_ps[j] = ps;
    } else if (!strncmp(a, "coh_llc=", 8)) {
        unsigned llc;
        uint64_t v;
        if (sscanf(a + 8, "%u:%" SCNu64 "%c", &llc, &v, &tail) != 2 || llc >= COH_MAX_NODES || v > 0x7fffffffull)
            return fail("bad coh_llc (want LLC:LINES, LLC 0..23, LINES 0..2147483647)", a);
        coh_llc_set[llc] = 1;
        coh_llc_cap[llc] = (uint32_t)v;
    } else if (!strncmp(a, "line_cb=", 8)) {
        if (strcmp(a + 8, "0") && strcmp(a + 8, "1"))
            return fail("bad line_cb (want 0 or 1)", a);
        lat_line_cb = a[8] == '1';
    } else if (!strncmp(a, "chunk_ns=", 9)) {
        uint64_t v = strtoull(a + 9, &end, 10);
        if (*end || v < 1000 || v > 100000000)
            return fail("bad chunk_ns (want 1000..100000000)", a);
        chunk_ps = v * 1000;
    } else {
        return 0;
    }
    return 1;
}

static int latency_setup(const char *path, int every_access)
{
    if (lat_ways > lat_lines || lat_sample > lat_lines / lat_ways)
        return fail("lat_sample times ways is more than lines", path);
    lat_sets = lat_lines / lat_ways;
    if (lat_coherence && !n_llcs && n_nodes > COH_MAX_NODES)
        return fail("coherence: at most 24 nodes", path);
    if (n_llcs && !lat_coherence)
        return fail("vllc needs coherence=1", path);
    for (int i = 0; i < COH_MAX_NODES; i++) {
        if (coh_node_set[i] && !lat_coherence)
            return fail("coh_node needs coherence=1", path);
        if (coh_node_set[i] && n_llcs)
            return fail("coh_node with vllc: give an LLC's own size with coh_llc", path);
        if (coh_llc_set[i] && !n_llcs)
            return fail("coh_llc needs vllc", path);
        if (n_llcs)
            coh_cap[i] = coh_llc_set[i] ? coh_llc_cap[i] : coh_lines;
        else if (!coh_node_set[i])
            coh_cap[i] = coh_lines;
        coh_capped |= coh_cap[i] != 0;
    }
    for (int j = 0; j < MAX_RANGES; j++)
        if (llc_cost_ps[j] && !n_llcs)
            return fail("llc_cost needs vllc", path);
    if (coh_lines && !lat_coherence)
        return fail("coh_lines needs coherence=1", path);
    /* coherence with the line callback needs to reset a vCPU's entry (QEMU 9.0+'s qemu_plugin_u64_set) */
    if (lat_line_cb && !every_access && qemu_plugin_register_vcpu_mem_line_cb && qemu_plugin_scoreboard_new &&
        (!lat_coherence || qemu_plugin_u64_set)) {
        line_entry.score = qemu_plugin_scoreboard_new(sizeof(uint64_t));
        line_entry.offset = 0;
        line_cb = line_entry.score != NULL;
    }
    if (lat_virtual) {
        if (!qemu_plugin_request_time_control || !qemu_plugin_charge_ns)
            return fail("lat_clock=virtual: this QEMU has no qemu_plugin_charge_ns (numalab's patch, images/qemu)",
                        path);
        time_handle = qemu_plugin_request_time_control();
        if (!time_handle)
            return fail("lat_clock=virtual: another plugin holds the time control", path);
    }
    if (share_ns) {
        if (!lat_stream || !lat_virtual)
            return fail("share_ns needs stream=1 and lat_clock=virtual (a node's bandwidth shared in guest time)",
                        path);
        if (!qemu_plugin_vcpu_clock_ns)
            return fail("share_ns: this QEMU has no qemu_plugin_vcpu_clock_ns (numalab's patch, images/qemu/0008)",
                        path);
        shares = calloc((size_t)n_nodes * (size_t)n_vcpus, sizeof(*shares));
        if (!shares)
            return fail("out of memory", "shares");
    }
    if (lat_coherence) { /* one entry a line of every range; calloc's pages are touched only where lines are */
        uint64_t lines = 0;
        for (int i = 0; i < n_ranges; i++) {
            coh_base[i] = lines;
            lines += ((ranges[i].end + 63) >> 6) - (ranges[i].start >> 6);
        }
        coh_dir = calloc(lines, sizeof(*coh_dir));
        if (!coh_dir)
            return fail("out of memory", "coherence directory");
    }
    uint32_t modelled = lat_sets / lat_sample;
    lat_slot = malloc(lat_sets * sizeof(*lat_slot));
    if (!lat_slot || posix_memalign((void **)&lat, 64, (size_t)n_vcpus * sizeof(*lat)))
        return fail("out of memory", "latency");
    memset(lat, 0, (size_t)n_vcpus * sizeof(*lat));
    /* A fixed pseudo-random choice of exactly sets/lat_sample sets (so each modelled miss stands for exactly
     * lat_sample): the set's number permuted, taken when it lands below that; numbered as they come. */
    uint32_t k = 0, mask = lat_sets - 1, half = (uint32_t)__builtin_ctz(lat_sets) / 2 + 1;
    for (uint32_t s = 0; s < lat_sets; s++) {
        uint32_t z = (s * 0x9e3779b1u) & mask; /* odd multiplies and xor-shifts: a permutation of the sets */
        z ^= z >> half;
        z = (z * 0x85ebca6bu) & mask;
        z ^= z >> half;
        lat_slot[s] = z < modelled ? (int32_t)k++ : -1;
    }
    if (k != modelled)
        return fail("set sampling went wrong", path);
    lat_width = n_nodes + LAT_FIXED;
    for (int v = 0; v < n_vcpus; v++) {
        lat[v].tags = calloc((size_t)k * lat_ways, sizeof(uint64_t));
        size_t cols = ((size_t)lat_width + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN; /* whole cache lines */
        if (!lat[v].tags || posix_memalign((void **)&lat[v].cols, 64, cols * sizeof(uint64_t)))
            return fail("out of memory", "latency tags");
        memset(lat[v].cols, 0, cols * sizeof(uint64_t));
        lat[v].node = -1;
        for (int i = 0; i < n_vnodes; i++)
            if (v >= vnode_first[i] && v <= vnode_last[i])
                lat[v].node = vnode_node[i];
        lat[v].dom = n_llcs ? -1 : lat[v].node;
        for (int i = 0; i < n_vllcs; i++)
            if (v >= vllc_first[i] && v <= vllc_last[i])
                lat[v].dom = vllc_llc[i];
        if (lat[v].dom >= COH_MAX_NODES)
            lat[v].dom = -1; /* (a node past 24 without vllc=: refused above when coherence is on) */
        if (n_llcs && lat[v].dom >= 0 && lat[v].node < 0)
            return fail("vllc: a vCPU with an LLC and no node (vnode=)", path);
    }
    for (int d = 0; d < COH_MAX_NODES; d++)
        dom_node[d] = n_llcs ? -1 : d;
    for (int v = 0; n_llcs && v < n_vcpus; v++) {
        int d = lat[v].dom;
        if (d < 0)
            continue;
        if (dom_node[d] >= 0 && dom_node[d] != lat[v].node)
            return fail("vllc: an LLC's vCPUs on two nodes", path);
        dom_node[d] = lat[v].node;
    }
    lat_out = fopen(path, "w");
    if (!lat_out)
        return fail("cannot write", path);
    fprintf(lat_out,
            "numalab-remote-latency 6\napi %d\nlines %u\nways %u\nmodelled_sets %u\nlat_sample %u\nchunk_ns %" PRIu64
            "\nlat_virtual %d\nstream %d\nline_cb %d\nshare_ns %" PRIu64
            "\ncoherence %d\ncoh_lines %u\narm_mark %d\nvcpus %d\nnodes %d\nllcs %d\n",
            NUMALAB_PLUGIN_API, lat_lines, lat_ways, k, lat_sample, chunk_ps / 1000, lat_virtual, lat_stream, line_cb,
            share_ns, lat_coherence, coh_lines, arm_at_mark, n_vcpus, n_nodes, n_llcs);
    for (int v = 0; v < n_vcpus; v++)
        fprintf(lat_out, "vnode %d %d\n", v, lat[v].node);
    for (int v = 0; n_llcs && v < n_vcpus; v++)
        fprintf(lat_out, "vllc %d %d\n", v, lat[v].dom);
    for (int i = 0; i < n_nodes; i++)
        for (int j = 0; j < n_nodes; j++)
            if (cost_ps[i][j])
                fprintf(lat_out, "cost %d %d %" PRIu64 "\n", i, j, cost_ps[i][j]);
    for (int i = 0; lat_stream && i < n_nodes; i++)
        for (int j = 0; j < n_nodes; j++)
            if (bw_ps[i][j])
                fprintf(lat_out, "bw %d %d %" PRIu64 "\n", i, j, bw_ps[i][j]);
    for (int j = 0; shares && j < n_nodes; j++)
        if (node_bw_ps[j])
            fprintf(lat_out, "node_bw %d %" PRIu64 "\n", j, node_bw_ps[j]);
    for (int j = 0; j < n_nodes && j < COH_MAX_NODES; j++)
        if (coh_node_set[j])
            fprintf(lat_out, "coh_node %d %u\n", j, coh_cap[j]);
    for (int j = 0; j < n_nodes; j++)
        if (llc_cost_ps[j])
            fprintf(lat_out, "llc_cost %d %" PRIu64 "\n", j, llc_cost_ps[j]);
    for (int d = 0; d < n_llcs; d++)
        if (coh_llc_set[d])
            fprintf(lat_out, "coh_llc %d %u\n", d, coh_cap[d]);
    return 0;
}

NL_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    const char *path = NULL, *lat_path = NULL;
    if (!info->system_emulation)
        return fail("needs system emulation", info->target_name);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "out=", 4)) {
            path = a + 4;
        } else if (!strncmp(a, "sample=", 7)) {
            char *end;
            sample = strtoull(a + 7, &end, 10);
            if (*end || sample < 1)
                return fail("bad sample (want an integer >= 1)", a);
        } else if (!strncmp(a, "interval_ms=", 12)) {
            char *end;
            unsigned long v = strtoul(a + 12, &end, 10);
            if (*end || v < 10 || v > 60000)
                return fail("bad interval_ms (want 10..60000)", a);
            interval_ms = (unsigned)v;
        } else if (!strcmp(a, "arm=mark")) {
            if (info->version.cur < 3 || !qemu_plugin_reset || !qemu_plugin_register_vcpu_insn_exec_cb ||
                !qemu_plugin_insn_size || !qemu_plugin_insn_data)
                return fail("arm=mark: needs a QEMU whose plugin API is version 3 or more", a);
            arm_at_mark = 1;
        } else if (!strncmp(a, "range=", 6)) {
            struct range r;
            char tail;
            if (n_ranges == MAX_RANGES)
                return fail("too many ranges", a);
            if (sscanf(a + 6, "%d:%" SCNx64 ":%" SCNx64 "%c", &r.node, &r.start, &r.end, &tail) != 3 ||
                r.node < 0 || r.node >= MAX_RANGES || r.end <= r.start)
                return fail("bad range (want NODE:START:END in hex)", a);
            ranges[n_ranges++] = r;
            if (r.node + 1 > n_nodes)
                n_nodes = r.node + 1;
        } else {
            int r = latency_arg(a, &lat_path);
            if (r < 0)
                return -1;
            if (!r)
                return fail("unknown argument", a);
        }
    }
    if (!path && !lat_path)
        return fail("missing argument", "out=PATH");
    if (!n_ranges)
        return fail("missing argument", "range=NODE:START:END");
    n_vcpus = info->system.max_vcpus > info->system.smp_vcpus ? info->system.max_vcpus : info->system.smp_vcpus;
    stride = ((size_t)n_nodes + 4 + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
    if (posix_memalign((void **)&rows, 64, (size_t)n_vcpus * stride * sizeof(uint64_t)))
        return fail("out of memory", "rows");
    memset(rows, 0, (size_t)n_vcpus * stride * sizeof(uint64_t));
    for (int v = 0; v < n_vcpus; v++) /* vCPUs start at different phases of the sampling period */
        rows[(size_t)v * stride] = (uint64_t)v * 7919u % sample;
    if (lat_path && latency_setup(lat_path, path != NULL))
        return -1;
    if (!path)
        goto started;
    out = fopen(path, "w");
    if (!out)
        return fail("cannot write", path);
    fprintf(out, "numalab-access-matrix 1\napi %d\nsample %" PRIu64 "\ninterval_ms %u\nvcpus %d\nnodes %d\n",
            NUMALAB_PLUGIN_API, sample, interval_ms, n_vcpus, n_nodes);
    for (int i = 0; i < n_ranges; i++)
        fprintf(out, "range %d 0x%" PRIx64 " 0x%" PRIx64 "\n", ranges[i].node, ranges[i].start, ranges[i].end);
started:
    write_counts("snap");
    if (pthread_create(&snapper, NULL, snapshots, NULL))
        return fail("cannot start the snapshot thread", path);
    plugin_id = id;
    qemu_plugin_register_vcpu_tb_trans_cb(id, arm_at_mark ? on_translate_waiting : on_translate);
    qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
    return 0;
}
