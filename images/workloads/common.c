#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *prog_name = "workload";

/*
 * Children of spawn() do not print errors themselves: the first one to fail
 * stores its message here and reap_children() prints it, so a failed run
 * always ends with exactly one error line.
 */
#define ERR_LEN 512
struct child_err {
	int claimed;		/* 0 free, 1 being written, 2 message ready */
	char msg[ERR_LEN];
};
static struct child_err *child_err;	/* MAP_SHARED, created by spawn() */
static int in_child;

static _Noreturn void verror(int code, const char *fmt, va_list ap)
{
	char msg[ERR_LEN];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (in_child && child_err) {
		int free_slot = 0;

		if (__atomic_compare_exchange_n(&child_err->claimed, &free_slot, 1, 0,
						__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
			memcpy(child_err->msg, msg, sizeof(msg));
			__atomic_store_n(&child_err->claimed, 2, __ATOMIC_SEQ_CST);
		}
	} else {
		fprintf(stderr, "%s: error: %s\n", prog_name, msg);
	}
	exit(code);
}

void usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verror(2, fmt, ap);
}

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verror(1, fmt, ap);
}

/* ---- command line ---- */

static void print_usage(const char *summary, const struct opt *opts)
{
	printf("Usage: %s --duration SECONDS [options]\n%s\n\nOptions:\n", prog_name, summary);
	printf("  %-24s %s\n", "--duration SECONDS", "run time in seconds (float > 0, required)");
	for (const struct opt *o = opts; o->name; o++) {
		char lhs[64];

		if (o->kind == OPT_FLAG)
			snprintf(lhs, sizeof(lhs), "--%s", o->name);
		else
			snprintf(lhs, sizeof(lhs), "--%s %s", o->name, o->metavar);
		printf("  %-24s %s\n", lhs, o->help);
	}
	printf("  %-24s %s\n", "--help", "show this help and exit");
	printf("\nPrints one line: NUMALAB_RESULT {json}\n");
}

static void set_value(const struct opt *o, const char *val)
{
	char *end;

	errno = 0;
	if (o->kind == OPT_INT) {
		long v = strtol(val, &end, 10);

		if (errno || end == val || *end || v < o->min || v > o->max)
			usage_error("--%s must be an integer in [%.0f, %.0f], got '%s'",
				    o->name, o->min, o->max, val);
		*(int *)o->dst = (int)v;
	} else {
		double v = strtod(val, &end);

		if (errno || end == val || *end || !isfinite(v) || v <= o->min || v > o->max)
			usage_error("--%s must be a number > %g and <= %g, got '%s'",
				    o->name, o->min, o->max, val);
		*(double *)o->dst = v;
	}
}

double parse_args(int argc, char **argv, const char *summary, const struct opt *opts)
{
	double duration = -1;
	const struct opt dur = { "duration", OPT_DOUBLE, &duration, 0, 1e9, "SECONDS", "" };

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *val = NULL, *eq;
		const struct opt *o = NULL;
		size_t nlen;

		if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
			print_usage(summary, opts);
			exit(0);
		}
		if (strncmp(arg, "--", 2) != 0)
			usage_error("unexpected argument '%s' (see --help)", arg);
		arg += 2;
		eq = strchr(arg, '=');
		nlen = eq ? (size_t)(eq - arg) : strlen(arg);
		if (nlen == strlen(dur.name) && !strncmp(arg, dur.name, nlen))
			o = &dur;
		for (const struct opt *p = opts; !o && p->name; p++)
			if (nlen == strlen(p->name) && !strncmp(arg, p->name, nlen))
				o = p;
		if (!o)
			usage_error("unknown option '%s' (see --help)", argv[i]);
		if (o->kind == OPT_FLAG) {
			if (eq)
				usage_error("option '--%s' takes no value", o->name);
			*(int *)o->dst = 1;
			continue;
		}
		if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			usage_error("option '--%s' requires a value", o->name);
		set_value(o, val);
	}
	if (duration < 0)
		usage_error("--duration SECONDS is required (see --help)");
	return duration;
}

/* ---- environment ---- */

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : (int)n;
}

long get_tid(void)
{
	return (long)syscall(SYS_gettid);
}

size_t page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps > 0 ? (size_t)ps : 4096;
}

void *map_anon(size_t bytes, int shared, const char *what)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("cannot mmap %zu bytes for %s: %s", bytes, what, strerror(errno));
	return p;
}

/* ---- tasks and memory touching ---- */

void task_begin(struct task_stat *st)
{
	st->tid = get_tid();
	st->pid = (long)getpid();
	st->cpu_start = sched_getcpu();
}

void task_end(struct task_stat *st)
{
	st->cpu_end = sched_getcpu();
}

size_t touch_range(char *p, size_t len, double deadline, int val)
{
	size_t off = 0;

	while (off < len && now_s() < deadline) {
		size_t n = len - off < TOUCH_CHUNK ? len - off : TOUCH_CHUNK;

		memset(p + off, val, n);
		__asm__ volatile("" : : "r"(p) : "memory");
		off += n;
	}
	return off;
}

void touch_loop(struct task_stat *st, char *p, size_t len, double deadline)
{
	for (;;) {
		size_t n = touch_range(p, len, deadline, (int)(st->loops + 1) & 0xff);

		st->bytes += n;
		if (n < len)
			break;	/* deadline reached mid-pass */
		st->loops++;
	}
}

/* ---- processes ---- */

