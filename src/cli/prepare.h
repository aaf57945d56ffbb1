/*
 * gpufeed prepare's parts, shared by its files (prepare.c says what the
 * command writes):
 *
 *   prepare.c           the command: options, usage, the run's steps
 *   prepare_encode.c    one source sample to its image member: decode
 *                       (fitted), pick the format, encode (a worker's)
 *   prepare_fields.c    its other fields (--fields): masks and boxes
 *                       fitted with the image, the rest copied
 *   prepare_keys.c      the safe, unique member key of each sample
 *   prepare_write.c     the workers, the reorder window, the shards with
 *                       their index sidecars, the progress bar
 *   prepare_journal.c   the journal a rerun resumes from: read, checked,
 *                       appended
 *   prepare_manifest.c  the source's identity, classes.txt, manifest.json
 *   prepare_plan.c      --plan: a sample of SRC prepared each way, measured
 *   prepare_plan_report.c  --plan's table, recommendation and JSON
 */
#ifndef GF_CLI_PREPARE_H
#define GF_CLI_PREPARE_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "gpufeed.h"

/* --format's choices, in its order. */
enum { PREP_JPEG = 0, PREP_RAW = 1, PREP_AUTO = 2 };
/* What a member holds (a summary's counts): re-encoded, raw, or the
 * source's bytes as they were (--keep-original). */
enum { PREP_OUT_JPEG = 0, PREP_OUT_RAW = 1, PREP_OUT_ORIGINAL = 2, PREP_OUT_KINDS = 3 };

typedef struct prep_opts {
    const char *src, *out, *name;
    int max_side;            /* 0: sizes kept */
    int quality;             /* 1..100 */
    int subsampling;         /* index into prep_subsampling_names */
    int format;              /* PREP_* */
    uint64_t raw_max_pixels; /* auto: raw when W x H is at most this ... */
    uint64_t raw_max_bytes;  /* ... or, when raw_max_pixels is 0, W x H x C bytes */
    int keep_original;
    uint64_t shard_bytes;    /* a shard's tar size cap (0: by samples) */
    uint64_t shard_samples;  /* samples per shard (0: by bytes) */
    int threads;
    int json;
    /* --plan: no OUT; measure instead of writing. */
    int plan;
    uint64_t plan_samples;   /* how many of SRC's samples to try each way */
    double need_rate;        /* images/s the trainer's compute needs (0: not given) */
    gf_settings s;           /* the index's and the decoder's: data, channels,
                                on_error, strictness, decoder, extensions... */
} prep_opts;

extern const char *const prep_format_names[];      /* "jpeg", "raw", "auto" */
extern const char *const prep_subsampling_names[]; /* "444", "422", "420" */
extern const char *const prep_out_names[];         /* "jpeg", "raw", "original" */

/* ---- prepare_encode.c: any worker thread, one prep_encoder each ---- */

typedef struct prep_encoder prep_encoder;

/* An image's fit: the size it was stored at, and its own. */
typedef struct prep_fit {
    int w, h, src_w, src_h;
} prep_fit;

/* NULL when out of memory, or TurboJPEG fails to start (why says). */
prep_encoder *prep_encoder_new(const prep_opts *o, char *why, size_t why_len);
void prep_encoder_free(prep_encoder *e);

/* One sample's image member from its encoded source bytes: *member (the
 * encoder's, valid until its next call) of *len bytes, with extension
 * *ext ("jpg", "ppm", "pgm") and kind *kind (PREP_OUT_*). Returns 0, or a
 * sample error code with why (the decoder's reason, or the encoder's). */
int prep_encode(prep_encoder *e, const void *src, size_t src_len, const uint8_t **member,
                size_t *len, const char **ext, int *kind, prep_fit *fit, char *why,
                size_t why_len);

/* ---- prepare_fields.c: any worker thread, one prep_fields each ---- */

enum { PREP_FIELDS_MAX = 8 }; /* fields.h's GF__FIELDS_MAX: no schema has more */

/* A field's member as the prepared shard stores it: KEY.<ext>, ext the
 * source's spelling (the index's: valid until it closes). */
typedef struct prep_member {
    const char *ext;
    uint8_t *data;
    size_t len, cap;
} prep_member;

