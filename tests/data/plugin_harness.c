/*
 * A stand-in for QEMU that loads the access-matrix plugin and feeds it memory accesses (tests/unit/
 * test_remote_latency.py): the plugin's qemu_plugin_* calls resolve to the functions below (link with
 * -rdynamic). Every access is a load at a virtual address that is also its "physical" address; addresses
 * from 0xf0000000 on are MMIO (as the LAPIC's 0xfee00000 is on a PC).
 *
 *   plugin_harness PLUGIN.so VCPU START_HEX BYTES STRIDE PASSES ARG...
 *
 * VCPU reads BYTES from START with STRIDE, PASSES times, then QEMU "exits" (the atexit callback). With
 * $HARNESS_TWIN=OFFSET_HEX each load is followed by one at OFFSET further on (a copy's source and destination).
 * Prints "thread_cpu_ns N": the CPU time the feeding thread used (the plugin holds it there).
 * Built with -DWITH_CHARGE it also has the time control and numalab's qemu_plugin_charge_ns (a patched
 * QEMU's), and prints "clock_charged_ns N": what the plugin charged to the "guest's clock".
 * Built with -DWITH_LINE_CB it also has scoreboards and numalab's qemu_plugin_register_vcpu_mem_line_cb
 * (images/qemu/0005): an access to the line (64 B) its vCPU's callback saw last is not passed on, as the
 * patched QEMU's translated code skips it; prints "line_cb_calls N" and "line_cb_skipped N".
 * Built with -DWITH_VCPU_CLOCK it also has numalab's qemu_plugin_vcpu_clock_ns (images/qemu/0008): a vCPU's
 * guest time is its accesses at $HARNESS_INSN_PS picoseconds each (default 1000: one an instruction at 1 G
 * a second) plus what was charged to it.
 * With $HARNESS_PEER=VCPU:START_HEX a second vCPU reads as many bytes from its START at the same time, as
 * parallel guest time (images/qemu/0006) runs them on one thread: the vCPU whose time is the least runs
 * $HARNESS_QUANTUM_NS (default 2000) of its guest time, then the least again. Prints "vcpu_time_ns_V N" for each,
 * and "switches N": how many times the vCPU that ran changed.
 * $HARNESS_RMW=MASK: the vCPUs of the mask (bit V: vCPU V) follow each load with a store to the same address (a
 * counter's increment). $HARNESS_INIT=1: before anything else, the first vCPU stores once to every STRIDE of its
 * range (the line's writer). A store's meminfo is 1 (qemu_plugin_mem_is_store), a load's 0.
 * The one instruction of the one block is numalab's mark (images/workloads/model_start.c); the harness executes
 * it before access $HARNESS_MARK_AT (default 0; -1: never) when the plugin registered a callback on it (arm=mark):
 * a qemu_plugin_reset then takes effect at once (no vCPU runs), and the block is translated again. Until then an
 * access with no memory callback registered is not passed on. $HARNESS_API: the current plugin API version QEMU
 * reports (default 4, QEMU 10's).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../images/plugins/numalab_qemu_plugin.h"

struct qemu_plugin_hwaddr {
    uint64_t pa;
};
static struct qemu_plugin_hwaddr hw;
static qemu_plugin_vcpu_tb_trans_cb_t trans_cb;
static qemu_plugin_vcpu_mem_cb_t mem_cb;
static void *mem_udata;
static qemu_plugin_udata_cb_t exit_cb;
static void *exit_udata;
static unsigned cur_vcpu;          /* the vCPU being fed */
static uint64_t accesses[2];       /* per vCPU */
static int64_t charged[2];         /* per vCPU: what the plugin charged to its clock */
static uint64_t insn_ps = 1000;    /* an access's own guest time */

static int64_t vcpu_time_ns(unsigned vcpu)
{
    return (int64_t)(accesses[vcpu] * insn_ps / 1000) + charged[vcpu];
}

static const unsigned char MARK[15] = {0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x2e, 0x0f,
                                       0x1f, 0x84, 0x00, 0x4e, 0x55, 0x4d, 0x41};
static qemu_plugin_vcpu_udata_cb_t insn_cb;
static void *insn_udata;
static qemu_plugin_simple_cb_t reset_cb;
static int reset_asked;

NL_EXPORT size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn)
{
    (void)insn;
    return sizeof(MARK);
}
NL_EXPORT size_t qemu_plugin_insn_data(const struct qemu_plugin_insn *insn, void *dest, size_t len)
{
    (void)insn;
    len = len < sizeof(MARK) ? len : sizeof(MARK);
    memcpy(dest, MARK, len);
    return len;
}
NL_EXPORT void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                                      enum qemu_plugin_cb_flags flags, void *userdata)
{
    (void)insn;
    (void)flags;
    insn_cb = cb;
    insn_udata = userdata;
}
NL_EXPORT void qemu_plugin_reset(qemu_plugin_id_t id, qemu_plugin_simple_cb_t cb)
{
    (void)id;
    reset_cb = cb;
    reset_asked++;
}

