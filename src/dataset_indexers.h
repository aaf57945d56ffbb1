/* The four indexers, which dataset.c chooses among and dispatches to;
 * each builds with dataset_builder.h's tools, never calling back into
 * dataset.c. On gf_open's (or gf_index_open's) thread. */
#ifndef GF_DATASET_INDEXERS_H
#define GF_DATASET_INDEXERS_H

#include "dataset_builder.h"

/* The indexers; on failure ds may hold part of what they built
 * (gf__dataset_open and gf__dataset_open_samples close it). */
/* schema NULL: "path label" lines; else settings.fields' (dataset_list.c). */
int gf__dataset_open_list(gf__dataset *ds, const char *src, int fd, const struct stat *st,
                          const gf__schema *schema, char *why, size_t why_len);
/* dataset_mix.c: "mix:W=SOURCE|...", each source opened as data is
 * (with o), their tables joined (GF_EINVAL: the text, a remote or
 * nested source, fields that differ, with why). */
int gf__dataset_open_mix(gf__dataset *ds, const char *src, const gf__dataset_opts *o,
                         char *why, size_t why_len);
/* dataset_memory.c: the caller's arrays (gf__dataset_open_samples). */
int gf__dataset_open_memory(gf__dataset *ds, const char *root, const char *const *paths,
                            const int32_t *labels, uint64_t n, char *why, size_t why_len);
int gf__dataset_open_folder(gf__dataset *ds, const char *src, const gf__dataset_opts *o,
                            char *why, size_t why_len);
/* dataset_prepared.c: 1 and *pattern (malloc'd: DIR/NAME-{000000..N}.tar)
 * when the folder dir is a set `gpufeed prepare` wrote; 0 when it is not
 * one (the folder indexer goes on); GF_EDATASET with why when it has a
 * manifest.json beside shards that are not one numbered run; GF_ENOMEM. */
int gf__prepared_pattern(const char *dir, char **pattern, char *why, size_t why_len);
/* dataset_remote.c (the `remote` feature): http(s):// and s3:// shards,
 * indexed from their sidecars (SHARD.idx with labels=, shard_crc32c= and
 * member_crc32c=) without reading a shard, their lines taken by o's
 * schema as a scan takes a shard's members (gf__shard_sidecar_samples,
 * o->bad_label_fails too); o->ca_file NULL: the system's CA bundle;
 * o->remote_settings (NULL: the defaults) give every request through ds
 * (the sidecars' at open, gf__remote_read's) its remote_stall_s,
 * remote_retries and remote_deadline_s. */
struct gf_settings;
int gf__dataset_open_remote(gf__dataset *ds, const char *src, const gf__dataset_opts *o,
                            char *why, size_t why_len);
/* How the loader's fetcher reads ds's shards under s. */
gf__fetch_opts gf__remote_fetch_opts(const struct gf_settings *s, const gf__dataset *ds);
void gf__remote_ctx_free(struct gf__remote_ctx *c);
/* A blocking read of len bytes at off of remote shard k into b, on the
 * calling thread (gf_read_sample): retried as the loader's are, but not
 * checked against the ETag the loader's reads recorded. */
int gf__remote_read(const gf__dataset *ds, uint32_t k, uint64_t off, uint64_t len,
                    size_t max_bytes, gf__buf *b, char *why, size_t why_len);
struct gf_shard_index_info;
/* gf_shard_index_with for one remote shard URL (dataset_remote.c, the
 * `remote` feature): the object fetched whole, in ranged chunks, into an
 * anonymous memory file (memfd: one shard's bytes at a time), then
 * gf__shard_index_fd on it, named by its display URL. ca_file NULL: the
 * system's CA bundle; s3:// signs with gf__remote_auth_load's keys;
 * settings (NULL: the defaults): the requests' remote_stall_s,
 * remote_retries and remote_deadline_s. Returns as gf_shard_index; a
 * failed fetch is GF_EIO with why = "URL: HTTP 404 Not Found after 0
 * bytes (1 tries)" and the like. */
int gf__remote_shard_index(const char *url, const char *ca_file, const struct gf_settings *settings,
                           const gf__schema *schema, char **text, size_t *len,
                           struct gf_shard_index_info *info, char *why, size_t why_len);

