/* The data set indexers' toolbox, below dataset.c and the three
 * indexers: the table being built (geometric growth; one arena of paths,
 * one array per field, no allocation per sample), the per-sample file
 * records, blocks of names (the image extensions are fields.c's). On the
 * thread that opens the data set. */
#include "dataset_builder.h"

#include <assert.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- the table being built ---- */

void gf__builder_free(gf__builder *b)
{
    free(b->arena);
    free(b->off);
    free(b->labels);
    free(b->shard);
    free(b->doff);
    free(b->dlen);
    free(b->dcrc);
    free(b->ino);
    for (int k = 0; k < b->n_var; k++) {
        free(b->voff[k]);
        free(b->vlen[k]);
    }
    memset(b, 0, sizeof *b);
}

size_t gf__builder_label_past(const gf__builder *b, char *why, size_t why_len)
{
    uint64_t bound = b->n > GF__CLASSES_MIN ? b->n : GF__CLASSES_MIN;
    size_t at = b->n;
    for (size_t i = 0; i < b->n; i++)
        if (at == b->n ? (uint64_t)b->labels[i] >= bound : b->labels[i] > b->labels[at])
            at = i;
    if (at < b->n)
        gf__why(why, why_len,
                "label %d is past any class of a set of %zu samples (labels are class "
                "numbers; at most %llu classes)",
                (int)b->labels[at], b->n, (unsigned long long)bound);
    return at;
}

int gf__builder_reserve_paths(gf__builder *b, size_t bytes)
{
    if (bytes > SIZE_MAX - b->arena_len)
        return GF_ENOMEM;
    return GF__GROW(&b->arena, &b->arena_cap, b->arena_len + bytes, 1 << 16);
}

static int resize(void **p, size_t bytes)
{
    void *q = realloc(*p, bytes ? bytes : 1);
    if (!q)
        return GF_ENOMEM;
    *p = q;
    return 0;
}

/* Every per-sample array holds at least cap entries; one that grew before
 * another failed is merely larger than cap. */
int gf__builder_reserve_samples(gf__builder *b, size_t more)
{
    if (more > SIZE_MAX - b->n)
        return GF_ENOMEM;
    size_t need = b->n + more;
    if (need <= b->cap)
        return 0;
    size_t c = gf__grow_cap(b->cap, need, 1024, sizeof(uint64_t));
    if (!c)
        return GF_ENOMEM;
    if (resize((void **)&b->off, c * sizeof *b->off) < 0 ||
        resize((void **)&b->labels, c * sizeof *b->labels) < 0)
        return GF_ENOMEM;
    if (b->with_ino && resize((void **)&b->ino, c * sizeof *b->ino) < 0)
        return GF_ENOMEM;
    if (b->ranged && (resize((void **)&b->shard, c * sizeof *b->shard) < 0 ||
                      resize((void **)&b->doff, c * sizeof *b->doff) < 0 ||
                      resize((void **)&b->dlen, c * sizeof *b->dlen) < 0 ||
                      resize((void **)&b->dcrc, c * sizeof *b->dcrc) < 0))
        return GF_ENOMEM;
    for (int k = 0; k < b->n_var; k++)
        if (resize((void **)&b->voff[k], c * sizeof *b->voff[k]) < 0 ||
            resize((void **)&b->vlen[k], c * sizeof *b->vlen[k]) < 0)
            return GF_ENOMEM;
    b->cap = c;
    return 0;
}

void gf__builder_finish(gf__builder *b, gf__dataset *ds)
{
    assert(b->n <= b->cap && b->arena_len <= b->arena_cap);
    if (b->arena_len < b->arena_cap) {
        char *a = realloc(b->arena, b->arena_len ? b->arena_len : 1);
        if (a)
            b->arena = a;
    }
    if (b->n < b->cap) {
        uint64_t *o = realloc(b->off, b->n * sizeof *o);
        if (o)
            b->off = o;
        int32_t *l = realloc(b->labels, b->n * sizeof *l);
        if (l)
            b->labels = l;
        if (b->ranged) {
            (void)resize((void **)&b->shard, b->n * sizeof *b->shard);
            (void)resize((void **)&b->doff, b->n * sizeof *b->doff);
            (void)resize((void **)&b->dlen, b->n * sizeof *b->dlen);
            (void)resize((void **)&b->dcrc, b->n * sizeof *b->dcrc);
        }
        for (int k = 0; k < b->n_var; k++) {
            (void)resize((void **)&b->voff[k], b->n * sizeof *b->voff[k]);
            (void)resize((void **)&b->vlen[k], b->n * sizeof *b->vlen[k]);
        }
    }
    ds->n = b->n;
    ds->arena = b->arena;
    ds->path_off = b->off;
    ds->labels = b->labels;
    ds->bytes += b->arena_len + b->n * (sizeof *b->off + sizeof *b->labels);
    if (b->ranged) {
        ds->shard = b->shard;
        ds->data_off = b->doff;
        ds->data_len = b->dlen;
        ds->data_crc = b->dcrc;
        ds->bytes +=
            b->n * (sizeof *b->shard + sizeof *b->doff + sizeof *b->dlen + sizeof *b->dcrc);
    }
    ds->n_var = b->n_var;
    for (int k = 0; k < b->n_var; k++) {
        ds->var_off[k] = b->voff[k];
        ds->var_len[k] = b->vlen[k];
        ds->var_max[k] = 0;
        for (size_t i = 0; i < b->n; i++)
            ds->var_max[k] = GF__MAX(ds->var_max[k], b->vlen[k][i]);
        ds->bytes += b->n * (sizeof *b->voff[k] + sizeof *b->vlen[k]);
    }
    memset(b, 0, sizeof *b);
}

int gf__dataset_seen_init(gf__dataset *ds, uint64_t *ino)
{
    ds->seen = calloc(ds->n ? ds->n : 1, sizeof *ds->seen);
    if (!ds->seen) {
        free(ino);
        return GF_ENOMEM;
    }
    for (uint64_t i = 0; ino && i < ds->n; i++)
        atomic_init(&ds->seen[i].ino, ino[i]);
    free(ino);
    ds->bytes += ds->n * sizeof *ds->seen;
    return 0;
}

int gf__keep_fd(int fd)
{
    if (fd == 0) {
        int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        return hi;
    }
    return fd;
}

/* ---- names ---- */

int gf__names_add(gf__names *s, const char *name)
{
    size_t l = strlen(name) + 1;
    if (GF__GROW(&s->buf, &s->cap, s->len + l, 256) < 0 ||
        GF__GROW(&s->off, &s->ncap, s->n + 1, 16) < 0)
        return GF_ENOMEM;
    memcpy(s->buf + s->len, name, l);
    s->off[s->n++] = s->len;
    s->len += l;
    return 0;
}

void gf__names_free(gf__names *s)
{
    free(s->buf);
    free(s->off);
    memset(s, 0, sizeof *s);
}
