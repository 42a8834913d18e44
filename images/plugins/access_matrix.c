/*
 * numalab access-matrix plugin: counts the guest's memory accesses by
 * (accessing vCPU, NUMA node owning the accessed guest-physical page).
 *
 * Arguments (-plugin file=access_matrix.so,KEY=VALUE,...):
 *   out=PATH          where the counts go (text, one line per snapshot; see below)
 *   sample=N          look up every Nth access of each vCPU (1: every access)
 *   interval_ms=MS    snapshot period (default 250)
 *   range=NODE:START:END   an address range [START, END) (hex) of NODE, as this QEMU's
 *                     qemu_plugin_hwaddr_phys_addr reports it; repeatable
 *
 * Output (lab/vm/access_plugin.py reads it):
 *   numalab-access-matrix 1
 *   api A / sample N / vcpus V / nodes K / range NODE START END   (header)
 *   snap MONO_NS c...   cumulative counts, V rows of K+3 numbers: per node, then
 *                       outside (RAM that is in no node's range), io (MMIO), unresolved
 *   end MONO_NS c...    the same at exit
 *   outside-first ADDR  the first address outside every range (when there was one)
 * MONO_NS is CLOCK_MONOTONIC in nanoseconds, the host clock numalab stamps stages with.
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

static void on_access(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    (void)udata;
    if ((int)vcpu >= n_vcpus)
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
    for (size_t i = 0; i < n; i++)
        qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i), on_access, QEMU_PLUGIN_CB_NO_REGS,
                                         QEMU_PLUGIN_MEM_RW, NULL);
}

static void write_counts(const char *tag)
{
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
    if (__atomic_load_n(&outside_seen, __ATOMIC_RELAXED))
        fprintf(out, "outside-first 0x%" PRIx64 "\n", __atomic_load_n(&outside_first, __ATOMIC_RELAXED));
    fclose(out);
}

static int fail(const char *what, const char *arg)
{
    fprintf(stderr, "numalab access_matrix plugin: %s: %s\n", what, arg);
    return -1;
}

NL_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    const char *path = NULL;
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
            return fail("unknown argument", a);
        }
    }
    if (!path)
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
    out = fopen(path, "w");
    if (!out)
        return fail("cannot write", path);
    fprintf(out, "numalab-access-matrix 1\napi %d\nsample %" PRIu64 "\ninterval_ms %u\nvcpus %d\nnodes %d\n",
            NUMALAB_PLUGIN_API, sample, interval_ms, n_vcpus, n_nodes);
    for (int i = 0; i < n_ranges; i++)
        fprintf(out, "range %d 0x%" PRIx64 " 0x%" PRIx64 "\n", ranges[i].node, ranges[i].start, ranges[i].end);
    write_counts("snap");
    if (pthread_create(&snapper, NULL, snapshots, NULL))
        return fail("cannot start the snapshot thread", path);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
    return 0;
}
