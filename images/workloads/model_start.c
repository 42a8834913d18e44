/*
 * numalab-model-start: tell numalab's access-matrix plugin that the workload starts.
 *
 *   numalab-model-start
 *
 * Executes one instruction and exits: a 15-byte NOP (six operand-size prefixes, a CS segment prefix, then
 * nopw 0x414d554e(%rax,%rax,1): "NUMA" as its displacement). On any x86 CPU it does nothing. Under
 * `numalab run --clock virtual --remote-latency ...` the plugin (images/plugins/access_matrix.c, arm=mark)
 * leaves the boot uninstrumented and starts its model when a vCPU executes this instruction: the guest init
 * runs it just before the workload. An instruction, not a message from the host, so that the model starts at
 * the same guest instruction in every run of a seed. The length is the encoding's maximum, which assemblers
 * never emit for padding, so the plugin reads the bytes of 15-byte instructions only.
 *
 * No libc (-nostdlib): the guest unpacks every byte of its initramfs at every boot.
 */
void _start(void) __attribute__((noreturn));

void _start(void)
{
    __asm__ volatile(".byte 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x4e, 0x55, 0x4d, 0x41\n\t"
                     "mov $60, %%eax\n\t" /* exit(0) */
                     "xor %%edi, %%edi\n\t"
                     "syscall"
                     :
                     :
                     : "memory", "rax", "rdi", "rcx", "r11");
    __builtin_unreachable();
}
