/*
 * pairs: P pairs of communicating processes (netperf-style ping-pong).
 * In each pair, "ping" sends a message over one pipe and waits for the echo
 * on another; "pong" echoes it back.  Between messages each side also writes
 * a small window of its own working set so NUMA balancing has pages to sample.
 */
#define _GNU_SOURCE
#include "common.h"
#include "nodes.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { PING, PONG };

struct side {
	int role, rd, wr;
	int unused[2];		/* the pipe ends only the peer uses */
	size_t msg_len, ws_len, win_len;
	double deadline;
	struct task_stat *st;
	const cpu_set_t *free_cpus;	/* --start-node: the CPUs a side may use once started, else NULL */
};

/* Full read of len bytes: returns len, 0 on EOF before any byte, -1 on error. */
static ssize_t read_full(int fd, char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (n == 0 && got > 0))
			return -1;
		if (n == 0)
			return 0;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static int write_full(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Write the next window of the working set, wrapping around at its end. */
static void touch_window(struct side *s, char *ws, size_t *off)
{
	size_t left = s->win_len;

	while (left > 0) {
		size_t n = s->ws_len - *off < left ? s->ws_len - *off : left;

		memset(ws + *off, (int)(s->st->loops & 0xff), n);
		__asm__ volatile("" : : "r"(ws) : "memory");
		*off = (*off + n) % s->ws_len;
		left -= n;
	}
	s->st->bytes += s->win_len;
}

static int side_main(void *arg)
{
	struct side *s = arg;
	char *msg = malloc(s->msg_len);
	char *ws = map_anon(s->ws_len, 0, "the working set");
	size_t off = 0;

	if (!msg)
		die("out of memory");
	/* Drop the peer's ends, or EOF/EPIPE never arrives when the peer exits. */
	close(s->unused[0]);
	close(s->unused[1]);
	memset(msg, s->role == PING ? 'p' : 'q', s->msg_len);
	signal(SIGPIPE, SIG_IGN);
	/* Started on --start-node's CPUs: the working set is written there first (its pages are the node's, as a
	 * pair's that has run there a while), then the scheduler places this side (it stays where it is until the
	 * load balancer or a wakeup moves it). */
	if (s->free_cpus) {
		memset(ws, 0, s->ws_len);
		__asm__ volatile("" : : "r"(ws) : "memory");
		if (sched_setaffinity(0, sizeof(*s->free_cpus), s->free_cpus))
			die("sched_setaffinity: %s", strerror(errno));
	}
	task_begin(s->st);
	for (;;) {
		if (s->role == PING) {
			if (now_s() >= s->deadline)
				break;	/* returning closes our pipe ends: pong sees EOF */
			if (write_full(s->wr, msg, s->msg_len) < 0)
				die("ping: write failed: %s", strerror(errno));
			if (read_full(s->rd, msg, s->msg_len) <= 0)
				die("ping: reply lost (peer exited or read error)");
			touch_window(s, ws, &off);
		} else {
			ssize_t n = read_full(s->rd, msg, s->msg_len);

			if (n == 0)
				break;
			if (n < 0)
				die("pong: read failed or short message");
			touch_window(s, ws, &off);
			if (write_full(s->wr, msg, s->msg_len) < 0)
				die("pong: write failed: %s", strerror(errno));
		}
		s->st->loops++;
	}
	task_end(s->st);
	return 0;
}

int main(int argc, char **argv)
{
	int pairs = -1, msg_bytes = 64, mem_mib = 4, touch_kib = 64, start_node = -1;
	const struct opt opts[] = {
		{ "pairs", OPT_INT, &pairs, 1, 512, "P",
		  "number of process pairs (default: max(1, online CPUs / 4))" },
		{ "msg-bytes", OPT_INT, &msg_bytes, 1, 1 << 20, "B",
		  "message size in bytes (default 64)" },
		{ "mem-mib", OPT_INT, &mem_mib, 1, 1 << 16, "M",
		  "MiB working set per process (default 4)" },
		{ "touch-kib", OPT_INT, &touch_kib, 0, 1 << 20, "K",
		  "KiB of the working set written per message (default 64, capped at --mem-mib)" },
		{ "start-node", OPT_INT, &start_node, 0, MAX_NODES - 1, "N",
		  "start every side on node N's CPUs, its working set written there, then free it (default: as forked)" },
		{ NULL, 0, NULL, 0, 0, NULL, NULL },
	};
	struct side *sides;
	pid_t *pids;
	struct task_stat *stats;
	cpu_set_t free_cpus, node_cpus[MAX_NODES];
	int has_cpus[MAX_NODES];
	long long loops = 0, round_trips = 0;
	unsigned long long bytes = 0;
	double duration, t0, elapsed;
	struct json j;

	prog_name = "pairs";
	duration = parse_args(argc, argv,
			      "Pairs of processes ping-ponging messages over pipes while touching a\n"
			      "small working set each.", opts);
	if (pairs < 0)
		pairs = online_cpus() / 4 > 0 ? online_cpus() / 4 : 1;
	if ((long long)touch_kib > (long long)mem_mib * 1024)
		touch_kib = mem_mib * 1024;

	sides = calloc(2 * (size_t)pairs, sizeof(*sides));
	pids = calloc(2 * (size_t)pairs, sizeof(*pids));
	if (!sides || !pids)
		die("out of memory");
	stats = map_anon(sizeof(*stats) * 2 * (size_t)pairs, 1, "statistics");
	if (start_node >= 0) {
		int n_nodes = read_node_cpus(node_cpus, has_cpus);

		if (start_node >= n_nodes || !has_cpus[start_node])
			usage_error("--start-node %d: not a node with CPUs", start_node);
		if (sched_getaffinity(0, sizeof(free_cpus), &free_cpus))
			die("sched_getaffinity: %s", strerror(errno));
		/* The sides are forked here, so they start on the node's CPUs whatever fork balancing would choose. */
		if (sched_setaffinity(0, sizeof(node_cpus[start_node]), &node_cpus[start_node]))
			die("sched_setaffinity to node %d: %s", start_node, strerror(errno));
	}
	t0 = now_s();
	for (int p = 0; p < pairs; p++) {
		int to_pong[2], to_ping[2];

		if (pipe(to_pong) < 0 || pipe(to_ping) < 0)
			die("pipe failed: %s", strerror(errno));
		for (int r = PING; r <= PONG; r++) {
			struct side *s = &sides[2 * p + r];

			*s = (struct side){
				.role = r,
				.rd = r == PING ? to_ping[0] : to_pong[0],
				.wr = r == PING ? to_pong[1] : to_ping[1],
				.unused = { r == PING ? to_pong[0] : to_ping[0],
					    r == PING ? to_ping[1] : to_pong[1] },
				.msg_len = (size_t)msg_bytes, .ws_len = (size_t)mem_mib * MIB,
				.win_len = (size_t)touch_kib * 1024, .deadline = t0 + duration,
				.st = &stats[2 * p + r],
				.free_cpus = start_node >= 0 ? &free_cpus : NULL,
			};
			pids[2 * p + r] = spawn(side_main, s);
		}
		close(to_pong[0]);
		close(to_pong[1]);
		close(to_ping[0]);
		close(to_ping[1]);
	}
	if (start_node >= 0 && sched_setaffinity(0, sizeof(free_cpus), &free_cpus))
		die("sched_setaffinity: %s", strerror(errno));
	if (reap_children(pids, 2 * pairs) < 0)
		return 1;
	elapsed = now_s() - t0;

	for (int i = 0; i < 2 * pairs; i++) {
		loops += stats[i].loops;
		bytes += stats[i].bytes;
		if (i % 2 == PING)
			round_trips += stats[i].loops;
	}
	result_begin(&j, "pairs", duration, elapsed, 2 * pairs, 2 * pairs,
		     2LL * pairs * mem_mib, loops, bytes);
	json_int(&j, "pairs", pairs);
	json_int(&j, "msg_bytes", msg_bytes);
	json_int(&j, "mem_mib_per_process", mem_mib);
	json_int(&j, "touch_kib", touch_kib);
	if (start_node >= 0)
		json_int(&j, "start_node", start_node);
	json_int(&j, "round_trips", round_trips);
	json_num(&j, "round_trips_per_s", round_trips / elapsed);
	json_arr_begin(&j, "per_pair");
	for (int p = 0; p < pairs; p++) {
		json_obj_begin(&j, NULL);
		json_int(&j, "pair", p);
		json_int(&j, "round_trips", stats[2 * p].loops);
		json_num(&j, "round_trips_per_s", stats[2 * p].loops / elapsed);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_arr_begin(&j, "per_task");
	for (int i = 0; i < 2 * pairs; i++) {
		json_obj_begin(&j, NULL);
		json_task_fields(&j, &stats[i]);
		json_int(&j, "pair", i / 2);
		json_str(&j, "role", i % 2 == PING ? "ping" : "pong");
		json_obj_end(&j);
	}
	json_arr_end(&j);
	result_print(&j);
	return 0;
}
