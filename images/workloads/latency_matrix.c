/*
 * latency-matrix: the memory latency of every (CPU node, memory node) pair, by pointer chase.
 *
 * For each pair it binds a buffer (--mem-mib MiB) to the memory node with mbind(MPOL_BIND) and faults it
 * in there, and links its 64-byte lines into one random cycle (Sattolo's algorithm), so each step of the
 * chase is a dependent load to a line far from the last: with a buffer much larger than a cache, a miss
 * almost every step.  Then, in rounds until --duration seconds have passed, it binds itself to each CPU
 * node's CPUs in turn (sched_setaffinity) and times --steps steps of each of that node's pairs.  The
 * pairs are interleaved so that a change in the host's load hits them all alike.
 *
 * It reports, for each pair, nanoseconds per step (the minimum and the median over the rounds) and the
 * ratio to the CPU node's local pair: under numalab run --remote-latency slit this should follow the
 * SLIT; without it (TCG: every node is the same host memory), about 1.
 *
 * With --stream-mib N it also measures each pair's bandwidth, STREAM's way: three arrays of N MiB bound to
 * the memory node, and in each round, after the chase, a copy (b = a) and a triad (a = b + s c) over them
 * from the CPU node, timed. A streaming loop also spends time on its own instructions, which under
 * numalab's virtual clock (1 G instructions a guest second) do not overlap the charged memory time: so each
 * round also times the same loops over a slice that stays in the remote-latency model's cache (96 KiB,
 * repeated to as many bytes), and "net" bandwidths divide the bytes by the difference. STREAM's byte
 * counts: copy 2 x the array, triad 3 x.
 *
 * With --migrate-mib N, for every two nodes a and b with a's CPUs, each round also moves N MiB of a's
 * memory to b and back (move_pages(2), from a's CPUs) and times each way: microseconds a 4 KiB page, the
 * kernel's work and its copy together (the pair (a, b) reports both).
 *
 * With --migrate-huge-mib N (even), the same with N MiB of transparent huge pages (MADV_HUGEPAGE, 2 MiB
 * aligned; one address a huge page given to move_pages, which moves it whole), in the first HUGE_ROUNDS rounds
 * only (a big copy under TCG is slow, and the figure is a median): microseconds a MiB each way.
 * The kernel's work a page is then spread over 512 of them, so the time is mostly the copy's (issue 52's
 * known answer 4). A huge page the kernel split (no free 2 MiB on the target) shows in "huge_kept", the share
 * of those bytes still in huge pages after the last round; memory that was not in huge pages from the start
 * is fatal.
 *
 * Static, no libnuma: the node CPUs come from /sys/devices/system/node, mbind and get_mempolicy are
 * raw system calls.
 */
#define _GNU_SOURCE
#include "common.h"
#include "nodes.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_ROUNDS 4096
#define LINE 64

struct pair {
	int cpu_node, mem_node;
	void **head;
	void **pos;		/* where the chase stopped: each round goes on along the cycle */
	size_t lines;
	double placed;		/* share of the sampled pages found on mem_node */
	int rounds;
	double ns[MAX_ROUNDS];	/* per step, each round */
	double ratio[MAX_ROUNDS];	/* to the local pair's of the same round */
	double min, median, round_ratio;
	double *sa, *sb, *sc;	/* --stream-mib: the stream arrays, on mem_node */
	double copy_s[MAX_ROUNDS], triad_s[MAX_ROUNDS];	/* each round's time over the arrays */
	double copy_res_s[MAX_ROUNDS], triad_res_s[MAX_ROUNDS];	/* the same bytes in the cached slice */
	double copy_gbs[3], triad_gbs[3];	/* raw, net, cached (stream_gbs) */
	char *mig;				/* --migrate-mib: the pages moved, between cpu_node and mem_node */
	void **mig_pages;
	int *mig_nodes, *mig_status;
	double push_us[MAX_ROUNDS], pull_us[MAX_ROUNDS];	/* a page, cpu_node -> mem_node and back */
	char *huge;				/* --migrate-huge-mib: the huge pages moved */
	void **huge_pages;
	int *huge_nodes, *huge_status;
	double huge_push_us[MAX_ROUNDS], huge_pull_us[MAX_ROUNDS];	/* a MiB, each way */
	int huge_rounds;			/* the rounds that moved them (HUGE_ROUNDS at most) */
	double huge_kept;			/* the share still in huge pages after the last round */
};

