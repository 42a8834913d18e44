/* memtouch: every thread writes its own buffer over and over for a while, then the process prints one
 * line numalab reads (docs/workloads.md, "Your own workload"). Build: gcc -static -O2 -pthread -o memtouch memtouch.c */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds, elapsed;
static size_t bytes_per_thread;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *touch(void *arg) {
    unsigned long *passes = arg;
    char *buf = malloc(bytes_per_thread);
    if (!buf)
        return NULL;
    double start = now();
    do {
        memset(buf, (int)*passes, bytes_per_thread);
        __asm__ volatile("" : : "r"(buf) : "memory"); /* the stores are the point: keep them */
        ++*passes;
    } while (now() - start < seconds);
    free(buf);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = 1;
    long mib = 64;
    seconds = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mib")) mib = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    }
    if (threads < 1 || threads > 1024 || mib < 1 || seconds <= 0) {
        fprintf(stderr, "usage: memtouch --threads N --mib MIB --seconds S\n");
        return 2;
    }
    bytes_per_thread = (size_t)mib * 1048576 / threads;
    pthread_t tid[1024];
    unsigned long passes[1024] = {0};
    double start = now();
    for (int i = 0; i < threads; i++)
        pthread_create(&tid[i], NULL, touch, &passes[i]);
    unsigned long total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        total += passes[i];
    }
    elapsed = now() - start;
    printf("MEMTOUCH {\"mib_per_s\": %.2f, \"passes\": %lu, \"elapsed_s\": %.3f}\n",
           total * (bytes_per_thread / 1048576.0) / elapsed, total, elapsed);
    return 0;
}
