/* bench/reader: the read-paths benchmark's reader (fs_test-style).
 *
 *   reader PATH BS seq|rand THREADS SECONDS [pread|mmap]
 *
 * THREADS threads each open PATH and read BS-byte blocks until SECONDS have passed since
 * they all started (checked every 64 reads and at least every 16 MiB): sequential threads
 * each read their own slice of the file in order (wrapping around), random ones pick
 * BS-aligned offsets over the whole file (xorshift). Prints MB/s (MiB/s): all bytes read
 * over the wall time from the first thread's start to the last one's end (each thread
 * takes its own times, so a busy machine delaying the main thread cannot shorten it).
 * Reading for a fixed time, not a fixed amount, keeps fast cases from being a few
 * milliseconds dominated by thread start-up, and slow ones (FUSE direct I/O) short.
 * SECONDS 0 with seq: each thread reads its slice once (a warm-up pass over the file).
 *
 * pread (default): pread(2) into the thread's buffer, the call under test.
 * mmap: no file system at all, the ceiling of any user-space read path: the file is mapped
 * (MADV_HUGEPAGE, placed 2 MiB-aligned) and each block is memcpy'd out of the mapping,
 * the way usfs run copies (prefetching every line of blocks up to 8 KiB first; 64 KiB
 * steps). A pread of data in the page cache cannot deliver bytes faster than this copy.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *path;
static size_t bs;
static int rnd, use_mmap;
static int nthreads;
static double seconds;
static uint64_t fsize;
static const char *map;
static pthread_barrier_t start;
static double t_start[64], t_end[64];
static uint64_t t_bytes[64];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* usfs's copy out of a mapping (crates/vfs/src/data/copy.rs). */
static void copy_out(char *dst, const char *src, size_t n) {
    if (n <= 8192)
        for (size_t o = 0; o < n; o += 64) __builtin_prefetch(src + o, 0, 3);
    for (size_t o = 0; o < n; o += 65536) memcpy(dst + o, src + o, n - o < 65536 ? n - o : 65536);
}

static void *worker(void *arg) {
    long t = (long)arg;
    int fd = -1;
    if (!use_mmap) {
        fd = open(path, O_RDONLY);
        if (fd < 0) { perror("open"); exit(1); }
    }
    char *buf = malloc(bs);
    if (!buf) exit(1);
    uint64_t blocks = fsize / bs, slice = blocks / nthreads, x = 0x9E3779B97F4A7C15ull * (t + 1);
    uint64_t first = slice * t, i = 0, done = 0, n_reads = 0;
    uint64_t check_every = bs >= (16 << 20) / 64 ? (16 << 20) / bs : 64;
    if (check_every == 0) check_every = 1;
    pthread_barrier_wait(&start);
    double t0 = now(), deadline = t0 + seconds;
    t_start[t] = t0;
    for (;;) {
        uint64_t b;
        if (seconds <= 0 && (rnd || i >= slice)) break; /* SECONDS 0: one sequential pass */
        if (rnd) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; b = x % blocks; }
        else { b = first + (i++ % (slice ? slice : 1)); }
        if (use_mmap) {
            copy_out(buf, map + b * bs, bs);
        } else {
            ssize_t n = pread(fd, buf, bs, (off_t)(b * bs));
            if (n != (ssize_t)bs) { fprintf(stderr, "short read %zd\n", n); exit(1); }
        }
        done += bs;
        if (++n_reads % check_every == 0 && seconds > 0 && now() >= deadline) break;
    }
    t_end[t] = now();
    t_bytes[t] = done;
    if (fd >= 0) close(fd);
    free(buf);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "reader PATH BS seq|rand THREADS SECONDS [pread|mmap]\n");
        return 2;
    }
    path = argv[1]; bs = strtoull(argv[2], 0, 10); rnd = !strcmp(argv[3], "rand");
    nthreads = atoi(argv[4]);
    seconds = strtod(argv[5], 0);
    use_mmap = argc == 7 && !strcmp(argv[6], "mmap");
    struct stat st;
    if (stat(path, &st)) { perror("stat"); return 1; }
    fsize = st.st_size;
    if (nthreads < 1 || nthreads > 64 || bs == 0 || fsize < bs) return 2;
    if (use_mmap) {
        int fd = open(path, O_RDONLY);
        if (fd < 0) { perror("open"); return 1; }
        size_t huge = 2 << 20, len = (fsize + 4095) & ~(size_t)4095;
        char *res = mmap(0, len + huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (res == MAP_FAILED) { perror("mmap"); return 1; }
        char *at = (char *)(((uintptr_t)res + huge - 1) & ~(uintptr_t)(huge - 1));
        map = mmap(at, len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
        if (map == MAP_FAILED) { perror("mmap"); return 1; }
        madvise((void *)map, len, MADV_HUGEPAGE);
        close(fd);
    }
    pthread_t th[64];
    pthread_barrier_init(&start, NULL, nthreads);
    for (long t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    double a = t_start[0], b = t_end[0];
    uint64_t bytes = 0;
    for (int t = 0; t < nthreads; t++) {
        if (t_start[t] < a) a = t_start[t];
        if (t_end[t] > b) b = t_end[t];
        bytes += t_bytes[t];
    }
    printf("%.1f\n", (double)bytes / (b - a) / 1048576.0);
    return 0;
}
