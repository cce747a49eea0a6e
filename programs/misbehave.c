/* Misbehaviour for the kvm engine's program tests, chosen by argv[1]:
 *   badptr  write(2) from an address the program never mapped (EFAULT expected)
 *   enosys  an unknown system call (ENOSYS expected)
 *   segv    a store to an unmapped address (the run ends with a fault report)
 *   jit     a `syscall` instruction written at run time (the loader cannot rewrite it)
 *   leak    opens files and exits without closing them (the host must close them)
 *   nonblock sets O_NONBLOCK on stdout and exits (the host must restore the flags)
 *   exit    exit(argv[2]): statuses are 8 bits, as under Linux */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    if (strcmp(argv[1], "jit") == 0) {
        /* mov eax, 39 (getpid); syscall; ret */
        static const unsigned char code[] = {0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0xc3};
        unsigned char *p = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return 2;
        memcpy(p, code, sizeof code);
        printf("calling built code\n");
        fflush(stdout);
        long r = ((long (*)(void))p)();
        printf("survived %ld\n", r);
        return 1;
    }
    if (strcmp(argv[1], "leak") == 0) {
        for (int i = 0; i < 20; i++) {
            char name[32];
            snprintf(name, sizeof name, "leak-%d", i);
            if (open(name, O_CREAT | O_WRONLY, 0644) < 0) return 2;
        }
        return 0;
    }
    if (strcmp(argv[1], "nonblock") == 0) {
        int fl = fcntl(1, F_GETFL);
        return fcntl(1, F_SETFL, fl | O_NONBLOCK) == 0 ? 0 : 2;
    }
    if (strcmp(argv[1], "exit") == 0 && argc > 2) {
        exit(atoi(argv[2]));
    }
    return 64;
}
