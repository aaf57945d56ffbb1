/* The data set indexers' toolbox (dataset_builder.c), below dataset.c
 * and the three indexers (dataset_list.c, dataset_folder.c,
 * dataset_shards.c): the table (gf__dataset), the growing table they fill,
 * a block of names, image extensions. Run by whichever thread opens the
 * data set (gf_open's caller); nothing here is shared between threads. */
#ifndef GF_DATASET_BUILDER_H
#define GF_DATASET_BUILDER_H

#include "common.h"
#include "fields.h" /* the image extensions, the schema */
#include "grow.h"
#include "reader.h"
#include "tar.h" /* GF__TAR_BLOCK */
#include "remote_fetch.h"

#include <string.h>
#include <sys/stat.h>

/* Why an ImageFolder entry was left out by name (named_skips). */
enum {
    GF__SKIP_APPLEDOUBLE, /* "._x.jpg": macOS metadata, no image */
    GF__SKIP_DIR_AGAIN,   /* a directory reached again: a loop or a second link */
    GF__SKIP_LINK_OUT,    /* a link to a directory outside its class folder */
    GF__SKIP_CLASS_ROOT,  /* a class folder that is the root or above it */
    GF__SKIP_LOOP,        /* folder_walk TORCHVISION: a link back into its own walk */
    GF__SKIP_NO_MEMBER,   /* tar shards: a key without a declared field's member */
};

/* gf_skipped_entry's reason for a GF__SKIP_* kind (dataset_folder.c). */
const char *gf__skip_reason(int kind);

/* A shard the index took only part of (gf__dataset_opts.shard_skip): the
 * members wholly before the damage at `offset` were indexed, the rest
 * dropped. kept: members before it (in samples or skipped as today);
 * lost: the members of the key the damage cut (it could not be a sample)
 * and the damaged member itself when its header was there. */
typedef struct gf__shard_damage {
    uint32_t shard;      /* index into shard_paths */
    int code;            /* GF_EEMPTY, GF_ETRUNC, GF_EIO or GF_ECORRUPT */
    uint64_t offset, kept, lost;
    size_t reason;       /* offset of its NUL-terminated text in damage_text */
} gf__shard_damage;

/* One source of a mix (settings.data "mix:W=SRC|..."; dataset_mix.c):
 * its samples are [first, first + n) of the joined table, its shards
 * [first_shard, first_shard + n_shards). */
typedef struct gf__source {
    char *data;          /* as data names it */
    double weight;       /* its share of the weights' sum */
    uint64_t first, n;
    uint32_t first_shard, n_shards;
    int label_offset, n_classes;
    bool files;          /* folder or list: its samples are files */
    char *root;          /* files: the directory their relative paths were
                            made absolute from ("" for other sources) */
    bool remote;         /* remote shards */
} gf__source;

#define GF__MIX_SOURCES_MAX 64 /* GF__BLEND_MAX */

/* shard[i] of a mix's sample that is a file (a folder's or a list's). */
#define GF__NOT_A_MEMBER UINT32_MAX

