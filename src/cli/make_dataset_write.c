/*
 * make-dataset's writers (make_dataset.h): JPEG/PNG/WebP encoding, the worker
 * pool (each worker renders, encodes and writes whole images), the
 * ImageFolder writer and the tar-shard writer with its seeded order. The
 * command's thread runs md_make, which starts and joins the workers.
 *
 * Archives are byte-for-byte deterministic, as the folder's files are: a
 * worker renders and encodes position p in parallel with the others, then
 * waits for its turn (position p - 1 written) to append; positions are
 * handed out in increasing order, so the lowest unwritten one never waits
 * and the wait is bounded by the thread count. A shard is opened when its
 * first sample is appended and finished when its last is, so only the few
 * shards being written are open at a time (N may be far above the
 * descriptor limit).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../mix.h" /* header-only: gf__mix64 */
#include "cli.h"
#include "make_dataset.h"
#include "sysinfo.h"
#include "tar_write.h"

#if GF_CLI_HAVE_TJ
#include <turbojpeg.h>
#endif
#if GF_CLI_HAVE_WEBP
#include <webp/encode.h>
#endif

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/* Member mtime: fixed (2023-11-14), so the archives are a function of the
 * options alone. */
#define TAR_MTIME 1700000000ull

/* A seeded permutation of [0, n) without a table (n may be 1e9): a
 * 4-round Feistel network on the smallest even number of bits that covers
 * n, cycle-walked back into range (fewer than 4 steps on average). */
typedef struct perm {
    uint64_t n, mask, key[4];
    int half;
} perm;

static void perm_init(perm *pm, uint64_t n, uint64_t seed)
{
    int bits = 2;
    while (bits < 64 && (1ull << bits) < n)
        bits += 2;
    pm->n = n;
    pm->half = bits / 2;
    pm->mask = (1ull << pm->half) - 1;
    for (int r = 0; r < 4; r++)
        pm->key[r] = gf__mix64(seed ^ gf__mix64(0x5348415244ull + (uint64_t)r)); /* "SHARD" */
}

static uint64_t perm_at(const perm *pm, uint64_t x)
{
    do {
        uint64_t l = x >> pm->half, r = x & pm->mask;
        for (int k = 0; k < 4; k++) {
            uint64_t t = l ^ (gf__mix64(r ^ pm->key[k]) & pm->mask);
            l = r;
            r = t;
        }
        x = (l << pm->half) | r;
    } while (x >= pm->n);
    return x;
}

/* ---- encoding and the worker pool --------------------------------------- */

const char *md_format_ext(int f)
{
    return f == FMT_JPG ? "jpg" : f == FMT_PNG ? "png" : "webp";
}

typedef struct membuf {
    uint8_t *p;
    size_t n, cap;
    int oom;
} membuf;

static void membuf_write(void *ctx, void *data, int size)
{
    membuf *m = ctx;
    if (m->oom || size <= 0)
        return;
    if (m->n + (size_t)size > m->cap) {
        size_t cap = m->cap ? m->cap : 65536;
        while (cap < m->n + (size_t)size)
            cap *= 2;
        uint8_t *p = realloc(m->p, cap);
        if (!p) {
            m->oom = 1;
            return;
        }
        m->p = p;
        m->cap = cap;
    }
    memcpy(m->p + m->n, data, (size_t)size);
    m->n += (size_t)size;
}

/* One archive: open from its first sample's append to its last's. Only the
 * worker whose position is the pool's `written` touches it, so the file
 * needs no lock of its own. */
typedef struct shard_out {
    FILE *f;
} shard_out;

typedef struct pool {
    const md_opts *o;
    int class_width;
    atomic_long next;
    atomic_int stop;
    pthread_mutex_t mu;
    pthread_cond_t turn; /* shards: `written` moved on */
    char err[4608];
    uint64_t bytes, images;
    shard_out *shards;   /* o->shards of them, or NULL */
    long total;          /* images */
    long written;        /* shards: positions appended (under mu) */
    perm order;          /* shards: position -> sample */
} pool;

static void pool_fail(pool *p, const char *fmt, const char *a, const char *b)
{
    pthread_mutex_lock(&p->mu);
    if (!p->err[0])
        snprintf(p->err, sizeof p->err, fmt, a, b);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->turn); /* waiters for a shard's turn give up */
    pthread_mutex_unlock(&p->mu);
}

