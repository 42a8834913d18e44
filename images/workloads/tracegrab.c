/*
 * numalab-tracegrab: copy the kernel's trace buffers, and the tracefs files
 * trace-cmd needs to decode them, out of the guest in one process.
 *
 *   numalab-tracegrab OUTDIR SYSTEM:EVENT...
 *
 * Writes OUTDIR/cpuN (the raw ring-buffer pages of CPU N, read from
 * per_cpu/cpuN/trace_pipe_raw until it is empty), OUTDIR/kallsyms (only when
 * an event prints kernel symbols) and OUTDIR/tracing/ (events/header_page, events/header_event, the formats of
 * events/ftrace/ and of the given events, printk_formats, saved_cmdlines).
 * The host turns them into trace.dat with `trace-cmd restore`.
 *
 * Why: `trace-cmd extract` in the guest writes the format of every trace event
 * the kernel has (hundreds) into trace.dat, thousands of small reads that take
 * over a second under TCG. Tracing must already be off (tracing_on = 0).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRACEFS "/sys/kernel/tracing"

static void fail(const char *fmt, ...)
{
	va_list ap;

	fputs("numalab-tracegrab: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* snprintf into a PATH_SIZE buffer; a path that does not fit is an error, not a truncation. */
#define PATH_SIZE 4096
static void path(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void path(char *buf, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, PATH_SIZE, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= PATH_SIZE)
		fail("path too long (%s)", fmt);
}

static void mkdirs(const char *path)
{
	char buf[PATH_SIZE];
	size_t i, n = strlen(path);

	if (n >= sizeof(buf))
		fail("%s: path too long", path);
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			fail("mkdir %s: %s", buf, strerror(errno));
		buf[i] = path[i];
	}
}

/* Copy src to dst, reading until EOF (tracefs files report size 0). Returns bytes copied.
 * nonblock: stop at EAGAIN too (trace_pipe_raw blocks when empty). */
static long long copy_file(const char *src, const char *dst, int nonblock)
{
	static char buf[65536];
	long long total = 0;
	int in, out;

	in = open(src, O_RDONLY | (nonblock ? O_NONBLOCK : 0));
	if (in < 0)
		fail("%s: %s", src, strerror(errno));
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0)
		fail("%s: %s", dst, strerror(errno));
	for (;;) {
		ssize_t n = read(in, buf, nonblock ? 4096 : sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && nonblock && errno == EAGAIN)
			break;
		if (n < 0)
			fail("%s: %s", src, strerror(errno));
		if (n == 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, buf + off, n - off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				fail("%s: %s", dst, strerror(errno));
			off += w;
		}
		total += n;
	}
	close(in);
	if (close(out) < 0)
		fail("%s: %s", dst, strerror(errno));
	return total;
}

/* Does this event format print kernel addresses as symbols (%pS, %ps, %pB, %pF, %pf)? */
static int prints_symbols(const char *format)
{
	static char buf[65536];
	ssize_t n, len = 0;
	int fd = open(format, O_RDONLY);

	if (fd < 0)
		fail("%s: %s", format, strerror(errno));
	while (len < (ssize_t)sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += n;
	close(fd);
	buf[len] = '\0';
	for (char *p = buf; (p = strstr(p, "%p")); p += 2)
		if (p[2] && strchr("SsBFf", p[2]))
			return 1;
	return 0;
}

/* Copies the event's format; returns whether trace-cmd needs kallsyms to print it. */
static int copy_format(const char *out, const char *system, const char *event)
{
	char src[PATH_SIZE], dir[PATH_SIZE], dst[PATH_SIZE];

	path(src, TRACEFS "/events/%s/%s/format", system, event);
	path(dir, "%s/tracing/events/%s/%s", out, system, event);
	path(dst, "%s/format", dir);
	mkdirs(dir);
	copy_file(src, dst, 0);
	return prints_symbols(dst);
}

int main(int argc, char **argv)
{
	char src[PATH_SIZE], dst[PATH_SIZE];
	const char *out;
	struct dirent *de;
	DIR *d;
	int cpus = 0, symbols = 0;
	long long bytes = 0;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fprintf(argc < 2 ? stderr : stdout, "usage: numalab-tracegrab OUTDIR SYSTEM:EVENT...\n");
		return argc < 2 ? 2 : 0;
	}
	out = argv[1];
	path(dst, "%s/tracing/events", out);
	mkdirs(dst);

	for (int i = 2; i < argc; i++) {
		char system[256], *colon = strchr(argv[i], ':');

		if (!colon || colon == argv[i] || (size_t)(colon - argv[i]) >= sizeof(system) || !colon[1])
			fail("%s: expected SYSTEM:EVENT", argv[i]);
		memcpy(system, argv[i], colon - argv[i]);
		system[colon - argv[i]] = '\0';
		symbols |= copy_format(out, system, colon + 1);
	}
	d = opendir(TRACEFS "/events/ftrace");
	if (!d)
		fail(TRACEFS "/events/ftrace: %s", strerror(errno));
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && de->d_type == DT_DIR)
			copy_format(out, "ftrace", de->d_name);
	closedir(d);

	static const char *const files[] = { "events/header_page", "events/header_event", "printk_formats",
					     "saved_cmdlines", "trace_clock" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		path(src, TRACEFS "/%s", files[i]);
		path(dst, "%s/tracing/%s", out, files[i]);
		copy_file(src, dst, 0);
	}
	/* /proc/kallsyms takes about 0.05 s to generate under TCG: only when an event needs it. */
	if (symbols) {
		path(dst, "%s/kallsyms", out);
		copy_file("/proc/kallsyms", dst, 0);
	}

	d = opendir(TRACEFS "/per_cpu");
	if (!d)
		fail(TRACEFS "/per_cpu: %s", strerror(errno));
	while ((de = readdir(d))) {
		char *end;
		long cpu;

		if (strncmp(de->d_name, "cpu", 3))
			continue;
		cpu = strtol(de->d_name + 3, &end, 10);
		if (end == de->d_name + 3 || *end)
			continue;
		path(src, TRACEFS "/per_cpu/cpu%ld/trace_pipe_raw", cpu);
		path(dst, "%s/cpu%ld", out, cpu);
		bytes += copy_file(src, dst, 1);
		cpus++;
	}
	closedir(d);
	printf("numalab-tracegrab: %d cpus, %lld bytes of trace data, %d event formats%s\n", cpus, bytes, argc - 2,
	       symbols ? ", kallsyms" : "");
	return 0;
}
