/*
 * A mix of data sets (settings.data "mix:W=SOURCE|W=SOURCE..."): each
 * source opened as data is alone, then their tables joined into one, so
 * every reader of the index (the loader, gf_index, verify, prepare) sees
 * one table whose source s holds the indices [first, first + n). The
 * order that draws from them by weight is blend_order.c's.
 *
 * Joining keeps each sample what it was: a file's path made absolute
 * (the joined table's root is "/": each source had its own), a tar
 * member's shard numbered after the earlier sources' shards, and in a
 * mix of both kinds shard[i] GF__NOT_A_MEMBER for a file (the one
 * per-sample kind test, gf__dataset_member). Labels move by the earlier
 * sources' classes under mix_labels OFFSET.
 *
 * A remote source's shards keep their URLs and fetch targets (ds->remote,
 * zero for a local shard: gf__dataset_remote_member), its context kept
 * alive for them; the loader reads them through read_mix.c beside the
 * local samples.
 */
#include "dataset.h"
#include "config.h"
#include "remote_url.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIX_PREFIX "mix:"

bool gf__data_is_mix(const char *data)
{
    return data && strncmp(data, MIX_PREFIX, strlen(MIX_PREFIX)) == 0;
}

bool gf__mix_has_remote(const char *data)
{
    if (!gf__data_is_mix(data))
        return false;
    for (const char *p = data + strlen(MIX_PREFIX); p; p = strchr(p, '|'), p = p ? p + 1 : NULL) {
        const char *eq = strchr(p, '='), *bar = strchr(p, '|');
        if (eq && (!bar || eq < bar) && gf__data_is_remote(eq + 1))
            return true;
    }
    return false;
}

