/* bench/mkfiles: the write-paths benchmark's small-file creator.
 *
 *   mkfiles DIR FILES DIRS SIZE
 *
 * Makes DIRS directories DIR/dNN and FILES files spread over them round robin
 * (DIR/dNN/fNNNNNN), each open(O_CREAT|O_EXCL), SIZE bytes written in one write(2) (0:
 * none), closed: what an unpacker or a mail spool does, one file at a time. No fsync: the
 * caller makes it durable (umount) inside its timing. Prints "files seconds".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "mkfiles DIR FILES DIRS SIZE\n");
        return 2;
    }
    const char *dir = argv[1];
    long files = atol(argv[2]), dirs = atol(argv[3]), size = atol(argv[4]);
    if (files < 0 || dirs < 1 || size < 0 || size > 1 << 20) return 2;
    char *buf = calloc(1, size ? size : 1);
    char path[4096];
    if (!buf) return 2;
    memset(buf, 'x', size);
    double t0 = now();
    for (long d = 0; d < dirs; d++) {
        snprintf(path, sizeof path, "%s/d%02ld", dir, d);
        if (mkdir(path, 0755)) {
            fprintf(stderr, "mkfiles: mkdir %s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    for (long i = 0; i < files; i++) {
        snprintf(path, sizeof path, "%s/d%02ld/f%06ld", dir, i % dirs, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0 || (size && write(fd, buf, size) != size) || close(fd)) {
            fprintf(stderr, "mkfiles: %s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    printf("%ld %.3f\n", files, now() - t0);
    return 0;
}
