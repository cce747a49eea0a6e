/* Tries to reach host files a confined program must not reach (docs/models/PROGRAMS.md,
 * confinement), one attempt per line: "NAME blocked" or "NAME REACHED". Exits 0 when every
 * attempt was blocked, 1 otherwise. The test that runs it prepares, in the working
 * directory, `link-abs` (a symbolic link to an absolute host path outside it) and
 * `link-rel` (a relative one climbing out of it), and beside the directory a file
 * `victim` that must keep its contents. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int reached = 0;

static void try_open(const char *name, const char *path, int flags) {
    int fd = open(path, flags, 0644);
    if (fd >= 0) {
        reached = 1;
        printf("%s REACHED\n", name);
        close(fd);
    } else {
        printf("%s blocked\n", name);
    }
}

int main(void) {
    try_open("create-in-etc", "/etc/tierscope-escape", O_CREAT | O_WRONLY);
    try_open("read-shadow", "/etc/shadow", O_RDONLY);
    try_open("read-passwd", "/etc/passwd", O_RDONLY);
    try_open("dotdot", "../victim", O_RDONLY);
    try_open("dotdot-truncate", "../victim", O_WRONLY | O_TRUNC);
    try_open("deep-dotdot", "../../../../../../../../etc/passwd", O_RDONLY);
    try_open("symlink-absolute", "link-abs", O_RDONLY);
    try_open("symlink-relative", "link-rel", O_WRONLY | O_TRUNC);
    try_open("proc-environ", "/proc/self/environ", O_RDONLY);
    try_open("dev-null", "/dev/null", O_RDONLY);
    try_open("sys", "/sys/kernel/mm", O_RDONLY);
    /* The host process's own memory: open + pwrite was one step from running code. */
    int fd = open("/proc/self/mem", O_RDWR);
    if (fd >= 0) {
        const char junk[8] = "XXXXXXX";
        long r = pwrite(fd, junk, sizeof junk, 0x400000);
        reached = 1;
        printf("proc-mem REACHED (pwrite %ld)\n", r);
    } else {
        printf("proc-mem blocked\n");
    }
    /* Its own working directory stays usable: a file it creates there reads back. */
    FILE *f = fopen("/made-here", "w");
    if (!f || fputs("ok\n", f) < 0 || fclose(f) != 0) {
        printf("own-file FAILED\n");
        return 1;
    }
    printf("own-file ok\n");
    return reached;
}
