# numalab guest plan (generated)
export WORKLOAD_CMD='numa01 --duration 20 --threads 4 --mem-mib 358'
export DURATION=20
export NUMA_BALANCING=1
export KNOBS='scan_delay_ms=100 scan_period_max_ms=1000 scan_period_min_ms=100'
export TRACE_EVENTS='sched:sched_move_numa sched:sched_swap_numa sched:sched_stick_numa migrate:mm_migrate_pages sched:sched_migrate_task sched:sched_wakeup_new sched:sched_process_exit'
export TRACE_BUFFER_KB=4096
export TRACE_MODE=raw
export VMSTAT_INTERVAL=1
export NODE_MAPS=''
export TEST_FAULT=''
export FAULT_TARGET=''
export DEMOTION=''