int gf__dataset_source_of(const gf__dataset *ds, uint64_t i)
{
    int lo = 0, hi = ds->n_sources - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (ds->sources[mid].first <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

const char *gf__dataset_own_path(const gf__dataset *ds, uint64_t i)
{
    const char *path = gf__dataset_path(ds, i);
    if (!ds->n_sources)
        return path;
    const char *root = ds->sources[gf__dataset_source_of(ds, i)].root;
    size_t n = root ? strlen(root) : 0;
    return n && strncmp(path, root, n) == 0 && path[n] == '/' ? path + n + 1 : path;
}

/* One "W=SOURCE" entry of [p, end): the weight into *w, the source
 * malloc'd into *src. */
static int parse_entry(const char *p, const char *end, int k, double *w, char **src, char *why,
                       size_t why_len)
{
    const char *eq = memchr(p, '=', (size_t)(end - p));
    if (!eq) {
        gf__why(why, why_len, "mix: source %d (\"%.*s\"): WEIGHT=SOURCE expected", k + 1,
                (int)GF__MIN(end - p, 200), p);
        return GF_EINVAL;
    }
    char num[64];
    size_t nl = (size_t)(eq - p);
    char *stop = NULL;
    if (nl && nl < sizeof num) {
        memcpy(num, p, nl);
        num[nl] = '\0';
        errno = 0;
        *w = strtod(num, &stop);
    }
    if (!nl || nl >= sizeof num || *stop || errno || !(*w > 0) || !isfinite(*w)) {
        gf__why(why, why_len, "mix: source %d's weight \"%.*s\": a weight is a positive number",
                k + 1, (int)GF__MIN(nl, 60), p);
        return GF_EINVAL;
    }
    if (eq + 1 == end) {
        gf__why(why, why_len, "mix: source %d has no data after its weight", k + 1);
        return GF_EINVAL;
    }
    if (!(*src = strndup(eq + 1, (size_t)(end - eq - 1))))
        return GF_ENOMEM;
    if (gf__data_is_mix(*src)) {
        gf__why_path(why, why_len, *src, "a mix's source is one data set, not a mix");
        return GF_EINVAL;
    }
    return 0;
}

/* s's absolute form, relative to the directory fd was opened on. */
static char *absolute(const char *root, const char *s)
{
    if (s[0] == '/')
        return strdup(s);
    char *out = malloc(strlen(root) + 1 + strlen(s) + 1);
    if (out)
        sprintf(out, "%s/%s", root, s);
    return out;
}

/* The path of the directory root_fd is open on. */
static int root_path(int root_fd, char *out, size_t cap)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", root_fd);
    ssize_t n = readlink(link, out, cap - 1);
    if (n < 0 || (size_t)n >= cap - 1)
        return -1;
    out[n] = '\0';
    return 0;
}

/* Strings a sample has in the arena: its path, then its fields' (a
 * list's files, a member's extensions). */
static int strings_of(const gf__dataset *p)
{
    if (p->shard)
        return 1 + p->n_var;
    return p->schema.image >= 0 ? 1 + p->n_var : GF__MAX(p->n_var, 1);
}

static char *skip_strings(char *s, int n)
{
    while (n-- > 0)
        s += strlen(s) + 1;
    return s;
}

/* A block of n pointers and their strings, as the indexers keep names. */
static char **names_block(char *const *names, size_t n, size_t *bytes)
{
    size_t len = 0;
    for (size_t k = 0; k < n; k++)
        len += strlen(names[k]) + 1;
    char **out = malloc(n * sizeof *out + len + 1);
    if (!out)
        return NULL;
    char *at = (char *)(out + n);
    for (size_t k = 0; k < n; k++) {
        size_t m = strlen(names[k]) + 1;
        memcpy(at, names[k], m);
        out[k] = at;
        at += m;
    }
    *bytes = n * sizeof *out + len + 1;
    return out;
}

/* The joined table of parts[0..n) into ds (every part's own tables
 * left for the caller to close). */
static int join(gf__dataset *ds, gf__dataset *parts, int n, gf_mix_labels labels, char *why,
                size_t why_len)
{
    uint64_t total = 0;
    uint32_t shards = 0;
    bool any_member = false, any_file = false, all_names = true, any_crc = false, any_remote = false;
    for (int k = 0; k < n; k++) {
        total += parts[k].n;
        shards += parts[k].n_shards;
        /* a source of shards every one damaged has shards and no sample */
        bool shards = parts[k].shard || parts[k].n_shards;
        any_member |= shards;
        any_file |= !shards;
        all_names &= parts[k].class_names != NULL;
        any_crc |= parts[k].shard_crc32c != NULL;
        any_remote |= parts[k].remote != NULL;
        if (parts[k].n_var != parts[0].n_var) {
            gf__why_path(why, why_len, ds->sources[k].data,
                         "its samples have other fields than the mix's first source's");
            return GF_EINVAL;
        }
    }
    ds->n = total;
    ds->schema = parts[0].schema;
    ds->n_var = parts[0].n_var;
    memcpy(ds->var_field, parts[0].var_field, sizeof ds->var_field);
    ds->path_off = malloc(total * sizeof *ds->path_off);
    ds->labels = malloc(total * sizeof *ds->labels);
    if (!ds->path_off || !ds->labels)
        return GF_ENOMEM;
    if (any_file && !(ds->seen = calloc(total, sizeof *ds->seen)))
        return GF_ENOMEM;
    if (any_member) {
        ds->shard = malloc(total * sizeof *ds->shard);
        ds->data_off = calloc(total, sizeof *ds->data_off);
        ds->data_len = calloc(total, sizeof *ds->data_len);
        ds->data_crc = malloc(total * sizeof *ds->data_crc);
        ds->shard_ids = calloc(shards ? shards : 1, sizeof *ds->shard_ids);
        if (!ds->shard || !ds->data_off || !ds->data_len || !ds->data_crc || !ds->shard_ids)
            return GF_ENOMEM;
        if (any_crc && !(ds->shard_crc32c = malloc((shards + 1) * sizeof *ds->shard_crc32c)))
            return GF_ENOMEM;
        if (any_remote && !(ds->remote = calloc(shards + 1, sizeof *ds->remote)))
            return GF_ENOMEM;
    }
    for (int f = 0; f < ds->n_var; f++) {
        ds->var_off[f] = calloc(total, sizeof *ds->var_off[f]);
        ds->var_len[f] = calloc(total, sizeof *ds->var_len[f]);
        if (!ds->var_off[f] || !ds->var_len[f])
            return GF_ENOMEM;
    }
    char **shard_paths = calloc(shards ? shards : 1, sizeof *shard_paths);
    if (!shard_paths)
        return GF_ENOMEM;
    int rc = 0;
    size_t arena_cap = 0, arena_len = 0;
    uint64_t at = 0;
    uint32_t shard_at = 0;
    int classes = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        gf__dataset *p = &parts[k];
        gf__source *src = &ds->sources[k];
        char root[PATH_MAX];
        if (root_path(p->root_fd, root, sizeof root) < 0) {
            gf__why_path(why, why_len, src->data, "cannot name its directory (/proc)");
            rc = GF_EDATASET;
            break;
        }
        src->first = at;
        src->n = p->n;
        src->first_shard = shard_at;
        src->n_shards = p->n_shards;
        src->files = !p->shard && !p->n_shards;
        if (!(src->root = strdup(src->files ? root : ""))) {
            rc = GF_ENOMEM;
            break;
        }
        src->remote = p->remote != NULL;
        src->n_classes = p->n_classes;
        src->label_offset = labels == GF_MIX_LABELS_OFFSET ? classes : 0;
        if (labels == GF_MIX_LABELS_OFFSET && p->n_classes > GF__LABEL_MAX + 1 - classes) {
            gf__why_path(why, why_len, src->data, "its labels after the earlier sources' %d "
                         "classes pass the most a label may be", classes);
            rc = GF_EINVAL;
            break;
        }
        classes = labels == GF_MIX_LABELS_OFFSET ? classes + p->n_classes
                                                 : GF__MAX(classes, p->n_classes);
        for (uint32_t j = 0; j < p->n_shards && rc == 0; j++) {
            /* A URL stays one; a local shard's path is made absolute. */
            if (!(shard_paths[shard_at + j] = p->remote ? strdup(p->shard_paths[j])
                                                        : absolute(root, p->shard_paths[j])))
                rc = GF_ENOMEM;
            else if (p->shard_ids)
                ds->shard_ids[shard_at + j] = p->shard_ids[j];
            if (p->remote)
                ds->remote[shard_at + j] = p->remote[j];
            if (ds->shard_crc32c)
                ds->shard_crc32c[shard_at + j] = p->shard_crc32c ? p->shard_crc32c[j] : -1;
        }
        int strings = strings_of(p);
        for (uint64_t i = 0; i < p->n && rc == 0; i++) {
            uint64_t g = at + i;
            char *s = p->arena + p->path_off[i];
            size_t need = (size_t)(skip_strings(s, strings) - s) +
                          (p->shard ? 0 : (size_t)strings * (strlen(root) + 2));
            if (GF__GROW(&ds->arena, &arena_cap, arena_len + need, 1 << 16) < 0) {
                rc = GF_ENOMEM;
                break;
            }
            ds->path_off[g] = arena_len;
            for (int t = 0; t < strings; t++, s += strlen(s) + 1) {
                size_t m = strlen(s) + 1;
                if (!p->shard && s[0] != '/') {
                    arena_len += (size_t)sprintf(ds->arena + arena_len, "%s/%s", root, s) + 1;
                } else {
                    memcpy(ds->arena + arena_len, s, m);
                    arena_len += m;
                }
            }
            ds->labels[g] = p->labels[i] + src->label_offset;
            if (ds->shard) {
                ds->shard[g] = p->shard ? shard_at + p->shard[i] : GF__NOT_A_MEMBER;
                ds->data_crc[g] = p->shard ? p->data_crc[i] : -1;
                if (p->shard) {
                    ds->data_off[g] = p->data_off[i];
                    ds->data_len[g] = p->data_len[i];
                }
            }
            if (p->seen)
                atomic_init(&ds->seen[g].ino, atomic_load(&p->seen[i].ino));
            for (int f = 0; f < ds->n_var; f++) {
                if (p->var_off[f])
                    ds->var_off[f][g] = p->var_off[f][i];
                if (p->var_len[f])
                    ds->var_len[f][g] = p->var_len[f][i];
            }
        }
        for (int f = 0; f < ds->n_var; f++)
            ds->var_max[f] = GF__MAX(ds->var_max[f], p->var_max[f]);
        /* What indexing left out, summed; the first warning kept. */
        ds->skipped_members += p->skipped_members;
        ds->skipped_keys += p->skipped_keys;
        ds->warnings += p->warnings;
        if (!ds->warning[0] && p->warning[0])
            snprintf(ds->warning, sizeof ds->warning, "%s", p->warning);
        for (int j = 0; j < p->n_label_skips && ds->n_label_skips < GF_RECENT_WARNINGS; j++)
            ds->label_skips[ds->n_label_skips++] = p->label_skips[j];
        ds->dirs += p->dirs;
        ds->dirs_again += p->dirs_again;
        for (int j = 0; j < GF_SKIPPED_MAX; j++)
            ds->skipped_ext[j] += p->skipped_ext[j];
        for (uint64_t j = 0; j < GF__MIN(p->n_named_skips, (uint64_t)GF_SKIPPED_NAMED_MAX); j++)
            if (ds->n_named_skips + j < GF_SKIPPED_NAMED_MAX)
                ds->named_skips[ds->n_named_skips + j] = p->named_skips[j];
        ds->n_named_skips += p->n_named_skips;
        for (size_t j = 0; j < p->n_damage && rc == 0; j++) {
            size_t rlen = strlen(p->damage_text + p->damage[j].reason) + 1;
            if (GF__GROW(&ds->damage, &ds->damage_cap, ds->n_damage + 1, 4) < 0 ||
                GF__GROW(&ds->damage_text, &ds->damage_text_cap, ds->damage_text_len + rlen,
                         256) < 0) {
                rc = GF_ENOMEM;
                break;
            }
            gf__shard_damage d = p->damage[j];
            memcpy(ds->damage_text + ds->damage_text_len, p->damage_text + d.reason, rlen);
            d.reason = ds->damage_text_len;
            d.shard += shard_at;
            ds->damage_text_len += rlen;
            ds->damage[ds->n_damage++] = d;
        }
        ds->members_lost += p->members_lost;
        /* The targets point into the context: it lives with the table. The
         * fetcher signs through one that signs, if any does. */
#if GF_HAVE_REMOTE
        if (p->remote_ctx) {
            /* Room first: from here the table owns the context. */
            struct gf__remote_ctx **m =
                realloc(ds->more_ctx, (size_t)(ds->n_more_ctx + 1) * sizeof *m);
            if (!m) {
                rc = GF_ENOMEM;
                break;
            }
            ds->more_ctx = m;
            struct gf__remote_ctx *c = p->remote_ctx;
            p->remote_ctx = NULL;
            if (!ds->remote_ctx || (gf__remote_ctx_signs(c) && !gf__remote_ctx_signs(ds->remote_ctx))) {
                struct gf__remote_ctx *t = ds->remote_ctx;
                ds->remote_ctx = c;
                c = t;
            }
            if (c)
                ds->more_ctx[ds->n_more_ctx++] = c;
        }
#endif
        at += p->n;
        shard_at += p->n_shards;
    }
    if (rc == 0 && shards) {
        size_t bytes = 0;
        char **block = names_block(shard_paths, shards, &bytes);
        if (!block)
            rc = GF_ENOMEM;
        ds->shard_paths = block;
        ds->n_shards = shards;
        ds->bytes += bytes;
    }
    for (uint32_t j = 0; j < shards; j++)
        free(shard_paths[j]);
    free(shard_paths);
    if (rc < 0)
        return rc;
    ds->n_classes = classes;
    if (all_names && labels == GF_MIX_LABELS_OFFSET) {
        char **names = malloc((size_t)(classes ? classes : 1) * sizeof *names);
        if (!names)
            return GF_ENOMEM;
        int c = 0;
        for (int k = 0; k < n; k++)
            for (int j = 0; j < parts[k].n_classes; j++)
                names[c++] = parts[k].class_names[j];
        size_t bytes = 0;
        ds->class_names = names_block(names, (size_t)classes, &bytes);
        free(names);
        if (!ds->class_names)
            return GF_ENOMEM;
        ds->bytes += bytes;
    }
    ds->bytes += arena_len + total * (sizeof *ds->path_off + sizeof *ds->labels);
    return 0;
}

