/* The sample schema (fields.c): which members of a WebDataset key make a
 * sample and what each one is. A field is named as WebDataset names
 * members, by the extension after the key ("jpg", "seg.png",
 * "latent.npy"), with alternatives as in its to_tuple ("jpg;png": the
 * first of them the key has) and an optional kind ("seg.png:mask"). The
 * kinds are one table (fields.c's kinds[]): a new kind is its row and
 * the stage that decodes it. The image extensions are here too. A leaf:
 * string work on the caller's thread. */
#ifndef GF_FIELDS_H
#define GF_FIELDS_H

#include "gpufeed.h" /* gf_field_kind, gf_extensions */

#include <stddef.h>
#include <stdint.h>

enum {
    GF__FIELDS_MAX = 8,      /* fields in a schema */
    GF__FIELD_ALTS_MAX = 4,  /* alternatives of one field */
    GF__FIELD_EXT_MAX = 31,  /* bytes of one extension */
};

typedef struct gf__field {
    char ext[GF__FIELD_ALTS_MAX][GF__FIELD_EXT_MAX + 1]; /* lower case */
    int n_ext;           /* 0: any image extension (the default schema's) */
    gf_field_kind kind;
} gf__field;

/* How a text, bytes, array, mask or boxes field's samples lie in a batch
 * slot (sample_fields.c decides it at open): each sample's region, and
 * the element type and per-sample shape gf_field reports. */
typedef struct gf__field_layout {
    size_t region;   /* bytes: the most one sample's member takes */
    size_t tensor_at; /* arrays, masks: their batch tensor's offset in the
                         slot's block of them */
    gf_dtype dtype;
    int ndim;        /* a sample's dimensions (the batch's not counted) */
    int64_t shape[GF_FIELD_DIMS_MAX - 1];
    size_t npy_header; /* arrays: the first sample's header bytes (0: none) */
} gf__field_layout;

/* A field's name as gf_field gives it: its alternatives joined by ';'
 * ("jpg;png"), "image" for the default's image field. */
typedef char gf__field_name[GF__FIELD_ALTS_MAX * (GF__FIELD_EXT_MAX + 1)];

typedef struct gf__schema {
    gf__field field[GF__FIELDS_MAX];
    gf__field_name name[GF__FIELDS_MAX];
    int n;
    int image; /* the first image field, the sample's geometry; -1: none */
    int label; /* the label field; -1: none */
} gf__schema;

/* spec: fields separated by ',', each "EXT[;EXT...][:KIND]"; spaces
 * around the parts are ignored. Without KIND an extension implies it by
 * its last dot-separated part (fields.c's kinds[]; anything else is
 * bytes; .npy implies array, mask and boxes only when named), and a
 * field's alternatives must imply the same kind. NULL or
 * "" is the default schema: an image of any extension an ImageFolder
 * may hold (the first in the archive), and "cls". Returns 0, or GF_EINVAL with
 * why naming the field and what is wrong (an empty field or extension,
 * an unknown kind, too many fields, alternatives or bytes, an extension
 * in two fields, two label fields). */
int gf__schema_parse(const char *spec, gf__schema *s, char *why, size_t why_len);

/* settings.fields as the loader takes it: 0 and *use = NULL when unset
 * (the default: gf__dataset_opts.schema NULL), else *use = s parsed and
 * checked for what the loader reads: at most one image field; none (a
 * latent loader: no decode, no pixels) only without masks or boxes, which
 * move with it. GF_EINVAL with why = "fields: ...". */
int gf__schema_of_settings(const gf_settings *settings, gf__schema *s, const gf__schema **use,
                           char *why, size_t why_len);

/* The fields beyond image and label (text, bytes, array, mask, boxes):
 * their schema indexes, in order, into var_field; returns how many. */
int gf__schema_var_fields(const gf__schema *s, int var_field[GF__FIELDS_MAX]);

/* The field a member's extension ext[0, len) belongs to (compared
 * without case, as the indexers compare extensions), and in *alt which
 * of its alternatives; -1 if none. */
int gf__schema_match(const gf__schema *s, const char *ext, size_t len, int *alt);

/* spec written back as fields "jpg;png:image,cls:label" into out (at
 * least 1 byte); returns the length it needed, as snprintf. */
size_t gf__schema_format(const gf__schema *s, char *out, size_t out_len);

/* 1 if ext[0, len) (after the dot) is an image extension, any case: one
 * of GF_EXT_ALL's (tar shards take these). */
int gf__is_image_suffix(const char *ext, size_t len);
/* For an ImageFolder file named ext[0, len) after its last dot: -1 if
 * `which` takes it, else its GF_SKIPPED_* entry. */
int gf__folder_skip_kind(const char *ext, size_t len, gf_extensions which);

#endif
