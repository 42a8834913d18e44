/*
 * misplaced: one task on one node whose memory is on another, NUMA balancing's first case.
 *
 * The task maps --mem-mib MiB on --mem-node, moves itself onto --task-node's CPUs, widens its affinity to every
 * CPU it started with (which does not move it), and writes its memory until the deadline.  By default the memory
 * is bound to its node (set_mempolicy MPOL_BIND with MPOL_F_NUMA_BALANCING, Linux 5.12), so balancing still scans
 * it but cannot bring it to the task: its hint faults all land on --mem-node, that becomes the task's preferred node, and the kernel should move the task there
 * (sched_move_numa, or sched_swap_numa / sched_stick_numa where it cannot).  With --movable the memory is only
 * first touched on --mem-node, so either may move: the task to its memory, or the memory to the task
 * (mm_migrate_pages).  With balancing off, every access stays remote.
 *
 * Reports the node the task was on at the end, when it was first seen on the memory's node, and how much of its
 * memory was on the node it ended on (local_pct: 100 when the two met, whichever moved).
 *
 * --task-node equal to --mem-node is the local control: the task starts where its memory is, the ceiling a move
 * can reach (the known answer K2, docs/throughput.md).
 */
#define _GNU_SOURCE
#include "common.h"
#include "nodes.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

static double share_on_node(char *buf, size_t len, int node)
{
	size_t pages = 0, on = 0, ps = page_size();

	for (size_t off = 0; off < len; off += ps, pages++)
		on += node_of_page(buf + off) == node;
	return pages ? 100.0 * (double)on / (double)pages : 0;
}

static void set_affinity(const cpu_set_t *set, const char *what)
{
	if (sched_setaffinity(0, sizeof(*set), set))
		die("sched_setaffinity to %s: %s", what, strerror(errno));
}

int main(int argc, char **argv)
{
	int mem_node = 0, task_node = 1, mem_mib = 32, movable = 0;
	const struct opt opts[] = {
		{ "mem-node", OPT_INT, &mem_node, 0, MAX_NODES - 1, "N", "the node the memory starts on (default 0)" },
		{ "task-node", OPT_INT, &task_node, 0, MAX_NODES - 1, "N",
		  "the node the task starts on (default 1; needs CPUs)" },
		{ "mem-mib", OPT_INT, &mem_mib, 1, 1 << 20, "M", "MiB of memory (default 32)" },
		{ "movable", OPT_FLAG, &movable, 0, 0, NULL,
		  "first touch only, no binding: balancing may move the memory instead of the task" },
		{ NULL, 0, NULL, 0, 0, NULL, NULL },
	};
	static cpu_set_t node_cpus[MAX_NODES];
	static int has_cpus[MAX_NODES];
	cpu_set_t all;
	size_t len;
	char *buf;
	int n_nodes, node = -1, node_start;
	double duration, t0, deadline, moved_after = -1;
	struct task_stat st;
	struct json j;

	prog_name = "misplaced";
	duration = parse_args(argc, argv, "One task on one node whose memory is on another.", opts);
	n_nodes = read_node_cpus(node_cpus, has_cpus);
	if (mem_node >= n_nodes)
		usage_error("--mem-node %d: the guest has nodes 0..%d", mem_node, n_nodes - 1);
	if (task_node >= n_nodes || !has_cpus[task_node])
		usage_error("--task-node %d: not a node with CPUs", task_node);
	if (movable && !has_cpus[mem_node])
		usage_error("--movable needs CPUs on --mem-node %d (the first touch is made there)", mem_node);
	if (sched_getaffinity(0, sizeof(all), &all))
		die("sched_getaffinity: %s", strerror(errno));

	len = (size_t)mem_mib * MIB;
	if (movable)
		set_affinity(&node_cpus[mem_node], "the memory's node");
	else
		bind_task_memory_balanced(mem_node);
	buf = map_anon(len, 0, "the task's memory");
	task_begin(&st);
	t0 = now_s();
	deadline = t0 + duration;
	touch_range(buf, len, deadline + 3600, 1);	/* every page placed, whatever the duration */
	set_affinity(&node_cpus[task_node], "the task's node");
	node_start = node_of_cpu(node_cpus, n_nodes, sched_getcpu());
	set_affinity(&all, "every CPU");
	node = node_start;

	while (now_s() < deadline) {
		for (size_t off = 0; off < len && now_s() < deadline; off += TOUCH_CHUNK) {
			size_t n = len - off < TOUCH_CHUNK ? len - off : TOUCH_CHUNK;

			st.bytes += touch_range(buf + off, n, deadline, (int)(st.loops & 0x7f));
			node = node_of_cpu(node_cpus, n_nodes, sched_getcpu());
			if (node == mem_node && moved_after < 0)
				moved_after = now_s() - t0;
		}
		st.loops++;
	}
	task_end(&st);

	result_begin(&j, "misplaced", duration, now_s() - t0, 1, 1, mem_mib, st.loops, st.bytes);
	json_int(&j, "mem_node", mem_node);
	json_int(&j, "task_node", task_node);
	json_bool(&j, "movable", movable);
	json_int(&j, "task_node_start", node_start);
	json_int(&j, "task_node_end", node);
	json_bool(&j, "ended_on_mem_node", node == mem_node);
	if (moved_after >= 0)	/* first seen on a CPU of the memory's node */
		json_num(&j, "reached_mem_node_after_s", moved_after);
	json_num(&j, "local_pct", node >= 0 ? share_on_node(buf, len, node) : 0);
	json_num(&j, "on_mem_node_pct", share_on_node(buf, len, mem_node));
	result_print_one_task(&j, &st);
	return 0;
}