/* bad_label_fails: a key whose .cls is no label, or whose text or bytes
 * member is over GF_FIELD_BYTES_MAX, fails the open (why = "SHARD:
 * offset N: key 'K': member 'K.cls': reason"); else it is skipped,
 * counted and kept in ds->label_skips. schema: the sample's fields (NULL:
 * an image and .cls), kept in ds->schema. */
int gf__dataset_open_shards(gf__dataset *ds, const char *src, int skip_damaged,
                            int bad_label_fails, const gf__schema *schema, char *why,
                            size_t why_len);
/* dataset_shards.c: gf_shard_index's scan and sidecar text for the tar
 * shard of size bytes open at fd (a local file, or the memory file a
 * remote shard was fetched into), named shard in messages; the keys
 * schema takes (NULL: an image and its .cls) get a line. */
int gf__shard_index_fd(int fd, uint64_t size, const char *shard, const gf__schema *schema,
                       char **text, size_t *len, struct gf_shard_index_info *info, char *why,
                       size_t why_len);
/* dataset_shards.c: ds's schema (NULL: the default ds holds) in force:
 * ds->n_var and var_field, its fields beyond image and label. */
void gf__dataset_take_schema(gf__dataset *ds, const gf__schema *schema);
/* dataset_shards.c: gf__builder_label_past over shards' samples: a label
 * past what the set can mean (one .cls or labels= of 2147483646) is
 * GF_EDATASET with why = "SHARD: member 'NAME': label L ...". */
int gf__shard_labels_bounded(const gf__builder *b, char *const *shard_paths, char *why,
                             size_t why_len);

/* dataset_shards.c: the label in a .cls member's n bytes (decimal text,
 * whitespace around it allowed): NULL and *out, or why not. */
const char *gf__parse_cls(const char *t, size_t n, int32_t *out);

/* dataset_shard_sidecar.c: an index sidecar's text (DALI wds2idx's v1.2,
 * with gpufeed's "shard_bytes=", "shard_crc32c=", "labels=" and
 * "member_crc32c=" tokens on its
 * first line)
 * parsed and checked with no file-system access: members in file order,
 * 512-aligned, inside the shard, names a scan would take, at most one
 * image and one .cls a key (and a member besides the .cls), counts
 * bounded by len and the shard's size. One entry a line, in file order. */
typedef struct gf__sidecar_entry {
    const char *name;           /* the sample member's name, into the text
                                   (not NUL-terminated) */
    size_t name_len;
    uint64_t img_off, img_size; /* the sample member's data in the shard: the
                                   image's, or without one the line's first
                                   member but the .cls */
    uint64_t cls_off, cls_size; /* its .cls member's (<= 64 bytes) */
    int32_t label;              /* labels='s value for this line; -1 without labels= */
    int64_t img_crc32c;         /* member_crc32c='s for this line's sample member; -1 without it */
    const char *line;           /* the line's members, into the text, for
                                   gf__sidecar_member_next (not NUL-terminated) */
    size_t line_len;
} gf__sidecar_entry;

/* One member of a sidecar line: its extension, data offset and size, and
 * whole name (pointers into the text, not NUL-terminated). */
typedef struct gf__sidecar_member {
    const char *ext, *name;
    size_t ext_len, name_len;
    uint64_t off, size;
} gf__sidecar_member;
/* The member of e's line after the one *at points past (*at NULL: the
 * first), in the line's order, the order of the shard: 1 and *m, or 0
 * past the last. Only on a line gf__sidecar_parse checked. */
int gf__sidecar_member_next(const gf__sidecar_entry *e, const char **at, gf__sidecar_member *m);

typedef struct gf__sidecar {
    gf__sidecar_entry *e; /* n of them; gf__sidecar_free */
    size_t n;
    int64_t shard_bytes;  /* the recorded size (shard_bytes=), -1 if none */
    int64_t shard_crc32c; /* the whole shard's CRC32C (shard_crc32c=), -1 if none */
    int labelled;         /* 1: labels= gave every entry's label */
} gf__sidecar;

