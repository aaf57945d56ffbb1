/*
 * gpufeed-shard-index-cost: what indexing WebDataset-style tar shards costs.
 *
 *   gpufeed-shard-index-cost [-s SHARDS] [-m SAMPLES_PER_SHARD] [-r REPEATS] [-k]
 *
 * Writes SHARDS (default 1000) shards train-000000.tar ... of
 * SAMPLES_PER_SHARD (default 1000) samples each into a fresh directory in
 * $TMPDIR. A sample is "%09d.jpg" (1 byte) + "%09d.cls" (the label, 1..3
 * digits): four 512-byte blocks, so 1,000 x 1,000 samples take 2 GB. Then
 * times gf__dataset_open on "DIR/train-{000000..NNNNNN}.tar" (best of
 * REPEATS, default 3; the shards are in the page cache, just written) and
 * prints the seconds, the index's heap bytes per sample (ds->bytes / n) and
 * the peak RSS. The directory is removed afterwards unless -k.
 *
 * INTERNAL: includes the library's private headers (src/dataset.h) and
 * links gpufeed_core; it moves with them.
 */
#include "dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static void header(uint8_t *h, const char *name, size_t size)
{
    memset(h, 0, 512);
    snprintf((char *)h, 100, "%s", name);
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    snprintf((char *)h + 124, 12, "%011zo", size);
    memcpy(h + 136, "14000000000", 12);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

static int write_shard(const char *path, long first, long m, uint8_t *buf)
{
    uint8_t *p = buf;
    for (long i = first; i < first + m; i++) {
        char name[32], cls[16];
        snprintf(name, sizeof name, "%09ld.jpg", i);
        header(p, name, 1);
        memset(p + 512, 0, 512);
        p[512] = 0xff;
        p += 1024;
        int cl = snprintf(cls, sizeof cls, "%ld", i % 1000);
        snprintf(name, sizeof name, "%09ld.cls", i);
        header(p, name, (size_t)cl);
        memset(p + 512, 0, 512);
        memcpy(p + 512, cls, (size_t)cl);
        p += 1024;
    }
    memset(p, 0, 1024);
    p += 1024;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t n = (size_t)(p - buf), done = 0;
    while (done < n) {
        ssize_t w = write(fd, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    return close(fd);
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

int main(int argc, char **argv)
{
    long shards = 1000, per = 1000;
    int repeats = 3, keep = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
            shards = atol(argv[++i]);
        else if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
            per = atol(argv[++i]);
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (strcmp(argv[i], "-k") == 0)
            keep = 1;
        else {
            fprintf(stderr, "usage: %s [-s SHARDS] [-m SAMPLES_PER_SHARD] [-r REPEATS] [-k]\n",
                    argv[0]);
            return 2;
        }
    }
    if (shards < 1 || shards > 999999 || per < 1 || repeats < 1) {
        fprintf(stderr, "SHARDS (1..999999), SAMPLES_PER_SHARD and REPEATS must be positive\n");
        return 2;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/gpufeed-shard-index-cost-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return 1;
    }
    uint8_t *buf = malloc((size_t)per * 2048 + 1024);
    if (!buf)
        return 1;
    double t0 = gf__now();
    char path[4200];
    for (long s = 0; s < shards; s++) {
        snprintf(path, sizeof path, "%s/train-%06ld.tar", dir, s);
        if (write_shard(path, s * per, per, buf) != 0) {
            fprintf(stderr, "%s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    free(buf);
    double wrote = gf__now() - t0;
    printf("wrote       %ld shards x %ld samples (%.2f GB) in %.1f s to %s\n", shards, per,
           (double)shards * ((double)per * 2048 + 1024) / 1e9, wrote, dir);

    char src[4300];
    snprintf(src, sizeof src, "%s/train-{000000..%06ld}.tar", dir, shards - 1);
    long rss_before = peak_rss_kib();
    double best = 1e30;
    gf__dataset ds;
    char why[512];
    int rc = 0;
    for (int r = 0; r < repeats; r++) {
        double a = gf__now();
        rc = gf__dataset_open(&ds, src, why, sizeof why);
        double dt = gf__now() - a;
        if (rc < 0) {
            fprintf(stderr, "%s: %s\n", gf_err_name(rc), why);
            break;
        }
        if (dt < best)
            best = dt;
        if (r + 1 < repeats)
            gf__dataset_close(&ds);
    }
    if (rc == 0) {
        size_t path_bytes = 0;
        for (uint64_t i = 0; i < ds.n; i++)
            path_bytes += strlen(gf__dataset_path(&ds, i)) + 1;
        printf("source      %s\n", src);
        printf("samples     %llu (%d classes; skipped: %llu members, %llu keys)\n",
               (unsigned long long)ds.n, ds.n_classes, (unsigned long long)ds.skipped_members,
               (unsigned long long)ds.skipped_keys);
        printf("open        %.3f s best of %d (%.0f ns/sample)\n", best, repeats,
               best * 1e9 / (double)ds.n);
        printf("heap        %zu bytes = %.1f bytes/sample (display names %.1f, tables %.1f, "
               "shard paths %.2f)\n",
               ds.bytes, (double)ds.bytes / (double)ds.n, (double)path_bytes / (double)ds.n,
               28.0, (double)(ds.bytes - path_bytes - 28 * ds.n) / (double)ds.n);
        printf("peak RSS    %.1f MiB (%.1f MiB before indexing)\n", peak_rss_kib() / 1024.0,
               rss_before / 1024.0);
        gf__dataset_close(&ds);
    }
    if (!keep) {
        for (long s = 0; s < shards; s++) {
            snprintf(path, sizeof path, "%s/train-%06ld.tar", dir, s);
            unlink(path);
        }
        rmdir(dir);
    }
    return rc == 0 ? 0 : 1;
}