NL_EXPORT void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb)
{
    (void)id;
    trans_cb = cb;
}
NL_EXPORT size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb)
{
    (void)tb;
    return 1;
}
NL_EXPORT struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx)
{
    (void)tb;
    (void)idx;
    return (struct qemu_plugin_insn *)&hw;
}
NL_EXPORT void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                                enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                                void *userdata)
{
    (void)insn;
    (void)flags;
    (void)rw;
    mem_cb = cb;
    mem_udata = userdata;
}
NL_EXPORT struct qemu_plugin_hwaddr *qemu_plugin_get_hwaddr(qemu_plugin_meminfo_t info, uint64_t vaddr)
{
    (void)info;
    hw.pa = vaddr;
    return &hw;
}
NL_EXPORT bool qemu_plugin_hwaddr_is_io(const struct qemu_plugin_hwaddr *haddr)
{
    return haddr->pa >= 0xf0000000u;
}
NL_EXPORT uint64_t qemu_plugin_hwaddr_phys_addr(const struct qemu_plugin_hwaddr *haddr)
{
    return haddr->pa;
}
NL_EXPORT bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info)
{
    return info & 1;
}
NL_EXPORT void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata)
{
    (void)id;
    exit_cb = cb;
    exit_udata = userdata;
}

#ifdef WITH_CHARGE
static int time_control;
static int64_t clock_charged;
NL_EXPORT const void *qemu_plugin_request_time_control(void)
{
    return &time_control;
}
NL_EXPORT bool qemu_plugin_charge_ns(const void *handle, int64_t ns)
{
    if (handle != &time_control || ns < 0)
        return false;
    clock_charged += ns;
    charged[cur_vcpu & 1] += ns;
    return true;
}
#endif

#ifdef WITH_VCPU_CLOCK
NL_EXPORT int64_t qemu_plugin_vcpu_clock_ns(void)
{
    return vcpu_time_ns(cur_vcpu & 1);
}
#endif

#ifdef WITH_LINE_CB
struct qemu_plugin_scoreboard {
    uint64_t v[2]; /* one uint64_t entry per vCPU: the harness's two */
};
static struct qemu_plugin_scoreboard board;
static int line_registered;
static qemu_plugin_u64 line_entry;
static unsigned line_shift;
static uint64_t line_calls, line_skipped;
NL_EXPORT struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t element_size)
{
    return element_size == sizeof(uint64_t) ? &board : NULL;
}
NL_EXPORT void qemu_plugin_u64_set(qemu_plugin_u64 entry, unsigned int vcpu_index, uint64_t val)
{
    (&entry.score->v[vcpu_index])[entry.offset / sizeof(uint64_t)] = val;
}
NL_EXPORT void qemu_plugin_register_vcpu_mem_line_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                                     enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                                     qemu_plugin_u64 entry, unsigned int shift, void *userdata)
{
    qemu_plugin_register_vcpu_mem_cb(insn, cb, flags, rw, userdata);
    line_registered = 1;
    line_entry = entry;
    line_shift = shift;
}
#endif

/* One load or store, as QEMU passes it on: to every access's callback, or (a line callback) to a new line's only. */
static long long mark_at; /* $HARNESS_MARK_AT */
static uint64_t fed;