int gf__dataset_open_mix(gf__dataset *ds, const char *source, const gf__dataset_opts *opts,
                         char *why, size_t why_len)
{
    const char *p = source + strlen(MIX_PREFIX);
    int n = 0;
    for (const char *q = p; q; q = strchr(q, '|'), q = q ? q + 1 : NULL)
        n++;
    if (n > GF__MIX_SOURCES_MAX) {
        gf__why(why, why_len, "mix: %d sources: a mix takes at most %d", n,
                GF__MIX_SOURCES_MAX);
        return GF_EINVAL;
    }
    ds->sources = calloc((size_t)n, sizeof *ds->sources);
    gf__dataset *parts = calloc((size_t)n, sizeof *parts);
    if (!ds->sources || !parts) {
        free(parts);
        return GF_ENOMEM;
    }
    ds->n_sources = n;
    int rc = 0, opened = 0;
    double sum = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        const char *end = strchr(p, '|');
        if (!end)
            end = p + strlen(p);
        rc = parse_entry(p, end, k, &ds->sources[k].weight, &ds->sources[k].data, why, why_len);
        p = end + 1;
        sum += ds->sources[k].weight;
    }
    for (int k = 0; k < n && rc == 0; k++, opened++) {
        char part_why[512] = "";
        rc = gf__dataset_open_with(&parts[k], ds->sources[k].data, opts, part_why,
                                   sizeof part_why);
        if (rc < 0)
            gf__why(why, why_len, "mix: source %d: %s", k + 1, part_why);
        else if (parts[k].n == 0 && !(parts[k].n_damage && opts->shard_skip == 2)) {
            gf__why(why, why_len, "mix: source %d: %s", k + 1,
                    part_why[0] ? part_why : "no samples");
            rc = GF_EDATASET;
        }
    }
    if (rc == 0) {
        for (int k = 0; k < n; k++)
            ds->sources[k].weight /= sum;
        ds->root_fd = gf__keep_fd(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (ds->root_fd < 0) {
            gf__why(why, why_len, "mix: /: %s", strerror(errno));
            rc = GF_EDATASET;
        }
    }
    if (rc == 0) {
        rc = join(ds, parts, n, opts->mix_labels, why, why_len);
        if (rc == GF_ENOMEM)
            gf__why(why, why_len, "mix: out of memory joining its sources' indexes");
    }
    for (int k = 0; k < opened; k++)
        gf__dataset_close(&parts[k]);
    free(parts);
    return rc;
}
