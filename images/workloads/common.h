/* Shared helpers for the numalab guest workloads. */
#ifndef NUMALAB_COMMON_H
#define NUMALAB_COMMON_H

#include <stddef.h>
#include <sys/types.h>

#define MIB (1024UL * 1024UL)
/* Memory is written in chunks of this size; the clock is checked between chunks. */
#define TOUCH_CHUNK (2 * MIB)

/* Name used in error messages; set by each program before parse_args(). */
extern const char *prog_name;

/* "NAME: error: ..." on stderr, then exit 2 (usage) or 1 (runtime failure). */
_Noreturn void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- command line ---- */
enum opt_kind { OPT_FLAG, OPT_INT, OPT_DOUBLE };

struct opt {
	const char *name;	/* long name without the leading "--" */
	enum opt_kind kind;
	void *dst;		/* int * for OPT_FLAG/OPT_INT, double * for OPT_DOUBLE */
	double min, max;	/* OPT_INT: inclusive range; OPT_DOUBLE: (min, max] */
	const char *metavar;	/* e.g. "N"; unused for flags */
	const char *help;
};

/*
 * Parse argv: the required --duration SECONDS plus opts[] (terminated by an
 * entry with name == NULL).  Accepts "--opt VALUE" and "--opt=VALUE".
 * --help/-h prints usage and exits 0; bad arguments exit 2.
 * Returns the duration in seconds.
 */
double parse_args(int argc, char **argv, const char *summary, const struct opt *opts);

/* ---- environment ---- */
double now_s(void);		/* CLOCK_MONOTONIC, seconds */
int online_cpus(void);		/* sysconf(_SC_NPROCESSORS_ONLN), at least 1 */
long get_tid(void);
size_t page_size(void);
/* Anonymous mapping (MAP_SHARED if shared, else MAP_PRIVATE); dies on failure. */
void *map_anon(size_t bytes, int shared, const char *what);

/* ---- per-task statistics and memory touching ---- */
struct task_stat {
	long tid, pid;
	long long loops;		/* completed iterations */
	unsigned long long bytes;	/* bytes written to memory */
	int cpu_start, cpu_end;		/* sched_getcpu() at start / end */
};

void task_begin(struct task_stat *st);	/* records tid, pid, cpu_start */
void task_end(struct task_stat *st);	/* records cpu_end */

/* Write [p, p+len) once in TOUCH_CHUNK pieces, stopping early at deadline.
 * Returns the number of bytes written. */
size_t touch_range(char *p, size_t len, double deadline, int val);
/* Repeatedly write [p, p+len) until deadline; st->loops counts full passes. */
void touch_loop(struct task_stat *st, char *p, size_t len, double deadline);

/* ---- processes ---- */
/* fork(); the child runs fn(arg) and _exit()s with its return value. */
pid_t spawn(int (*fn)(void *), void *arg);
/* Reap all n children.  If one fails, the others are sent SIGTERM.
 * Returns 0 if every child exited with status 0, -1 otherwise. */
int reap_children(const pid_t *pids, int n);

/* ---- single-line JSON output ---- */
#define JSON_MAX_DEPTH 8
struct json {
	char *buf;
	size_t len, cap;
	int depth;
	int need_comma[JSON_MAX_DEPTH];
};

void json_obj_begin(struct json *j, const char *key);	/* key NULL: root/array element */
void json_obj_end(struct json *j);
void json_arr_begin(struct json *j, const char *key);
void json_arr_end(struct json *j);
void json_int(struct json *j, const char *key, long long v);
void json_num(struct json *j, const char *key, double v);
void json_str(struct json *j, const char *key, const char *v);
void json_bool(struct json *j, const char *key, int v);
/* Writes the fields common to every per_task entry (inside an open object). */
void json_task_fields(struct json *j, const struct task_stat *st);

/* Opens the root object and writes the keys every workload reports. */
void result_begin(struct json *j, const char *workload, double duration, double elapsed,
		  int threads, int processes, long long mem_mib,
		  long long loops, unsigned long long bytes);
/* Closes the root object and prints "NUMALAB_RESULT {...}" to stdout. */
void result_print(struct json *j);
/* For a one-task workload: its per_task list of st alone, then result_print(). */
void result_print_one_task(struct json *j, const struct task_stat *st);

#endif
