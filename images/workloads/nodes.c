#define _GNU_SOURCE
#include "nodes.h"
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MPOL_BIND 2
#define MPOL_MF_STRICT 1
#define MPOL_MF_MOVE 2
#define MPOL_F_NODE 1
#define MPOL_F_ADDR 2
#define MPOL_F_NUMA_BALANCING (1 << 13)

int read_node_cpus(cpu_set_t *cpus, int *has_cpus)
{
	int n_nodes = 0;

	for (int n = 0; n < MAX_NODES; n++) {
		char path[96], buf[4096];
		FILE *f;

		CPU_ZERO(&cpus[n]);
		has_cpus[n] = 0;
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", n);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
		n_nodes = n + 1;
		for (char *p = buf; *p && *p != '\n';) {
			char *end;
			long a = strtol(p, &end, 10), b;

			if (end == p)
				die("%s: cannot read %s", path, buf);
			b = a;
			if (*end == '-')
				b = strtol(end + 1, &end, 10);
			for (long c = a; c <= b && c < CPU_SETSIZE; c++)
				CPU_SET((int)c, &cpus[n]);
			has_cpus[n] = 1;
			p = *end == ',' ? end + 1 : end;
		}
	}
	if (!n_nodes)
		die("no NUMA node in /sys/devices/system/node");
	return n_nodes;
}

int node_of_cpu(const cpu_set_t *cpus, int n_nodes, int cpu)
{
	for (int n = 0; n < n_nodes && cpu >= 0; n++)
		if (CPU_ISSET(cpu, &cpus[n]))
			return n;
	return -1;
}

int node_of_page(void *addr)
{
	int node = -1;

	if (syscall(SYS_get_mempolicy, &node, NULL, 0UL, addr, MPOL_F_NODE | MPOL_F_ADDR))
		return -1;
	return node;
}

void bind_to_node(void *addr, unsigned long bytes, int node)
{
	unsigned long mask = 1UL << node;

	if (syscall(SYS_mbind, addr, bytes, MPOL_BIND, &mask, sizeof(mask) * 8, MPOL_MF_STRICT | MPOL_MF_MOVE))
		die("mbind to node %d: %s", node, strerror(errno));
}

void bind_task_memory_balanced(int node)
{
	unsigned long mask = 1UL << node;

	if (syscall(SYS_set_mempolicy, MPOL_BIND | MPOL_F_NUMA_BALANCING, &mask, sizeof(mask) * 8))
		die("set_mempolicy(MPOL_BIND|MPOL_F_NUMA_BALANCING) to node %d: %s%s", node, strerror(errno),
		    errno == EINVAL ? " (the flag needs Linux 5.12 or later)" : "");
}