typedef struct gf__dataset {
    uint64_t n;          /* samples */
    int root_fd;         /* directory the paths are relative to (O_PATH) */
    char *arena;         /* NUL-terminated relative paths, back to back */
    uint64_t *path_off;  /* n offsets into arena */
    int32_t *labels;     /* n labels */
    gf__file_seen *seen; /* n (folders and lists): each file's identity,
                            checked at each read (reader.h) */
    int n_classes;
    char **class_names;  /* n_classes names (ImageFolder), or NULL */
    size_t bytes;        /* heap bytes held, for stats */

    /* Tar shards only (NULL / 0 otherwise). The arena then holds display
     * names "train-000003.tar:key.jpg" (shard basename : member name). */
    uint32_t n_shards;
    char **shard_paths;  /* n_shards paths, relative to root_fd */
    gf__file_id *shard_ids; /* n_shards: each as indexed, checked at each read */
    uint32_t *shard;     /* n: index into shard_paths */
    uint64_t *data_off;  /* n: the image member's data offset */
    uint32_t *data_len;  /* n: its size (members over 4 GiB are skipped) */
    int64_t *data_crc;   /* n: its sidecar's member_crc32c=, -1 without one */
    /* The schema's fields beyond image and label (tar shards, local or remote; fields.h):
     * n_var of them, var_field[k] the schema's index of the k-th; per
     * sample its member's data offset and size (the member's extension,
     * as spelled, follows the sample's path in the arena, NUL after NUL);
     * var_max[k] the largest. n_var 0: the image and its label alone. */
    gf__schema schema;
    int n_var;
    int var_field[GF__FIELDS_MAX];
    uint64_t *var_off[GF__FIELDS_MAX];
    uint32_t *var_len[GF__FIELDS_MAX];
    uint32_t var_max[GF__FIELDS_MAX];
    /* Remote shards only (NULL otherwise): shard_paths are their display
     * URLs, these what the fetcher reads and how it signs. */
    gf__fetch_target *remote;
    /* per shard: its sidecar's shard_crc32c=, -1 without one; a shard
     * fetched whole is checked against it before any of it is decoded */
    int64_t *shard_crc32c;
    struct gf__remote_ctx *remote_ctx;
    /* What indexing left out (tar shards): members that cannot be samples
     * (links, devices, FIFOs, directories, unsafe names, a second image or
     * label of a key), keys without an image or a valid .cls, and all
     * warnings (those two and archive oddities; for an ImageFolder the
     * entries left out by name, named_skips); the first in `warning`. */
    uint64_t skipped_members, skipped_keys, warnings;
    /* Shard keys skipped for their .cls (no label): the first ones, for the
     * loader to report as warnings at open (path "shard.tar:key"). */
    gf_sample_error label_skips[GF_RECENT_WARNINGS];
    int n_label_skips;
    char warning[256];
    /* ImageFolder: directories walked, and those reached again (a loop or
     * a second link) and not walked twice. */
    uint64_t dirs, dirs_again;
    uint64_t skipped_ext[GF_SKIPPED_MAX]; /* files left out, [GF_SKIPPED_*] */
    /* What the walk left out by name (gf_skipped_entry): all counted,
     * the first GF_SKIPPED_NAMED_MAX named (paths cut to fit); each is
     * also one of `warnings`, the first described in `warning`. For tar
     * shards the keys without a member of a field beyond image and label
     * ("shard.tar:KEY.ext", the member that is not there), each also one
     * of skipped_keys. */
    uint64_t n_named_skips;
    struct {
        char path[224];
        int kind;      /* GF__SKIP_* */
        char why[96];  /* GF__SKIP_NO_MEMBER: "field 'F': no .EXT member" */
    } named_skips[GF_SKIPPED_NAMED_MAX];
    /* Damaged shards taken in part (shard_skip), in shard order. */
    gf__shard_damage *damage;
    size_t n_damage, damage_cap;
    char *damage_text;
    size_t damage_text_len, damage_text_cap;
    uint64_t members_lost; /* the damaged shards' `lost`, summed */
    /* A mix: its sources, in data's order (n_sources 0 otherwise). Its
     * files' paths are absolute (root_fd "/"); a mix of files and shards
     * has shard[i] GF__NOT_A_MEMBER for each file. */
    int n_sources;
    gf__source *sources;
    /* A mix's remote sources' contexts beyond remote_ctx (their targets
     * point into them), freed with the table. */
    struct gf__remote_ctx **more_ctx;
    int n_more_ctx;
} gf__dataset;

/* Whether sample i is a remote shard's member (a mix may hold local
 * samples beside them). */
static inline bool gf__dataset_remote_member(const gf__dataset *ds, uint64_t i)
{
    return ds->remote && ds->shard && ds->shard[i] != UINT32_MAX && ds->remote[ds->shard[i]].url;
}

