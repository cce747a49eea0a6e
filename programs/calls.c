/* Exercises the system calls tierscope performs for a program, printing only what is the
 * same natively and under tierscope (sizes, contents, checks): stat/fstat/lstat, lseek,
 * pread, a private file mapping, getcwd, uname, clocks, getrandom, brk growth, readv.
 * Usage: calls FILE (a file of at least 64 bytes). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 64;
    struct stat a, b, c;
    if (stat(argv[1], &a) || lstat(argv[1], &c)) { perror("stat"); return 1; }
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0 || fstat(fd, &b)) { perror("open/fstat"); return 1; }
    printf("size %lld same %d regular %d\n", (long long)a.st_size,
           a.st_size == b.st_size && a.st_ino == b.st_ino && c.st_ino == a.st_ino,
           S_ISREG(a.st_mode) ? 1 : 0);
    printf("lseek end %lld\n", (long long)lseek(fd, 0, SEEK_END));
    char buf[17] = {0}, part1[8] = {0}, part2[9] = {0};
    printf("pread %zd\n", pread(fd, buf, 16, 8));
    lseek(fd, 0, SEEK_SET);
    struct iovec iov[2] = {{part1, 7}, {part2, 8}};
    printf("readv %zd\n", readv(fd, iov, 2));
    unsigned char *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 1; }
    unsigned sum = 0;
    for (int i = 0; i < 64; i++) sum += m[i];
    printf("mmap sum %u pread matches %d readv matches %d\n", sum, memcmp(buf, m + 8, 16) == 0,
           memcmp(part1, m, 7) == 0 && memcmp(part2, m + 7, 8) == 0);
    munmap(m, 4096);
    close(fd);
    char cwd[4096];
    printf("getcwd %d\n", getcwd(cwd, sizeof cwd) != NULL && cwd[0] == '/');
    struct utsname u;
    printf("uname %d %s\n", uname(&u), u.sysname);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("clock monotonic %d\n", t1.tv_sec > t0.tv_sec ||
                                       (t1.tv_sec == t0.tv_sec && t1.tv_nsec >= t0.tv_nsec));
    unsigned char r[32];
    printf("getrandom %zd\n", getrandom(r, sizeof r, 0));
    /* musl's sbrk only reads the break: move it with the system call. */
    char *p0 = (char *)syscall(SYS_brk, 0);
    char *p1 = (char *)syscall(SYS_brk, p0 + (1 << 20));
    memset(p0, 1, 1 << 20);
    printf("brk grew %d\n", p1 == p0 + (1 << 20));
    printf("bad open %d\n", open("/nonexistent/tierscope", O_RDONLY));
    return 0;
}
