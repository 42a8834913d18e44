/*
 * spin: T threads each run a counted busy loop of exactly SPIN_INSNS instructions per iteration
 * (dec; jnz) in chunks, checking the clock between chunks, for --duration seconds of the guest's
 * own clock (CLOCK_MONOTONIC).  Reports the instructions each thread executed per guest second.
 * Under --clock virtual the guest's clock is QEMU's instruction count, so this measures the
 * modelled speed; under the host clock, how fast TCG runs the guest (host load changes it).
 */
#define _GNU_SOURCE
#include "common.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SPIN_INSNS 2		/* dec + jnz */
#define CHUNK 1000000ULL	/* iterations between clock reads */

struct worker {
	double deadline;
	unsigned long long iterations;
	double elapsed;
	struct task_stat st;
};

static void spin(uint64_t n)
{
#if defined(__x86_64__)
	__asm__ volatile("1: dec %0\n\tjnz 1b" : "+r"(n) : : "cc");
#else
#error "spin counts x86-64 instructions"
#endif
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	double t0;

	task_begin(&w->st);
	t0 = now_s();
	while (now_s() < w->deadline) {
		spin(CHUNK);
		w->iterations += CHUNK;
		w->st.loops++;
	}
	w->elapsed = now_s() - t0;
	task_end(&w->st);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = 1;
	const struct opt opts[] = {
		{ "threads", OPT_INT, &threads, 1, 1024, "T", "number of spinning threads (default 1)" },
		{ NULL, 0, NULL, 0, 0, NULL, NULL },
	};
	pthread_t *tids;
	struct worker *ws;
	double duration, t0, elapsed, per_thread = 0;
	unsigned long long iterations = 0;
	long long loops = 0;
	struct json j;

	prog_name = "spin";
	duration = parse_args(argc, argv, "Threads that run a counted busy loop; instructions per guest second.",
			      opts);
	tids = calloc((size_t)threads, sizeof(*tids));
	ws = calloc((size_t)threads, sizeof(*ws));
	if (!tids || !ws)
		die("out of memory");
	t0 = now_s();
	for (int i = 0; i < threads; i++) {
		int err;

		ws[i].deadline = t0 + duration;
		err = pthread_create(&tids[i], NULL, worker_main, &ws[i]);
		if (err)
			die("pthread_create failed: %s", strerror(err));
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(tids[i], NULL);
		iterations += ws[i].iterations;
		loops += ws[i].st.loops;
		per_thread += ws[i].elapsed > 0 ? (double)ws[i].iterations * SPIN_INSNS / ws[i].elapsed : 0;
	}
	elapsed = now_s() - t0;

	result_begin(&j, "spin", duration, elapsed, threads, 1, 0, loops, 0);
	json_int(&j, "insns", (long long)(iterations * SPIN_INSNS));
	json_num(&j, "insn_per_s", elapsed > 0 ? (double)iterations * SPIN_INSNS / elapsed : 0);
	json_num(&j, "insn_per_s_per_thread", per_thread / threads);
	json_arr_begin(&j, "per_task");
	for (int i = 0; i < threads; i++) {
		json_obj_begin(&j, NULL);
		json_task_fields(&j, &ws[i].st);
		json_int(&j, "insns", (long long)(ws[i].iterations * SPIN_INSNS));
		json_obj_end(&j);
	}
	json_arr_end(&j);
	result_print(&j);
	return 0;
}
