/* threads SECONDS KIB MEMCPU CPU... : the main thread first touches KIB KiB on MEMCPU (so the memory is on its
 * node), then one thread per CPU named (the main thread is the first: no idle waiter) is held 0.3 s on its CPU
 * (so the process starts where asked) and is then free, all passing over that memory until SECONDS have passed;
 * prints "loops N". */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned char *mem;
static size_t size;
static double end_at;
static long loops[64];
static int cpus[64];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    if (cpu < 0)
        for (int c = 0; c < CPU_SETSIZE; c++) CPU_SET(c, &s);
    else
        CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof(s), &s);
}

static void *worker(void *arg) {
    long i = (long)arg;
    pin(cpus[i]);
    double held = now() + 0.3;
    while (now() < held)
        ;
    pin(-1);
    while (now() < end_at) {
        for (size_t k = 0; k < size; k += 64) mem[k]++;
        loops[i]++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5) return 2;
    size = (size_t)atoi(argv[2]) << 10;
    pin(atoi(argv[3]));
    mem = malloc(size);
    if (!mem) return 1;
    for (size_t k = 0; k < size; k += 4096) mem[k] = 1;
    int n = argc - 4;
    for (int i = 0; i < n && i < 64; i++) cpus[i] = atoi(argv[4 + i]);
    end_at = now() + atof(argv[1]);
    pthread_t t[64];
    for (long i = 1; i < n && i < 64; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i)) return 1;
    worker((void *)0);
    long total = loops[0];
    for (int i = 1; i < n && i < 64; i++) {
        pthread_join(t[i], NULL);
        total += loops[i];
    }
    printf("loops %ld\n", total);
    return 0;
}