/* Shard k holds positions [shard_first(k), shard_first(k + 1)). */
static long shard_first(const pool *p, long k)
{
    return (long)((uint64_t)k * (uint64_t)p->total / (uint64_t)p->o->shards);
}

static long shard_of(const pool *p, long pos)
{
    long k = (long)((uint64_t)pos * (uint64_t)p->o->shards / (uint64_t)p->total);
    while (k + 1 < p->o->shards && shard_first(p, k + 1) <= pos)
        k++;
    while (k > 0 && shard_first(p, k) > pos)
        k--;
    return k;
}

static void shard_path(const pool *p, long k, char *buf, size_t n)
{
    snprintf(buf, n, "%s/train-%06ld.tar", p->o->dir, k);
}

/* Appends sample (c, i) at position pos, once position pos - 1 is written:
 * opens its shard at the shard's first position, ends the archive (two
 * zero blocks) and closes it at its last. Returns 0, or -1 with the pool
 * failed. */
static int shard_append(pool *p, long pos, int c, int i, const void *data, size_t len)
{
    static const uint8_t end[1024];
    const md_opts *o = p->o;
    long k = shard_of(p, pos);
    shard_out *so = &p->shards[k];
    char key[64], name[80], cls[16], path[4096];
    snprintf(key, sizeof key, "class_%0*d_img_%05d", p->class_width, c, i);
    shard_path(p, k, path, sizeof path);

    pthread_mutex_lock(&p->mu);
    while (p->written != pos && !atomic_load(&p->stop))
        pthread_cond_wait(&p->turn, &p->mu);
    pthread_mutex_unlock(&p->mu);
    if (atomic_load(&p->stop))
        return -1;

    /* Our turn: nobody else touches the shards until `written` moves on. */
    errno = 0;
    if (pos == shard_first(p, k)) {
        /* "x": never replace a file, even one that appeared after the
         * empty-directory check, unless --force. */
        if ((so->f = fopen(path, o->force ? "wb" : "wbx")) == NULL) {
            pool_fail(p, "%s: %s", path, strerror(errno));
            return -1;
        }
        setvbuf(so->f, NULL, _IOFBF, 1 << 20);
    }
    snprintf(name, sizeof name, "%s.%s", key, md_format_ext(o->format));
    int rc = tar_write_member(so->f, name, data, len, TAR_MTIME);
    if (rc == 0) {
        int n = snprintf(cls, sizeof cls, "%d", c);
        snprintf(name, sizeof name, "%s.cls", key);
        rc = tar_write_member(so->f, name, cls, (size_t)n, TAR_MTIME);
    }
    if (rc == 0 && pos + 1 == shard_first(p, k + 1)) {
        if (fwrite(end, 1, sizeof end, so->f) != sizeof end)
            rc = -(errno ? errno : EIO);
        if (fclose(so->f) != 0 && rc == 0)
            rc = -(errno ? errno : EIO);
        so->f = NULL;
    }
    if (rc < 0) {
        pool_fail(p, "%s: %s", path, strerror(-rc));
        return -1;
    }
    pthread_mutex_lock(&p->mu);
    p->written = pos + 1;
    pthread_cond_broadcast(&p->turn);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

static int write_all(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    if (fwrite(data, 1, len, f) != len) {
        int e = errno ? errno : EIO;
        fclose(f);
        return -e;
    }
    if (fclose(f) != 0)
        return -errno;
    return 0;
}

static void *worker(void *arg)
{
    pool *p = arg;
    const md_opts *o = p->o;
    md_scratch sc;
    membuf mb = {0};
    uint64_t bytes = 0, images = 0;
    const long total = (long)o->classes * (long)o->per_class;
    char path[4096];
#if GF_CLI_HAVE_TJ
    tjhandle tj = NULL;
    unsigned char *jbuf = NULL;
    unsigned long jcap = 0;
#endif

    if (md_scratch_init(&sc, o->width, o->height) < 0) {
        pool_fail(p, "%s%s", "out of memory", "");
        goto out;
    }
#if GF_CLI_HAVE_TJ
    if (o->format == FMT_JPG) {
        tj = tjInitCompress();
        jcap = tjBufSize(o->width, o->height, TJSAMP_420);
        jbuf = tj ? tjAlloc((int)jcap) : NULL;
        if (!tj || !jbuf) {
            pool_fail(p, "turbojpeg: %s%s", tj ? "out of memory" : tjGetErrorStr(), "");
            goto out;
        }
    }
#endif

    while (!atomic_load(&p->stop)) {
        long j = atomic_fetch_add(&p->next, 1);
        if (j >= total)
            break;
        long pos = j; /* shards: the position; the sample is the permutation's */
        if (o->shards)
            j = (long)perm_at(&p->order, (uint64_t)pos);
        int c = (int)(j / o->per_class), i = (int)(j % o->per_class);
        const void *data = NULL;
        size_t len = 0;
        int rc;

        md_render(o, c, i, &sc);
        if (o->shards)
            snprintf(path, sizeof path, "%s/train-%06ld.tar:class_%0*d_img_%05d.%s", o->dir,
                     shard_of(p, pos), p->class_width, c, i,
                     md_format_ext(o->format));
        else
            snprintf(path, sizeof path, "%s/class_%0*d/img_%05d.%s", o->dir, p->class_width,
                     c, i, md_format_ext(o->format));
        mb.n = 0;
        if (o->format == FMT_JPG) {
#if GF_CLI_HAVE_TJ
            unsigned long jsize = jcap;
            if (tjCompress2(tj, sc.rgb, o->width, 0, o->height, TJPF_RGB, &jbuf, &jsize,
                            TJSAMP_420, o->quality, TJFLAG_NOREALLOC) != 0) {
                pool_fail(p, "%s: turbojpeg: %s", path, tjGetErrorStr2(tj));
                break;
            }
            data = jbuf;
            len = jsize;
#else
            if (!stbi_write_jpg_to_func(membuf_write, &mb, o->width, o->height, 3, sc.rgb,
                                        o->quality) || mb.oom) {
                pool_fail(p, "%s: %s", path, "JPEG encoding failed");
                break;
            }
            data = mb.p;
            len = mb.n;
#endif
        } else if (o->format == FMT_WEBP || o->format == FMT_WEBP_LOSSLESS) {
#if GF_CLI_HAVE_WEBP
            /* libwebp allocates its output: copied into the worker's buffer */
            uint8_t *webp = NULL;
            len = o->format == FMT_WEBP
                      ? WebPEncodeRGB(sc.rgb, o->width, o->height, o->width * 3,
                                      (float)o->quality, &webp)
                      : WebPEncodeLosslessRGB(sc.rgb, o->width, o->height, o->width * 3, &webp);
            if (len > 0 && len <= INT32_MAX)
                membuf_write(&mb, webp, (int)len);
            WebPFree(webp);
            if (len == 0 || mb.n != len) {
                pool_fail(p, "%s: %s", path, "WebP encoding failed");
                break;
            }
            data = mb.p;
            len = mb.n;
#else
            pool_fail(p, "%s: %s", path, "this build has no WebP encoder"); /* refused earlier */
            break;
#endif
        } else {
            if (!stbi_write_png_to_func(membuf_write, &mb, o->width, o->height, 3, sc.rgb,
                                        o->width * 3) || mb.oom) {
                pool_fail(p, "%s: %s", path, "PNG encoding failed");
                break;
            }
            data = mb.p;
            len = mb.n;
        }
        if (o->shards) {
            if (shard_append(p, pos, c, i, data, len) < 0)
                break;
        } else if ((rc = write_all(path, data, len)) < 0) {
            pool_fail(p, "%s: %s", path, strerror(-rc));
            break;
        }
        bytes += len;
        images++;
    }
out:
    pthread_mutex_lock(&p->mu);
    p->bytes += bytes;
    p->images += images;
    pthread_mutex_unlock(&p->mu);
#if GF_CLI_HAVE_TJ
    if (jbuf)
        tjFree(jbuf);
    if (tj)
        tjDestroy(tj);
#endif
    free(mb.p);
    md_scratch_free(&sc);
    return NULL;
}

/* 1 if dir exists and has entries, 0 if empty or missing, -errno on error. */
static int dir_nonempty(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            found = 1;
            break;
        }
    closedir(d);
    return found;
}