static void feed(unsigned vcpu, uint64_t vaddr, int store)
{
    cur_vcpu = vcpu;
    if (mark_at >= 0 && fed++ == (uint64_t)mark_at && insn_cb) {
        insn_cb(vcpu, insn_udata);
        if (reset_asked) { /* no vCPU runs between two accesses here: the reset, then the block translated again */
            mem_cb = NULL;
            insn_cb = NULL;
            trans_cb = NULL;
            exit_cb = NULL;
            reset_cb(1);
            if (trans_cb)
                trans_cb(1, NULL);
        }
    }
    accesses[vcpu & 1]++;
    if (!mem_cb)
        return;
#ifdef WITH_LINE_CB
    if (line_registered) {
        uint64_t *last = &line_entry.score->v[vcpu] + line_entry.offset / sizeof(uint64_t);
        if (*last == vaddr >> line_shift) {
            line_skipped++;
            return;
        }
        *last = vaddr >> line_shift;
        line_calls++;
    }
#endif
    mem_cb(vcpu, store ? 1 : 0, vaddr, mem_udata);
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: plugin_harness PLUGIN.so VCPU START_HEX BYTES STRIDE PASSES ARG...\n");
        return 2;
    }
    void *so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!so) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    int (*install)(qemu_plugin_id_t, const qemu_info_t *, int, char **) =
        (int (*)(qemu_plugin_id_t, const qemu_info_t *, int, char **))dlsym(so, "qemu_plugin_install");
    const char *api_env = getenv("HARNESS_API");
    qemu_info_t info = {.target_name = "x86_64", .system_emulation = true};
    info.version.min = 2;
    info.version.cur = api_env ? atoi(api_env) : 4;
    info.system.smp_vcpus = info.system.max_vcpus = 2;
    if (!install || install(1, &info, argc - 7, argv + 7)) {
        fprintf(stderr, "install failed\n");
        return 1;
    }
    trans_cb(1, NULL);
    unsigned vcpu = (unsigned)atoi(argv[2]);
    uint64_t start = strtoull(argv[3], NULL, 16), bytes = strtoull(argv[4], NULL, 10);
    uint64_t stride = strtoull(argv[5], NULL, 10);
    int passes = atoi(argv[6]);
    const char *twin_env = getenv("HARNESS_TWIN"), *peer_env = getenv("HARNESS_PEER");
    const char *insn_env = getenv("HARNESS_INSN_PS"), *quantum_env = getenv("HARNESS_QUANTUM_NS");
    const char *rmw_env = getenv("HARNESS_RMW"), *init_env = getenv("HARNESS_INIT");
    const char *mark_env = getenv("HARNESS_MARK_AT");
    mark_at = mark_env ? atoll(mark_env) : 0;
    unsigned rmw = rmw_env ? (unsigned)strtoul(rmw_env, NULL, 0) : 0;
    uint64_t switches = 0;
    uint64_t twin = twin_env ? strtoull(twin_env, NULL, 16) : 0;
    insn_ps = insn_env ? strtoull(insn_env, NULL, 10) : 1000;
    int64_t quantum = quantum_env ? strtoll(quantum_env, NULL, 10) : 2000;
    /* the vCPUs fed: one, or two (HARNESS_PEER) whose accesses interleave by their guest time */
    unsigned n = 1, who[2] = {vcpu, 0};
    uint64_t from[2] = {start, 0}, at[2] = {0, 0}, total = passes > 0 ? (bytes + stride - 1) / stride * passes : 0;
    if (peer_env) {
        char *colon;
        who[1] = (unsigned)strtoul(peer_env, &colon, 10);
        from[1] = strtoull(colon + 1, NULL, 16);
        n = 2;
        if (who[0] > 1 || who[1] > 1 || who[0] == who[1]) {
            fprintf(stderr, "HARNESS_PEER: want the other vCPU of 0 and 1\n");
            return 2;
        }
    }
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    if (init_env && atoi(init_env))
        for (uint64_t off = 0; off < bytes; off += stride)
            feed(who[0], from[0] + off, 1);
    for (unsigned last = 2;;) {
        unsigned i = 0; /* the one whose time is the least runs; a vCPU done leaves the other alone */
        if (n == 2 && (at[0] == total || (at[1] < total && vcpu_time_ns(who[1]) < vcpu_time_ns(who[0]))))
            i = 1;
        if (at[i] == total)
            break;
        switches += last != 2 && last != i;
        last = i;
        int64_t until = n == 2 && at[1 - i] < total ? vcpu_time_ns(who[i]) + quantum : INT64_MAX; /* a quantum */
        while (at[i] < total && vcpu_time_ns(who[i]) <= until) {
            uint64_t off = at[i] % ((bytes + stride - 1) / stride) * stride;
            feed(who[i], from[i] + off, 0);
            if (rmw >> who[i] & 1)
                feed(who[i], from[i] + off, 1);
            if (twin)
                feed(who[i], from[i] + off + twin, 0);
            at[i]++;
        }
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    exit_cb(1, exit_udata);
    printf("thread_cpu_ns %" PRIu64 "\n",
           (uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u + (uint64_t)b.tv_nsec - (uint64_t)a.tv_nsec);
#ifdef WITH_CHARGE
    printf("clock_charged_ns %" PRId64 "\n", clock_charged);
#endif
    for (unsigned i = 0; i < n; i++)
        printf("vcpu_time_ns_%u %" PRId64 "\n", who[i], vcpu_time_ns(who[i]));
    printf("switches %" PRIu64 "\n", switches);
    printf("resets %d\n", reset_asked);
#ifdef WITH_LINE_CB
    printf("line_cb_calls %" PRIu64 "\nline_cb_skipped %" PRIu64 "\n", line_calls, line_skipped);
#endif
    return 0;
}