/* Whether sample i is a tar member (else a file: folders, lists). */
static inline bool gf__dataset_member(const gf__dataset *ds, uint64_t i)
{
    return ds->shard && ds->shard[i] != GF__NOT_A_MEMBER;
}

/* gf_skipped_entry over ds: how many, and entry i's path and reason
 * while it is one of the named. */
static inline uint64_t gf__dataset_skipped_entry(const gf__dataset *ds, uint64_t i,
                                                 const char **path, const char **reason)
{
    if (i < ds->n_named_skips && i < GF_SKIPPED_NAMED_MAX) {
        if (path)
            *path = ds->named_skips[i].path;
        if (reason)
            *reason = ds->named_skips[i].why[0] ? ds->named_skips[i].why
                                                : gf__skip_reason(ds->named_skips[i].kind);
    }
    return ds->n_named_skips;
}

/* A name to print for sample i (for shards "shard.tar:member"). */
static inline const char *gf__dataset_path(const gf__dataset *ds, uint64_t i)
{
    return ds->arena + ds->path_off[i];
}

/* A list's sample i's file of field k (ds->var_field[k]): the paths after
 * its own in the arena, its own being the image's, or without an image
 * field k = 0's. */
static inline const char *gf__dataset_field_file(const gf__dataset *ds, uint64_t i, int k)
{
    const char *p = gf__dataset_path(ds, i);
    for (int skip = ds->schema.image >= 0 ? k + 1 : k; skip > 0; skip--)
        p += strlen(p) + 1;
    return p;
}

/* Where sample i's bytes are: *len bytes at *off of *rel (relative to root_fd), for
 * gf__read_range and gf__uring_submit_range (*len GF__WHOLE_FILE, i.e.
 * UINT64_MAX: the whole file, for folders and lists). A shard member's
 * range starts with its header block (GF__TAR_BLOCK bytes, in the same
 * read): gf__dataset_member_check checks it before the bytes after it
 * are used. */
static inline void gf__dataset_extent(const gf__dataset *ds, uint64_t i, const char **rel,
                                      uint64_t *off, uint64_t *len)
{
    if (gf__dataset_member(ds, i)) {
        *rel = ds->shard_paths[ds->shard[i]];
        uint64_t a = ds->data_off[i] - GF__TAR_BLOCK; /* a member has a header */
        uint64_t e = ds->data_off[i] + ds->data_len[i];
        /* With text or bytes fields, one read from the first of the
         * sample's members to the end of the last (a key's members are
         * consecutive; those between, not fields, are read too). */
        for (int k = 0; k < ds->n_var; k++) {
            a = GF__MIN(a, ds->var_off[k][i] - GF__TAR_BLOCK);
            e = GF__MAX(e, ds->var_off[k][i] + ds->var_len[k][i]);
        }
        *off = a;
        *len = e - a;
    } else {
        *rel = gf__dataset_path(ds, i);
        *off = 0;
        *len = UINT64_MAX;
    }
}

/* Where sample i's image data starts in the bytes of its extent. */
static inline size_t gf__dataset_image_at(const gf__dataset *ds, uint64_t i)
{
    const char *rel;
    uint64_t off, len;
    gf__dataset_extent(ds, i, &rel, &off, &len);
    return gf__dataset_member(ds, i) ? (size_t)(ds->data_off[i] - off) : 0;
}

