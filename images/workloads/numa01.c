/*
 * numa01: two processes, each with T threads sharing one anonymous area.
 * Default: every thread repeatedly writes the WHOLE area of its process (the
 * adverse "all threads share everything" case).  --thread-alloc: each thread
 * first writes the whole area once (scrambling first-touch placement, as in
 * autonuma-benchmark), then repeatedly writes only its own 1/T slice.
 * Built with -DTHREAD_ALLOC_DEFAULT=1 this becomes numa01-thread-alloc.
 */
#define _GNU_SOURCE
#include "common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifndef THREAD_ALLOC_DEFAULT
#define THREAD_ALLOC_DEFAULT 0
#endif
#define NPROC 2

struct proc {
	size_t area_len;
	int nthreads, thread_alloc, prefault;
	double deadline;
	struct task_stat *stats;	/* nthreads entries, in shared memory */
	char *area;
};

struct worker {
	struct proc *p;
	int idx;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct proc *p = w->p;
	struct task_stat *st = &p->stats[w->idx];
	char *base = p->area;
	size_t len = p->area_len;

	task_begin(st);
	if (p->thread_alloc) {
		size_t slice = p->area_len / (size_t)p->nthreads / page_size() * page_size();

		base += slice * (size_t)w->idx;
		len = w->idx == p->nthreads - 1 ? p->area_len - slice * (size_t)w->idx : slice;
		if (p->prefault)
			st->bytes += touch_range(p->area, p->area_len, p->deadline, 0);
	}
	touch_loop(st, base, len, p->deadline);
	task_end(st);
	return NULL;
}

static int process_main(void *arg)
{
	struct proc *p = arg;
	pthread_t *tids = calloc((size_t)p->nthreads, sizeof(*tids));
	struct worker *ws = calloc((size_t)p->nthreads, sizeof(*ws));

	if (!tids || !ws)
		die("out of memory");
	p->area = map_anon(p->area_len, 0, "the process area");
	for (int i = 0; i < p->nthreads; i++) {
		int err;

		ws[i] = (struct worker){ p, i };
		err = pthread_create(&tids[i], NULL, worker_main, &ws[i]);
		if (err)
			die("pthread_create failed: %s", strerror(err));
	}
	for (int i = 0; i < p->nthreads; i++)
		pthread_join(tids[i], NULL);
	return 0;
}

int main(int argc, char **argv)
{
	int threads = -1, mem_mib = 64, thread_alloc = THREAD_ALLOC_DEFAULT, no_prefault = 0;
	const struct opt opts[] = {
		{ "threads", OPT_INT, &threads, 1, 1024, "T",
		  "threads per process (default: online CPUs / 2, min 1)" },
		{ "mem-mib", OPT_INT, &mem_mib, 1, 1 << 20, "M",
		  "MiB of memory per process (default 64)" },
		{ "thread-alloc", OPT_FLAG, &thread_alloc, 0, 0, NULL,
		  "each thread writes only its own 1/T slice (NUMA01_THREAD_ALLOC)" },
		{ "no-prefault", OPT_FLAG, &no_prefault, 0, 0, NULL,
		  "with --thread-alloc: skip the initial whole-area write per thread" },
		{ NULL, 0, NULL, 0, 0, NULL, NULL },
	};
	struct proc procs[NPROC];
	pid_t pids[NPROC];
	struct task_stat *stats;
	long long loops = 0;
	unsigned long long bytes = 0;
	double duration, t0, elapsed;
	struct json j;

	prog_name = THREAD_ALLOC_DEFAULT ? "numa01-thread-alloc" : "numa01";
	duration = parse_args(argc, argv,
			      "Two processes whose threads all write their process's whole shared area\n"
			      "(or, with --thread-alloc, only a private slice of it).", opts);
	if (threads < 0)
		threads = online_cpus() / 2 > 0 ? online_cpus() / 2 : 1;
	if (thread_alloc && (size_t)mem_mib * MIB / (size_t)threads < page_size())
		usage_error("--mem-mib %d is too small for %d thread slices", mem_mib, threads);

	stats = map_anon(sizeof(*stats) * NPROC * (size_t)threads, 1, "statistics");
	t0 = now_s();
	for (int i = 0; i < NPROC; i++) {
		procs[i] = (struct proc){
			.area_len = (size_t)mem_mib * MIB, .nthreads = threads,
			.thread_alloc = thread_alloc, .prefault = !no_prefault,
			.deadline = t0 + duration, .stats = stats + i * threads,
		};
		pids[i] = spawn(process_main, &procs[i]);
	}
	if (reap_children(pids, NPROC) < 0)
		return 1;
	elapsed = now_s() - t0;

	for (int i = 0; i < NPROC * threads; i++) {
		loops += stats[i].loops;
		bytes += stats[i].bytes;
	}
	result_begin(&j, thread_alloc ? "numa01-thread-alloc" : "numa01", duration, elapsed,
		     NPROC * threads, NPROC, (long long)NPROC * mem_mib, loops, bytes);
	json_int(&j, "threads_per_process", threads);
	json_int(&j, "mem_mib_per_process", mem_mib);
	json_bool(&j, "thread_alloc", thread_alloc);
	json_bool(&j, "prefault", thread_alloc && !no_prefault);
	json_arr_begin(&j, "per_task");
	for (int i = 0; i < NPROC * threads; i++) {
		json_obj_begin(&j, NULL);
		json_task_fields(&j, &stats[i]);
		json_int(&j, "process", i / threads);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	result_print(&j);
	return 0;
}
