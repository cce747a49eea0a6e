/* Misbehaviour for the kvm engine's program tests, chosen by argv[1]:
 *   badptr  write(2) from an address the program never mapped (EFAULT expected)
 *   enosys  an unknown system call (ENOSYS expected)
 *   segv    a store to an unmapped address (the run ends with a fault report) */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 64;
    if (strcmp(argv[1], "badptr") == 0) {
        long r = write(1, (const void *)0x1000, 16);
        printf("write %ld errno %d\n", r, errno);
        return r == -1 && errno == EFAULT ? 0 : 1;
    }
    if (strcmp(argv[1], "enosys") == 0) {
        long r = syscall(999, 1, 2, 3);
        printf("syscall(999) %ld errno %d\n", r, errno);
        return r == -1 && errno == ENOSYS ? 0 : 1;
    }
    if (strcmp(argv[1], "segv") == 0) {
        printf("about to fault\n");
        fflush(stdout);
        *(volatile long *)0x70000000 = 1;
        printf("survived\n");
        return 1;
    }
    return 64;
}