#define GF__SIDECAR_SIZE_UNKNOWN UINT64_MAX
/* shard_bytes: the shard's size, or GF__SIDECAR_SIZE_UNKNOWN (then a
 * recorded shard_bytes= bounds the members, else nothing does and the
 * caller's reads must). name: what messages call the sidecar. Returns 0
 * (*out filled: entries point into text), 2 (it does not match: why =
 * "NAME: line N: reason" or "NAME: reason"; *out empty) or GF_ENOMEM. A
 * DALI-written sidecar has no labels: the caller reads each .cls. */
int gf__sidecar_parse(const char *text, size_t len, uint64_t shard_bytes, const char *name,
                      gf__sidecar *out, char *why, size_t why_len);
void gf__sidecar_free(gf__sidecar *sc);
/* dataset_shards.c: shard k's samples from its parsed sidecar sc into b
 * (b->n_var ds->n_var), by the very rule the scan of a shard's headers
 * groups members by: each line one key, its members as ds's schema takes
 * them (alternatives, caps, an image-less schema's first field standing
 * for the sample), a key lacking one skipped, counted and warned of in ds
 * as a scan does; its label labels='s (-1 without). A sample whose member
 * is its line's image takes its member_crc32c=. path names the shard (its
 * base name starts the arena's names); *max_label is raised. 0,
 * GF_EDATASET (bad_label_fails and a key a scan fails on; why) or
 * GF_ENOMEM. */
int gf__shard_sidecar_samples(gf__dataset *ds, gf__builder *b, uint32_t k, const char *path,
                              const gf__sidecar *sc, int bad_label_fails, int32_t *max_label,
                              char *why, size_t why_len);

/* dataset_shard_sidecar.c: a local shard's index sidecar (the .tar's name
 * with .idx: DALI wds2idx's v1.2 text), around the scan of the shard's
 * headers, which always gives the index. gf__shard_sidecar_load reads
 * and parses it: 0 (*s holds it), 1 (no sidecar), 2 (one that cannot be
 * taken: its size, mtime or text; why = "PATH: line N: reason") or
 * GF_ENOMEM. gf__shard_sidecar_match then takes it only if the samples
 * its lines give (want: gf__shard_sidecar_samples under the same schema)
 * are exactly those the scan added, b's [first, b->n) (whose arena names
 * start with prefix_len bytes of "SHARD.tar:"): the same members (name,
 * data offset, size; each field's too) in the same order, with the same
 * labels if it gives labels=; want's member CRCs (or -1) then go into
 * b->dcrc. Returns 0 or 2 (why names the first sample that differs).
 * gf__shard_sidecar_free either way. */
typedef struct gf__shard_sidecar {
    char *path, *text; /* the sidecar's path, its text (the entries point into it) */
    gf__sidecar sc;
} gf__shard_sidecar;
int gf__shard_sidecar_load(int root_fd, const char *shard_path, const struct stat *shard_st,
                           gf__shard_sidecar *s, char *why, size_t why_len);
int gf__shard_sidecar_match(gf__shard_sidecar *s, gf__builder *b, size_t first,
                            const gf__builder *want, size_t prefix_len, char *why,
                            size_t why_len);
void gf__shard_sidecar_free(gf__shard_sidecar *s);

/* dataset_shard_classes.c: classes.txt beside first_shard as the class
 * names (and n_classes) when it names every label the shards use.
 * Returns 0 (taken), 1 (no such file), 2 (one that cannot be taken, why =
 * "PATH: reason"; ds unchanged) or GF_ENOMEM. */
int gf__shard_classes_read(gf__dataset *ds, const char *first_shard, char *why, size_t why_len);

/* dataset_shards.c: the damaged shards as gf_damaged_shards() hands them
 * out: the first min(max, n) in shard order into out (sample -1, the code, path = the
 * shard's path, reason = "offset N: reason; K members kept, L lost");
 * returns how many there are (INT_MAX at most). */
int gf__dataset_damage(const gf__dataset *ds, gf_sample_error *out, int max);
/* Entry i (< n_damage) of that list. */
void gf__dataset_damage_entry(const gf__dataset *ds, size_t i, gf_sample_error *e);

#endif