typedef struct prep_fields prep_fields;

/* The fields of ix (gf_index_fields): NULL with why when out of memory. */
prep_fields *prep_fields_new(gf_index *ix, char *why, size_t why_len);
void prep_fields_free(prep_fields *f);
/* A sample's field members (gf_index_read_fields' sample, at, size and
 * ext), its image stored as fit says, into out[0 .. gf_index_fields):
 * masks resized by nearest neighbour and stored as 8-bit PNG, boxes
 * scaled (rows of no area dropped) and stored as .npy of their dtype,
 * arrays (their header checked), text and bytes copied. Returns 0, or the
 * sample's error code with why naming the field ("field 'seg.png': ..."). */
int prep_fields_take(prep_fields *f, const uint8_t *sample, const size_t *at, const size_t *size,
                     const char *const *ext, const prep_fit *fit, prep_member *out, char *why,
                     size_t why_len);

/* ---- prepare_keys.c: the writer's thread ---- */

typedef struct prep_keys prep_keys;

prep_keys *prep_keys_new(void);
void prep_keys_free(prep_keys *k);
/* The key of source sample `path` (gf_index_path's), made safe ([A-Za-z0-9_-],
 * at most 80 bytes) and unique among every key this set made before: keys
 * must be asked for in index order, every index once, so they are the
 * same in every run. Writes it to out (>= 96 bytes). Returns 0 or -1 (no
 * memory). */
int prep_key_next(prep_keys *k, const char *path, int is_shards, uint64_t index, char *out,
                  size_t out_len);

/* ---- prepare_write.c: the command's thread (and the workers it starts) ---- */

/* A bad source sample, as the manifest and the summary list it. */
typedef struct prep_bad {
    uint64_t index;
    int code;
    char *reason; /* "path: reason" */
} prep_bad;

/* A finished shard, as the journal and the manifest record it. */
typedef struct prep_shard {
    uint64_t first, next;   /* source indices [first, next) went into it */
    uint64_t samples, bytes;
    uint64_t kinds[PREP_OUT_KINDS];
    char sha256[65];
} prep_shard;

typedef struct prep_result {
    prep_shard *shards;
    size_t n_shards;
    prep_bad *bad;
    size_t n_bad;
    uint64_t samples;           /* written, all shards */
    uint64_t resumed_shards;    /* taken from a previous run's journal */
    uint64_t resumed_at;        /* the source index this run started at */
    uint64_t samples_this_run;
    double seconds;
    int threads;
    int failed;                 /* on_error = fail stopped it: bad[n_bad - 1] says why */
} prep_result;

/* Writes (or finishes) OUT's shards from source index ix's samples.
 * fingerprint: the settings and source identity; a journal under another
 * is refused. Returns 0 (r filled, also when on_error = fail stopped it:
 * r->failed), or -1 with the message printed. */
int prep_write(const prep_opts *o, gf_index *ix, const char *fingerprint, prep_result *r);

/* ---- prepare_journal.c: the command's thread ---- */

#define PREP_JOURNAL ".prepare-journal" /* under OUT */
#define PREP_JOURNAL_MAGIC "gpufeed-prepare-journal 1"

/* Reads OUT's journal at path into r (its shards, and the bad samples
 * before the last record), from which the run goes on at *start. Returns
 * 1 if it says the run is done, 0 if none or not done, -1 with the
 * message printed. */
int prep_journal_load(const prep_opts *o, const char *path, const char *fingerprint,
                      uint64_t total, prep_result *r, uint64_t *start);
/* OUT's journal (path) opened for appending, its head written if it is
 * new. NULL with the message printed. */
FILE *prep_journal_open(const char *path, const char *fingerprint);
/* Appends r's bad samples from `from` on, then `line` (prep_shard_line's
 * or "done N"), and syncs: 0 or -1 with errno. */
int prep_journal_record(FILE *j, const prep_result *r, size_t from, const char *line);
/* A finished shard's journal line, into line. */
void prep_shard_line(char *line, size_t n, const prep_shard *sh);
/* r's bad samples and shards, one more each: 0 or -1 out of memory. */
int prep_add_bad(prep_result *r, uint64_t index, int code, const char *why);
int prep_add_shard(prep_result *r, const prep_shard *s);
void prep_result_free(prep_result *r);


