/* Idle memory latency on this machine, as a dependent pointer chase: one 64-byte node per
 * cache line, linked in a random cyclic order over SIZE_MIB MiB (far beyond the last-level
 * cache), so every load misses and waits for the previous one. Huge pages are asked for
 * (MADV_HUGEPAGE) so that most loads do not also miss the TLB; a virtual machine's nested
 * walk still adds to those that do. Time is the thread's CPU time, not the wall clock, so that
 * other processes sharing the cores do not count. Prints one line: `ns_per_load N`, the median
 * of 5 runs.
 * Used by `tierscope measure apps` to derive memory-level parallelism from server CPU time
 * (docs/models/TIERING.md section 4.1).
 * Usage: chase [SIZE_MIB (default 512)] [LOADS (default 20000000)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define LINE 64

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 512;
    long loads = argc > 2 ? strtol(argv[2], NULL, 10) : 20000000;
    size_t bytes = mib << 20, n = bytes / LINE;
    char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED || n < 2) return 1;
    madvise(buf, bytes, MADV_HUGEPAGE);
    size_t *order = malloc(n * sizeof *order);
    if (!order) return 1;
    for (size_t i = 0; i < n; i++) order[i] = i;
    /* A fixed-seed Fisher-Yates shuffle (xorshift64): the same cycle on every run. */
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = n - 1; i > 0; i--) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        size_t j = s % (i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        *(char **)(buf + order[i] * LINE) = buf + order[(i + 1) % n] * LINE;
    free(order);
    double runs[5];
    char *p = buf;
    for (int r = 0; r < 5; r++) {
        double t0 = now_ns();
        for (long i = 0; i < loads; i++) p = *(char **)p;
        runs[r] = (now_ns() - t0) / (double)loads;
    }
    qsort(runs, 5, sizeof runs[0], cmp);
    /* p is printed so the chase cannot be optimised away. */
    printf("ns_per_load %.2f end %p\n", runs[2], (void *)p);
    return 0;
}
