/*
 * nodes13: seed 002's worst case.  --tasks CPU-bound processes are allowed on
 * two CPU sets A and B (numalab passes nodes 1 and 3), but all start on A:
 * the parent binds itself to A, forks them, and each widens its affinity to
 * A+B (which does not move it).  Only the load balancer can then move tasks
 * from A to B.  With sched groups built from one CPU's view (before seed 002's
 * fix), nodes 1 and 3 of a 4-node ring are in both groups of the last level
 * and B stays idle.
 *
 * Reports the busy CPU time of A and B over the run from /proc/stat
 * (user+nice+system+irq+softirq), their balance (100 * less busy / busier),
 * how many tasks ended on A and on B (the scheduler's decision, which host
 * CPU contention under TCG does not blur as it does busy time), and the CPU
 * each task started and ended on.
 */
#define _GNU_SOURCE
#include "common.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#define MAX_CPUS 1024
#define SPIN_KIB 64

struct worker {
	cpu_set_t both;
	double deadline;
	struct task_stat *st;
};

static int worker_main(void *arg)
{
	struct worker *w = arg;
	char *buf;

	if (sched_setaffinity(0, sizeof(w->both), &w->both) < 0)
		die("sched_setaffinity(A+B) failed: %s", strerror(errno));
	buf = map_anon(SPIN_KIB * 1024, 0, "the spin buffer");
	task_begin(w->st);
	touch_loop(w->st, buf, SPIN_KIB * 1024, w->deadline);
	task_end(w->st);
	return 0;
}

/* Busy jiffies per CPU from /proc/stat into busy[]; returns the number of CPUs seen. */
static int read_busy(unsigned long long *busy)
{
	FILE *f = fopen("/proc/stat", "r");
	char line[512];
	int n = 0;

	if (!f)
		die("cannot open /proc/stat: %s", strerror(errno));
	memset(busy, 0, sizeof(*busy) * MAX_CPUS);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v[8] = { 0 };
		int cpu;

		if (strncmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9')
			continue;
		if (sscanf(line + 3, "%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu,
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 8)
			continue;
		if (cpu < 0 || cpu >= MAX_CPUS)
			continue;
		/* user nice system idle iowait irq softirq steal */
		busy[cpu] = v[0] + v[1] + v[2] + v[5] + v[6];
		if (cpu + 1 > n)
			n = cpu + 1;
	}
	fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	int tasks = 0, a_cpu = 1, b_cpu = 3, width = 1;
	const struct opt opts[] = {
		{ "tasks", OPT_INT, &tasks, 1, 4096, "N", "CPU-bound processes (default: 2 x width)" },
		{ "a-cpu", OPT_INT, &a_cpu, 0, MAX_CPUS - 1, "CPU", "first CPU of set A, where every task starts (default 1)" },
		{ "b-cpu", OPT_INT, &b_cpu, 0, MAX_CPUS - 1, "CPU", "first CPU of set B (default 3)" },
		{ "width", OPT_INT, &width, 1, MAX_CPUS, "N", "CPUs in each set: A = a-cpu.., B = b-cpu.. (default 1)" },
		{ NULL, 0, NULL, 0, 0, NULL, NULL }
	};
	static unsigned long long busy0[MAX_CPUS], busy1[MAX_CPUS];
	cpu_set_t only_a, both;
	struct task_stat *stats;
	struct worker *ws;
	pid_t *pids;
	double duration, t0, elapsed, a_s = 0, b_s = 0, hz, lo, hi;
	long long loops = 0;
	int end_a = 0, end_b = 0;
	unsigned long long bytes = 0;
	struct json j;

	prog_name = "nodes13";
	duration = parse_args(argc, argv,
			      "CPU-bound tasks allowed on CPU sets A and B, all started on A (seed 002).", opts);
	if (tasks == 0)
		tasks = 2 * 2 * width;
	if (a_cpu + width > MAX_CPUS || b_cpu + width > MAX_CPUS)
		usage_error("--a-cpu/--b-cpu + --width beyond %d CPUs", MAX_CPUS);
	if (a_cpu < b_cpu + width && b_cpu < a_cpu + width)
		usage_error("sets A (%d..%d) and B (%d..%d) overlap", a_cpu, a_cpu + width - 1, b_cpu,
			    b_cpu + width - 1);
	CPU_ZERO(&only_a);
	CPU_ZERO(&both);
	for (int i = 0; i < width; i++) {
		CPU_SET(a_cpu + i, &only_a);
		CPU_SET(a_cpu + i, &both);
		CPU_SET(b_cpu + i, &both);
	}
	if (sched_setaffinity(0, sizeof(only_a), &only_a) < 0)
		die("sched_setaffinity(A) failed: %s", strerror(errno));

	stats = map_anon(sizeof(*stats) * (size_t)tasks, 1, "statistics");
	ws = calloc((size_t)tasks, sizeof(*ws));
	pids = calloc((size_t)tasks, sizeof(*pids));
	if (!ws || !pids)
		die("out of memory");
	read_busy(busy0);
	t0 = now_s();
	for (int i = 0; i < tasks; i++) {
		ws[i] = (struct worker){ .both = both, .deadline = t0 + duration, .st = &stats[i] };
		pids[i] = spawn(worker_main, &ws[i]);
	}
	if (reap_children(pids, tasks) < 0)
		return 1;
	elapsed = now_s() - t0;
	read_busy(busy1);

	hz = (double)sysconf(_SC_CLK_TCK);
	for (int i = 0; i < width; i++) {
		a_s += (double)(busy1[a_cpu + i] - busy0[a_cpu + i]) / hz;
		b_s += (double)(busy1[b_cpu + i] - busy0[b_cpu + i]) / hz;
	}
	for (int i = 0; i < tasks; i++) {
		loops += stats[i].loops;
		bytes += stats[i].bytes;
		end_a += stats[i].cpu_end >= a_cpu && stats[i].cpu_end < a_cpu + width;
		end_b += stats[i].cpu_end >= b_cpu && stats[i].cpu_end < b_cpu + width;
	}
	lo = a_s < b_s ? a_s : b_s;
	hi = a_s < b_s ? b_s : a_s;
	result_begin(&j, "nodes13", duration, elapsed, tasks, tasks, 0, loops, bytes);
	json_int(&j, "a_cpu", a_cpu);
	json_int(&j, "b_cpu", b_cpu);
	json_int(&j, "width", width);
	json_num(&j, "busy_a_s", a_s);
	json_num(&j, "busy_b_s", b_s);
	json_num(&j, "balance_pct", hi > 0 ? 100.0 * lo / hi : 0.0);
	json_int(&j, "tasks_end_a", end_a);
	json_int(&j, "tasks_end_b", end_b);
	json_num(&j, "loops_per_s", (double)loops / elapsed);
	json_arr_begin(&j, "per_task");
	for (int i = 0; i < tasks; i++) {
		json_obj_begin(&j, NULL);
		json_task_fields(&j, &stats[i]);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	result_print(&j);
	return 0;
}
