/* The guest's NUMA nodes as its kernel reports them (sysfs), for workloads that place tasks or memory by node. */
#ifndef NUMALAB_NODES_H
#define NUMALAB_NODES_H

#include <sched.h>

#define MAX_NODES 64

/* Every node's CPUs from /sys/devices/system/node/nodeN/cpulist: cpus[n] (empty for a node without CPUs or
 * absent) and has_cpus[n].  Returns the number of node ids (the highest present + 1); dies if there is none. */
int read_node_cpus(cpu_set_t *cpus, int *has_cpus);
/* The node whose set holds cpu, or -1. */
int node_of_cpu(const cpu_set_t *cpus, int n_nodes, int cpu);
/* The node the page at addr is on now (get_mempolicy MPOL_F_NODE|MPOL_F_ADDR), or -1. */
int node_of_page(void *addr);
/* Binds [addr, addr+bytes) to node (mbind MPOL_BIND, MPOL_MF_STRICT|MPOL_MF_MOVE); dies on failure. */
void bind_to_node(void *addr, unsigned long bytes, int node);

/* Binds the calling task's future allocations to node (set_mempolicy MPOL_BIND) with MPOL_F_NUMA_BALANCING
 * (Linux 5.12): NUMA balancing still scans and counts the memory's faults, so the task may be moved to the
 * memory, but never migrates the memory off the node.  Dies on failure. */
void bind_task_memory_balanced(int node);

#endif
