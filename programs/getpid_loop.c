/* Nothing but system calls: getpid(2) N times (the cost of one call's round trip to the
 * host under the kvm engine). Usage: getpid_loop N. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000, s = 0;
    for (long i = 0; i < n; i++) s += syscall(SYS_getpid);
    printf("%ld calls\n", n);
    return s > 0 ? 0 : 1;
}
