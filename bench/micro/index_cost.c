/*
 * gpufeed-index-cost: what indexing a big data set costs.
 *
 *   gpufeed-index-cost [LIST_OR_DIR] [-n LINES] [-r REPEATS] [-s]
 *
 * Without a source it writes a list file of LINES (default 1,000,000)
 * ImageNet-like lines ("train/n01440764/n01440764_00001234.JPEG 417",
 * 39-byte paths; with -s "train/cls0417/im_00001234.jpeg 417", 30 bytes)
 * in $TMPDIR, then times gf__dataset_open on it (best of
 * REPEATS, default 3) and prints the seconds, the index's heap bytes per
 * sample (ds->bytes / n) and the process's peak RSS. The file is removed
 * afterwards. The files named in the list need not exist: only the index
 * is built.
 *
 * INTERNAL: includes the library's private headers (src/dataset.h) and
 * links gpufeed_core; it moves with them.
 */
#include "dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static int write_list(const char *path, long lines, int short_paths)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    for (long i = 0; i < lines; i++) {
        int cls = (int)(i % 1000);
        if (short_paths)
            fprintf(f, "train/cls%04d/im_%08ld.jpeg %d\n", cls, i, cls);
        else
            fprintf(f, "train/n%08d/n%08d_%08ld.JPEG %d\n", 1440764 + cls, 1440764 + cls, i,
                    cls);
    }
    return fclose(f);
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

int main(int argc, char **argv)
{
    const char *src = NULL;
    long lines = 1000000;
    int repeats = 3, short_paths = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            lines = atol(argv[++i]);
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (strcmp(argv[i], "-s") == 0)
            short_paths = 1;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [LIST_OR_DIR] [-n LINES] [-r REPEATS] [-s]\n", argv[0]);
            return 2;
        } else
            src = argv[i];
    }
    if (lines < 1 || repeats < 1) {
        fprintf(stderr, "LINES and REPEATS must be positive\n");
        return 2;
    }
    char tmp[4096] = "";
    if (!src) {
        const char *dir = getenv("TMPDIR");
        snprintf(tmp, sizeof tmp, "%s/gpufeed-index-cost-%ld.txt", dir && *dir ? dir : "/tmp",
                 (long)getpid());
        double t0 = gf__now();
        if (write_list(tmp, lines, short_paths) != 0) {
            fprintf(stderr, "%s: %s\n", tmp, strerror(errno));
            return 1;
        }
        printf("wrote %s: %ld lines in %.3f s\n", tmp, lines, gf__now() - t0);
        src = tmp;
    }
    long rss_before = peak_rss_kib();
    double best = 1e30;
    gf__dataset ds;
    char why[512];
    for (int r = 0; r < repeats; r++) {
        double t0 = gf__now();
        int rc = gf__dataset_open(&ds, src, why, sizeof why);
        double dt = gf__now() - t0;
        if (rc < 0) {
            fprintf(stderr, "%s: %s\n", gf_err_name(rc), why);
            if (*tmp)
                unlink(tmp);
            return 1;
        }
        if (dt < best)
            best = dt;
        if (r + 1 < repeats)
            gf__dataset_close(&ds);
    }
    size_t path_bytes = 0;
    for (uint64_t i = 0; i < ds.n; i++)
        path_bytes += strlen(gf__dataset_path(&ds, i));
    printf("source      %s\n", src);
    printf("samples     %llu (%d classes, mean path %.1f bytes)\n", (unsigned long long)ds.n,
           ds.n_classes, (double)path_bytes / (double)ds.n);
    printf("open        %.3f s best of %d (%.0f ns/sample)\n", best, repeats,
           best * 1e9 / (double)ds.n);
    printf("heap        %zu bytes = %.1f bytes/sample\n", ds.bytes,
           (double)ds.bytes / (double)ds.n);
    printf("peak RSS    %.1f MiB (%.1f MiB before indexing)\n", peak_rss_kib() / 1024.0,
           rss_before / 1024.0);
    gf__dataset_close(&ds);
    if (*tmp)
        unlink(tmp);
    return 0;
}
