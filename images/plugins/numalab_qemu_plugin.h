/*
 * The few parts of QEMU's TCG plugin interface that numalab's plugins use,
 * declared here in our own words (no Debian 12 package ships qemu-plugin.h).
 *
 * What a plugin must provide:
 *   - an exported int `qemu_plugin_version`: QEMU refuses a plugin whose
 *     version is below its minimum or above its own (QEMU 4.2-8.2 accept 1;
 *     QEMU 9.0 raised the minimum to 2). numalab builds with
 *     -DNUMALAB_PLUGIN_API=<n>, chosen from the installed QEMU's version;
 *   - an exported `qemu_plugin_install`, called once when QEMU loads it.
 *
 * The functions below have had the same signatures from API version 1 to
 * the current one. The weak ones at the end may be missing (NULL); the
 * scoreboard type is 9.0's, used only with numalab's line callback.
 */
#ifndef NUMALAB_QEMU_PLUGIN_H
#define NUMALAB_QEMU_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NL_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;

/* What QEMU tells the plugin about itself and the machine at install time. */
typedef struct {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;

struct qemu_plugin_tb;      /* a translation block being translated (opaque) */
struct qemu_plugin_insn;    /* one guest instruction of it (opaque) */
struct qemu_plugin_hwaddr;  /* where a memory access went (opaque) */
typedef uint32_t qemu_plugin_meminfo_t;  /* size, sign, endianness, store bit: packed */

enum qemu_plugin_cb_flags {
    QEMU_PLUGIN_CB_NO_REGS,  /* the callback reads no guest registers */
    QEMU_PLUGIN_CB_R_REGS,
    QEMU_PLUGIN_CB_RW_REGS,
};

enum qemu_plugin_mem_rw {
    QEMU_PLUGIN_MEM_R = 1,
    QEMU_PLUGIN_MEM_W,
    QEMU_PLUGIN_MEM_RW,
};

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
                                          uint64_t vaddr, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

/* Called for every translation block QEMU translates. */
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
/* Called on every load and/or store the instruction makes, on the vCPU's own thread. */
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                      void *userdata);
/* Only valid inside a memory callback (system emulation): where the access went. */
struct qemu_plugin_hwaddr *qemu_plugin_get_hwaddr(qemu_plugin_meminfo_t info, uint64_t vaddr);
bool qemu_plugin_hwaddr_is_io(const struct qemu_plugin_hwaddr *haddr);
/* QEMU 8.2+: the guest-physical address. QEMU 5.1-8.1: for RAM, the RAM block's offset in
 * QEMU's ram_addr space + the region's offset in its container + the offset in the block. */
uint64_t qemu_plugin_hwaddr_phys_addr(const struct qemu_plugin_hwaddr *haddr);
/* Whether the access was a store (a load otherwise); from a memory callback's info. */
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);
/* Called once when QEMU exits normally (the guest powered off). */
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

/* Declared weak: a QEMU that does not have them leaves them NULL, and the plugin still loads.
 * QEMU 9.0+: the right to control the guest's time (one plugin at a time), an opaque handle or NULL. */
const void *qemu_plugin_request_time_control(void) __attribute__((weak));
/* Only in a QEMU built with numalab's patch (images/qemu/0001-plugins-charge-ns-to-the-icount-clock.patch): under -icount, move the
 * virtual clock forward by ns, as a stall of the running vCPU; from a vCPU callback. true if charged. */
bool qemu_plugin_charge_ns(const void *handle, int64_t ns) __attribute__((weak));
/* Only in a QEMU built with numalab's patch (images/qemu/0008): under -icount, the guest time (ns) of the vCPU
 * running the callback, as it would read its clock now (its own under -icount ...,quantum=NS); from a vCPU
 * callback, mid-TB too; -1 without icount. */
int64_t qemu_plugin_vcpu_clock_ns(void) __attribute__((weak));

/* QEMU 9.0+: a scoreboard is an array of per-vCPU entries; a qemu_plugin_u64 names a uint64_t in them. */
struct qemu_plugin_scoreboard;
typedef struct {
    struct qemu_plugin_scoreboard *score;
    size_t offset;
} qemu_plugin_u64;
struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t element_size) __attribute__((weak));
/* QEMU 9.0+: set a vCPU's entry (one that QEMU has started: its index below the vCPUs initialised so far). */
void qemu_plugin_u64_set(qemu_plugin_u64 entry, unsigned int vcpu_index, uint64_t val) __attribute__((weak));
/* Only in a QEMU built with numalab's patch (images/qemu/0005): a memory callback made only when the access's
 * line (vaddr >> shift) differs from the vCPU's entry, which the generated code then sets to it. */
void qemu_plugin_register_vcpu_mem_line_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                           enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                           qemu_plugin_u64 entry, unsigned int shift, void *userdata)
    __attribute__((weak));


/* In every QEMU with plugins, declared weak only so that a test harness without them still loads the plugin
 * (arm=mark needs them, and a QEMU whose current plugin API version is 3 or more, for qemu_plugin_insn_data's
 * signature: numalab's QEMU 10 has 4). */
typedef void (*qemu_plugin_simple_cb_t)(qemu_plugin_id_t id);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
/* Unregister every callback of the plugin and flush the translated code, at the next point where no vCPU runs;
 * then call cb (which may register callbacks again). Callable from a vCPU callback. */
void qemu_plugin_reset(qemu_plugin_id_t id, qemu_plugin_simple_cb_t cb) __attribute__((weak));
/* Called every time the instruction executes. */
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata)
    __attribute__((weak));
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn) __attribute__((weak));
/* Plugin API version 3+: copy up to len bytes of the instruction into dest; returns how many. (Before:
 * one argument, a pointer returned: never called with a QEMU whose current API version is below 3.) */
size_t qemu_plugin_insn_data(const struct qemu_plugin_insn *insn, void *dest, size_t len) __attribute__((weak));

#endif
