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
};

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
	int mem_mib = 32, steps = 20000, min_rounds = 3;
	const struct opt opts[] = {
		{ "mem-mib", OPT_INT, &mem_mib, 1, 4096, "MIB", "each pair's buffer (default 32)" },
		{ "steps", OPT_INT, &steps, 1000, 100000000, "N", "chase steps a pair is timed for (default 20000)" },
		{ "min-rounds", OPT_INT, &min_rounds, 1, MAX_ROUNDS, "R",
		  "rounds even past the duration (default 3)" },
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
			p->ns[p->rounds++] = (now_s() - a) * 1e9 / steps;
			bytes += (unsigned long long)steps * sizeof(void *);
			st.loops++;
		}
		rounds++;
	}
	elapsed = now_s() - t0;
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
			json_obj_end(&j);
			sum += r;
		}
		json_arr_end(&j);
		/* The figure: the mean symmetric ratio over every two CPU nodes (1 with one node). */
		json_num(&j, "remote_ratio", n_sym ? sum / n_sym : 1.0);
	}
	json_arr_begin(&j, "per_task");
	json_obj_begin(&j, NULL);
	json_task_fields(&j, &st);
	json_obj_end(&j);
	json_arr_end(&j);
	result_print(&j);
	if (sink == (void **)1)	/* keep the chase */
		puts("");
	return 0;
}