typedef double v2d __attribute__((vector_size(16)));
#define RESIDENT_BYTES (32 * 1024)	/* each of the three slices: 96 KiB together, in a 256 KiB model cache */

static cpu_set_t node_cpus[MAX_NODES];
static int node_has_cpus[MAX_NODES];
static int n_nodes;

/* xorshift64*: the chase's order; fixed seed, the same cycle every run. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static void build(struct pair *p, size_t bytes)
{
	char *buf = map_anon(bytes, 0, "chase buffer");
	uint32_t *order;
	int found = 0, sampled = 0;

	bind_to_node(buf, bytes, p->mem_node);
	/* 4 KiB pages on every node: a node with more free memory would get more transparent huge pages, and
	 * under TCG a guest huge page is a shorter page walk, which is not what this measures. */
	if (madvise(buf, bytes, MADV_NOHUGEPAGE))
		die("madvise(MADV_NOHUGEPAGE): %s", strerror(errno));
	memset(buf, 1, bytes);	/* fault it in, on mem_node */
	p->lines = bytes / LINE;
	order = malloc(p->lines * sizeof(*order));
	if (!order)
		die("out of memory");
	for (size_t i = 0; i < p->lines; i++)
		order[i] = (uint32_t)i;
	for (size_t i = p->lines - 1; i > 0; i--) {	/* Sattolo: one cycle through every line */
		size_t j = next_rand() % i;
		uint32_t t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (size_t i = 0; i < p->lines; i++)
		*(void **)(buf + (size_t)order[i] * LINE) = buf + (size_t)order[(i + 1) % p->lines] * LINE;
	free(order);
	p->head = p->pos = (void **)buf;
	for (size_t off = 0; off < bytes; off += 64 * page_size()) {
		sampled++;
		found += node_of_page(buf + off) == p->mem_node;
	}
	p->placed = sampled ? (double)found / sampled : 0;
}

static void *bind_buffer(size_t bytes, int node, const char *what)
{
	char *buf = map_anon(bytes, 0, what);

	bind_to_node(buf, bytes, node);
	if (madvise(buf, bytes, MADV_NOHUGEPAGE))
		die("madvise(MADV_NOHUGEPAGE): %s", strerror(errno));
	memset(buf, 1, bytes);
	return buf;
}

#define HUGE_BYTES (2UL << 20)
#define HUGE_ROUNDS 9	/* the first rounds move the huge pages; the median of these is the figure */

/* KiB of [addr, addr + bytes) in transparent huge pages: AnonHugePages of the mappings in /proc/self/smaps
 * that lie within it (mbind and madvise split the buffer's mapping at its ends). */
static unsigned long huge_kib(const char *addr, size_t bytes)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	unsigned long start = 0, end = 0, kib, total = 0;

	if (!f)
		die("cannot read /proc/self/smaps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2) {
			start = a;
			end = b;
		} else if (sscanf(line, "AnonHugePages: %lu kB", &kib) == 1 && start >= (unsigned long)addr &&
			   end <= (unsigned long)addr + bytes) {
			total += kib;
		}
	}
	fclose(f);
	return total;
}

/* The move_pages arrays for n pages of step bytes from buf: their addresses, target nodes and status. */
static void page_arrays(char *buf, size_t n, size_t step, void ***pages, int **nodes, int **status)
{
	*pages = malloc(n * sizeof(void *));
	*nodes = malloc(n * sizeof(int));
	*status = malloc(n * sizeof(int));
	if (!*pages || !*nodes || !*status)
		die("out of memory");
	for (size_t i = 0; i < n; i++)
		(*pages)[i] = buf + i * step;
}

/* MIB of transparent huge pages on node, faulted in there; one address a huge page for move_pages. */
static void huge_buffer(struct pair *p, size_t mib, int node)
{
	size_t bytes = mib * MIB, n = bytes / HUGE_BYTES;
	char *raw = map_anon(bytes + HUGE_BYTES, 0, "huge pages to move");
	char *buf = (char *)(((uintptr_t)raw + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));

	bind_to_node(buf, bytes, node);
	if (madvise(buf, bytes, MADV_HUGEPAGE))
		die("madvise(MADV_HUGEPAGE): %s (no transparent huge pages in this kernel?)", strerror(errno));
	memset(buf, 1, bytes);
	unsigned long kib = huge_kib(buf, bytes);
	if (kib != bytes / 1024)
		die("--migrate-huge-mib: %lu of %zu KiB in transparent huge pages on node %d "
		    "(/sys/kernel/mm/transparent_hugepage/enabled never, or no free 2 MiB there)", kib, bytes / 1024, node);
	p->huge = buf;
	page_arrays(buf, n, HUGE_BYTES, &p->huge_pages, &p->huge_nodes, &p->huge_status);
}