/* The shard table (files are opened as they are reached). Returns 0, or
 * -1 with the message printed. */
static int open_shards(const char *cmd, const md_opts *o, pool *p)
{
    int rc = cli_mkdir_p(o->dir);
    if (rc < 0) {
        cli_error(cmd, "%s: %s", o->dir, strerror(-rc));
        return -1;
    }
    p->shards = calloc((size_t)o->shards, sizeof *p->shards);
    if (!p->shards) {
        cli_error(cmd, "out of memory");
        return -1;
    }
    return 0;
}

/* Closes what a failed run left open (a finished shard is closed by its
 * last append) and frees the table. */
static void close_shards(pool *p)
{
    if (!p->shards)
        return;
    for (int k = 0; k < p->o->shards; k++)
        if (p->shards[k].f)
            fclose(p->shards[k].f);
    free(p->shards);
    p->shards = NULL;
}

int md_make(const char *cmd, const md_opts *o, int quiet)
{
    int rc;

    rc = dir_nonempty(o->dir);
    if (rc < 0) {
        cli_error(cmd, "%s: %s", o->dir, strerror(-rc));
        return -1;
    }
    if (rc > 0 && !o->force) {
        cli_error(cmd, "%s is not empty (use --force to write into it)", o->dir);
        return -1;
    }

    pool p = {.o = o};
    p.class_width = 2;
    for (int k = o->classes - 1; k >= 100; k /= 10)
        p.class_width++;
    long total = (long)o->classes * (long)o->per_class;
    char path[4096];
    p.total = total;
    if (o->shards) {
        if ((rc = open_shards(cmd, o, &p)) < 0)
            return -1;
        perm_init(&p.order, (uint64_t)total, o->seed);
    }
    for (int c = 0; c < o->classes && !o->shards; c++) {
        snprintf(path, sizeof path, "%s/class_%0*d", o->dir, p.class_width, c);
        if ((rc = cli_mkdir_p(path)) < 0) {
            cli_error(cmd, "%s: %s", path, strerror(-rc));
            return -1;
        }
    }

    int nt = o->threads ? o->threads : cli_cores();
    if (nt > total)
        nt = (int)total;
    pthread_t *tids = calloc((size_t)nt, sizeof *tids);
    if (!tids) {
        cli_error(cmd, "out of memory");
        close_shards(&p);
        return -1;
    }
    atomic_init(&p.next, 0);
    atomic_init(&p.stop, 0);
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.turn, NULL);

    double t0 = cli_now();
    int started = 0;
    for (; started < nt; started++)
        if (pthread_create(&tids[started], NULL, worker, &p) != 0)
            break;
    if (started == 0) {
        cli_error(cmd, "could not start a thread");
        free(tids);
        pthread_cond_destroy(&p.turn);
        pthread_mutex_destroy(&p.mu);
        close_shards(&p);
        return -1;
    }
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    free(tids);
    pthread_cond_destroy(&p.turn);
    pthread_mutex_destroy(&p.mu);
    close_shards(&p); /* a failed run leaves what it wrote */
    double secs = cli_now() - t0;

    if (p.err[0]) {
        cli_error(cmd, "%s", p.err);
        return -1;
    }
    if (quiet)
        return 0;
    if (o->shards) {
        printf("make-dataset: %llu images (%d classes x %d, %dx%d %s) in %s as %d tar "
               "shard%s train-%06d.tar..train-%06d.tar: mean %.1f KB, %.2f s, %d threads\n",
               (unsigned long long)p.images, o->classes, o->per_class, o->width, o->height,
               md_format_ext(o->format), o->dir, o->shards,
               o->shards == 1 ? "" : "s", 0, o->shards - 1,
               p.images ? (double)p.bytes / (double)p.images / 1000.0 : 0.0, secs, started);
        return 0;
    }
    printf("make-dataset: %llu images (%d classes x %d, %dx%d %s) in %s: mean %.1f KB, "
           "%.2f s, %d threads\n",
           (unsigned long long)p.images, o->classes, o->per_class, o->width, o->height,
           md_format_ext(o->format), o->dir,
           p.images ? (double)p.bytes / (double)p.images / 1000.0 : 0.0, secs, started);
    return 0;
}
