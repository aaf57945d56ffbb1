/* The local shard cache: files named "<url hash>-<etag hash>-<name>" in
 * one directory, shared by any number of loaders and processes. Nothing
 * in the directory is ever rewritten: a copy is written under a temporary
 * name, fsynced and renamed (so a file under a final name is whole, and a
 * killed writer leaves only a temporary, removed an hour later by the
 * next eviction), and eviction unlinks. Least recently used is the file's
 * mtime, touched on each hit.
 *
 * The writer writes straight from the shard's buffer, which the caller
 * keeps (pinned) until gf__shard_cache_done hands the shard back; at most
 * QUEUE_MAX shards are queued, writing or done-not-taken, so a slow disk
 * holds back at most that many buffers and never the fetches: past it a
 * shard simply is not cached this time.
 *
 * Each copy ends in a trailer: magic, the shard's length and its CRC32C,
 * computed by the writer; a hit is checked against it whole before any of
 * it is served, so a copy damaged on disk (or replaced) is dropped and
 * fetched again, never decoded. A file without the trailer (an older
 * cache's) is a miss, overwritten by the next write. */
#include "remote_cache.h"

#include "crc32c.h"
#include "mix.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_MAX 2
/* A temporary this old is a killed writer's. */
#define STALE_TMP_S 3600
#define TMP_PREFIX ".tmp-"
/* "<16 hex>-<16 hex>-": then the shard's own name, cut to this. */
#define HASH_CHARS 34
#define NAME_MAX_TAIL 64
/* "GFc1", CRC32C (LE 32), the shard's length (LE 64). */
#define TRAILER_BYTES 16
static const uint8_t trailer_magic[4] = {'G', 'F', 'c', '1'};
/* Temporaries are "<pid>-<n>": n counts for the whole process, as two
 * loaders' caches may write in one directory at once. */
static _Atomic uint64_t tmp_seq;

typedef struct item {
    uint32_t k;
    char etag[96];
    const uint8_t *data;
    size_t len;
} item;

struct gf__shard_cache {
    char *dir;
    int dir_fd; /* -1: caches nothing */
    uint64_t cap;
    const char *const *urls;
    uint32_t n;
    uint8_t *held; /* gf-control's: a copy seen at open or queued since */

    pthread_mutex_t mu;
    pthread_cond_t work_cv, idle_cv;
    pthread_t thread;
    bool has_thread, stop, write_failed;
    /* Ring of QUEUE_MAX: [head, written) done, [written, tail) queued (the
     * first of them being written while `busy`). Under mu; `written` is
     * also read without it by gf__shard_cache_done and _unwritten, which
     * run every pump round; head is gf-control's alone, tail written by
     * it only. */
    item q[QUEUE_MAX];
    uint64_t head, tail;
    _Atomic uint64_t written;
    bool busy;
    void (*notify)(void *);
    void *notify_ctx;
    gf__cache_counts counts;
    char warning[192];
};

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void make_trailer(uint8_t t[TRAILER_BYTES], const uint8_t *data, size_t len)
{
    memcpy(t, trailer_magic, 4);
    put_le(t + 4, gf__crc32c(data, len), 4);
    put_le(t + 8, len, 8);
}

static uint64_t hash_text(const char *s)
{
    return gf__fnv1a64(0xcbf29ce484222325ull, s, strlen(s));
}

/* The file name of shard k's copy for etag. */
static void entry_name(const gf__shard_cache *c, uint32_t k, const char *etag, char *out, size_t len)
{
    const char *url = c->urls[k];
    size_t end = strcspn(url, "?#");
    size_t start = end;
    while (start > 0 && url[start - 1] != '/')
        start--;
    char tail[NAME_MAX_TAIL + 1];
    size_t t = 0;
    for (size_t i = start; i < end && t < NAME_MAX_TAIL; i++) {
        char ch = url[i];
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                     ch == '.' || ch == '_' || ch == '-';
        tail[t++] = plain ? ch : '_';
    }
    tail[t] = '\0';
    snprintf(out, len, "%016llx-%016llx-%s", (unsigned long long)hash_text(url),
             (unsigned long long)hash_text(etag), tail);
}

