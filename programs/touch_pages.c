/* First touches only: maps N 4 KiB pages (anonymous mmap) and writes one byte on each, so
 * that the run's cost beyond start-up is N first-touch faults (under the kvm engine on a
 * shadow-paging host, N exits of the guest). Usage: touch_pages N (default 4096). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 4096;
    if (n <= 0) return 1;
    unsigned char *p = mmap(0, (size_t)n * 4096, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    for (long i = 0; i < n; i++) p[i * 4096] = (unsigned char)i;
    unsigned long s = 0;
    for (long i = 0; i < n; i++) s += p[i * 4096];
    printf("%ld pages, sum %lu\n", n, s);
    return 0;
}
