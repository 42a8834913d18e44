"""What the kernel will make of a topology: the kernel-view oracle (kernel_view), each CPU's view and sched domains
(cpu_view), the NUMA sched groups (sched_groups), its warnings (kernel_warnings), cache-aware scheduling
(cache_aware) and the SNC-3 fix (snc_fix)."""
