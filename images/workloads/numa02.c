/*
 * numa02: one process, T threads; each thread maps its own private area and
 * repeatedly writes only that area (the perfect-locality case).
 * --smt halves the default thread count (NUMA02_SMT).
 */
#define _GNU_SOURCE
#include "common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct worker {
	size_t len;
	double deadline;
	struct task_stat st;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char *area;

	task_begin(&w->st);
	area = map_anon(w->len, 0, "a thread area");	/* first touched by this thread */
	touch_loop(&w->st, area, w->len, w->deadline);
	task_end(&w->st);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = -1, mem_mib = 16, smt = 0;
	const struct opt opts[] = {
		{ "threads", OPT_INT, &threads, 1, 1024, "T",
		  "number of threads (default: online CPUs, or half with --smt)" },
		{ "mem-mib-per-thread", OPT_INT, &mem_mib, 1, 1 << 20, "M",
		  "MiB of private memory per thread (default 16)" },
		{ "smt", OPT_FLAG, &smt, 0, 0, NULL,
		  "default to online CPUs / 2 threads (NUMA02_SMT)" },
		{ NULL, 0, NULL, 0, 0, NULL, NULL },
	};
	pthread_t *tids;
	struct worker *ws;
	long long loops = 0;
	unsigned long long bytes = 0;
	double duration, t0, elapsed;
	struct json j;

	prog_name = "numa02";
	duration = parse_args(argc, argv,
			      "One process whose threads each write only their own private area.", opts);
	if (threads < 0)
		threads = smt ? (online_cpus() / 2 > 0 ? online_cpus() / 2 : 1) : online_cpus();

	tids = calloc((size_t)threads, sizeof(*tids));
	ws = calloc((size_t)threads, sizeof(*ws));
	if (!tids || !ws)
		die("out of memory");
	t0 = now_s();
	for (int i = 0; i < threads; i++) {
		int err;

		ws[i].len = (size_t)mem_mib * MIB;
		ws[i].deadline = t0 + duration;
		err = pthread_create(&tids[i], NULL, worker_main, &ws[i]);
		if (err)
			die("pthread_create failed: %s", strerror(err));
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(tids[i], NULL);
		loops += ws[i].st.loops;
		bytes += ws[i].st.bytes;
	}
	elapsed = now_s() - t0;

	result_begin(&j, "numa02", duration, elapsed, threads, 1,
		     (long long)threads * mem_mib, loops, bytes);
	json_int(&j, "mem_mib_per_thread", mem_mib);
	json_bool(&j, "smt", smt);
	json_arr_begin(&j, "per_task");
	for (int i = 0; i < threads; i++) {
		json_obj_begin(&j, NULL);
		json_task_fields(&j, &ws[i].st);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	result_print(&j);
	return 0;
}