/* How a data set is indexed (gf__dataset_open: the defaults). */
typedef struct gf__dataset_opts {
    gf_extensions extensions; /* ImageFolder: the files it takes */
    gf_folder_walk folder_walk; /* ImageFolder: what its walk leaves out */
    int max_depth;        /* ImageFolder: levels below a class folder */
    uint64_t max_entries; /* ImageFolder: directory entries in the walk */
    const char *ca_file;  /* remote shards over https: the CA bundle, NULL: the system's */
    const struct gf_settings *remote_settings; /* remote shards: stall, retries, deadline; NULL: defaults */
    int shard_skip;       /* tar shards: 0 a damaged shard fails the open;
                             1 its members before the damage are kept and
                             it is recorded in ds->damage; 2 as 1, and a
                             set whose every shard is damaged opens empty
                             (n = 0, why says so) for the caller to report
                             the damage before it fails */
    int bad_label_fails;  /* tar shards: a key whose .cls is no label, or
                             whose text or bytes member is over
                             GF_FIELD_BYTES_MAX, fails the open (on_error =
                             fail), else it is skipped */
    const gf__schema *schema; /* tar shards: the sample's fields; NULL:
                             an image and .cls */
    gf_mix_labels mix_labels; /* a mix: its labels (dataset_mix.c) */
} gf__dataset_opts;

/* Label limit: n_classes = max label + 1 must fit in an int. */
#define GF__LABEL_MAX (INT32_MAX - 1)
/* Labels are class numbers, and n_classes = the largest label + 1 sizes
 * the classes (Python's Loader.classes, a trainer's output layer): a set
 * of n samples cannot mean more than max(n, GF__CLASSES_MIN) of them (a
 * subset of a large set keeps its labels), so one label of 2147483646,
 * which would make 2^31 class names, is an error, whoever gave it. */
#define GF__CLASSES_MIN ((uint64_t)1 << 20)

/* The table being built (geometric growth; offsets, never pointers, into
 * the arena so that a realloc moves nothing that is referenced). */
typedef struct gf__builder {
    char *arena;
    size_t arena_len, arena_cap;
    uint64_t *off;
    int32_t *labels;
    int with_ino;      /* ImageFolder: ino too (gf__file_seen.ino) */
    uint64_t *ino;
    int ranged;        /* tar shards: the four arrays below too */
    uint32_t *shard;
    uint64_t *doff;
    uint32_t *dlen;
    int64_t *dcrc;     /* the member's CRC32C (a sidecar's), -1 if none */
    int n_var;         /* tar shards: fields beyond image and label, two arrays each */
    uint64_t *voff[GF__FIELDS_MAX];
    uint32_t *vlen[GF__FIELDS_MAX];
    size_t n, cap;
} gf__builder;

void gf__builder_free(gf__builder *b);
/* The check of GF__CLASSES_MIN's rule that every indexer taking labels
 * from the data (list files, gf_open_samples, tar shards local and
 * remote) runs on its table before gf__builder_finish: b->n when every
 * label is within the bound; else the first sample holding the largest
 * label, and why = "label L is past any class of a set of N samples
 * (labels are class numbers; at most B classes)", for the indexer to
 * name that sample in front of (its file and line, index, or member). */
size_t gf__builder_label_past(const gf__builder *b, char *why, size_t why_len);
/* Room for `bytes` more path bytes / `more` more samples; 0 or GF_ENOMEM. */
int gf__builder_reserve_paths(gf__builder *b, size_t bytes);
int gf__builder_reserve_samples(gf__builder *b, size_t more);
/* Shrinks the arrays to their contents and moves them into ds. */
void gf__builder_finish(gf__builder *b, gf__dataset *ds);
/* ds->seen for ds->n samples, ino from `ino` (NULL: all unknown), which
 * is freed; 0 or GF_ENOMEM. */
int gf__dataset_seen_init(gf__dataset *ds, uint64_t *ino);

/* A list of names in one block, for one directory's sub-directories, the
 * class names and the shard paths. */
typedef struct gf__names {
    char *buf;
    size_t len, cap;
    size_t *off;
    size_t n, ncap;
} gf__names;

int gf__names_add(gf__names *s, const char *name);
void gf__names_free(gf__names *s);

/* An fd of at least 1, so that a zeroed struct (root_fd 0) never owns one. */
int gf__keep_fd(int fd);



#endif
