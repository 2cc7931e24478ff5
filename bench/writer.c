/* bench/writer: the write-paths benchmark's writer.
 *
 *   writer DIR NAME MODE BS THREADS BYTES SECONDS FSYNC
 *
 * THREADS threads each write BS-byte blocks of one own file DIR/NAME.<t> (BYTES / THREADS
 * bytes of it) with pwrite(2), until they have written their share or SECONDS have passed
 * (SECONDS 0: no time limit), then fsync(2) the file; FSYNC 1 also fsyncs after every
 * write. MODE:
 *   append    O_APPEND writes to a new file (sequential, every write allocates)
 *   fill      a new file written at random block offsets, each block once (a seeded
 *             permutation: allocating writes into holes)
 *   over-seq  overwrite an existing file front to back (wrapping around)
 *   over-rand overwrite an existing file at random block offsets, each block once per
 *             pass (a seeded permutation)
 *   prep      make the files of over-*: sequential 1 MiB writes of the whole share, fsync
 *             (not a measurement: prints nothing)
 * The data is random (xorshift), different in every block, so no layer can dedupe or
 * compress it. Prints "MB/s bytes seconds": all bytes written over the wall time from the
 * first thread's start to the last one's end, and the end is after the final fsync: the
 * time to make the data durable is in the figure, never page-cache-only speed. Each thread
 * takes its own times (a busy machine delaying the main thread cannot shorten the
 * interval). The files are left in place; the caller removes them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *dir, *name, *mode;
static size_t bs;
static int nthreads, fsync_each;
static uint64_t total;
static double seconds;
static pthread_barrier_t start;
static double t_start[64], t_end[64];
static uint64_t t_bytes[64];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t xorshift(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void die(const char *what, const char *path) {
    fprintf(stderr, "writer: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static void *worker(void *arg) {
    long t = (long)arg;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%ld", dir, name, t);
    int prep = !strcmp(mode, "prep"), append = !strcmp(mode, "append");
    int rnd = !strcmp(mode, "fill") || !strcmp(mode, "over-rand");
    int over = !strncmp(mode, "over", 4);
    size_t wbs = prep ? 1 << 20 : bs;
    uint64_t share = total / nthreads / wbs * wbs, blocks = share / wbs;
    int flags = O_WRONLY | (over ? 0 : O_CREAT | O_TRUNC) | (append ? O_APPEND : 0);
    int fd = open(path, flags, 0644);
    if (fd < 0) die("open", path);
    char *buf = malloc(wbs);
    if (!buf || blocks == 0) exit(2);
    uint64_t x = 0x9E3779B97F4A7C15ull * (t + 1);
    for (size_t i = 0; i + 8 <= wbs; i += 8) {
        uint64_t v = xorshift(&x);
        memcpy(buf + i, &v, 8);
    }
    uint64_t *perm = NULL;
    if (rnd) { /* a seeded permutation of the blocks: each written once per pass */
        perm = malloc(blocks * sizeof *perm);
        if (!perm) exit(2);
        for (uint64_t i = 0; i < blocks; i++) perm[i] = i;
        for (uint64_t i = blocks - 1; i > 0; i--) {
            uint64_t j = xorshift(&x) % (i + 1), s = perm[i];
            perm[i] = perm[j];
            perm[j] = s;
        }
    }
    pthread_barrier_wait(&start);
    double t0 = now(), deadline = t0 + seconds;
    uint64_t done = 0, i;
    for (i = 0; i < blocks; i++) {
        uint64_t b = rnd ? perm[i] : i;
        memcpy(buf, &i, sizeof i); /* every block differs */
        ssize_t n = append ? write(fd, buf, wbs) : pwrite(fd, buf, wbs, (off_t)(b * wbs));
        if (n != (ssize_t)wbs) die("write", path);
        done += wbs;
        if (fsync_each && fsync(fd)) die("fsync", path);
        if (!prep && seconds > 0 && now() >= deadline) break;
    }
    if (fsync(fd)) die("fsync", path);
    if (close(fd)) die("close", path);
    t_start[t] = t0;
    t_end[t] = now();
    t_bytes[t] = done;
    free(buf);
    free(perm);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "writer DIR NAME append|fill|over-seq|over-rand|prep BS THREADS BYTES SECONDS FSYNC\n");
        return 2;
    }
    dir = argv[1];
    name = argv[2];
    mode = argv[3];
    bs = strtoull(argv[4], 0, 10);
    nthreads = atoi(argv[5]);
    total = strtoull(argv[6], 0, 10);
    seconds = strtod(argv[7], 0);
    fsync_each = atoi(argv[8]);
    if (nthreads < 1 || nthreads > 64 || bs == 0 || total < bs * nthreads) return 2;
    if (strcmp(mode, "append") && strcmp(mode, "fill") && strcmp(mode, "over-seq") &&
        strcmp(mode, "over-rand") && strcmp(mode, "prep"))
        return 2;
    pthread_t th[64];
    pthread_barrier_init(&start, NULL, nthreads);
    for (long t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    if (!strcmp(mode, "prep")) return 0;
    double a = t_start[0], b = t_end[0];
    uint64_t bytes = 0;
    for (int t = 0; t < nthreads; t++) {
        if (t_start[t] < a) a = t_start[t];
        if (t_end[t] > b) b = t_end[t];
        bytes += t_bytes[t];
    }
    printf("%.3f %llu %.3f\n", (double)bytes / (b - a) / 1048576.0, (unsigned long long)bytes, b - a);
    return 0;
}
