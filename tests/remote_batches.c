/*
 * The batches a data set gives, as one checksum, through the public API
 * (pixels, labels, indices and every field settings.fields names):
 * remote_batches.sh runs it on the same shards read locally, from nginx
 * and from the S3 server (and through the fault proxy), which must agree
 * byte for byte.
 *
 *   remote_batches DATA THREADS DEPTH [SEEK_EPOCH SEEK_POS]
 *
 * prints "hash=H batches=N samples=N errors=N keys_skipped=N dataset_warnings=N requests=N retries=N
 * read_peak=N cache_hits=N cache_misses=N" (stats.read_bytes_peak, the
 * cache's), "cache_warning: TEXT" when it has one, and,
 * for each sample error, "error: PATH: REASON". Settings from the
 * environment: RB_CA_FILE (ca_file), RB_CACHE_DIR (cache_dir), RB_STALL_S
 * (remote_stall_s), RB_ON_ERROR=fail, RB_ORDER, RB_SET ("name=value ..."
 * through gf_settings_set), RB_BATCHES=N (close after N batches, with
 * whatever is in flight: prints "closed after N"), RB_PAUSE_MS (sleep
 * after gf_open, before the seek: requests get under way), RB_INDICES=1
 * (also prints each batch as "batch EPOCH POSITION COUNT: INDEX...", so a
 * test can compare the samples delivered, not only their checksum),
 * RB_AGAIN=open|closed|both (a second loader on the same settings runs
 * to its end: opened after the first's end while it is still open, as
 * Python's last batch in a loop variable keeps it; after its gf_close; or
 * beside it from the start; prints "again: cache_hits=N cache_misses=N"
 * and "again: cache_warning: TEXT" when it has one), RB_STATE="WORLD POS"
 * (instead of the seek: the state rank 0 of a WORLD-rank run on the same
 * settings has at SEEK_EPOCH SEEK_POS, resumed: an elastic resume when
 * RB_SET gives another world; prints "note: TEXT", stats.resume_note).
 */
#include "gpufeed.h"
#include "../src/mix.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void on_error(void *user, int64_t sample, const char *path, int code, const char *reason)
{
    (void)user;
    (void)sample;
    (void)code;
    printf("error: %s: %s\n", path, reason);
}

/* Every field's bytes beyond image and label (settings.fields): each
 * sample's member, or the gathered tensor. */
static uint64_t hash_fields(uint64_t h, const gf_batch *b)
{
    for (int f = 0; f < b->n_fields; f++) {
        const gf_field *x = &b->fields[f];
        if (x->kind == GF_FIELD_IMAGE || x->kind == GF_FIELD_LABEL)
            continue;
        if (x->kind == GF_FIELD_ARRAY || x->kind == GF_FIELD_MASK) {
            size_t n = gf_dtype_size(x->dtype);
            for (int d = 0; d < x->ndim; d++)
                n *= (size_t)x->shape[d];
            h = gf__fnv1a64(h, x->data, n);
            continue;
        }
        for (int i = 0; i < b->count; i++) {
            h = gf__fnv1a64(h, &x->lengths[i], sizeof x->lengths[i]);
            h = gf__fnv1a64(h, x->data + x->offsets[i], x->lengths[i]);
        }
    }
    return h;
}

/* Reads l's batches until the end (or stop_after), hashing them. */
static int drain(gf_loader *l, uint64_t stop_after, bool indices, uint64_t *hash,
                 uint64_t *batches, uint64_t *samples)
{
    uint64_t h = *hash;
    gf_batch *b;
    int rc = 0;
    while (*batches < stop_after && (rc = gf_next(l, &b)) == 0) {
        size_t px = (size_t)b->count * 32 * 32 * 3;
        bool image = false; /* fields naming no image: no pixels written */
        for (int f = 0; f < b->n_fields; f++)
            image |= b->fields[f].kind == GF_FIELD_IMAGE;
        if (image)
            h = gf__fnv1a64(h, b->pixels, px);
        h = hash_fields(h, b);
        h = gf__fnv1a64(h, b->labels, (size_t)b->count * sizeof *b->labels);
        h = gf__fnv1a64(h, b->indices, (size_t)b->count * sizeof *b->indices);
        h = gf__fnv1a64(h, &b->epoch, sizeof b->epoch);
        h = gf__fnv1a64(h, &b->position, sizeof b->position);
        if (indices) { /* one line: on_error prints from gf-control meanwhile */
            flockfile(stdout);
            printf("batch %" PRIu64 " %" PRIu64 " %d:", b->epoch, b->position, b->count);
            for (int i = 0; i < b->count; i++)
                printf(" %" PRId64, b->indices[i]);
            printf("\n");
            funlockfile(stdout);
        }
        ++*batches;
        *samples += (uint64_t)b->count;
        gf_release(l, b);
    }
    *hash = h;
    return rc;
}

/* RB_AGAIN: a second loader on s (l2, or opened now) runs to its end;
 * prints its cache's figures. Returns GF_EOF when it got there. */