static bool parse_url_hash(const char *name, uint64_t *h)
{
    if (strlen(name) < HASH_CHARS || name[16] != '-' || name[33] != '-')
        return false;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char ch = name[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *h = v;
    return true;
}

/* Only ever the first reason: the others follow from it. */
static void warn_locked(gf__shard_cache *c, const char *what, int err)
{
    if (c->warning[0])
        return;
    snprintf(c->warning, sizeof c->warning, "cache %s: %s: %s; shards are streamed without it",
             c->dir, what, strerror(err));
}

typedef struct hk {
    uint64_t h;
    uint32_t k;
} hk;

static int hk_cmp(const void *a, const void *b)
{
    uint64_t x = ((const hk *)a)->h, y = ((const hk *)b)->h;
    return x < y ? -1 : x > y;
}

/* Marks the shards some copy of which is in the directory. */
static void scan_held(gf__shard_cache *c)
{
    hk *by = malloc((size_t)c->n * sizeof *by);
    int fd = by ? dup(c->dir_fd) : -1;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        free(by);
        return;
    }
    for (uint32_t k = 0; k < c->n; k++)
        by[k] = (hk){hash_text(c->urls[k]), k};
    qsort(by, c->n, sizeof *by, hk_cmp);
    rewinddir(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        hk key;
        if (!parse_url_hash(e->d_name, &key.h))
            continue;
        hk *f = bsearch(&key, by, c->n, sizeof *by, hk_cmp);
        if (!f)
            continue;
        while (f > by && f[-1].h == key.h)
            f--;
        for (; f < by + c->n && f->h == key.h; f++)
            c->held[f->k] = 1;
    }
    closedir(d);
    free(by);
}

typedef struct entry {
    char name[HASH_CHARS + NAME_MAX_TAIL + 1];
    uint64_t bytes;
    struct timespec mtime;
} entry;