pid_t spawn(int (*fn)(void *), void *arg)
{
	pid_t pid, parent = getpid();

	if (!child_err)
		child_err = map_anon(sizeof(*child_err), 1, "the error buffer");
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork failed: %s", strerror(errno));
	if (pid == 0) {
		in_child = 1;
		/* Do not outlive a parent that was killed (e.g. by a lab timeout). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		_exit(fn(arg));
	}
	return pid;
}

int reap_children(const pid_t *pids, int n)
{
	int left = n, failed = 0;
	char *done = calloc((size_t)n, 1);

	if (!done)
		die("out of memory");
	while (left > 0) {
		int status, idx = -1;
		pid_t pid = waitpid(-1, &status, 0);

		if (pid < 0) {
			if (errno == EINTR)
				continue;
			die("waitpid failed: %s", strerror(errno));
		}
		for (int i = 0; i < n; i++)
			if (pids[i] == pid)
				idx = i;
		if (idx < 0 || done[idx])
			continue;
		done[idx] = 1;
		left--;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			continue;
		if (!failed) {
			/* Another child may be storing its message right now: give it 1 s. */
			for (int i = 0; child_err && i < 1000 &&
			     __atomic_load_n(&child_err->claimed, __ATOMIC_SEQ_CST) == 1; i++)
				nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
			if (child_err && __atomic_load_n(&child_err->claimed, __ATOMIC_SEQ_CST) == 2)
				fprintf(stderr, "%s: error: %s\n", prog_name, child_err->msg);
			else if (WIFSIGNALED(status))
				fprintf(stderr, "%s: error: child %ld killed by signal %d\n",
					prog_name, (long)pid, WTERMSIG(status));
			else
				fprintf(stderr, "%s: error: child %ld exited with status %d\n",
					prog_name, (long)pid, WEXITSTATUS(status));
			for (int i = 0; i < n; i++)
				if (!done[i])
					kill(pids[i], SIGTERM);
		}
		failed = 1;
	}
	free(done);
	return failed ? -1 : 0;
}

/* ---- JSON ---- */

static void json_printf(struct json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void json_printf(struct json *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = j->cap - j->len;

		va_start(ap, fmt);
		n = vsnprintf(j->buf ? j->buf + j->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			die("JSON formatting failed");
		if ((size_t)n < room)
			break;
		j->cap = (j->cap + (size_t)n + 1) * 2;
		j->buf = realloc(j->buf, j->cap);
		if (!j->buf)
			die("out of memory");
	}
	j->len += (size_t)n;
}

/* Comma (if needed) and "key": prefix for a new value at the current depth. */
static void json_key(struct json *j, const char *key)
{
	if (j->depth > 0) {
		if (j->need_comma[j->depth - 1])
			json_printf(j, ",");
		j->need_comma[j->depth - 1] = 1;
	}
	if (key)
		json_printf(j, "\"%s\":", key);
}

static void json_open(struct json *j, const char *key, char c)
{
	json_key(j, key);
	json_printf(j, "%c", c);
	if (j->depth >= JSON_MAX_DEPTH)
		die("JSON nesting too deep");
	j->need_comma[j->depth++] = 0;
}

void json_obj_begin(struct json *j, const char *key) { json_open(j, key, '{'); }
void json_arr_begin(struct json *j, const char *key) { json_open(j, key, '['); }
void json_obj_end(struct json *j) { j->depth--; json_printf(j, "}"); }
void json_arr_end(struct json *j) { j->depth--; json_printf(j, "]"); }

void json_int(struct json *j, const char *key, long long v)
{
	json_key(j, key);
	json_printf(j, "%lld", v);
}

void json_num(struct json *j, const char *key, double v)
{
	json_key(j, key);
	if (isfinite(v))
		json_printf(j, "%.6f", v);
	else
		json_printf(j, "null");
}

/* Only used with program-controlled ASCII strings; escapes " and \ anyway. */
void json_str(struct json *j, const char *key, const char *v)
{
	json_key(j, key);
	json_printf(j, "\"");
	for (; *v; v++)
		json_printf(j, "%s%c", (*v == '"' || *v == '\\') ? "\\" : "", *v);
	json_printf(j, "\"");
}

void json_bool(struct json *j, const char *key, int v)
{
	json_key(j, key);
	json_printf(j, v ? "true" : "false");
}

void json_task_fields(struct json *j, const struct task_stat *st)
{
	json_int(j, "tid", st->tid);
	json_int(j, "pid", st->pid);
	json_int(j, "loops", st->loops);
	json_int(j, "bytes_touched", (long long)st->bytes);
	json_int(j, "cpu_start", st->cpu_start);
	json_int(j, "cpu_end", st->cpu_end);
}

void result_begin(struct json *j, const char *workload, double duration, double elapsed,
		  int threads, int processes, long long mem_mib,
		  long long loops, unsigned long long bytes)
{
	memset(j, 0, sizeof(*j));
	json_obj_begin(j, NULL);
	json_str(j, "workload", workload);
	json_num(j, "duration_s", duration);
	json_num(j, "elapsed_s", elapsed);
	json_int(j, "online_cpus", online_cpus());
	json_int(j, "threads", threads);
	json_int(j, "processes", processes);
	json_int(j, "mem_mib", mem_mib);
	json_int(j, "loops", loops);
	json_int(j, "bytes_touched", (long long)bytes);
	json_num(j, "gbps", elapsed > 0 ? (double)bytes / elapsed / 1e9 : 0.0);
}

void result_print(struct json *j)
{
	json_obj_end(j);
	printf("NUMALAB_RESULT %s\n", j->buf);
	fflush(stdout);
	free(j->buf);
	j->buf = NULL;
}

void result_print_one_task(struct json *j, const struct task_stat *st)
{
	json_arr_begin(j, "per_task");
	json_obj_begin(j, NULL);
	json_task_fields(j, st);
	json_obj_end(j);
	json_arr_end(j);
	result_print(j);
}