static int again_run(const gf_settings *s, gf_loader *l2)
{
    int rc = l2 ? 0 : gf_open(&l2, s);
    if (rc != 0) {
        printf("again: open: %s: %s\n", gf_strerror(rc), gf_last_error(l2));
        gf_close(&l2);
        return rc;
    }
    uint64_t h = 0, n = 0, k = 0;
    rc = drain(l2, UINT64_MAX, false, &h, &n, &k);
    gf_stats st;
    gf_get_stats(l2, &st);
    printf("again: cache_hits=%" PRIu64 " cache_misses=%" PRIu64 "\n", st.cache_hits,
           st.cache_misses);
    if (st.cache_warning[0])
        printf("again: cache_warning: %s\n", st.cache_warning);
    if (rc != GF_EOF)
        printf("again: end: %s: %s\n", gf_strerror(rc), gf_last_error(l2));
    gf_close(&l2);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: remote_batches DATA THREADS DEPTH [SEEK_EPOCH SEEK_POS]\n");
        return 2;
    }
    gf_settings s;
    gf_default_settings(&s);
    s.data = argv[1];
    s.threads = atoi(argv[2]);
    s.prefetch_depth = atoi(argv[3]);
    s.batch_size = 5;
    s.height = s.width = 32;
    s.epochs = 2;
    s.seed = 11;
    s.world = 1;
    s.device = GF_DEVICE_CPU;
    s.on_sample_error = on_error;
    const char *v;
    if ((v = getenv("RB_CA_FILE")) && *v)
        s.ca_file = v;
    if ((v = getenv("RB_CACHE_DIR")) && *v)
        s.cache_dir = v;
    if ((v = getenv("RB_STALL_S")) && *v)
        s.remote_stall_s = atoi(v);
    if ((v = getenv("RB_ON_ERROR")) && strcmp(v, "fail") == 0)
        s.on_error = GF_ON_ERROR_FAIL;
    if ((v = getenv("RB_ORDER")) && *v && gf_settings_set(&s, "order", v, NULL, 0) != 0) {
        fprintf(stderr, "bad RB_ORDER\n");
        return 2;
    }
    /* Strings gf_settings_set keeps pointers into: the program's life. */
    static char set[1024];
    if ((v = getenv("RB_SET")) && *v) {
        snprintf(set, sizeof set, "%s", v);
        for (char *save = NULL, *kv = strtok_r(set, " ", &save); kv;
             kv = strtok_r(NULL, " ", &save)) {
            char *eq = strchr(kv, '='), why[160] = "";
            if (eq)
                *eq = '\0';
            if (!eq || gf_settings_set(&s, kv, eq + 1, why, sizeof why) != 0) {
                fprintf(stderr, "bad RB_SET %s: %s\n", kv, why);
                return 2;
            }
        }
    }
    bool indices = (v = getenv("RB_INDICES")) && strcmp(v, "1") == 0;
    uint64_t stop_after = (v = getenv("RB_BATCHES")) && *v ? strtoull(v, NULL, 10) : UINT64_MAX;
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    if (rc != 0) {
        printf("open: %s: %s\n", gf_strerror(rc), gf_last_error(l));
        gf_close(&l);
        return 1;
    }
    if ((v = getenv("RB_PAUSE_MS")) && *v) {
        long ms = atol(v);
        nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000}, NULL);
    }
    const char *from = getenv("RB_STATE");
    if (argc == 6 && from && *from) {
        gf_settings o = s;
        o.rank = 0;
        o.world = atoi(from);
        gf_loader *saver = NULL;
        gf_state st;
        if ((rc = gf_open(&saver, &o)) != 0 ||
            (rc = gf_seek(saver, strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10))) != 0 ||
            (rc = gf_get_state(saver, &st)) != 0 || (rc = gf_set_state(l, &st)) != 0) {
            printf("state: %s: %s / %s\n", gf_strerror(rc), gf_last_error(saver), gf_last_error(l));
            gf_close(&saver);
            gf_close(&l);
            return 1;
        }
        gf_close(&saver);
        gf_stats note;
        gf_get_stats(l, &note);
        printf("note: %s\n", note.resume_note);
    } else if (argc == 6 && (rc = gf_seek(l, strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10))) != 0) {
        printf("seek: %s: %s\n", gf_strerror(rc), gf_last_error(l));
        gf_close(&l);
        return 1;
    }
    /* both: the second loader runs beside the first, its cache's writer too. */
    const char *again = getenv("RB_AGAIN");
    gf_loader *l2 = NULL;
    if (again && strcmp(again, "both") == 0 && (rc = gf_open(&l2, &s)) != 0) {
        printf("again: open: %s: %s\n", gf_strerror(rc), gf_last_error(l2));
        gf_close(&l2);
        gf_close(&l);
        return 1;
    }
    uint64_t h = 1469598103934665603ull, batches = 0, samples = 0;
    rc = drain(l, stop_after, indices, &h, &batches, &samples);
    gf_stats st;
    gf_get_stats(l, &st);
    if (batches == stop_after) {
        printf("closed after %" PRIu64 "\n", batches);
        gf_close(&l2);
        gf_close(&l);
        return 0;
    }
    printf("hash=%016" PRIx64 " batches=%" PRIu64 " samples=%" PRIu64 " errors=%" PRIu64
           " keys_skipped=%" PRIu64 " dataset_warnings=%" PRIu64
           " requests=%" PRIu64 " retries=%" PRIu64 " read_peak=%" PRIu64 " cache_hits=%" PRIu64
           " cache_misses=%" PRIu64 "\n",
           h, batches, samples, st.errors, st.shard_keys_skipped, st.dataset_warnings, st.remote_requests, st.remote_retries,
           st.read_bytes_peak, st.cache_hits, st.cache_misses);
    if (st.cache_warning[0])
        printf("cache_warning: %s\n", st.cache_warning);
    if (rc != GF_EOF)
        printf("end: %s: %s\n", gf_strerror(rc), gf_last_error(l));
    if (rc == GF_EOF && again && *again) {
        if (strcmp(again, "closed") == 0)
            gf_close(&l);
        rc = again_run(&s, l2);
        l2 = NULL;
    }
    gf_close(&l2);
    gf_close(&l);
    return rc == GF_EOF ? 0 : 1;
}