/* 16 bytes a load and a store (SSE2, baseline x86-64): few instructions a line. Not turned into memcpy. */
__attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
static void copy(v2d *restrict dst, const v2d *restrict src, size_t n)
{
#pragma GCC unroll 4
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

__attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
static void triad(v2d *restrict a, const v2d *restrict b, const v2d *restrict c, size_t n)
{
	const v2d s = { 3.0, 3.0 };

#pragma GCC unroll 4
	for (size_t i = 0; i < n; i++)
		a[i] = b[i] + s * c[i];
}

/* One round of a pair's streams: the arrays once each, then their bytes again over the cached slices. */
static void stream_round(struct pair *p, size_t bytes)
{
	size_t n = bytes / sizeof(v2d), nr = RESIDENT_BYTES / sizeof(v2d), reps = bytes / RESIDENT_BYTES;
	char *r = (char *)p->sa;	/* the slices: three consecutive 32 KiB of one array, no set shared */
	v2d *ra = (v2d *)r, *rb = (v2d *)(r + RESIDENT_BYTES), *rc = (v2d *)(r + 2 * RESIDENT_BYTES);
	int k = p->rounds;
	double t;

	t = now_s();
	copy((v2d *)p->sb, (v2d *)p->sa, n);
	p->copy_s[k] = now_s() - t;
	t = now_s();
	triad((v2d *)p->sa, (v2d *)p->sb, (v2d *)p->sc, n);
	p->triad_s[k] = now_s() - t;
	copy(rb, ra, nr);	/* warm the slices */
	triad(ra, rb, rc, nr);
	t = now_s();
	for (size_t i = 0; i < reps; i++)
		copy(rb, ra, nr);
	p->copy_res_s[k] = now_s() - t;
	t = now_s();
	for (size_t i = 0; i < reps; i++)
		triad(ra, rb, rc, nr);
	p->triad_res_s[k] = now_s() - t;
}

/* Move n pages (the addresses in pages) to node; microseconds in all. A page that did not move is fatal. */
static double move_all(void **pages, int *nodes, int *status, size_t n, int node)
{
	double t;

	for (size_t i = 0; i < n; i++)
		nodes[i] = node;
	t = now_s();
	if (syscall(SYS_move_pages, 0, (unsigned long)n, pages, nodes, status, 2 /* MPOL_MF_MOVE */))
		die("move_pages to node %d: %s", node, strerror(errno));
	t = now_s() - t;
	for (size_t i = 0; i < n; i++)
		if (status[i] != node)
			die("move_pages: page %zu is on node %d (status), not %d", i, status[i], node);
	return t * 1e6;
}

static void **chase(void **p, long steps)
{
	while (steps-- > 0)
		p = (void **)*p;
	return p;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* GB/s (1e9 bytes a second) of the median round: raw, net of the cached slice's time, and the slice's. */
static void stream_gbs(double out[3], double *t, double *res, int rounds, double bytes)
{
	double net[MAX_ROUNDS], raw[MAX_ROUNDS], cached[MAX_ROUNDS];

	for (int r = 0; r < rounds; r++) {
		raw[r] = t[r];
		net[r] = t[r] - res[r];
		cached[r] = res[r];
	}
	double traw = median_of(raw, rounds), tnet = median_of(net, rounds), tres = median_of(cached, rounds);

	out[0] = bytes / traw / 1e9;
	out[1] = tnet > 0 ? bytes / tnet / 1e9 : 0;
	out[2] = bytes / tres / 1e9;
}

/* sqrt(aa bb / (ab ba)) of net bandwidths; 1 when one is 0 (no time left after the cached slice's: memory
 * costs nothing measurable, as under --clock virtual without --remote-latency). */
static double sym_gbs_ratio(double aa, double bb, double ab, double ba)
{
	return aa > 0 && bb > 0 && ab > 0 && ba > 0 ? sqrt(aa * bb / (ab * ba)) : 1.0;
}

static struct pair *find(struct pair *pairs, int n_pairs, int c, int m)
{
	for (int k = 0; k < n_pairs; k++)
		if (pairs[k].cpu_node == c && pairs[k].mem_node == m)
			return &pairs[k];
	return NULL;
}

static struct pair *local_of(struct pair *pairs, int n_pairs, const struct pair *p)
{
	return find(pairs, n_pairs, p->cpu_node, p->cpu_node);
}

/* Nodes a and b (both with CPUs): median over the rounds of sqrt(t_ab t_ba / (t_aa t_bb)). A factor that is
 * the CPU node's alone (a busier host CPU) or the memory node's alone cancels out of it. The reported
 * "ratio" is the same of the pairs' minimum times (the least disturbed rounds); this, "ratio_rounds". */
static double symmetric_ratio(struct pair *pairs, int n_pairs, int a, int b, int rounds)
{
	struct pair *ab = find(pairs, n_pairs, a, b), *ba = find(pairs, n_pairs, b, a);
	struct pair *aa = find(pairs, n_pairs, a, a), *bb = find(pairs, n_pairs, b, b);
	double *v = calloc((size_t)rounds, sizeof(double));

	if (!v)
		die("out of memory");
	for (int r = 0; r < rounds; r++)
		v[r] = sqrt(ab->ns[r] * ba->ns[r] / (aa->ns[r] * bb->ns[r]));
	double m = median_of(v, rounds);
	free(v);
	return m;
}

int main(int argc, char **argv)
{
	int mem_mib = 32, steps = 20000, min_rounds = 3, stream_mib = 0, migrate_mib = 0, huge_mib = 0;
	const struct opt opts[] = {
		{ "mem-mib", OPT_INT, &mem_mib, 1, 4096, "MIB", "each pair's buffer (default 32)" },
		{ "steps", OPT_INT, &steps, 1000, 100000000, "N", "chase steps a pair is timed for (default 20000)" },
		{ "min-rounds", OPT_INT, &min_rounds, 1, MAX_ROUNDS, "R",
		  "rounds even past the duration (default 3)" },
		{ "stream-mib", OPT_INT, &stream_mib, 0, 1024, "MIB",
		  "also copy and triad over three arrays of MIB each per pair (default 0: no streams)" },
		{ "migrate-mib", OPT_INT, &migrate_mib, 0, 1024, "MIB",
		  "also move MIB of a node's memory to each other node and back (default 0: none)" },
		{ "migrate-huge-mib", OPT_INT, &huge_mib, 0, 1024, "MIB",
		  "the same with MIB (even) of transparent huge pages (default 0: none)" },
		{ NULL, 0, NULL, 0, 0, NULL, NULL },
	};
	struct pair *pairs;
	int n_pairs = 0, rounds = 0;
	double duration, t0, elapsed;
	unsigned long long bytes = 0;
	void **sink = NULL;
	struct task_stat st;
	struct json j;

	prog_name = "latency-matrix";
	duration = parse_args(argc, argv,
			      "Pointer-chase latency of every (CPU node, memory node) pair, and its ratio to local.", opts);
	if (huge_mib % 2)
		die("--migrate-huge-mib: %d is not a whole number of 2 MiB huge pages", huge_mib);
	n_nodes = read_node_cpus(node_cpus, node_has_cpus);
	pairs = calloc((size_t)n_nodes * n_nodes, sizeof(*pairs));
	if (!pairs)
		die("out of memory");
	task_begin(&st);
	for (int c = 0; c < n_nodes; c++) {
		if (!node_has_cpus[c])
			continue;
		if (sched_setaffinity(0, sizeof(cpu_set_t), &node_cpus[c]))
			die("sched_setaffinity to node %d: %s", c, strerror(errno));
		for (int m = 0; m < n_nodes; m++) {
			struct pair *p = &pairs[n_pairs++];

			p->cpu_node = c;
			p->mem_node = m;
			build(p, (size_t)mem_mib * MIB);
			if (stream_mib) {
				p->sa = bind_buffer((size_t)stream_mib * MIB, m, "stream array");
				p->sb = bind_buffer((size_t)stream_mib * MIB, m, "stream array");
				p->sc = bind_buffer((size_t)stream_mib * MIB, m, "stream array");
			}
			if (migrate_mib && m != c) {
				size_t n = (size_t)migrate_mib * MIB / page_size();

				p->mig = bind_buffer((size_t)migrate_mib * MIB, c, "pages to move");
				page_arrays(p->mig, n, page_size(), &p->mig_pages, &p->mig_nodes, &p->mig_status);
			}
			if (huge_mib && m != c)
				huge_buffer(p, (size_t)huge_mib, c);
		}
	}
	t0 = now_s();
	while (rounds < MAX_ROUNDS && (rounds < min_rounds || now_s() - t0 < duration)) {
		for (int i = 0; i < n_pairs; i++) {
			struct pair *p = &pairs[i];
			double a;

			if (i == 0 || p->cpu_node != pairs[i - 1].cpu_node) {
				if (sched_setaffinity(0, sizeof(cpu_set_t), &node_cpus[p->cpu_node]))
					die("sched_setaffinity to node %d: %s", p->cpu_node, strerror(errno));
			}
			p->pos = chase(p->pos, steps / 16);	/* after the switch: warm the TLBs a little */
			a = now_s();
			p->pos = chase(p->pos, steps);
			sink = p->pos;
			p->ns[p->rounds] = (now_s() - a) * 1e9 / steps;
			if (p->mig) {
				size_t n = (size_t)migrate_mib * MIB / page_size();

				p->push_us[p->rounds] = move_all(p->mig_pages, p->mig_nodes, p->mig_status, n, p->mem_node) / n;
				p->pull_us[p->rounds] = move_all(p->mig_pages, p->mig_nodes, p->mig_status, n, p->cpu_node) / n;
			}
			if (p->huge && p->huge_rounds < HUGE_ROUNDS) {
				size_t n = (size_t)huge_mib * MIB / HUGE_BYTES;

				p->huge_push_us[p->huge_rounds] =
					move_all(p->huge_pages, p->huge_nodes, p->huge_status, n, p->mem_node) / huge_mib;
				p->huge_pull_us[p->huge_rounds++] =
					move_all(p->huge_pages, p->huge_nodes, p->huge_status, n, p->cpu_node) / huge_mib;
			}
			if (stream_mib) {
				stream_round(p, (size_t)stream_mib * MIB);
				bytes += 5ULL * stream_mib * MIB;	/* STREAM's count: copy 2x, triad 3x */
			}
			p->rounds++;
			bytes += (unsigned long long)steps * sizeof(void *);
			st.loops++;
		}
		rounds++;
	}
	elapsed = now_s() - t0;
	for (int i = 0; i < n_pairs; i++)
		if (pairs[i].huge)
			pairs[i].huge_kept = (double)huge_kib(pairs[i].huge, (size_t)huge_mib * MIB) / (huge_mib * 1024.0);
	st.bytes = bytes;
	task_end(&st);
	/* For every two nodes with CPUs, the symmetric ratio (before the times are sorted below). */
	int n_sym = 0;
	struct { int a, b; double r; } sym[MAX_NODES * 4];
	for (int a = 0; a < n_nodes; a++)
		for (int b = a + 1; b < n_nodes && n_sym < MAX_NODES * 4; b++)
			if (node_has_cpus[a] && node_has_cpus[b]) {
				sym[n_sym].a = a;
				sym[n_sym].b = b;
				sym[n_sym++].r = symmetric_ratio(pairs, n_pairs, a, b, rounds);  /* (rounds') */
			}
	for (int i = 0; stream_mib && i < n_pairs; i++) {
		struct pair *p = &pairs[i];

		stream_gbs(p->copy_gbs, p->copy_s, p->copy_res_s, p->rounds, 2.0 * stream_mib * MIB);
		stream_gbs(p->triad_gbs, p->triad_s, p->triad_res_s, p->rounds, 3.0 * stream_mib * MIB);
	}
	/* Each round's ratio to the local pair's time in the same round (taken moments apart, so a change in the
	 * host's load mostly cancels), then the median over the rounds. */
	for (int i = 0; i < n_pairs; i++) {
		struct pair *p = &pairs[i], *local = local_of(pairs, n_pairs, p);

		for (int r = 0; local && r < p->rounds; r++)
			p->ratio[r] = p->ns[r] / local->ns[r];
		p->round_ratio = local ? median_of(p->ratio, p->rounds) : 0;
	}
	for (int i = 0; i < n_pairs; i++) {
		struct pair *p = &pairs[i];

		p->median = median_of(p->ns, p->rounds);
		p->min = p->ns[0];
	}

	result_begin(&j, "latency-matrix", duration, elapsed, 1, 1, (long long)mem_mib * n_pairs, st.loops, bytes);
	json_int(&j, "steps", steps);
	json_int(&j, "rounds", rounds);
	json_int(&j, "line_bytes", LINE);
	json_int(&j, "buffer_mib", mem_mib);
	json_int(&j, "stream_mib", stream_mib);
	json_int(&j, "migrate_mib", migrate_mib);
	json_int(&j, "migrate_huge_mib", huge_mib);
	{
		double sum = 0, worst = 1;
		int remote = 0;

		json_arr_begin(&j, "pairs");
		for (int i = 0; i < n_pairs; i++) {
			struct pair *p = &pairs[i], *local = local_of(pairs, n_pairs, p);

			json_obj_begin(&j, NULL);
			json_int(&j, "cpu_node", p->cpu_node);
			json_int(&j, "mem_node", p->mem_node);
			json_num(&j, "ns_min", p->min);
			json_num(&j, "ns_median", p->median);
			json_num(&j, "placed", p->placed);
			if (stream_mib) {
				json_num(&j, "copy_gbs", p->copy_gbs[0]);
				json_num(&j, "copy_net_gbs", p->copy_gbs[1]);
				json_num(&j, "copy_cached_gbs", p->copy_gbs[2]);
				json_num(&j, "triad_gbs", p->triad_gbs[0]);
				json_num(&j, "triad_net_gbs", p->triad_gbs[1]);
				json_num(&j, "triad_cached_gbs", p->triad_gbs[2]);
			}
			if (p->mig) {	/* the medians over the rounds (after the other figures: sorts in place) */
				json_num(&j, "push_us_per_page", median_of(p->push_us, p->rounds));
				json_num(&j, "pull_us_per_page", median_of(p->pull_us, p->rounds));
			}
			if (p->huge) {
				json_int(&j, "huge_rounds", p->huge_rounds);
				json_num(&j, "huge_push_us_per_mib", median_of(p->huge_push_us, p->huge_rounds));
				json_num(&j, "huge_pull_us_per_mib", median_of(p->huge_pull_us, p->huge_rounds));
				json_num(&j, "huge_kept", p->huge_kept);
			}
			if (local) {
				json_num(&j, "ratio_min", p->min / local->min);
				json_num(&j, "ratio_median", p->median / local->median);
				json_num(&j, "ratio", p->round_ratio);
				if (p != local) {
					double r = p->round_ratio;

					sum += r;
					remote++;
					worst = r > worst ? r : worst;
				}
			}
			json_obj_end(&j);
		}
		json_arr_end(&j);
		/* The mean over the remote pairs of their ratio (median of the rounds'): 1 with one node. */
		json_num(&j, "remote_ratio_each", remote ? sum / remote : 1.0);
		json_num(&j, "remote_ratio_max", worst);
		double csum = 0;

		sum = 0;
		json_arr_begin(&j, "symmetric");
		for (int i = 0; i < n_sym; i++) {
			struct pair *ab = find(pairs, n_pairs, sym[i].a, sym[i].b);
			struct pair *ba = find(pairs, n_pairs, sym[i].b, sym[i].a);
			struct pair *aa = find(pairs, n_pairs, sym[i].a, sym[i].a);
			struct pair *bb = find(pairs, n_pairs, sym[i].b, sym[i].b);
			/* From the minimum times: the rounds the host's other work did not slow down. */
			double r = sqrt(ab->min * ba->min / (aa->min * bb->min));

			json_obj_begin(&j, NULL);
			json_int(&j, "a", sym[i].a);
			json_int(&j, "b", sym[i].b);
			json_num(&j, "ratio", r);
			json_num(&j, "ratio_rounds", sym[i].r);
			if (stream_mib) {	/* local over remote net bandwidth, both ways (a bandwidth ratio) */
				double c = sym_gbs_ratio(aa->copy_gbs[1], bb->copy_gbs[1], ab->copy_gbs[1], ba->copy_gbs[1]);

				csum += c;
				json_num(&j, "copy_ratio", c);
				json_num(&j, "triad_ratio", sym_gbs_ratio(aa->triad_gbs[1], bb->triad_gbs[1],
									  ab->triad_gbs[1], ba->triad_gbs[1]));
			}
			json_obj_end(&j);
			sum += r;
		}
		json_arr_end(&j);
		/* The figure: the mean symmetric ratio over every two CPU nodes (1 with one node). */
		json_num(&j, "remote_ratio", n_sym ? sum / n_sym : 1.0);
		if (stream_mib)	/* the mean symmetric copy ratio: local/remote bandwidth (1 with one node) */
			json_num(&j, "bandwidth_ratio", n_sym ? csum / n_sym : 1.0);
	}
	result_print_one_task(&j, &st);
	if (sink == (void **)1)	/* keep the chase */
		puts("");
	return 0;
}
