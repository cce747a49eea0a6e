/* A small program for the kvm engine's program tests: prints its arguments, fills a heap
 * buffer (malloc: brk and mmap), and writes a summary to stdout and, when given, a file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    size_t n = 8u << 20; /* 8 MiB: musl's malloc takes it with mmap */
    unsigned char *big = malloc(n);
    char *small = malloc(100);
    if (!big || !small) return 1;
    for (size_t i = 0; i < n; i++) big[i] = (unsigned char)(i * 7);
    unsigned long sum = 0;
    for (size_t i = 0; i < n; i += 4093) sum += big[i];
    snprintf(small, 100, "sum %lu", sum);
    printf("argc %d\n", argc);
    for (int i = 1; i < argc; i++) printf("argv[%d] = %s\n", i, argv[i]);
    printf("%s\n", small);
    if (argc > 2 && strcmp(argv[1], "--out") == 0) {
        FILE *f = fopen(argv[2], "w");
        if (!f) { perror("fopen"); return 2; }
        fprintf(f, "%s\n", small);
        fclose(f);
    }
    free(big);
    free(small);
    return 0;
}
