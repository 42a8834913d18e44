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
    return true;
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

/* One load, as QEMU passes it on: to every access's callback, or (a line callback) to a new line's only. */
static void feed(unsigned vcpu, uint64_t vaddr)
{
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
    mem_cb(vcpu, 0, vaddr, mem_udata);
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
    qemu_info_t info = {.target_name = "x86_64", .system_emulation = true};
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
    const char *twin_env = getenv("HARNESS_TWIN");
    uint64_t twin = twin_env ? strtoull(twin_env, NULL, 16) : 0;
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (int p = 0; p < passes; p++)
        for (uint64_t off = 0; off < bytes; off += stride) {
            feed(vcpu, start + off);
            if (twin)
                feed(vcpu, start + off + twin);
        }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    exit_cb(1, exit_udata);
    printf("thread_cpu_ns %" PRIu64 "\n",
           (uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u + (uint64_t)b.tv_nsec - (uint64_t)a.tv_nsec);
#ifdef WITH_CHARGE
    printf("clock_charged_ns %" PRId64 "\n", clock_charged);
#endif
#ifdef WITH_LINE_CB
    printf("line_cb_calls %" PRIu64 "\nline_cb_skipped %" PRIu64 "\n", line_calls, line_skipped);
#endif
    return 0;
}
