/* Seeking and restoring saved states with any numbers, on a loader of any
 * batch size, share and epoch count over a 10-image folder: a refusal with
 * a message, or batches that start exactly where asked (the next epoch's
 * start after an epoch's end), with labels and indices in range. Input:
 * 4 bytes of settings, then epoch and position (u64 each), then, for
 * gf_set_state, version, seed, rank and world, and the rest of an epoch a
 * change of world split (rest_world, rest_position, rest_taken). Each input runs twice, on 1
 * and 3 decode threads: the same bytes must come out. */
#include "mix.h"
#include "fuzz.h"
#include "testutil.h"
#include "gpufeed.h"

#include <stdbool.h>
#include <string.h>

enum { CLASSES = 2, PER_CLASS = 5 };

static uint64_t u64_at(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Opens s, seeks (or restores a state) and checks up to three batches.
 * Returns a hash of all it delivered, pixels included; 0 if refused. */
static uint64_t seek_and_read(const gf_settings *s, const uint8_t *data, size_t size,
                              uint64_t epoch, uint64_t position)
{
    gf_loader *l = NULL;
    int rc = gf_open(&l, s);
    if (rc != 0) { /* e.g. drop_last with a share under one batch */
        FUZZ_CHECK(rc == GF_EINVAL && gf_last_error(l)[0] != '\0');
        gf_close(&l);
        return 0;
    }
    gf_stats st;
    FUZZ_CHECK(gf_get_stats(l, &st) == 0);
    const uint64_t len = st.epoch_samples, B = (uint64_t)s->batch_size;

    uint64_t e = epoch, p = position;
    bool restored = false;
    if (data[3] & 2 && size >= 20 + 24) {
        gf_state mine, state = {.version = data[20] & 1 ? GF_STATE_VERSION : data[20],
                                .seed = data[21] & 1 ? s->seed : u64_at(data + 24),
                                .rank = data[22] & 1 ? (uint32_t)s->rank : data[22],
                                .world = data[23] & 1 ? (uint32_t)s->world : data[23],
                                .epoch = epoch,
                                .position = position};
        FUZZ_CHECK(gf_get_state(l, &mine) == 0);
        if (data[20] & 2) { /* this data set's identity */
            state.samples = mine.samples;
            state.index_hash = mine.index_hash;
        }
        if (size >= 20 + 24 + 17) { /* a change of world earlier in the epoch */
            state.rest_world = data[44] % 5;
            state.rest_position = u64_at(data + 45) % 9;
            state.rest_taken = u64_at(data + 53) % 17;
        }
        rc = gf_set_state(l, &state);
        restored = true;
    } else {
        rc = gf_seek(l, epoch, position);
    }
    if (rc != 0) {
        FUZZ_CHECK(rc == GF_EINVAL && gf_last_error(l)[0] != '\0');
        gf_close(&l);
        return 0;
    }
    /* A restored state may have split its epoch (another world, a rest):
     * the loader's own state says where it starts, and the rest's length. */
    uint64_t first_len = len;
    if (restored) {
        gf_state now;
        FUZZ_CHECK(gf_get_state(l, &now) == 0 && gf_get_stats(l, &st) == 0);
        FUZZ_CHECK(now.epoch >= epoch && now.epoch <= epoch + 1);
        e = now.epoch;
        p = now.position;
        first_len = st.epoch_samples;
        FUZZ_CHECK(first_len <= len);
    }
    FUZZ_CHECK(p <= first_len);

    /* Where the next batch must start. */
    uint64_t h = GF__FNV1A64_BASIS, cur_len = first_len;
    for (int k = 0; k < 3; k++) {
        if (p == cur_len || (s->drop_last && cur_len - p < B)) {
            if (e == UINT64_MAX)
                break;
            e++, p = 0;
            cur_len = len;
        }
        gf_batch *b = NULL;
        rc = gf_next(l, &b);
        if (s->epochs && e >= s->epochs) {
            FUZZ_CHECK(rc == GF_EOF && b == NULL);
            break;
        }
        FUZZ_CHECK(rc == 0 && b != NULL);
        uint64_t count = cur_len - p < B ? cur_len - p : B;
        FUZZ_CHECK(b->epoch == e && (uint64_t)b->count == count && b->position == p + count);
        for (int i = 0; i < b->count; i++) {
            FUZZ_CHECK(b->labels[i] >= 0 && b->labels[i] < CLASSES);
            FUZZ_CHECK(b->indices[i] >= 0 && b->indices[i] < CLASSES * PER_CLASS);
        }
        h = gf__fnv1a64(h, b->labels, count * sizeof *b->labels);
        h = gf__fnv1a64(h, b->indices, count * sizeof *b->indices);
        h = gf__fnv1a64(h, b->pixels, count * (size_t)b->height * b->width * b->channels);
        FUZZ_CHECK(gf_release(l, b) == 0);
        gf_state now;
        FUZZ_CHECK(gf_get_state(l, &now) == 0);
        /* The end of an epoch reads as the start of the next. */
        FUZZ_CHECK((now.epoch == e && now.position == p + count) ||
                   (p + count == cur_len && now.epoch == e + 1 && now.position == 0));
        p += count;
    }
    gf_close(&l);
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *root;
    if (!root) {
        root = tu_image_folder(CLASSES, PER_CLASS, 8, 6, "png");
        fuzz_remove_at_exit(root);
    }
    if (size < 20)
        return 0;
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = root;
    s.width = 4;
    s.height = 3;
    s.threads = 1;
    s.prefetch_depth = 2;
    s.batch_size = 1 + data[0] % 4;
    s.drop_last = data[0] >> 2 & 1;
    s.shuffle = data[0] >> 3 & 1;
    s.world = 1 + data[1] % 3;
    s.rank = data[1] / 3 % s.world;
    s.epochs = data[2] % 4; /* 0: unbounded */
    s.seed = data[3] >> 4;
    uint64_t epoch = u64_at(data + 4), position = u64_at(data + 12);
    if (data[3] & 1) /* mostly in range */
        epoch %= 5, position %= 8;

    /* The same batches, bytes and all, from another thread count and ring. */
    uint64_t one = seek_and_read(&s, data, size, epoch, position);
    s.threads = 3;
    s.prefetch_depth = 3;
    FUZZ_CHECK(seek_and_read(&s, data, size, epoch, position) == one);
    return 0;
}

void fuzz_seeds(fuzz_emit emit)
{
    uint8_t in[61] = {0};
    for (int k = 0; k < 12; k++) {
        in[0] = (uint8_t)k;             /* batch 1..4, drop_last */
        in[1] = (uint8_t)(k % 2 ? 4 : 0); /* world 2 rank 1, or 1 of 1 */
        in[2] = (uint8_t)(k % 4);       /* epochs */
        in[3] = (uint8_t)(1 | (k & 2)); /* in range; gf_set_state when 2 */
        in[4] = (uint8_t)(k % 3);       /* epoch */
        in[12] = (uint8_t)k;            /* position */
        memset(in + 20, 1, 4);          /* a matching state */
        in[20] = 3;                     /* of this data set */
        if (k >= 8) {                   /* saved on 3 ranks, a rest or not */
            in[3] |= 2;
            in[12] = (uint8_t)(k - 8);
            in[23] = 3;
            in[44] = (uint8_t)(k % 2 ? 2 : 0);
            in[45] = (uint8_t)(k % 3);
            in[53] = (uint8_t)(k % 4);
        }
        char name[32];
        snprintf(name, sizeof name, "seek-%d", k);
        emit(name, in, sizeof in);
    }
}
