# numalab guest plan (generated)
export WORKLOAD_CMD='idle --duration 1'
export DURATION=1
export NUMA_BALANCING=1
export KNOBS='scan_delay_ms=100 scan_period_max_ms=1000 scan_period_min_ms=100'
export TRACE_EVENTS=''
export TRACE_BUFFER_KB=4096
export TRACE_MODE=raw
export VMSTAT_INTERVAL=1
export NODE_MAPS=''
export TEST_FAULT=''
export FAULT_TARGET=''
export DEMOTION=''
