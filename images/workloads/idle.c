/*
 * idle: sleeps for --duration seconds (or until SIGINT/SIGTERM) and prints a
 * result line with zero work.  Baseline for "what does the system do at rest".
 */
#define _GNU_SOURCE
#include "common.h"

#include <signal.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	const struct opt opts[] = { { NULL, 0, NULL, 0, 0, NULL, NULL } };
	struct sigaction sa;
	double duration, t0, deadline, left;
	struct json j;

	prog_name = "idle";
	duration = parse_args(argc, argv,
			      "Sleeps for the given time (or until SIGINT/SIGTERM); no memory work.", opts);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;	/* no SA_RESTART: the signal interrupts the sleep */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	t0 = now_s();
	deadline = t0 + duration;
	while (!stop && (left = deadline - now_s()) > 0) {
		/* Sleep at most 1 s at a time so a signal racing the check is noticed soon. */
		double s = left < 1.0 ? left : 1.0;
		struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

		nanosleep(&ts, NULL);
	}

	result_begin(&j, "idle", duration, now_s() - t0, 1, 1, 0, 0, 0);
	json_bool(&j, "interrupted", stop != 0);
	result_print(&j);
	return 0;
}