/* ---- prepare_files.c: names and files, any thread ---- */

/* OUT/<name>-NNNNNN.tar (ext "tar" or "idx"), into buf. */
void prep_shard_path(const prep_opts *o, uint64_t k, const char *ext, char *buf, size_t n);
/* A file made afresh for writing ("wb"): whatever has that name (a killed
 * run's partial; a link planted there) is unlinked first, and O_EXCL |
 * O_NOFOLLOW refuse one made in between: nothing outside OUT is ever
 * written through it. NULL with errno set. */
FILE *prep_create(const char *path);
/* s with %XX for bytes outside printable ASCII, spaces and '%': a token
 * of one line (the fingerprint, the journal's reasons). */
void prep_put_escaped(FILE *f, const char *s);
/* Flushes f and syncs it to disk: 0 or -1 with errno. */
int prep_sync(FILE *f);

/* ---- prepare_manifest.c: the command's thread ---- */

/* The settings and the source's identity as one line of text (the
 * journal's fingerprint and the manifest's record): malloc'd, or NULL
 * with the message printed. */
char *prep_fingerprint(const prep_opts *o, gf_index *ix);
/* OUT/classes.txt. Returns 0 or -1 with the message printed. */
int prep_write_classes(const prep_opts *o, gf_index *ix);
/* OUT/manifest.json (written whole, then renamed into place). Returns 0
 * or -1 with the message printed. */
int prep_write_manifest(const prep_opts *o, gf_index *ix, const prep_result *r);
/* The source's index as the manifest records it (source.index_fnv1a64):
 * FNV-1a 64 over each sample's path and "\nLABEL\n", in index order.
 * verify recomputes it to tell whether a source changed. */
uint64_t prep_index_digest(gf_index *ix);
/* The library settings the fingerprint and the manifest's "settings"
 * record (as gf_settings_get writes them; NULL-terminated): those that
 * change what the source's index holds or how a sample decodes. */
extern const char *const prep_settings_kept[];
/* "bad_samples": [{index, path, error, reason}...], as the summary and the
 * manifest list them. */
struct cli_json;
void prep_put_bad_samples(struct cli_json *j, gf_index *ix, const prep_result *r);

/* ---- prepare_plan.c, prepare_plan_report.c: --plan, the command's thread ---- */

/* The settings a plan compares: the originals, then each max side with
 * JPEG (at --quality, --subsampling) and raw. */
enum { PLAN_SIDES = 4, PLAN_ROWS = 1 + 2 * PLAN_SIDES };
extern const int prep_plan_sides[PLAN_SIDES]; /* 512, 384, 256, 160 */

typedef struct plan_row {
    char name[32];        /* "original", "512 jpeg q90", "512 raw" */
    int max_side;         /* 0: the original */
    int format;           /* PREP_JPEG, PREP_RAW, or -1: the source's bytes as they are */
    uint64_t bytes;       /* the sample's, as prepare stores them (tar headers,
                             padding, .cls, .key, sidecar line; the original: the
                             source's bytes alone) */
    double set_bytes;     /* bytes x set samples / sampled samples */
    double images_per_s;  /* the loader over the prepared sample: median pass */
    double psnr;          /* dB over every crop's values; INFINITY: identical */
    uint64_t sse, values; /* the squared error's sum, and the values it is over */
} plan_row;

typedef struct plan_result {
    plan_row rows[PLAN_ROWS];
    uint64_t set_samples, sampled, good;
    prep_result bad;      /* bad (and n_bad) only: the sampled files left out */
    int threads, batch, passes;
    uint64_t pass_images; /* images a timed pass delivers */
    double seconds;       /* the whole plan */
} plan_result;

/* prepare --plan: measures (prepare_plan.c), then reports. Returns an exit
 * status (CLI_OK, or CLI_USAGE/CLI_FAIL with the message printed). */
int prep_plan(const prep_opts *o);
/* The table and recommendation (text), or the JSON document. */
void prep_plan_report(const prep_opts *o, gf_index *ix, const plan_result *p);

#endif /* GF_CLI_PREPARE_H */