static int older_first(const void *a, const void *b)
{
    const struct timespec *x = &((const entry *)a)->mtime, *y = &((const entry *)b)->mtime;
    if (x->tv_sec != y->tv_sec)
        return x->tv_sec < y->tv_sec ? -1 : 1;
    return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

/* On the writer: removes killed writers' temporaries and the least
 * recently used copies until `incoming` more bytes fit under the cap.
 * Whatever else is in the directory is not ours and is left alone. */
static void make_room(gf__shard_cache *c, uint64_t incoming)
{
    int fd = dup(c->dir_fd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    rewinddir(d);
    entry *es = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t h;
        bool tmp = strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0;
        if (!tmp && (!parse_url_hash(e->d_name, &h) || strlen(e->d_name) >= sizeof es->name))
            continue;
        struct stat st;
        if (fstatat(c->dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (tmp) {
            if (now - st.st_mtime > STALE_TMP_S)
                unlinkat(c->dir_fd, e->d_name, 0);
            continue;
        }
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            entry *grown = realloc(es, ncap * sizeof *es);
            if (!grown)
                break;
            es = grown;
            cap = ncap;
        }
        snprintf(es[n].name, sizeof es[n].name, "%s", e->d_name);
        es[n].bytes = (uint64_t)st.st_size;
        es[n].mtime = st.st_mtim;
        total += es[n].bytes;
        n++;
    }
    closedir(d);
    if (total + incoming > c->cap) {
        qsort(es, n, sizeof *es, older_first);
        for (size_t i = 0; i < n && total + incoming > c->cap; i++)
            if (unlinkat(c->dir_fd, es[i].name, 0) == 0)
                total -= es[i].bytes;
    }
    free(es);
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
    while (len) {
        ssize_t w = write(fd, p, len > (1u << 30) ? 1u << 30 : len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -1 : (errno = EIO, -1);
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* On the writer. Returns 0, or -1 with errno and *what (the cache then
 * stops writing: a read-only or full directory fails every write). */
static int write_one(gf__shard_cache *c, const item *it, const char **what)
{
    char name[HASH_CHARS + NAME_MAX_TAIL + 1], tmp[64];
    entry_name(c, it->k, it->etag, name, sizeof name);
    uint8_t trailer[TRAILER_BYTES];
    make_trailer(trailer, it->data, it->len);
    make_room(c, it->len + TRAILER_BYTES);
    /* A name taken (a killed writer's whose pid this process got) is not
     * a broken directory: the next one. */
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        snprintf(tmp, sizeof tmp, TMP_PREFIX "%ld-%llu", (long)getpid(),
                 (unsigned long long)atomic_fetch_add(&tmp_seq, 1));
        fd = openat(c->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        *what = "creating a file";
        return -1;
    }
    int rc = 0;
    if (write_all(fd, it->data, it->len) < 0 || write_all(fd, trailer, TRAILER_BYTES) < 0)
        rc = -1, *what = "writing";
    else if (fsync(fd) < 0)
        rc = -1, *what = "fsync";
    int saved = errno;
    if (close(fd) < 0 && rc == 0)
        rc = -1, saved = errno, *what = "closing";
    if (rc == 0 && renameat(c->dir_fd, tmp, c->dir_fd, name) < 0)
        rc = -1, saved = errno, *what = "renaming";
    if (rc < 0) {
        unlinkat(c->dir_fd, tmp, 0);
        errno = saved;
        return -1;
    }
    fsync(c->dir_fd); /* the rename, durable; a failure costs a later miss */
    return 0;
}

static void *writer_main(void *arg)
{
    gf__shard_cache *c = arg;
    pthread_setname_np(pthread_self(), "gf-cache");
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->stop && c->written == c->tail)
            pthread_cond_wait(&c->work_cv, &c->mu);
        if (c->written == c->tail)
            break;
        item it = c->q[c->written % QUEUE_MAX];
        bool failed = c->write_failed;
        c->busy = true;
        pthread_mutex_unlock(&c->mu);
        const char *what = "";
        int rc = failed ? 0 : write_one(c, &it, &what);
        int err = errno;
        pthread_mutex_lock(&c->mu);
        if (rc < 0) {
            c->write_failed = true;
            warn_locked(c, what, err);
        } else if (!failed) {
            c->counts.written++;
            c->counts.write_bytes += it.len;
        }
        c->busy = false;
        c->written++;
        if (c->notify)
            c->notify(c->notify_ctx);
        pthread_cond_broadcast(&c->idle_cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int gf__shard_cache_open(gf__shard_cache **out, const char *dir, uint64_t cap_bytes,
                         const char *const *urls, uint32_t n)
{
    gf__shard_cache *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->dir_fd = -1;
    c->urls = urls;
    c->n = n;
    c->cap = cap_bytes;
    c->dir = strdup(dir);
    c->held = calloc(n ? n : 1, 1);
    if (!c->dir || !c->held) {
        free(c->dir);
        free(c->held);
        free(c);
        return -1;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->work_cv, NULL);
    pthread_cond_init(&c->idle_cv, NULL);
    *out = c;
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        warn_locked(c, "creating the directory", errno);
        return 0;
    }
    c->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->dir_fd < 0) {
        warn_locked(c, "opening the directory", errno);
        return 0;
    }
    if (c->cap == 0) {
        struct statvfs v;
        c->cap = fstatvfs(c->dir_fd, &v) == 0 ? (uint64_t)v.f_bavail * v.f_frsize / 10 * 8 : 0;
    }
    scan_held(c);
    if (pthread_create(&c->thread, NULL, writer_main, c) != 0)
        warn_locked(c, "starting its writer", errno);
    else
        c->has_thread = true;
    return 0;
}

void gf__shard_cache_close(gf__shard_cache *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = true; /* the writer ends once the queue is written */
    c->notify = NULL;
    pthread_cond_broadcast(&c->work_cv);
    pthread_mutex_unlock(&c->mu);
    if (c->has_thread)
        pthread_join(c->thread, NULL);
    if (c->dir_fd >= 0)
        close(c->dir_fd);
    pthread_cond_destroy(&c->work_cv);
    pthread_cond_destroy(&c->idle_cv);
    pthread_mutex_destroy(&c->mu);
    free(c->held);
    free(c->dir);
    free(c);
}

void gf__shard_cache_set_notify(gf__shard_cache *c, void (*fn)(void *), void *ctx)
{
    pthread_mutex_lock(&c->mu);
    c->notify = fn;
    c->notify_ctx = ctx;
    pthread_mutex_unlock(&c->mu);
}

bool gf__shard_cache_may_hold(const gf__shard_cache *c, uint32_t k)
{
    return c->dir_fd >= 0 && c->held[k];
}

/* A copy under its final name that is not what the writer wrote: said
 * (the first warning only), and unlinked unless another writer has just
 * replaced it. */
static void drop_damaged(gf__shard_cache *c, uint32_t k, const char *name, const struct stat *st)
{
    struct stat now;
    if (fstatat(c->dir_fd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st->st_dev &&
        now.st_ino == st->st_ino)
        unlinkat(c->dir_fd, name, 0);
    pthread_mutex_lock(&c->mu);
    if (!c->warning[0])
        snprintf(c->warning, sizeof c->warning,
                 "cache %s/%s: damaged (not its checksum), dropped; %s fetched again", c->dir,
                 name, c->urls[k]);
    pthread_mutex_unlock(&c->mu);
}

bool gf__shard_cache_map(gf__shard_cache *c, uint32_t k, const char *etag, uint64_t size,
                         uint8_t **data, size_t *len, uint32_t *crc)
{
    if (c->dir_fd < 0 || !etag[0])
        return false;
    char name[HASH_CHARS + NAME_MAX_TAIL + 1];
    entry_name(c, k, etag, name, sizeof name);
    int fd = openat(c->dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false;
    struct stat st;
    uint8_t *p = MAP_FAILED;
    /* A file of another size is cut short, or an older cache's (no
     * trailer): a plain miss, as it always was. */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > TRAILER_BYTES &&
        (size == 0 || (size < UINT64_MAX - TRAILER_BYTES &&
                       (uint64_t)st.st_size == size + TRAILER_BYTES)) &&
        (uint64_t)st.st_size <= SIZE_MAX) {
        p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED)
            madvise(p, (size_t)st.st_size, MADV_WILLNEED);
    }
    if (p == MAP_FAILED) {
        close(fd);
        return false;
    }
    size_t n = (size_t)st.st_size - TRAILER_BYTES;
    const uint8_t *t = p + n;
    bool ours = memcmp(t, trailer_magic, 4) == 0;
    /* Checked whole here, on the way to READY: nothing of it is decoded
     * before. */
    if (!ours || get_le(t + 8, 8) != n || get_le(t + 4, 4) != gf__crc32c(p, n)) {
        munmap(p, (size_t)st.st_size);
        close(fd);
        if (ours || size)
            drop_damaged(c, k, name, &st);
        return false;
    }
    futimens(fd, NULL); /* the LRU's use; a read-only cache keeps its order */
    close(fd);
    *data = p;
    *len = n;
    *crc = (uint32_t)get_le(t + 4, 4);
    pthread_mutex_lock(&c->mu);
    c->counts.hits++;
    pthread_mutex_unlock(&c->mu);
    return true;
}

void gf__shard_cache_unmap(uint8_t *data, size_t len)
{
    if (data)
        munmap(data, len + TRAILER_BYTES);
}

int gf__shard_cache_put(gf__shard_cache *c, uint32_t k, const char *etag, const uint8_t *data,
                        size_t len)
{
    pthread_mutex_lock(&c->mu);
    int rc = -1;
    if (c->has_thread && !c->write_failed && !c->stop && etag[0] && len > 0 &&
        len + TRAILER_BYTES <= c->cap && strlen(etag) < sizeof c->q[0].etag)
        rc = c->tail - c->head < QUEUE_MAX ? 0 : 1;
    if (rc == 0) {
        item *it = &c->q[c->tail % QUEUE_MAX];
        it->k = k;
        snprintf(it->etag, sizeof it->etag, "%s", etag);
        it->data = data;
        it->len = len;
        c->tail++;
        c->held[k] = 1;
        pthread_cond_signal(&c->work_cv);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void gf__shard_cache_count_miss(gf__shard_cache *c)
{
    pthread_mutex_lock(&c->mu);
    c->counts.misses++;
    pthread_mutex_unlock(&c->mu);
}

unsigned gf__shard_cache_done(gf__shard_cache *c, uint32_t *ks, unsigned max)
{
    unsigned n = 0;
    if (atomic_load_explicit(&c->written, memory_order_acquire) == c->head)
        return 0;
    pthread_mutex_lock(&c->mu);
    for (; c->head < c->written && n < max; c->head++)
        ks[n++] = c->q[c->head % QUEUE_MAX].k;
    pthread_mutex_unlock(&c->mu);
    return n;
}

void gf__shard_cache_flush(gf__shard_cache *c)
{
    pthread_mutex_lock(&c->mu);
    while (c->has_thread && c->written != c->tail)
        pthread_cond_wait(&c->idle_cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

unsigned gf__shard_cache_unwritten(const gf__shard_cache *c)
{
    return (unsigned)(c->tail - atomic_load_explicit(&c->written, memory_order_acquire));
}

void gf__shard_cache_counts(gf__shard_cache *c, gf__cache_counts *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->counts;
    pthread_mutex_unlock(&c->mu);
}

void gf__shard_cache_warning(gf__shard_cache *c, char *out, size_t len)
{
    pthread_mutex_lock(&c->mu);
    snprintf(out, len, "%s", c->warning);
    pthread_mutex_unlock(&c->mu);
}
